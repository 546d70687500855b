/* visualize/prefill_figs.h: causal prefill attention's pictures, drawn from the model's schedule
 * (simulator/prefill.h) and the error study's numbers (reference/prefill.h) that the command builds
 * (ops/prefill_figs.c). Files and errors as visualize/figures.h says. */
#ifndef TL_PREFILL_FIGS_H
#define TL_PREFILL_FIGS_H

#include "../simulator/prefill.h"

/* The tiles picture's data (not owned). */
typedef struct {
    const tl_prefill_shape *shape;
    const tl_prefill_model_result *r;
    const tl_prefill_span *span;     /* r->blocks of them (tl_prefill_schedule) */
    const long *tiles, *masked;      /* per query block: key tiles computed, of them masked */
    const char *title, *subtitle, *footer;
} tl_prefill_tiles_fig;

/* Two panels: left, one head's (query block x key tile) grid in token units, computed tiles,
 * masked diagonal tiles and skipped tiles (above the diagonal) in three colours, with the counts;
 * right, the blocks over the block slots of a sample of CUs (CU 0 of each XCD, or the first 8 SMs)
 * in time from the launch, each block a bar coloured by its query block (the ramp: the last,
 * longest rows dark), the model's time dashed and the balanced end (fixed + body) dotted; under it
 * the busy share of all block slots in %. TL_EUSAGE for an empty schedule or more than 16 slots a
 * CU. */
int tl_fig_prefill_tiles(const char *out, const tl_hw *hw, const tl_prefill_tiles_fig *f);

#define TL_PREFILL_FIG_MAX_BARS 8
#define TL_PREFILL_FIG_MAX_GROUPS 4
/* One group of bars of the error chart: the inputs' name and each format's relative RMS error. */
typedef struct {
    const char *label;                         /* "gaussian inputs" */
    double rel_rms[TL_PREFILL_FIG_MAX_BARS];   /* > 0 and finite */
} tl_prefill_err_group;

/* Grouped bars on a log y axis (relative RMS error of O against the reference on unquantized
 * inputs), one colour per format (bars[i]), each bar labelled with its value; 1..TL_PREFILL_FIG_MAX_BARS
 * bars and 1..TL_PREFILL_FIG_MAX_GROUPS groups. TL_EUSAGE for counts out of range or a value
 * that is not finite and positive. */
int tl_fig_prefill_error(const char *out, const char *const *bars, int nbars, const tl_prefill_err_group *g,
                         int ngroups, const char *title, const char *subtitle, const char *footer);

#endif
