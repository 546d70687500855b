/* kernels/moe_gemm.hip: the MoE GEMM, both stages (stage 1 gate+up+SwiGLU, stage 2 down with the
 * top-k weight), and its launch wrapper tl_moe_launch_gemm (kernels/moe_launch.h). */
#include "moe_launch.h"
#include "../numerics/blockfp8.h" /* the FP8 scale group and amax clamp */
#include "../numerics/codes.h"    /* per-element BF16, E4M3, E2M1, E8M0 conversions */
#include "../numerics/mx.h"       /* the MX block */

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
#endif

/* Stage 1 (K = hidden is long, N per item small): 4 waves split K and reduce in shared memory, 4
 * blocks per SM (8 waves x 2 blocks is slower for fp8, the same for bf16).
 * Stage 2 (K = width is short): 4 waves each own NCOLS output columns over the whole K, so there is
 * no reduction and a block's fixed costs are spread over 4 x 32 columns (faster than 2 waves x 8
 * blocks per SM). Measurements: bench/journal/moe-kernel.md, block shapes. */
#define S1_THREADS TL_MOE_S1_THREADS
#define S2_THREADS TL_MOE_S2_THREADS
#define S2_MINB TL_MOE_S2_MINB
#define MOE_MAX_KG 64 /* fp8: K / 128 groups a block keeps scales for (K <= 8192) */
#define NCOLS TL_MOE_NCOLS
#define NF (NCOLS / FRAG_N) /* fragments per wave */
#define S1_NB TL_MOE_S1_NB

/* Fmt<DT, V>: the lane layout V of a dtype. V = 0: Fmt0 (kernels/moe_launch.h). V = 2 ("half"):
 * the tile's rows 8-15 are padding, so a lane's second activation row is never loaded and its
 * registers carry twice the weight bytes instead. bf16: 64 bytes of each weight row a lane. fp8
 * (NVIDIA, stage 1): two 128 groups in flight (U = 2), multiplied as weights x activations (Acc
 * below) so that its accumulators hold no padding row (activations x weights spill). Stage 2 keeps
 * fp8 in layout 0: layout 2 spills there and is slower at M = 1. No software pipelining (the next
 * chunk's loads issued before this chunk's products): it halves the bytes in flight and is slower.
 * Measurements: bench/journal/moe-kernel.md, lane runs. */
template <int DT, int V> struct Fmt : Fmt0<DT> {};
template <> struct Fmt<DT_BF16, 2> { enum { KRUN = 32, U = 1, A_FP8 = 0, W_VEC = 4 }; };
template <> struct Fmt<DT_FP8, 2> { enum { KRUN = 32, U = 2, A_FP8 = 1, W_VEC = 2 }; };
/* With TL_MOE_SCALED_MX the MX types load E4M3 activation codes (A_FP8) in the instruction's own
 * lane layout (load_acts_mx); the weights keep their packed runs: mxfp4's 32 values a lane are the
 * FP4 operand's (k = 32 (lane / 16) + e), and mxfp8's two adjacent 16-value chunks (U = 2) are the
 * FP8 operand's two halves (k = 64 h + 16 (lane / 16) + e, kernels/mma.h). */
#if TL_MOE_SCALED_MX
template <> struct Fmt<DT_MXFP4, 0> { enum { KRUN = 32, U = 1, A_FP8 = 1, W_VEC = 1 }; };
template <> struct Fmt<DT_MXFP8, 0> { enum { KRUN = 16, U = 2, A_FP8 = 1, W_VEC = 1 }; };
#endif
#define SCALED(DT) (TL_MOE_SCALED_MX && ((DT) == DT_MXFP4 || (DT) == DT_MXFP8))
#define HALF_LAYOUT(DT, STAGE) ((DT) == DT_BF16 || ((DT) == DT_FP8 && SWAP_FP8 && (STAGE) == 1))

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

/* One chunk of one wave: loads (phase 1) then multiplies (phase 2). */
template <int DT, int V> struct Chunk {
    enum { KRUN = Fmt<DT, V>::KRUN, A_VEC = Fmt<DT, V>::A_FP8 ? KRUN / 16 : KRUN / 8, W_VEC = Fmt<DT, V>::W_VEC };
    uint4 w[NF][W_VEC];
    uint4 a[LANE_ROWS][A_VEC];
};

