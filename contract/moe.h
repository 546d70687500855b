/* contract/moe.h: the fused MoE op's contract, which the kernel (kernels/moe.h), the reference
 * (reference/moe.h) and the model (simulator/moe.h) each read, and none of them another:
 * its shape and checks, its data types as numerics storages, the layouts of its inputs and output,
 * bytes per element, and the kernel's tiling geometry. Plain C for host and device code: the types
 * and macros are usable anywhere, the static inline functions on the host (tl_moe_kernel_supports
 * records an error); contract/moe.c holds the rest (host only).
 *
 * The function (one MoE FFN layer, routed experts, optional shared experts):
 *   for each token t and slot s < k:  e = topk_ids[t*k+s], w = topk_w[t*k+s]
 *     g, u  = x_t . W1[e][gate rows]^T,  x_t . W1[e][up rows]^T      (stage 1, K = hidden)
 *     a     = Q2(bf16(silu(g) * u))                                    (the stage-1 output)
 *     y_ts  = a . W2[e]^T                                              (stage 2, K = width)
 *   out_t = sum_{s = 0..k-1, in slot order} (w * y_ts)  [+ sum over shared experts of y_t]
 * Q2 is the re-quantization of the stage-2 input into the stage-1 input's storage: fp8's 1x128
 * groups (E4M3FN, float32 scales), the MX types' MXFP8 (E4M3FN, one E8M0 per 1x32, the OCP floor
 * rule: tl_quant_mx_scale / tl_quant_mx_code of contract/quant.h), the identity for bf16 and
 * a16w4; reference/moe.h says how each side rounds.
 *
 * Data types: their storages (numerics/storage.h; bytes per element and exact sizes come from there):
 *   dtype   weights (W1, W2)                          stage-1 input x      stage-2 input
 *   bf16    bf16                                      bf16                 bf16
 *   fp8     fp8_block128x128: E4M3FN, float32 per     fp8_block128: E4M3FN fp8_block128 (Q2)
 *           128 x 128 [ceil(rows/128)][ceil(cols/128)] float32 per 1x128
 *   a16w4   int4_g128_sym: INT4 two per byte, float32 bf16                 bf16
 *           per 1x128 along K [rows][ceil(cols/128)]
 *   mxfp4   mxfp4: E2M1 two per byte, E8M0 per 1x32   mxfp8_e4m3: E4M3FN, mxfp8_e4m3 (Q2)
 *   mxfp8   mxfp8_e4m3: E4M3FN, E8M0 per 1x32         E8M0 per 1x32        mxfp8_e4m3 (Q2)
 * The stage-1 output buffer is bf16 for every type; the output is float32. The MX types quantize
 * their activations as the seed's MX path does (seed 000: "quantize the activations, run the two
 * expert GEMMs, combine"), so that gfx950's scaled f8f6f4 MFMA takes both operands with their E8M0
 * scales; MXFP8 activations (not MXFP4) for both, one activation format and 3 mantissa bits.
 * Every MXFP8 value is a BF16 value (E8M0 codes 0-2 aside: products under 2^-133), so a kernel
 * without the scaled instruction may multiply their BF16 values instead: the same function.
 *
 * Layouts (row-major, K contiguous; tl_moe_inputs below):
 *   x          [tokens][hidden] bf16 codes (fp8, mxfp4, mxfp8: the values before quantization),
 *              and for fp8 xq [tokens][hidden] E4M3FN codes with xs [tokens][ceil(hidden/128)]
 *              float32 scales; for mxfp4 and mxfp8 xq the E4M3FN codes with xe
 *              [tokens][ceil(hidden/32)] E8M0 scale codes
 *   topk_ids   [tokens][k] int32 expert ids in [0, E), distinct per token; topk_w [tokens][k]
 *              float32 > 0, summing to 1 per token
 *   W1         [E][2 * width][hidden]: rows 0..width-1 the gate projection, width..2*width-1 up
 *   W2         [E][hidden][width]
 *   shared     ws1, ws2 as W1, W2 with n_shared matrices (every token, weight 1)
 *   out        [tokens][hidden] float32
 *   act        (stage 1's output, when asked for) [worklist rows][width] bf16 in worklist order,
 *              padding rows 0 (contract/worklist.h)
 */
