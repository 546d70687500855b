/* kernels/moe.hip: the fused MoE kernel (sort, stage 1 gate+up+SwiGLU, stage 2 down+combine) and
 * its host launcher. The contract, layouts and what runs where: kernels/moe.h and reference/moe.h.
 *
 * Why the loops look the way they do: at low M the kernel is a weight stream (DeepSeek-V3.2 stage 1
 * at M = 1 reads 8 experts x 4096 x 7168 bf16 = 470 MB and does almost no arithmetic), so what
 * matters is bytes in flight and how the DRAM sees them: every lane issues 16-byte loads of weights
 * straight into registers, 32 or 64 bytes of each of its weight rows at once (64 when the tile's
 * rows 8-15 are padding and their activation registers are free: bf16, and fp8's stage 1 as two
 * 32-byte chunks), 4 blocks per SM so that one block's loads are in flight while another starts,
 * computes or reduces, and a grid of (tile, n-block) items that covers every SM even at M = 1
 * (stage 1: 8 tiles x 128 n-blocks). The weights are packed when they are uploaded (all but bf16's
 * W2; kernels/moe_pack.h): the 32 rows a wave multiplies are one contiguous region in the order
 * the lanes load them, so each load instruction reads a wave x 16 contiguous bytes (NVIDIA: 512),
 * and stage 1's 528 resident blocks keep 528 sequential streams open where the rows layout kept
 * 528 x 32 rows, 14 KB apart (DeepSeek-V3.2 bf16). Measured on the H200 (session 9, bench/results/h200_moe_packed_ab_*): stage
 * 1 at M = 1 bf16 115.3 -> 107.4 us, fp8 63.9 -> 61.3; at M = 8..256 bf16 4.48-4.56 -> 4.66-4.67
 * TB/s, fp8 4.38-4.48 -> 4.56-4.63; a16w4, mxfp4 and mxfp8 4-8% faster; fp8 stage 2 2-6% faster
 * (M = 1 39.7 -> 38.8 us). There is no explicit cross-item prefetch: an L2 bulk prefetch and a per-lane L2
 * prefetch of the next chunks were tried and made every shape slower. Nor does M = 1 gain from
 * splitting K into more, shorter blocks so that the last round ends evenly (K in 4 parts, stage 1
 * summing them in its last block, stage 2 in the combine; session 5): stage 1 114.7 -> 122.6 us in
 * bf16 and 64.3 -> 82.3 in fp8, stage 2 68.2 -> 67.8 and 41.9 -> 47.9 (bench/results/
 * h200_moe_variantD_*; likely each extra block paying its prologue's dependent loads again), nor
 * from splitting only the last items (session 7, variant I: fp8 65.2 -> 68.3..75.6 us, bf16 115.3 ->
 * 115.9..119.5; traced, a half item took 58% of a whole one's time and the SMs still ended 14 us
 * apart: block times vary with the SM and the moment more than with their bytes), nor from two items
 * per block in one round (variant J: fp8 -0.9%, bf16 +1.3%; the SMs' speeds differ by up to 20%, which
 * a fixed share cannot follow) or the row ids fetched a round trip earlier (variant K: fp8 +1..3%),
 * nor from a persistent grid taking K-part units from a counter with the next unit's prologue and
 * first weights prefetched (session 8, variant L: whole items bf16 +0.2%, fp8 +7%; 4 parts bf16 +6%,
 * fp8 +37%; traced, the SMs still ended 13 us apart and each unit boundary cost a barrier), nor from
 * 8 waves x 2 blocks per SM, whose items end twice as soon (variant N: bf16 -0.3%, fp8 +4.2%).
 * Staging the weights in
 * shared memory was measured slower on the H200 three times (a per-lane cp.async ring; a persistent
 * producer/consumer ring filled by TMA bulk copies, 3.15 against 4.09 TB/s; the same ring filled by
 * one warp's cp.async): bench/results/h200_moe_notes.md has every variant and its measurements.
 * Stage 2's combine stays a separate, dependent kernel: fused into the GEMM's blocks (each block's
 * fence, then a per-(token, chunk) count, the last block summing the slots) it was slower at every M
 * (session 8, variant M: fp8 M = 1 38.8 -> 41.0 us, bf16 decode 60.7 -> 68.6).
 * One case runs another kernel: bf16 stage 2 at one token (moe_gemv_down, a dot product per weight
 * row in small, tapered blocks; kernels/moe.h, tl_moe_uses_gemv).
 */
#include "gpu.h"
#include "mma.h"
#include "moe.h"
#include "moe_pack.h" /* the packed weights' index functions */
#include "../numerics/blockfp8.h" /* the FP8 scale group and amax clamp */
#include "../numerics/codes.h"    /* per-element BF16, E4M3, E2M1, E8M0 conversions */
#include "../numerics/mx.h"       /* the MX block */

#include <math.h>
#include <type_traits>
#include <stdlib.h>

/* ---- compile-time layout of one wave's fragments (see kernels/mma.h for the registers) ------- */
#if defined(TL_MMA_TARGET_SM80)
#define LANE_ROWS 2  /* A rows a lane holds: g and g + 8 */
#define FRAG_N 8     /* columns of one fragment */
#define BF16_VPL 4   /* k values per lane per bf16 instruction */
#define NATIVE_FP8 TL_MMA_HAS_FP8
#define FP8_VPL 8    /* k values per lane per fp8 instruction */
#define SWAP_FP8 NATIVE_FP8 /* fp8 layout 2 multiplies weights x activations (Acc) */
#elif defined(TL_MMA_TARGET_GFX942)
#define LANE_ROWS 1
#define FRAG_N 16
#define BF16_VPL 4
#define NATIVE_FP8 0 /* gfx942 FP8 is FNUZ: decode the OCP E4M3FN inputs to bf16 instead */
#define SWAP_FP8 0
#elif defined(TL_MMA_TARGET_GFX950)
#define LANE_ROWS 1
#define FRAG_N 16
#define BF16_VPL 8
#define NATIVE_FP8 1 /* gfx950 FP8 is OCP E4M3, the inputs' format: v_mfma_scale_f32_16x16x128_f8f6f4 */
#define FP8_VPL 32   /* one instruction takes a lane's whole 32-byte run */
#define SWAP_FP8 0   /* 16x16 fragments: layout 0 only (LANE_ROWS 1 holds no padding row) */
#else /* host pass (and unsupported device targets): bodies must parse, never run */
#define LANE_ROWS 1
#define FRAG_N 16
#define BF16_VPL 4
#define NATIVE_FP8 0
#define SWAP_FP8 0
#define MOE_NO_DEVICE 1
#endif

/* Stage 1 (K = hidden is long, N per item small): 4 waves split K and reduce in shared memory (4
 * blocks per SM; against 8 waves x 2 blocks on the H200: fp8 +4-5%, bf16 the same).
 * Stage 2 (K = width is short): 4 waves each own NCOLS output columns over the whole K, so there is
 * no reduction and a block's fixed costs are spread over 4 x 32 columns (measured on the H200: 2-7%
 * faster than 2 waves x 8 blocks per SM). */
#define S1_THREADS TL_MOE_S1_THREADS
#define S2_THREADS TL_MOE_S2_THREADS
#define S2_MINB TL_MOE_S2_MINB
/* blocks per SM the register budget is cut for (NVIDIA); HIP reads the number as waves per EU */
#if defined(TL_GPU_AMD)
#define MOE_MINB(n) 1
#else
#define MOE_MINB(n) (n)
#endif
#define MOE_MAX_KG 64 /* fp8: K / 128 groups a block keeps scales for (K <= 8192) */
#define NCOLS TL_MOE_NCOLS
#define NF (NCOLS / FRAG_N) /* fragments per wave */
#define S1_NB TL_MOE_S1_NB

enum { DT_BF16 = TL_MOE_BF16, DT_FP8 = TL_MOE_FP8, DT_A16W4 = TL_MOE_A16W4, DT_MXFP4 = TL_MOE_MXFP4,
       DT_MXFP8 = TL_MOE_MXFP8 };

/* Per dtype: KRUN = K values one lane reads per chunk (W_VEC x 16 bytes of weight codes), U = chunks
 * in flight per wave, A_FP8 = activations are E4M3 codes (else bf16). bf16 and fp8 read 32 bytes a
 * lane, so 4 lanes read 128 contiguous bytes of a weight row: measured on the H200 (run 9), bf16
 * stage 1 went from 4.07 to 4.23 TB/s at M = 64 against 16-byte runs with two chunks in flight (the
 * same bytes in flight); ncu had the L2 at 97% busy with 64-byte pieces per row. */
template <int DT> struct Fmt0;
template <> struct Fmt0<DT_BF16> { enum { KRUN = 16, U = 1, A_FP8 = 0, W_VEC = 2 }; }; /* 128 bytes of a row per 4 lanes */
template <> struct Fmt0<DT_FP8> { /* KRUN 32: a chunk is one 128 group */
    enum { KRUN = 32, U = 1, A_FP8 = 1, W_VEC = 2 };
};
template <> struct Fmt0<DT_A16W4> { enum { KRUN = 32, U = 1, A_FP8 = 0, W_VEC = 1 }; };
template <> struct Fmt0<DT_MXFP4> { enum { KRUN = 32, U = 1, A_FP8 = 0, W_VEC = 1 }; };
template <> struct Fmt0<DT_MXFP8> { enum { KRUN = 16, U = 2, A_FP8 = 0, W_VEC = 1 }; };
/* Fmt<DT, V>: the lane layout V of a dtype. V = 0: Fmt0 above. V = 2 ("half"): the tile's rows 8-15
 * are padding, so a lane's second activation row is never loaded and its registers carry twice the
 * weight bytes instead. bf16: 64 bytes of each weight row a lane (measured on the H200, stage 1
 * M = 8 4.26 -> 4.32 TB/s, stage 2 M = 64 4.03 -> 4.27). fp8 (NVIDIA, stage 1): two 128 groups in
 * flight (U = 2), multiplied as weights x activations (Acc below) so that its accumulators hold no
 * padding row; with activations x weights it spilled 200-350 bytes. Measured on the H200 (session
 * 4, one call): stage 1 M = 8 / 64 / 256 4.15 -> 4.36, 4.36 -> 4.47, 4.27 -> 4.41 TB/s, M = 1
 * unchanged; in stage 2 it spilled 64 bytes and M = 1 went 39.0 -> 41.3 us, so stage 2 keeps
 * layout 0. (A software-pipelined loop, next chunk's loads issued before this chunk's products,
 * was 2x slower for bf16 with half the bytes in flight.) */
template <int DT, int V> struct Fmt : Fmt0<DT> {};
#define HALF_LAYOUT(DT, STAGE) ((DT) == DT_BF16 || ((DT) == DT_FP8 && SWAP_FP8 && (STAGE) == 1))
template <> struct Fmt<DT_BF16, 2> { enum { KRUN = 32, U = 1, A_FP8 = 0, W_VEC = 4 }; };
template <> struct Fmt<DT_FP8, 2> { enum { KRUN = 32, U = 2, A_FP8 = 1, W_VEC = 2 }; };

/* Bytes of one weight element (INT4 / FP4: half a byte, written as the divisor 2). */
#define W_BYTES(DT, k) ((DT) == DT_BF16 ? 2 * (k) : ((DT) == DT_FP8 || (DT) == DT_MXFP8) ? (k) : (k) / 2)

