/* ops/prefill_figs.c: the prefill row's figures (`tilelab draw prefill-tiles`, `prefill-error`,
 * `prefill-roofline`): the model's schedule (simulator/prefill.h), the error study (reference/prefill.h)
 * and the model on the roofline, drawn by visualize/prefill_figs.c and visualize/roofline.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../reference/prefill.h"
#include "../simulator/prefill.h"
#include "../visualize/figures.h"
#include "../visualize/prefill_figs.h"
#include "ops.h"

#define FIG_MAX_SEQ 65536L          /* the tiles picture: 512 x 1024 tiles a head at most */
#define ERR_MAX_SEQ 4096L           /* the error chart: its references in double on the CPU */
#define ERR_MAX_MADDS 0x1p34        /* ... at most this many multiply-adds (about 10 s on 2 cores) */
#define ROOF_MAX_SEQS 8
#define ROOF_MAX_POINTS_FILES 4

static const char tiles_usage[] =
    "usage: tilelab draw prefill-tiles [--hw h200] [--shape mistral-7b|qwen3-8b|deepseek-v2-lite|HxD|HxKVxD]\n"
    "                                  [--seq 4096] [--dtype bf16|fp8] [--no-causal] -o FILE\n"
    "  The causal tile schedule of prefill attention as the model lays it out: left, one head's grid of\n"
    "  (query block x key tile) tiles at the kernel's tiling (tl_prefill_tiling_for on the preset's arch),\n"
    "  computed, masked on the diagonal, or skipped above it; right, the blocks (query block, head) over\n"
    "  the block slots of a sample of CUs in time, longest first, and the busy share of all slots.\n"
    "  seq at most 65536. Simulated on the preset (simulator/prefill.h).\n";

static const char error_usage[] =
    "usage: tilelab draw prefill-error [--shape mistral-7b|qwen3-8b|deepseek-v2-lite|HxD|HxKVxD] [--seq 256]\n"
    "                                  [--kv-heads 1] [--seed 1] -o FILE\n"
    "  The error study of `tilelab numerics attention-error` as a chart: the relative RMS error of O\n"
    "  against the float64 reference on unquantized inputs, for Q, K, V rounded to bf16, to FP8 E4M3FN\n"
    "  with per-128-row-block scales (fp8), the same with P rounded by the FP8 kernel's rule (fp8, P in\n"
    "  fp8), and fp8 after a Hadamard or a random orthogonal rotation of Q and K; on Gaussian inputs, on\n"
    "  inputs with outlier K channels, and with those channels large in Q too (qk-outliers). The first\n"
    "  --kv-heads KV heads of the shape and their query\n"
    "  heads. seq at most 4096. Computed on the CPU (reference/prefill.h).\n";

static const char roof_usage[] =
    "usage: tilelab draw prefill-roofline [--hw h200] [--shape mistral-7b|qwen3-8b|deepseek-v2-lite|all|HxD]\n"
    "                                     [--seq 1024,4096,16384,32768] [--points BENCH.csv ...] -o FILE\n"
    "  The prefill kernel on the preset's roofline: the model's points (counted causal FLOPs over the\n"
    "  model's HBM bytes and time) for bf16 and fp8 at each length; --points (repeatable, up to 4) adds\n"
    "  measured rows from `tilelab bench prefill --format csv` (or any file `draw roofline` reads).\n"
    "  --hw takes a preset name, a JSON path, or BASE,OVERLAY.json (on the H200,\n"
    "  h200,bench/results/2026-11-29_h200_roofline.json draws the measured matrix ceilings).\n";

/* ---- prefill-tiles ---- */

