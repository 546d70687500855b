/* kernels/moe.h: the fused MoE kernel's C launcher API (implemented in kernels/moe.hip, GPU builds
 * only: TILELAB_HAVE_GPU=1) and its shape contract (a static inline function, usable anywhere).
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
 *             pairs an expert's tiles (32 rows per item, weights read once for both) once experts
 *             average 1.5 tiles or more.
 *   stage 2   (fp8 only: re-quantize the activation rows in 1x128 groups to E4M3FN, one block per
 *             row, every load issued at once; the GEMM is launched dependent on it, NVIDIA: it
 *             starts early and waits for its output) down GEMM over the worklist (weights with
 *             the streaming hint unless all items fit in one wave of resident blocks): 4 waves per
 *             block, each owning 32 output columns over the whole K (no reduction; bf16 pairs
 *             tiles as in stage 1), the top-k weight applied in the epilogue; each edge's row goes
 *             to its own slot of a float32 buffer, then a combine kernel (a dependent launch)
 *             sums each token's k slots in slot order: deterministic, no atomics. Output: float32
 *             [tokens][hidden]. bf16 at one token runs moe_gemv_down instead of the GEMM (below:
 *             a dot product per weight row in small blocks, the same buffer and combine).
 * Items past the device's n_tiles exit at once, so the grid is sized from the worst case and no
 * host synchronization sits between the sort and the stages.
 *
 * Matrix work goes through kernels/mma.h (mma.sync on sm_80+/sm_90, MFMA on gfx942/gfx950). The
 * lanes load K in a permuted order (a 16-byte run each, instead of the fragments' 4-byte pairs);
 * the same permutation applies to A and B, so every dot product is unchanged.
 * NVIDIA: bf16 and fp8 use the bf16 and e4m3 instructions; a16w4, mxfp4 and mxfp8 weights are
 * dequantized to bf16 in registers (exact for MX; INT4 multiplies the integer codes and applies
 * the group scale to each 128-deep partial sum). AMD: fp8 is decoded to bf16 (gfx942's FP8 is
 * FNUZ, not the OCP E4M3FN of these inputs), the rest as on NVIDIA.
 */
#ifndef TL_KERNELS_MOE_H
#define TL_KERNELS_MOE_H

#include "../reference/moe.h"
#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_MOE_TILE_M 16   /* rows per tile: one 16-row matrix instruction */
/* The kernel's geometry, read by kernels/moe.hip and by the simulator's model of this kernel
 * (simulator/moe.c, tl_moe_tilelab_kernel): change it here and both follow. */
#define TL_MOE_S1_THREADS 128 /* stage 1: 4 waves of 32 lanes split K, reduce in shared memory */
#define TL_MOE_S2_THREADS 128 /* stage 2: 4 waves each own TL_MOE_NCOLS columns over the whole K */
#define TL_MOE_S1_MINB 4      /* blocks per SM the stage-1 register budget is cut for (NVIDIA) */
#define TL_MOE_S2_MINB 4      /* the same for stage 2 */
#define TL_MOE_NCOLS 32       /* weight rows one wave multiplies: stage 1 16 gate + 16 up, stage 2 32 */
#define TL_MOE_S1_NB 16       /* stage-1 activation columns (SwiGLU outputs) per work item */
#define TL_MOE_K_ALIGN 128 /* hidden and width must be multiples of this (block, group, chunk) */
/* Decode: bf16 stage 2 at one token runs moe_gemv_down instead of the GEMM (each tile holds one
 * row, two only if a token repeats an expert). A block is cut into groups of gs threads; a group
 * owns TL_MOE_GEMV_R weight rows (output columns) over the whole K, each thread loading
 * TL_MOE_GEMV_VJ 16-byte vectors of each row at once. A task is one such set of rows for every
 * group of the block; a block takes `tasks` consecutive tasks of one tile in turn, except the last
 * blocks of the grid, which take one each (TL_MOE_GEMV_TAPER_PCT: the share of the tasks in the
 * long blocks). tl_moe_gemv_geometry computes it for the launcher and the simulator. */
