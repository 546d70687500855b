/* tilelab's figures. Each function draws one complete picture into `out` (.png, .svg or .pdf,
 * chosen by the extension; written atomically: on any error no file is left) and returns 0, or
 * TL_EUSAGE / TL_EFAIL after tl_error(). Every figure carries a footer saying whether its numbers
 * are simulated (on which preset) or measured (on which device, when).
 * Cost: the drawing itself takes milliseconds; PNG encoding of a 1500 x 1000 pixel image is the
 * largest part (tens of milliseconds). */
#ifndef TL_FIGURES_H
#define TL_FIGURES_H

#include "../simulator/hw.h"
#include "../simulator/moe.h"
#include "../simulator/topk.h"
#include "../contract/worklist.h"
#include "points.h"

/* ---- roofline ---- */
typedef struct {
    int on;
    double lo, hi; /* FLOP/byte, 0 < lo < hi */
} tl_band;

/* Log-log roofline of hw: x = arithmetic intensity (FLOP/byte), y = TFLOP/s. Per data type the
 * hw has (bf16, fp8, fp6, fp4): the datasheet ceiling dashed, the measured one solid; the HBM read
 * slope (datasheet dashed, measured solid); ridge points marked and labelled in FLOP/byte. Each
 * set of points is drawn with its own marker (measured filled orange, simulated sky blue, unknown
 * grey) with labels placed so they do not overlap (a label that finds no free spot is left out and
 * counted in the footer). Optional shaded band of intensities. */
int tl_fig_roofline(const char *out, const tl_hw *hw, const tl_points *sets, int nsets,
                    tl_band band);

/* ---- fused MoE ---- */
/* The MoE figures draw data they are given; the data comes from the model (simulator/moe.h,
 * simulator/worklist.h), built by the command (cli/draw_cmd.c). */

/* One panel of the tiles figure: a worklist (not owned, not changed) and the text over the
 * panel (e.g. "M = 32 tokens"). */
typedef struct {
    const tl_worklist *wl;
    const char *label;
} tl_tiles_panel;

/* What the tiles figure's worklists were built from, for its title and footer. */
typedef struct {
    const char *model;   /* model name */
    int top_k;           /* routed experts per token */
    int n_shared;        /* shared experts among the worklists' experts (their last columns) */
    const char *routing; /* as tl_routing_describe writes it */
    uint64_t seed;
    const char *preset;  /* the hardware preset the footer names */
} tl_tiles_about;

/* Seed Figure 6 as a still: one panel per worklist (npanels in [1, 8]); experts as columns, tiles
 * stacked as boxes, real rows and padding rows in two colours; the panel's title gives its label,
 * tiles, active experts and the padding factor (padded rows / real rows, the worklist's own
 * counts). The panels' worklists share one expert count and one tile_m (TL_EUSAGE otherwise). */
int tl_fig_moe_tiles(const char *out, const tl_tiles_panel *panels, int npanels,
                     const tl_tiles_about *about);

#define TL_PADDING_MAX_CURVES 12
#define TL_PADDING_MAX_POINTS 64

/* One curve of the padding figure: the padding factor (rows computed / real rows) at n token
 * counts, from the simulated worklist and from the closed form. */
typedef struct {
    char label[64];                           /* legend text, e.g. "E = 256, k = 8, tile 16 rows" */
    int n;                                    /* points, 1..TL_PADDING_MAX_POINTS */
    double tokens[TL_PADDING_MAX_POINTS];     /* M, ascending, >= 1 */
    double simulated[TL_PADDING_MAX_POINTS];  /* the worklist's padding at M, > 0 */
    double closed[TL_PADDING_MAX_POINTS];     /* max(1, min(tile_m E / (M k), tile_m)) at M, > 0 */
} tl_padding_curve;

/* Padding factor against tokens (log x up to the power of ten at or above the largest M, log y up
 * to 1.6 x the largest factor): each curve's simulated points as a wide translucent line with
 * markers, its closed form dashed. 1..TL_PADDING_MAX_CURVES curves; a point that is not finite
 * and positive is TL_EUSAGE. preset names the hardware in the footer (the curves do not depend on
 * it); the footer says the simulated points are balanced routing through tl_route +
 * tl_worklist_build. */
int tl_fig_padding(const char *out, const char *preset, const tl_padding_curve *curves,
                   int ncurves);

/* The XCD of compute unit cu (0 <= cu < hw->cus): cu / (cus / xcds), the model's numbering
 * (simulator/moe.c deals a wave's item pos to XCD pos % xcds, CU xcd * cus / xcds + pos / xcds),
 * so the timeline's rows (CUs in order) fall into xcds groups of cus / xcds. */
