/* tilelab's figures. Each function draws one complete picture into `out` (.png, .svg or .pdf,
 * chosen by the extension; written atomically: on any error no file is left) and returns 0, or
 * TL_EUSAGE / TL_EFAIL after tl_error(). Every figure carries a footer saying whether its numbers
 * are simulated (on which preset) or measured (on which device, when).
 * Cost: the drawing itself takes milliseconds; PNG encoding of a 1500 x 1000 pixel image is the
 * largest part (tens of milliseconds). */
#ifndef TL_FIGURES_H
#define TL_FIGURES_H

#include "../simulator/hw.h"
#include "../simulator/model.h"
#include "../simulator/moe.h"
#include "../simulator/worklist.h"
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
/* Seed Figure 6 as a still: one panel per token count (ntok in [1, 8]); experts as columns, tiles
 * of tile_m rows stacked as boxes, real rows and padding rows in two colours; the panel title gives
 * the token count, tiles, active experts and the padding factor. Uses the worklist of
 * tl_moe_worklist (stage 1, the given routing and seed). */
int tl_fig_moe_tiles(const char *out, const tl_hw *hw, const tl_model *model, tl_moe_dtype dtype,
                     const int *tokens, int ntok, int tile_m, const tl_routing *routing,
                     uint64_t seed);

/* Padding factor against tokens (log x 1..max_tokens, log y): for each (E, k, tile_m) the
 * simulated curve (balanced routing through tl_route + tl_worklist_build at every power of two and
 * halfway points) solid, and the closed form min(tile_m E / (M k), tile_m) dashed. At most 12
 * curves (ne * nk * nm <= 12). preset names the hardware in the footer (the curves do not depend
 * on it). */
int tl_fig_padding(const char *out, const char *preset, const int *experts, int ne,
                   const int *topk, int nk, const int *tile_m, int nm, int max_tokens);

/* Timeline of one MoE stage: work items as bars on rows of CUs (grouped per XCD), time in us on
 * x; items coloured by wave (alternating), the tail wave highlighted, wave boundaries marked.
 * p->want_schedule is forced on. */
int tl_fig_timeline(const char *out, const tl_moe_problem *p);
/* The measured timeline of one MoE stage from a `tilelab bench moe --trace` file: every GEMM block
 * as a bar on its SM's row (split into the slots of the blocks that ran there at once, filled in
 * start order), time in us from the moment the stage could start; a slot's blocks alternate in
 * shade; the last start, the last end and the end of the stage's last kernel are marked. tokens 0:
 * the file's first case. Bad file (missing column, malformed number, no such case, over 10^6
 * blocks): TL_EUSAGE naming the line. */
int tl_fig_trace(const char *out, const char *trace_csv, int tokens, int stage);

/* ---- MFMA layout ---- */
/* The A (M x K), B (K x N) and C (M x N) operands of one matrix instruction as grids whose cells
 * are coloured by the lane that holds the element (perceptual ramp over the wave), with the lane
 * number written in cells large enough for it; arch is "gfx942" or "gfx950". */
int tl_fig_mfma(const char *out, const char *arch, const char *instr);

#endif
