/* ops/indexer_figs.c: the indexer row's figures (`tilelab draw indexer-tiles`, `draw
 * indexer-pipeline`): the model's schedule and one block's pipeline (simulator/indexer.h), drawn by
 * visualize/indexer_figs.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../simulator/hw.h"
#include "../simulator/indexer.h"
#include "../visualize/indexer_figs.h"
#include "ops.h"

#define FIG_MAX_KV 262144L /* the square's blocks are all scheduled: up to 2^18 spans, 10 MiB */

static const char tiles_usage[] =
    "usage: tilelab draw indexer-tiles [--hw mi355x] [--heads 32] [--rows 2048] [--kv 32768] [--prefix P]\n"
    "                                  [--block-q 2|4] -o FILE\n"
    "  The query blocks of three grids over the CUs' wave slots in time, as the model lays them out:\n"
    "  the causal square kv x kv at the BLOCK_Q the model picks, the skinny shape rows x kv (prefix P,\n"
    "  default kv - rows) at BLOCK_Q 1, and the same at --block-q (default 4). Lanes: one CU per XCD;\n"
    "  under them the busy share of every CU's wave slots. Titles: the model's time, limiter and\n"
    "  TFLOP/s. kv at most 262144. Simulated on the preset.\n";

static const char pipe_usage[] =
    "usage: tilelab draw indexer-pipeline [--hw mi355x] [--heads 32] [--positions 128] [--block-q 1|2|4] -o FILE\n"
    "  Seed Figure 7 as a timeline of one block alone on a CU: the naive loop (one score a lane, q and\n"
    "  k re-read for every score, scalar multiply-adds) against the tiled kernel (Q and w in registers,\n"
    "  KV tiles copied into two LDS buffers in turn, matrix-core products of one tile while the next\n"
    "  copies, the epilogue), from the model's costs on the preset. Simulated on the preset.\n";

/* Schedules shape s (block_q 0: the model's pick) into a fresh span array. */
static int schedule(const tl_hw *hw, tl_indexer_shape s, tl_indexer_result *r, tl_indexer_span **span, double *end)
{
    tl_indexer_problem p = {hw, s};
    int rc = tl_indexer_sim(&p, r);
    if (rc) return rc;
    *span = malloc((size_t)r->blocks * sizeof **span);
    if (!*span) return tl_error(TL_EFAIL, "indexer-tiles", "out of memory for %ld blocks", r->blocks);
    return tl_indexer_schedule(&p, *span, r->blocks, r, end);
}

static int draw_tiles(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, tiles_usage)) return 0;
    const char *hw_s = "mi355x", *h_s = "32", *rows_s = "2048", *kv_s = "32768", *pre_s = NULL, *bq_s = "4", *out = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s),       TL_OPT_V("--heads", &h_s),      TL_OPT_V("--rows", &rows_s),
                     TL_OPT_V("--kv", &kv_s),       TL_OPT_V("--prefix", &pre_s),   TL_OPT_V("--block-q", &bq_s),
                     TL_OPT_V("-o", &out),          TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw indexer-tiles", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "indexer-tiles"))) return rc;
    long rows, kv, prefix = -1;
    int heads, bq;
    if ((rc = tl_parse_long(rows_s, 1, FIG_MAX_KV, "--rows", &rows)) || (rc = tl_parse_long(kv_s, 1, FIG_MAX_KV, "--kv", &kv)) ||
        (rc = tl_parse_int(h_s, 16, TL_INDEXER_MAX_HEADS, "--heads", &heads)) ||
        (pre_s && (rc = tl_parse_long(pre_s, 0, FIG_MAX_KV, "--prefix", &prefix))) ||
        (rc = tl_parse_int(bq_s, 2, TL_INDEXER_MAX_BLOCK_Q, "--block-q", &bq)))
        return rc;
    if (bq != 2 && bq != 4) return tl_error(TL_EUSAGE, "--block-q", "%d: 2 or 4 (BLOCK_Q 1 is drawn anyway)", bq);
    tl_hw hw;
    if ((rc = tl_hw_load(hw_s, &hw))) return rc;
    tl_indexer_shape sq = {kv, kv, heads, TL_INDEXER_DIM, 0, 0, NULL, NULL};
    tl_indexer_shape sk = {rows, kv, heads, TL_INDEXER_DIM, prefix >= 0 ? prefix : kv - rows, 1, NULL, NULL};
    tl_indexer_shape sq4 = sk;
    sq4.block_q = bq;
    if ((rc = tl_indexer_shape_check(&sq)) || (rc = tl_indexer_shape_check(&sk))) return rc;
    tl_indexer_result r[3];
    tl_indexer_span *span[3] = {NULL, NULL, NULL};
    double end[3];
    rc = schedule(&hw, sq, &r[0], &span[0], &end[0]);
    if (!rc) rc = schedule(&hw, sk, &r[1], &span[1], &end[1]);
    if (!rc) rc = schedule(&hw, sq4, &r[2], &span[2], &end[2]);
    if (!rc) {
        char l0[64], l1[64], about[300];
        snprintf(l0, sizeof l0, "square %ld x %ld", kv, kv);
        snprintf(l1, sizeof l1, "skinny %ld x %ld", rows, kv);
        snprintf(about, sizeof about,
                 "%s (%s): %d CUs in %d XCD%s, %d wave slots a CU; KV tiles of %d positions; %s; the skinny rows after "
                 "%ld cached positions",
                 hw.name, hw.arch, hw.cus, hw.xcds, hw.xcds == 1 ? "" : "s", r[0].cu_waves, r[0].tile, r[0].instr,
                 sk.prefix);
        const tl_indexer_tiles_panel pan[3] = {{l0, "the model's pick", &sq, &r[0], span[0], end[0]},
                                               {l1, "the seed's kernel", &sk, &r[1], span[1], end[1]},
                                               {l1, "--block-q", &sq4, &r[2], span[2], end[2]}};
        rc = tl_fig_indexer_tiles(out, &hw, pan, 3, about);
    }
    for (int i = 0; i < 3; i++) free(span[i]);
    return rc;
}

