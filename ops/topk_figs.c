/* ops/topk_figs.c: the top-k row's figure (`tilelab draw topk-split`): the model's schedule of one
 * row on one block beside the row over the split the model picks (or --split), drawn by
 * visualize/topk_figs.c. */
#include <stdio.h>
#include <string.h>

#include "../simulator/hw.h"
#include "../simulator/topk.h"
#include "../visualize/figures.h"
#include "ops.h"

static const char topk_split_usage[] =
    "usage: tilelab draw topk-split [--hw mi355x] [--n 1048576] [--batch 1] [--k 512] [--dtype f32|bf16|f16]\n"
    "                               [--split S] -o FILE\n"
    "  Seed Figure 8 as a still: one row of top-k selection on one block against the same row split\n"
    "  over S blocks (default: the split the model picks), time in us, each kernel's work coloured by\n"
    "  phase (radix histogram passes, selects, count, gather, final sort). Simulated on the preset.\n";

static int draw_topk_split(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, topk_split_usage)) return 0;
    const char *hw_s = "mi355x", *n_s = "1048576", *b_s = "1", *k_s = "512", *dtype_s = NULL, *split_s = NULL, *out = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s),       TL_OPT_V("--n", &n_s),         TL_OPT_V("--batch", &b_s),
                     TL_OPT_V("--k", &k_s),         TL_OPT_V("--dtype", &dtype_s), TL_OPT_V("--split", &split_s),
                     TL_OPT_V("-o", &out),          TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw topk-split", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "topk-split"))) return rc;
    long n;
    int batch, k, split = 0;
    tl_topk_dtype dtype = TL_TOPK_F32;
    if ((rc = tl_parse_long(n_s, 1, TL_TOPK_MAX_N, "--n", &n)) || (rc = tl_parse_int(b_s, 1, TL_TOPK_MAX_BATCH, "--batch", &batch)) ||
        (rc = tl_parse_int(k_s, 1, TL_TOPK_MAX_K, "--k", &k)) || (dtype_s && (rc = tl_topk_dtype_parse(dtype_s, &dtype))) ||
        (split_s && (rc = tl_parse_int(split_s, 1, TL_TOPK_MAX_SPLIT_MODEL, "--split", &split))))
        return rc;
    tl_hw hw;
    if ((rc = tl_hw_load(hw_s, &hw))) return rc;
    tl_topk_problem one = {&hw, {batch, n, k, 0, NULL, 0, dtype}, 1}, many = one;
    many.split = split;
    static tl_topk_segment s1[TL_TOPK_MAX_SEGMENTS], s2[TL_TOPK_MAX_SEGMENTS];
    int n1, n2;
    tl_topk_result r1, r2;
    if ((rc = tl_topk_schedule(&one, s1, &n1, &r1)) || (rc = tl_topk_schedule(&many, s2, &n2, &r2))) return rc;
    char about[200], label2[64];
    snprintf(about, sizeof about, "B = %d row%s of n = %ld %s scores, k = %d; %d radix passes, %d kernels; limiter %s",
             batch, batch == 1 ? "" : "s", n, tl_topk_dtype_name(dtype), k, r2.passes, r2.kernels, r2.limiter);
    snprintf(label2, sizeof label2, split ? "split %d (--split)" : "the split the model picks", r2.split);
    tl_topk_panel panels[2] = {{"one block a row", 1, s1, n1}, {label2, r2.split, s2, n2}};
    return tl_fig_topk_split(out, panels, 2, about, hw.name);
}

const tl_op_figure tl_topk_figures[] = {
    {"topk-split", "one row on one block against the row split over many, in time", draw_topk_split},
    {NULL, NULL, NULL},
};
