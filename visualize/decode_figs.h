/* visualize/decode_figs.h: split-KV decode's picture (seed 000, "CSA dual-scope decode", Figure 12
 * right), drawn from data the command builds from the contract and the model (ops/decode_figs.c).
 * Files and errors as visualize/figures.h says. */
#ifndef TL_DECODE_FIGS_H
#define TL_DECODE_FIGS_H

#include <stdint.h>

#define TL_DECODE_FIG_MAX_SHARDS 64

/* One shard of the row drawn. */
typedef struct {
    long slot_lo, slot_hi;   /* its slots (tl_decode_shard_range) */
    long win_lo, win_hi;     /* the window positions it holds, [lo, hi) (empty: lo == hi) */
    long keys;               /* keys it counts */
    double us;               /* its work-group's simulated time */
} tl_decode_fig_shard;

typedef struct {
    const char *title, *subtitle, *footer;
    const char *scope_name;  /* "window (last 128)" or "the request's pages" */
    long context;            /* positions the query sees: the x axis */
    long win_lo, win_hi;     /* the contiguous scope (the window, or the whole paged sequence) */
    const int32_t *selected; /* counted top-k positions outside the window (NULL, 0: none) */
    const int *selected_shard; /* the shard of each */
    long n_selected;
    const tl_decode_fig_shard *shard;
    int shards;              /* 1..TL_DECODE_FIG_MAX_SHARDS */
    double merge_us;         /* the merge launch (0 with one shard) */
    double total_us;         /* the model's time of the call */
} tl_decode_fig;

/* Top: the context as one axis of positions, the contiguous scope as a band and every selected
 * position as a tick in its shard's colour. Middle: one lane a shard over the same axis (its window
 * part as a bar, its selected positions as ticks, "shard s: n keys" at the left), its simulated
 * time as a bar on a second axis in us at the right, and the merge tree: every non-empty shard's
 * (o, lse) into one merge node and out as O, LSE, with the merge's and the call's time.
 * TL_EUSAGE for a shard count outside [1, TL_DECODE_FIG_MAX_SHARDS] or an empty context. */
int tl_fig_decode_shards(const char *out, const tl_decode_fig *f);

#endif
