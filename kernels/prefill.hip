/* kernels/prefill.hip: causal prefill attention forward (contract/prefill.h; the launcher's API:
 * kernels/prefill.h), a FlashAttention-2 style kernel; on Hopper FlashAttention-3's warp-specialized
 * warpgroup form (pf_body_ws).
 *
 * Work-group: block_m query rows of one head (tl_prefill_tiling_for), grid ceil(seq / block_m) x H
 * with the head fastest (the heads of one KV head run side by side and share its K/V in L2) and the
 * query blocks that see the most keys first. Its warps (waves) own 16 x MT rows each and walk the
 * keys in tiles of block_n: tiles above the diagonal are never loaded (the loop ends at the
 * diagonal), a warp skips a tile whose first key lies after its last row, and tiles that cross the
 * diagonal or the end of the sequence are masked (-inf). Keys and rows past seq are zero-filled.
 * Online softmax in float32 in the log2 domain (the softmax scale times log2 e folded into the
 * score scale, exp2); the row sum l keeps the unrounded P; LSE = m ln 2 + ln l.
 *
 * Formats per target:
 *   sm_90a  (Hopper, nvcc for sm_90a: TL_WGMMA_AVAILABLE) the contract's 128 x 128 x 8 tiling runs
 *           pf_body_ws: a producer warpgroup loads Q and the K/V tiles by the copy engine (TMA,
 *           128-byte swizzle, mbarriers; three buffers, two for bf16 dqk 192) and two warpgroups
 *           of 64 rows compute side by side (see pf_body_ws); fp8's V comes as V^T codes from
 *           pf_vt_kernel, launched before it (keys in P's fragment order). S = Q K^T from shared
 *           memory (bf16 m64n128k16, or e4m3 m64n128k32 on the FP8 codes: no decode), O += P V
 *           with P in registers (bf16: P rounded to bf16, V read MN-major through the
 *           transposed-B form; fp8: P as the contract's E4M3 codes of P x 448 on the V^T codes,
 *           e4m3 m64n128k32, each tile's P V summed in its own accumulator: wgmma's E4M3
 *           accumulator keeps 13 mantissa bits); scales and softmax as below.
 *           Other tilings run the mma.sync body.
 *   sm_90   bf16 mma.sync m16n8k16 (kernels/mma.h) for both products, in both dtypes. FP8 codes are
 *           decoded exactly into f16 while being staged in shared memory (gpu.h's tl_e4m3x2_f16x2:
 *           one cvt per two codes on sm_89+, integer decoding on sm_80;
 *           f16 mma.sync m16n8k16 runs at bf16's rate, while sm_90's e4m3 mma.sync is emulated:
 *           391 against 645.7 TFLOP/s, kernels/mma.h); Q.K^T runs on the codes'
 *           values and the score is multiplied by q_scale x k_scale x scale x log2 e; P follows the
 *           contract's rule: the hardware's RNE saturating E4M3 conversion of P x 448 (the rounding
 *           of tl_prefill_p_code), its value (0..448, exact in f16) enters P.V, and 1/448 times
 *           the value scale multiplies the accumulator (kept in units of the current 128-key
 *           block's v_scale / 448: each rescale folds the ratio of two blocks' scales in). BF16: P
 *           rounded to bf16 (RNE). S stays in registers and becomes P's A fragments in registers
 *           (tl_frag_a_from_c); Q, K and V fragments come from shared memory by ldmatrix (V with
 *           .trans), K/V tiles double-buffered by cp.async (bf16; fp8: one staging buffer of codes
 *           in flight while the decoded tile is computed).
 *   gfx950  bf16: v_mfma_f32_16x16x32_bf16. fp8: v_mfma_scale_f32_16x16x128_f8f6f4 (unit scales)
 *           on the E4M3FN codes for both products: dqk padded with zero codes to 256 (192) or kept
 *           (128); P as codes tl_prefill_p_code (contract), V staged transposed as codes.
 *   gfx942  bf16 v_mfma_f32_16x16x16_bf16 for both dtypes: gfx942's FP8 is FNUZ (bias 8), so the
 *           E4M3FN codes are decoded (v_cvt_pk_f32_fp8 reads them as FNUZ: every value halved, 0x80
 *           made 0, times 2 again: exact) into bf16 while being staged, and P is rounded by the
 *           contract's rule and carried as its bf16 value, as on sm_90.
 *   The AMD bodies are plain: S and P go through LDS, V is staged transposed, one buffer, loads
 *   without async copies (compiled, never run: no AMD GPU here; not tuned).
 * Cost per work-group and computed tile: block_m x block_n x (dqk + dv) x 2 FLOP on the matrix
 * cores, block_m x block_n exp2; K/V tiles read from L2/HBM once per work-group.
 */
#include "prefill.h"

#include <math.h>
#include <stdlib.h>

#include <type_traits>

#include "mma.h"
#include "wgmma.h"

struct PfArgs {
    const void *q, *k, *v;
    const float *qs, *ks, *vs;
    uint16_t *o;
    float *lse;
    unsigned long long *clk; /* work-group 0: SM cycles and global ns at its start and end */
    long seq, nblk;
    int heads, kv_heads, nqb, causal;
    float scale_log2;
};

enum { PF_SM90 = 0, PF_GFX942 = 1, PF_GFX950 = 2 };

/* Shared memory of one instance (bytes), host and device. */
template <int ARCH, int DQK, int DV, int BM, int BN, bool FP8>
struct PfSmem {
    /* sm_90: Q [BM][DQK+8], K [KB][BN][DQK+8], V [KB][BN][DV+8] bf16 (KB 2 for bf16, 1 for fp8), and
     * fp8's staging of codes [BN][DQK] + [BN][DV] */
    static constexpr int LDQ = DQK + 8, LDV = DV + 8, KB = FP8 ? 1 : 2;
    static constexpr size_t SM90 = (size_t)2 * (BM * LDQ + KB * BN * (LDQ + LDV)) + (FP8 ? (size_t)BN * (DQK + DV) : 0);
    /* AMD: element E (bf16, or codes on gfx950 fp8), DQKP = dqk padded to the K-depth;
     * Q [BM][DQKP], K [BN][DQKP], V^T [DV][BN], P [BM][BN] of E, S [BM][BN] float32; gfx950's FP8
     * (pf_body_gfx950_fp8) keeps S and P in registers: Q, K and V^T only */
    static constexpr bool NATIVE = FP8 && ARCH == PF_GFX950;
    static constexpr int ESZ = NATIVE ? 1 : 2, DQKP = NATIVE ? (DQK + 127) / 128 * 128 : DQK;
    static constexpr size_t AMD = NATIVE ? (size_t)BM * DQKP + (size_t)BN * DQKP + (size_t)DV * BN
                                         : (size_t)ESZ * (BM * DQKP + BN * DQKP + DV * BN + BM * BN) + (size_t)4 * BM * BN;
    static constexpr size_t BYTES = ARCH == PF_SM90 ? SM90 : AMD;
};

/* sm_90a warp-specialized kernel (pf_body_ws): its geometry and shared memory, host and device.
 * Warpgroup 0 produces (one thread issues the copy engine's loads), warpgroups 1 and 2 compute 64
 * query rows each. Shared memory: Q [QKB column blocks][BM rows][128 bytes]; per stage K the same
 * for BN keys and V (bf16: [2 column blocks of 64 dims][BN keys][128 bytes], read MN-major; fp8:
 * V^T [DV dims][BN keys' bytes], keys in P's fragment order, pf_vt_kernel's layout); then the
 * barriers: Q's, then each stage's K full, V full, K empty and V empty. */
template <int DQK, bool FP8>
struct PfWs {
    static constexpr int BM = 128, BN = 128, DV = 128, THREADS = 384;
    static constexpr int ESZ = FP8 ? 1 : 2;
    static constexpr int CE = 128 / ESZ;                /* elements of a 128-byte column block */
    static constexpr int QKB = (DQK * ESZ + 127) / 128; /* column blocks of a Q/K row (fp8 192: the last half zeros) */
    static constexpr int KSTEPS = DQK * ESZ / 32;       /* 32-byte k-steps of S = Q K^T */
    static constexpr size_t Q_BYTES = (size_t)QKB * BM * 128, K_BYTES = (size_t)QKB * BN * 128;
    static constexpr size_t V_BYTES = (size_t)BN * DV * ESZ;
    /* three stages where they fit (bf16 dqk 192: two) */
    static constexpr int STAGES = 1024 + Q_BYTES + 3 * (K_BYTES + V_BYTES) + 8 * (1 + 4 * 3) <= 232448 ? 3 : 2;
    static constexpr size_t BAR_OFF = Q_BYTES + STAGES * (K_BYTES + V_BYTES);
    static constexpr size_t BYTES = 1024 + BAR_OFF + 8 * (1 + 4 * STAGES); /* + alignment */
};

/* The warp-specialized kernel's arguments: Q, K and V (bf16) or V^T (fp8) maps first. */
struct PfWsArgs {
    tl_tmap tq, tk, tv;
    PfArgs a;
};

