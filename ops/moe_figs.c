/* ops/moe_figs.c: the fused MoE row's figures (`tilelab draw moe-tiles|padding|timeline`). Each
 * parses its options, builds the figure's data from the model (the *_data functions: worklists,
 * curves and schedules; no argv in them) and hands it to visualize/, which draws it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../simulator/hw.h"
#include "../simulator/model.h"
#include "../simulator/moe.h"
#include "../contract/worklist.h"
#include "../visualize/figures.h"
#include "ops.h"

static const char moe_tiles_usage[] =
    "usage: tilelab draw moe-tiles [--hw mi355x] [--model deepseek-v3.2] [--dtype fp8]\n"
    "                              [--tokens 1,32,512] [--tile-m 16] [--routing random]\n"
    "                              [--shared N] [--seed N] -o FILE\n"
    "  Seed Figure 6 as a still: experts as columns, tiles of tile-m rows as stacked boxes,\n"
    "  real rows and padding rows in two colours; one panel per token count (at most 8).\n"
    "  --shared N: N shared experts every token also routes to, as the last columns (default 0: the\n"
    "  routed experts alone, as the seed's figure; a shared expert's M rows dwarf the routed tiles).\n"
    "  --routing random (default; seeded by --seed, default 1), balanced, zipf:S or trace:FILE (as in\n"
    "  `tilelab sim moe --help`); the footer names the routing and seed.\n";

static int load_hw_model(const char *hw_s, const char *model_s, tl_hw *hw, tl_model *model)
{
    int rc = tl_hw_load(hw_s, hw);
    if (rc == TL_OK) rc = tl_model_load(model_s, model);
    return rc;
}

/* TL_EUSAGE when the pictures' worklists (tokens x the model's k routed rows) are more than a
 * command simulates (a worklist of 2^31 rows takes minutes and gigabytes before any limit
 * downstream is reached): tl_ops_add_routed_rows. */
static int check_edges(const tl_model *model, const int *tokens, int ntok)
{
    int E, k, width;
    tl_model_moe_shape(model, &E, &k, &width);
    long long total = 0;
    for (int i = 0; i < ntok; i++) {
        int rc = tl_ops_add_routed_rows(tokens[i], k, 1, &total);
        if (rc) return rc;
    }
    return TL_OK;
}


/* --shared N, or the model's n_shared_experts when it is not given (as `sim moe`). */
static int shared_experts(const char *s, const tl_model *model, int *n)
{
    *n = tl_model_shared_experts(model);
    return s ? tl_parse_int(s, 0, 16, "--shared", n) : TL_OK;
}

/* The tiles figure's data: one worklist per token count, routed and tiled as the model does for
 * stage 1 of base (tl_moe_worklist), and the panels that show them. */
typedef struct {
    tl_worklist wl[8];
    char label[8][32];
    tl_tiles_panel panels[8];
    int n;
} tiles_data;

static void tiles_data_free(tiles_data *d)
{
    for (int i = 0; i < d->n; i++) tl_worklist_free(&d->wl[i]);
    d->n = 0;
}

/* Builds d for 1..8 token counts (TL_EUSAGE otherwise, or the model's error); on error d holds
 * nothing. Caller frees with tiles_data_free. */
static int tiles_data_build(const tl_moe_problem *base, const int *tokens, int ntok, tiles_data *d)
{
    memset(d, 0, sizeof *d);
    if (ntok < 1 || ntok > 8) return tl_error(TL_EUSAGE, "--tokens", "give 1 to 8 token counts");
    int rc = TL_OK;
    for (int i = 0; i < ntok && rc == TL_OK; i++, d->n++) {
        tl_moe_problem p = *base;
        p.tokens = tokens[i];
        rc = tl_moe_worklist(&p, &d->wl[i]);
        snprintf(d->label[i], sizeof d->label[i], "M = %d token%s", tokens[i], tokens[i] == 1 ? "" : "s");
        d->panels[i] = (tl_tiles_panel){&d->wl[i], d->label[i]};
    }
    if (rc) tiles_data_free(d);
    return rc;
}

