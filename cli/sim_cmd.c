/* tilelab sim moe | sim paged-decode | bench sim: the simulator's commands. */
#include "cli.h"
#include "../ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/table.h"
#include "../simulator/amd_code.h"
#include "../simulator/decode.h"
#include "../simulator/hw.h"
#include "../simulator/model.h"
#include "../simulator/moe.h"
#include "../contract/worklist.h"

/* ---- tilelab sim paged-decode ---- */

static const char decode_usage[] =
    "usage: tilelab sim paged-decode [--hw mi355x] [--kv-dtype bf16|fp8] --gqa G --batch B --seq L\n"
    "         --kv-heads H [--head-dim 128] [--block 16] [--splits 0] [--format table|csv|json]\n"
    "Split-KV paged decode attention (one query token per sequence): FLOPs, HBM bytes, intensity,\n"
    "time and limiter (see simulator/decode.h). --splits 0 chooses enough chunks to fill the GPU.\n"
    "A KV cache larger than the preset's HBM (hbm_gb) is refused.\n";

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
    if (tl_opts_parse(argc, argv, opts, "sim paged-decode", NULL, 0, NULL) || tl_parse_format(fmt_s, &fmt)) return TL_EUSAGE;
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

/* ---- tilelab sim amd-code ---- */

static const char amd_code_usage[] =
    "usage: tilelab sim amd-code [--hw mi355x|mi300x|FILE] [--kernel TEXT] [--format table|csv|json]\n"
    "The AMD kernels' costs as the build read them from their own assembly (simulator/amd_code.h;\n"
    "gfx950 for mi355x, gfx942 for mi300x): per kernel instance (--kernel: those whose mangled name\n"
    "holds TEXT) its VGPR file, AGPRs, SGPRs, static LDS, scratch and the waves a SIMD its registers\n"
    "allow; its hot loop's instructions by class; the clocks one wave-iteration takes on the preset's\n"
    "SIMD by pipe (matrix: the preset's MFMA cycles; valu: 4 a VALU, 16 a transcendental; lds; issue:\n"
    "one instruction a 4-clock cadence), one_wave = the largest (a wave alone on its SIMD), and\n"
    "llvm-mca-22's clocks for the same loop (mca: cycles an iteration over 100; mca_rthr: its Block\n"
    "RThroughput) with mca / one_wave: where LLVM's scheduling model and this one disagree.\n";

static void amd_mfma_cell(tl_table *t, const tl_amd_loop *l)
{
    char buf[256] = "";
    for (int i = 0; i < l->n_mfma; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof buf - n, "%s%d x %s%s%s", i ? " + " : "", l->mfma[i].count, l->mfma[i].name,
                 l->mfma[i].format[0] ? " " : "", l->mfma[i].format);
    }
    tl_table_str(t, buf);
}

static int sim_amd_code(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, amd_code_usage)) return 0;
    const char *hw_s = "mi355x", *kernel_s = NULL, *fmt_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s), TL_OPT_V("--kernel", &kernel_s), TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "sim amd-code", NULL, 0, NULL) || tl_parse_format(fmt_s, &fmt)) return TL_EUSAGE;
    tl_hw hw;
    if (tl_hw_load(hw_s, &hw)) return TL_EUSAGE;
    if (strncmp(hw.arch, "gfx", 3) != 0)
        return tl_error(TL_EUSAGE, "sim amd-code", "preset %s is %s: the table holds gfx950 and gfx942 kernels", hw.name, hw.arch);
    tl_table *t = tl_table_new("file,kernel,vgpr_file,agpr,sgpr,lds,scratch,simd_waves,loop_instrs,mfma,valu,trans,salu,"
                               "lds_ops,lds_bytes,vmem_loads,matrix_clk,valu_clk,lds_clk,issue_clk,one_wave_clk,bound,"
                               "mca_clk,mca_rthr,mca_over_one_wave");
    int rows = 0;
    for (int i = 0; i < tl_amd_code_count; i++) {
        const tl_amd_kernel *k = &tl_amd_code_table[i];
        if (strcmp(k->arch, hw.arch) != 0 || (kernel_s && !strstr(k->name, kernel_s)) || !k->loop.found) continue;
        tl_amd_loop_cost c;
        if (tl_amd_loop_cost_of(&hw, k->name, 1, 0.0, 0, &c)) {
            tl_table_free(t);
            return TL_EUSAGE;
        }
        const double one = fmax(fmax(c.matrix_cycles, c.valu_cycles), fmax(c.lds_cycles, c.issue_cycles));
        const char *bound = one == c.matrix_cycles ? "matrix" : one == c.valu_cycles ? "valu" : one == c.lds_cycles ? "lds" : "issue";
        const int waves = c.waves_by_vgpr < c.waves_by_sgpr ? c.waves_by_vgpr : c.waves_by_sgpr;
        tl_table_row(t);
        tl_table_str(t, k->file);
        tl_table_str(t, k->name);
        tl_table_int(t, k->vgpr_file);
        tl_table_int(t, k->agpr);
        tl_table_int(t, k->sgpr);
        tl_table_int(t, k->lds);
        tl_table_int(t, k->scratch);
        tl_table_int(t, waves < hw.waves_per_simd ? waves : hw.waves_per_simd);
        tl_table_int(t, k->loop.instrs);
        amd_mfma_cell(t, &k->loop);
        tl_table_int(t, k->loop.valu);
        tl_table_int(t, k->loop.trans);
        tl_table_int(t, k->loop.salu);
        tl_table_int(t, k->loop.lds);
        tl_table_int(t, k->loop.lds_read_bytes + k->loop.lds_write_bytes);
        tl_table_int(t, k->loop.vmem_load);
        tl_table_numf(t, "%.0f", c.matrix_cycles);
        tl_table_numf(t, "%.0f", c.valu_cycles);
        tl_table_numf(t, "%.0f", c.lds_cycles);
        tl_table_numf(t, "%.0f", c.issue_cycles);
        tl_table_numf(t, "%.0f", one);
        tl_table_str(t, bound);
        tl_table_numf(t, "%.1f", k->loop.mca_cycles);
        tl_table_numf(t, "%.1f", k->loop.mca_rthroughput);
        tl_table_numf(t, "%.2f", one > 0 ? k->loop.mca_cycles / one : 0.0);
        rows++;
    }
    char title[200];
    snprintf(title, sizeof title, "AMD kernels' hot loops from their %s assembly (the build's), clocks on preset %s",
             hw.arch, hw.name);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    if (rows == 0 && kernel_s) return tl_error(TL_EUSAGE, "--kernel", "no %s kernel with a loop holds '%s'", hw.arch, kernel_s);
    return 0;
}

static const tl_command sim_table[] = {
    {"amd-code", sim_amd_code, "AMD kernels' registers and hot loops from their assembly, beside llvm-mca", ""},
    {"paged-decode", sim_decode, "split-KV paged decode attention: bytes, intensity, time", ""},
    {"dispatch", tl_quant_sim_dispatch, "MoE dispatch payload: bytes a token by format, all-gather time", ""},
    {"step", tl_sim_step, "a whole model step from the ops' own models: time by op kind and layer", ""},
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
    if (tl_opts_parse(argc, argv, opts, "bench sim", NULL, 0, NULL) || tl_parse_format(fmt_s, &fmt)) return TL_EUSAGE;
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