static __device__ __forceinline__ float pf_exp2(float x)
{
#if defined(TL_GPU_AMD)
    return __builtin_amdgcn_exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

/* =============================================================================================
 * sm_90
 * =========================================================================================== */
#if defined(TL_MMA_TARGET_SM80)

/* ROWS rows of ROWB bytes from global rows r0.. (stride gs bytes; rows >= seq zero-filled) into
 * shared memory rows of stride ld bytes, 16 bytes a copy, THREADS threads */
template <int ROWS, int ROWB, int THREADS>
static __device__ __forceinline__ void pf_copy(uint8_t *dst, int ld, const uint8_t *src, size_t gs, long r0, long seq, int tid)
{
    constexpr int CPR = ROWB / 16;
#pragma unroll
    for (int i = tid; i < ROWS * CPR; i += THREADS) {
        const int r = i / CPR, c = i % CPR;
        const bool live = r0 + r < seq;
        tl_cp_async16(dst + r * ld + 16 * c, live ? src + (size_t)(r0 + r) * gs + 16 * c : src, live ? 16 : 0);
    }
}

/* two E4M3 codes (low byte first) as their exact f16 values (low half first): gpu.h's
 * tl_e4m3x2_f16x2, one instruction on sm_89+ */
static __device__ __forceinline__ uint32_t pf_e4m3x2_f16(uint32_t h) { return tl_e4m3x2_f16x2(h); }
/* ROWS rows of DIM codes (dense in src, or global rows of stride gs from r0 when gs > 0) decoded
 * into f16 rows of stride ld elements; rows >= seq become zeros */
template <int ROWS, int DIM, int THREADS>
static __device__ __forceinline__ void pf_decode(uint16_t *dst, int ld, const uint8_t *src, size_t gs, long r0, long seq, int tid)
{
    constexpr int CPR = DIM / 8;
#pragma unroll 4
    for (int i = tid; i < ROWS * CPR; i += THREADS) {
        const int r = i / CPR, c = i % CPR;
        uint2 w = make_uint2(0, 0);
        if (gs == 0) w = *(const uint2 *)(src + r * DIM + 8 * c);
        else if (r0 + r < seq) w = *(const uint2 *)(src + (size_t)(r0 + r) * gs + 8 * c);
        uint4 o = make_uint4(pf_e4m3x2_f16(w.x & 0xFFFFu), pf_e4m3x2_f16(w.x >> 16), pf_e4m3x2_f16(w.y & 0xFFFFu),
                             pf_e4m3x2_f16(w.y >> 16));
        *(uint4 *)(dst + r * ld + 8 * c) = o;
    }
}

static __device__ __forceinline__ uint32_t pf_pack_bf16(float lo, float hi)
{
    uint32_t y;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(hi), "f"(lo));
    return y;
}
struct PfPackBf16 {
    __device__ __forceinline__ uint32_t operator()(float lo, float hi) const { return pf_pack_bf16(lo, hi); }
};
/* the contract's P rule: E4M3 codes of lo x 448 and hi x 448 (RNE, saturating), as f16 values */
struct PfPackP8 {
    __device__ __forceinline__ uint32_t operator()(float lo, float hi) const
    {
        return pf_e4m3x2_f16(tl_e4m3x2_hw(lo * TL_PREFILL_P_MULT, hi * TL_PREFILL_P_MULT));
    }
};
/* c += a b: bf16 fragments, or (FP8 inputs) f16 ones */
template <bool F16>
static __device__ __forceinline__ void pf_mma(tl_frag_c *c, const tl_frag_a_bf16 *a, const tl_frag_b_bf16 *b)
{
    if (F16) tl_mma_f16(c, a, b);
    else tl_mma_bf16(c, a, b);
}

template <int DQK, int DV, int BM, int BN, int WARPS, bool FP8>
static __device__ __forceinline__ void pf_body_sm90(const PfArgs &a)
{
    using L = PfSmem<PF_SM90, DQK, DV, BM, BN, FP8>;
    constexpr int MT = BM / (16 * WARPS), THREADS = 32 * WARPS, LDQ = L::LDQ, LDV = L::LDV;
    constexpr int NT = BN / 8, DT = DV / 8, BPE = FP8 ? 1 : 2;
    static_assert(BM % (16 * WARPS) == 0 && BN % 16 == 0 && DQK % 16 == 0 && DV % 16 == 0, "tiling");
    static_assert(!FP8 || (TL_PREFILL_BLOCK % BM == 0 || BM % TL_PREFILL_BLOCK == 0) && TL_PREFILL_BLOCK % BN == 0,
                  "an fp8 tile lies in one scale block");
    TL_SHARED_DYNAMIC(16, uint8_t, pf_smem);
    uint16_t *Qs = (uint16_t *)pf_smem;
    uint16_t *Ks = Qs + BM * LDQ;
    uint16_t *Vs = Ks + L::KB * BN * LDQ;
    uint8_t *raw = (uint8_t *)(Vs + L::KB * BN * LDV);

    const int tid = (int)tl_thread_x(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int b = (int)tl_block_x(), qb = a.nqb - 1 - b / a.heads, h = b % a.heads;
    const int kvh = h / (a.heads / a.kv_heads);
    const long q0 = (long)qb * BM, seq = a.seq;
    const int wrow = warp * 16 * MT;
    const long kend = a.causal ? (q0 + BM < seq ? q0 + BM : seq) : seq;
    const int ntiles = (int)((kend + BN - 1) / BN);
    unsigned long long c0 = 0, n0 = 0;
    if (b == 0 && tid == 0) c0 = clock64(), n0 = tl_gpu_clock();

    const size_t qgs = (size_t)a.heads * DQK * BPE, kgs = (size_t)a.kv_heads * DQK * BPE, vgs = (size_t)a.kv_heads * DV * BPE;
    const uint8_t *qg = (const uint8_t *)a.q + (size_t)h * DQK * BPE;
    const uint8_t *kg = (const uint8_t *)a.k + (size_t)kvh * DQK * BPE;
    const uint8_t *vg = (const uint8_t *)a.v + (size_t)kvh * DV * BPE;

    /* prologue: Q and the first K/V tile */
    if (FP8) {
        pf_copy<BN, DQK, THREADS>(raw, DQK, kg, kgs, 0, seq, tid);
        pf_copy<BN, DV, THREADS>(raw + BN * DQK, DV, vg, vgs, 0, seq, tid);
        tl_cp_async_commit();
        pf_decode<BM, DQK, THREADS>(Qs, LDQ, qg, qgs, q0, seq, tid);
    } else {
        pf_copy<BM, DQK * 2, THREADS>((uint8_t *)Qs, LDQ * 2, qg, qgs, q0, seq, tid);
        pf_copy<BN, DQK * 2, THREADS>((uint8_t *)Ks, LDQ * 2, kg, kgs, 0, seq, tid);
        pf_copy<BN, DV * 2, THREADS>((uint8_t *)Vs, LDV * 2, vg, vgs, 0, seq, tid);
        tl_cp_async_commit();
    }

    float qsc = 1.0f, vf = 1.0f;
    if (FP8) {
        qsc = a.qs[(size_t)h * a.nblk + q0 / TL_PREFILL_BLOCK];
        vf = a.vs[(size_t)kvh * a.nblk] / TL_PREFILL_P_MULT;
    }
    float m[MT][2], l[MT][2];
    tl_frag_c acc[MT][DT];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
        for (int d = 0; d < DT; d++) tl_frag_zero(&acc[mt][d]);
    }

    for (int kt = 0; kt < ntiles; kt++) {
        const long k0 = (long)kt * BN;
        const uint16_t *Kt = Ks, *Vt = Vs;
        if (FP8) {
            tl_cp_async_wait<0>();
            tl_block_sync(); /* codes of tile kt landed; every warp is done with tile kt - 1 */
            pf_decode<BN, DQK, THREADS>(Ks, LDQ, raw, 0, 0, seq, tid);
            pf_decode<BN, DV, THREADS>(Vs, LDV, raw + BN * DQK, 0, 0, seq, tid);
            tl_block_sync();
            if (kt + 1 < ntiles) {
                pf_copy<BN, DQK, THREADS>(raw, DQK, kg, kgs, k0 + BN, seq, tid);
                pf_copy<BN, DV, THREADS>(raw + BN * DQK, DV, vg, vgs, k0 + BN, seq, tid);
            }
            tl_cp_async_commit();
        } else {
            const int nb = (kt + 1) & 1;
            if (kt + 1 < ntiles) {
                pf_copy<BN, DQK * 2, THREADS>((uint8_t *)(Ks + nb * BN * LDQ), LDQ * 2, kg, kgs, k0 + BN, seq, tid);
                pf_copy<BN, DV * 2, THREADS>((uint8_t *)(Vs + nb * BN * LDV), LDV * 2, vg, vgs, k0 + BN, seq, tid);
            }
            tl_cp_async_commit();
            tl_cp_async_wait<1>();
            tl_block_sync();
            Kt = Ks + (kt & 1) * BN * LDQ;
            Vt = Vs + (kt & 1) * BN * LDV;
        }
        const bool active = !a.causal || k0 <= q0 + wrow + 16 * MT - 1;
        if (active) {
            /* S = Q K^T */
            tl_frag_c S[MT][NT];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NT; n++) tl_frag_zero(&S[mt][n]);
#pragma unroll
            for (int ks = 0; ks < DQK / 16; ks++) {
                tl_frag_a_bf16 qa[MT];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) tl_frag_ldsm_a_bf16(&qa[mt], Qs + (wrow + 16 * mt) * LDQ + 16 * ks, LDQ);
#pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    tl_frag_b_bf16 b0, b1;
                    tl_frag_ldsm_bt_bf16_x2(&b0, &b1, Kt + 16 * np * LDQ + 16 * ks, LDQ);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        pf_mma<FP8>(&S[mt][2 * np], &qa[mt], &b0);
                        pf_mma<FP8>(&S[mt][2 * np + 1], &qa[mt], &b1);
                    }
                }
            }
            /* scale, mask, online softmax */
            float sc = a.scale_log2, vf_new = vf;
            if (FP8) {
                sc *= qsc * a.ks[(size_t)kvh * a.nblk + k0 / TL_PREFILL_BLOCK];
                vf_new = a.vs[(size_t)kvh * a.nblk + k0 / TL_PREFILL_BLOCK] / TL_PREFILL_P_MULT;
            }
            const bool mask = (a.causal && k0 + BN - 1 > q0 + wrow) || k0 + BN > seq;
            /* key index minus row index at (mt, n, r) is dk + 8 n + (r & 1) - 16 mt - 8 (r / 2) */
            const int dk = (int)(k0 - q0) + 2 * t - wrow - g, kleft = (int)(seq - k0) - 2 * t;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        float x = S[mt][n].v[r];
                        if (mask) {
                            const int c = 8 * n + (r & 1);
                            if ((a.causal && dk + c - 16 * mt - 8 * (r / 2) > 0) || c >= kleft) x = -INFINITY;
                        }
                        S[mt][n].v[r] = x;
                        mx[r / 2] = fmaxf(mx[r / 2], x);
                    }
                float corr[2];
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    mx[hr] = fmaxf(mx[hr], tl_shfl_xor(mx[hr], 1));
                    mx[hr] = fmaxf(mx[hr], tl_shfl_xor(mx[hr], 2));
                    const float mn = fmaxf(m[mt][hr], mx[hr] * sc), mu = mn == -INFINITY ? 0.0f : mn;
                    corr[hr] = pf_exp2(m[mt][hr] - mu);
                    m[mt][hr] = mn;
                    float sum = 0.0f;
#pragma unroll
                    for (int n = 0; n < NT; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const float p = pf_exp2(fmaf(S[mt][n].v[2 * hr + e], sc, -mu));
                            S[mt][n].v[2 * hr + e] = p;
                            sum += p;
                        }
                    l[mt][hr] = l[mt][hr] * corr[hr] + sum;
                    if (FP8) corr[hr] *= vf / vf_new;
                }
                /* the rescale, unless no row of the warp needs it (the max settled; bf16 only: an fp8
                 * tile brings its own value scale) */
                if (FP8 || __any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
                    for (int d = 0; d < DT; d++) {
                        acc[mt][d].v[0] *= corr[0], acc[mt][d].v[1] *= corr[0];
                        acc[mt][d].v[2] *= corr[1], acc[mt][d].v[3] *= corr[1];
                    }
                }
            }
            vf = vf_new;
            /* O += P V, P from the S registers */
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                tl_frag_a_bf16 pa[MT];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if (FP8) tl_frag_a_from_c(&pa[mt], S[mt][2 * kk], S[mt][2 * kk + 1], PfPackP8());
                    else tl_frag_a_from_c(&pa[mt], S[mt][2 * kk], S[mt][2 * kk + 1], PfPackBf16());
                }