#ifndef TL_CONTRACT_MOE_H
#define TL_CONTRACT_MOE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* getenv: tl_moe_prefill_forced */
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../core/tl.h"
#include "../numerics/formats.h"
#include "../numerics/storage.h"

typedef enum { TL_MOE_BF16, TL_MOE_FP8, TL_MOE_A16W4, TL_MOE_MXFP4, TL_MOE_MXFP8, TL_MOE_NDTYPES } tl_moe_dtype;

/* Whether a dtype's activations are MXFP8 (the MX types: mxfp4 and mxfp8). */
static inline int tl_moe_mx_acts(tl_moe_dtype d) { return d == TL_MOE_MXFP4 || d == TL_MOE_MXFP8; }
/* Whether a dtype's activations are E4M3 codes in both stages (stage 1's input xq, and Q2 not the
 * identity: stage 2's input re-quantized by its own kernel): fp8 and the MX types. */
static inline int tl_moe_quantized_acts(tl_moe_dtype d) { return d == TL_MOE_FP8 || tl_moe_mx_acts(d); }

/* "bf16" | "fp8" | "a16w4" | "mxfp4" | "mxfp8"; TL_EUSAGE otherwise (recorded, as --dtype). */
int tl_moe_dtype_parse(const char *s, tl_moe_dtype *out);
/* The name above; "?" for a value outside the enum. */
const char *tl_moe_dtype_name(tl_moe_dtype d);

/* One problem's shape. width is the per-GPU expert width (the model's width / tp). */
typedef struct {
    int tokens;    /* M >= 1 */
    int hidden;    /* H */
    int width;     /* I per GPU */
    int n_experts; /* E (routed) */
    int top_k;     /* k <= E */
    int n_shared;  /* shared experts (width each), 0 = none */
    tl_moe_dtype dtype;
} tl_moe_shape;

/* Checks a shape: tokens in [1, 2^20], hidden and width in [1, 65536], E in [1, 4096], k in [1, E],
 * n_shared in [0, 16], a known dtype (so tokens * k and every weight size fit in size_t).
 * TL_EUSAGE with a message otherwise. */
int tl_moe_shape_check(const tl_moe_shape *s);

/* n_mat matrices of rows x cols in one of the formats above. */
typedef struct {
    tl_moe_dtype dtype;
    int n_mat, rows, cols;
    uint8_t *codes;         /* n_mat * mat_code_bytes */
    size_t mat_code_bytes;  /* bytes of one matrix's codes */
    float *scales;          /* fp8, a16w4: n_mat * mat_scales floats; else NULL */
    uint8_t *e8m0;          /* mxfp4, mxfp8: n_mat * mat_scales bytes; else NULL */
    size_t mat_scales;      /* scale entries of one matrix */
} tl_moe_weights;

typedef struct {
    tl_moe_shape s;
    uint64_t seed;
    uint16_t *x;          /* bf16 codes [tokens][hidden] (fp8: the values before quantization) */
    uint8_t *xq;          /* fp8, mxfp4, mxfp8: E4M3FN codes [tokens][hidden]; else NULL */
    float *xs;            /* fp8 only: scales [tokens][ceil(hidden/128)] */
    uint8_t *xe;          /* mxfp4, mxfp8 only: E8M0 codes [tokens][ceil(hidden/32)] */
    int32_t *topk_ids;    /* [tokens * k] */
    float *topk_w;        /* [tokens * k], positive, summing to 1 per token */
    tl_moe_weights w1, w2;   /* routed experts */
    tl_moe_weights ws1, ws2; /* shared experts (n_mat = n_shared; empty when 0) */
} tl_moe_inputs;

/* The storages of a dtype's weights and of its stage-1 input activations (the table above).
 * An unknown dtype gives bf16's (check the dtype first). */
const tl_storage *tl_moe_weight_storage(tl_moe_dtype d);
const tl_storage *tl_moe_act_storage(tl_moe_dtype d);
/* Bytes of one rows x cols weight matrix's codes and the number of its scale entries in this
 * dtype; tl_moe_weight_matrix_bytes both together, exactly. 0 for an unknown dtype. */