static int draw_moe_tiles(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, moe_tiles_usage)) return 0;
    const char *hw_s = "mi355x", *model_s = "deepseek-v3.2", *dtype_s = "fp8", *tokens_s = "1,32,512",
               *tile_m_s = "16", *routing_s = "random", *seed_s = NULL, *shared_s = NULL, *out = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s), TL_OPT_V("--model", &model_s), TL_OPT_V("--dtype", &dtype_s),
                     TL_OPT_V("--tokens", &tokens_s), TL_OPT_V("--tile-m", &tile_m_s),
                     TL_OPT_V("--routing", &routing_s), TL_OPT_V("--seed", &seed_s), TL_OPT_V("--shared", &shared_s),
                     TL_OPT_V("-o", &out), TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw moe-tiles", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "moe-tiles"))) return rc;
    int tokens[8], ntok;
    tl_moe_problem p = {.stage = 1, .tp = 1, .seed = 1};
    if ((rc = tl_ops_parse_int_list(tokens_s, 1, 1L << 20, "--tokens", tokens, 8, &ntok)) ||
        (rc = tl_parse_int(tile_m_s, 1, 4096, "--tile-m", &p.tile_m)) || (rc = tl_moe_dtype_parse(dtype_s, &p.dtype)) ||
        (rc = tl_routing_parse(routing_s, &p.routing)) || (seed_s && (rc = tl_ops_parse_seed(seed_s, &p.seed))))
        return rc;
    tl_hw hw;
    tl_model model;
    if ((rc = load_hw_model(hw_s, model_s, &hw, &model)) || (rc = check_edges(&model, tokens, ntok)) ||
        (shared_s && (rc = tl_parse_int(shared_s, 0, 16, "--shared", &p.n_shared))))
        return rc;
    p.hw = &hw;
    p.model = &model;
    tiles_data d;
    if ((rc = tiles_data_build(&p, tokens, ntok, &d))) return rc;
    int E, k, width;
    tl_model_moe_shape(&model, &E, &k, &width);
    char routing[64];
    tl_routing_describe(&p.routing, routing, sizeof routing);
    tl_tiles_about about = {model.name, k, p.n_shared, routing, p.seed, hw.name};
    rc = tl_fig_moe_tiles(out, d.panels, d.n, &about);
    tiles_data_free(&d);
    return rc;
}

/* ---- padding ---- */

static const char padding_usage[] =
    "usage: tilelab draw padding [--hw mi355x] [--experts 256,384] [--topk 8] [--tile-m 16,32]\n"
    "                            [--max-tokens 8192] -o FILE\n"
    "  Padding factor (rows computed / real rows) against tokens, log-log: the simulated worklist\n"
    "  with balanced routing (solid) and the closed form min(tile_m E / (M k), tile_m) (dashed),\n"
    "  one curve per (E, k, tile-m), at most 12 curves.\n";

/* The padding of the worklist of `tokens` tokens routed balanced (seed 1) over E experts, k
 * each, in tiles of tile_m rows: rows computed / real rows. */
static int balanced_worklist_padding(int tokens, int E, int k, int tile_m, double *pad)
{
    int32_t *ids = malloc((size_t)tokens * k * sizeof *ids);
    if (!ids) return tl_error(TL_EFAIL, "padding", "out of memory");
    tl_routing r = {TL_ROUTE_BALANCED, 0, ""};
    tl_worklist wl = {0};
    int rc = tl_route(&r, tokens, E, k, 1, ids, NULL);
    if (rc == TL_OK) rc = tl_worklist_build(ids, tokens, k, E, tile_m, &wl);
    if (rc == TL_OK) *pad = (double)wl.n_rows_padded / ((double)tokens * k);
    tl_worklist_free(&wl);
    free(ids);
    return rc;
}

/* Token counts 1, 2, 3, 4, 6, 8, 12, ... (powers of two and halfway points) up to max_tokens;
 * returns how many (at most TL_PADDING_MAX_POINTS - 1). */