#pragma unroll
                for (int dp = 0; dp < DV / 16; dp++) {
                    tl_frag_b_bf16 b0, b1;
                    tl_frag_ldsm_b_bf16_x2(&b0, &b1, Vt + 16 * kk * LDV + 16 * dp, LDV);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        pf_mma<FP8>(&acc[mt][2 * dp], &pa[mt], &b0);
                        pf_mma<FP8>(&acc[mt][2 * dp + 1], &pa[mt], &b1);
                    }
                }
            }
        }
        if (!FP8) tl_block_sync(); /* buffer kt & 1 is refilled with tile kt + 2 next */
    }
    tl_cp_async_wait<0>();

    /* O = acc x vf / l (bf16), LSE = m ln 2 + ln l */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float s = l[mt][hr];
            s += tl_shfl_xor(s, 1);
            s += tl_shfl_xor(s, 2);
            const long row = q0 + wrow + 16 * mt + g + 8 * hr;
            if (row >= seq) continue;
            const float f = vf / s;
            uint16_t *orow = a.o + ((size_t)row * a.heads + h) * DV + 2 * t;
#pragma unroll
            for (int d = 0; d < DT; d++)
                *(uint32_t *)(orow + 8 * d) = pf_pack_bf16(acc[mt][d].v[2 * hr] * f, acc[mt][d].v[2 * hr + 1] * f);
            if (t == 0) a.lse[(size_t)h * seq + row] = m[mt][hr] * 0.69314718055994531f + logf(s);
        }
    if (b == 0 && tid == 0) {
        a.clk[0] = c0, a.clk[1] = n0;
        a.clk[2] = clock64(), a.clk[3] = tl_gpu_clock();
    }
}

/* ---- sm_90a: the warp-specialized warpgroup kernel (kernels/wgmma.h; pf_body_ws below) ---- */
#if TL_WGMMA_AVAILABLE

/* The key (0..31 within a 32-key step) at byte k of P's E4M3 register fragment: lane t's word holds
 * its S columns 2t, 2t + 1, 8 + 2t, 9 + 2t (and + 16), which the fragment reads as k = 4t..4t + 3. */
static __host__ __device__ __forceinline__ int pf_wg_key_of(int k)
{
    const int h = k / 16, t = (k % 16) / 4, i = k % 4;
    return 16 * h + 8 * (i >> 1) + 2 * t + (i & 1);
}

#define PF_LOG2_P_MULT 8.8073549220576f /* log2(TL_PREFILL_P_MULT) */

/* four E4M3 codes of the contract's P rule (RNE, saturating) from P x 448 (the softmax's
 * exponentials carry the factor: log2 448 is taken off their exponent), a first in the low byte */
static __device__ __forceinline__ uint32_t pf_p_code4(float a, float b, float c, float d)
{
    return tl_e4m3x2_hw(a, b) | tl_e4m3x2_hw(c, d) << 16;
}

/* The warp-specialized body (FlashAttention-3's producer and consumers, without its ping-pong:
 * ordering the two warpgroups' products by named barriers was measured no faster for bf16 and
 * 3-7% slower for fp8). Warpgroup 0 (24 registers a thread) loads Q once and the K/V tiles through
 * STAGES buffers by the copy engine (one thread; K and V of a stage refilled once the eight
 * computing warps have arrived on that half's empty barrier). Warpgroups 1 and 2 (240 registers)
 * each own 64 query rows and share the tensor cores as their products come: per tile kt, issue
 * S(kt + 1) = Q K^T and O += P(kt) V, wait for S(kt + 1) only (K(kt + 1) released), the online
 * softmax of tile kt + 1 while P(kt) V runs, wait for P(kt) V (V(kt) released), rescale O, pack
 * P(kt + 1) into the A registers. fp8: each tile's P V lands in its own accumulator (S's registers;
 * wgmma's E4M3 accumulator keeps 13 mantissa bits), waited and folded into the float32 O (o = o corr
 * + P V) before S(kt + 1) is issued: the fp8 softmax does not overlap the warpgroup's own P V. Scores, masks and scales as the mma.sync body; P as there (bf16
 * RNE, or the contract's E4M3 codes of P x 448, which the register-A E4M3 form reads in
 * pf_wg_key_of's key order). */