size_t tl_moe_code_bytes(tl_moe_dtype d, int rows, int cols);
size_t tl_moe_scale_count(tl_moe_dtype d, int rows, int cols);
size_t tl_moe_weight_matrix_bytes(tl_moe_dtype d, int rows, int cols);
/* Exact bytes of `rows` activation rows of `cols` values in the stage-1 input storage (codes and
 * scales): fp8 rows x (cols + 4 ceil(cols/128)), mxfp4 and mxfp8 rows x (cols + ceil(cols/32)),
 * bf16 and a16w4 rows x 2 cols. 0 for an unknown dtype. */
size_t tl_moe_act_bytes(tl_moe_dtype d, size_t rows, int cols);
/* Bytes per element, scales included, for whole blocks (the storage's bits / 8), for bandwidth
 * figures and the model: weights bf16 2, fp8 1 + 4/128^2, a16w4 0.5 + 4/128, mxfp4 0.5 + 1/32,
 * mxfp8 1 + 1/32; stage-1 activations fp8 1 + 4/128, mxfp4 and mxfp8 1 + 1/32, bf16 and a16w4 2.
 * 0 for an unknown dtype. */
double tl_moe_weight_bytes_per_elem(tl_moe_dtype d);
double tl_moe_act_bytes_per_elem(tl_moe_dtype d);
/* The element format of both stages' activations after quantization (the stage-1 input, Q2):
 * TL_NF_E4M3FN for fp8, mxfp4 and mxfp8, else TL_NF_BF16. */
tl_numfmt tl_moe_act_format(tl_moe_dtype d);

/* ---- the kernel's tiling geometry (kernels/moe.hip builds with it; the model of this kernel,
 * simulator/moe.c's tl_moe_tilelab_kernel, reads the same values) ---- */
#define TL_MOE_TILE_M 16      /* rows per tile: one 16-row matrix instruction */
#define TL_MOE_S1_THREADS 128 /* stage 1: 4 waves of 32 lanes split K, reduce in shared memory */
#define TL_MOE_S2_THREADS 128 /* stage 2: 4 waves each own TL_MOE_NCOLS columns over the whole K */
#define TL_MOE_S1_MINB 4      /* blocks per SM the stage-1 register budget is cut for (NVIDIA) */
#define TL_MOE_S2_MINB 4      /* the same for stage 2 */
#define TL_MOE_NCOLS 32       /* weight rows one wave multiplies: stage 1 16 gate + 16 up, stage 2 32 */
#define TL_MOE_S1_NB 16       /* stage-1 activation columns (SwiGLU outputs) per work item */
#define TL_MOE_K_ALIGN 128    /* hidden and width must be multiples of this (block, group, chunk) */
#define TL_MOE_QUANT_THREADS 256 /* fp8 stage 2's re-quantization: one block per row, 8 values a thread */
/* Decode: bf16 stage 2 at one token runs moe_gemv_down instead of the GEMM (each tile holds one
 * row, two only if a token repeats an expert). A block is cut into groups of gs threads; a group
 * owns TL_MOE_GEMV_R weight rows (output columns) over the whole K, each thread loading
 * TL_MOE_GEMV_VJ 16-byte vectors of each row at once. A task is one such set of rows for every
 * group of the block; a block takes `tasks` consecutive tasks of one tile in turn, except the last
 * blocks of the grid, which take one each (TL_MOE_GEMV_TAPER_PCT: the share of the tasks in the
 * long blocks). tl_moe_gemv_geometry computes it for the launcher and the model. */
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

