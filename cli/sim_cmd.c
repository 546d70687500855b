/* tilelab hw | models | sim moe | sim paged-decode | bench sim: the simulator's commands. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/table.h"
#include "../simulator/decode.h"
#include "../simulator/hw.h"
#include "../simulator/model.h"
#include "../simulator/moe.h"
#include "../contract/worklist.h"

static int get_format(const char *s, tl_format *f)
{
    *f = TL_FMT_TABLE;
    return s ? tl_parse_format(s, f) : 0;
}

/* ---- tilelab hw ---- */

static const char hw_usage[] =
    "usage: tilelab hw list [--format table|csv|json]\n"
    "       tilelab hw show NAME|FILE[,OVERLAY.json...] [--format table|csv|json]\n"
    "A preset name (mi355x, mi300x, h200), a JSON file of the same shape, or a base followed by\n"
    "overlay files (e.g. h200,bench/results/h200.json) merged over it key by key.\n";

static void ceiling_cells(tl_table *t, tl_ceiling c)
{
    if (c.datasheet > 0) tl_table_num(t, c.datasheet);
    else tl_table_str(t, "");
    if (c.measured > 0) tl_table_num(t, c.measured);
    else tl_table_str(t, "");
}

static int hw_list(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, hw_usage)) return 0;
    const char *fmt_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "hw list", NULL, 0, NULL) || get_format(fmt_s, &fmt)) return TL_EUSAGE;
    tl_table *t = tl_table_new("name,arch,cus,xcds,clock_mhz,hbm_gb,hbm_read_gbps,hbm_read_measured,"
                               "bf16_tflops,bf16_measured,fp8_tflops,fp8_measured,fp4_tflops,fp4_measured");
    for (const char *const *n = tl_hw_list(); *n; n++) {
        tl_hw hw;
        if (tl_hw_load(*n, &hw)) {
            tl_table_free(t);
            return TL_EFAIL; /* an embedded preset that does not load is a build error */
        }
        tl_table_row(t);
        tl_table_str(t, hw.name);
        tl_table_str(t, hw.arch);
        tl_table_int(t, hw.cus);
        tl_table_int(t, hw.xcds);
        tl_table_num(t, hw.clock_mhz);
        tl_table_num(t, hw.hbm_gb);
        ceiling_cells(t, hw.ceilings.hbm_read_gbps);
        ceiling_cells(t, hw.ceilings.bf16_tflops);
        ceiling_cells(t, hw.ceilings.fp8_tflops);
        ceiling_cells(t, hw.ceilings.fp4_tflops);
    }
    tl_table_print(t, fmt, "hardware presets (GB/s, TFLOP/s; datasheet and measured)", stdout);
    tl_table_free(t);
    return 0;
}

static void kv(tl_table *t, const char *k, const char *v)
{
    tl_table_row(t);
    tl_table_str(t, k);
    tl_table_str(t, v);
}

static void kvnum(tl_table *t, const char *k, double v)
{
    char b[64];
    snprintf(b, sizeof b, "%g", v);
    kv(t, k, b);
}

static void kvceil(tl_table *t, const char *k, tl_ceiling c)
{
    if (c.datasheet <= 0 && c.measured <= 0) return;
    char b[128] = "";
    if (c.datasheet > 0) snprintf(b, sizeof b, "datasheet %g", c.datasheet);
    if (c.measured > 0)
        snprintf(b + strlen(b), sizeof b - strlen(b), "%smeasured %g", b[0] ? ", " : "", c.measured);
    kv(t, k, b);
}