template <int DQK, bool FP8>
static __device__ __forceinline__ void pf_body_ws(const PfWsArgs &w)
{
    using L = PfWs<DQK, FP8>;
    constexpr int BM = L::BM, BN = L::BN, DV = L::DV, STAGES = L::STAGES;
    static_assert(!FP8 || (TL_PREFILL_BLOCK == BM && TL_PREFILL_BLOCK == BN), "an fp8 tile is one scale block");
    const PfArgs &a = w.a;
    TL_SHARED_DYNAMIC(16, uint8_t, pf_smem);
    uint8_t *base = (uint8_t *)(((uintptr_t)pf_smem + 1023) & ~(uintptr_t)1023);
    uint8_t *Qs = base, *Ks = Qs + L::Q_BYTES, *Vs = Ks + STAGES * L::K_BYTES;
    /* K and V have barriers of their own: S(kt + 1) waits for K alone, P(kt + 1) V for V an iteration
     * later, and K's stage is released once S is done, V's once P V is */
    uint64_t *qfull = (uint64_t *)(base + L::BAR_OFF), *fullk = qfull + 1, *fullv = fullk + STAGES;
    uint64_t *emptyk = fullv + STAGES, *emptyv = emptyk + STAGES;

    const int tid = (int)tl_thread_x(), wg = tid / 128;
    const int b = (int)tl_block_x(), qb = a.nqb - 1 - b / a.heads, h = b % a.heads;
    const int kvh = h / (a.heads / a.kv_heads);
    const long q0 = (long)qb * BM, seq = a.seq;
    const long kend = a.causal ? (q0 + BM < seq ? q0 + BM : seq) : seq;
    const int ntiles = (int)((kend + BN - 1) / BN);
    unsigned long long c0 = 0, n0 = 0;
    if (b == 0 && tid == 128) c0 = clock64(), n0 = tl_gpu_clock();
    if (tid == 0) {
        tl_mbar_init(qfull, 1);
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            tl_mbar_init(fullk + s, 1), tl_mbar_init(fullv + s, 1);
            tl_mbar_init(emptyk + s, 8), tl_mbar_init(emptyv + s, 8);
        }
        tl_mbar_init_fence();
    }
    tl_block_sync();

    if (wg == 0) { /* the producer */
        tl_setmaxnreg_dec<24>();
        if (tid == 0) {
            tl_mbar_expect_tx(qfull, (uint32_t)L::Q_BYTES);
#pragma unroll
            for (int c = 0; c < L::QKB; c++) tl_tma_load_3d(Qs + c * (BM * 128), &w.tq, c * L::CE, h, (int)q0, qfull);
            if (FP8) tl_grid_dep_wait(); /* V^T comes from pf_vt_kernel, launched just before */
            int kt = 0;
            do {
                const int s = kt % STAGES;
                const uint32_t ph = ((kt / STAGES) - 1) & 1;
                uint8_t *Kb = Ks + s * L::K_BYTES, *Vb = Vs + s * L::V_BYTES;
                if (kt >= STAGES) tl_mbar_wait(emptyk + s, ph);
                tl_mbar_expect_tx(fullk + s, (uint32_t)L::K_BYTES);
#pragma unroll
                for (int c = 0; c < L::QKB; c++) tl_tma_load_3d(Kb + c * (BN * 128), &w.tk, c * L::CE, kvh, kt * BN, fullk + s);
                if (kt >= STAGES) tl_mbar_wait(emptyv + s, ph);
                uint64_t *f = fullv + s;
                tl_mbar_expect_tx(f, (uint32_t)L::V_BYTES);
                if (FP8) tl_tma_load_2d(Vb, &w.tv, kt * BN, kvh * DV, f);
                else
#pragma unroll
                    for (int c = 0; c < 2; c++) tl_tma_load_3d(Vb + c * (BN * 128), &w.tv, c * 64, kvh, kt * BN, f);
            } while (++kt < ntiles);
        }
        return;
    }

    /* the two computing warpgroups */
    tl_setmaxnreg_inc<240>();
    const int cw = wg - 1, ww = (tid / 32) % 4, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int wrow = 64 * cw + 16 * ww; /* this warp's first row in the block */
    float qsc = 1.0f, vf = 1.0f;
    if (FP8) {
        qsc = a.qs[(size_t)h * a.nblk + q0 / TL_PREFILL_BLOCK];
        vf = a.vs[(size_t)kvh * a.nblk];
    }
    /* l: the row sums of the exponentials, fp8's x 448 (P's codes' factor, which the value scale
     * vf does not divide out) */
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float S[64], o[64], acc[FP8 ? 32 : 1]; /* acc (fp8): half a tile's P V */
#pragma unroll
    for (int i = 0; i < 64; i++) o[i] = 0.0f;
    const uint64_t dq = tl_wgmma_desc_sw128(Qs + 64 * cw * 128);
    const bool mask_rows = a.causal; /* the diagonal tile is the last */

    /* S = Q K^T of the tile in stage st (the caller fences and commits) */
    auto issue_s = [&](int st) {
        const uint64_t dk = tl_wgmma_desc_sw128(Ks + st * L::K_BYTES);
#pragma unroll
        for (int ks = 0; ks < L::KSTEPS; ks++) {
            const uint32_t qoff = (ks * 32 / 128) * (BM * 128) + (ks * 32) % 128;
            const uint32_t koff = (ks * 32 / 128) * (BN * 128) + (ks * 32) % 128;
            const uint64_t da = tl_wgmma_desc_advance(dq, qoff), db = tl_wgmma_desc_advance(dk, koff);
            if (FP8) {
                if (ks == 0) tl_wgmma_m64n128k32_e4m3_z(S, da, db);
                else tl_wgmma_m64n128k32_e4m3(S, da, db, 1);
            } else {
                if (ks == 0) tl_wgmma_m64n128k16_bf16_z(S, da, db);
                else tl_wgmma_m64n128k16_bf16(S, da, db, 1);
            }
        }
    };
    /* the online softmax of tile kt on S (exponentials left in S: P, fp8's P x 448); corr: the
     * factor of what O held (fp8: with the value scales' ratio). Lane-ops a score: the max, one
     * FMA, the exponential, the sum (and the masking of the diagonal or last tile, in a branch of
     * its own: a per-element test inside the loop is predicated into every tile by the compiler) */
    auto softmax = [&](int kt, float (&corr)[2]) {
        const long k0 = (long)kt * BN;
        float sc = a.scale_log2, vf_new = vf;
        if (FP8) {
            sc *= qsc * a.ks[(size_t)kvh * a.nblk + k0 / TL_PREFILL_BLOCK];
            vf_new = a.vs[(size_t)kvh * a.nblk + k0 / TL_PREFILL_BLOCK];
        }
        /* element 4j + r is row wrow + g + 8 (r / 2), key k0 + 8j + 2t + (r & 1) */
        if ((mask_rows && k0 + BN - 1 > q0 + wrow) || k0 + BN > seq) {
            const int dkey = (int)(k0 - q0) + 2 * t - wrow - g, kleft = (int)(seq - k0) - 2 * t;
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int c = 8 * j + (r & 1);
                    if ((a.causal && dkey + c - 8 * (r / 2) > 0) || c >= kleft) S[4 * j + r] = -INFINITY;
                }
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) mx[r / 2] = fmaxf(mx[r / 2], S[4 * j + r]);
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            mx[hr] = fmaxf(mx[hr], tl_shfl_xor(mx[hr], 1));
            mx[hr] = fmaxf(mx[hr], tl_shfl_xor(mx[hr], 2));
            const float mn = fmaxf(m[hr], mx[hr] * sc), mu = mn == -INFINITY ? 0.0f : mn;
            corr[hr] = pf_exp2(m[hr] - mu);
            m[hr] = mn;
            const float bias = FP8 ? mu - PF_LOG2_P_MULT : mu;
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float p = pf_exp2(fmaf(S[4 * j + 2 * hr + e], sc, -bias));
                    S[4 * j + 2 * hr + e] = p;
                    sum += p;
                }
            l[hr] = l[hr] * corr[hr] + sum;
            if (FP8) corr[hr] *= vf / vf_new;
        }
        vf = vf_new;
    };

    constexpr int NPA = FP8 ? BN / 32 : BN / 16;
    uint32_t pa[NPA][4];
    auto pack = [&]() {
#pragma unroll
        for (int kk = 0; kk < NPA; kk++) {
            if (FP8) {
                const float *p = S + 16 * kk;
                pa[kk][0] = pf_p_code4(p[0], p[1], p[4], p[5]);
                pa[kk][1] = pf_p_code4(p[2], p[3], p[6], p[7]);
                pa[kk][2] = pf_p_code4(p[8], p[9], p[12], p[13]);
                pa[kk][3] = pf_p_code4(p[10], p[11], p[14], p[15]);
            } else {
                const float *p = S + 8 * kk;
                pa[kk][0] = pf_pack_bf16(p[0], p[1]);
                pa[kk][1] = pf_pack_bf16(p[2], p[3]);
                pa[kk][2] = pf_pack_bf16(p[4], p[5]);
                pa[kk][3] = pf_pack_bf16(p[6], p[7]);
            }
        }
    };

    tl_mbar_wait(qfull, 0);
    /* tile 0's S, its softmax and P */
    tl_mbar_wait(fullk, 0);
    tl_wgmma_fence();
    issue_s(0);
    tl_wgmma_commit();
    tl_wgmma_wait<0>();
    tl_wgmma_hold(S);
    if (lane == 0) tl_mbar_arrive(emptyk); /* this warp is done with K(0) */
    float corr[2], corr_pv[2]; /* corr_pv (fp8): the factor O takes when P(kt) V is folded in */
    softmax(0, corr);
    corr_pv[0] = corr[0], corr_pv[1] = corr[1];
    pack();
    /* one tile: next says whether tile kt + 1 exists. The loop runs the steady state with next a
     * constant true and the last tile apart: a branch between a wgmma and the wait that retires it
     * makes ptxas serialize every wgmma of the kernel (C7514), which costs the overlap above */
    auto step = [&](const int kt, const bool next) __attribute__((always_inline)) {
        const int st = kt % STAGES, sn = (kt + 1) % STAGES;
        if (next) tl_mbar_wait(fullk + sn, ((kt + 1) / STAGES) & 1);
        tl_mbar_wait(fullv + st, (kt / STAGES) & 1);
#pragma unroll
        for (int kk = 0; kk < NPA; kk++) tl_wgmma_hold(pa[kk]);
        tl_wgmma_hold(o);
        tl_wgmma_fence();
        float cn[2] = {1.0f, 1.0f};
        if (FP8) {
            /* fp8: S(kt + 1), then P(kt) V in two halves of 64 value columns, each into a
             * 32-register accumulator of its own, waited and folded into the float32 O (o = o corr
             * + P V): the softmax of tile kt + 1 runs while the first half multiplies (a whole
             * third accumulator of 64 registers beside S and O spills the 240) */
            if (next) {
                issue_s(sn);
                tl_wgmma_commit();
            }
            const uint64_t dv = tl_wgmma_desc_sw128(Vs + st * L::V_BYTES);
            auto pv_half = [&](int half) {
#pragma unroll
                for (int kk = 0; kk < NPA; kk++)
                    tl_wgmma_m64n64k32_e4m3_rs(acc, pa[kk], tl_wgmma_desc_advance(dv, half * 64 * 128 + 32 * kk), kk > 0);
                tl_wgmma_commit();
            };
            auto fold = [&](int half) {
#pragma unroll
                for (int i = 0; i < 32; i++) o[32 * half + i] = fmaf(o[32 * half + i], corr_pv[(i % 4) / 2], acc[i]);
            };
            pv_half(0);
            if (next) {
                tl_wgmma_wait<1>(); /* S(kt + 1); the first half runs on */
                tl_wgmma_hold(S);
                if (lane == 0) tl_mbar_arrive(emptyk + sn); /* done with K(kt + 1) */
                softmax(kt + 1, cn);
            }
            tl_wgmma_wait<0>();
            tl_wgmma_hold(acc);
            fold(0);
            tl_wgmma_hold(acc);
            tl_wgmma_fence();
            pv_half(1);
            tl_wgmma_wait<0>();
            tl_wgmma_hold(acc);
            if (lane == 0) tl_mbar_arrive(emptyv + st); /* done with V(kt) */
            fold(1);
            if (next) corr_pv[0] = cn[0], corr_pv[1] = cn[1];
        } else {
            /* bf16: S(kt + 1), then O += P(kt) V */
            if (next) {
                issue_s(sn);
                tl_wgmma_commit();
            }
            const uint64_t dv = tl_wgmma_desc_sw128_mn(Vs + st * L::V_BYTES, BN * 128);
#pragma unroll
            for (int kk = 0; kk < NPA; kk++)
                tl_wgmma_m64n128k16_bf16_rs_tb(o, pa[kk], tl_wgmma_desc_advance(dv, 16 * 128 * kk), 1);
            tl_wgmma_commit();
            if (next) {
                tl_wgmma_wait<1>(); /* S(kt + 1); P(kt) V runs on */
                tl_wgmma_hold(S);
                if (lane == 0) tl_mbar_arrive(emptyk + sn); /* done with K(kt + 1) */
                softmax(kt + 1, cn);
            }
            tl_wgmma_wait<0>();
            tl_wgmma_hold(o);
            if (lane == 0) tl_mbar_arrive(emptyv + st); /* done with V(kt) */
            if (__any_sync(0xffffffffu, cn[0] != 1.0f || cn[1] != 1.0f)) {
#pragma unroll
                for (int j = 0; j < DV / 8; j++) {
                    o[4 * j + 0] *= cn[0], o[4 * j + 1] *= cn[0];
                    o[4 * j + 2] *= cn[1], o[4 * j + 3] *= cn[1];
                }
            }
        }
        if (next) pack();
    };
    int kt = 0;
    for (; kt + 1 < ntiles; kt++) step(kt, true);
    step(kt, false);

    /* O = o x vf / l (bf16), LSE = m ln 2 + ln l (fp8: l / 448) */
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        float s = l[hr];
        s += tl_shfl_xor(s, 1);
        s += tl_shfl_xor(s, 2);
        const long row = q0 + wrow + g + 8 * hr;
        if (row >= seq) continue;
        const float f = vf / s;
        uint16_t *orow = a.o + ((size_t)row * a.heads + h) * DV + 2 * t;
#pragma unroll
        for (int j = 0; j < DV / 8; j++) *(uint32_t *)(orow + 8 * j) = pf_pack_bf16(o[4 * j + 2 * hr] * f, o[4 * j + 2 * hr + 1] * f);
        if (t == 0) a.lse[(size_t)h * seq + row] = m[hr] * 0.69314718055994531f + logf(FP8 ? s / TL_PREFILL_P_MULT : s);
    }
    if (b == 0 && tid == 128) {
        a.clk[0] = c0, a.clk[1] = n0;
        a.clk[2] = clock64(), a.clk[3] = tl_gpu_clock();
    }
}
#endif /* TL_WGMMA_AVAILABLE */
#endif

/* =============================================================================================
 * gfx942 / gfx950
 * =========================================================================================== */
#if defined(TL_MMA_TARGET_GFX942) || defined(TL_MMA_TARGET_GFX950)
#if defined(TL_MMA_TARGET_GFX942)
/* E4M3FN codes read by the FNUZ converter come out halved; 0x80 (FN's -0, FNUZ's NaN) first made 0 */
#define PF_FP8_UNSCALE 2.0f
static __device__ __forceinline__ uint32_t pf_fnuz_fix(uint32_t x)
{
    uint32_t r = x;
    for (int i = 0; i < 4; i++)
        if (((x >> (8 * i)) & 0xFFu) == 0x80u) r &= ~(0xFFu << (8 * i));
    return r;
}
#else
#define PF_FP8_UNSCALE 1.0f
static __device__ __forceinline__ uint32_t pf_fnuz_fix(uint32_t x) { return x; }
#endif
/* four codes (low byte first) as four exact bf16 */
static __device__ __forceinline__ void pf_e4m3x4_bf16(uint32_t w, uint16_t out[4])
{
    const uint32_t x = pf_fnuz_fix(w);
    const auto lo = __builtin_amdgcn_cvt_pk_f32_fp8((int)x, false), hi = __builtin_amdgcn_cvt_pk_f32_fp8((int)x, true);
    out[0] = (uint16_t)(tl_code_f32_bits(lo[0] * PF_FP8_UNSCALE) >> 16);
    out[1] = (uint16_t)(tl_code_f32_bits(lo[1] * PF_FP8_UNSCALE) >> 16);
    out[2] = (uint16_t)(tl_code_f32_bits(hi[0] * PF_FP8_UNSCALE) >> 16);
    out[3] = (uint16_t)(tl_code_f32_bits(hi[1] * PF_FP8_UNSCALE) >> 16);
}

/* ROWS rows x DIM elements of a [seq][heads][DIM] tensor (row stride gs elements, from row r0) into
 * shared memory as E: rows of ld elements (dst[r * ld + d]) or, transposed, dst[d * ld + r]; rows
 * >= seq and dims DIM..ld-1 (non-transposed padding) become zeros */