/* Tiles of one expert per work item of GEMM stage `stage` (bf16 only; every other dtype 1): the
 * item of the first tile of each run of `group` consecutive tiles of an expert multiplies them all,
 * so each weight byte it loads feeds up to 16 x group rows; the kernel with group 4 keeps 4 tiles'
 * runs and accumulators in registers (TL_MOE_GROUP_MINB blocks per SM, not 4). An expert of t tiles
 * takes ceil(t / group) items, each of which loads the expert's weights (from L2 after the first)
 * and its rows: fewer items load fewer bytes, while a group of 4 keeps half the blocks (bytes in
 * flight) of 1 and 2 on an SM. The thresholds are simulator/moe.c's picks (the model of each group,
 * tl_moe_tilelab_kernel_group, under random routing; tests/test_sim_moe.c holds this function to
 * within 5% of the model's fastest group on DeepSeek-V3.2 and Kimi-K2.6, full width and TP8,
 * M = 64..16384): with the expected rows per expert r = M k / E, group 4 from r >=
 * TL_MOE_GROUP4_ROWS (stage 2 only when its K, the width, is at least 1024: a short K gives an
 * item too little to stream) on models of at least TL_MOE_GROUP4_EXPERTS experts, 2 from r >=
 * TL_MOE_GROUP2_ROWS (random routing gives some experts a second tile from r = 12-16), else 1.
 * Few experts (ZAYA1's 16 and 24) make grids of a few waves, where group 4's halved blocks per SM
 * cost more than its weight reuse gains (the model: up to 65% slower than group 2 there); with
 * group 4 left out the rule stays within 20% of the model's fastest group on them (it follows the
 * waves' rounding, which the rows per expert do not see). */
#define TL_MOE_GROUP_MINB 2
#define TL_MOE_GROUP2_ROWS 16
#define TL_MOE_GROUP4_ROWS 36
#define TL_MOE_GROUP4_EXPERTS 64
static inline int tl_moe_tiles_per_item(const tl_moe_shape *s, int stage)
{
    if (s->dtype != TL_MOE_BF16) return 1;
    const long long rk = (long long)s->tokens * s->top_k, e = s->n_experts > 0 ? s->n_experts : 1;
    if (rk >= (long long)TL_MOE_GROUP4_ROWS * e && e >= TL_MOE_GROUP4_EXPERTS && (stage == 1 || s->width >= 1024)) return 4;
    return rk >= (long long)TL_MOE_GROUP2_ROWS * e ? 2 : 1;
}

/* ---- bf16 stage 1's prefill kernel (kernels/moe_prefill.hip, moe_prefill_s1: sm_90a's wgmma) ----
 * Its geometry, which the model (simulator/moe.c, tl_moe_tilelab_kernel_prefill) reads and the
 * kernel's own MP_* constants must equal: a work item is (group, n-block), a group up to
 * TL_MOE_PF_ROWS consecutive worklist rows of one expert (TL_MOE_PF_ROWS / TL_MOE_TILE_M tiles; an
 * expert of c edges has ceil(c / TL_MOE_PF_ROWS) groups), an n-block TL_MOE_PF_NB SwiGLU columns
 * (TL_MOE_PF_NB gate + TL_MOE_PF_NB up weight rows of W1). K runs in steps of TL_MOE_PF_KSTEP
 * values; each step lands the group's real activation rows (gathered by token; padding rows are
 * not copied) and its 2 TL_MOE_PF_NB weight rows in shared memory, by 16-byte cp.async copies
 * when TL_MOE_PF_CP_ASYNC is 1 (else bulk copies), into a ring of TL_MOE_PF_STAGES steps;
 * TL_MOE_PF_BLOCKS blocks of TL_MOE_PF_THREADS threads an SM. The products are wgmma m64
 * n(2 TL_MOE_PF_NB) k16 from shared memory: 2 x TL_MOE_PF_ROWS x 2 TL_MOE_PF_NB x K flops an
 * item, padding rows included (half that for a group of at most 64 rows, which one of the two
 * computing warpgroups multiplies). A block first finds its group: one warp scans the experts' group
 * counts 32 at a time until it reaches the group (a chain of dependent loads), then its tile's
 * offset and sorted ids (two more) before the first step's copies. */
#define TL_MOE_PF_ROWS 128
#define TL_MOE_PF_NB 64
#define TL_MOE_PF_KSTEP 64
#define TL_MOE_PF_KCHUNK 128 /* hidden must be whole packed chunks of W1 (kernels/moe_pack.h) */
#define TL_MOE_PF_STAGES 7
#define TL_MOE_PF_THREADS 384 /* a producer warpgroup and two computing ones */
#define TL_MOE_PF_BLOCKS 1
#define TL_MOE_PF_CP_ASYNC 1
#define TL_MOE_PF_SCAN 32 /* experts the group scan reads per dependent load */

