/* kernels/moe_launch.h: what the fused MoE kernel's files share (private to kernels/moe*.hip).
 *
 * The files, one per kernel: moe_sort.hip (the worklist), moe_gemm.hip (both GEMM stages),
 * moe_gemv.hip (bf16 stage 2 at one token), moe_requant.hip (stage 2's FP8 input), moe_combine.hip
 * (the per-token sum), moe_pack.hip (the weights' packing at upload) and moe.hip (the device
 * buffers, the order of the launches and the exported tl_moe_gpu_kernels table). Each kernel file
 * exports one host launch wrapper, declared here; moe.hip calls only these.
 *
 * Launch wrappers: host code, enqueue on stream `st` (0: the default stream), return 0 or a
 * recorded TL_EFAIL (the launch's error; core/tl.h) and never synchronize. Their pointers are
 * device memory, sized as the kernel's comment says.
 */
#ifndef TL_KERNELS_MOE_LAUNCH_H
#define TL_KERNELS_MOE_LAUNCH_H

#include "gpu.h"
#include "mma.h"
#include "moe.h"
#include "moe_pack.h" /* the packed weights' index functions */

#include <type_traits>

/* The host pass (and device targets without matrix-core code in kernels/mma.h): kernel bodies
 * must parse, never run. */
#if defined(TL_MMA_TARGET_GENERIC)
#define MOE_NO_DEVICE 1
#endif

/* TL_MOE_SCALED_MX: the MX types multiply their MXFP8 activation codes and their weight codes on
 * gfx950's scaled f8f6f4 MFMA, each operand's E8M0 block scales fed to the instruction
 * (moe_gemm.hip); stage 2's re-quantization then writes codes and scales (moe_requant.hip). Without
 * it (NVIDIA, gfx942) they read the activations' exact BF16 values (the launcher's upload; the
 * re-quantization writes its round trip as BF16) and dequantize the weights to BF16 in registers. */
#if defined(TL_MMA_TARGET_GFX950)
#define TL_MOE_SCALED_MX 1
#else
#define TL_MOE_SCALED_MX 0
#endif

enum { DT_BF16 = TL_MOE_BF16, DT_FP8 = TL_MOE_FP8, DT_A16W4 = TL_MOE_A16W4, DT_MXFP4 = TL_MOE_MXFP4,
       DT_MXFP8 = TL_MOE_MXFP8 };

/* The lane runs of the GEMM's layout 0, per dtype (the packing follows them): KRUN = K values one
 * lane reads per chunk (W_VEC x 16 bytes of weight codes), U = chunks in flight per wave, A_FP8 =
 * activations are E4M3 codes (else bf16). bf16 and fp8 read 32 bytes a lane, so 4 lanes read 128
 * contiguous bytes of a weight row: faster than 16-byte runs with the same bytes in flight, whose
 * 64-byte pieces kept the L2 busy (bench/journal/moe-kernel.md, lane runs). */
template <int DT> struct Fmt0;
template <> struct Fmt0<DT_BF16> { enum { KRUN = 16, U = 1, A_FP8 = 0, W_VEC = 2 }; }; /* 128 bytes of a row per 4 lanes */
template <> struct Fmt0<DT_FP8> { /* KRUN 32: a chunk is one 128 group */
    enum { KRUN = 32, U = 1, A_FP8 = 1, W_VEC = 2 };
};
template <> struct Fmt0<DT_A16W4> { enum { KRUN = 32, U = 1, A_FP8 = 0, W_VEC = 1 }; };
template <> struct Fmt0<DT_MXFP4> { enum { KRUN = 32, U = 1, A_FP8 = 0, W_VEC = 1 }; };
template <> struct Fmt0<DT_MXFP8> { enum { KRUN = 16, U = 2, A_FP8 = 0, W_VEC = 1 }; };

/* Bytes of one weight element (INT4 / FP4: half a byte, written as the divisor 2). */
#define W_BYTES(DT, k) ((DT) == DT_BF16 ? 2 * (k) : ((DT) == DT_FP8 || (DT) == DT_MXFP8) ? (k) : (k) / 2)

/* Packed weights (kernels/moe_pack.h has the layout and its index functions). tl_moe_gpu_open
 * stores W1 and W2 (but bf16's W2) in groups of NCOLS rows, the rows one wave multiplies, each
 * group contiguous in the order the lanes load it, so each load instruction of a wave reads
 * TL_WAVE x 16 contiguous bytes and a wave streams one region instead of a 32-64 byte run of each
 * of 32 rows 14 KB apart (DeepSeek-V3.2 stage 1); 4-8% faster on the H200
 * (bench/journal/moe-kernel.md, packed weights). Pack: a lane's packed run, the lane layout with
 * the longest runs (bf16: layout 2's 64 bytes; the others' runs are the same in both layouts). */