#if defined(TL_GPU_AMD) /* -nogpulib builds have no device math library: builtins only */
#define moe_expf __builtin_expf
#define moe_fabsf __builtin_fabsf
#define moe_fmaxf __builtin_fmaxf
#define wave_ballot(p) ((unsigned long long)__ballot(p))
#define wave_popc(m) __popcll(m)
typedef unsigned long long wave_mask;
#else
#define moe_expf expf
#define moe_fabsf fabsf
#define moe_fmaxf fmaxf
#define wave_ballot(p) __ballot_sync(0xffffffffu, (p))
#define wave_popc(m) __popc(m)
typedef unsigned int wave_mask;
#endif

/* ---- small device helpers (the per-element format conversions are numerics/codes.h's) ---------- */
static __device__ __forceinline__ uint32_t pack2(uint32_t lo, uint32_t hi) { return lo | (hi << 16); }
#if defined(TL_MMA_TARGET_SM80)
/* a x b + c on two BF16 lanes (sm_80+), rounded to nearest even */
static __device__ __forceinline__ uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
#endif


/* ---- fragments from a lane's K run (the permuted-K trick) ----------------------------------
 * A lane holds `KRUN` consecutive k values of its rows/column as 32-bit pairs of bf16 (or quads
 * of e4m3). Instruction step s takes the s-th group of values in order; on every target each lane
 * thereby feeds its own k-group (kgrp) of every instruction, A and B alike. */
static __device__ __forceinline__ void fill_a_bf16(tl_frag_a_bf16 *a, const uint32_t *r0, const uint32_t *r1, int s)
{
#if defined(TL_MMA_TARGET_SM80)
    a->r[0] = r0[2 * s];
    a->r[1] = r1[2 * s];
    a->r[2] = r0[2 * s + 1];
    a->r[3] = r1[2 * s + 1];
#elif defined(TL_MMA_TARGET_GFX942)
    (void)r1;
    uint32_t w0 = r0[2 * s], w1 = r0[2 * s + 1];
    a->v = (tl_i16x4){(short)(w0 & 0xFFFF), (short)(w0 >> 16), (short)(w1 & 0xFFFF), (short)(w1 >> 16)};
#elif defined(TL_MMA_TARGET_GFX950)
    (void)r1;
    typedef short s8 __attribute__((ext_vector_type(8)));
    s8 t;
    for (int i = 0; i < 4; i++) {
        t[2 * i] = (short)(r0[4 * s + i] & 0xFFFF);
        t[2 * i + 1] = (short)(r0[4 * s + i] >> 16);
    }
    a->v = __builtin_bit_cast(tl_bf16x8, t);
#else
    (void)a, (void)r0, (void)r1, (void)s;
#endif
}
static __device__ __forceinline__ void fill_b_bf16(tl_frag_b_bf16 *b, const uint32_t *c, int s)
{
#if defined(TL_MMA_TARGET_SM80)
    b->r[0] = c[2 * s];
    b->r[1] = c[2 * s + 1];
#else
    fill_a_bf16((tl_frag_a_bf16 *)b, c, c, s);
#endif
}
#if NATIVE_FP8
/* The same for e4m3 codes (quads per 32-bit word), FP8_VPL k values a lane per instruction. */
static __device__ __forceinline__ void fill_a_fp8(tl_frag_a_fp8 *a, const uint32_t *r0, const uint32_t *r1, int s)
{
#if defined(TL_MMA_TARGET_SM80)
    a->r[0] = r0[2 * s];
    a->r[1] = r1[2 * s];
    a->r[2] = r0[2 * s + 1];
    a->r[3] = r1[2 * s + 1];
#else
    (void)r1;
    const uint32_t *q = r0 + 8 * s;
    a->v = (tl_i32x8){(int)q[0], (int)q[1], (int)q[2], (int)q[3], (int)q[4], (int)q[5], (int)q[6], (int)q[7]};
#endif
}
static __device__ __forceinline__ void fill_b_fp8(tl_frag_b_fp8 *b, const uint32_t *c, int s)
{
#if defined(TL_MMA_TARGET_SM80)
    b->r[0] = c[2 * s];
    b->r[1] = c[2 * s + 1];
#else
    fill_a_fp8((tl_frag_a_fp8 *)b, c, c, s);
#endif
}
#endif

/* ---- the two GEMM stages ------------------------------------------------------------------- */
struct GemmArgs {
    const uint8_t *A;        /* stage 1: x (bf16 or e4m3 codes); stage 2: activation rows */
    const float *a_scale;    /* fp8: A's 1x128 group scales */
    const uint8_t *W;        /* codes of all experts */
    const float *w_scale;    /* fp8 block scales, a16w4 group scales */
    const uint8_t *w_e8m0;   /* mx scales */
    size_t w_mat_bytes, w_mat_scales;
    int K;                   /* reduction length (hidden, then width) */
    int n_out;               /* output columns (width, then hidden) */
    const int32_t *sorted_ids, *tile_expert, *tile_rows, *tile_off, *n_tiles;
    int max_tiles, top_k;
    const float *topk_w;
    uint16_t *act;           /* stage 1 output [rows][width] bf16 */
    float *ybuf;             /* stage 2 output [edges][hidden] */
    unsigned long long *trace; /* NULL, or 3 words per block: start and end clock, SM (tl_moe_gpu_trace) */
    long long resident;      /* blocks of this kernel the device holds at once (SMs x occupancy) */
};

/* One chunk of one wave: loads (phase 1) then multiplies (phase 2). */
template <int DT, int V> struct Chunk {
    enum { KRUN = Fmt<DT, V>::KRUN, A_VEC = Fmt<DT, V>::A_FP8 ? KRUN / 16 : KRUN / 8, W_VEC = Fmt<DT, V>::W_VEC };
    uint4 w[NF][W_VEC];
    uint4 a[LANE_ROWS][A_VEC];
};

/* Packed weights (kernels/moe_pack.h has the layout and its index functions). tl_moe_gpu_open
 * stores W1 and W2 (but bf16's W2) in groups of NCOLS rows, the rows one wave multiplies, each
 * group contiguous in the order the lanes load it, so each load instruction of a wave reads
 * TL_WAVE x 16 contiguous bytes and a wave streams one region, where the rows layout had every lane
 * read a 32-64 byte run of each of its rows (DeepSeek-V3.2 stage 1: 32 rows 14 KB apart a block).
 * Measured on the H200 (session 9; the loads alone: bench/results/h200_moe_pattern_layouts.*):
 * DeepSeek-V3.2 stage 1 at M = 1 bf16 115.0 -> 107.7 us, fp8 58.5 -> 56.2; at 64 experts' worth
 * 4.48 -> 4.58 TB/s (the kernels: h200_moe_packed_ab_*, stage 1, and h200_moe_packed_w2_ab_*,
 * stage 2). Pack: a lane's packed run, the lane layout with the longest runs (bf16: layout 2's 64
 * bytes; the others' runs are the same in both layouts). */
template <int DT> struct Pack {
    enum { KRUN = DT == DT_BF16 ? 32 : Fmt0<DT>::KRUN, W_VEC = DT == DT_BF16 ? 4 : Fmt0<DT>::W_VEC, RUN_BYTES = 16 * W_VEC };
    static_assert(W_BYTES(DT, KRUN) == RUN_BYTES, "a packed run is KRUN codes in W_VEC vectors");
};
#if !defined(MOE_NO_DEVICE) /* the host pass's fragment geometry is a placeholder */
static_assert((TL_WAVE == 32 ? 8 : 16) == FRAG_N && NF * FRAG_N == NCOLS && NF / 2 * FRAG_N == S1_NB,
              "kernels/moe_pack.h describes this target's fragments and groups");
#endif
/* Whether a stage's weights are packed: all but bf16's W2, which moe_gemv_down reads row by row
 * (bf16 stage 2 at one token; packed, its 4-vector runs 512 bytes apart made it 61.4 -> 68.0 us on
 * the H200, session 9, while the GEMM's stage 2 gained 0.7-3.6%). */
#define PACKED(DT, STAGE) ((STAGE) == 1 || (DT) != DT_BF16)
/* R for layout V: packed chunks hold R of its chunks (rows layout: R = 1). */
template <int DT, int V, int STAGE> struct Runs {
    enum { R = PACKED(DT, STAGE) ? Pack<DT>::KRUN / Fmt<DT, V>::KRUN : 1 };
    static_assert(R == 1 || (R == 2 && Pack<DT>::W_VEC == 2 * Fmt<DT, V>::W_VEC), "a packed run splits in whole vectors");
};
/* The first k of this lane's run in chunk c (CK = 4 KRUN of layout V). */
template <int DT, int V, int STAGE>
static __device__ __forceinline__ int lane_k(int c, int kgrp)
{
    return tl_moe_lane_k(c, kgrp, Fmt<DT, V>::KRUN, Runs<DT, V, STAGE>::R);
}

/* A 16-byte weight vector that is read once, with the streaming hint (NVIDIA: ld.global.cs, evict
 * first); AMD: a plain load (not tuned). When it pays is in k_loop. */
static __device__ __forceinline__ uint4 load_once(const uint8_t *p)
{
#if defined(TL_GPU_AMD) || defined(MOE_NO_DEVICE)
    return *(const uint4 *)p;
#else
    return __ldcs((const uint4 *)p);
#endif
}
/* Chunk c's weight codes of this lane. Packed: w[0] = its group's first byte + 16 x lane. Rows
 * layout: w[f] = the lane's weight row in fragment f, whose run from lane_k on it reads, so the 4
 * lanes of a row read 64 W_VEC contiguous bytes. (Spreading a lane's vectors so that each load
 * instruction covers 64 contiguous bytes of the rows layout was measured on the H200 and was 5-8%
 * slower.) */
template <int DT, int V, int STAGE>
static __device__ __forceinline__ void load_weights(Chunk<DT, V> &ch, const uint8_t *const *w, int c, int kgrp,
                                                    bool evict_first)
{
    enum { W_VEC = Chunk<DT, V>::W_VEC, R = Runs<DT, V, STAGE>::R };
#pragma unroll
    for (int f = 0; f < NF; f++)
#pragma unroll
        for (int v = 0; v < W_VEC; v++) {
            const uint8_t *a = PACKED(DT, STAGE)
                                   ? w[0] + tl_moe_packed_vec(c, f, v, W_VEC, R, Pack<DT>::RUN_BYTES, TL_WAVE)
                                   : w[f] + W_BYTES(DT, (lane_k<DT, V, STAGE>(c, kgrp))) + 16 * v;
            ch.w[f][v] = evict_first ? load_once(a) : *(const uint4 *)a;
        }
}
/* The chunk's activation runs of this lane's rows: KRUN values from k0 = lane_k on. */
template <int DT, int V>
static __device__ __forceinline__ void load_acts(Chunk<DT, V> &ch, const GemmArgs &p, const int *arow, int k0)
{
    enum { ABYTES = Fmt<DT, V>::A_FP8 ? 1 : 2, A_VEC = Chunk<DT, V>::A_VEC };
#pragma unroll
    for (int r = 0; r < LANE_ROWS; r++)
#pragma unroll
        for (int v = 0; v < A_VEC; v++) {
            if (V == 2 && r > 0) /* layout 2: the lane's second row (g + 8) is padding */
                ch.a[r][v] = make_uint4(0, 0, 0, 0);
            else if (arow[r] >= 0)
                ch.a[r][v] = *(const uint4 *)(p.A + ((size_t)arow[r] * p.K + k0) * ABYTES + 16 * v);
            else
                ch.a[r][v] = make_uint4(0, 0, 0, 0);
        }
}

