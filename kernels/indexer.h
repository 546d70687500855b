/* kernels/indexer.h: the DSA lightning indexer kernel's launcher (contract/indexer.h; the judge:
 * reference/indexer.c; the model: simulator/indexer.h).
 *
 * Plain C header (the op row, ops/, calls it through tl_indexer_gpu_kernels); implemented in
 * kernels/indexer.hip, which exists only in GPU builds.
 *
 * What runs: one kernel, ceil(rows / BLOCK_Q) blocks; on AMD a block has BLOCK_Q waves, wave r
 * scoring query row b BLOCK_Q + r; on sm_80+ it has BLOCK_Q x H / 32 warps, H / 32 a row, each
 * scoring 32 of its row's heads, and grid block x runs b = blocks - 1 - x (the longest causal
 * windows first). Each wave holds its row's Q (as matrix-core B fragments: its heads) and w in
 * registers; the block walks the union of its rows' windows in KV tiles (64 positions on sm_90, 32
 * on AMD), each copied once from HBM into shared memory and used by every row of the block; the
 * window bounds are applied once per tile (whole tiles outside a row are skipped, the edge tile
 * masked in the epilogue), never inside the dot-product loop. Per target:
 *   sm_90a  (Hopper, a build with TL_HAVE_WGMMA: what runs on the H200) one or two warpgroups a
 *           block of BLOCK_Q rows, Q of the rows in shared memory, E4M3 wgmma on the K codes as
 *           copied (kernels/indexer.hip says how; TL_INDEXER_SMEM_WGMMA bytes a block); the dot
 *           products keep TL_WGMMA_E4M3_ACC_BITS mantissa bits (tl_indexer_gpu_acc_bits).
 *   sm_80+  (other NVIDIA builds, sm_90 without its "a" features) BLOCK_Q 1, 2, 4 or 8. cp.async copies K codes and k_scale into three raw stages (up to
 *           three tiles ahead); every thread of the block then decodes a share of the next tile
 *           E4M3 -> bf16 into one of two decoded tiles (exact: the 2^-120-scaled bf16 of
 *           numerics/codes.h by prmt/shift/and, then one packed multiply by +-2^120, the sign of
 *           the position's k_scale folded in), once per block; one barrier a tile. A warp scores
 *           32 positions at a time: two ldmatrix.x4 A fragments per k-step against its 4 head
 *           fragments (Q decoded to bf16 in registers), bf16 mma.sync m16n8k16 (kernels/mma.h),
 *           8 independent float32 accumulators. At H = 64 the row's two warps each write their
 *           partial head sums of a tile to shared memory and, after the next barrier, each adds
 *           and stores half of the tile's positions. 128 registers a thread (16 warps an SM), no
 *           spills; TL_INDEXER_SMEM_SM90(H, BLOCK_Q) bytes of shared memory a block. (The H200's
 *           bf16 mma.sync loop measured 645.7 TFLOP/s against 391.4 for its FP8 mma.sync.)
 *   gfx950  the E4M3 codes as they are: v_mfma_scale_f32_16x16x128_f8f6f4 with unit scales (one
 *           instruction covers D = 128).
 *   gfx942  its FP8 MFMA reads E4M3 FNUZ: the E4M3FN bits are reinterpreted as FNUZ, which halves
 *           every value exactly except 0x80 (FN's -0, FNUZ's NaN), rewritten to 0x00 when the tile is
 *           copied; the dot product is then a quarter of the true one and the epilogue multiplies
 *           by 4 (exact). NaN codes do not survive (outside the contract).
 * Epilogue in registers: x k_scale, relu, x w (NVIDIA: relu(x s) = |s| relu(sign(s) x), so max and
 * FMA per head and one multiply by |k_scale| after the sum), the head sum across the lanes that
 * hold one position's heads (shuffles), -inf outside the row's window; logits written once, every element
 * (positions outside the block's union by a plain fill in the same kernel).
 * Cost: the model's (simulator/indexer.h).
 */
#ifndef TL_KERNELS_INDEXER_H
#define TL_KERNELS_INDEXER_H

#include "../contract/indexer.h"
#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_indexer_gpu tl_indexer_gpu;
/* Allocates device memory for shape s (inputs, windows, logits). TL_EUSAGE for a bad shape or
 * heads other than 32 or 64 (the kernel's instantiations); TL_EFAIL on a GPU error. */
int tl_indexer_gpu_open(const tl_indexer_shape *s, tl_indexer_gpu **g);
/* Uploads Q [rows][H][D], K [kv][D] (E4M3 codes), k_scale [kv], w [rows][H] and the windows (from
 * the shape's list or rule). */
int tl_indexer_gpu_upload(tl_indexer_gpu *g, const uint8_t *q, const uint8_t *k, const float *k_scale,
                          const float *w);
/* Fills the logits with NaN, so that anything the kernel fails to write shows. */
int tl_indexer_gpu_poison(tl_indexer_gpu *g);
/* Runs the kernel with block_q rows a block (1, 2, 4 or 8), then synchronizes. */
int tl_indexer_gpu_run(tl_indexer_gpu *g, int block_q);
/* Reads back rows [first, first + n) of the logits [rows][kv] into logits[n][kv]. */
int tl_indexer_gpu_read(tl_indexer_gpu *g, long first, long n, float *logits);
/* Times one run with kernels/bench.h's method. */
int tl_indexer_gpu_time(tl_indexer_gpu *g, int block_q, const tl_bench_opts *o, tl_bench_result *r);
/* Mantissa bits the running kernel's dot-product accumulator keeps: 13 for the sm_90a E4M3 wgmma
 * kernel (Hopper's FP8 accumulator, measured by bench roofline's check), 23 (float32) otherwise. */
int tl_indexer_gpu_acc_bits(const tl_indexer_gpu *g);
void tl_indexer_gpu_close(tl_indexer_gpu *g);

/* The launcher as a table (NULL without a GPU: kernels/absent.c). */
typedef struct {
    int (*open)(const tl_indexer_shape *s, tl_indexer_gpu **g);
    int (*upload)(tl_indexer_gpu *g, const uint8_t *q, const uint8_t *k, const float *k_scale, const float *w);
    int (*poison)(tl_indexer_gpu *g);
    int (*run)(tl_indexer_gpu *g, int block_q);
    int (*read)(tl_indexer_gpu *g, long first, long n, float *logits);
    int (*time)(tl_indexer_gpu *g, int block_q, const tl_bench_opts *o, tl_bench_result *r);
    int (*acc_bits)(const tl_indexer_gpu *g);
    void (*close)(tl_indexer_gpu *g);
} tl_indexer_gpu_api;
/* The selected device's table (kernels/devices.c): this build's GPU (tl_indexer_gpu_native, NULL without
 * one: kernels/absent.c), or the CPU executor's for an AMD target; NULL when nothing runs it. */
extern const tl_indexer_gpu_api *const tl_indexer_gpu_native;
extern const tl_indexer_gpu_api *const *tl_indexer_gpu_selected;
#define tl_indexer_gpu_kernels (*tl_indexer_gpu_selected)

#ifdef __cplusplus
}
#endif

#endif