template <typename E, bool NATIVE, bool FP8, int ROWS, int DIM, int PAD, bool TRANS, int THREADS>
static __device__ __forceinline__ void pf_stage(E *dst, int ld, const void *src, size_t gs, long r0, long seq, int tid)
{
    constexpr int CPR = PAD / 4;
    for (int i = tid; i < ROWS * CPR; i += THREADS) {
        const int r = i / CPR, d = 4 * (i % CPR);
        const bool live = r0 + r < seq && d < DIM;
        E v[4] = {0, 0, 0, 0};
        if (live) {
            const size_t at = (size_t)(r0 + r) * gs + d;
            if (NATIVE) {
                const uint32_t w = *(const uint32_t *)((const uint8_t *)src + at);
                for (int e = 0; e < 4; e++) v[e] = (E)((w >> (8 * e)) & 0xFFu);
            } else if (FP8) {
                uint16_t x[4];
                pf_e4m3x4_bf16(*(const uint32_t *)((const uint8_t *)src + at), x);
                for (int e = 0; e < 4; e++) v[e] = (E)x[e];
            } else {
                const uint2 w = *(const uint2 *)((const uint16_t *)src + at);
                v[0] = (E)(w.x & 0xFFFFu), v[1] = (E)(w.x >> 16), v[2] = (E)(w.y & 0xFFFFu), v[3] = (E)(w.y >> 16);
            }
        }
        for (int e = 0; e < 4; e++) {
            if (TRANS) dst[(d + e) * ld + r] = v[e];
            else dst[r * ld + d + e] = v[e];
        }
    }
}

template <int ARCH, int DQK, int DV, int BM, int BN, int WARPS, bool FP8>
static __device__ __forceinline__ void pf_body_amd(const PfArgs &a)
{
    using L = PfSmem<ARCH, DQK, DV, BM, BN, FP8>;
    constexpr bool NATIVE = L::NATIVE;
    typedef typename std::conditional<NATIVE, uint8_t, uint16_t>::type E;
    constexpr int DQKP = L::DQKP, THREADS = TL_WAVE * WARPS;
    constexpr int KD = NATIVE ? TL_MMA_FP8_K : TL_MMA_BF16_K;
    static_assert(BM == 16 * WARPS && BN % KD == 0 && DQKP % KD == 0 && DV % 16 == 0 && BN % 4 == 0, "tiling");
    TL_SHARED_DYNAMIC(16, uint8_t, pf_smem);
    E *Qs = (E *)pf_smem;
    E *Ks = Qs + BM * DQKP;
    E *Vt = Ks + BN * DQKP;
    E *Ps = Vt + DV * BN;
    float *Sf = (float *)(Ps + BM * BN);

    const int tid = (int)tl_thread_x(), wave = tid / TL_WAVE, lane = tid % TL_WAVE;
    const int b = (int)tl_block_x(), qb = a.nqb - 1 - b / a.heads, h = b % a.heads;
    const int kvh = h / (a.heads / a.kv_heads);
    const long q0 = (long)qb * BM, seq = a.seq;
    const int wrow = wave * 16;
    const long kend = a.causal ? (q0 + BM < seq ? q0 + BM : seq) : seq;
    const int ntiles = (int)((kend + BN - 1) / BN);
    unsigned long long n0 = 0;
    if (b == 0 && tid == 0) n0 = tl_gpu_clock();
    const size_t qgs = (size_t)a.heads * DQK, kgs = (size_t)a.kv_heads * DQK, vgs = (size_t)a.kv_heads * DV;
    const uint8_t *qg = (const uint8_t *)a.q + (size_t)h * DQK * (FP8 ? 1 : 2);
    const uint8_t *kg = (const uint8_t *)a.k + (size_t)kvh * DQK * (FP8 ? 1 : 2);
    const uint8_t *vg = (const uint8_t *)a.v + (size_t)kvh * DV * (FP8 ? 1 : 2);
    pf_stage<E, NATIVE, FP8, BM, DQK, DQKP, false, THREADS>(Qs, DQKP, qg, qgs, q0, seq, tid);

    /* the softmax: lane (R = lane % 16, quarter = lane / 16) of the wave's 16 rows */
    const int R = lane % 16, qt = lane / 16;
    constexpr int QC = BN / 4;
    float m = -INFINITY, l = 0.0f, qsc = 1.0f, vf = 1.0f;
    if (FP8) {
        qsc = a.qs[(size_t)h * a.nblk + q0 / TL_PREFILL_BLOCK];
        vf = a.vs[(size_t)kvh * a.nblk] / TL_PREFILL_P_MULT;
    }
    tl_frag_c acc[DV / 16];
    for (int d = 0; d < DV / 16; d++) tl_frag_zero(&acc[d]);

    for (int kt = 0; kt < ntiles; kt++) {
        const long k0 = (long)kt * BN;
        tl_block_sync(); /* every wave is done with the previous tile */
        pf_stage<E, NATIVE, FP8, BN, DQK, DQKP, false, THREADS>(Ks, DQKP, kg, kgs, k0, seq, tid);
        pf_stage<E, NATIVE, FP8, BN, DV, DV, true, THREADS>(Vt, BN, vg, vgs, k0, seq, tid);
        tl_block_sync();
        for (int n = 0; n < BN / 16; n++) {
            tl_frag_c c;
            tl_frag_zero(&c);
            for (int ks = 0; ks < DQKP / KD; ks++) {
                if (NATIVE) {
                    tl_frag_a_fp8 qa;
                    tl_frag_b_fp8 kb;
                    tl_frag_load_a_fp8(&qa, (const uint8_t *)(Qs + wrow * DQKP + ks * KD), DQKP);
                    tl_frag_load_bt_fp8(&kb, (const uint8_t *)(Ks + 16 * n * DQKP + ks * KD), DQKP);
                    tl_mma_fp8(&c, &qa, &kb);
                } else {
                    tl_frag_a_bf16 qa;
                    tl_frag_b_bf16 kb;
                    tl_frag_load_a_bf16(&qa, (const uint16_t *)(Qs + wrow * DQKP + ks * KD), DQKP);
                    tl_frag_load_bt_bf16(&kb, (const uint16_t *)(Ks + 16 * n * DQKP + ks * KD), DQKP);
                    tl_mma_bf16(&c, &qa, &kb);
                }
            }
            tl_frag_store_c(&c, Sf + wrow * BN + 16 * n, BN);
        }
        tl_block_sync();
        float sc = a.scale_log2, vf_new = vf;
        if (FP8) {
            sc *= qsc * a.ks[(size_t)kvh * a.nblk + k0 / TL_PREFILL_BLOCK];
            vf_new = a.vs[(size_t)kvh * a.nblk + k0 / TL_PREFILL_BLOCK] / TL_PREFILL_P_MULT;
        }
        const long row = q0 + wrow + R;
        float mx = -INFINITY;
        for (int j = qt * QC; j < (qt + 1) * QC; j++) {
            const long col = k0 + j;
            float x = Sf[(wrow + R) * BN + j] * sc;
            if ((a.causal && col > row) || col >= seq) x = -INFINITY;
            Sf[(wrow + R) * BN + j] = x;
            mx = tl_fmaxf(mx, x);
        }
        mx = tl_fmaxf(mx, tl_shfl_xor(mx, 16));
        mx = tl_fmaxf(mx, tl_shfl_xor(mx, 32));
        const float mn = tl_fmaxf(m, mx), mu = mn == -INFINITY ? 0.0f : mn;
        float corr = pf_exp2(m - mu), sum = 0.0f;
        m = mn;
        for (int j = qt * QC; j < (qt + 1) * QC; j++) {
            const float p = pf_exp2(Sf[(wrow + R) * BN + j] - mu);
            sum += p;
            E pe;
            if (NATIVE) pe = (E)tl_prefill_p_code(p);
            else if (FP8) pe = (E)tl_code_bf16_from_exact_f32(tl_code_e4m3_to_f32(tl_prefill_p_code(p)));
            else pe = (E)tl_code_bf16_from_f32(p);
            Ps[(wrow + R) * BN + j] = pe;
        }
        l = l * corr + sum;
        if (FP8) corr *= vf / vf_new;
        vf = vf_new;
        for (int r = 0; r < TL_FRAG_C_COUNT; r++) {
            const float cr = tl_shfl(corr, tl_frag_c_row(lane, r));
            for (int d = 0; d < DV / 16; d++) acc[d].v[r] *= cr;
        }
        tl_block_sync();
        constexpr int KD2 = NATIVE ? TL_MMA_FP8_K : TL_MMA_BF16_K;
        for (int d = 0; d < DV / 16; d++)
            for (int ks = 0; ks < BN / KD2; ks++) {
                if (NATIVE) {
                    tl_frag_a_fp8 pa;
                    tl_frag_b_fp8 vb;
                    tl_frag_load_a_fp8(&pa, (const uint8_t *)(Ps + wrow * BN + ks * KD2), BN);
                    tl_frag_load_bt_fp8(&vb, (const uint8_t *)(Vt + 16 * d * BN + ks * KD2), BN);
                    tl_mma_fp8(&acc[d], &pa, &vb);
                } else {
                    tl_frag_a_bf16 pa;
                    tl_frag_b_bf16 vb;
                    tl_frag_load_a_bf16(&pa, (const uint16_t *)(Ps + wrow * BN + ks * KD2), BN);
                    tl_frag_load_bt_bf16(&vb, (const uint16_t *)(Vt + 16 * d * BN + ks * KD2), BN);
                    tl_mma_bf16(&acc[d], &pa, &vb);
                }
            }
    }
    l += tl_shfl_xor(l, 16);
    l += tl_shfl_xor(l, 32);
    for (int r = 0; r < TL_FRAG_C_COUNT; r++) {
        const int rr = tl_frag_c_row(lane, r);
        const float lr = tl_shfl(l, rr), f = vf / lr;
        const long row = q0 + wrow + rr;
        if (row >= seq) continue;
        for (int d = 0; d < DV / 16; d++)
            a.o[((size_t)row * a.heads + h) * DV + 16 * d + tl_frag_c_col(lane, r)] =
                (uint16_t)tl_code_bf16_from_f32(acc[d].v[r] * f);
    }
    if (qt == 0 && q0 + wrow + R < seq)
        a.lse[(size_t)h * seq + q0 + wrow + R] = (m + __builtin_amdgcn_logf(l)) * 0.69314718055994531f;
    if (b == 0 && tid == 0) a.clk[0] = 0, a.clk[1] = n0, a.clk[2] = 0, a.clk[3] = tl_gpu_clock();
}
#endif

