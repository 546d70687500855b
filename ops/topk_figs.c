/* ops/topk_figs.c: the top-k row's figure (`tilelab draw topk-split`): the model's schedule of one
 * row over the fewest blocks that hold it beside the row over the split the model picks (or
 * --split), drawn by visualize/topk_figs.c. */
#include <stdio.h>
#include <string.h>

#include "../simulator/hw.h"
#include "../simulator/topk.h"
#include "../visualize/figures.h"
#include "ops.h"

static const char topk_split_usage[] =
    "usage: tilelab draw topk-split [--hw mi355x] [--n 1048576] [--batch 1] [--k 512] [--dtype f32|bf16|f16]\n"
    "                               [--split S] -o FILE\n"
    "  Seed Figure 8 as a still: one row of top-k selection over the fewest blocks whose shared\n"
    "  memory holds it (one block for rows up to tens of thousands) against the same row over S\n"
    "  blocks (default: the split the model picks), time in us from the launch, each block's life\n"
    "  coloured by phase (load, radix passes, the row's barriers, counts, placement, sort); at most\n"
    "  64 blocks are drawn. Simulated on the preset.\n"
    "  With --trace FILE.csv (from `tilelab bench topk --trace`): the blocks of row R (--row, default\n"
    "  0) of the file's first case as they were measured, phase by phase, beside the model's schedule\n"
    "  of the same shape and split on --hw (default h200); --n picks the file's case (default: its\n"
    "  first), and --batch, --k, --dtype, --split come from the file.\n";

/* --trace: the measured blocks of one row beside the model's schedule of the same case. */
static int draw_topk_trace(const char *path, const char *n_s, const char *row_s, const char *hw_s, const char *out)
{
    long want_n = 0;
    int row, rc = tl_parse_int(row_s, 0, TL_TOPK_MAX_BATCH - 1, "--row", &row);
    if (!rc && n_s) rc = tl_parse_long(n_s, 1, TL_TOPK_MAX_N, "--n", &want_n);
    tl_hw hw;
    if (rc || (rc = tl_hw_load(hw_s, &hw))) return rc;
    static tl_topk_segment sm[TL_TOPK_MAX_SEGMENTS], ss[TL_TOPK_MAX_SEGMENTS];
    tl_topk_trace_case tc;
    int nm, ns;
    if ((rc = tl_topk_trace_read(path, want_n, row, &tc, sm, TL_TOPK_MAX_SEGMENTS, &nm))) return rc;
    tl_topk_dtype dtype;
    if ((rc = tl_topk_dtype_parse(tc.dtype, &dtype))) return rc;
    tl_topk_problem p = {&hw, {tc.batch, tc.n, tc.k, 0, NULL, 0, dtype}, tc.split, TL_TOPK_RESIDENT};
    tl_topk_result r;
    if ((rc = tl_topk_schedule(&p, ss, &ns, &r))) return rc;
    char about[240], label1[96], label2[160], foot[400];
    snprintf(about, sizeof about, "B = %d row%s of n = %ld %s scores, k = %d, split %d: row %d; the run ended at %.1f us "
             "(measured) against %.1f (the model)", tc.batch, tc.batch == 1 ? "" : "s", tc.n, tc.dtype, tc.k, tc.split,
             row, tc.run_end_us, r.time_us);
    snprintf(label1, sizeof label1, "measured");
    snprintf(label2, sizeof label2, "the model on %s", hw.name);
    snprintf(foot, sizeof foot, "measured on %.150s (bench topk --trace: block entry by the device clock, phases by the SM's "
             "cycle counter at the reported clock); simulated on preset %s (simulator/topk.h)", tc.source, hw.name);
    tl_topk_panel panels[2] = {{label1, tc.split, sm, nm}, {label2, tc.split, ss, ns}};
    return tl_fig_topk_split(out, panels, 2, "Top-k: one row's blocks as measured against the model's schedule", about,
                             foot);
}

static int draw_topk_split(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, topk_split_usage)) return 0;
    const char *hw_s = NULL, *n_s = NULL, *b_s = "1", *k_s = "512", *dtype_s = NULL, *split_s = NULL, *out = NULL,
               *trace_s = NULL, *row_s = "0";
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s),       TL_OPT_V("--n", &n_s),         TL_OPT_V("--batch", &b_s),
                     TL_OPT_V("--k", &k_s),         TL_OPT_V("--dtype", &dtype_s), TL_OPT_V("--split", &split_s),
                     TL_OPT_V("--trace", &trace_s), TL_OPT_V("--row", &row_s),     TL_OPT_V("-o", &out),
                     TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw topk-split", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "topk-split")) || (rc = tl_ops_output_not_input(out, trace_s, "--trace")))
        return rc;
    if (trace_s) return draw_topk_trace(trace_s, n_s, row_s, hw_s ? hw_s : "h200", out);
    if (!hw_s) hw_s = "mi355x";
    if (!n_s) n_s = "1048576";
    long n;
    int batch, k, split = 0;
    tl_topk_dtype dtype = TL_TOPK_F32;
    if ((rc = tl_parse_long(n_s, 1, TL_TOPK_MAX_N, "--n", &n)) || (rc = tl_parse_int(b_s, 1, TL_TOPK_MAX_BATCH, "--batch", &batch)) ||
        (rc = tl_parse_int(k_s, 1, TL_TOPK_MAX_K, "--k", &k)) || (dtype_s && (rc = tl_topk_dtype_parse(dtype_s, &dtype))) ||
        (split_s && (rc = tl_parse_int(split_s, 1, TL_TOPK_MAX_SPLIT, "--split", &split))))
        return rc;
    tl_hw hw;
    if ((rc = tl_hw_load(hw_s, &hw))) return rc;
    tl_topk_problem one = {&hw, {batch, n, k, 0, NULL, 0, dtype}, tl_topk_fewest_split(&hw, &(tl_topk_shape){batch, n, k, 0, NULL, 0, dtype}), TL_TOPK_RESIDENT}, many = one;
    many.split = split;
    if (one.split < 1)
        return tl_error(TL_EUSAGE, "topk-split", "no split of a row of %ld fits %s's shared memory and CUs", n, hw.name);
    static tl_topk_segment s1[TL_TOPK_MAX_SEGMENTS], s2[TL_TOPK_MAX_SEGMENTS];
    int n1, n2;
    tl_topk_result r1, r2;
    if ((rc = tl_topk_schedule(&one, s1, &n1, &r1)) || (rc = tl_topk_schedule(&many, s2, &n2, &r2))) return rc;
    char about[200], label1[64], label2[64];
    snprintf(about, sizeof about, "B = %d row%s of n = %ld %s scores, k = %d; %d radix passes; one launch; limiter %s",
             batch, batch == 1 ? "" : "s", n, tl_topk_dtype_name(dtype), k, r2.passes, r2.limiter);
    snprintf(label1, sizeof label1, "the fewest blocks that hold the row");
    snprintf(label2, sizeof label2, split ? "split %d (--split)" : "the split the model picks", r2.split);
    tl_topk_panel panels[2] = {{label1, r1.split, s1, n1}, {label2, r2.split, s2, n2}};
    char foot[300];
    snprintf(foot, sizeof foot, "simulated on preset %s: the model's schedule of one row's blocks (simulator/topk.h), "
             "from the launch", hw.name);
    return tl_fig_topk_split(out, panels, 2, "Top-k: one row over the fewest blocks that hold it against the row split over many",
                             about, foot);
}

const tl_op_figure tl_topk_figures[] = {
    {"topk-split", "one row on one block against the row split over many, in time", draw_topk_split},
    {NULL, NULL, NULL},
};