#if !defined(MOE_NO_DEVICE) /* the host pass's fragment geometry is a placeholder */
static_assert((TL_WAVE == 32 ? 8 : 16) == FRAG_N && NF * FRAG_N == NCOLS && NF / 2 * FRAG_N == S1_NB,
              "kernels/moe_pack.h describes this target's fragments and groups");
#endif
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

/* Chunk c's weight codes of this lane. Packed: w[0] = its group's first byte + 16 x lane. Rows
 * layout: w[f] = the lane's weight row in fragment f, whose run from lane_k on it reads, so the 4
 * lanes of a row read 64 W_VEC contiguous bytes (not spread so that each load instruction covers 64
 * contiguous bytes of the rows layout: measured slower, bench/journal/moe-kernel.md). */
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
            ch.w[f][v] = evict_first ? tl_load_once(a) : *(const uint4 *)a;
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

/* The MX types' activation codes with TL_MOE_SCALED_MX, in the FP8 operand's lane layout: of the
 * 128-deep step whose lane run starts at k0, this lane (k-group kgrp) holds the 16 codes from
 * 16 kgrp on and the 16 from 64 + 16 kgrp on. mxfp4 (KRUN 32, one chunk a step): both from this
 * chunk's row (k0 = 128 c + 32 kgrp); mxfp8 (KRUN 16, chunks 2j and 2j + 1 a step): its chunk's 16
 * at k0 = 64 c + 16 kgrp, the two chunks making the two halves. Padding rows: zeros. */
template <int DT, int V>
static __device__ __forceinline__ void load_acts_mx(Chunk<DT, V> &ch, const GemmArgs &p, int arow, int k0, int kgrp)
{
    enum { A_VEC = Chunk<DT, V>::A_VEC };
    const int ka = Fmt<DT, V>::KRUN == 32 ? k0 - 16 * kgrp : k0;
#pragma unroll
    for (int v = 0; v < A_VEC; v++)
        ch.a[0][v] = arow >= 0 ? *(const uint4 *)(p.a_mx + (size_t)arow * p.K + ka + 64 * v) : make_uint4(0, 0, 0, 0);
}

#if TL_MOE_SCALED_MX
/* One 128-deep step of the MX types on v_mfma_scale_f32_16x16x128_f8f6f4 into acc: A = the tile's
 * E4M3 activation codes (ch[0], and mxfp8's ch[1]: load_acts_mx), B = fragment f's weight codes
 * (mxfp4: 32 E2M1 values in the operand's first 4 registers; mxfp8: the two chunks' 16 E4M3 codes
 * each), sa = the E8M0 scale of this lane's A row (lane % 16) and sb[f] of its weight row, both for
 * the step's 32-deep block lane / 16 (kernels/mma.h). No conversion: one instruction a fragment. */
template <int DT, int V, int U>
static __device__ __forceinline__ void mma_scaled_mx(const Chunk<DT, V> (&ch)[U][1], tl_frag_c (&acc)[1][NF], int sa,
                                                     const int (&sb)[NF])
{
    const uint32_t *a0 = (const uint32_t *)&ch[0][0].a[0][0];
    const uint32_t *a1 = DT == DT_MXFP8 ? (const uint32_t *)&ch[U - 1][0].a[0][0] : a0 + 4;
    const tl_i32x8 a = {(int)a0[0], (int)a0[1], (int)a0[2], (int)a0[3], (int)a1[0], (int)a1[1], (int)a1[2], (int)a1[3]};
#pragma unroll
    for (int f = 0; f < NF; f++) {
        const uint32_t *w0 = (const uint32_t *)&ch[0][0].w[f][0];
        if constexpr (DT == DT_MXFP8) {
            const uint32_t *w1 = (const uint32_t *)&ch[U - 1][0].w[f][0];
            const tl_i32x8 b = {(int)w0[0], (int)w0[1], (int)w0[2], (int)w0[3], (int)w1[0], (int)w1[1], (int)w1[2], (int)w1[3]};
            tl_mma_f8f6f4_16x16x128<TL_F8F6F4_E4M3, TL_F8F6F4_E4M3>(&acc[0][f], a, b, sa, sb[f]);
        } else {
            const tl_i32x8 b = {(int)w0[0], (int)w0[1], (int)w0[2], (int)w0[3], 0, 0, 0, 0};
            tl_mma_f8f6f4_16x16x128<TL_F8F6F4_E4M3, TL_F8F6F4_E2M1>(&acc[0][f], a, b, sa, sb[f]);
        }
    }
}
#endif

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
                               * subtracts 128 + 8: n - 8, exact (18-19% faster than int-to-float
                               * per nibble: bench/journal/moe-kernel.md, conversions) */
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