/* Weight codes of fragment f as bf16 pairs (KRUN/2 words); MX scales applied. Exact (numerics/
 * codes.h), but for mxfp8 blocks of E8M0 code 0-2 (amax under 2^-116), whose products can fall
 * between BF16 subnormal steps: both paths round those to nearest even (NVIDIA in its packed FMA,
 * the generic path by tl_code_bf16_from_f32 for scales under 2^-124 only), so they agree bit for bit. */
template <int DT, int V>
static __device__ __forceinline__ void weights_bf16(const Chunk<DT, V> &ch, int f, float mx_scale, uint32_t *out)
{
    const uint32_t *q = (const uint32_t *)&ch.w[f][0];
    if (DT == DT_BF16) {
        for (int i = 0; i < Fmt<DT, V>::KRUN / 2; i++) out[i] = q[i];
    } else if (DT == DT_FP8 || DT == DT_MXFP8) {
#if defined(TL_MMA_TARGET_SM80)
        if (DT == DT_MXFP8) { /* NVIDIA: two codes as BF16 values x 2^-120 (integer operations), then
                               * two packed FMAs: x 2^120, x the MX scale; exact but for E8M0 codes
                               * 0-2, where the product is rounded to BF16's subnormal step (RNE) */
            const uint32_t unscale = tl_code_bf16x2_splat(TL_CODE_E4M3_BF16_UNSCALE),
                           scale = tl_code_bf16x2_splat(tl_code_bf16_from_exact_f32(mx_scale)), minus0 = TL_CODE_BF16X2_MINUS0;
#pragma unroll
            for (int i = 0; i < Fmt<DT, V>::KRUN / 2; i++) {
                const uint32_t h = (q[i / 2] >> (16 * (i % 2))) & 0xFFFFu;
                out[i] = bf16x2_fma(bf16x2_fma(tl_code_e4m3x2_bf16_2m120(h), unscale, minus0), scale, minus0);
            }
            return;
        }
#endif
#pragma unroll
        for (int i = 0; i < Fmt<DT, V>::KRUN / 2; i++) {
            uint32_t b0 = (q[i / 2] >> (16 * (i % 2))) & 0xFF, b1 = (q[i / 2] >> (16 * (i % 2) + 8)) & 0xFF;
            float v0 = tl_code_e4m3_to_f32(b0), v1 = tl_code_e4m3_to_f32(b1);
            if (DT == DT_MXFP8 && mx_scale < 0x1p-124f) { /* E8M0 codes 0-2: products may need rounding */
                out[i] = pack2(tl_code_bf16_from_f32(v0 * mx_scale), tl_code_bf16_from_f32(v1 * mx_scale));
                continue;
            }
            if (DT == DT_MXFP8) v0 *= mx_scale, v1 *= mx_scale;
            out[i] = pack2(tl_code_bf16_from_exact_f32(v0), tl_code_bf16_from_exact_f32(v1));
        }
    } else {
#if defined(TL_MMA_TARGET_SM80)
        if (DT == DT_A16W4) { /* NVIDIA: the nibbles n become the BF16 128 + n, then one packed FMA
                               * subtracts 128 + 8: n - 8, exact. Measured on the H200 (run 24):
                               * a16w4 18-19% faster than int-to-float per nibble (stage 1 at M = 1
                               * 96.8 -> 79.4 us, M = 64 2609 -> 2117) */
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const uint32_t byte = (q[i / 4] >> (8 * (i % 4))) & 0xFFu;
                out[i] = bf16x2_fma(tl_code_int4x2_bf16_plus128(byte), TL_CODE_BF16X2_ONE, TL_CODE_INT4_BF16X2_MINUS_OFFSET);
            }
            return;
        }
        if (DT == DT_MXFP4) { /* NVIDIA: the codes as BF16 values x 2^-126 (integer operations), then
                               * two packed FMAs: x 2^126, x the MX scale; exact (the products are
                               * BF16 values; 0.5 x 2^-127 is a BF16 subnormal) */
            const uint32_t unscale = tl_code_bf16x2_splat(TL_CODE_E2M1_BF16_UNSCALE),
                           scale = tl_code_bf16x2_splat(tl_code_bf16_from_exact_f32(mx_scale)), minus0 = TL_CODE_BF16X2_MINUS0;
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const uint32_t byte = (q[i / 4] >> (8 * (i % 4))) & 0xFFu;
                out[i] = bf16x2_fma(bf16x2_fma(tl_code_e2m1x2_bf16_2m126(byte), unscale, minus0), scale, minus0);
            }
            return;
        }
#endif
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t byte = (q[i / 4] >> (8 * (i % 4))) & 0xFF, lo = byte & 15u, hi = byte >> 4;
            float v0, v1;
            if (DT == DT_A16W4) {
                v0 = (float)((int)lo - (int)TL_CODE_INT4_ZERO);
                v1 = (float)((int)hi - (int)TL_CODE_INT4_ZERO);
            } else {
                v0 = tl_code_e2m1_to_f32(lo) * mx_scale;
                v1 = tl_code_e2m1_to_f32(hi) * mx_scale;
            }
            out[i] = pack2(tl_code_bf16_from_exact_f32(v0), tl_code_bf16_from_exact_f32(v1));
        }
    }
}

/* A run of one row as bf16 pairs. */
template <int DT, int V>
static __device__ __forceinline__ void act_bf16(const Chunk<DT, V> &ch, int r, uint32_t *out)
{
    if (Fmt<DT, V>::A_FP8) {
        const uint32_t *q = (const uint32_t *)&ch.a[r][0];
#pragma unroll
        for (int i = 0; i < Fmt<DT, V>::KRUN / 2; i++) {
            uint32_t b0 = (q[i / 2] >> (16 * (i % 2))) & 0xFF, b1 = (q[i / 2] >> (16 * (i % 2) + 8)) & 0xFF;
            out[i] = pack2(tl_code_bf16_from_exact_f32(tl_code_e4m3_to_f32(b0)),
                           tl_code_bf16_from_exact_f32(tl_code_e4m3_to_f32(b1)));
        }
    } else {
        const uint32_t *q = (const uint32_t *)&ch.a[r][0];
#pragma unroll
        for (int i = 0; i < Fmt<DT, V>::KRUN / 2; i++) out[i] = q[i];
    }
}

/* The accumulators of layout V: N fragments of TL_FRAG_C_COUNT values a lane. fp8's layout 2
 * (SWAP) multiplies weights x activations (A = 16 weight rows, B = 8 tokens: the tile's rows
 * 0-7), so NF / 2 fragments cover the wave's NCOLS weight rows and every value is a real output,
 * where A = activations would spend half of them on the padding rows 8-15. A lane's weight rows
 * are the same in both: fragment f's row 8 f + lane / 4 is A row lane / 4 + 8 (f % 2) of swapped
 * fragment f / 2. */
template <int DT, int V> struct Acc {
    enum { SWAP = DT == DT_FP8 && V == 2 && SWAP_FP8, N = SWAP ? NF / 2 : NF };
};
/* Where value r of accumulator fragment j of this lane belongs: the item row (tile row; + 16 m for
 * the second tile of a pair) and the output column f * FRAG_N + col of the wave's NCOLS. */
template <int DT, int V>
static __device__ __forceinline__ void acc_elem(int lane, int j, int r, int *row, int *f, int *col)
{
#if defined(TL_MMA_TARGET_SM80)
    if (Acc<DT, V>::SWAP) { /* C = 16 weight rows x 8 tokens */
        *row = 2 * (lane % 4) + (r & 1);
        *f = 2 * j + (r >> 1);
        *col = lane / 4;
        return;
    }
#endif
    *row = tl_frag_c_row(lane, r);
    *f = j;
    *col = tl_frag_c_col(lane, r);
}

/* Multiplies one chunk (MT tiles x NF fragments) into acc. mxs[f]: the MX scale of this lane's
 * weight row in fragment f (1 for the other formats). FP8 and INT4 sum each chunk (one 128 group)
 * separately and add it times scale(m, f, r), the product of the group scales of C element r. */
template <int DT, int V, int MT, class Scale>
static __device__ __forceinline__ void mma_chunk(const Chunk<DT, V> (&ch)[MT], tl_frag_c (&acc)[MT][Acc<DT, V>::N],
                                                 const float (&mxs)[NF], Scale scale)
{
    enum { KRUN = Fmt<DT, V>::KRUN, NA = Acc<DT, V>::N };
    const bool scaled_after = DT == DT_FP8 || DT == DT_A16W4; /* per-chunk partial sums */
    tl_frag_c part[MT][NA];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NA; j++) tl_frag_zero(&part[m][j]);
#if SWAP_FP8
    if constexpr (Acc<DT, V>::SWAP) { /* A = weight rows of fragments 2j and 2j + 1, B = row g's run */
#pragma unroll
        for (int m = 0; m < MT; m++) {
            const uint32_t *a0 = (const uint32_t *)&ch[m].a[0][0];
#pragma unroll
            for (int s = 0; s < KRUN / 8; s++) {
                tl_frag_b_fp8 fb;
                fb.r[0] = a0[2 * s];
                fb.r[1] = a0[2 * s + 1];
#pragma unroll
                for (int j = 0; j < NA; j++) {
                    const uint32_t *w0 = (const uint32_t *)&ch[0].w[2 * j][0];
                    const uint32_t *w1 = (const uint32_t *)&ch[0].w[2 * j + 1][0];
                    tl_frag_a_fp8 fa;
                    fa.r[0] = w0[2 * s];
                    fa.r[1] = w1[2 * s];
                    fa.r[2] = w0[2 * s + 1];
                    fa.r[3] = w1[2 * s + 1];
                    tl_mma_fp8(&part[m][j], &fa, &fb);
                }
            }
        }
    } else
#endif
#if NATIVE_FP8
    if (DT == DT_FP8) {
#pragma unroll
        for (int m = 0; m < MT; m++) {
            const uint32_t *a0 = (const uint32_t *)&ch[m].a[0][0];
            const uint32_t *a1 = (const uint32_t *)&ch[m].a[LANE_ROWS - 1][0];
#pragma unroll
            for (int s = 0; s < KRUN / FP8_VPL; s++) {
                tl_frag_a_fp8 fa;
                fill_a_fp8(&fa, a0, a1, s);
#pragma unroll
                for (int f = 0; f < NF; f++) {
                    tl_frag_b_fp8 fb;
                    fill_b_fp8(&fb, (const uint32_t *)&ch[0].w[f][0], s);
                    tl_mma_fp8(&part[m][f], &fa, &fb);
                }
            }
        }
    } else
#endif
    {
        uint32_t ab[MT][LANE_ROWS][KRUN / 2];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int r = 0; r < LANE_ROWS; r++) act_bf16<DT, V>(ch[m], r, ab[m][r]);
#pragma unroll
        for (int f = 0; f < NF; f++) {
            uint32_t wbf[KRUN / 2];
            weights_bf16<DT, V>(ch[0], f, mxs[f], wbf);
#pragma unroll
            for (int s = 0; s < KRUN / BF16_VPL; s++) {
                tl_frag_b_bf16 fb;
                fill_b_bf16(&fb, wbf, s);
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    tl_frag_a_bf16 fa;
                    fill_a_bf16(&fa, ab[m][0], ab[m][LANE_ROWS - 1], s);
                    tl_mma_bf16(scaled_after ? &part[m][f] : &acc[m][f], &fa, &fb);
                }
            }
        }
    }
    if (scaled_after) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NA; j++)