#if defined(TL_MMA_TARGET_GFX950)
/* gfx950 FP8 (the E4M3FN codes on v_mfma_scale_f32_16x16x128_f8f6f4, unit scales), S and P in
 * registers. Each wave owns 16 query rows; per key tile of BN = 128 it computes S^T = K Q^T, eight
 * 16-key fragments: lane l then holds row R = l % 16 at keys 16 n + 4 (l / 16) + r of fragment n,
 * value r (the C layout: row 4 (l / 16) + r, column l % 16, of S^T). Those 32 keys are exactly
 * the 32 bytes lane l gives the A operand of P V (row l % 16; byte b = 4 n + r), when the
 * contraction's k-slots are the keys in the order pf_v_slot names: so P's codes go from the
 * softmax into the A fragment with no LDS round trip, and V^T is staged with its keys in that
 * order. P = E4M3FN(p x 448) by v_cvt_pk_fp8_f32 (round to nearest even; p x 448 lies in
 * [0, 448], so its saturation mode never applies: the contract's rule for every such input), p x
 * 448 computed as one exp2 of the score's FMA shifted by log2 448 (within an ulp or two of float32's
 * p x 448, so a code can differ from tl_prefill_p_code's where p x 448 lies that close to a
 * rounding boundary). Keys past a row's last are set to -inf by a compare and select each. LDS:
 * Q, K and V^T codes (PfSmem::AMD). */
static __device__ __forceinline__ int pf_v_slot(int key)
{
    /* key 16 n + 4 q + e (n < 8, q < 4, e < 4) -> k-slot 64 (n / 4) + 16 q + 4 (n % 4) + e */
    const int n = key / 16, q = (key % 16) / 4, e = key % 4;
    return 64 * (n / 4) + 16 * q + 4 * (n % 4) + e;
}

template <int DQK, int DV, int BM, int BN, int WARPS>
static __device__ __forceinline__ void pf_body_gfx950_fp8(const PfArgs &a)
{
    using L = PfSmem<PF_GFX950, DQK, DV, BM, BN, true>;
    constexpr int DQKP = L::DQKP, THREADS = TL_WAVE * WARPS, KD = TL_MMA_FP8_K, NT = BN / 16;
    static_assert(BM == 16 * WARPS && BN == KD && DQKP % KD == 0 && DV % 16 == 0 && DQK % 4 == 0, "tiling");
    TL_SHARED_DYNAMIC(16, uint8_t, pf_smem);
    uint8_t *Qs = pf_smem, *Ks = Qs + BM * DQKP, *Vt = Ks + BN * DQKP;

    const int tid = (int)tl_thread_x(), wave = tid / TL_WAVE, lane = tid % TL_WAVE;
    const int b = (int)tl_block_x(), qb = a.nqb - 1 - b / a.heads, h = b % a.heads;
    const int kvh = h / (a.heads / a.kv_heads);
    const long q0 = (long)qb * BM, seq = a.seq;
    const int wrow = wave * 16;
    const long kend = a.causal ? (q0 + BM < seq ? q0 + BM : seq) : seq;
    const int ntiles = (int)((kend + BN - 1) / BN);
    unsigned long long n0 = 0;
    if (b == 0 && tid == 0) n0 = tl_gpu_clock();
    const size_t qgs = (size_t)a.heads * DQK, kgs = (size_t)a.kv_heads * DQK, vgs = (size_t)a.kv_heads * DV;
    const uint8_t *qg = (const uint8_t *)a.q + (size_t)h * DQK;
    const uint8_t *kg = (const uint8_t *)a.k + (size_t)kvh * DQK;
    const uint8_t *vg = (const uint8_t *)a.v + (size_t)kvh * DV;
    /* Q and K rows as words (columns past DQK zero), V^T a byte a key in pf_v_slot's order */
    auto stage_rows = [&](uint8_t *dst, const uint8_t *src, size_t gs, long r0, int rows) {
        for (int i = tid; i < rows * (DQKP / 4); i += THREADS) {
            const int r = i / (DQKP / 4), d = 4 * (i % (DQKP / 4));
            uint32_t w = 0;
            if (r0 + r < seq && d < DQK) w = *(const uint32_t *)(src + (size_t)(r0 + r) * gs + d);
            *(uint32_t *)(dst + r * DQKP + d) = w;
        }
    };
    stage_rows(Qs, qg, qgs, q0, BM);

    const int R = lane % 16, qt = lane / 16;
    const long row = q0 + wrow + R;
    float m = -INFINITY, l = 0.0f;
    const float qsc = a.qs[(size_t)h * a.nblk + q0 / TL_PREFILL_BLOCK];
    float vf = a.vs[(size_t)kvh * a.nblk] / TL_PREFILL_P_MULT;
    tl_frag_c acc[DV / 16];
    for (int d = 0; d < DV / 16; d++) tl_frag_zero(&acc[d]);

    /* one key tile; MASKED: some key of it lies past a row's last (the diagonal, or seq) */
    auto tile = [&](int kt, auto masked_tag) {
        constexpr bool MASKED = decltype(masked_tag)::value;
        const long k0 = (long)kt * BN;
        tl_block_sync(); /* every wave is done with the previous tile */
        stage_rows(Ks, kg, kgs, k0, BN);
        for (int i = tid; i < BN * (DV / 4); i += THREADS) {
            const int r = i / (DV / 4), d = 4 * (i % (DV / 4)), slot = pf_v_slot(r);
            uint32_t w = 0;
            if (k0 + r < seq) w = *(const uint32_t *)(vg + (size_t)(k0 + r) * vgs + d);
            for (int e = 0; e < 4; e++) Vt[(d + e) * BN + slot] = (uint8_t)(w >> (8 * e));
        }
        tl_block_sync();
        /* S^T = K Q^T, one 16-key fragment n at a time; Q's fragment of each k-step read once */
        tl_frag_c st[NT];
        for (int n = 0; n < NT; n++) tl_frag_zero(&st[n]);
        for (int ks = 0; ks < DQKP / KD; ks++) {
            tl_frag_b_fp8 qf;
            tl_frag_load_bt_fp8(&qf, Qs + wrow * DQKP + ks * KD, DQKP);
            for (int n = 0; n < NT; n++) {
                tl_frag_a_fp8 kf;
                tl_frag_load_a_fp8(&kf, Ks + 16 * n * DQKP + ks * KD, DQKP);
                tl_mma_fp8(&st[n], &kf, &qf);
            }
        }
        const float sc = a.scale_log2 * qsc * a.ks[(size_t)kvh * a.nblk + k0 / TL_PREFILL_BLOCK];
        const float vf_new = a.vs[(size_t)kvh * a.nblk + k0 / TL_PREFILL_BLOCK] / TL_PREFILL_P_MULT;
        /* keys past the row's last (causal) or past seq: -inf, by one compare and select each (no
         * branch; the key's offset in the tile against the lane's last key, 32-bit) */
        const long last = a.causal && row < seq ? row : seq - 1;
        const int lim = last - k0 >= BN ? BN : (int)(last - k0); /* keys 0..lim of the tile count */
        float mx = -INFINITY;
        for (int n = 0; n < NT; n++)
            for (int r = 0; r < 4; r++) {
                if (MASKED && 16 * n + 4 * qt + r > lim) st[n].v[r] = -INFINITY;
                mx = tl_fmaxf(mx, st[n].v[r]);
            }
        mx = tl_fmaxf(mx, tl_shfl_xor(mx, 16));
        mx = tl_fmaxf(mx, tl_shfl_xor(mx, 32));
        /* sc > 0 (the softmax scale, and Q's and K's block scales, at least 1e-4 / 448 by the
         * contract's rule): the scaled row max is mx x sc, and a masked -inf stays -inf in the FMA */
        const float mn = tl_fmaxf(m, mx * sc), mu = mn == -INFINITY ? 0.0f : mn;
        float corr = pf_exp2(m - mu), sum = 0.0f;
        m = mn;
        /* P x 448 = 2^(s sc - mu + log2 448) in one FMA and one exp2 a score; P's codes: word n of
         * the A fragment = fragment n's four values, low byte first */
        const float off = 8.8073549220576041f - mu; /* log2(448) */
        tl_frag_a_fp8 pf;
        for (int n = 0; n < NT; n++) {
            float p[4];
            for (int r = 0; r < 4; r++) p[r] = pf_exp2(__builtin_fmaf(st[n].v[r], sc, off)), sum += p[r];
            int w = __builtin_amdgcn_cvt_pk_fp8_f32(p[0], p[1], 0, false);
            w = __builtin_amdgcn_cvt_pk_fp8_f32(p[2], p[3], w, true);
            pf.v[n] = w;
        }
        sum *= 1.0f / TL_PREFILL_P_MULT;
        l = l * corr + sum;
        corr *= vf / vf_new;
        vf = vf_new;
        for (int r = 0; r < TL_FRAG_C_COUNT; r++) {
            const float cr = tl_shfl(corr, tl_frag_c_row(lane, r));
            for (int d = 0; d < DV / 16; d++) acc[d].v[r] *= cr;
        }
        for (int d = 0; d < DV / 16; d++) {
            tl_frag_b_fp8 vb;
            tl_frag_load_bt_fp8(&vb, Vt + 16 * d * BN, BN);
            tl_mma_fp8(&acc[d], &pf, &vb);
        }
    };
    /* the tiles every row of the block sees whole (keys up to q0, and below seq), then the rest:
     * the bounds are the block's, so every wave meets the same barriers */
    const long whole = a.causal ? (q0 + 1) / BN : seq / BN;
    const int nfull = whole < ntiles ? (int)whole : ntiles;
    for (int kt = 0; kt < nfull; kt++) tile(kt, std::integral_constant<bool, false>());
    for (int kt = nfull; kt < ntiles; kt++) tile(kt, std::integral_constant<bool, true>());
    l += tl_shfl_xor(l, 16);
    l += tl_shfl_xor(l, 32);
    for (int r = 0; r < TL_FRAG_C_COUNT; r++) {
        const int rr = tl_frag_c_row(lane, r);
        const float lr = tl_shfl(l, rr), f = vf / lr;
        const long orow = q0 + wrow + rr;
        if (orow >= seq) continue;
        for (int d = 0; d < DV / 16; d++)
            a.o[((size_t)orow * a.heads + h) * DV + 16 * d + tl_frag_c_col(lane, r)] =
                (uint16_t)tl_code_bf16_from_f32(acc[d].v[r] * f);
    }
    if (qt == 0 && row < seq) a.lse[(size_t)h * seq + row] = (m + __builtin_amdgcn_logf(l)) * 0.69314718055994531f;
    if (b == 0 && tid == 0) a.clk[0] = 0, a.clk[1] = n0, a.clk[2] = 0, a.clk[3] = tl_gpu_clock();
}
#endif

