/* kernels/topk_launch.h: what the top-k kernel's files share (private to kernels/topk*.hip).
 *
 * The files: topk_kernels.hip (the kernels and their one launch wrapper, tl_topk_launch) and
 * topk.hip (the device buffers, upload, poison, read-back, timing and the exported
 * tl_topk_gpu_kernels table). What each kernel does: kernels/topk.h.
 */
#ifndef TL_KERNELS_TOPK_LAUNCH_H
#define TL_KERNELS_TOPK_LAUNCH_H

#include "gpu.h"
#include "topk.h"

enum {
    TOPK_THREADS = 256,      /* threads of the kernels that read the scores, and of topk_select */
    TOPK_U = 8,              /* 16-byte loads in flight per thread and tile */
    TOPK_FINAL_THREADS = 1024,
    TOPK_BINS_F32 = 2048,    /* float32 keys: 11-bit digits (11, 11, 10) */
    TOPK_BINS_16 = 256,      /* 16-bit keys: 8-bit digits (8, 8) */
};

/* Flags of a row's state. */
enum { TOPK_ROW_ALL = 1, /* len <= k: the row takes all its positions, no selection */
       TOPK_ROW_BAD = 2  /* a select found no bin holding the k-th key: a kernel bug */ };

/* One row's progress through the passes (device memory, written by topk_init and topk_select). */
struct TopkRow {
    uint32_t prefix; /* the threshold key's digits found so far (all of T after the last pass) */
    int32_t rem;     /* keys still to take among those matching the prefix (after the last pass:
                        the ties == T to take) */
    int32_t gt;      /* keys above the prefix's bucket found so far (after the last pass: keys > T) */
    int32_t c;       /* min(k, len): the row's count */
    int32_t len;     /* valid positions */
    int32_t flags;   /* TOPK_ROW_* */
};

/* The device buffers one run uses (all device memory, sized by tl_topk_gpu_open). */
struct TopkBuffers {
    const void *scores;  /* [B][n] in the dtype, the allocation rounded up to 16 bytes */
    const int32_t *lens; /* [B] */
    int32_t *idx;        /* [B][k] */
    int32_t *count;      /* [B] */
    TopkRow *rows;       /* [B] */
    uint32_t *hist;      /* [B][hist_stride]: TOPK_BINS_F32 or TOPK_BINS_16 */
    int2 *chunk;         /* [B][TL_TOPK_MAX_SPLIT]: each chunk's (keys > T, keys == T) */
    uint64_t *cand;      /* [B][k]: the selected (key, index) ranks, > T first, then the ties */
    int hist_stride;
};

/* Bins of the histogram row of a dtype. */
static inline int tl_topk_hist_stride(tl_topk_dtype d) { return d == TL_TOPK_F32 ? TOPK_BINS_F32 : TOPK_BINS_16; }

/* Enqueues one selection of shape s (its lens are not read: buf.lens are) with each row split over
 * `split` blocks on stream st; returns 0 or a recorded TL_EFAIL (a launch's error). Never
 * synchronizes. */
int tl_topk_launch(const tl_topk_shape *s, const TopkBuffers &buf, int split, hipStream_t st);

#endif