#define TL_MOE_GEMV_THREADS 256 /* at most */
#define TL_MOE_GEMV_VJ 4
#define TL_MOE_GEMV_R 2
#define TL_MOE_GEMV_TASKS 8 /* at most */
#define TL_MOE_GEMV_TAPER_PCT 85
#define TL_MOE_GEMV_MINB 3 /* blocks per SM its register budget is cut for (NVIDIA) */
/* Whether stage `stage` of this shape runs moe_gemv_down (K = width must fit one pass: K <= 8192). */
static inline int tl_moe_uses_gemv(const tl_moe_shape *s, int stage)
{
    return stage == 2 && s->tokens == 1 && s->dtype == TL_MOE_BF16 &&
           2 * s->width <= 16 * TL_MOE_GEMV_THREADS * TL_MOE_GEMV_VJ;
}
typedef struct {
    int gs;              /* threads per group: a power of 2 up to a wave, then whole waves, with
                            gs x TL_MOE_GEMV_VJ >= the 16-byte vectors of a row (width / 8) */
    int threads;         /* per block: the most whole groups in TL_MOE_GEMV_THREADS */
    int cols_per_task;   /* threads / gs x TL_MOE_GEMV_R */
    int tasks_per_tile;  /* hidden / cols_per_task */
    int tasks;           /* per long block: the largest power of 2 <= TL_MOE_GEMV_TASKS dividing
                            tasks_per_tile, so that no block spans two tiles */
} tl_moe_gemv_geom;
/* moe_gemv_down's geometry for shape s (tl_moe_uses_gemv(s, 2)) on waves of `wave` lanes. */
static inline tl_moe_gemv_geom tl_moe_gemv_geometry(const tl_moe_shape *s, int wave)
{
    tl_moe_gemv_geom g;
    const int need = (s->width / 8 + TL_MOE_GEMV_VJ - 1) / TL_MOE_GEMV_VJ;
    g.gs = 8;
    while (g.gs < need && g.gs < wave) g.gs *= 2;
    if (g.gs < need) g.gs = (need + wave - 1) / wave * wave;
    g.threads = TL_MOE_GEMV_THREADS / g.gs * g.gs;
    g.cols_per_task = g.threads / g.gs * TL_MOE_GEMV_R;
    g.tasks_per_tile = s->hidden / g.cols_per_task; /* hidden % 128 == 0, cols_per_task a power of 2 <= 64 */
    g.tasks = TL_MOE_GEMV_TASKS;
    while (g.tasks_per_tile % g.tasks) g.tasks /= 2;
    return g;
}

/* The kernel's shape contract, checked before anything is uploaded: hidden and width must be
 * multiples of 128 (the FP8 block and INT4 group, and the deepest K chunk a wave reads: 4 lanes x
 * 32 INT4 values); E <= 4096. Widths such as 96 or 192 are refused with this message rather than
 * padded (pad the weights with zero rows/columns to 128 and pass the padded width); the CPU
 * reference handles any width. Returns 0 or TL_EUSAGE (recorded). */
static inline int tl_moe_kernel_supports(const tl_moe_shape *s)
{
    int rc = tl_moe_shape_check(s);
    if (rc) return rc;
    if (s->hidden % TL_MOE_K_ALIGN)
        return tl_error(TL_EUSAGE, "moe kernel", "hidden size %d is not a multiple of %d (the FP8 block, "
                        "INT4 group and K chunk); pad it", s->hidden, TL_MOE_K_ALIGN);
    if (s->width % TL_MOE_K_ALIGN)
        return tl_error(TL_EUSAGE, "moe kernel", "expert width %d is not a multiple of %d (the FP8 block, "
                        "INT4 group and K chunk); pad the expert to %d", s->width, TL_MOE_K_ALIGN,
                        (s->width + TL_MOE_K_ALIGN - 1) / TL_MOE_K_ALIGN * TL_MOE_K_ALIGN);
    if (s->dtype == TL_MOE_FP8 && (s->hidden > 8192 || s->width > 8192))
        return tl_error(TL_EUSAGE, "moe kernel", "fp8 keeps at most 64 scale groups per row (K <= 8192)");
    if (s->n_shared)
        return tl_error(TL_EUSAGE, "moe kernel", "shared experts are not fused into this kernel (run them as a "
                        "dense GEMM); use --shared 0 for the GPU check");
    return 0;
}

/* The most tiles a worklist of this shape can have: floor(M*k / 16) + min(E, M*k). */
static inline long long tl_moe_max_tiles(int tokens, int k, int n_experts)
{
    long long edges = (long long)tokens * k;
    return edges / TL_MOE_TILE_M + (edges < n_experts ? edges : n_experts);
}

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
} tl_moe_gpu_api;
extern const tl_moe_gpu_api *const tl_moe_gpu_kernels;

#ifdef __cplusplus
}
#endif

#endif
