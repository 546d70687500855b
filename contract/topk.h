/* contract/topk.h: exact top-k selection (seed 000, "CSA top-K selection"): what the kernel, the
 * reference and the model of `topk` agree on.
 *
 * The function: B rows of scores, row b holding len(b) valid positions of a row of n. For each row,
 * the indices of its k highest scores, ranked by (key of the score, descending; index, ascending):
 *   - keys are numerics/keys.h's (-0 equals +0; NaN ranks below -inf; infinities are ordinary);
 *   - ties go to the lower index, always: the set is deterministic, the same on every device, and
 *     equal to the first k of a full sort by that ranking;
 *   - a row with len(b) < k returns its len(b) indices and fills the rest with -1; count[b] says
 *     how many are real (min(k, len(b))).
 * Output order: sorted (score descending, ties by index ascending) when `sorted`; otherwise the
 * set in ascending index order (the canonical order every implementation reports in, so that
 * outputs compare bit for bit).
 *
 * Layouts (row-major): scores [B][n] (float32, or bfloat16 / float16 bits as uint16), the
 * positions of row b past len(b) are not read; indices [B][k] int32; count [B] int32.
 * Lengths: every row n, or causal (a causal prefill's last B queries over an n-long sequence: row b
 * sees n - (B - 1 - b) positions, at least 0), or a list given by the caller. */
#ifndef TL_CONTRACT_TOPK_H
#define TL_CONTRACT_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include "../numerics/keys.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TL_TOPK_F32, TL_TOPK_BF16, TL_TOPK_F16, TL_TOPK_NDTYPES } tl_topk_dtype;

#define TL_TOPK_MAX_K 4096
#define TL_TOPK_MAX_N (1L << 22)    /* 4M positions a row */
#define TL_TOPK_MAX_BATCH 65536
#define TL_TOPK_MAX_ELEMS (1LL << 32) /* B x n: 16 GiB of float32 scores */

typedef struct {
    int batch;             /* B >= 1 */
    long n;                /* positions a row holds (its stride), 1..TL_TOPK_MAX_N */
    int k;                 /* 1..TL_TOPK_MAX_K */
    int causal;            /* lengths: 1 causal (above), 0 every row n (unless lens is given) */
    const int32_t *lens;   /* when not NULL: len(b) = lens[b], each in [0, n] (overrides causal) */
    int sorted;            /* 1: output by score; 0: the set by ascending index */
    tl_topk_dtype dtype;
} tl_topk_shape;

/* The kernel's geometry (kernels/topk*.hip; the model, simulator/topk.c, reads it from here).
 * One launch selects every row: each row is cut into `split` contiguous chunks, one block of
 * TL_TOPK_THREADS threads each (TL_TOPK_VECS 16-byte loads in flight a thread), and a block keeps
 * its chunk's keys in shared memory for the whole selection, so the scores are read from memory
 * once. Radix passes, most significant digit first: float32's 32-bit keys in 11, 11 and 10 bits,
 * the 16-bit keys in 8 and 8; the passes end early when the bin holding the k-th key is taken
 * whole. */
#define TL_TOPK_THREADS 512
#define TL_TOPK_VECS 8
#define TL_TOPK_MAX_SPLIT 1024
#define TL_TOPK_PASSES_32 3
#define TL_TOPK_PASSES_16 2
#define TL_TOPK_BINS_32 2048 /* the widest digit's bins: float32 */
#define TL_TOPK_BINS_16 256
/* a block's work area: its histogram (TL_TOPK_BINS_32 words) or its slots' scan (a word for each of
 * TL_TOPK_VECS x TL_TOPK_THREADS vectors), whichever is larger */
#define TL_TOPK_WORK_BYTES                                                                          \
    (4 * (TL_TOPK_BINS_32 > TL_TOPK_VECS * TL_TOPK_THREADS ? TL_TOPK_BINS_32 : TL_TOPK_VECS * TL_TOPK_THREADS))