static int padding_token_counts(int max_tokens, double *ms)
{
    int n = 0;
    for (long p = 1; p <= max_tokens && n < TL_PADDING_MAX_POINTS - 2; p *= 2) {
        ms[n++] = (double)p;
        if (p * 3 / 2 <= max_tokens && p >= 2) ms[n++] = (double)(p * 3 / 2);
    }
    return n;
}

/* The padding figure's curves, one per (E, k, tile_m) in that nesting order: at each token count
 * up to max_tokens, the balanced worklist's padding and the closed form max(1, min(tile_m E /
 * (M k), tile_m)). TL_EUSAGE (before any worklist is built) for 0 or more than
 * TL_PADDING_MAX_CURVES curves, k > E, max_tokens over 195312, or more than 2^25 routed rows in
 * all (seconds of work). */
static int padding_data(const int *experts, int ne, const int *topk, int nk, const int *tile_m, int nm,
                        int max_tokens, tl_padding_curve *curves, int *ncurves)
{
    *ncurves = ne * nk * nm;
    if (*ncurves < 1 || *ncurves > TL_PADDING_MAX_CURVES)
        return tl_error(TL_EUSAGE, "padding", "%d curves (experts x topk x tile-m); draw 1 to %d", *ncurves,
                        TL_PADDING_MAX_CURVES);
    for (int a = 0; a < ne; a++)
        for (int b = 0; b < nk; b++)
            if (topk[b] > experts[a])
                return tl_error(TL_EUSAGE, "--topk", "k = %d is larger than E = %d", topk[b], experts[a]);
    if ((double)max_tokens * 1024 > 2e8)
        return tl_error(TL_EUSAGE, "--max-tokens", "%d is too large to simulate here", max_tokens);
    double ms[TL_PADDING_MAX_POINTS];
    int nms = padding_token_counts(max_tokens, ms);
    /* every curve point builds a worklist of M*k rows: bound the total (2^25 rows, seconds) */
    double rows = 0, ksum = 0;
    for (int b = 0; b < nk; b++) ksum += topk[b];
    for (int i = 0; i < nms; i++) rows += ms[i] * ksum * ne * nm;
    if (rows > 33554432.0)
        return tl_error(TL_EUSAGE, "--max-tokens", "%d tokens over these curves is %.3g routed rows to simulate, "
                        "more than 2^25", max_tokens, rows);
    int rc = TL_OK;
    tl_padding_curve *cv = curves;
    for (int a = 0; a < ne && rc == TL_OK; a++)
        for (int b = 0; b < nk && rc == TL_OK; b++)
            for (int c = 0; c < nm && rc == TL_OK; c++, cv++) {
                int E = experts[a], k = topk[b], tm = tile_m[c];
                snprintf(cv->label, sizeof cv->label, "E = %d, k = %d, tile %d rows", E, k, tm);
                cv->n = nms;
                for (int i = 0; i < nms && rc == TL_OK; i++) {
                    cv->tokens[i] = ms[i];
                    rc = balanced_worklist_padding((int)ms[i], E, k, tm, &cv->simulated[i]);
                    cv->closed[i] = fmax(1.0, fmin((double)tm * E / (ms[i] * k), tm));
                }
            }
    return rc;
}