int tl_fig_timeline_xcd(const tl_hw *hw, int cu);

/* Timeline of one MoE stage: the work items of r (tl_moe_sim's result for p, run with
 * p->want_schedule) as bars on rows of CUs (grouped per XCD, tl_fig_timeline_xcd), time in us on
 * x; items coloured by wave (alternating), the tail wave highlighted, wave boundaries marked. p
 * describes the problem in the title (its model, dtype, tokens, stage, tp) and p->hw in the rows
 * and the footer. TL_EUSAGE when p->hw or p->model is NULL or r holds no schedule. */
int tl_fig_timeline(const char *out, const tl_moe_problem *p, const tl_moe_result *r);
/* The measured timeline of one MoE stage from a `tilelab bench moe --trace` file: every GEMM block
 * as a bar on its SM's row (split into the slots of the blocks that ran there at once, filled in
 * start order), time in us from the moment the stage could start; a slot's blocks alternate in
 * shade; the last start, the last end and the end of the stage's last kernel are marked. Blocks
 * of a slot too short to tell apart (under 1 pt, within 1 pt of the one before) are drawn as one
 * black bar, so that the picture stays bounded (10^6 blocks on 132 SMs: about 180 kB of SVG);
 * more than 50000 bars even so (about 200 bytes each in SVG or PDF) is TL_EUSAGE, saying how
 * many. tokens 0: the file's first case. Bad file (missing column, malformed number, no such case,
 * over 10^6 blocks): TL_EUSAGE naming the line. */
int tl_fig_trace(const char *out, const char *trace_csv, int tokens, int stage);

/* ---- top-k ---- */
/* One panel of the split picture: the schedule of a row (tl_topk_schedule) over `split` blocks. */
typedef struct {
    const char *label;           /* "the fewest blocks that hold the row" */
    int split;
    const tl_topk_segment *seg;
    int n;
} tl_topk_panel;
/* Seed Figure 8 as a still: per panel, the row's blocks as rows (at most TL_TOPK_MAX_DRAWN_BLOCKS)
 * and time in us on x, each block's life as bars coloured by phase (load, histogram passes, row
 * barriers, counts, placement, sort), from the launch; the panels share the time axis. `about` is the subtitle (shape, dtype), preset
 * the footer's. TL_EUSAGE for 0 or more than 4 panels or an empty schedule. */
int tl_fig_topk_split(const char *out, const tl_topk_panel *panels, int npanels, const char *title, const char *about,
                      const char *footer);
/* The first case (of n = want_n when want_n > 0) of a `bench topk --trace` file (kernels/topk.h's TL_TOPK_TRACE_HEADER), and row
 * `row`'s blocks (the first TL_TOPK_MAX_DRAWN_BLOCKS chunks) as segments phase by phase: load,
 * each pass's histogram and barrier with the select, the counts, the placement, the end (the
 * row's last block: sort and reset), in microseconds from the run's start. TL_EUSAGE naming the
 * line for a file that is not such a trace, a malformed number, or no block of that row. */
typedef struct {
    char dtype[8];
    int batch, k, split;
    long n;
    double run_end_us;
    char source[200];
} tl_topk_trace_case;
int tl_topk_trace_read(const char *path, long want_n, int row, tl_topk_trace_case *tc, tl_topk_segment *seg, int cap,
                       int *n);

/* ---- MFMA layout ---- */
/* The A (M x K), B (K x N) and C (M x N) operands of one matrix instruction as grids whose cells
 * are coloured by the lane that holds the element (perceptual ramp over the wave), with the lane
 * number written in cells large enough for it; arch is "gfx942" or "gfx950". */
int tl_fig_mfma(const char *out, const char *arch, const char *instr);

/* ---- quant: the MoE dispatch payload ---- */
/* One bar of the dispatch-bytes picture: a payload's bytes a token, stacked. */
typedef struct {
    const char *label;     /* "bf16", "fp8 1x128" */
    double values, scales, routing;
} tl_payload_bar;
/* Bytes a token crosses the fabric as, one horizontal bar per payload, stacked values / scales /
 * routing (colour-blind-safe palette, a key), each bar's total and share of the first bar written
 * at its end; x in bytes from 0. footer: where the numbers come from. TL_EUSAGE for 0 or more than
 * 8 bars or a negative size. */
int tl_fig_dispatch_bytes(const char *out, const tl_payload_bar *bars, int n, const char *title, const char *about,
                          const char *footer);

#endif