/* Scores one 16-byte vector holds. */
static inline int tl_topk_vec_scores(tl_topk_dtype d) { return d == TL_TOPK_F32 ? 4 : 8; }
/* The 16-byte vectors one block holds of a row of n positions over `split` blocks: the most a chunk
 * has (a row spans at most n / vec + 2 vectors, as it need not start on one). */
static inline long tl_topk_chunk_vecs(tl_topk_dtype d, long n, int split)
{
    const long vecs = n / tl_topk_vec_scores(d) + 2;
    return (vecs + split - 1) / split;
}
/* The power of two k rounds up to (1 for k <= 1): the sorts' and the cut's sizes. Host and device,
 * as numerics/keys.h's functions. */
TL_KEY_FN int tl_topk_pow2(int k)
{
    int kp = 1;
    while (kp < k) kp <<= 1;
    return kp;
}
/* Shared memory of one block: its chunk's keys and TL_TOPK_WORK_BYTES, or, when the output is
 * sorted, the row's k ranks (8 bytes each, k rounded up to a power of two) if that is more. */
static inline size_t tl_topk_block_smem(tl_topk_dtype d, long n, int split, int sorted, int k)
{
    const size_t bytes = (size_t)tl_topk_chunk_vecs(d, n, split) * 16 + TL_TOPK_WORK_BYTES, kp = (size_t)tl_topk_pow2(k);
    return sorted && kp * 8 > bytes ? kp * 8 : bytes;
}

/* The kernel's two ways of running a batch (kernels/topk.h), and the plan the model picks
 * (simulator/topk.h) or the user forces (--path, --split):
 *   resident  each row over `split` blocks that all run at once, each holding its chunk's keys in
 *             shared memory; the row's blocks meet at a barrier after every radix pass (the
 *             fastest for a few long rows; the launcher refuses a split the GPU cannot hold at
 *             once);
 *   stream    each row over `split` blocks that never wait for one another: a block streams its
 *             chunk once through a candidate buffer of tl_topk_stream_cap(k) ranks in shared
 *             memory (a rank enters when it beats the buffer's threshold; a full buffer is cut
 *             to its best k, which raises the threshold), leaving its chunk's best k; with split
 *             > 1 the row's last block to finish merges the split x k ranks the same way. Any
 *             number of blocks, in waves: batches and causal prefill rows. */
typedef enum { TL_TOPK_RESIDENT, TL_TOPK_STREAM, TL_TOPK_NPATHS } tl_topk_path;
#define TL_TOPK_STREAM_VECS 4 /* the stream path's 16-byte loads in flight a thread */
typedef struct {
    tl_topk_path path;
    int split; /* blocks per row, 1..TL_TOPK_MAX_SPLIT */
} tl_topk_plan;
/* "resident" | "stream"; TL_EUSAGE otherwise. */
int tl_topk_path_parse(const char *s, tl_topk_path *out);
const char *tl_topk_path_name(tl_topk_path p);
/* The stream path's candidate buffer: ranks a block holds, at least twice the power of two k
 * rounds up to (so a cut keeps at most half); 4 x that up to 8192 ranks. */
TL_KEY_FN int tl_topk_stream_cap(int k)
{
    const int kp = tl_topk_pow2(k);
    int c = 4 * kp;
    if (c > 8192) c = 8192;
    if (c < 2 * kp) c = 2 * kp;
    return c < 4096 ? 4096 : c;
}
/* The stream path's shared memory a block with a buffer of cap ranks: the buffer, the cut's
 * destination (k rounded up to a power of two) and a histogram of TL_TOPK_BINS_32 words. */
static inline size_t tl_topk_stream_smem_cap(int k, int cap)
{
    return (size_t)cap * 8 + (size_t)tl_topk_pow2(k) * 8 + 4 * TL_TOPK_BINS_32;
}
static inline size_t tl_topk_stream_smem(int k) { return tl_topk_stream_smem_cap(k, tl_topk_stream_cap(k)); }
/* The buffer a device whose blocks may use smem_limit bytes of shared memory runs: tl_topk_stream_cap(k),
 * halved while it does not fit (down to 2 x the power of two k rounds up to); 0 when even that does
 * not fit. k = 2048 on gfx942's 64 KiB LDS: 4096 ranks (56 KiB) instead of 8192 (88 KiB). The
 * kernel takes it as an argument; host and model compute it the same way. */
