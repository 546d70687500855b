/* tilelab sim moe | sim paged-decode | bench sim: the simulator's commands. */
#include "cli.h"
#include "../ops/ops.h"

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

static const tl_command sim_table[] = {
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