/* Blocks per SM the register budget is cut for: MT tiles per item hold MT tiles' activation runs
 * and accumulators, so MT = 4 asks for half the blocks (twice the registers) of MT <= 2. */
#define MOE_MINB(STAGE, MT) ((MT) > 2 ? TL_MOE_GROUP_MINB : (STAGE) == 1 ? TL_MOE_S1_MINB : S2_MINB)

template <int DT, int STAGE, int MT>
__global__ void __launch_bounds__(STAGE == 1 ? S1_THREADS : S2_THREADS, TL_LAUNCH_MIN_BLOCKS(MOE_MINB(STAGE, MT))) moe_gemm(GemmArgs p)
{
#if defined(MOE_NO_DEVICE)
    (void)p;
#else
    enum {
        THREADS = STAGE == 1 ? S1_THREADS : S2_THREADS,
        NW = THREADS / TL_WAVE,               /* waves per block */
        NB = STAGE == 1 ? S1_NB : NW * NCOLS, /* output columns per work item */
        SPLIT_K = STAGE == 1,                 /* waves split K (else they split N) */
        ROWS = MT * TL_MOE_TILE_M             /* rows of an item: up to MT tiles of one expert */
    };
    TL_SHARED(int, s_idx, [ROWS]); TL_SHARED(int, s_edge, [ROWS]); TL_SHARED(int, s_tile, [MT]);
    TL_SHARED(float, red, [SPLIT_K ? NW * ROWS * NCOLS : 1]);
    /* fp8: the item rows' activation scales and the item's weight-block scales, per 128 group */
    TL_SHARED(float, s_as, [DT == DT_FP8 ? ROWS * MOE_MAX_KG : 1]);
    TL_SHARED(float, s_ws, [DT == DT_FP8 ? (SPLIT_K ? 2 : NW) * MOE_MAX_KG : 1]);

    /* One round trip gives the tile count, this tile's expert and its row count; the first chunk's
     * weights (which depend on the expert only) are requested before the row indices (except fp8
     * and mxfp8: k_loop). */
    const unsigned long long t_start = p.trace ? tl_gpu_clock() : 0;
    tl_grid_dep_launch(); /* a dependent combine may be scheduled now (it waits for this grid) */
    const int tile = blockIdx.x % p.max_tiles, nb = blockIdx.x / p.max_tiles;
    const int n_tiles = *p.n_tiles, e = p.tile_expert[tile], tile_rows = p.tile_rows[tile];
    if (tile >= n_tiles) return;
    /* MT > 1: the expert's tiles group MT at a time from its first, (0..MT-1), (MT..2MT-1), ...; the
     * item of a group's first tile multiplies them all (tile + m while it is the expert's), the
     * blocks of the others exit */
    if (MT > 1 && (tile - p.tile_off[e]) % MT) return;
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
            const int m = tid / TL_MOE_TILE_M;
            const int t = m == 0 || (tile + m < n_tiles && p.tile_expert[tile + m] == e) ? tile + m : -1;
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
     * once, then multiplied. The first U chunks' weights are requested before fetch_rows (faster
     * for bf16, most at large M: bench/journal/moe-kernel.md, early weights). Then the item's
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
        /* PAIR: mxfp8's scaled step takes two adjacent chunks (u = 0, 1), so a wave's chunks are
         * 2 w, 2 w + 1, then 2 (w + NW), ...; the others' U chunks lie c_step apart */
        constexpr bool PAIR = SCALED(DT) && U == 2;
        const int nchunks = p.K / CK, c_step = SPLIT_K ? NW : 1, c_first = SPLIT_K ? wave * (PAIR ? U : 1) : 0,
                  u_step = PAIR ? 1 : c_step;
        const float *ws = p.w_scale + (size_t)e * p.w_mat_scales;
        /* Weights are loaded evict-first (ld.global.cs): faster at every M in both stages, except in
         * stage 2 when all its items fit in one wave of resident blocks (M = 1: there plain loads
         * are faster, hence the exception; bench/journal/moe-kernel.md, streaming loads). */
        const bool evict_first = STAGE == 1 || (long long)n_tiles * (p.n_out / NB) > p.resident;
        Chunk<DT, V> ch[U][MT];
        auto load_weights_at = [&](int c0) {
#pragma unroll
            for (int u = 0; u < U; u++)
                if (c0 + u * u_step < nchunks)
                    load_weights<DT, V, STAGE>(ch[u][0], wsrc, c0 + u * u_step, kgrp, evict_first);
        };
        /* fp8 and mxfp8 keep their scale prologue's registers instead: early weights make fp8
         * spill and run slower, packed or not (bench/journal/moe-kernel.md, early weights) */
        constexpr bool early = DT != DT_FP8 && DT != DT_MXFP8;
        if (early) load_weights_at(c_first);
        tl_grid_dep_wait(); /* the activations (and fp8 scales) are the previous kernel's output */
        fetch_rows();
        for (int c0 = c_first; c0 < nchunks; c0 += c_step * U) {
            if (!early || c0 != c_first) load_weights_at(c0);
#pragma unroll
            for (int u = 0; u < U; u++)
                if (c0 + u * u_step < nchunks)
#pragma unroll
                    for (int m = 0; m < MT; m++) {
                        if constexpr (SCALED(DT))
                            load_acts_mx<DT, V>(ch[u][m], p, arow[m][0], lane_k<DT, V, STAGE>(c0 + u * u_step, kgrp), kgrp);
                        else
                            load_acts<DT, V>(ch[u][m], p, arow[m], lane_k<DT, V, STAGE>(c0 + u * u_step, kgrp));
                    }
            if constexpr (SCALED(DT) && MT == 1) { /* one 128-deep step: block 4 G + kgrp of the K/32 */
#if TL_MOE_SCALED_MX
                const int G = PAIR ? c0 / 2 : c0, kb = p.K / TL_MX_BLOCK, blk = 4 * G + kgrp;
                const int sa = arow[0][0] >= 0 ? (int)p.a_e8m0[(size_t)arow[0][0] * kb + blk] : TL_E8M0_ONE;
                int sb[NF];
#pragma unroll
                for (int f = 0; f < NF; f++) sb[f] = (int)p.w_e8m0[(size_t)e * p.w_mat_scales + (size_t)wn[f] * kb + blk];
                mma_scaled_mx<DT, V, U>(ch, acc, sa, sb);
#endif
            } else {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int c = c0 + u * u_step, k = lane_k<DT, V, STAGE>(c, kgrp),
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
            if (t < 0) continue; /* the group holds fewer than MT tiles */
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
            *dst = (uint16_t)tl_code_bf16_from_f32(gs / (1.0f + tl_expf(-gs)) * us);
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

/* `group` tiles of one expert per work item (tl_moe_tiles_per_item: each weight byte feeds up to
 * 16 x group rows); bf16 only: fp8's stage 2 would spill 144 bytes paired, and its stage 1 is held
 * by per-row work, not by its weights (bench/journal/moe-kernel.md, tile pairing). */
template <int DT, int STAGE>
static int launch_grouped(const GemmArgs &a, long long blocks, int group, bool dependent, hipStream_t st)
{
    if constexpr (DT == DT_BF16) {
        if (group >= 4) return launch_stage<DT, STAGE, 4>(a, blocks, dependent, st);
        if (group == 2) return launch_stage<DT, STAGE, 2>(a, blocks, dependent, st);
    }
    return launch_stage<DT, STAGE, 1>(a, blocks, dependent, st);
}
template <int DT>
static int launch_gemm(const GemmArgs &a, long long blocks, int stage, int group, bool dependent, hipStream_t st)
{
    return stage == 1 ? launch_grouped<DT, 1>(a, blocks, group, dependent, st)
                      : launch_grouped<DT, 2>(a, blocks, group, dependent, st);
}

int tl_moe_launch_gemm(int dtype, int stage, const GemmArgs &a, long long blocks, int group, bool dependent,
                       hipStream_t st)
{
    return by_dtype(dtype, [&](auto d) { return launch_gemm<decltype(d)::value>(a, blocks, stage, group, dependent, st); });
}