#pragma unroll
                for (int r = 0; r < TL_FRAG_C_COUNT; r++) acc[m][j].v[r] += part[m][j].v[r] * scale(m, j, r);
    }
}

template <int DT, int STAGE, int MT>
__global__ void __launch_bounds__(STAGE == 1 ? S1_THREADS : S2_THREADS, MOE_MINB(STAGE == 1 ? TL_MOE_S1_MINB : S2_MINB)) moe_gemm(GemmArgs p)
{
#if defined(MOE_NO_DEVICE)
    (void)p;
#else
    enum {
        THREADS = STAGE == 1 ? S1_THREADS : S2_THREADS,
        NW = THREADS / TL_WAVE,               /* waves per block */
        NB = STAGE == 1 ? S1_NB : NW * NCOLS, /* output columns per work item */
        SPLIT_K = STAGE == 1,                 /* waves split K (else they split N) */
        ROWS = MT * TL_MOE_TILE_M             /* rows of an item: one tile, or two of one expert */
    };
    __shared__ int s_idx[ROWS], s_edge[ROWS], s_tile[MT];
    __shared__ float red[SPLIT_K ? NW * ROWS * NCOLS : 1];
    /* fp8: the item rows' activation scales and the item's weight-block scales, per 128 group */
    __shared__ float s_as[DT == DT_FP8 ? ROWS * MOE_MAX_KG : 1];
    __shared__ float s_ws[DT == DT_FP8 ? (SPLIT_K ? 2 : NW) * MOE_MAX_KG : 1];

    /* One round trip gives the tile count, this tile's expert and its row count; the first chunk's
     * weights (which depend on the expert only) are requested before the row indices (except fp8
     * and mxfp8: k_loop). */
    const unsigned long long t_start = p.trace ? tl_gpu_clock() : 0;
    tl_grid_dep_launch(); /* a dependent combine may be scheduled now (it waits for this grid) */
    const int tile = blockIdx.x % p.max_tiles, nb = blockIdx.x / p.max_tiles;
    const int n_tiles = *p.n_tiles, e = p.tile_expert[tile], tile_rows = p.tile_rows[tile];
    if (tile >= n_tiles) return;
    int tile2 = -1; /* MT = 2: the expert's tiles pair up (0,1), (2,3), ...; odd ones ride along */
    if (MT == 2) {
        if ((tile - p.tile_off[e]) & 1) return;
        if (tile + 1 < n_tiles && p.tile_expert[tile + 1] == e) tile2 = tile + 1;
    }
    const int tid = threadIdx.x, lane = tl_lane(), wave = tl_wave_id();
    const int n0 = nb * NB, kgroups = p.K / TL_BFP8_GROUP;
    const int nw0 = SPLIT_K ? n0 : n0 + wave * NCOLS; /* this wave's first output column (split N) */
    /* this lane's k-group (the quarter of a chunk's k it loads) and column (kernels/moe_pack.h) */
    const int kgrp = tl_moe_lane_kgrp(TL_WAVE, lane), bcol = tl_moe_lane_col(TL_WAVE, lane);
    const size_t row_bytes = W_BYTES(DT, (size_t)p.K);
    /* this wave's group of rows (stage 1: item nb; stage 2: rows nw0..); the lane's weight row in
     * fragment f; where its weights are: packed, its first 16 bytes of the group; rows, its rows */
    const size_t group = STAGE == 1 ? nb : nw0 / NCOLS;
    int wn[NF];
    const uint8_t *wsrc[PACKED(DT, STAGE) ? 1 : NF];
    const uint8_t *wexp = p.W + (size_t)e * p.w_mat_bytes;
    if (PACKED(DT, STAGE)) wsrc[0] = wexp + group * NCOLS * row_bytes + 16 * lane;
#pragma unroll
    for (int f = 0; f < NF; f++) {
        wn[f] = (int)tl_moe_group_row(STAGE, group, f, bcol, p.n_out, TL_WAVE);
        if (!PACKED(DT, STAGE)) wsrc[f] = wexp + (size_t)wn[f] * row_bytes;
    }

    /* The item's rows (every thread calls it once): sorted ids -> s_idx / s_edge, fp8 scales into
     * shared memory, this lane's activation rows into arow. One barrier (fp8: two). */
    int arow[MT][LANE_ROWS];
    auto fetch_rows = [&]() {
        if (tid < ROWS) {
            const int m = tid / TL_MOE_TILE_M, t = m ? tile2 : tile;
            int id = t < 0 ? -1 : p.sorted_ids[t * TL_MOE_TILE_M + tid % TL_MOE_TILE_M];
            s_edge[tid] = id;
            s_idx[tid] = id < 0 ? -1 : (STAGE == 1 ? id / p.top_k : t * TL_MOE_TILE_M + tid % TL_MOE_TILE_M);
            if (tid % TL_MOE_TILE_M == 0) s_tile[m] = t;
        }
        __syncthreads();
        if (DT == DT_FP8) {
            for (int i = tid; i < ROWS * kgroups; i += THREADS) {
                const int r = i / kgroups, g = i % kgroups, ai = s_idx[r];
                s_as[r * MOE_MAX_KG + g] = ai < 0 ? 0.0f : p.a_scale[(size_t)ai * kgroups + g];
            }
            const int nh = SPLIT_K ? 2 : NW;
            for (int i = tid; i < nh * kgroups; i += THREADS) {
                const int h = i / kgroups, g = i % kgroups;
                /* stage 1: h = 1 is the up projection's block; stage 2: wave h's block */
                const int rb = (SPLIT_K ? (h ? p.n_out + n0 : n0) : n0 + h * NCOLS) / TL_BFP8_GROUP;
                s_ws[h * MOE_MAX_KG + g] = p.w_scale[(size_t)e * p.w_mat_scales + (size_t)rb * kgroups + g];
            }
            __syncthreads();
        }
#pragma unroll
        for (int m = 0; m < MT; m++) {
#if defined(TL_MMA_TARGET_SM80)
            arow[m][0] = s_idx[m * TL_MOE_TILE_M + lane / 4];
            arow[m][LANE_ROWS - 1] = s_idx[m * TL_MOE_TILE_M + lane / 4 + 8];
#else
            arow[m][0] = s_idx[m * TL_MOE_TILE_M + lane % 16];
#endif
        }
    };

    /* The K loop of layout V (Fmt<DT, V>): the wave's chunks c_first, c_first + c_step, ... (split
     * K: the waves interleave, so that a block reads long runs of each row), U chunks loaded at
     * once, then multiplied. The first U chunks' weights are requested before fetch_rows (bf16 stage
     * 1 at M = 1024: 4856 -> 4122 us on the H200, the other shapes +0.3-0.8%). Then the item's
     * results leave the registers: stage 2 writes each edge's weighted row, stage 1 its partial sums
     * for the block's reduction. */
    auto k_loop = [&](auto layout) {
        constexpr int V = decltype(layout)::value;
        enum { KRUN = Fmt<DT, V>::KRUN, U = Fmt<DT, V>::U, CK = 4 * KRUN, NA = Acc<DT, V>::N };
        tl_frag_c acc[MT][NA];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NA; j++) tl_frag_zero(&acc[m][j]);
        const int nchunks = p.K / CK, c_first = SPLIT_K ? wave : 0, c_step = SPLIT_K ? NW : 1;
        const float *ws = p.w_scale + (size_t)e * p.w_mat_scales;
        /* Weights are loaded evict-first (ld.global.cs), except in stage 2 when all its items fit in
         * one wave of resident blocks. Measured on the H200 with the read flush (session 4, each pair
         * in one call, two calls): stage 1 M = 8 bf16 847 -> 827 us, fp8 471 -> 454; stage 2 M = 8
         * 428 -> 421 / 238 -> 234; stage 1 M = 1 -0.7%; M >= 64 (session 3) bf16 stage 1 4.37 -> 4.48
         * TB/s, fp8 3.99 -> 4.20; but stage 2 at M = 1 (448 items, one wave) 1.5-2.5% slower in bf16
         * and 0.5% in fp8, hence the exception. (With the write flush, session 3 saw M = 8 lose 2%.)
         * Plain loads everywhere (session 5, one call, twice) were slower at every M tried (M = 64,
         * 256, 1024) but bf16 stage 2 at M = 1024 (-0.3%): stage 1 fp8 1750 -> 1948, 1793 -> 2036,
         * 3250 -> 3474 us, bf16 3348 -> 3501, 3387 -> 3604, 4086 -> 4408. */
        const bool evict_first = STAGE == 1 || (long long)n_tiles * (p.n_out / NB) > p.resident;
        Chunk<DT, V> ch[U][MT];
        auto load_weights_at = [&](int c0) {
#pragma unroll
            for (int u = 0; u < U; u++)
                if (c0 + u * c_step < nchunks)
                    load_weights<DT, V, STAGE>(ch[u][0], wsrc, c0 + u * c_step, kgrp, evict_first);
        };
        /* fp8 and mxfp8 keep their scale prologue's registers instead (measured on the H200: early
         * weights made fp8 spill and run 2-4% slower; session 5, early in fp8's layout 2 only: 4
         * bytes of spills instead of 12, still 1.4-3.3% slower at M = 8..256 and equal at M = 1;
         * session 9, packed, fp8 stage 1: M = 1 -0.5%, M = 256 +0.35%, variant O) */
        constexpr bool early = DT != DT_FP8 && DT != DT_MXFP8;
        if (early) load_weights_at(c_first);
        tl_grid_dep_wait(); /* the activations (and fp8 scales) are the previous kernel's output */
        fetch_rows();
        for (int c0 = c_first; c0 < nchunks; c0 += c_step * U) {
            if (!early || c0 != c_first) load_weights_at(c0);
#pragma unroll
            for (int u = 0; u < U; u++)
                if (c0 + u * c_step < nchunks)
#pragma unroll
                    for (int m = 0; m < MT; m++)
                        load_acts<DT, V>(ch[u][m], p, arow[m], lane_k<DT, V, STAGE>(c0 + u * c_step, kgrp));
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int c = c0 + u * c_step, k = lane_k<DT, V, STAGE>(c, kgrp),
                          g128 = (int)((unsigned)k / TL_BFP8_GROUP); /* k >= 0 */
                if (c >= nchunks) break;
                float mxs[NF];
#pragma unroll
                for (int f = 0; f < NF; f++)
                    mxs[f] = (DT == DT_MXFP4 || DT == DT_MXFP8)
                                 ? tl_code_e8m0_to_f32(p.w_e8m0[(size_t)e * p.w_mat_scales + (size_t)wn[f] * (p.K / TL_MX_BLOCK) +
                                                     (unsigned)k / TL_MX_BLOCK])
                                 : 1.0f;
                mma_chunk<DT, V, MT>(ch[u], acc, mxs, [&](int m, int j, int r) {
                    int row, f, col;
                    acc_elem<DT, V>(lane, j, r, &row, &f, &col);
                    if (DT == DT_FP8) /* one 128x128 block per fragment, one A scale per row */
                        return s_as[(m * TL_MOE_TILE_M + row) * MOE_MAX_KG + g128] *
                               s_ws[(SPLIT_K ? (f >= NF / 2) : wave) * MOE_MAX_KG + g128];
                    return ws[(size_t)(wn[f] - bcol + col) * kgroups + g128];
                });
            }
        }
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NA; j++)
#pragma unroll
                for (int r = 0; r < TL_FRAG_C_COUNT; r++) {
                    int row, f, col;
                    acc_elem<DT, V>(lane, j, r, &row, &f, &col);
                    if (!SPLIT_K) { /* stage 2: the wave's columns are complete: the edge's weighted row */
                        const int edge = s_edge[m * TL_MOE_TILE_M + row];
                        if (edge >= 0)
                            p.ybuf[(size_t)edge * p.n_out + nw0 + f * FRAG_N + col] = p.topk_w[edge] * acc[m][j].v[r];
                    } else { /* stage 1: this wave's partial sums, reduced by the block below */
                        red[(wave * ROWS + m * TL_MOE_TILE_M + row) * NCOLS + f * FRAG_N + col] = acc[m][j].v[r];
                    }
                }
    };
    /* Layout 2 (bf16 and NVIDIA's fp8, one tile per item): when the tile's rows 8-15 are padding
     * (tile_rows <= 8: every tile of balanced routing up to M = 256 on DeepSeek's 256 experts), the
     * lanes skip those rows' registers and hold twice the weight bytes in flight instead (fp8: two
     * 128 groups, with weights x activations so that no accumulator holds a padding row). */
    if constexpr (MT == 1 && HALF_LAYOUT(DT, STAGE)) {
        if (tile_rows <= TL_MOE_TILE_M / 2) k_loop(std::integral_constant<int, 2>{});
        else k_loop(std::integral_constant<int, 0>{});
    } else {
        (void)tile_rows;
        k_loop(std::integral_constant<int, 0>{});
    }

    if (SPLIT_K) { /* stage 1: reduce the waves' partial sums, then SwiGLU */
        __syncthreads();
        for (int i = tid; i < ROWS * S1_NB; i += THREADS) {
            const int row = i / S1_NB, c = i % S1_NB, t = s_tile[row / TL_MOE_TILE_M];
            if (t < 0) continue; /* no partner tile */
            uint16_t *dst = p.act + (size_t)(t * TL_MOE_TILE_M + row % TL_MOE_TILE_M) * p.n_out + n0 + c;
            if (s_idx[row] < 0) { /* a padding row (layout 2 of fp8 never wrote its red[] rows) */
                *dst = 0;
                continue;
            }
            float gs = 0.0f, us = 0.0f;
            for (int w = 0; w < NW; w++) {
                gs += red[(w * ROWS + row) * NCOLS + c];
                us += red[(w * ROWS + row) * NCOLS + S1_NB + c];
            }
            *dst = (uint16_t)tl_code_bf16_from_f32(gs / (1.0f + moe_expf(-gs)) * us);
        }
    }
    if (p.trace) { /* block-uniform: the block's end is its last thread's */
        __syncthreads();
        if (tid == 0) {
            p.trace[3 * (size_t)blockIdx.x] = t_start;
            p.trace[3 * (size_t)blockIdx.x + 1] = tl_gpu_clock();
            p.trace[3 * (size_t)blockIdx.x + 2] = (unsigned long long)tl_gpu_sm_id();
        }
    }