static int draw_pipeline(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, pipe_usage)) return 0;
    const char *hw_s = "mi355x", *h_s = "32", *pos_s = "128", *bq_s = "1", *out = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s),        TL_OPT_V("--heads", &h_s), TL_OPT_V("--positions", &pos_s),
                     TL_OPT_V("--block-q", &bq_s),   TL_OPT_V("-o", &out),      TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw indexer-pipeline", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "indexer-pipeline"))) return rc;
    long pos;
    int heads, bq;
    if ((rc = tl_parse_long(pos_s, 1, 1024, "--positions", &pos)) ||
        (rc = tl_parse_int(h_s, 16, TL_INDEXER_MAX_HEADS, "--heads", &heads)) ||
        (rc = tl_parse_int(bq_s, 1, TL_INDEXER_MAX_BLOCK_Q, "--block-q", &bq)))
        return rc;
    if (heads % 16) return tl_error(TL_EUSAGE, "--heads", "%d: a multiple of 16", heads);
    if (bq == 3) return tl_error(TL_EUSAGE, "--block-q", "3: 1, 2 or 4");
    tl_hw hw;
    if ((rc = tl_hw_load(hw_s, &hw))) return rc;
    tl_indexer_problem p = {&hw, {1, pos, heads, TL_INDEXER_DIM, 0, bq, NULL, NULL}};
    static tl_indexer_step st[TL_INDEXER_MAX_STEPS];
    int n;
    tl_indexer_pipe c;
    if ((rc = tl_indexer_pipeline(&p, pos, st, TL_INDEXER_MAX_STEPS, &n, &c))) return rc;
    char about[300];
    snprintf(about, sizeof about,
             "%s (%s): %ld KV positions, H = %d, D = %d, BLOCK_Q %d; a tile copy %.2f us, its products %.3f us (%s), "
             "its epilogue %.3f us",
             hw.name, hw.arch, pos, heads, TL_INDEXER_DIM, bq, c.load_us, c.mma_us,
             strncmp(hw.arch, "sm_", 3) == 0 ? "E4M3 wgmma" : "FP8", c.epi_us);
    return tl_fig_indexer_pipeline(out, st, n, &c, about, hw.name);
}

const tl_op_figure tl_indexer_figures[] = {
    {"indexer-tiles", "a causal square and a skinny shape's blocks over CUs and XCDs in time", draw_tiles},
    {"indexer-pipeline", "one block: the naive per-score loop against double-buffered KV tiles", draw_pipeline},
    {NULL, NULL, NULL},
};