static inline int tl_topk_stream_cap_fit(int k, size_t smem_limit)
{
    int cap = tl_topk_stream_cap(k);
    const int least = 2 * tl_topk_pow2(k);
    while (cap > least && tl_topk_stream_smem_cap(k, cap) > smem_limit) cap /= 2;
    return tl_topk_stream_smem_cap(k, cap) <= smem_limit ? cap : 0;
}

/* The points of a block's life the kernel's trace records (kernels/topk.h, tl_topk_gpu_trace), in
 * order, and the columns of `bench topk --trace` (one line a block: the points' times in
 * microseconds from the run's start, then the run's end), which the pictures read back. */
enum {
    TL_TOPK_TRACE_ENTRY,   /* the block starts */
    TL_TOPK_TRACE_LOADED,  /* its ticket taken, its chunk's keys in shared memory */
    TL_TOPK_TRACE_HIST0,   /* pass p's digits counted in shared memory: HIST0 + 2 p */
    TL_TOPK_TRACE_SELECT0, /* pass p's row barrier passed and its bin picked: SELECT0 + 2 p */
    TL_TOPK_TRACE_COUNTED = TL_TOPK_TRACE_HIST0 + 2 * TL_TOPK_PASSES_32, /* the chunks' counts exchanged */
    TL_TOPK_TRACE_PLACED,  /* its keys placed in the output */
    TL_TOPK_TRACE_END,     /* done (the row's last block: after the sort and the reset) */
    TL_TOPK_TRACE_POINTS
};
/* The columns of `bench topk --trace` (one line a block; the times are t_us in order, then the
 * run's end), which visualize/topk_figs.c reads back. */
#define TL_TOPK_TRACE_HEADER                                                                         \
    "dtype,batch,n,k,split,row,chunk,sm,passes,entry_us,loaded_us,hist0_us,select0_us,hist1_us,select1_us," \
    "hist2_us,select2_us,counted_us,placed_us,end_us,run_end_us,source"
/* "f32" | "bf16" | "f16"; TL_EUSAGE otherwise. */
int tl_topk_dtype_parse(const char *s, tl_topk_dtype *out);
const char *tl_topk_dtype_name(tl_topk_dtype d);
/* Bytes of one score. */
static inline size_t tl_topk_score_bytes(tl_topk_dtype d) { return d == TL_TOPK_F32 ? 4 : 2; }

/* Checks a shape: the ranges above, B x n within TL_TOPK_MAX_ELEMS, lens (when given) within [0, n].
 * TL_EUSAGE with a message otherwise. */
int tl_topk_shape_check(const tl_topk_shape *s);

/* Valid positions of row b. */
static inline long tl_topk_row_len(const tl_topk_shape *s, int b)
{
    if (s->lens) return s->lens[b];
    if (!s->causal) return s->n;
    long len = s->n - (long)(s->batch - 1 - b);
    return len > 0 ? len : 0;
}

/* The key of score i of a row, in the shape's dtype (row: float32 or uint16 scores). */
static inline uint32_t tl_topk_key(tl_topk_dtype d, const void *row, long i)
{
    if (d == TL_TOPK_F32) return tl_key_f32(((const uint32_t *)row)[i]); /* float32's bits */
    uint16_t h = ((const uint16_t *)row)[i];
    return d == TL_TOPK_BF16 ? tl_key_bf16(h) : tl_key_f16(h);
}

/* The rank of (key, index) as one integer: larger ranks higher, and no two positions of a row tie
 * (the index breaks ties, the lower winning). Index < 2^32. */
static inline uint64_t tl_topk_rank(uint32_t key, long index)
{
    return (uint64_t)key << 32 | (uint64_t)(0xFFFFFFFFu - (uint32_t)index);
}

#ifdef __cplusplus
}
#endif

#endif