#endif
}

/* ---- decode: bf16 stage 2 at one token (kernels/moe.h, TL_MOE_GEMV_*) ------------------------ */
/* At one token each of the k tiles holds one row, and the GEMM's stage 2 is one round of 448 items
 * of 512 KB on 528 slots (DeepSeek-V3.2): in the H200 traces of session 4 the SMs' last blocks end
 * between 49.9 and 64.8 us. Here a group of gs threads owns 2 weight rows over the whole K (every
 * thread's 4 16-byte vectors of each row loaded at once), a block up to 8 such tasks in turn, and
 * the last 15% of the tasks go one to a block, so that those short blocks, issued last, fill the
 * SMs that end early. After each task's products its registers at once take the next task's
 * weights, which stream while the task's sums are reduced (shuffles, then shared memory when gs
 * spans waves) and written. Measured on the H200 (session 6, variant H,
 * bench/results/h200_moe_notes.md): 66.5 -> 62.1 us against the GEMM in one call; this form 60.8
 * us in run 19. The same design was slower for stage 1 and for fp8
 * (bench/results/h200_moe_variantH_gemv.patch). */
static __device__ __forceinline__ void bf16x8_f32(uint4 q, float *out)
{
    const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        out[2 * i] = tl_code_bits_f32(u[i] << 16);
        out[2 * i + 1] = tl_code_bits_f32(u[i] & 0xFFFF0000u);
    }
}

/* Grid (tl_moe_gemv_geometry): blocks [0, big) take `tasks` consecutive tasks (tile-major; tasks
 * divides a tile's tasks, so no block spans two tiles), the blocks after them one each; a task is
 * (tile, a block-wide set of 2 x blockDim / gs output columns). Writes ybuf[edge][n] = topk_w[edge]
 * x (act row . W2[e] row n) for each of the tile's rows (one per token that chose expert e: at one
 * token, one row unless the token repeats an expert). */
static __host__ __device__ __forceinline__ long long gemv_first_task(long long b, long long big, int tasks)
{
    return b < big ? b * tasks : big * tasks + (b - big);
}
__global__ void __launch_bounds__(TL_MOE_GEMV_THREADS, MOE_MINB(TL_MOE_GEMV_MINB))
    moe_gemv_down(GemmArgs p, int gs, int tasks, int big)
{
#if defined(MOE_NO_DEVICE)
    (void)p, (void)gs, (void)tasks, (void)big;
#else
    enum { R = TL_MOE_GEMV_R, VJ = TL_MOE_GEMV_VJ };
    __shared__ float red[2][TL_MOE_GEMV_THREADS / TL_WAVE][R];
    const unsigned long long t_start = p.trace ? tl_gpu_clock() : 0;
    tl_grid_dep_launch(); /* the dependent combine may be scheduled now (it waits for this grid) */
    const int outs = (int)blockDim.x / gs * R, per_tile = p.n_out / outs, b = blockIdx.x;
    const int first = (int)gemv_first_task(b, big, tasks);
    if (b >= big) tasks = 1;
    const int tile = first / per_tile, nb0 = first % per_tile;
    /* one round trip: the tile count, the tile's expert and row count, its first row */
    const int n_tiles = *p.n_tiles, e = p.tile_expert[tile], rows = p.tile_rows[tile];
    int edge = p.sorted_ids[tile * TL_MOE_TILE_M];
    if (tile >= n_tiles) return;
    const int tid = threadIdx.x, grp = tid / gs, gl = tid % gs;
    const int nv = p.K / 8; /* 16-byte vectors of a weight row and of an activation row */
    const uint8_t *wexp = p.W + (size_t)e * p.w_mat_bytes;
    auto col_of = [&](int q, int i) { return (nb0 + q) * outs + grp * R + i; }; /* row i of task q */
    uint4 w[R][VJ];
    auto load_task = [&](int q) { /* the thread's vectors gl, gl + gs, ...: one round trip */
#pragma unroll
        for (int i = 0; i < R; i++) {
            const uint8_t *row = wexp + (size_t)col_of(q, i) * nv * 16;
#pragma unroll
            for (int j = 0; j < VJ; j++) {
                const int v = gl + j * gs;
                w[i][j] = v < nv ? load_once(row + 16 * (size_t)v) : make_uint4(0, 0, 0, 0);
            }
        }
    };
    load_task(0);
    for (int r = 0; r < rows; r++) {
        if (r) edge = p.sorted_ids[tile * TL_MOE_TILE_M + r];
        uint4 a[VJ]; /* the activation row's vectors at the same k */
#pragma unroll
        for (int j = 0; j < VJ; j++) {
            const int v = gl + j * gs;
            a[j] = v < nv ? *(const uint4 *)(p.A + ((size_t)(tile * TL_MOE_TILE_M + r) * nv + v) * 16)
                          : make_uint4(0, 0, 0, 0);
        }
        for (int q = 0; q < tasks; q++) {
            float acc[R] = {};
#pragma unroll
            for (int j = 0; j < VJ; j++) {
                float x[8];
                bf16x8_f32(a[j], x);
#pragma unroll
                for (int i = 0; i < R; i++) {
                    float wf[8];
                    bf16x8_f32(w[i][j], wf);
#pragma unroll
                    for (int k = 0; k < 8; k++) acc[i] = fmaf(wf[k], x[k], acc[i]);
                }
            }
            if (q + 1 < tasks) load_task(q + 1);
            else if (r + 1 < rows) load_task(0);
            /* the group's sums in a fixed order: lanes, then (gs > a wave) its waves through
             * shared memory, double-buffered so that one barrier per task suffices */
            const int span = gs < TL_WAVE ? gs : TL_WAVE;
#pragma unroll
            for (int i = 0; i < R; i++)
                for (int m = span / 2; m > 0; m >>= 1) acc[i] += tl_shfl_xor(acc[i], m);
            if (gs > TL_WAVE) {
                float(*rb)[R] = red[(r * tasks + q) & 1];
                if (tl_lane() == 0)
#pragma unroll
                    for (int i = 0; i < R; i++) rb[tl_wave_id()][i] = acc[i];
                __syncthreads();
                if (gl == 0)
#pragma unroll
                    for (int i = 0; i < R; i++) {
                        float sum = 0.0f;
                        for (int wv = 0; wv < gs / TL_WAVE; wv++) sum += rb[tid / TL_WAVE + wv][i];
                        acc[i] = sum;
                    }
            }
            if (gl == 0)
#pragma unroll
                for (int i = 0; i < R; i++) p.ybuf[(size_t)edge * p.n_out + col_of(q, i)] = p.topk_w[edge] * acc[i];
        }
    }
    if (p.trace) {
        __syncthreads();
        if (tid == 0) {
            p.trace[3 * (size_t)blockIdx.x] = t_start;
            p.trace[3 * (size_t)blockIdx.x + 1] = tl_gpu_clock();
            p.trace[3 * (size_t)blockIdx.x + 2] = (unsigned long long)tl_gpu_sm_id();
        }
    }
#endif
}

/* ---- stage 2's FP8 input: activation rows re-quantized in 1x128 groups ----------------------- */
/* One block per worklist row, one thread per 8 values (a 128 group is 16 lanes of one wave), every
 * load issued at once: amax by a 4-step butterfly, scale = max(amax, TL_BFP8_AMAX_MIN) / 448. */
__global__ void moe_quant_act(const uint16_t *act, const int32_t *sorted_ids, const int32_t *n_tiles, int width,
                              uint8_t *act_q, float *act_s)
{
    tl_grid_dep_launch(); /* the stage-2 GEMM may be scheduled now: it waits before reading act_q */
    const int row = blockIdx.x, nv = width / 8;
    if (row / TL_MOE_TILE_M >= *n_tiles || sorted_ids[row] < 0) return; /* padding rows are never read */
    for (int v0 = 0; v0 < nv; v0 += blockDim.x) { /* the same trip count for every thread */
        const int v = v0 + threadIdx.x;
        const bool on = v < nv;
        const size_t at = (size_t)row * width + 8 * (size_t)v;
        uint4 q = on ? *(const uint4 *)(act + at) : make_uint4(0, 0, 0, 0);
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
        float x[8], a = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            x[i] = tl_code_bf16_to_f32((w[i / 2] >> (16 * (i % 2))) & 0xFFFFu);
            a = moe_fmaxf(a, moe_fabsf(x[i]));
        }
#pragma unroll
        for (int o = 1; o < TL_BFP8_GROUP / 8; o <<= 1) a = moe_fmaxf(a, tl_shfl_xor(a, o));
        const float scale = moe_fmaxf(a, TL_BFP8_AMAX_MIN) / 448.0f; /* E4M3FN max */
        uint32_t lo = 0, hi = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo |= tl_code_e4m3_from_f32(x[i] / scale) << (8 * i);
            hi |= tl_code_e4m3_from_f32(x[i + 4] / scale) << (8 * i);
        }
        if (on) {
            *(uint2 *)(act_q + at) = make_uint2(lo, hi);
            if (v % (TL_BFP8_GROUP / 8) == 0) act_s[(size_t)row * (width / TL_BFP8_GROUP) + v / (TL_BFP8_GROUP / 8)] = scale;
        }
    }
}