static int draw_padding(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, padding_usage)) return 0;
    const char *hw_s = "mi355x", *experts_s = "256,384", *topk_s = "8", *tile_m_s = "16,32", *max_s = "8192",
               *out = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s), TL_OPT_V("--experts", &experts_s), TL_OPT_V("--topk", &topk_s),
                     TL_OPT_V("--tile-m", &tile_m_s), TL_OPT_V("--max-tokens", &max_s), TL_OPT_V("-o", &out),
                     TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw padding", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "padding"))) return rc;
    int e[12], k[12], m[12], ne, nk, nm, max_tokens;
    if ((rc = tl_ops_parse_int_list(experts_s, 1, 65536, "--experts", e, 12, &ne)) ||
        (rc = tl_ops_parse_int_list(topk_s, 1, 1024, "--topk", k, 12, &nk)) ||
        (rc = tl_ops_parse_int_list(tile_m_s, 1, 4096, "--tile-m", m, 12, &nm)) ||
        (rc = tl_parse_int(max_s, 2, 1 << 20, "--max-tokens", &max_tokens)))
        return rc;
    /* The preset only names the hardware in the footer, but it must exist. */
    tl_hw hw;
    if ((rc = tl_hw_load(hw_s, &hw))) return rc;
    tl_padding_curve curves[TL_PADDING_MAX_CURVES];
    int ncurves;
    if ((rc = padding_data(e, ne, k, nk, m, nm, max_tokens, curves, &ncurves))) return rc;
    return tl_fig_padding(out, hw.name, curves, ncurves);
}

/* ---- timeline ---- */

static const char timeline_usage[] =
    "usage: tilelab draw timeline [--hw mi355x] [--model deepseek-v3.2] [--dtype fp8] [--tokens 64]\n"
    "                             [--stage 1] [--routing random] [--tp 1] [--seed N]\n"
    "                             [--kernel tilelab | --kernel generic [--tile-m 16] [--shared N]] -o FILE\n"
    "       tilelab draw timeline --trace FILE.csv [--tokens M] [--stage 1] -o FILE\n"
    "  Work items of one fused-MoE stage over compute units (rows, grouped per XCD) in time (us):\n"
    "  waves alternate in shade, the tail wave is highlighted, wave boundaries are marked. Simulated\n"
    "  on the preset, or with --trace measured: the blocks a `tilelab bench moe --trace` run recorded\n"
    "  on each SM, in the slots of the blocks that ran there at once (--tokens: which case of the\n"
    "  file, default its first; --hw, --model, --dtype, --tile-m, --routing, --tp, --shared and --seed\n"
    "  are the simulated timeline's and are refused with --trace). --shared: the shared experts every\n"
    "  token also routes to (generic only; default: the model's, as `sim moe`). --kernel: whose\n"
    "  schedule, as in `sim moe`: tilelab (default) the kernel tilelab ships as `sim moe` models it\n"
    "  (moe_gemm, moe_gemv_down or sm_90's moe_prefill_s1/_s2, its own tile; the model's shared\n"
    "  experts are not in it), generic the kernel of simulator/moe.h with --tile-m (default 16).\n"
    "  Random routing by default (--seed, default 1); the title names the kernel, the footer routing\n"
    "  and seed.\n";

/* The timeline's data: the model's schedule of p (tl_moe_sim with want_schedule) for the kernel
 * tilelab ships (tilelab: tl_moe_tilelab_kernel sets p's geometry, as sim moe's default does) or
 * the generic kernel of p's tile. On success the caller frees r with tl_moe_result_free. */
static int timeline_data(tl_moe_problem *p, int tilelab, tl_moe_result *r)
{
    memset(r, 0, sizeof *r);
    if (tilelab) p->n_shared = 0; /* the shipped kernel fuses no shared expert (sim moe says the same) */
    int rc = tilelab ? tl_moe_tilelab_kernel(p) : tl_moe_generic_kernel(p);
    if (rc) return rc;
    tl_moe_problem q = *p;
    q.want_schedule = 1;
    return tl_moe_sim(&q, r);
}