static int draw_tiles(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, tiles_usage)) return 0;
    const char *hw_s = "h200", *shape_s = "mistral-7b", *seq_s = "4096", *dtype_s = "bf16", *out = NULL;
    int no_causal = 0;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s),       TL_OPT_V("--shape", &shape_s), TL_OPT_V("--seq", &seq_s),
                     TL_OPT_V("--dtype", &dtype_s), TL_OPT_F("--no-causal", &no_causal, 1),
                     TL_OPT_V("-o", &out),          TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw prefill-tiles", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "prefill-tiles"))) return rc;
    tl_prefill_shape s;
    long seq;
    tl_hw hw;
    if ((rc = tl_prefill_shape_parse(shape_s, &s)) || (rc = tl_parse_long(seq_s, 1, FIG_MAX_SEQ, "--seq", &seq)) ||
        (rc = tl_prefill_dtype_parse(dtype_s, &s.dtype)))
        return rc;
    s.seq = seq;
    s.causal = !no_causal;
    if ((rc = tl_prefill_shape_check(&s)) || (rc = tl_hw_load(hw_s, &hw))) return rc;
    tl_prefill_model_result r;
    if ((rc = tl_prefill_model(&hw, &s, &r))) return rc;
    tl_prefill_span *span = malloc((size_t)r.blocks * sizeof *span);
    long *tiles = malloc((size_t)r.qblocks * sizeof *tiles), *masked = malloc((size_t)r.qblocks * sizeof *masked);
    if (!span || !tiles || !masked) rc = tl_error(TL_EFAIL, "prefill-tiles", "out of memory for %ld blocks", r.blocks);
    if (!rc) rc = tl_prefill_schedule(&hw, &s, span, r.blocks, &r);
    if (!rc) {
        for (long qb = 0; qb < r.qblocks; qb++) tiles[qb] = tl_prefill_block_tiles(&s, r.tile, qb, &masked[qb]);
        char title[200], sub[400], foot[300];
        snprintf(title, sizeof title, "Prefill attention (%s): the %s tile schedule on %s", tl_prefill_dtype_name(s.dtype),
                 s.causal ? "causal" : "full", hw.name);
        snprintf(sub, sizeof sub, "%s: %d query heads on %d KV heads, dqk %d, dv %d, seq %ld; tiles %d x %d keys, %d "
                 "waves a block, %s; model %.1f us, %.0f TFLOP/s (causal FLOPs), limiter %s",
                 shape_s, s.heads, s.kv_heads, s.dqk, s.dv, s.seq, r.tile.block_m, r.tile.block_n, r.tile.warps, r.instr,
                 r.time_us, r.tflops, r.limiter);
        snprintf(foot, sizeof foot, "simulated on preset %s: the model's blocks (simulator/prefill.h, tl_prefill_schedule), "
                 "each tile at the model's rate; lanes: %s", hw.name, hw.xcds > 1 ? "CU 0 of each XCD" : "the first 8 SMs");
        const tl_prefill_tiles_fig f = {&s, &r, span, tiles, masked, title, sub, foot};
        rc = tl_fig_prefill_tiles(out, &hw, &f);
    }
    free(span), free(tiles), free(masked);
    return rc;
}

/* ---- prefill-error ---- */

#define ERR_BARS 5
static const char *const err_bars[ERR_BARS] = {"bf16", "fp8 (E4M3FN, a scale per 128 rows)", "fp8, P in fp8 too",
                                               "fp8 + Hadamard rotation of Q, K", "fp8 + random rotation of Q, K"};

/* One distribution's bars: the study with the Hadamard rotation (bf16, fp8, fp8 + p8 unrotated; fp8
 * rotated) and with the random one (its fp8 rotated). */
static int study_group(const tl_prefill_shape *s, tl_prefill_dist d, uint64_t seed, float *q, float *k, float *v,
                       tl_prefill_err_group *gr)
{
    tl_prefill_make(s, d, seed, q, k, v);
    tl_prefill_err_row rows[TL_PREFILL_STUDY_MAX_ROWS];
    int n = 0, rc = tl_prefill_error_study(s, q, k, v, TL_ROT_HADAMARD, seed ^ 0x707ULL, rows, &n);
    if (rc) return rc;
    const int nf = TL_PREFILL_STUDY_FORMATS; /* rows: bf16, fp8, fp8+p8 unrotated, then rotated */
    gr->rel_rms[0] = rows[0].m.rel_rms, gr->rel_rms[1] = rows[1].m.rel_rms, gr->rel_rms[2] = rows[2].m.rel_rms;
    gr->rel_rms[3] = rows[nf + 1].m.rel_rms;
    if ((rc = tl_prefill_error_study(s, q, k, v, TL_ROT_RANDOM, seed ^ 0x707ULL, rows, &n))) return rc;
    gr->rel_rms[4] = rows[nf + 1].m.rel_rms;
    return TL_OK;
}

