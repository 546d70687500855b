/* visualize/indexer_figs.h: the indexer's pictures (seed 000, "DSA lightning indexer": Figure 7 and
 * the causal square against a skinny shape), drawn from the model's data (simulator/indexer.h) that
 * the command builds (ops/indexer_figs.c). Files and errors as visualize/figures.h says. */
#ifndef TL_INDEXER_FIGS_H
#define TL_INDEXER_FIGS_H

#include "../simulator/indexer.h"

/* One panel of the tiles picture: a shape's schedule (tl_indexer_schedule; not owned). */
typedef struct {
    const char *label;            /* "square 32768 x 32768" */
    const char *why_q;            /* "the model's pick", "--block-q" */
    const tl_indexer_shape *shape;
    const tl_indexer_result *r;
    const tl_indexer_span *span;  /* r->blocks of them */
    double end_us;                /* the schedule's end */
} tl_indexer_tiles_panel;

/* Per panel (1..3), sharing one time axis in us from the launch: the wave slots of one CU per XCD
 * (the first 8 CUs on a one-XCD GPU) as lanes, each block a bar over its BLOCK_Q waves from its
 * start to its end (shades alternate block to block, one hue per CU; empty lanes are idle wave
 * slots), the model's time dashed; under it the busy share of every CU's wave slots in %. Titles
 * give the model's time, limiter and TFLOP/s, blocks, blocks a CU and whether K fits an XCD's L2.
 * TL_EUSAGE for a bad panel count or an empty schedule. */
int tl_fig_indexer_tiles(const char *out, const tl_hw *hw, const tl_indexer_tiles_panel *p, int np,
                         const char *about);

/* Seed Figure 7 as a timeline of one block: the naive loop's lanes (memory re-reads, scalar
 * multiply-adds) over its own time axis above the tiled kernel's (Q into registers, LDS buffer 0
 * and 1 copies, matrix cores, epilogue), both in us from the block's start; n steps from
 * tl_indexer_pipeline. TL_EUSAGE for no steps. */
int tl_fig_indexer_pipeline(const char *out, const tl_indexer_step *st, int n, const tl_indexer_pipe *c,
                            const char *about, const char *preset);

#endif
