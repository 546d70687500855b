/* contract/indexer.h: the DSA lightning indexer (seed 000, "DSA lightning indexer", Figure 7,
 * Figure 11, appendix A2): what the kernel, the reference and the model of `indexer` agree on.
 *
 * The function. For each query row i in [0, rows) and each KV position j in row i's window
 * [start_i, end_i):
 *     logits[i][j] = sum over h < H of  w[i][h] * relu( (Q[i][h][:] . K[j][:]) * k_scale[j] )
 * and logits[i][j] = -inf for every other j in [0, kv). The dot product is over D = 128 values
 * of FP8 E4M3FN (OCP: bias 7, max 448, no Inf, 0x7F/0xFF NaN) codes, decoded exactly.
 *
 * Windows: causal with a cached prefix P (the rule, when no list is given): start_i = 0,
 * end_i = P + i + 1 (the query rows are the last `rows` tokens after P cached ones, so that
 * P + rows <= kv). Or a list given by the caller: starts[i] <= ends[i], both in [0, kv]; a window
 * may be empty (its row is all -inf).
 *
 * Inputs (row-major, all given; none may alias the output):
 *   Q        [rows][H][D]  uint8 E4M3FN codes, no NaN codes (the kernel on gfx942 reads them as
 *                          FNUZ, where NaN does not survive: NaN inputs are outside the contract)
 *   K        [kv][D]       uint8 E4M3FN codes, no NaN codes
 *   k_scale  [kv]          float32, finite
 *   w        [rows][H]     float32, finite
 * Output: logits [rows][kv] float32; every element written (-inf outside the window).
 *
 * The work counted: 2 D H FLOPs per in-window score (the dot products; the epilogue's relu,
 * scale, weight and head sum are not counted as FLOPs), the inputs read once and the logits
 * written once (tl_indexer_bytes).
 *
 * The kernel's tiling geometry (kernels/indexer.hip; the model, simulator/indexer.c, charges the
 * same): a block holds BLOCK_Q consecutive query rows (their Q and w in registers for the whole
 * run; on sm_90a Q in shared memory as wgmma's B) and walks the union of their windows in KV tiles
 * of TL_INDEXER_TILE_SM90 / _AMD positions, each tile copied once into shared memory / LDS and
 * used by all BLOCK_Q rows (AMD: double buffered; sm_90a: TL_INDEXER_STAGES_WGMMA stages of codes
 * in wgmma's swizzle; other NVIDIA builds: TL_INDEXER_STAGES_SM90 raw stages, each tile decoded
 * once to bf16 into one of two decoded tiles). The grid
 * is ceil(rows / BLOCK_Q) blocks. Positions of the union that lie outside one row's own window
 * are computed and then written as -inf (the causal triangle of a block: (BLOCK_Q - 1) / 2 rows'
 * worth of wasted work per block, on average).
 * Plain C: host, simulator and device code include it alike.
 */
#ifndef TL_CONTRACT_INDEXER_H
#define TL_CONTRACT_INDEXER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TL_INDEXER_DIM 128                /* D: the only head dimension (DeepSeek-V3.2 and GLM-5) */
#define TL_INDEXER_MAX_HEADS 128          /* H: 16..128, a multiple of 16 */
#define TL_INDEXER_MAX_ROWS (1L << 20)
#define TL_INDEXER_MAX_KV (1L << 22)      /* 4M positions */
#define TL_INDEXER_MAX_LOGITS (1LL << 32) /* rows x kv: 16 GiB of float32 logits */
#define TL_INDEXER_MAX_BLOCK_Q 8         /* the kernel instantiates 1, 2, 4 and 8 */
#define TL_INDEXER_TILE_SM90 64           /* KV positions per shared-memory tile on NVIDIA (bf16: 16 KiB) */
#define TL_INDEXER_TILE_AMD 32            /* on gfx942 / gfx950 (FP8 codes: 4 KiB, the seed's tile) */
#define TL_INDEXER_STAGES_SM90 3          /* raw tiles (codes + scales) in flight or waiting on NVIDIA */
#define TL_INDEXER_KB_STRIDE_SM90 (TL_INDEXER_DIM + 8) /* bf16 elements a decoded K row takes in shared memory */
#define TL_INDEXER_HEADS_PER_WARP_SM90 32 /* a warp scores 32 heads of its row: H / 32 warps a row */
/* Shared memory of one sm_90 block of bq rows at `heads` heads (bytes): the raw stages, two decoded
 * tiles with |k_scale|, and at H = 64 the two warps' partial sums of two tiles. */
