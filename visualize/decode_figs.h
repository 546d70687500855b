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

/* ---- a measured run (`tilelab bench decode --trace`) ---- */
#define TL_DECODE_TRACE_FIG_POINTS 5 /* contract/decode.h's TL_DECODE_TRACE_POINTS */
#define TL_DECODE_TRACE_MAX_RECORDS 8192

/* One traced block: a shard group (row, head block, shard) or a merge block (merge = 1, the rest
 * -1), its points' times in us from the run's start (entry, ready, landed, tiles, end). */
typedef struct {
    int merge, hblock, shard;
    long row;
    double t[TL_DECODE_TRACE_FIG_POINTS];
} tl_decode_trace_rec;
/* The case a trace file's first matching lines describe. */
typedef struct {
    char kind[16], kv[16], source[200];
    int batch, heads, topk, shards;
    long window;
    double run_end_us;
} tl_decode_trace_case;
/* Reads the first case of a `bench decode --trace` file whose batch and k are the given ones (-1:
 * any) and its blocks (at most cap; *n of them). TL_EUSAGE naming the file and line for a file that
 * is not such a trace, a bad number, or no matching case. */
int tl_decode_trace_read(const char *path, int batch, int topk, tl_decode_trace_case *tc, tl_decode_trace_rec *rec,
                         int cap, int *n);
/* The measured picture of one case: a lane per shard group of row 0's first head block (at most
 * TL_DECODE_FIG_MAX_SHARDS, in shard order), its phases as segments on one time axis (start to
 * list and positions ready, the first tile's loads, the tiles, O and LSE written); a lane with the
 * merge blocks' span (first entry, the end of their wait, the last end); the run's end; below, each
 * phase's median over every group of the case. footer: the provenance line. */
int tl_fig_decode_trace(const char *out, const char *footer, const tl_decode_trace_case *tc, const tl_decode_trace_rec *rec,
                        int n);

#endif