/* bf16 stage 2's prefill kernel (kernels/moe_prefill.hip, moe_prefill_s2): a work item is (group,
 * n-block) with the group as above and an n-block TL_MOE_PF2_NB output columns (TL_MOE_PF2_NB rows
 * of the expert's W2, stored row-major [hidden][width] as it is for bf16); K = width in steps of
 * TL_MOE_PF_KSTEP values into the same ring (TL_MOE_PF_STAGES steps of TL_MOE_PF_ROWS activation
 * rows + TL_MOE_PF2_NB weight rows, 128 bytes each), both operands landed by the copy engine (tensor
 * copies, 128-byte swizzle; no gather: a group's rows are consecutive rows of the stage-1 output).
 * The activation box is TL_MOE_PF2_ABOX rows: a group of at most TL_MOE_PF2_ABOX rows lands one
 * box (its other computing warpgroup idles), else two; the box's padding rows and any rows past
 * the group (the next expert's, or zeros past the buffer) land too. The products are wgmma m64
 * n(TL_MOE_PF2_NB) k16: 2 x TL_MOE_PF_ROWS x TL_MOE_PF2_NB x width flops an item (half for a group
 * of one box). The group scan is stage 1's; the sorted ids and top-k weights are read by the
 * computing threads beside the first step's copies. */
#define TL_MOE_PF2_NB 128
#define TL_MOE_PF2_ABOX 64

/* fp8's prefill kernels, both stages (kernels/moe_prefill.hip, moe_prefill_fp8<STAGE>): the bf16
 * kernels' items (groups of TL_MOE_PF_ROWS rows; stage 1 n-blocks of TL_MOE_PF_NB SwiGLU columns,
 * stage 2 of TL_MOE_PF2_NB output columns) and ring geometry (a producer warpgroup, two computing
 * ones, one block an SM), with K steps of TL_MOE_PF8_KSTEP E4M3 values: one 1x128 activation scale
 * group and one 128 x 128 weight block a step, whose products (wgmma m64n128k32 E4M3 from shared
 * memory, TL_MOE_PF8_KSTEP / 32 of them a computing warpgroup) are summed in the E4M3 accumulator
 * and then added times the step's two scales into float32 sums. Both operands land by 16-byte
 * cp.async copies (stage 1's A gathered by token, stage 2's the group's own rows of Q2's codes; the
 * weights from their packed chunks, kernels/moe_pack.h), a ring of TL_MOE_PF8_STAGES steps of
 * (TL_MOE_PF_ROWS + 128) x TL_MOE_PF8_KSTEP bytes; padding rows are not copied. */
#define TL_MOE_PF8_KSTEP 128
#define TL_MOE_PF8_STAGES 6
/* Where the device runs wgmma and tensor copies, the fp8 prefill kernels' weights (and stage 2's
 * activation rows) land by tensor copies instead: the launcher uploads a second, rows-layout copy of
 * W1 and W2 for them (boxes of 64 W1 rows and of 128 W2 rows, 128 codes wide, 128-byte swizzle;
 * stage 2's rows in boxes of TL_MOE_PF2_ABOX, padding and rows past the group included);
 * stage 1's gathered rows and every scale stay cp.async's. tl_moe_fp8_tma_off turns it off. */

/* Whether the prefill kernel can run this shape's stage `stage`: bf16 or fp8; bf16 stage 1: hidden
 * a multiple of TL_MOE_PF_KCHUNK and the width (per GPU) of TL_MOE_PF_NB; bf16 stage 2: the width
 * (its K) a multiple of TL_MOE_PF_KSTEP and hidden of TL_MOE_PF2_NB; fp8: K (hidden, then the width)
 * a multiple of TL_MOE_PF8_KSTEP and the n-block's columns (the width, then hidden) of TL_MOE_PF_NB,
 * then TL_MOE_PF2_NB. The build and device must have wgmma too (sm_90a): the caller's check
 * (kernels/moe.hip; the model: an sm_90 preset). */