template <int DT> struct Pack {
    enum { KRUN = DT == DT_BF16 ? 32 : Fmt0<DT>::KRUN, W_VEC = DT == DT_BF16 ? 4 : Fmt0<DT>::W_VEC, RUN_BYTES = 16 * W_VEC };
    static_assert(W_BYTES(DT, KRUN) == RUN_BYTES, "a packed run is KRUN codes in W_VEC vectors");
};
/* Whether a stage's weights are packed: all but bf16's W2, which moe_gemv_down reads row by row
 * (bf16 stage 2 at one token: packed, its 4-vector runs would lie 512 bytes apart, measured 11%
 * slower, more than the GEMM's stage 2 gains). */
#define PACKED(DT, STAGE) ((STAGE) == 1 || (DT) != DT_BF16)

/* Calls f(std::integral_constant<int, DT>{}) for the kernels' dtype of a tl_moe dtype (TL_EUSAGE,
 * recorded, for an unknown one). */
template <class F>
static int by_dtype(int dtype, F f)
{
    switch (dtype) {
    case TL_MOE_BF16: return f(std::integral_constant<int, DT_BF16>{});
    case TL_MOE_FP8: return f(std::integral_constant<int, DT_FP8>{});
    case TL_MOE_A16W4: return f(std::integral_constant<int, DT_A16W4>{});
    case TL_MOE_MXFP4: return f(std::integral_constant<int, DT_MXFP4>{});
    case TL_MOE_MXFP8: return f(std::integral_constant<int, DT_MXFP8>{});
    default: return tl_error(TL_EUSAGE, "moe gpu", "unknown dtype");
    }
}

/* The arguments of moe_gemm and moe_gemv_down, filled by the launcher and passed by value. */
struct GemmArgs {
    const uint8_t *A;        /* stage 1: x (bf16 or e4m3 codes); stage 2: activation rows (the MX
                                types: their exact bf16 values) */
    const float *a_scale;    /* fp8: A's 1x128 group scales */
    const uint8_t *a_mx;     /* the MX types: the activations' E4M3FN codes [rows][K] (TL_MOE_SCALED_MX) */
    const uint8_t *a_e8m0;   /* ... and their E8M0 scales [rows][K / 32] */
    const uint8_t *W;        /* codes of all experts */
    const float *w_scale;    /* fp8 block scales, a16w4 group scales */
    const uint8_t *w_e8m0;   /* mx scales */
    size_t w_mat_bytes, w_mat_scales;
    int K;                   /* reduction length (hidden, then width) */
    int n_out;               /* output columns (width, then hidden) */
    const int32_t *sorted_ids, *tile_expert, *tile_rows, *tile_off, *n_tiles;
    const int32_t *expert_count; /* edges per expert (the sort's), read by moe_prefill_s1 */
    int n_experts;
    int max_tiles, top_k;
    const float *topk_w;
    uint16_t *act;           /* stage 1 output [rows][width] bf16 */
    float *ybuf;             /* stage 2 output [edges][hidden] */
    unsigned long long *trace; /* NULL, or 3 words per block: start and end clock, SM (tl_moe_gpu_trace) */
    long long resident;      /* blocks of this kernel the device holds at once (SMs x occupancy) */
};

/* moe_gemv_down's block b starts at task gemv_first_task(b, big, tasks) (host and device). */
static __host__ __device__ __forceinline__ long long gemv_first_task(long long b, long long big, int tasks)
{
    return b < big ? b * tasks : big * tasks + (b - big);
}

/* A stage's grid (host): moe_gemm's, or moe_gemv_down's when tl_moe_uses_gemv. moe_gemm has one
 * block per work item (tile, n-block), stage 1's n-blocks S1_NB activation columns, stage 2's one
 * NCOLS block per wave; its block b is item (b % max_tiles, b / max_tiles). */
struct StageGrid {
    bool gemv;
    tl_moe_gemv_geom geom; /* moe_gemv_down */
    long long per_tile;    /* moe_gemm: items per tile; moe_gemv_down: tasks per tile */
    long long big;         /* moe_gemv_down: blocks of geom.tasks tasks; those after take one */
    long long blocks;
};

/* moe_sort.hip: the worklist of `edges` top-k ids (each in [0, n_experts), n_experts <= 4096)
 * into sorted_ids, tile_expert, tile_rows and n_tiles (kernels/moe.h), with expert_count and
 * tile_off (n_experts each) as its scratch. Two kernels, one block then one wave per expert. */
int tl_moe_launch_sort(const int32_t *ids, int edges, int n_experts, int32_t *expert_count, int32_t *tile_off,
                       int32_t *n_tiles, int32_t *sorted_ids, int32_t *tile_expert, int32_t *tile_rows,
                       hipStream_t st);
/* moe_gemm.hip: stage `stage` (1 or 2) of dtype `dtype` (TL_MOE_*) on `blocks` blocks
 * (StageGrid); group: tiles of one expert per item, 1, 2 or 4 (tl_moe_tiles_per_item; bf16 only,
 * 1 otherwise); dependent: a programmatic dependent launch (gpu.h, tl_launch). */
int tl_moe_launch_gemm(int dtype, int stage, const GemmArgs &a, long long blocks, int group, bool dependent,
                       hipStream_t st);