static int draw_error(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, error_usage)) return 0;
    const char *shape_s = "mistral-7b", *seq_s = "256", *kv_s = "1", *seed_s = "1", *out = NULL;
    tl_opt opts[] = {TL_OPT_V("--shape", &shape_s), TL_OPT_V("--seq", &seq_s), TL_OPT_V("--kv-heads", &kv_s),
                     TL_OPT_V("--seed", &seed_s),   TL_OPT_V("-o", &out),      TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw prefill-error", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "prefill-error"))) return rc;
    tl_prefill_shape s;
    long seq;
    int kv;
    uint64_t seed;
    if ((rc = tl_prefill_shape_parse(shape_s, &s)) || (rc = tl_parse_long(seq_s, 1, ERR_MAX_SEQ, "--seq", &seq)) ||
        (rc = tl_parse_int(kv_s, 1, TL_PREFILL_MAX_HEADS, "--kv-heads", &kv)) || (rc = tl_ops_parse_seed(seed_s, &seed)))
        return rc;
    s.seq = seq;
    if ((rc = tl_prefill_shape_check(&s))) return rc;
    if (kv > s.kv_heads) return tl_error(TL_EUSAGE, "--kv-heads", "%d, but %s has %d", kv, shape_s, s.kv_heads);
    const int gqa = s.heads / s.kv_heads;
    s.kv_heads = kv, s.heads = kv * gqa;
    /* bf16, fp8, fp8+p8 and the rotated rows of two studies, for three distributions: 27 references */
    const double madds = (double)s.seq * (s.seq + 1) / 2 * s.heads * (s.dqk + s.dv) * 27;
    if (madds > ERR_MAX_MADDS)
        return tl_error(TL_EUSAGE, "prefill-error", "%.3g multiply-adds is more than the %.3g the chart takes on: "
                        "give a smaller --seq or --kv-heads", madds, ERR_MAX_MADDS);
    float *q = malloc(tl_prefill_q_elems(&s) * sizeof *q), *k = malloc(tl_prefill_k_elems(&s) * sizeof *k);
    float *v = malloc(tl_prefill_v_elems(&s) * sizeof *v);
    tl_prefill_err_group gr[3] = {{"Gaussian inputs", {0}},
                                  {"outlier K channels (x10-100)", {0}},
                                  {"the same channels large in Q too", {0}}};
    if (!q || !k || !v) rc = tl_error(TL_EFAIL, "prefill-error", "out of memory");
    if (!rc) rc = study_group(&s, TL_PREFILL_DIST_NORMAL, seed, q, k, v, &gr[0]);
    if (!rc) rc = study_group(&s, TL_PREFILL_DIST_OUTLIERS, seed, q, k, v, &gr[1]);
    if (!rc) rc = study_group(&s, TL_PREFILL_DIST_QK_OUTLIERS, seed, q, k, v, &gr[2]);
    free(q), free(k), free(v);
    if (rc) return rc;
    char title[200], sub[400], foot[300];
    snprintf(title, sizeof title, "Prefill attention: the error of quantized Q, K, V (and P), and what rotating Q and K buys");
    snprintf(sub, sizeof sub, "%s, %d KV head%s and %d query heads, dqk %d, dv %d, seq %ld causal; float32 O against "
             "the float64 reference on unquantized inputs", shape_s, kv, kv == 1 ? "" : "s", s.heads, s.dqk, s.dv, s.seq);
    snprintf(foot, sizeof foot, "computed on the CPU by the error study of reference/prefill.h (float64 references), seed "
             "%llu; not a GPU measurement", (unsigned long long)seed);
    return tl_fig_prefill_error(out, err_bars, ERR_BARS, gr, 3, title, sub, foot);
}

/* ---- prefill-roofline ---- */