template <int ARCH, int DQK, int DV, int BM, int BN, int WARPS, bool FP8>
__global__ void __launch_bounds__(TL_WAVE *WARPS, TL_LAUNCH_MIN_BLOCKS(WARPS == 4 && ARCH == PF_SM90 ? 2 : 1))
    pf_kernel(PfArgs a)
{
#if defined(TL_MMA_TARGET_SM80)
    if constexpr (ARCH == PF_SM90) pf_body_sm90<DQK, DV, BM, BN, WARPS, FP8>(a);
#elif defined(TL_MMA_TARGET_GFX942)
    if constexpr (ARCH == PF_GFX942) pf_body_amd<ARCH, DQK, DV, BM, BN, WARPS, FP8>(a);
#elif defined(TL_MMA_TARGET_GFX950)
    if constexpr (ARCH == PF_GFX950 && FP8) pf_body_gfx950_fp8<DQK, DV, BM, BN, WARPS>(a);
    else if constexpr (ARCH == PF_GFX950) pf_body_amd<ARCH, DQK, DV, BM, BN, WARPS, FP8>(a);
#endif
}

#if defined(TL_GPU_NVIDIA)
/* the sm_90a warp-specialized kernel: 384 threads (a producer warpgroup and two computing ones),
 * one group an SM (its 113-225 KB of shared memory: PfWs::BYTES), launched at 168 registers a thread (the
 * warpgroups then move them: 24 / 240) */
template <int DQK, bool FP8>
__global__ void __launch_bounds__(384, 1) pf_ws_kernel(const __grid_constant__ PfWsArgs w)
{
#if defined(TL_MMA_TARGET_SM80) && TL_WGMMA_AVAILABLE
    pf_body_ws<DQK, FP8>(w);
#else
    (void)w;
#endif
}

/* fp8 (the warp-specialized kernel): V's codes [seq][kv_heads][128] as V^T [kv_heads][128 dims][seqp]
 * (seqp = seq rounded up to 128; keys >= seq zero), each 32 keys in P's register-fragment order
 * (pf_wg_key_of), so that the copy engine lands a tile as the K-major B of the E4M3 P V. Grid
 * seqp / 128 x kv_heads, 256 threads; one read and one write of V (a launch of its own before the
 * attention kernel, which waits for it only before its first V load). */
__global__ void __launch_bounds__(256) pf_vt_kernel(const uint8_t *v, uint8_t *vt, long seq, long seqp, int kv_heads)
{
#if defined(TL_MMA_TARGET_SM80) && TL_WGMMA_AVAILABLE
    TL_SHARED(uint32_t, tile, [128][33]);
    const int tid = (int)tl_thread_x(), kvh = (int)blockIdx.y;
    const long k0 = (long)blockIdx.x * 128;
    tl_grid_dep_launch();
    for (int i = tid; i < 128 * 32; i += 256) {
        const int r = i / 32, c = i % 32;
        const long key = k0 + r;
        tile[r][c] = key < seq ? *(const uint32_t *)(v + ((size_t)key * kv_heads + kvh) * 128 + 4 * c) : 0u;
    }
    __syncthreads();
    for (int i = tid; i < 128 * 32; i += 256) {
        const int d = i / 32, sw = i % 32;
        uint32_t out = 0;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int slot = 4 * sw + q, key = 32 * (slot / 32) + pf_wg_key_of(slot % 32);
            out |= ((tile[key][d / 4] >> (8 * (d % 4))) & 0xFFu) << (8 * q);
        }
        *(uint32_t *)(vt + ((size_t)kvh * 128 + d) * seqp + k0 + 4 * sw) = out;
    }
#else
    (void)v, (void)vt, (void)seq, (void)seqp, (void)kv_heads;
#endif
}
#endif

/* ---- the launcher ----------------------------------------------------------------------------- */
struct tl_prefill_gpu {
    tl_prefill_shape s;
    tl_prefill_tiling tile;
    int arch; /* PF_* */
    void (*kern)(PfArgs);
    size_t smem;
    void *q, *k, *v;
    float *qs, *ks, *vs, *lse;
    uint16_t *o;
    unsigned long long *clk;
    int acc_bits; /* tl_prefill_gpu_acc_bits */
    int threads;  /* a group's threads */
    /* the warp-specialized kernel (ws): its entry, tensor maps and fp8's V^T [kv_heads][128][seqp] */
    int ws;
    void (*wkern)(PfWsArgs);
    unsigned long long tq[16], tk[16], tv[16]; /* CUtensorMap's bytes (calloc'd: not 64-byte aligned) */
    uint8_t *vt;
    long seqp;
};

extern "C" int tl_prefill_gpu_dims_ok(int dqk, int dv) { return (dqk == 128 || dqk == 192) && dv == 128; }

/* the instance of (arch, tiling, dqk, dtype): only those tl_prefill_tiling_for names are built */
static int pick(tl_prefill_gpu *g)
{
    const tl_prefill_tiling t = g->tile;
    const bool fp8 = g->s.dtype == TL_PREFILL_FP8;
    const int d = g->s.dqk;
    g->kern = NULL;
    g->wkern = NULL;
    g->ws = 0;
    g->acc_bits = 23;
    g->threads = (g->arch == PF_SM90 ? 32 : 64) * t.warps;
#define PF_TRY(A, DQK, F, BM, BN, W)                                                                \
    if (g->arch == A && d == DQK && fp8 == F && t.block_m == BM && t.block_n == BN && t.warps == W) \
        g->kern = pf_kernel<A, DQK, 128, BM, BN, W, F>, g->smem = PfSmem<A, DQK, 128, BM, BN, F>::BYTES;
#if defined(TL_GPU_AMD)
    PF_TRY(PF_GFX942, 128, false, 64, 32, 4);
    PF_TRY(PF_GFX942, 192, false, 64, 32, 4);
    PF_TRY(PF_GFX942, 128, true, 64, 32, 4);
    PF_TRY(PF_GFX942, 192, true, 64, 32, 4);
    PF_TRY(PF_GFX950, 128, false, 64, 64, 4);
    PF_TRY(PF_GFX950, 192, false, 64, 64, 4);
    PF_TRY(PF_GFX950, 128, true, 64, 128, 4);
    PF_TRY(PF_GFX950, 192, true, 64, 128, 4);
#else
    /* mma.sync: the kernel of targets without wgmma, and tilings to compare (bench prefill --tile) */
    PF_TRY(PF_SM90, 128, false, 128, 64, 4);
    PF_TRY(PF_SM90, 128, false, 128, 64, 8);
    PF_TRY(PF_SM90, 192, false, 128, 64, 8);
#if defined(TL_HAVE_WGMMA)
    /* the contract's sm_90 tiling runs the warpgroup kernel (Hopper: sm_90a) */
    /* the contract's 128 x 128 x 8 (8 computing warps): the warp-specialized kernel (with its
     * producer warpgroup: 384 threads), on a device that runs this build's sm_90a code (a build
     * that also holds sm_80 code has no kernel for this tiling on other devices: pick says so) */
#define PF_TRY_WG(DQK, F)                                                                                           \
    if (g->arch == PF_SM90 && d == DQK && fp8 == F && t.block_m == 128 && t.block_n == 128 && t.warps == 8 && \
        tl_gpu_tensor_maps_usable())                                                                     \
        g->wkern = pf_ws_kernel<DQK, F>, g->ws = 1, g->smem = PfWs<DQK, F>::BYTES, g->threads = 384,        \
        g->acc_bits = F ? TL_WGMMA_E4M3_ACC_BITS : 23;
    PF_TRY_WG(128, false);
    PF_TRY_WG(192, false);
    PF_TRY_WG(128, true);
    PF_TRY_WG(192, true);
#undef PF_TRY_WG
#else
    PF_TRY(PF_SM90, 128, false, 128, 128, 8);
    PF_TRY(PF_SM90, 192, false, 128, 128, 8);
    PF_TRY(PF_SM90, 128, true, 128, 128, 8);
    PF_TRY(PF_SM90, 192, true, 128, 128, 8);
#endif
#endif
#undef PF_TRY
    if (!g->kern && !g->wkern)
        return tl_error(TL_EUSAGE, "prefill gpu", "no kernel for block_m %d, block_n %d, %d warps, dqk %d, %s", t.block_m,
                        t.block_n, t.warps, d, tl_prefill_dtype_name(g->s.dtype));
    return 0;
}

static int gpu_alloc(void **p, size_t bytes, const char *what)
{
    *p = NULL;
    hipError_t e = hipMalloc(p, bytes ? bytes : 16);
    if (e != hipSuccess) {
        *p = NULL;
        (void)hipGetLastError();
        return tl_error(TL_EFAIL, "prefill gpu", "cannot allocate %.3f GB for %s: %s", bytes / 1e9, what,
                        hipGetErrorString(e));
    }
    return 0;
}
#define GALLOC(ptr, bytes, what) gpu_alloc((void **)&(ptr), (bytes), (what))

extern "C" void tl_prefill_gpu_close(tl_prefill_gpu *g)
{
    if (!g) return;
    void *ptrs[] = {g->q, g->k, g->v, g->qs, g->ks, g->vs, g->o, g->lse, g->clk, g->vt};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) (void)hipFree(ptrs[i]);
    free(g);
}

static int encode_maps(tl_prefill_gpu *g);