static int hw_show(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, hw_usage)) return 0;
    const char *fmt_s = NULL, *pos[1];
    int npos = 0;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "hw show", pos, 1, &npos) || get_format(fmt_s, &fmt)) return TL_EUSAGE;
    if (npos != 1) return tl_error(TL_EUSAGE, "hw show", "needs one NAME or FILE (tilelab hw list)");
    tl_hw hw;
    if (tl_hw_load(pos[0], &hw)) return TL_EUSAGE;
    tl_table *p = tl_table_new("field,value");
    kv(p, "name", hw.name);
    if (hw.description[0]) kv(p, "description", hw.description);
    kv(p, "arch", hw.arch);
    kvnum(p, "cus", hw.cus);
    kvnum(p, "xcds", hw.xcds);
    kvnum(p, "clock_mhz", hw.clock_mhz);
    kvnum(p, "wave_size", hw.wave_size);
    kvnum(p, "matrix_cores_per_cu", hw.matrix_cores_per_cu);
    kvnum(p, "lds_kib", hw.lds_kib);
    kvnum(p, "l2_mib_per_xcd", hw.l2_mib_per_xcd);
    kvnum(p, "llc_mib", hw.llc_mib);
    kvnum(p, "hbm_gb", hw.hbm_gb);
    kvnum(p, "launch_us", hw.launch_us);
    kvnum(p, "item_fixed_us", hw.item_fixed_us);
    kvnum(p, "hbm_per_cu_gbps", hw.hbm_per_cu_gbps);
    kvnum(p, "l2_per_cu_gbps", hw.l2_per_cu_gbps);
    kvnum(p, "hbm_latency_us", hw.hbm_latency_us);
    kvnum(p, "load_chain_us", hw.load_chain_us);
    kvnum(p, "next_kernel_us", hw.next_kernel_us);
    kvnum(p, "flush_dirty_mb", hw.flush_dirty_mb);
    kvceil(p, "hbm_read_gbps", hw.ceilings.hbm_read_gbps);
    kvceil(p, "hbm_copy_gbps", hw.ceilings.hbm_copy_gbps);
    kvceil(p, "bf16_tflops", hw.ceilings.bf16_tflops);
    kvceil(p, "fp8_tflops", hw.ceilings.fp8_tflops);
    kvceil(p, "fp6_tflops", hw.ceilings.fp6_tflops);
    kvceil(p, "fp4_tflops", hw.ceilings.fp4_tflops);
    if (hw.device[0]) kv(p, "device", hw.device);
    if (hw.date[0]) kv(p, "date", hw.date);
    if (hw.source[0] && fmt != TL_FMT_TABLE) kv(p, "source", hw.source);
    tl_table *in = tl_table_new("instruction,m,n,k,a,b,cycles,peak_tflops");
    for (int i = 0; i < hw.n_instr; i++) {
        const tl_instr *x = &hw.instr[i];
        tl_table_row(in);
        tl_table_str(in, x->name);
        tl_table_int(in, x->m);
        tl_table_int(in, x->n);
        tl_table_int(in, x->k);
        tl_table_str(in, x->a);
        tl_table_str(in, x->b);
        tl_table_int(in, x->cycles);
        tl_table_numf(in, "%.1f", tl_hw_instr_tflops(&hw, x));
    }
    if (fmt == TL_FMT_JSON) {
        fputs("{\"properties\": ", stdout);
        tl_table_print(p, fmt, NULL, stdout);
        fputs(", \"matrix_instructions\": ", stdout);
        tl_table_print(in, fmt, NULL, stdout);
        fputs("}\n", stdout);
    } else {
        char title[160];
        snprintf(title, sizeof title, "%s", hw.name);
        tl_table_print(p, fmt, title, stdout);
        if (fmt == TL_FMT_TABLE && hw.source[0]) printf("source: %s\n", hw.source);
        fputs("\n", stdout);
        tl_table_print(in, fmt, "matrix instructions (peak = 2mnk x matrix cores x CUs x clock / cycles)", stdout);
    }
    tl_table_free(p);
    tl_table_free(in);
    return 0;
}

static const tl_command hw_table[] = {
    {"list", hw_list, "the hardware presets", ""},
    {"show", hw_show, "one preset or file with its matrix instructions", ""},
    {NULL, NULL, NULL, NULL},
};

int tl_cmd_hw(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(hw_usage, stdout);
        return 0;
    }
    return tl_dispatch(hw_table, "hw", argc, argv);
}

/* ---- tilelab models ---- */

static const char models_usage[] =
    "usage: tilelab models [NAME|CONFIG.json ...] [--format table|csv|json]\n"
    "Lists the model presets, or the given presets / config.json files as the simulator reads them.\n"
    "Dense models run in `sim moe` as one expert of width intermediate_size that every token uses.\n";