static int draw_timeline(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, timeline_usage)) return 0;
    const char *hw_s = NULL, *model_s = NULL, *dtype_s = NULL, *tokens_s = NULL, *stage_s = "1", *tile_m_s = NULL,
               *routing_s = NULL, *tp_s = NULL, *seed_s = NULL, *shared_s = NULL, *out = NULL, *trace = NULL,
               *kernel_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s), TL_OPT_V("--model", &model_s), TL_OPT_V("--dtype", &dtype_s),
                     TL_OPT_V("--kernel", &kernel_s),
                     TL_OPT_V("--tokens", &tokens_s), TL_OPT_V("--stage", &stage_s), TL_OPT_V("--tile-m", &tile_m_s),
                     TL_OPT_V("--routing", &routing_s), TL_OPT_V("--tp", &tp_s), TL_OPT_V("--seed", &seed_s),
                     TL_OPT_V("--shared", &shared_s), TL_OPT_V("--trace", &trace), TL_OPT_V("-o", &out), TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw timeline", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "timeline")) || (rc = tl_ops_output_not_input(out, trace, "--trace"))) return rc;
    if (trace) { /* measured */
        if (hw_s || model_s || dtype_s || tile_m_s || routing_s || tp_s || seed_s || shared_s || kernel_s)
            return tl_error(TL_EUSAGE, "draw timeline", "--hw, --model, --dtype, --kernel, --tile-m, --routing, --tp, "
                            "--shared and --seed are for the simulated timeline, not --trace");
        int tokens = 0, stage = 1;
        if ((tokens_s && (rc = tl_parse_int(tokens_s, 1, 0x7fffffff, "--tokens", &tokens))) ||
            (rc = tl_parse_int(stage_s, 1, 2, "--stage", &stage)))
            return rc;
        return tl_fig_trace(out, trace, tokens, stage);
    }
    /* the simulated timeline's defaults: the kernel sim moe models by default */
    const int tilelab = !kernel_s || strcmp(kernel_s, "tilelab") == 0;
    if (kernel_s && !tilelab && strcmp(kernel_s, "generic") != 0)
        return tl_error(TL_EUSAGE, "--kernel", "'%s' is not tilelab or generic", kernel_s);
    if (tilelab && (tile_m_s || shared_s))
        return tl_error(TL_EUSAGE, tile_m_s ? "--tile-m" : "--shared", "is the generic kernel's; the default kernel "
                        "(tilelab's own) has its own tile and no shared experts: add --kernel generic");
    hw_s = hw_s ? hw_s : "mi355x", model_s = model_s ? model_s : "deepseek-v3.2", dtype_s = dtype_s ? dtype_s : "fp8";
    tokens_s = tokens_s ? tokens_s : "64", tile_m_s = tile_m_s ? tile_m_s : "16";
    routing_s = routing_s ? routing_s : "random", tp_s = tp_s ? tp_s : "1";
    tl_moe_problem p = {0};
    p.seed = 1;
    if ((rc = tl_parse_int(tokens_s, 1, 0x7fffffff, "--tokens", &p.tokens)) ||
        (rc = tl_parse_int(stage_s, 1, 2, "--stage", &p.stage)) ||
        (rc = tl_parse_int(tile_m_s, 1, 4096, "--tile-m", &p.tile_m)) ||
        (rc = tl_parse_int(tp_s, 1, 1024, "--tp", &p.tp)) || (rc = tl_moe_dtype_parse(dtype_s, &p.dtype)) ||
        (rc = tl_routing_parse(routing_s, &p.routing)) || (seed_s && (rc = tl_ops_parse_seed(seed_s, &p.seed))))
        return rc;
    tl_hw hw;
    tl_model model;
    if ((rc = load_hw_model(hw_s, model_s, &hw, &model)) || (rc = check_edges(&model, &p.tokens, 1)) ||
        (rc = shared_experts(shared_s, &model, &p.n_shared)))
        return rc;
    p.hw = &hw;
    p.model = &model;
    tl_moe_result r;
    if ((rc = timeline_data(&p, tilelab, &r))) return rc;
    rc = tl_fig_timeline(out, &p, &r);
    tl_moe_result_free(&r);
    return rc;
}

const tl_op_figure tl_moe_figures[] = {
    {"moe-tiles", "experts as columns, real and padding rows of each tile", draw_moe_tiles},
    {"padding", "padding factor against token count, simulated and closed form", draw_padding},
    {"timeline", "tiles over compute units in time, waves and the tail", draw_timeline},
    {NULL, NULL, NULL},
};