#define TL_INDEXER_SMEM_SM90(heads, bq)                                                            \
    (TL_INDEXER_STAGES_SM90 * (TL_INDEXER_TILE_SM90 * TL_INDEXER_DIM + TL_INDEXER_TILE_SM90 * 4) + \
     2 * (TL_INDEXER_TILE_SM90 * TL_INDEXER_KB_STRIDE_SM90 * 2 + TL_INDEXER_TILE_SM90 * 4) +        \
     ((heads) > TL_INDEXER_HEADS_PER_WARP_SM90 ? 2 * (bq) * 2 * TL_INDEXER_TILE_SM90 * 4 : 0))

/* sm_90a (wgmma) kernel: stages of [64][128] E4M3 codes with their k_scale, and a block's shared
 * memory: Q of its rows, the stages, w of its rows, their windows (two ints a row), and 1024 bytes
 * to align the swizzled tiles. */
#define TL_INDEXER_STAGES_WGMMA 4
#define TL_INDEXER_SMEM_WGMMA(heads, bq)                                                            \
    ((bq) * (heads) * TL_INDEXER_DIM +                                                               \
     TL_INDEXER_STAGES_WGMMA * (TL_INDEXER_TILE_SM90 * TL_INDEXER_DIM + TL_INDEXER_TILE_SM90 * 4) + \
     (bq) * (heads) * 4 + (bq) * 8 + 1024)

typedef struct {
    long rows;            /* query rows, 1..TL_INDEXER_MAX_ROWS */
    long kv;              /* KV positions, 1..TL_INDEXER_MAX_KV */
    int heads;            /* H: 16..TL_INDEXER_MAX_HEADS, a multiple of 16 (32 GLM-5, 64 DeepSeek-V3.2) */
    int dim;              /* D: TL_INDEXER_DIM */
    long prefix;          /* P >= 0 cached positions before the first query row; P + rows <= kv */
    int block_q;          /* query rows per block: 1, 2, 4 or 8 (0: not chosen yet) */
    const int32_t *starts, *ends; /* when both are given: the windows (override the rule) */
} tl_indexer_shape;

/* Checks a shape: the ranges above, rows x kv within TL_INDEXER_MAX_LOGITS, P + rows <= kv under
 * the causal rule, and every listed window inside [0, kv] with start <= end. block_q 0 passes
 * (the model picks it later). TL_EUSAGE with a message naming the bad value otherwise. Cost: O(rows)
 * with a list, O(1) without. */
int tl_indexer_shape_check(const tl_indexer_shape *s);

/* Row i's window [*start, *end). */
static inline void tl_indexer_window(const tl_indexer_shape *s, long i, long *start, long *end)
{
    if (s->starts && s->ends) {
        *start = s->starts[i];
        *end = s->ends[i];
    } else {
        *start = 0;
        *end = s->prefix + i + 1;
    }
}

/* In-window scores over all rows (sum of end - start). Cost: O(1) under the rule, O(rows) with a list. */
double tl_indexer_scores(const tl_indexer_shape *s);
/* The counted FLOPs: 2 D H per in-window score. */
static inline double tl_indexer_flops(const tl_indexer_shape *s)
{
    return 2.0 * s->dim * s->heads * tl_indexer_scores(s);
}

/* Bytes of each array (layouts above). */
static inline double tl_indexer_q_bytes(const tl_indexer_shape *s) { return (double)s->rows * s->heads * s->dim; }
static inline double tl_indexer_k_bytes(const tl_indexer_shape *s) { return (double)s->kv * s->dim; }
static inline double tl_indexer_kscale_bytes(const tl_indexer_shape *s) { return 4.0 * (double)s->kv; }
static inline double tl_indexer_w_bytes(const tl_indexer_shape *s) { return 4.0 * (double)s->rows * s->heads; }
static inline double tl_indexer_logits_bytes(const tl_indexer_shape *s) { return 4.0 * (double)s->rows * s->kv; }
/* The fewest bytes the op must move through device memory: each input once (K and k_scale only
 * up to the furthest window end), the logits written once. */
double tl_indexer_bytes(const tl_indexer_shape *s);

/* ---- the kernel's tiling geometry ---- */
/* Blocks of the grid: ceil(rows / block_q). */
static inline long tl_indexer_blocks(const tl_indexer_shape *s, int block_q)
{
    return (s->rows + block_q - 1) / block_q;
}
/* Block b's union window [*start, *end) over its rows (empty: *start == *end == 0). */
void tl_indexer_block_window(const tl_indexer_shape *s, int block_q, long b, long *start, long *end);
/* KV tiles of `tile` positions that block b walks: its union window rounded out to whole tiles
 * (the first starts at start rounded down to a tile). */
long tl_indexer_block_tiles(const tl_indexer_shape *s, int block_q, long b, int tile);
/* Scores the kernel computes (block_q rows x every position of every tile it walks, summed over
 * the blocks): the matrix cores' work is 2 D H times this. Cost: O(blocks), O(rows) with a list. */
double tl_indexer_computed_scores(const tl_indexer_shape *s, int block_q, int tile);

#ifdef __cplusplus
}
#endif

#endif