int tl_cmd_models(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, models_usage)) return 0;
    const char *fmt_s = NULL, *pos[32];
    int npos = 0;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "models", pos, 32, &npos) || get_format(fmt_s, &fmt)) return TL_EUSAGE;
    const char *const *names = tl_model_list();
    if (npos == 0)
        for (; names[npos] && npos < 32; npos++) pos[npos] = names[npos];
    tl_table *t = tl_table_new("name,hidden,experts,top_k,expert_width,shared,layers,moe_layers,dense_width,"
                               "heads,kv_heads,index_heads,index_head_dim,index_topk,source");
    for (int i = 0; i < npos; i++) {
        tl_model m;
        if (tl_model_load(pos[i], &m)) {
            tl_table_free(t);
            return TL_EUSAGE;
        }
        tl_table_row(t);
        tl_table_str(t, m.name);
        tl_table_int(t, m.hidden);
        tl_table_int(t, m.n_experts);
        tl_table_int(t, m.top_k);
        tl_table_int(t, m.moe_width);
        tl_table_int(t, m.n_shared);
        tl_table_int(t, m.n_layers);
        tl_table_int(t, m.moe_layers);
        tl_table_int(t, m.dense_width);
        tl_table_int(t, m.n_heads);
        tl_table_int(t, m.n_kv_heads);
        tl_table_int(t, m.index_n_heads);
        tl_table_int(t, m.index_head_dim);
        tl_table_int(t, m.index_topk);
        tl_table_str(t, fmt == TL_FMT_TABLE ? "" : m.source);
    }
    tl_table_print(t, fmt, "models (config.json fields; 0 = absent)", stdout);
    tl_table_free(t);
    return 0;
}

/* ---- tilelab sim paged-decode ---- */

static const char decode_usage[] =
    "usage: tilelab sim paged-decode [--hw mi355x] [--kv-dtype bf16|fp8] --gqa G --batch B --seq L\n"
    "         --kv-heads H [--head-dim 128] [--block 16] [--splits 0] [--format table|csv|json]\n"
    "Split-KV paged decode attention (one query token per sequence): FLOPs, HBM bytes, intensity,\n"
    "time and limiter (see simulator/decode.h). --splits 0 chooses enough chunks to fill the GPU.\n";

static int sim_decode(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, decode_usage)) return 0;
    const char *hw_s = "mi355x", *kv_s = "bf16", *gqa_s = NULL, *b_s = NULL, *l_s = NULL, *h_s = NULL,
               *d_s = "128", *blk_s = "16", *sp_s = "0", *fmt_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s), TL_OPT_V("--kv-dtype", &kv_s), TL_OPT_V("--gqa", &gqa_s),
                     TL_OPT_V("--batch", &b_s), TL_OPT_V("--seq", &l_s), TL_OPT_V("--kv-heads", &h_s),
                     TL_OPT_V("--head-dim", &d_s), TL_OPT_V("--block", &blk_s), TL_OPT_V("--splits", &sp_s),
                     TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "sim paged-decode", NULL, 0, NULL) || get_format(fmt_s, &fmt)) return TL_EUSAGE;
    if (!gqa_s || !b_s || !l_s || !h_s)
        return tl_error(TL_EUSAGE, "sim paged-decode", "needs --gqa, --batch, --seq and --kv-heads");
    tl_decode_problem p;
    memset(&p, 0, sizeof p);
    if (strcmp(kv_s, "bf16") == 0) p.kv_fp8 = 0;
    else if (strcmp(kv_s, "fp8") == 0) p.kv_fp8 = 1;
    else return tl_error(TL_EUSAGE, "--kv-dtype", "'%s' is not bf16 or fp8", kv_s);
    if (tl_parse_int(gqa_s, 1, 1024, "--gqa", &p.gqa) || tl_parse_int(b_s, 1, 1 << 20, "--batch", &p.batch) ||
        tl_parse_int(l_s, 1, 1 << 30, "--seq", &p.seq) || tl_parse_int(h_s, 1, 4096, "--kv-heads", &p.kv_heads) ||
        tl_parse_int(d_s, 1, 1024, "--head-dim", &p.head_dim) || tl_parse_int(blk_s, 1, 4096, "--block", &p.block) ||
        tl_parse_int(sp_s, 0, 65536, "--splits", &p.splits))
        return TL_EUSAGE;
    tl_hw hw;
    if (tl_hw_load(hw_s, &hw)) return TL_EUSAGE;
    p.hw = &hw;
    tl_decode_result r;
    if (tl_decode_sim(&p, &r)) return TL_EUSAGE;
    tl_table *t = tl_table_new("hw,kv_dtype,batch,seq,kv_heads,gqa,head_dim,splits,flops,hbm_bytes,intensity,"
                               "time_us,limiter,memory_us,compute_us,fixed_us,tflops,gbps");
    tl_table_row(t);
    tl_table_str(t, hw.name);
    tl_table_str(t, kv_s);
    tl_table_int(t, p.batch);
    tl_table_int(t, p.seq);
    tl_table_int(t, p.kv_heads);
    tl_table_int(t, p.gqa);
    tl_table_int(t, p.head_dim);
    tl_table_int(t, r.splits);
    tl_table_num(t, r.flops);
    tl_table_num(t, r.hbm_bytes);
    tl_table_numf(t, "%.3g", r.intensity);
    tl_table_numf(t, "%.2f", r.time_us);
    tl_table_str(t, r.limiter);
    tl_table_numf(t, "%.2f", r.memory_us);
    tl_table_numf(t, "%.2f", r.compute_us);
    tl_table_numf(t, "%.2f", r.fixed_us);
    tl_table_numf(t, "%.1f", r.flops / (r.time_us * 1e6));
    tl_table_numf(t, "%.1f", r.hbm_bytes / (r.time_us * 1e3));
    char title[200];
    snprintf(title, sizeof title, "paged decode attention, simulated on preset %s", hw.name);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    return 0;
}

