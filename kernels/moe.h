/* kernels/moe.h: the fused MoE kernel's C launcher API (implemented in kernels/moe.hip, GPU builds
 * only: TILELAB_HAVE_GPU=1).
 *
 * The op's shape, layouts, data types and this kernel's tiling geometry (TL_MOE_TILE_M, ...) are its
 * contract, contract/moe.h, which the reference and the model read too.
 *
 * What runs on the GPU, in order (one stream):
 *   sort      two small kernels: count edges per expert and prefix-sum the tiles (one block), then
 *             one wave per expert writes its edges in ascending edge id into its tiles, pads the
 *             last tile with TL_WL_PAD and writes tile_expert / tile_rows; n_tiles is the number
 *             of valid tiles. The result equals tl_worklist_build(topk_ids, M, k, E, 16) bit for bit.
 *   stage 1   gate+up GEMM over the worklist: one work item = (tile, block of 16 activation
 *             columns = 16 gate + 16 up weight rows), whose weights tl_moe_gpu_open stores packed:
 *             the rows a wave multiplies as one contiguous region in the order the lanes load
 *             them (each load instruction reads a wave x 16 contiguous bytes; W2 likewise, but
 *             bf16's, which moe_gemv_down reads by rows; the layout: kernels/moe_pack.h); the lanes each own a 16- to
 *             64-byte run of K per chunk (bf16 and fp8: 32 bytes, 4 lanes read 128 bytes of a row; tiles of at
 *             most 8 rows: bf16 64 bytes, fp8 on NVIDIA two 32-byte chunks multiplied as weights
 *             x activations; weights streamed straight from HBM to registers with the streaming
 *             hint, bf16's first chunk requested before the tile's rows are read), 4 waves per
 *             block split K and reduce in shared memory, where SwiGLU is applied;
 *             the activation is written as bf16, one row per worklist row (padding rows 0). bf16
 *             multiplies 2 or 4 tiles of one expert per item (32 or 64 rows per weight byte loaded;
 *             the group of 4 at 2 blocks per SM) as tl_moe_tiles_per_item picks from the
 *             expected rows per expert (contract/moe.h).
 *   stage 2   (fp8: re-quantize the activation rows in 1x128 groups to E4M3FN; mxfp4 and mxfp8:
 *             to MXFP8, written as codes and scales on gfx950 and as their BF16 values elsewhere;
 *             one block per row, every load issued at once; the GEMM is launched dependent on it,
 *             NVIDIA: it starts early and waits for its output) down GEMM over the worklist (weights with
 *             the streaming hint unless all items fit in one wave of resident blocks): 4 waves per
 *             block, each owning 32 output columns over the whole K (no reduction; bf16 groups
 *             tiles as in stage 1), the top-k weight applied in the epilogue; each edge's row goes
 *             to its own slot of a float32 buffer, then a combine kernel (a dependent launch)
 *             sums each token's k slots in slot order: deterministic, no atomics. Output: float32
 *             [tokens][hidden]. bf16 at one token runs moe_gemv_down instead of the GEMM (below:
 *             a dot product per weight row in small blocks, the same buffer and combine).
 * bf16 and fp8 at prefill sizes on sm_90a run kernels/moe_prefill.hip's wgmma kernels in place of
 * moe_gemm in either stage where tl_moe_uses_prefill (contract/moe.h) picks them: the same
 * activations and slot rows, summed in another order (bf16: float32 sums of 512-value chains;
 * fp8: each 128-value block's products in the E4M3 accumulator, then times its two scales into
 * float32 sums, tl_moe_gpu_acc_bits).
 * Items past the device's n_tiles exit at once, so the grid is sized from the worst case and no
 * host synchronization sits between the sort and the stages.
 *
 * Matrix work goes through kernels/mma.h (mma.sync on sm_80+/sm_90, MFMA on gfx942/gfx950). The
 * lanes load K in a permuted order (a 16-byte run each, instead of the fragments' 4-byte pairs);
 * the same permutation applies to A and B, so every dot product is unchanged.
 * NVIDIA: bf16 and fp8 use the bf16 and e4m3 instructions; a16w4, mxfp4 and mxfp8 weights are
 * dequantized to bf16 in registers (exact for MX; INT4 multiplies the integer codes and applies
 * the group scale to each 128-deep partial sum), and the MX types' MXFP8 activations are read as
 * their exact BF16 values (tl_moe_gpu_set_tokens uploads them so; stage 2's re-quantization writes
 * them so). gfx950: fp8 multiplies its E4M3FN codes natively (v_mfma_scale_f32_16x16x128_f8f6f4
 * with unit scales: CDNA4's FP8 is OCP), and mxfp4 / mxfp8 multiply the activations' E4M3FN codes
 * and the weights' E2M1 / E4M3FN codes on the same instruction with both operands' E8M0 block
 * scales fed to it (the seed's MX path; compiled and its assembly read, never run here: no gfx950
 * device); gfx942: fp8 is decoded to bf16 (CDNA3's FP8 is FNUZ, not the OCP E4M3FN of these
 * inputs); the rest as on NVIDIA.
 */
#ifndef TL_KERNELS_MOE_H
#define TL_KERNELS_MOE_H

#include "../contract/moe.h"
#include "../contract/worklist.h" /* TL_WL_PAD */
#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_moe_gpu tl_moe_gpu;

/* Uploads the routed experts' weights of `in` (its token-side arrays are not read), packs W1 and
 * (but for bf16) W2 into the kernels' groups on the device (one expert's matrix at a time through a
 * scratch copy: the larger matrix's bytes more memory during the call), and allocates room for up
 * to max_tokens tokens. The kernel shape contract is checked first (TL_EUSAGE).
 * TL_EFAIL on a GPU error (out of memory: the message says how much was asked). */