static inline int tl_moe_prefill_fits(const tl_moe_shape *s, int stage)
{
    if (s->hidden <= 0 || s->width <= 0) return 0;
    if (s->dtype == TL_MOE_FP8) {
        if (stage == 1) return s->hidden % TL_MOE_PF8_KSTEP == 0 && s->width % TL_MOE_PF_NB == 0;
        return stage == 2 && s->width % TL_MOE_PF8_KSTEP == 0 && s->hidden % TL_MOE_PF2_NB == 0;
    }
    if (s->dtype != TL_MOE_BF16) return 0;
    if (stage == 1) return s->hidden % TL_MOE_PF_KCHUNK == 0 && s->width % TL_MOE_PF_NB == 0;
    return stage == 2 && s->width % TL_MOE_PF_KSTEP == 0 && s->hidden % TL_MOE_PF2_NB == 0;
}

/* Whether bf16 stage `stage` runs the prefill kernel (where it fits and the device has wgmma)
 * rather than moe_gemm: the model's pick (simulator/moe.c: each path's model, tl_moe_tilelab_kernel_gemm
 * and tl_moe_tilelab_kernel_prefill, under random routing on the h100 and h200 presets;
 * tests/test_sim_moe.c holds this rule to within 5% of the model's faster path on DeepSeek-V3.2
 * and Kimi-K2.6, full width and TP8, M = 64..16384).
 * Stage 1: the prefill kernel's item streams its expert's 128 weight rows whatever its group's
 * real rows, so it wins once groups fill: from an expected r = M k / E >= TL_MOE_PF_MIN_ROWS
 * routed rows per expert. With its weights by tensor copies (moe_prefill_s1's default form, from
 * W1's rows copy) the models cross between r = 21 (prefill 1-3% slower) and r = 32 (4-49%
 * faster) on all eight (model, TP, preset) pairs, r = 24 within 3% either way (DeepSeek-V3.2 from
 * M = 768, Kimi-K2.6 from M = 1152); with the packed weights by cp.async (tl_moe_bf16_tma_off)
 * they crossed between r = 48 and 64, the switch this rule had before (56).
 * Stage 2: from r >= TL_MOE_PF2_MIN_ROWS where its K, the width, is at least TL_MOE_PF2_LONG_K
 * (full width: the models cross between r = 24 and 40), else from r >= TL_MOE_PF2_MIN_ROWS_SHORT
 * (TP8's width 256: an item of 4 K steps, whose fixed gap - the group scan, a round trip, the
 * epilogue - weighs as much as its copies; the models cross between r = 64 and 96). Here the
 * presets do not agree everywhere: on Kimi-K2.6 at full width and r = 32 (M = 1536) the prefill
 * kernel is 7% slower than moe_gemm on the h100 preset and 18% faster on the h200 one (its waves
 * are bound by HBM, moe_gemm's by the SMs' load streams); the rule takes the prefill kernel
 * there, the test names that point. Widths between 256 and 1024 are unmodelled by the test. */
#define TL_MOE_PF_MIN_ROWS 24
#define TL_MOE_PF2_MIN_ROWS 32
#define TL_MOE_PF2_MIN_ROWS_SHORT 80
#define TL_MOE_PF2_LONG_K 1024
/* fp8 (moe_prefill_fp8, its tensor-copy form: TL_MOE_PF8_*), the same kind of rule from the same
 * models (tl_moe_tilelab_kernel_gemm against the fp8 term of tl_moe_tilelab_kernel_prefill, random
 * routing seed 1, DeepSeek-V3.2 and Kimi-K2.6): stage 1 from r >= TL_MOE_PF8_MIN_ROWS (the
 * prefill kernel 1-5% slower at r = 12, within 3% at r = 16, faster above, full width and TP8, both
 * presets); stage 2 from r >= TL_MOE_PF8_2_MIN_ROWS at a width of at least TL_MOE_PF2_LONG_K, from
 * TL_MOE_PF8_2_MIN_ROWS_SHORT below (TP8's width 256: 2 K steps an item, so the wave gap weighs).
 * There the presets disagree: at full width and r = 24 the prefill kernel is 7% slower than
 * moe_gemm on the h100 preset and 21% faster on the h200 one (Kimi-K2.6 at r = 21: 16% slower, 6%
 * faster); at TP8 DeepSeek-V3.2's M = 3072-4096 (r = 96-128) are 1-2% slower on the h100 preset and
 * 9-13% faster on the h200 one; tests/test_sim_moe.c holds the rule to 15% of the faster path at
 * the points where the presets' faster paths differ, to 5% elsewhere. */