/* ---- the combine: each token sums its k weighted rows in slot order ------------------------- */
__global__ void moe_combine(const float *ybuf, int tokens, int k, int hidden, float *out)
{
    tl_grid_dep_wait(); /* ybuf is the stage-2 GEMM's output */
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, n4 = (size_t)tokens * hidden / 4;
    if (i >= n4) return;
    size_t t = i / (hidden / 4), c = (i % (hidden / 4)) * 4;
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sl = 0; sl < k; sl++) {
        float4 y = *(const float4 *)(ybuf + ((size_t)t * k + sl) * hidden + c);
        s.x += y.x;
        s.y += y.y;
        s.z += y.z;
        s.w += y.w;
    }
    *(float4 *)(out + t * hidden + c) = s;
}

/* ---- the sort ------------------------------------------------------------------------------- */
#define SORT_MAX_E 4096
__global__ void moe_sort_count(const int32_t *ids, int edges, int n_experts, int32_t *expert_count,
                               int32_t *tile_off, int32_t *n_tiles)
{
    __shared__ int cnt[SORT_MAX_E];
    __shared__ int part[1024];
    const int t = threadIdx.x;
    for (int e = t; e < n_experts; e += 1024) cnt[e] = 0;
    __syncthreads();
    for (int i = t; i < edges; i += 1024) {
        int e = ids[i];
        if (e >= 0 && e < n_experts) atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    const int per = (n_experts + 1023) / 1024, lo = t * per;
    int local = 0;
    for (int e = lo; e < lo + per && e < n_experts; e++) local += (cnt[e] + TL_MOE_TILE_M - 1) / TL_MOE_TILE_M;
    part[t] = local;
    __syncthreads();
    for (int off = 1; off < 1024; off <<= 1) { /* inclusive scan of the threads' tile counts */
        int v = t >= off ? part[t - off] : 0;
        __syncthreads();
        part[t] += v;
        __syncthreads();
    }
    int run = part[t] - local;
    for (int e = lo; e < lo + per && e < n_experts; e++) {
        tile_off[e] = run;
        expert_count[e] = cnt[e];
        run += (cnt[e] + TL_MOE_TILE_M - 1) / TL_MOE_TILE_M;
    }
    if (t == 1023) *n_tiles = part[1023];
}

/* One wave per expert: its edges in ascending id (ballot + popcount ranks), then the padding. */
__global__ void moe_sort_scatter(const int32_t *ids, int edges, int n_experts, const int32_t *expert_count,
                                 const int32_t *tile_off, int32_t *sorted_ids, int32_t *tile_expert,
                                 int32_t *tile_rows)
{
    const int lane = tl_lane(), e = blockIdx.x * (blockDim.x / TL_WAVE) + tl_wave_id();
    if (e >= n_experts) return;
    const int count = expert_count[e];
    if (count == 0) return;
    const int t0 = tile_off[e], base = t0 * TL_MOE_TILE_M;
    const wave_mask below = (wave_mask)(((unsigned long long)1 << lane) - 1);
    int found = 0;
    for (int i0 = 0; i0 < edges && found < count; i0 += TL_WAVE) {
        int i = i0 + lane;
        bool mine = i < edges && ids[i] == e;
        wave_mask m = wave_ballot(mine);
        if (mine) sorted_ids[base + found + wave_popc(m & below)] = i;
        found += wave_popc(m);
    }
    const int tiles = (count + TL_MOE_TILE_M - 1) / TL_MOE_TILE_M;
    for (int r = count + lane; r < tiles * TL_MOE_TILE_M; r += TL_WAVE) sorted_ids[base + r] = TL_WL_PAD;
    for (int j = lane; j < tiles; j += TL_WAVE) {
        tile_expert[t0 + j] = e;
        int rows = count - j * TL_MOE_TILE_M;
        tile_rows[t0 + j] = rows < TL_MOE_TILE_M ? rows : TL_MOE_TILE_M;
    }
}

/* Packs one expert's matrix of stage `stage` (rows layout: W1 [2 width][K] codes, gate rows first;
 * W2 [hidden][K]) into groups of NCOLS rows (kernels/moe_pack.h; n_rows rows, n_out = width):
 * thread i writes the i-th 16 bytes of dst. A permutation: each source vector is written once.
 * Runs once per expert and matrix when the weights are uploaded (tl_moe_gpu_open). */
template <int DT>
__global__ void moe_pack_weights(const uint8_t *src, uint8_t *dst, int stage, int K, int n_rows, int n_out)
{
#if defined(MOE_NO_DEVICE)
    (void)src, (void)dst, (void)stage, (void)K, (void)n_rows, (void)n_out;
#else
    const size_t row_bytes = W_BYTES(DT, (size_t)K);
    const size_t o = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 16;
    if (o >= (size_t)n_rows * row_bytes) return;
    *(uint4 *)(dst + o) = *(const uint4 *)(src + tl_moe_pack_source(o, stage, row_bytes, Pack<DT>::RUN_BYTES, n_out, TL_WAVE));
#endif
}

__global__ void moe_fill_f32(float *p, size_t n, float v)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
__global__ void moe_fill_u32(uint32_t *p, size_t n, uint32_t v)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

/* =============================================================================================
 * Host side
 * =========================================================================================== */
struct tl_moe_gpu {
    tl_moe_shape s; /* tokens = the current tokens */
    int max_tokens;
    long long cap_tiles;
    uint8_t *w1, *w2, *w1e, *w2e;
    float *w1s, *w2s;
    size_t w1_mat_bytes, w2_mat_bytes, w1_mat_scales, w2_mat_scales;
    uint16_t *x;
    uint8_t *xq;
    float *xs, *topw;
    int32_t *ids, *sorted, *tile_expert, *tile_rows, *expert_count, *tile_off, *n_tiles;
    uint16_t *act;
    uint8_t *act_q;
    float *act_s, *ybuf, *out;
    unsigned long long *trace; /* non-NULL only inside tl_moe_gpu_trace */
};

static int gpu_alloc(void **p, size_t bytes, const char *what)
{
    *p = NULL;
    if (bytes == 0) return 0;
    hipError_t e = hipMalloc(p, bytes);
    if (e != hipSuccess) {
        *p = NULL;
        (void)hipGetLastError();
        return tl_error(TL_EFAIL, "moe gpu", "cannot allocate %.3f GB for %s: %s", bytes / 1e9, what,
                        hipGetErrorString(e));
    }
    return 0;
}
#define GALLOC(ptr, bytes, what) gpu_alloc((void **)&(ptr), (bytes), (what))

static int upload(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return 0;
    TL_GPU_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice));
    return 0;
}

extern "C" void tl_moe_gpu_close(tl_moe_gpu *g)
{
    if (!g) return;
    void *ptrs[] = {g->w1, g->w2, g->w1e, g->w2e, g->w1s, g->w2s, g->x, g->xq, g->xs, g->topw, g->ids, g->sorted,
                    g->tile_expert, g->tile_rows, g->expert_count, g->tile_off, g->n_tiles, g->act, g->act_q,
                    g->act_s, g->ybuf, g->out};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) (void)hipFree(ptrs[i]);
    free(g);
}

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

/* Uploads W1 (stage 1) or W2 (stage 2) of every expert from the host's rows layout: packed into
 * the kernels' groups (kernels/moe_pack.h), one expert at a time through `scratch` (one matrix),
 * or as it is where the stage reads rows (bf16's W2). */
template <int DT>
static int upload_weights(tl_moe_gpu *g, int stage, const uint8_t *host, uint8_t *scratch)
{
    const size_t mat = stage == 1 ? g->w1_mat_bytes : g->w2_mat_bytes, n16 = mat / 16;
    uint8_t *dev = stage == 1 ? g->w1 : g->w2;
    if (!PACKED(DT, stage)) return upload(dev, host, mat * g->s.n_experts);
    const int K = stage == 1 ? g->s.hidden : g->s.width, rows = stage == 1 ? 2 * g->s.width : g->s.hidden;
    for (int e = 0; e < g->s.n_experts; e++) {
        int rc = upload(scratch, host + (size_t)e * mat, mat);
        if (rc) return rc;
        moe_pack_weights<DT><<<(unsigned)((n16 + 255) / 256), 256>>>(scratch, dev + (size_t)e * mat, stage, K, rows,
                                                                      g->s.width);
        TL_GPU_CHECK_LAUNCH("moe_pack_weights");
    }
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}
/* W1 and W2 of `in` onto the device (upload_weights), with a scratch copy of the larger matrix for
 * the duration of the call. */
static int upload_all_weights(tl_moe_gpu *g, const tl_moe_inputs *in)
{
    const int dt = g->s.dtype;
    const size_t w1 = (size_t)2 * g->s.width * (size_t)W_BYTES(dt, (size_t)g->s.hidden),
                 w2 = (size_t)g->s.hidden * (size_t)W_BYTES(dt, (size_t)g->s.width);
    if (g->w1_mat_bytes != w1 || g->w2_mat_bytes != w2)
        return tl_error(TL_EFAIL, "moe gpu", "W1 / W2 hold %zu / %zu bytes per expert, the kernel expects %zu / %zu",
                        g->w1_mat_bytes, g->w2_mat_bytes, w1, w2);
    uint8_t *scratch;
    int rc = GALLOC(scratch, w1 > w2 ? w1 : w2, "weight packing scratch");
    if (rc) return rc;
    rc = by_dtype(dt, [&](auto d) {
        int r = upload_weights<decltype(d)::value>(g, 1, in->w1.codes, scratch);
        return r ? r : upload_weights<decltype(d)::value>(g, 2, in->w2.codes, scratch);
    });
    (void)hipFree(scratch);
    return rc;
}