static const tl_command sim_table[] = {
    {"paged-decode", sim_decode, "split-KV paged decode attention: bytes, intensity, time", ""},
    {NULL, NULL, NULL, NULL},
};

/* `sim OP` for the ops of the op table (their model), else the models above that are not ops yet */
int tl_cmd_sim(int argc, char **argv) { return tl_dispatch_ops(sim_table, "sim", tl_sim_op, argc, argv); }

/* ---- tilelab bench sim ---- */

static const char bench_usage[] =
    "usage: tilelab bench sim [--format table|csv|json]\n"
    "Runs the MoE model over every hardware preset x model preset x dtype x tokens 1, 2, 4 .. 8192 x\n"
    "both stages (balanced routing, tile_m 16) on one core and reports the time.\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int tl_bench_sim(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, bench_usage)) return 0;
    const char *fmt_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "bench sim", NULL, 0, NULL) || get_format(fmt_s, &fmt)) return TL_EUSAGE;
    const char *const *hws = tl_hw_list(), *const *models = tl_model_list();
    long runs = 0;
    double checksum = 0;
    double t0 = now_s();
    for (int h = 0; hws[h]; h++) {
        tl_hw hw;
        if (tl_hw_load(hws[h], &hw)) return TL_EFAIL;
        for (int m = 0; models[m]; m++) {
            tl_model model;
            if (tl_model_load(models[m], &model)) return TL_EFAIL;
            for (int d = 0; d < TL_MOE_NDTYPES; d++)
                for (int tok = 1; tok <= 8192; tok *= 2)
                    for (int s = 1; s <= 2; s++) {
                        tl_moe_problem p = {.hw = &hw, .model = &model, .dtype = (tl_moe_dtype)d, .tokens = tok,
                                            .stage = s, .seed = 1, .tile_m = 16, .tile_n = 128, .tp = 1};
                        tl_moe_result r;
                        if (tl_moe_sim(&p, &r)) return TL_EFAIL;
                        checksum += r.time_us;
                        tl_moe_result_free(&r);
                        runs++;
                    }
        }
    }
    double secs = now_s() - t0;
    tl_table *t = tl_table_new("hw_presets,models,dtypes,token_counts,stages,runs,seconds,us_per_run,sum_time_us");
    int nh = 0, nm = 0;
    while (hws[nh]) nh++;
    while (models[nm]) nm++;
    tl_table_row(t);
    tl_table_int(t, nh);
    tl_table_int(t, nm);
    tl_table_int(t, TL_MOE_NDTYPES);
    tl_table_int(t, 14);
    tl_table_int(t, 2);
    tl_table_int(t, runs);
    tl_table_numf(t, "%.3f", secs);
    tl_table_numf(t, "%.1f", secs * 1e6 / (double)runs);
    tl_table_numf(t, "%.6g", checksum);
    tl_table_print(t, fmt, "bench sim: the MoE model over every preset x model x dtype x tokens x stage (one core)",
                   stdout);
    tl_table_free(t);
    return 0;
}