#define TL_MOE_PF8_MIN_ROWS 16
#define TL_MOE_PF8_2_MIN_ROWS 24
#define TL_MOE_PF8_2_MIN_ROWS_SHORT 192
static inline int tl_moe_uses_prefill(const tl_moe_shape *s, int stage)
{
    if (!tl_moe_prefill_fits(s, stage)) return 0;
    const long long rk = (long long)s->tokens * s->top_k, e = s->n_experts > 0 ? s->n_experts : 1;
    const int long_k = s->width >= TL_MOE_PF2_LONG_K;
    if (s->dtype == TL_MOE_FP8)
        return rk >= (long long)(stage == 1 ? TL_MOE_PF8_MIN_ROWS : long_k ? TL_MOE_PF8_2_MIN_ROWS : TL_MOE_PF8_2_MIN_ROWS_SHORT) * e;
    const int min_rows = stage == 1 ? TL_MOE_PF_MIN_ROWS : long_k ? TL_MOE_PF2_MIN_ROWS : TL_MOE_PF2_MIN_ROWS_SHORT;
    return rk >= (long long)min_rows * e;
}

/* TILELAB_MOE_PREFILL, the override of tl_moe_uses_prefill for timing both paths on one shape
 * (A/B), read by the launcher (kernels/moe.hip) and by the model's front end (ops/moe.c) alike:
 * 1 or 0 when it is "1" or "0" (the prefill kernels on or off where they exist and fit), else -1.
 * Host code only. */
static inline int tl_moe_prefill_forced(void)
{
    const char *v = getenv("TILELAB_MOE_PREFILL");
    return v && strcmp(v, "1") == 0 ? 1 : v && strcmp(v, "0") == 0 ? 0 : -1;
}

/* TILELAB_MOE_FP8_TMA=0: fp8's prefill kernels read the packed weights by cp.async (and stage 2
 * its activation rows too) instead of the weights' rows copy and stage 2's rows by tensor copies,
 * for timing both forms (A/B); the launcher (kernels/moe.hip) and the model (simulator/moe.c) read
 * it alike. 1 when it is "0", else 0. Host code only. */
static inline int tl_moe_fp8_tma_off(void)
{
    const char *v = getenv("TILELAB_MOE_FP8_TMA");
    return v && strcmp(v, "0") == 0;
}
/* TILELAB_MOE_BF16_TMA=0: the same for bf16 stage 1's prefill kernel (moe_prefill_s1), whose
 * tensor-copy form lands W1's gate and up rows from a rows-layout copy of W1 (its gathered rows stay
 * cp.async's). */
static inline int tl_moe_bf16_tma_off(void)
{
    const char *v = getenv("TILELAB_MOE_BF16_TMA");
    return v && strcmp(v, "0") == 0;
}

/* The most tiles a worklist of this shape can have: floor(M*k / 16) + min(E, M*k). */
static inline long long tl_moe_max_tiles(int tokens, int k, int n_experts)
{
    long long edges = (long long)tokens * k;
    return edges / TL_MOE_TILE_M + (edges < n_experts ? edges : n_experts);
}
/* The most prefill groups (tl_moe_uses_prefill) a worklist of this shape can have: floor(M*k /
 * TL_MOE_PF_ROWS) + min(E, M*k); the prefill kernel's grid height. */
static inline long long tl_moe_max_groups(int tokens, int k, int n_experts)
{
    long long edges = (long long)tokens * k;
    return edges / TL_MOE_PF_ROWS + (edges < n_experts ? edges : n_experts);
}

#ifdef __cplusplus
}
#endif

#endif