/* The model's points: each shape x dtype x length, labelled "shape dtype seq". */
static int model_points(const tl_hw *hw, const char *shape_s, const long *seqs, int nseq, tl_points *set)
{
    const char *const *presets = tl_prefill_presets();
    const char *one[2] = {shape_s, NULL};
    const char *const *names = strcmp(shape_s, "all") == 0 ? presets : one;
    int nshapes = 0;
    while (names[nshapes]) nshapes++;
    memset(set, 0, sizeof *set);
    set->pts = calloc((size_t)nshapes * 2 * nseq, sizeof *set->pts);
    if (!set->pts) return tl_error(TL_EFAIL, "prefill-roofline", "out of memory");
    set->format = TL_POINTS_TILELAB;
    snprintf(set->source, sizeof set->source, "simulated on preset %s (simulator/prefill.h)", hw->name);
    snprintf(set->name, sizeof set->name, "model");
    for (int a = 0; a < nshapes; a++)
        for (int d = 0; d < 2; d++)
            for (int i = 0; i < nseq; i++) {
                tl_prefill_shape s;
                tl_prefill_model_result r;
                int rc = tl_prefill_shape_parse(names[a], &s);
                s.seq = seqs[i], s.dtype = d ? TL_PREFILL_FP8 : TL_PREFILL_BF16;
                if (!rc) rc = tl_prefill_shape_check(&s);
                if (!rc) rc = tl_prefill_model(hw, &s, &r);
                if (rc) return rc;
                tl_point *p = &set->pts[set->n++];
                snprintf(p->label, sizeof p->label, "%s %s %ldK", names[a], tl_prefill_dtype_name(s.dtype), s.seq / 1024);
                if (s.seq % 1024) snprintf(p->label, sizeof p->label, "%s %s %ld", names[a], tl_prefill_dtype_name(s.dtype), s.seq);
                p->flops = r.flops, p->bytes = r.hbm_bytes, p->time_us = r.time_us;
                p->intensity = r.flops / r.hbm_bytes, p->tflops = r.tflops;
                p->launches = 1, p->measured = 0;
            }
    return TL_OK;
}

static int draw_roofline(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, roof_usage)) return 0;
    const char *hw_s = "h200", *shape_s = "mistral-7b", *seq_s = "1024,4096,16384,32768", *out = NULL,
               *files[ROOF_MAX_POINTS_FILES];
    int nfiles = 0;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s), TL_OPT_V("--shape", &shape_s), TL_OPT_V("--seq", &seq_s),
                     TL_OPT_L("--points", files, ROOF_MAX_POINTS_FILES, &nfiles), TL_OPT_V("-o", &out), TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw prefill-roofline", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "prefill-roofline"))) return rc;
    for (int i = 0; i < nfiles; i++)
        if ((rc = tl_ops_output_not_input(out, files[i], "--points"))) return rc;
    long seqs[ROOF_MAX_SEQS];
    int nseq = 0;
    tl_hw hw;
    tl_prefill_shape probe;
    if ((rc = tl_parse_long_list(seq_s, 1, TL_PREFILL_MAX_SEQ, "--seq", seqs, ROOF_MAX_SEQS, &nseq)) ||
        (strcmp(shape_s, "all") != 0 && (rc = tl_prefill_shape_parse(shape_s, &probe))) || (rc = tl_hw_load(hw_s, &hw)))
        return rc;
    tl_points sets[1 + ROOF_MAX_POINTS_FILES];
    int nsets = 0;
    rc = model_points(&hw, shape_s, seqs, nseq, &sets[0]);
    nsets = 1;
    for (int i = 0; !rc && i < nfiles; i++)
        if (!(rc = tl_points_read(files[i], &sets[nsets]))) nsets++;
    if (!rc) rc = tl_fig_roofline(out, &hw, sets, nsets, (tl_band){0});
    for (int i = 0; i < nsets; i++) tl_points_free(&sets[i]);
    return rc;
}

const tl_op_figure tl_prefill_figures[] = {
    {"prefill-tiles", "causal prefill attention's tile grid and its blocks over the CUs in time (simulated)", draw_tiles},
    {"prefill-error", "relative RMS error of bf16, fp8 and rotated fp8 prefill attention (CPU references)", draw_error},
    {"prefill-roofline", "the prefill kernel on the preset's roofline, the model's points and measured ones", draw_roofline},
    {NULL, NULL, NULL},
};