int tl_moe_gpu_open(const tl_moe_inputs *in, int max_tokens, tl_moe_gpu **out);
/* Uploads x (or its FP8 form), topk_ids and topk_w of `in`, whose shape must match the weights
 * (tokens <= max_tokens). */
int tl_moe_gpu_set_tokens(tl_moe_gpu *g, const tl_moe_inputs *in);
/* Writes NaN into every output and intermediate buffer (activations, per-edge rows, output) and
 * 0x80000000 into the worklist arrays, so that anything the kernels fail to write shows. */
int tl_moe_gpu_poison(tl_moe_gpu *g);

enum { TL_MOE_PART_SORT = 1, TL_MOE_PART_STAGE1 = 2, TL_MOE_PART_STAGE2 = 4, TL_MOE_PART_ALL = 7 };
/* Runs the parts in `parts` (stage 1 needs a sort before it, stage 2 a stage 1), then synchronizes. */
int tl_moe_gpu_run(tl_moe_gpu *g, int parts);
/* Reads back the output (tokens x hidden floats), the worklist (sorted_ids: cap_rows entries at
 * most, tile_expert and tile_rows: cap_tiles at most) and the number of valid tiles. Any pointer
 * may be NULL. TL_EFAIL when the device's n_tiles exceeds the caps (a sort bug). */
int tl_moe_gpu_read(tl_moe_gpu *g, float *out, int32_t *sorted_ids, size_t cap_rows,
                    int32_t *tile_expert, int32_t *tile_rows, size_t cap_tiles, int *n_tiles);
/* Reads back stage 1's output: bf16 codes [n_tiles x 16][width] in worklist order (padding rows
 * 0), the layout tl_moe_reference writes. TL_EFAIL when they exceed cap_rows rows. */
int tl_moe_gpu_read_act(tl_moe_gpu *g, uint16_t *act, size_t cap_rows);
/* Times one part (one of TL_MOE_PART_*) with kernels/bench.h's method (L2 flushed, warm-up,
 * median; graph replay). The sort must have run for the stages. */
int tl_moe_gpu_time(tl_moe_gpu *g, int part, const tl_bench_opts *opts, tl_bench_result *r);
/* Where the time of one stage goes: one run of `part` (TL_MOE_PART_STAGE1 or _STAGE2) as the bench
 * times it (tl_bench_run_marked: after one warm-up run, the flush and busy-wait of opts; direct
 * launches, no graph), with every GEMM (or moe_gemv_down) block that had an item recording its
 * start and end on the device clock and its SM. Times are microseconds from the end of the busy-wait (the moment the
 * stage could start; a dependent block, fp8 stage 2's, records its start before it waits for the
 * kernel ahead of it); *end_us is when the stage's last kernel had ended (plus one launch).
 * *blocks (n_blocks entries, in block order) is the caller's to free. Cost: two flushes and two
 * runs of the stage. */
typedef struct {
    int block, tile, nblock, sm; /* moe_gemm: block b is item (b % max_tiles, b / max_tiles); moe_gemv_down: its first task */
    double start_us, end_us;
} tl_moe_trace_block;
int tl_moe_gpu_trace(tl_moe_gpu *g, int part, const tl_bench_opts *opts, tl_moe_trace_block **blocks,
                     int *n_blocks, double *end_us);
void tl_moe_gpu_close(tl_moe_gpu *g);
/* The mantissa bits of the accumulator stage `stage` (1 or 2) of the current tokens sums its
 * products in (reference/moe.h, tl_moe_acc): TL_WGMMA_E4M3_ACC_BITS (13) where fp8 runs its wgmma
 * prefill kernel (promoted into float32 every 128-value K block), else 23 (float32 sums). */
int tl_moe_gpu_acc_bits(const tl_moe_gpu *g, int stage);

/* The launcher above as a table of functions, so that code built without GPU code (the op row,
 * ops/moe.c, and the tests that walk it) can call it: kernels/moe.hip exports it in a GPU build,
 * kernels/absent.c defines it as NULL in a build without one. */
typedef struct {
    int (*open)(const tl_moe_inputs *in, int max_tokens, tl_moe_gpu **out);
    int (*set_tokens)(tl_moe_gpu *g, const tl_moe_inputs *in);
    int (*poison)(tl_moe_gpu *g);
    int (*run)(tl_moe_gpu *g, int parts);
    int (*read)(tl_moe_gpu *g, float *out, int32_t *sorted_ids, size_t cap_rows, int32_t *tile_expert,
                int32_t *tile_rows, size_t cap_tiles, int *n_tiles);
    int (*read_act)(tl_moe_gpu *g, uint16_t *act, size_t cap_rows);
    int (*time)(tl_moe_gpu *g, int part, const tl_bench_opts *opts, tl_bench_result *r);
    int (*trace)(tl_moe_gpu *g, int part, const tl_bench_opts *opts, tl_moe_trace_block **blocks, int *n_blocks,
                 double *end_us);
    void (*close)(tl_moe_gpu *g);
    int (*acc_bits)(const tl_moe_gpu *g, int stage);
} tl_moe_gpu_api;
/* The selected device's table (kernels/devices.c): this build's GPU (tl_moe_gpu_native, NULL without
 * one: kernels/absent.c), or the CPU executor's for an AMD target; NULL when nothing runs it. */
extern const tl_moe_gpu_api *const tl_moe_gpu_native;
extern const tl_moe_gpu_api *const *tl_moe_gpu_selected;
#define tl_moe_gpu_kernels (*tl_moe_gpu_selected)

#ifdef __cplusplus
}
#endif

#endif