/* moe_prefill.hip: bf16 stage 1 on sm_90a's warpgroup MMA, items of up to 128 rows of one expert x
 * 64 SwiGLU columns; `groups` >= the device's group count (sum over experts of ceil(edges / 128)).
 * TL_EUSAGE (recorded) in a build without wgmma or for a hidden size not a multiple of 128 or a
 * width not a multiple of 64. */
/* tmap_w1: NULL (the packed W1 a.W by cp.async), or the tensor map (CUtensorMap, 128 bytes, host
 * memory) of W1's rows copy [E x 2 width][hidden] bf16 in boxes of 64 rows x 64 values (128-byte
 * swizzle), whose boxes then carry the weights. */
int tl_moe_launch_prefill_s1(const GemmArgs &a, const void *tmap_w1, int groups, hipStream_t st);
/* moe_prefill.hip: bf16 stage 2 on sm_90a's warpgroup MMA, items of up to 128 rows of one expert x
 * 128 output columns into a.ybuf (then tl_moe_launch_combine, as after moe_gemm); `groups` as
 * above; tmap_act and tmap_w2: the tensor maps (CUtensorMap, 128 bytes each, host memory, copied
 * into the launch) of the activation rows [rows][width] bf16 in boxes of TL_MOE_PF2_ABOX rows x
 * TL_MOE_PF_KSTEP values and of W2 [E x hidden][width] bf16 in boxes of TL_MOE_PF2_NB rows x
 * TL_MOE_PF_KSTEP values, 128-byte swizzle (kernels/moe.hip encodes them). TL_EUSAGE (recorded) in a
 * build without wgmma or for a width not a multiple of 64 or a hidden size not of 128. */
int tl_moe_launch_prefill_s2(const GemmArgs &a, const void *tmap_act, const void *tmap_w2, int groups, hipStream_t st);
/* moe_prefill.hip: fp8 stage `stage` (1 or 2) on sm_90a's E4M3 warpgroup MMA (moe_prefill_fp8),
 * the bf16 kernels' items; stage 1 reads a.A = x's E4M3 codes and a.a_scale their 1x128 scales,
 * stage 2 Q2's codes and scales (tl_moe_launch_requant first), with the weights' 128 x 128 block
 * scales; `groups` as above. tmap_w NULL: the packed weights a.W by cp.async; else the tensor map
 * (CUtensorMap, 128 bytes, host memory) of the weights' rows copy (stage 1 W1 [E x 2 width][hidden]
 * in boxes of 64 rows, stage 2 W2 [E x hidden][width] in boxes of 128 rows), and for stage 2
 * tmap_act the activation codes' (act_q [rows][width], boxes of 64 rows), boxes 128 bytes wide in
 * the 128-byte swizzle. TL_EUSAGE (recorded) in a build without wgmma, for a K not a multiple of
 * 128 or columns not of the n-block's (64, then 128), or stage 2 with tmap_w and no tmap_act. */
int tl_moe_launch_prefill_fp8(int stage, const GemmArgs &a, const void *tmap_w, const void *tmap_act, int groups,
                              hipStream_t st);
/* moe_gemv.hip: moe_gemv_down on the StageGrid g (g.gemv), an ordinary launch. */
int tl_moe_launch_gemv_down(const GemmArgs &a, const StageGrid &g, hipStream_t st);
/* moe_requant.hip: the activation rows [rows][width] bf16 of act to E4M3 codes act_q [rows][width]
 * and their 1x128 scales act_s [rows][width / 128]; padding rows and rows past n_tiles untouched. */
int tl_moe_launch_requant(const uint16_t *act, const int32_t *sorted_ids, const int32_t *n_tiles, int rows,
                          int width, uint8_t *act_q, float *act_s, hipStream_t st);
/* moe_requant.hip: the MX types' Q2, the activation rows of act to MXFP8 in 1x32 blocks (the OCP
 * floor rule, contract/quant.h): with TL_MOE_SCALED_MX their E4M3FN codes act_q [rows][width] and
 * E8M0 scales act_e [rows][width / 32], else their values as bf16 act_b [rows][width] (exact but
 * for E8M0 codes 0-2); padding rows and rows past n_tiles untouched. */
int tl_moe_launch_requant_mx(const uint16_t *act, const int32_t *sorted_ids, const int32_t *n_tiles, int rows,
                             int width, uint8_t *act_q, uint8_t *act_e, uint16_t *act_b, hipStream_t st);
/* moe_combine.hip: out [tokens][hidden] = the sum of each token's k rows of ybuf
 * [tokens * k][hidden] in slot order; launched dependent on the kernel before it. */
int tl_moe_launch_combine(const float *ybuf, int tokens, int k, int hidden, float *out, hipStream_t st);
/* moe_pack.hip: one expert's matrix of stage `stage` from the rows layout in src into the packed
 * layout in dst (n_rows rows of K codes of dtype `dtype`, n_out = width; kernels/moe_pack.h). */
int tl_moe_launch_pack(int dtype, const uint8_t *src, uint8_t *dst, int stage, int K, int n_rows, int n_out);

#endif