extern "C" int tl_prefill_gpu_open(const tl_prefill_shape *s, const tl_prefill_tiling *tile, tl_prefill_gpu **out)
{
    *out = NULL;
    int rc = tl_prefill_shape_check(s);
    if (rc) return rc;
    if (!tl_prefill_gpu_dims_ok(s->dqk, s->dv))
        return tl_error(TL_EUSAGE, "prefill gpu", "the kernel serves dqk 128 or 192 with dv 128, not %d / %d", s->dqk,
                        s->dv);
    tl_gpu_info info;
    if (tl_gpu_query(0, &info)) return TL_EFAIL;
    tl_prefill_gpu *g = (tl_prefill_gpu *)calloc(1, sizeof *g);
    if (!g) return tl_error(TL_EFAIL, "prefill gpu", "out of memory");
    g->s = *s;
    g->arch = strncmp(info.arch, "gfx942", 6) == 0 ? PF_GFX942 : strncmp(info.arch, "gfx950", 6) == 0 ? PF_GFX950 : PF_SM90;
    g->tile = tile ? *tile : tl_prefill_tiling_for(info.arch, s);
    rc = pick(g);
    if (!rc && info.smem_per_block && g->smem > info.smem_per_block)
        rc = tl_error(TL_EUSAGE, "prefill gpu", "the kernel needs %zu bytes of shared memory a group; the device allows %zu",
                      g->smem, info.smem_per_block);
    const void *fn = g->ws ? (const void *)g->wkern : (const void *)g->kern;
    if (!rc && hipFuncSetAttribute(fn, hipFuncAttributeMaxDynamicSharedMemorySize, (int)g->smem) != hipSuccess) {
        (void)hipGetLastError();
        rc = tl_error(TL_EFAIL, "prefill gpu", "cannot allow %zu bytes of shared memory", g->smem);
    }
    if (!rc && (g->ws ? tl_prefer_shared(g->wkern) : tl_prefer_shared(g->kern)) != hipSuccess) {
        (void)hipGetLastError();
        rc = tl_error(TL_EFAIL, "prefill gpu", "cannot set the shared-memory carveout");
    }
    const size_t bpe = s->dtype == TL_PREFILL_FP8 ? 1 : 2, nb = (size_t)tl_prefill_nblk(s->seq);
    if (!rc) rc = GALLOC(g->q, tl_prefill_q_elems(s) * bpe, "Q");
    if (!rc) rc = GALLOC(g->k, tl_prefill_k_elems(s) * bpe, "K");
    if (!rc) rc = GALLOC(g->v, tl_prefill_v_elems(s) * bpe, "V");
    if (!rc && bpe == 1) rc = GALLOC(g->qs, (size_t)s->heads * nb * sizeof(float), "the Q scales");
    if (!rc && bpe == 1) rc = GALLOC(g->ks, (size_t)s->kv_heads * nb * sizeof(float), "the K scales");
    if (!rc && bpe == 1) rc = GALLOC(g->vs, (size_t)s->kv_heads * nb * sizeof(float), "the V scales");
    if (!rc) rc = GALLOC(g->o, tl_prefill_o_elems(s) * sizeof(uint16_t), "O");
    if (!rc) rc = GALLOC(g->lse, tl_prefill_lse_elems(s) * sizeof(float), "LSE");
    if (!rc) rc = GALLOC(g->clk, 4 * sizeof(unsigned long long), "the clock marks");
    g->seqp = (s->seq + 127) / 128 * 128;
    if (!rc && g->ws && bpe == 1) rc = GALLOC(g->vt, (size_t)s->kv_heads * s->dv * g->seqp, "V^T");
    if (!rc && g->ws) rc = encode_maps(g);
    if (rc) {
        tl_prefill_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

extern "C" int tl_prefill_gpu_upload(tl_prefill_gpu *g, const void *q, const void *k, const void *v, const float *q_scale,
                                     const float *k_scale, const float *v_scale)
{
    const tl_prefill_shape *s = &g->s;
    const size_t bpe = s->dtype == TL_PREFILL_FP8 ? 1 : 2, nb = (size_t)tl_prefill_nblk(s->seq);
    TL_GPU_CHECK(hipMemcpy(g->q, q, tl_prefill_q_elems(s) * bpe, hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->k, k, tl_prefill_k_elems(s) * bpe, hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->v, v, tl_prefill_v_elems(s) * bpe, hipMemcpyHostToDevice));
    if (bpe == 1) {
        TL_GPU_CHECK(hipMemcpy(g->qs, q_scale, (size_t)s->heads * nb * sizeof(float), hipMemcpyHostToDevice));
        TL_GPU_CHECK(hipMemcpy(g->ks, k_scale, (size_t)s->kv_heads * nb * sizeof(float), hipMemcpyHostToDevice));
        TL_GPU_CHECK(hipMemcpy(g->vs, v_scale, (size_t)s->kv_heads * nb * sizeof(float), hipMemcpyHostToDevice));
    }
    return 0;
}

extern "C" int tl_prefill_gpu_poison(tl_prefill_gpu *g)
{
    TL_GPU_CHECK(hipMemset(g->o, 0xFF, tl_prefill_o_elems(&g->s) * sizeof(uint16_t))); /* NaN */
    TL_GPU_CHECK(hipMemset(g->lse, 0xFF, tl_prefill_lse_elems(&g->s) * sizeof(float)));
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

/* The ws kernel's tensor maps (kernels/wgmma.h tl_tma_encode): Q [seq][heads][dqk] and K
 * [seq][kv_heads][dqk] in boxes of one 128-byte column block x 128 rows of one head; V (bf16)
 * likewise in 64-dim blocks; fp8's V^T [kv_heads x 128][seqp] in boxes of 128 x 128 bytes. */
static int encode_maps(tl_prefill_gpu *g)
{
#if defined(TL_GPU_NVIDIA) && defined(TL_HAVE_WGMMA)
    static_assert(sizeof(CUtensorMap) == sizeof(tl_tmap) && sizeof(CUtensorMap) == sizeof g->tq, "a tensor map is 128 bytes");
    const tl_prefill_shape *s = &g->s;
    const int e = s->dtype == TL_PREFILL_FP8 ? 1 : 2, ce = 128 / e;
    const uint64_t seq = (uint64_t)s->seq;
    CUtensorMap m;
    {
        const uint64_t dims[3] = {(uint64_t)s->dqk, (uint64_t)s->heads, seq};
        const uint64_t st[2] = {(uint64_t)s->dqk * e, (uint64_t)s->heads * s->dqk * e};
        const uint32_t box[3] = {(uint32_t)ce, 1, 128};
        if (tl_tma_encode(&m, g->q, 3, dims, st, box, e)) return TL_EFAIL;
        memcpy(g->tq, &m, sizeof m);
    }
    {
        const uint64_t dims[3] = {(uint64_t)s->dqk, (uint64_t)s->kv_heads, seq};
        const uint64_t st[2] = {(uint64_t)s->dqk * e, (uint64_t)s->kv_heads * s->dqk * e};
        const uint32_t box[3] = {(uint32_t)ce, 1, 128};
        if (tl_tma_encode(&m, g->k, 3, dims, st, box, e)) return TL_EFAIL;
        memcpy(g->tk, &m, sizeof m);
    }
    if (e == 1) {
        const uint64_t dims[2] = {(uint64_t)g->seqp, (uint64_t)s->kv_heads * s->dv};
        const uint64_t st[1] = {(uint64_t)g->seqp};
        const uint32_t box[2] = {128, 128};
        if (tl_tma_encode(&m, g->vt, 2, dims, st, box, 1)) return TL_EFAIL;
    } else {
        const uint64_t dims[3] = {(uint64_t)s->dv, (uint64_t)s->kv_heads, seq};
        const uint64_t st[2] = {(uint64_t)s->dv * 2, (uint64_t)s->kv_heads * s->dv * 2};
        const uint32_t box[3] = {64, 1, 128};
        if (tl_tma_encode(&m, g->v, 3, dims, st, box, 2)) return TL_EFAIL;
    }
    memcpy(g->tv, &m, sizeof m);
    return 0;
#else
    (void)g;
    return tl_error(TL_EFAIL, "prefill gpu", "the warp-specialized kernel needs an sm_90a build");
#endif
}

static int enqueue(tl_prefill_gpu *g, hipStream_t st)
{
    const tl_prefill_shape *s = &g->s;
    PfArgs a;
    a.q = g->q, a.k = g->k, a.v = g->v, a.qs = g->qs, a.ks = g->ks, a.vs = g->vs;
    a.o = g->o, a.lse = g->lse, a.clk = g->clk;
    a.seq = s->seq, a.nblk = tl_prefill_nblk(s->seq);
    a.heads = s->heads, a.kv_heads = s->kv_heads, a.causal = s->causal;
    a.nqb = (int)((s->seq + g->tile.block_m - 1) / g->tile.block_m);
    a.scale_log2 = tl_prefill_scale(s) * 1.4426950408889634f;
    const dim3 grid((unsigned)((long)a.nqb * s->heads)), block((unsigned)g->threads);
#if defined(TL_GPU_NVIDIA)
    if (g->ws) {
        PfWsArgs w;
        memcpy(w.tq.w, g->tq, sizeof w.tq), memcpy(w.tk.w, g->tk, sizeof w.tk), memcpy(w.tv.w, g->tv, sizeof w.tv);
        w.a = a;
        const bool fp8 = s->dtype == TL_PREFILL_FP8;
        if (fp8) {
            const hipError_t e = tl_launch(pf_vt_kernel, dim3((unsigned)(g->seqp / 128), (unsigned)s->kv_heads), dim3(256), 0,
                                           st, false, (const uint8_t *)g->v, g->vt, s->seq, g->seqp, s->kv_heads);
            if (e != hipSuccess) return tl_gpu_fail("pf_vt_kernel", hipGetErrorString(e), __FILE__, __LINE__);
        }
        const hipError_t e = tl_launch(g->wkern, grid, block, g->smem, st, fp8, w);
        if (e != hipSuccess) return tl_gpu_fail("pf_ws_kernel", hipGetErrorString(e), __FILE__, __LINE__);
        return 0;
    }
#endif
    const hipError_t e = tl_launch(g->kern, grid, block, g->smem, st, false, a);
    if (e != hipSuccess) return tl_gpu_fail("pf_kernel", hipGetErrorString(e), __FILE__, __LINE__);
    return 0;
}

extern "C" int tl_prefill_gpu_run(tl_prefill_gpu *g)
{
    int rc = enqueue(g, 0);
    if (rc) return rc;
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

extern "C" int tl_prefill_gpu_read(tl_prefill_gpu *g, uint16_t *o, float *lse)
{
    TL_GPU_CHECK(hipMemcpy(o, g->o, tl_prefill_o_elems(&g->s) * sizeof(uint16_t), hipMemcpyDeviceToHost));
    TL_GPU_CHECK(hipMemcpy(lse, g->lse, tl_prefill_lse_elems(&g->s) * sizeof(float), hipMemcpyDeviceToHost));
    return 0;
}

extern "C" int tl_prefill_gpu_acc_bits(const tl_prefill_gpu *g) { return g ? g->acc_bits : 23; }

static int pf_time_fn(void *ctx, void *stream) { return enqueue((tl_prefill_gpu *)ctx, (hipStream_t)stream); }

extern "C" int tl_prefill_gpu_time(tl_prefill_gpu *g, const tl_bench_opts *o, tl_bench_result *r, double *sm_mhz)
{
    int rc = tl_bench_run(o, pf_time_fn, g, r);
    if (rc) return rc;
    unsigned long long c[4];
    TL_GPU_CHECK(hipMemcpy(c, g->clk, sizeof c, hipMemcpyDeviceToHost));
    /* cycles over ns is GHz: x 1000 for MHz (AMD has no per-CU cycle mark here: 0) */
    *sm_mhz = c[3] > c[1] && c[2] > c[0] ? 1000.0 * (double)(c[2] - c[0]) / (double)(c[3] - c[1]) : 0.0;
    return 0;
}

/* the exported table: host code only (the device pass of a HIP build has no host functions) */
#if !defined(__HIP_DEVICE_COMPILE__) && !defined(__CUDA_ARCH__)
extern "C" {
static const tl_prefill_gpu_api prefill_gpu_api = {tl_prefill_gpu_dims_ok, tl_prefill_gpu_open, tl_prefill_gpu_upload,
                                                   tl_prefill_gpu_poison,  tl_prefill_gpu_run,  tl_prefill_gpu_read,
                                                   tl_prefill_gpu_time,    tl_prefill_gpu_close, tl_prefill_gpu_acc_bits};
TL_GPU_EXPORT(const tl_prefill_gpu_api, tl_prefill_gpu) = &prefill_gpu_api;
}
#endif
