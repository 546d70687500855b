/* kernels/topk_launch.h: what the top-k kernel's files share (private to kernels/topk*.hip).
 *
 * The files: topk_kernels.hip (the kernel and its launch wrapper, tl_topk_launch) and topk.hip
 * (the device buffers, upload, poison, read-back, timing and the exported tl_topk_gpu_kernels
 * table). What the kernel does: kernels/topk.h.
 */
#ifndef TL_KERNELS_TOPK_LAUNCH_H
#define TL_KERNELS_TOPK_LAUNCH_H

#include "gpu.h"
#include "topk.h"

/* One row's rendezvous (device memory). Zero before a launch; the row's last block leaves it
 * zero again (and its histograms), so launches follow one another with no reset. */
struct TopkSync {
    uint32_t arrive; /* arrivals at the row's barriers, all barriers counted together */
    uint32_t done;   /* blocks that finished the row */
};

/* The device buffers one run uses (all device memory, sized by tl_topk_gpu_open). */
struct TopkBuffers {
    const void *scores;  /* [B][n] in the dtype, the allocation rounded up to 16 bytes */
    const int32_t *lens; /* [B], or NULL: every row n long (or causal: the shape's rule) */
    int32_t *idx;        /* [B][k] */
    int32_t *count;      /* [B] */
    uint32_t *ticket;    /* 1 word, zero between launches: the order in which blocks start */
    TopkSync *sync;      /* [B] */
    uint32_t *hist;      /* [B][passes][bins]: the rows' histograms, zero between launches */
    uint2 *chunk;        /* [B][split]: each block's (keys above the threshold, keys equal to it) */
    uint64_t *cand;      /* [B][k]: the selected (key, index) ranks, for the sorted output */
    uint64_t *merge;     /* the stream path with split > 1: [B][split][k], each block's best k */
    unsigned long long *trace; /* NULL, or [B x split][TOPK_TRACE_WORDS]: where each block's time went */
};

#define TOPK_TRACE_WORDS 16 /* the entry's device clock, the SM, then the TL_TOPK_TRACE_POINTS cycle counts */

/* Words of one row's histograms. */
static inline size_t tl_topk_hist_words(tl_topk_dtype d)
{
    return d == TL_TOPK_F32 ? (size_t)TL_TOPK_PASSES_32 * TL_TOPK_BINS_32 : (size_t)TL_TOPK_PASSES_16 * TL_TOPK_BINS_16;
}

/* Blocks of the kernel that the device holds at once for a selection of shape s over `split`
 * blocks a row (split may be at most that: a row's blocks wait for one another); 0 when a block's
 * chunk does not fit its shared memory. TL_EFAIL on a GPU error. */
int tl_topk_resident_blocks(const tl_topk_shape *s, int split, int *blocks);

/* Enqueues one selection of shape s (its lens are not read: buf.lens are) by `plan` (a resident
 * split tl_topk_resident_blocks accepts; buf.merge large enough for a stream split) on stream st;
 * returns 0 or a recorded TL_EFAIL (a launch's error). Never synchronizes. */
int tl_topk_launch(const tl_topk_shape *s, const TopkBuffers &buf, const tl_topk_plan &plan, hipStream_t st);

#endif