extern "C" int tl_moe_gpu_open(const tl_moe_inputs *in, int max_tokens, tl_moe_gpu **out)
{
    *out = NULL;
    tl_moe_shape s = in->s;
    s.tokens = max_tokens;
    int rc = tl_moe_kernel_supports(&s);
    if (rc) return rc;
    tl_moe_gpu *g = (tl_moe_gpu *)calloc(1, sizeof *g);
    if (!g) return tl_error(TL_EFAIL, "moe gpu", "out of memory");
    g->s = s;
    g->max_tokens = max_tokens;
    const int E = s.n_experts, H = s.hidden, WI = s.width, k = s.top_k;
    const size_t edges = (size_t)max_tokens * k;
    g->cap_tiles = tl_moe_max_tiles(max_tokens, k, E);
    const size_t rows = (size_t)g->cap_tiles * TL_MOE_TILE_M;
    g->w1_mat_bytes = in->w1.mat_code_bytes;
    g->w2_mat_bytes = in->w2.mat_code_bytes;
    g->w1_mat_scales = in->w1.mat_scales;
    g->w2_mat_scales = in->w2.mat_scales;
    const bool fs = in->w1.scales != NULL, es = in->w1.e8m0 != NULL, fp8 = s.dtype == TL_MOE_FP8;
    rc = GALLOC(g->w1, g->w1_mat_bytes * E, "W1");
    if (!rc) rc = GALLOC(g->w2, g->w2_mat_bytes * E, "W2");
    if (!rc && fs) rc = GALLOC(g->w1s, g->w1_mat_scales * E * sizeof(float), "W1 scales");
    if (!rc && fs) rc = GALLOC(g->w2s, g->w2_mat_scales * E * sizeof(float), "W2 scales");
    if (!rc && es) rc = GALLOC(g->w1e, g->w1_mat_scales * E, "W1 scales");
    if (!rc && es) rc = GALLOC(g->w2e, g->w2_mat_scales * E, "W2 scales");
    if (!rc) rc = GALLOC(g->x, (size_t)max_tokens * H * 2, "x");
    if (!rc && fp8) rc = GALLOC(g->xq, (size_t)max_tokens * H, "x fp8");
    if (!rc && fp8) rc = GALLOC(g->xs, (size_t)max_tokens * (H / TL_BFP8_GROUP) * sizeof(float), "x scales");
    if (!rc) rc = GALLOC(g->ids, edges * sizeof(int32_t), "topk ids");
    if (!rc) rc = GALLOC(g->topw, edges * sizeof(float), "topk weights");
    if (!rc) rc = GALLOC(g->sorted, rows * sizeof(int32_t), "sorted ids");
    if (!rc) rc = GALLOC(g->tile_expert, (size_t)g->cap_tiles * sizeof(int32_t), "tile experts");
    if (!rc) rc = GALLOC(g->tile_rows, (size_t)g->cap_tiles * sizeof(int32_t), "tile rows");
    if (!rc) rc = GALLOC(g->expert_count, (size_t)E * sizeof(int32_t), "expert counts");
    if (!rc) rc = GALLOC(g->tile_off, (size_t)E * sizeof(int32_t), "tile offsets");
    if (!rc) rc = GALLOC(g->n_tiles, sizeof(int32_t), "tile count");
    if (!rc) rc = GALLOC(g->act, rows * WI * 2, "activations");
    if (!rc && fp8) rc = GALLOC(g->act_q, rows * WI, "fp8 activations");
    if (!rc && fp8) rc = GALLOC(g->act_s, rows * (WI / TL_BFP8_GROUP) * sizeof(float), "activation scales");
    if (!rc) rc = GALLOC(g->ybuf, edges * H * sizeof(float), "per-edge rows");
    if (!rc) rc = GALLOC(g->out, (size_t)max_tokens * H * sizeof(float), "output");
    if (!rc) rc = upload_all_weights(g, in);
    if (!rc && fs) rc = upload(g->w1s, in->w1.scales, g->w1_mat_scales * E * sizeof(float));
    if (!rc && fs) rc = upload(g->w2s, in->w2.scales, g->w2_mat_scales * E * sizeof(float));
    if (!rc && es) rc = upload(g->w1e, in->w1.e8m0, g->w1_mat_scales * E);
    if (!rc && es) rc = upload(g->w2e, in->w2.e8m0, g->w2_mat_scales * E);
    if (rc) {
        tl_moe_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

extern "C" int tl_moe_gpu_set_tokens(tl_moe_gpu *g, const tl_moe_inputs *in)
{
    const tl_moe_shape *s = &in->s;
    if (s->hidden != g->s.hidden || s->width != g->s.width || s->n_experts != g->s.n_experts ||
        s->top_k != g->s.top_k || s->dtype != g->s.dtype)
        return tl_error(TL_EUSAGE, "moe gpu", "the tokens' shape does not match the uploaded weights");
    if (s->tokens < 1 || s->tokens > g->max_tokens)
        return tl_error(TL_EUSAGE, "moe gpu", "%d tokens, room for %d", s->tokens, g->max_tokens);
    const size_t edges = (size_t)s->tokens * s->top_k;
    for (size_t i = 0; i < edges; i++)
        if (in->topk_ids[i] < 0 || in->topk_ids[i] >= s->n_experts)
            return tl_error(TL_EUSAGE, "moe gpu", "topk id %d outside [0, %d)", in->topk_ids[i], s->n_experts);
    g->s.tokens = s->tokens;
    int rc = upload(g->x, in->x, (size_t)s->tokens * s->hidden * 2);
    if (!rc && s->dtype == TL_MOE_FP8) rc = upload(g->xq, in->xq, (size_t)s->tokens * s->hidden);
    if (!rc && s->dtype == TL_MOE_FP8) rc = upload(g->xs, in->xs, (size_t)s->tokens * (s->hidden / TL_BFP8_GROUP) * sizeof(float));
    if (!rc) rc = upload(g->ids, in->topk_ids, edges * sizeof(int32_t));
    if (!rc) rc = upload(g->topw, in->topk_w, edges * sizeof(float));
    return rc;
}

static int fill_f32(float *p, size_t n, float v)
{
    if (!p || !n) return 0;
    moe_fill_f32<<<(unsigned)((n + 255) / 256), 256>>>(p, n, v);
    TL_GPU_CHECK_LAUNCH("moe_fill_f32");
    return 0;
}
static int fill_u32(void *p, size_t n, uint32_t v)
{
    if (!p || !n) return 0;
    moe_fill_u32<<<(unsigned)((n + 255) / 256), 256>>>((uint32_t *)p, n, v);
    TL_GPU_CHECK_LAUNCH("moe_fill_u32");
    return 0;
}

extern "C" int tl_moe_gpu_poison(tl_moe_gpu *g)
{
    const size_t rows = (size_t)g->cap_tiles * TL_MOE_TILE_M, edges = (size_t)g->max_tokens * g->s.top_k;
    const float nan = __builtin_nanf("");
    int rc = fill_u32(g->act, rows * g->s.width / 2, 0x7FC07FC0u); /* bf16 NaN pairs */
    if (!rc && g->act_q) rc = fill_u32(g->act_q, rows * g->s.width / 4, 0x7F7F7F7Fu); /* e4m3 NaN */
    if (!rc && g->act_s) rc = fill_f32(g->act_s, rows * (g->s.width / TL_BFP8_GROUP), nan);
    if (!rc) rc = fill_f32(g->ybuf, edges * g->s.hidden, nan);
    if (!rc) rc = fill_f32(g->out, (size_t)g->max_tokens * g->s.hidden, nan);
    if (!rc) rc = fill_u32(g->sorted, rows, 0x80000000u);
    if (!rc) rc = fill_u32(g->tile_expert, (size_t)g->cap_tiles, 0x80000000u);
    if (!rc) rc = fill_u32(g->tile_rows, (size_t)g->cap_tiles, 0x80000000u);
    if (!rc) rc = fill_u32(g->n_tiles, 1, 0x80000000u);
    if (!rc) TL_GPU_CHECK(hipDeviceSynchronize());
    return rc;
}

/* ---- enqueueing the parts ---- */
static int enqueue_sort(tl_moe_gpu *g, hipStream_t st)
{
    const int edges = g->s.tokens * g->s.top_k, E = g->s.n_experts;
    moe_sort_count<<<1, 1024, 0, st>>>(g->ids, edges, E, g->expert_count, g->tile_off, g->n_tiles);
    TL_GPU_CHECK_LAUNCH("moe_sort_count");
    const int waves_per_block = 256 / tl_gpu_wave_size();
    moe_sort_scatter<<<(E + waves_per_block - 1) / waves_per_block, 256, 0, st>>>(
        g->ids, edges, E, g->expert_count, g->tile_off, g->sorted, g->tile_expert, g->tile_rows);
    TL_GPU_CHECK_LAUNCH("moe_sort_scatter");
    return 0;
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
static StageGrid stage_grid(const tl_moe_shape *s, int stage)
{
    StageGrid g = {};
    const long long max_tiles = tl_moe_max_tiles(s->tokens, s->top_k, s->n_experts);
    g.gemv = tl_moe_uses_gemv(s, stage);
    if (!g.gemv) {
        g.per_tile = stage == 1 ? s->width / S1_NB : s->hidden / (S2_THREADS / tl_gpu_wave_size() * NCOLS);
        g.blocks = max_tiles * g.per_tile;
        return g;
    }
    g.geom = tl_moe_gemv_geometry(s, tl_gpu_wave_size());
    g.per_tile = g.geom.tasks_per_tile;
    const long long tasks = max_tiles * g.per_tile, per_block = g.geom.tasks; /* per_block divides per_tile */
    g.big = tasks * TL_MOE_GEMV_TAPER_PCT / 100 / per_block;
    g.blocks = g.big + (tasks - g.big * per_block);
    return g;
}

/* One GEMM stage, MT tiles per work item, on `blocks` blocks (StageGrid). The kernel's resident blocks (SMs x
 * occupancy) are asked of the driver once per instantiation (tilelab drives one device). */
template <int DT, int STAGE, int MT>
static int launch_stage(const GemmArgs &args, long long blocks, bool dependent, hipStream_t st)
{
    const int threads = STAGE == 1 ? S1_THREADS : S2_THREADS;
    static long long resident = 0;
    if (!resident) {
        int dev = 0, sms = 0, per_sm = 0;
        TL_GPU_CHECK(hipGetDevice(&dev));
        TL_GPU_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev));
        TL_GPU_CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_gemm<DT, STAGE, MT>, threads, 0));
        resident = (long long)sms * per_sm;
    }
    GemmArgs a = args;
    a.resident = resident;
    dim3 grid((unsigned)blocks);
    hipError_t e = tl_launch(moe_gemm<DT, STAGE, MT>, grid, dim3(threads), 0, st, dependent, a);
    if (e != hipSuccess)
        return tl_gpu_fail(STAGE == 1 ? "moe_gemm stage 1" : "moe_gemm stage 2", hipGetErrorString(e), __FILE__,
                           __LINE__);
    return 0;
}

/* Two tiles of one expert per work item (each weight byte feeds 32 rows) once experts average
 * 1.5 tiles or more; bf16 only. fp8's stage 2 would spill 144 bytes; its stage 1 paired (16 bytes
 * of spills) was measured no faster at M = 384..1024 (session 5: its per-row work, not its
 * weights, holds it; bench/results/h200_moe_notes.md, variant G). Measured on the H200
 * at M = 1024 (run 10): stage 1 4278 us (session 2: unpaired 6189), stage 2 2482 us (unpaired
 * 2925). */
template <int DT, int STAGE>
static int launch_paired(const GemmArgs &a, long long blocks, int pair_tiles, bool dependent, hipStream_t st)
{
    if constexpr (DT == DT_BF16)
        if (pair_tiles) return launch_stage<DT, STAGE, 2>(a, blocks, dependent, st);
    return launch_stage<DT, STAGE, 1>(a, blocks, dependent, st);
}
template <int DT>
static int launch_gemm(const GemmArgs &a, long long blocks, int stage, int pair_tiles, bool dependent,
                       hipStream_t st)
{
    return stage == 1 ? launch_paired<DT, 1>(a, blocks, pair_tiles, dependent, st)
                      : launch_paired<DT, 2>(a, blocks, pair_tiles, dependent, st);
}

static int enqueue_stage(tl_moe_gpu *g, int stage, hipStream_t st)
{
    const tl_moe_shape *s = &g->s;
    const int max_tiles = (int)tl_moe_max_tiles(s->tokens, s->top_k, s->n_experts);
    GemmArgs a;
    memset(&a, 0, sizeof a);
    a.sorted_ids = g->sorted;
    a.tile_expert = g->tile_expert;
    a.tile_rows = g->tile_rows;
    a.tile_off = g->tile_off;
    a.n_tiles = g->n_tiles;
    a.max_tiles = max_tiles;
    a.top_k = s->top_k;
    a.topk_w = g->topw;
    a.trace = g->trace;
    const bool fp8 = s->dtype == TL_MOE_FP8;
    if (stage == 1) {
        a.A = fp8 ? g->xq : (const uint8_t *)g->x;
        a.a_scale = g->xs;
        a.W = g->w1;
        a.w_scale = g->w1s;
        a.w_e8m0 = g->w1e;
        a.w_mat_bytes = g->w1_mat_bytes;
        a.w_mat_scales = g->w1_mat_scales;
        a.K = s->hidden;
        a.n_out = s->width;
        a.act = g->act;
    } else {
        if (fp8) {
            moe_quant_act<<<max_tiles * TL_MOE_TILE_M, 256, 0, st>>>(g->act, g->sorted, g->n_tiles, s->width,
                                                                      g->act_q, g->act_s);
            TL_GPU_CHECK_LAUNCH("moe_quant_act");
        }
        a.A = fp8 ? g->act_q : (const uint8_t *)g->act;
        a.a_scale = g->act_s;
        a.W = g->w2;
        a.w_scale = g->w2s;
        a.w_e8m0 = g->w2e;
        a.w_mat_bytes = g->w2_mat_bytes;
        a.w_mat_scales = g->w2_mat_scales;
        a.K = s->width;
        a.n_out = s->hidden;
        a.ybuf = g->ybuf;
    }
    /* pair tiles when an expert averages 1.5 tiles or more */
    const int pair = 2LL * s->tokens * s->top_k >= 3LL * TL_MOE_TILE_M * s->n_experts;
    /* Dependent launches: fp8's stage-2 GEMM after the quant kernel, and every dtype's combine
     * after the GEMM: each starts (pointers, tile ids) while the kernel before it finishes and
     * waits for its output with tl_grid_dep_wait. Measured on the H200 (session 4, one call): fp8
     * stage 2 at M = 1 40.2 -> 38.7 us, M = 8 238.1 -> 236.5; bf16 stage 2 unchanged. */
    const bool dep = stage == 2 && fp8;
    const StageGrid grid = stage_grid(s, stage);
    int rc;
    if (grid.gemv) {
        /* bf16: no kernel ahead of it to wait for (it never calls tl_grid_dep_wait) */
        hipError_t e = tl_launch(moe_gemv_down, dim3((unsigned)grid.blocks), dim3(grid.geom.threads), 0, st, false,
                                 a, grid.geom.gs, grid.geom.tasks, (int)grid.big);
        rc = e == hipSuccess ? 0 : tl_gpu_fail("moe_gemv_down", hipGetErrorString(e), __FILE__, __LINE__);
    } else {
        rc = by_dtype(s->dtype, [&](auto d) {
            return launch_gemm<decltype(d)::value>(a, grid.blocks, stage, pair, dep, st);
        });
    }
    if (rc || stage == 1) return rc;
    const size_t n4 = (size_t)s->tokens * s->hidden / 4;
    hipError_t e = tl_launch(moe_combine, dim3((unsigned)((n4 + 255) / 256)), dim3(256), 0, st, true,
                             (const float *)g->ybuf, s->tokens, s->top_k, s->hidden, g->out);
    if (e != hipSuccess) return tl_gpu_fail("moe_combine", hipGetErrorString(e), __FILE__, __LINE__);
    return 0;
}

static int enqueue(tl_moe_gpu *g, int parts, hipStream_t st)
{
    int rc = 0;
    if (parts & TL_MOE_PART_SORT) rc = enqueue_sort(g, st);
    if (!rc && (parts & TL_MOE_PART_STAGE1)) rc = enqueue_stage(g, 1, st);
    if (!rc && (parts & TL_MOE_PART_STAGE2)) rc = enqueue_stage(g, 2, st);
    return rc;
}

extern "C" int tl_moe_gpu_run(tl_moe_gpu *g, int parts)
{
    int rc = enqueue(g, parts, 0);
    if (rc) return rc;
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

/* The device's tile count, within [0, cap_tiles] (else TL_EFAIL: a sort bug). */
static int read_n_tiles(tl_moe_gpu *g, int32_t *nt)
{
    TL_GPU_CHECK(hipMemcpy(nt, g->n_tiles, sizeof *nt, hipMemcpyDeviceToHost));
    if (*nt < 0 || *nt > g->cap_tiles)
        return tl_error(TL_EFAIL, "moe gpu", "the sort reported %d tiles (at most %lld possible)", *nt, g->cap_tiles);
    return 0;
}

extern "C" int tl_moe_gpu_read(tl_moe_gpu *g, float *out, int32_t *sorted_ids, size_t cap_rows,
                               int32_t *tile_expert, int32_t *tile_rows, size_t cap_tiles, int *n_tiles)
{
    int32_t nt = 0;
    int rc = read_n_tiles(g, &nt);
    if (n_tiles) *n_tiles = nt;
    if (rc) return rc;
    if ((sorted_ids && (size_t)nt * TL_MOE_TILE_M > cap_rows) || ((tile_expert || tile_rows) && (size_t)nt > cap_tiles))
        return tl_error(TL_EFAIL, "moe gpu", "the sort reported %d tiles, more than the caller's worklist holds", nt);
    if (out) TL_GPU_CHECK(hipMemcpy(out, g->out, (size_t)g->s.tokens * g->s.hidden * sizeof(float), hipMemcpyDeviceToHost));
    if (sorted_ids && nt)
        TL_GPU_CHECK(hipMemcpy(sorted_ids, g->sorted, (size_t)nt * TL_MOE_TILE_M * sizeof(int32_t), hipMemcpyDeviceToHost));
    if (tile_expert && nt) TL_GPU_CHECK(hipMemcpy(tile_expert, g->tile_expert, (size_t)nt * sizeof(int32_t), hipMemcpyDeviceToHost));
    if (tile_rows && nt) TL_GPU_CHECK(hipMemcpy(tile_rows, g->tile_rows, (size_t)nt * sizeof(int32_t), hipMemcpyDeviceToHost));
    return 0;
}

extern "C" int tl_moe_gpu_read_act(tl_moe_gpu *g, uint16_t *act, size_t cap_rows)
{
    int32_t nt = 0;
    int rc = read_n_tiles(g, &nt);
    if (rc) return rc;
    const size_t rows = (size_t)nt * TL_MOE_TILE_M;
    if (rows > cap_rows)
        return tl_error(TL_EFAIL, "moe gpu", "the sort reported %d tiles: more rows than the caller holds", nt);
    if (rows) TL_GPU_CHECK(hipMemcpy(act, g->act, rows * (size_t)g->s.width * sizeof(uint16_t), hipMemcpyDeviceToHost));
    return 0;
}

struct time_ctx {
    tl_moe_gpu *g;
    int part;
};
static int time_fn(void *ctx, void *stream)
{
    time_ctx *c = (time_ctx *)ctx;
    return enqueue(c->g, c->part, (hipStream_t)stream);
}

extern "C" int tl_moe_gpu_time(tl_moe_gpu *g, int part, const tl_bench_opts *opts, tl_bench_result *r)
{
    if (part != TL_MOE_PART_SORT && part != TL_MOE_PART_STAGE1 && part != TL_MOE_PART_STAGE2)
        return tl_error(TL_EUSAGE, "moe gpu", "time one part at a time");
    time_ctx c = {g, part};
    return tl_bench_run(opts, time_fn, &c, r);
}

extern "C" int tl_moe_gpu_trace(tl_moe_gpu *g, int part, const tl_bench_opts *opts, tl_moe_trace_block **blocks,
                                int *n_blocks, double *end_us)
{
    *blocks = NULL;
    *n_blocks = 0;
    *end_us = 0.0;
    if (part != TL_MOE_PART_STAGE1 && part != TL_MOE_PART_STAGE2)
        return tl_error(TL_EUSAGE, "moe gpu", "trace stage 1 or stage 2");
    const int stage = part == TL_MOE_PART_STAGE1 ? 1 : 2;
    const tl_moe_shape *s = &g->s;
    const long long max_tiles = tl_moe_max_tiles(s->tokens, s->top_k, s->n_experts);
    const StageGrid sg = stage_grid(s, stage);
    const long long grid = sg.blocks;
    const size_t words = 2 + 3 * (size_t)grid; /* t0, t1, then 3 per block */
    const double per_us = tl_gpu_clock_per_us();
    if (per_us <= 0.0) return TL_EFAIL;
    unsigned long long *dev = NULL, *host = (unsigned long long *)malloc(words * sizeof *host);
    tl_moe_trace_block *b = (tl_moe_trace_block *)malloc((size_t)grid * sizeof *b);
    time_ctx c = {g, part};
    int rc = 0, n = 0;
    if (!host || !b) {
        rc = tl_error(TL_EFAIL, "moe gpu", "out of memory");
        goto done;
    }
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&dev, words * sizeof *dev), rc, done);
    TL_GPU_CHECK_GOTO(hipMemset(dev, 0, words * sizeof *dev), rc, done);
    g->trace = dev + 2;
    rc = tl_bench_run_marked(opts, time_fn, &c, dev, dev + 1);
    g->trace = NULL;
    if (rc) goto done;
    TL_GPU_CHECK_GOTO(hipMemcpy(host, dev, words * sizeof *host, hipMemcpyDeviceToHost), rc, done);
    for (long long i = 0; i < grid; i++) {
        const unsigned long long *w = host + 2 + 3 * i;
        if (!w[0]) continue; /* the block had no item (past n_tiles, or the odd tile of a pair) */
        b[n].block = (int)i;
        if (sg.gemv) { /* the block's first task */
            const long long first = gemv_first_task(i, sg.big, sg.geom.tasks);
            b[n].tile = (int)(first / sg.per_tile);
            b[n].nblock = (int)(first % sg.per_tile);
        } else {
            b[n].tile = (int)(i % max_tiles);
            b[n].nblock = (int)(i / max_tiles);
        }
        b[n].sm = (int)w[2];
        b[n].start_us = (double)(long long)(w[0] - host[0]) / per_us;
        b[n].end_us = (double)(long long)(w[1] - host[0]) / per_us;
        n++;
    }
    *end_us = (double)(long long)(host[1] - host[0]) / per_us;
done:
    if (dev) (void)hipFree(dev);
    free(host);
    if (rc) free(b);
    else *blocks = b, *n_blocks = n;
    return rc;
}

extern "C" {
static const tl_moe_gpu_api moe_gpu_api = {tl_moe_gpu_open, tl_moe_gpu_set_tokens, tl_moe_gpu_poison,
                                           tl_moe_gpu_run,  tl_moe_gpu_read,       tl_moe_gpu_read_act,
                                           tl_moe_gpu_time, tl_moe_gpu_trace,      tl_moe_gpu_close};
extern const tl_moe_gpu_api *const tl_moe_gpu_kernels = &moe_gpu_api;
}
