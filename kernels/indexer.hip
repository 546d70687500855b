/* kernels/indexer.hip: the DSA lightning indexer kernel and its launcher (kernels/indexer.h says
 * what runs; contract/indexer.h the function; simulator/indexer.h the cost).
 *
 * Block (AMD): BLOCK_Q waves, wave r = query row b * BLOCK_Q + r, b = blockIdx.x; (sm_90) BLOCK_Q x
 * H / 32 warps, warp w = heads 32 (w % (H / 32)) .. + 31 of row b * BLOCK_Q + w / (H / 32), b =
 * gridDim.x - 1 - blockIdx.x (the longest windows first). A wave past the last row still copies
 * tiles and waits at the barriers, and writes nothing. The scores of one tile are the matrix
 * product S[position][head] = K_tile[position][:] . Q_row[head][:]: A = the K tile (16 positions a
 * fragment, from shared memory), B = the row's Q given as its transpose (Q[head][d], held in
 * registers for the whole run), float32 accumulators of 16 positions x the wave's heads.
 */
#include "indexer.h"

#include <stdlib.h>

#include "../numerics/codes.h"
#include "gpu.h"
/* Thread and block ids and the block barrier: kernels/gpu.h's tl_thread_x, tl_block_x,
 * tl_block_sync (hardware registers on AMD's -nogpulib device pass, which kernels/mma.h's loads
 * use too). */
#define IDX_TID ((int)tl_thread_x())
#define IDX_BID ((long)tl_block_x())
#define IDX_SYNC() tl_block_sync()
#include "mma.h"
#include "wgmma.h"

#if defined(TL_MMA_TARGET_GFX950) || defined(TL_MMA_TARGET_GFX942)
#define IDX_TILE TL_INDEXER_TILE_AMD
#define IDX_N 16 /* heads per fragment */
#elif defined(TL_MMA_TARGET_SM80)
#define IDX_TILE TL_INDEXER_TILE_SM90
#define IDX_N 8
#else
#define IDX_TILE TL_INDEXER_TILE_SM90 /* host pass: the bodies below only parse */
#define IDX_N 8
#endif
#define IDX_D TL_INDEXER_DIM
#define IDX_STRIDE (IDX_D + 16) /* bytes a K row takes in shared memory: spreads rows over banks */

typedef struct {
    const uint8_t *q, *k;
    const float *k_scale, *w;
    const int32_t *starts, *ends;
    float *logits;
    long rows, kv;
} IdxArgs;

/* ---- target pieces ---------------------------------------------------------------------------- */
#if defined(TL_MMA_TARGET_SM80)
/* Four E4M3 codes (byte 0 first) as two exact bf16 pairs, times +-1 (mul: the bf16x2 splat of
 * +-2^120). Each code is sign-extended to 16 bits (prmt), shifted so that its seven magnitude bits
 * land where a bf16's exponent and mantissa start and masked: the 2^-120-scaled bf16 of
 * numerics/codes.h; then one packed multiply by mul (bf16 subnormals are honoured by fma.bf16x2).
 * Four integer operations and one FMA per pair. */
static __device__ __forceinline__ void idx_e4m3x4_bf16(uint32_t w, uint32_t mul, uint32_t &lo, uint32_t &hi)
{
    uint32_t a, b;
    asm("prmt.b32 %0, %1, 0, 0x9180;" : "=r"(a) : "r"(w));
    asm("prmt.b32 %0, %1, 0, 0xB3A2;" : "=r"(b) : "r"(w));
    a = (a << 4) & 0x87F087F0u;
    b = (b << 4) & 0x87F087F0u;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(lo) : "r"(a), "r"(mul), "r"(TL_CODE_BF16X2_MINUS0));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(hi) : "r"(b), "r"(mul), "r"(TL_CODE_BF16X2_MINUS0));
}
#define IDX_UNSCALE_X2 (TL_CODE_E4M3_BF16_UNSCALE * 0x10001u)            /* (2^120, 2^120) */
#define IDX_UNSCALE_NEG_X2 ((TL_CODE_E4M3_BF16_UNSCALE | 0x8000u) * 0x10001u) /* (-2^120, -2^120) */
typedef tl_frag_b_bf16 IdxB;
/* Q row fragments: n-tile n (heads 8n..8n+7), k-step s (d 16s..16s+15): lane (g, t) holds
 * Q[8n + g][16s + 2t, +1] and [16s + 8 + 2t, +1], decoded to bf16 once. */
static __device__ __forceinline__ void idx_load_q(IdxB &b, const uint8_t *q, int n, int s)
{
    const int l = tl_lane(), g = l / 4, t = l % 4;
    const uint8_t *p = q + (size_t)(8 * n + g) * IDX_D + 16 * s + 2 * t;
    const uint32_t w = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[8] << 16 | (uint32_t)p[9] << 24;
    idx_e4m3x4_bf16(w, IDX_UNSCALE_X2, b.r[0], b.r[1]);
}
#define IDX_KSTEPS (IDX_D / 16)
#elif defined(TL_MMA_TARGET_GFX950) || defined(TL_MMA_TARGET_GFX942)
typedef tl_frag_b_fp8 IdxB;
#if defined(TL_MMA_TARGET_GFX942)
/* E4M3FN bits read as E4M3FNUZ are half the value, except 0x80 (FN -0, FNUZ NaN): made 0x00. */
static __device__ __forceinline__ uint32_t idx_fnuz4(uint32_t x)
{
    uint32_t r = x;
    for (int i = 0; i < 4; i++)
        if (((x >> (8 * i)) & 0xFFu) == 0x80u) r &= ~(0xFFu << (8 * i));
    return r;
}
static __device__ __forceinline__ void idx_fix(tl_frag_b_fp8 &b)
{
    uint32_t lo = (uint32_t)b.v, hi = (uint32_t)((unsigned long)b.v >> 32);
    b.v = (long)(((unsigned long)idx_fnuz4(hi) << 32) | idx_fnuz4(lo));
}
#define IDX_KSTEPS (IDX_D / TL_MMA_FP8_K)
#define IDX_UNSCALE 4.0f /* both operands halved */
#else
static __device__ __forceinline__ void idx_fix(tl_frag_b_fp8 &b) {}
static __device__ __forceinline__ uint32_t idx_fnuz4(uint32_t x) { return x; }
#define IDX_KSTEPS 1 /* 16x16x128: all of D in one instruction */
#define IDX_UNSCALE 1.0f
#endif
static __device__ __forceinline__ void idx_load_q(IdxB &b, const uint8_t *q, int n, int s)
{
    tl_frag_load_bt_fp8(&b, q + (size_t)(16 * n) * IDX_D + s * TL_MMA_FP8_K, IDX_D);
    idx_fix(b);
}
#else
typedef tl_frag_b_bf16 IdxB;
#define IDX_KSTEPS 1
static __device__ __forceinline__ void idx_load_q(IdxB &b, const uint8_t *q, int n, int s) {}
#endif

#if defined(TL_MMA_TARGET_GFX950) || defined(TL_MMA_TARGET_GFX942)
/* ---- the tile copy: K [tile][D] codes and k_scale [tile], positions >= kv read as zero ---------- */
static __device__ __forceinline__ void idx_copy_tile(const IdxArgs &a, long j0, uint8_t *ks_dst, float *sc_dst,
                                                     int nthreads)
{
    const int chunks = IDX_TILE * (IDX_D / 16); /* 16-byte pieces of K */
    for (int c = IDX_TID; c < chunks; c += nthreads) {
        const int row = c / (IDX_D / 16), col = 16 * (c % (IDX_D / 16));
        const long j = j0 + row;
        uint8_t *dst = ks_dst + row * IDX_STRIDE + col;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (j < a.kv) v = *(const uint4 *)(a.k + (size_t)j * IDX_D + col);
#if defined(TL_MMA_TARGET_GFX942)
        v.x = idx_fnuz4(v.x), v.y = idx_fnuz4(v.y), v.z = idx_fnuz4(v.z), v.w = idx_fnuz4(v.w);
#endif
        *(uint4 *)dst = v;
    }
    for (int c = IDX_TID; c < IDX_TILE; c += nthreads) sc_dst[c] = j0 + c < a.kv ? a.k_scale[j0 + c] : 0.0f;
}
static __device__ __forceinline__ void idx_copy_commit() {}
static __device__ __forceinline__ void idx_copy_wait() {}
#endif

/* ---- one 16-position fragment of a tile: scores, epilogue, store -------------------------------- */
template <int H>
static __device__ __forceinline__ void idx_score16(const uint8_t *kt, const float *sc, const IdxB (&qf)[H / IDX_N][IDX_KSTEPS],
                                                   const float (&wv)[H / IDX_N][2], long j0, long lo, long hi, long kv,
                                                   float *out)
{
#if defined(TL_MMA_TARGET_GFX950) || defined(TL_MMA_TARGET_GFX942)
    tl_frag_c c[H / 16];
    for (int n = 0; n < H / 16; n++) tl_frag_zero(&c[n]);
#pragma unroll
    for (int s = 0; s < IDX_KSTEPS; s++) {
        tl_frag_a_fp8 af;
        tl_frag_load_a_fp8(&af, kt + s * TL_MMA_FP8_K, IDX_STRIDE);
#pragma unroll
        for (int n = 0; n < H / 16; n++) tl_mma_fp8(&c[n], &af, &qf[n][s]);
    }
    const int l = tl_lane();
    float p[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const float sr = sc[tl_frag_c_row(l, r)] * IDX_UNSCALE;
        p[r] = 0.0f;
#pragma unroll
        for (int n = 0; n < H / 16; n++) p[r] += wv[n][0] * tl_fmaxf(c[n].v[r] * sr, 0.0f);
    }
#pragma unroll
    for (int m = 1; m < 16; m *= 2) {
        p[0] += tl_shfl_xor(p[0], m), p[1] += tl_shfl_xor(p[1], m);
        p[2] += tl_shfl_xor(p[2], m), p[3] += tl_shfl_xor(p[3], m);
    }
    const int col = l % 16;
    if (col < 4) {
        const long j = j0 + tl_frag_c_row(l, col);
        float v = col == 0 ? p[0] : col == 1 ? p[1] : col == 2 ? p[2] : p[3];
        if (j < kv) out[j] = j >= lo && j < hi ? v : -__builtin_inff();
    }
#endif
}

/* ---- sm_90: the block decodes each tile once, its warps read it with ldmatrix ------------------
 * Shared memory (dynamic, TL_INDEXER_SMEM_SM90(H, BLOCK_Q) bytes): IDX_STAGES stages of raw tiles
 * (K codes [64][128] and k_scale [64]) filled by cp.async, up to IDX_STAGES tiles ahead of the one
 * being scored; two decoded tiles (K as bf16 [64][IDX_KB_STRIDE], each row's sign flipped where
 * its k_scale is negative, and |k_scale| [64]); at H = 64 the partial sums of two tiles [2][BLOCK_Q]
 * [2 warps][64]. Iteration t, after one barrier: the copy of tile t + IDX_STAGES is issued into
 * tile t's raw stage, tile t + 1 is decoded by every thread of the block (8-code pieces: 1024 a
 * tile over the block's threads), at H = 64 tile t - 1's partial sums are added and stored, and
 * each warp scores tile t for its row and heads. Since
 * relu(x s) = |s| relu(sign(s) x), the epilogue is max, FMA with w per score and head, and one
 * multiply by |k_scale| per score after the head sum. */
#if defined(TL_MMA_TARGET_SM80)
#define IDX_STAGES TL_INDEXER_STAGES_SM90 /* 3: the waits below count on it */
#define IDX_KB_STRIDE TL_INDEXER_KB_STRIDE_SM90 /* 272 bytes a decoded row: ldmatrix without bank conflicts */
#define IDX_RAW_BYTES (IDX_TILE * IDX_D + IDX_TILE * 4)
#define IDX_DEC_BYTES (IDX_TILE * IDX_KB_STRIDE * 2 + IDX_TILE * 4)

/* Tile j0's codes and scales into raw stage `raw` (positions >= kv: zero, their scale 0). */
static __device__ __forceinline__ void idx_issue_sm90(const IdxArgs &a, long j0, uint8_t *raw, int nthreads)
{
    const int chunks = IDX_TILE * (IDX_D / 16);
    for (int c = IDX_TID; c < chunks; c += nthreads) {
        const int row = c / (IDX_D / 16), col = 16 * (c % (IDX_D / 16));
        const long j = j0 + row;
        const uint8_t *src = a.k + (size_t)(j < a.kv ? j : 0) * IDX_D + col;
        const int bytes = j < a.kv ? 16 : 0;
        tl_cp_async16(raw + row * IDX_D + col, src, bytes);
    }
    if (IDX_TID < IDX_TILE / 4) {
        const long j = j0 + 4 * IDX_TID;
        const long left = a.kv - j;
        const int bytes = left >= 4 ? 16 : left > 0 ? (int)left * 4 : 0;
        const float *src = a.k_scale + (bytes ? j : 0);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(
                         tl_smem_addr(raw + IDX_TILE * IDX_D + 16 * IDX_TID)),
                     "l"(src), "r"(bytes));
    }
    tl_cp_async_commit();
}

/* Raw stage -> decoded tile: 8 codes a piece (8 bytes read, 16 written), the row's scale sign
 * folded in, |k_scale| beside. */
static __device__ __forceinline__ void idx_decode_sm90(const uint8_t *raw, uint8_t *dec, int nthreads)
{
    const float *sc = (const float *)(raw + IDX_TILE * IDX_D);
    const int pieces = IDX_TILE * (IDX_D / 8);
#pragma unroll 4
    for (int c = IDX_TID; c < pieces; c += nthreads) {
        const int row = c / (IDX_D / 8), col = 8 * (c % (IDX_D / 8));
        const uint2 v = *(const uint2 *)(raw + row * IDX_D + col);
        const uint32_t mul = sc[row] < 0.0f ? IDX_UNSCALE_NEG_X2 : IDX_UNSCALE_X2;
        uint4 o;
        idx_e4m3x4_bf16(v.x, mul, o.x, o.y);
        idx_e4m3x4_bf16(v.y, mul, o.z, o.w);
        *(uint4 *)(dec + (row * IDX_KB_STRIDE + col) * 2) = o;
    }
    for (int c = IDX_TID; c < IDX_TILE; c += nthreads) ((float *)(dec + IDX_TILE * IDX_KB_STRIDE * 2))[c] = fabsf(sc[c]);
}

/* Scores 32 positions (kb: the shared address of their decoded rows, ks: their |k_scale|) against
 * the warp's 32 heads: two 16-position A fragments (ldmatrix.x4 each) per k-step against the 4
 * head fragments, 8 independent accumulators. HW == 1 (H = 32: the warp has all heads): stores
 * the logits of positions j0..j0+31 below kv (`edge`: bounds checked per position, -inf outside
 * [lo, hi); else all 32 are inside the window and below kv). HW == 2 (H = 64): writes the warp's
 * partial sums (times |k_scale|) to red[0..31] for idx_flush_sm90. */
template <int HW>
static __device__ __forceinline__ void idx_score32_sm90(unsigned kb, const float *ks, const IdxB (&qf)[4][IDX_KSTEPS],
                                                        const float (&wv)[4][2], long j0, bool edge, long lo, long hi,
                                                        long kv, float *out, float *red)
{
    tl_frag_c c[2][4];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < 4; n++) tl_frag_zero(&c[m][n]);
    const int l = tl_lane(), g = l / 4, t = l % 4;
    /* ldmatrix.x4: lane l gives the row of position (l % 8) + 8 ((l / 8) % 2), d 8 (l / 16): the
     * four 8x8 matrices are the A fragment's r0..r3 */
    const unsigned base = kb + (((l & 7) + 8 * ((l >> 3) & 1)) * IDX_KB_STRIDE + 8 * (l >> 4)) * 2;
#pragma unroll
    for (int s = 0; s < IDX_KSTEPS; s++) {
        tl_frag_a_bf16 af[2];
#pragma unroll
        for (int m = 0; m < 2; m++)
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                         : "=r"(af[m].r[0]), "=r"(af[m].r[1]), "=r"(af[m].r[2]), "=r"(af[m].r[3])
                         : "r"(base + m * 16 * IDX_KB_STRIDE * 2 + 32 * s));
#pragma unroll
        for (int n = 0; n < 4; n++) {
            tl_mma_bf16(&c[0][n], &af[0], &qf[n][s]);
            tl_mma_bf16(&c[1][n], &af[1], &qf[n][s]);
        }
    }
    float p[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
    for (int n = 0; n < 4; n++)
#pragma unroll
        for (int m = 0; m < 2; m++) {
            p[m][0] = fmaf(wv[n][0], fmaxf(c[m][n].v[0], 0.0f), p[m][0]);
            p[m][1] = fmaf(wv[n][0], fmaxf(c[m][n].v[2], 0.0f), p[m][1]);
            p[m][0] = fmaf(wv[n][1], fmaxf(c[m][n].v[1], 0.0f), p[m][0]);
            p[m][1] = fmaf(wv[n][1], fmaxf(c[m][n].v[3], 0.0f), p[m][1]);
        }
#pragma unroll
    for (int x = 1; x <= 2; x *= 2)
#pragma unroll
        for (int m = 0; m < 2; m++) p[m][0] += tl_shfl_xor(p[m][0], x), p[m][1] += tl_shfl_xor(p[m][1], x);
    if (t < 2) {
#pragma unroll
        for (int m = 0; m < 2; m++) {
            const int r = 16 * m + g + 8 * t;
            const float v = (t ? p[m][1] : p[m][0]) * ks[r];
            if (HW == 2) {
                red[r] = v;
            } else {
                const long j = j0 + r;
                if (!edge) out[j] = v;
                else if (j < kv) out[j] = j >= lo && j < hi ? v : -__builtin_inff();
            }
        }
    }
}

/* H = 64: the two warps of a row add their partial sums of one tile (red: [2 halves][64]) and
 * write it, 32 positions each, -inf outside [lo, hi). */
static __device__ __forceinline__ void idx_flush_sm90(const float *red, int half, long j0, long lo, long hi, long kv,
                                                      float *out)
{
    const int pos = 32 * half + tl_lane();
    const long j = j0 + pos;
    if (j < kv) out[j] = j >= lo && j < hi ? red[pos] + red[IDX_TILE + pos] : -__builtin_inff();
}

template <int H, int BQ>
static __device__ __forceinline__ void idx_body_sm90(const IdxArgs &a)
{
    constexpr int HW = H / TL_INDEXER_HEADS_PER_WARP_SM90; /* warps a row */
    TL_SHARED_DYNAMIC(16, uint8_t, idx_smem);
    uint8_t *raw = idx_smem, *dec = idx_smem + IDX_STAGES * IDX_RAW_BYTES;
    float *red = (float *)(dec + 2 * IDX_DEC_BYTES); /* HW == 2: [2 tiles][BQ rows][2 halves][64] */
    const int nthreads = BQ * HW * TL_WAVE;
    const int rib = tl_wave_id() / HW, half = tl_wave_id() % HW;
    /* the longest blocks first: under the causal rule block b's window grows with b */
    const long blk = (long)tl_grid_x() - 1 - IDX_BID;
    const long row = blk * BQ + rib;
    const bool live = row < a.rows;
    long ulo = a.kv, uhi = 0;
    for (int r = 0; r < BQ; r++) {
        const long i = blk * BQ + r;
        if (i >= a.rows || a.starts[i] >= a.ends[i]) continue;
        ulo = a.starts[i] < ulo ? a.starts[i] : ulo;
        uhi = a.ends[i] > uhi ? a.ends[i] : uhi;
    }
    if (uhi <= ulo) ulo = uhi = 0;
    const long lo = live ? a.starts[row] : 0, hi = live ? a.ends[row] : 0;
    const long t0 = ulo / IDX_TILE, t1 = (uhi + IDX_TILE - 1) / IDX_TILE;
    float *out = a.logits + (size_t)(live ? row : 0) * a.kv;
    if (t1 > t0)
        for (int k = 0; k < IDX_STAGES && t0 + k < t1; k++)
            idx_issue_sm90(a, (t0 + k) * IDX_TILE, raw + k * IDX_RAW_BYTES, nthreads);
    /* -inf outside the tiles the block walks (the copies are in flight meanwhile); the row's
     * first warp writes what is the row's alone */
    const bool writer = live && half == 0;
    if (writer) {
        const long a0 = t0 * IDX_TILE, a1 = t1 * IDX_TILE < a.kv ? t1 * IDX_TILE : a.kv;
        for (long j = tl_lane(); j < a0; j += TL_WAVE) out[j] = -__builtin_inff();
        for (long j = a1 + tl_lane(); j < a.kv; j += TL_WAVE) out[j] = -__builtin_inff();
    }
    if (t1 <= t0) return; /* the whole block: no tile */
    IdxB qf[4][IDX_KSTEPS];
    float wv[4][2];
    {
        const uint8_t *q = a.q + ((size_t)(live ? row : 0) * H + TL_INDEXER_HEADS_PER_WARP_SM90 * half) * IDX_D;
        const float *w = a.w + (size_t)(live ? row : 0) * H + TL_INDEXER_HEADS_PER_WARP_SM90 * half;
#pragma unroll
        for (int n = 0; n < 4; n++) {
#pragma unroll
            for (int s = 0; s < IDX_KSTEPS; s++) idx_load_q(qf[n][s], q, n, s);
            wv[n][0] = w[8 * n + 2 * (tl_lane() % 4)];
            wv[n][1] = w[8 * n + 2 * (tl_lane() % 4) + 1];
        }
    }
    /* tile t0 decoded before the loop: its copy (the oldest of the groups in flight) in */
    const long issued0 = t1 - t0 < IDX_STAGES ? t1 - t0 : IDX_STAGES;
    if (issued0 >= 3) tl_cp_async_wait<2>();
    else if (issued0 == 2) tl_cp_async_wait<1>();
    else tl_cp_async_wait<0>();
    IDX_SYNC();
    idx_decode_sm90(raw, dec, nthreads);
    for (long t = t0; t < t1; t++) {
        const long k = t - t0;
        /* tile t + 1's copy in: the groups issued after it (up to IDX_STAGES - 2 of them) may fly */
        const long after = (t1 - 1 < t0 + k + IDX_STAGES - 1 ? t1 - 1 : t0 + k + IDX_STAGES - 1) - (t + 1);
        if (after >= 1) tl_cp_async_wait<1>();
        else tl_cp_async_wait<0>();
        IDX_SYNC(); /* tile t decoded and visible; tile t + 1's codes visible; tile t - 1 scored */
        if (t + IDX_STAGES < t1)
            idx_issue_sm90(a, (t + IDX_STAGES) * IDX_TILE, raw + (int)(k % IDX_STAGES) * IDX_RAW_BYTES, nthreads);
        if (t + 1 < t1)
            idx_decode_sm90(raw + (int)((k + 1) % IDX_STAGES) * IDX_RAW_BYTES, dec + (int)((k + 1) & 1) * IDX_DEC_BYTES,
                            nthreads);
        if (HW == 2 && t > t0 && live) { /* tile t - 1's two halves, now both written */
            const long jp = (t - 1) * IDX_TILE;
            if (!(jp >= hi || jp + IDX_TILE <= lo))
                idx_flush_sm90(red + ((int)((k - 1) & 1) * BQ + rib) * 2 * IDX_TILE, half, jp, lo, hi, a.kv, out);
        }
        const long j0 = t * IDX_TILE;
        if (!live || j0 >= hi || j0 + IDX_TILE <= lo) {
            if (writer)
                for (long j = j0 + tl_lane(); j < j0 + IDX_TILE && j < a.kv; j += TL_WAVE) out[j] = -__builtin_inff();
            continue;
        }
        const bool edge = j0 < lo || j0 + IDX_TILE > hi || j0 + IDX_TILE > a.kv;
        const uint8_t *d = dec + (int)(k & 1) * IDX_DEC_BYTES;
        const unsigned kb = tl_smem_addr(d);
        const float *ks = (const float *)(d + IDX_TILE * IDX_KB_STRIDE * 2);
        float *rd = red + (((int)(k & 1) * BQ + rib) * 2 + half) * IDX_TILE;
#pragma unroll 1
        for (int m = 0; m < IDX_TILE / 32; m++)
            idx_score32_sm90<HW>(kb + m * 32 * IDX_KB_STRIDE * 2, ks + 32 * m, qf, wv, j0 + 32 * m, edge, lo, hi, a.kv,
                                 out, rd + 32 * m);
    }
    if (HW == 2) { /* the last tile's halves */
        IDX_SYNC();
        const long jp = (t1 - 1) * IDX_TILE;
        if (live && !(jp >= hi || jp + IDX_TILE <= lo))
            idx_flush_sm90(red + ((int)((t1 - 1 - t0) & 1) * BQ + rib) * 2 * IDX_TILE, half, jp, lo, hi, a.kv, out);
    }
}
#endif

/* ---- sm_90a: E4M3 warpgroup products straight from the copied codes --------------------------
 * Block: WGS = min(BLOCK_Q, 2) warpgroups, warpgroup v scoring rows v R .. v R + R - 1 of the block
 * (R = BLOCK_Q / WGS) against every tile of the block's union window. Shared memory
 * (TL_INDEXER_SMEM_WGMMA(H, BLOCK_Q) bytes, 1024-aligned pieces):
 *   Q     [BLOCK_Q][H][128 bytes], the 128-byte swizzle (kernels/wgmma.h): row r's B operand
 *   K     TL_INDEXER_STAGES_WGMMA stages of [64][128 bytes] in the swizzle, filled by cp.async
 *         straight into place (positions >= kv read as zero), and their k_scale [64]
 *   w     [BLOCK_Q][H] float32
 * A row's scores of a tile are one 64 x H x 128 product: 4 wgmma m64nHk32 E4M3 with A = the K
 * tile in registers (each warp's 16 positions read from shared memory once a tile by ldmatrix and
 * shared by the warpgroup's R rows, so a product reads only its B, the row's Q, from shared
 * memory) and B = the row's Q (at H = 32 two rows' Q: one m64n64 product); accumulators 64
 * positions x N columns (N / 2 a thread). A warpgroup issues product p + 1 before the epilogue of
 * product p (two accumulator sets), so the tensor cores work while the epilogue runs. Rows whose
 * k_scale is negative have their codes' signs flipped in registers, so that relu(x s) =
 * |s| relu(x') and the epilogue is max and FMA per score and head; rows are summed across their
 * quad in pairs (3 shuffles a lane for two rows), one multiply by |s| and one store a lane.
 * Iteration t: wait for tile t's copy, barrier (tile t visible; every warp done reading tile
 * t - 1), issue tile t + STAGES - 1 into tile t - 1's stage, score tile t. One cp.async group is
 * committed per iteration, empty or not, so the wait count is fixed. */
#if TL_WGMMA_AVAILABLE
#define IDXW_STAGES TL_INDEXER_STAGES_WGMMA
#define IDXW_KBYTES (IDX_TILE * IDX_D)

static __device__ __forceinline__ void idxw_issue(const IdxArgs &a, long j0, uint8_t *kst, float *sc, int nthreads)
{
    for (int c = IDX_TID; c < IDX_TILE * 8; c += nthreads) {
        const int row = c / 8, col = 16 * (c % 8);
        const long j = j0 + row;
        const uint8_t *src = a.k + (size_t)(j < a.kv ? j : 0) * IDX_D + col;
        tl_cp_async16(kst + tl_wgmma_sw128_offset(row, col), src, j < a.kv ? 16 : 0);
    }
    if (IDX_TID < IDX_TILE / 4) {
        const long j = j0 + 4 * IDX_TID;
        const long left = a.kv - j;
        const int bytes = left >= 4 ? 16 : left > 0 ? (int)left * 4 : 0;
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(tl_smem_addr(sc + 4 * IDX_TID)),
                     "l"(a.k_scale + (bytes ? j : 0)), "r"(bytes));
    }
}

/* The warp's 16 positions of the tile (rows 16 (warp % 4) ..) as wgmma's register A, 4 k-steps of
 * 32 codes: ldmatrix.x4 from the swizzled stage, matrices (rows 0-7 | 8-15) x (bytes 0-15 | 16-31)
 * of the k-step = m16n8k32's a0..a3. Rows whose k_scale is negative have their codes' signs
 * flipped, so that relu(x s) = |s| relu(x') for every row. */
static __device__ __forceinline__ void idxw_load_a(uint32_t (&a)[4][4], const uint8_t *kst, const float *sc)
{
    const int l = tl_lane(), w = tl_wave_id() % 4;
    const int row = 16 * w + (l & 7) + 8 * ((l >> 3) & 1);
    const unsigned base = tl_smem_addr(kst);
#pragma unroll
    for (int ks = 0; ks < IDX_D / 32; ks++)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a[ks][0]), "=r"(a[ks][1]), "=r"(a[ks][2]), "=r"(a[ks][3])
                     : "r"(base + tl_wgmma_sw128_offset(row, 32 * ks + 16 * (l >> 4))));
    const int g = l / 4;
    const uint32_t f0 = sc[16 * w + g] < 0.0f ? 0x80808080u : 0u, f1 = sc[16 * w + g + 8] < 0.0f ? 0x80808080u : 0u;
#pragma unroll
    for (int ks = 0; ks < IDX_D / 32; ks++) a[ks][0] ^= f0, a[ks][2] ^= f0, a[ks][1] ^= f1, a[ks][3] ^= f1;
}

/* One product of the tile against N / H consecutive rows' Q (adjacent in shared memory: one B of
 * N rows), N = 32 or 64. */
template <int N>
static __device__ __forceinline__ void idxw_product(float (&d)[N / 2], const uint32_t (&a)[4][4], uint64_t qb)
{
    tl_wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < IDX_D / 32; ks++) {
        if constexpr (N == 64)
            tl_wgmma_m64n64k32_e4m3_rs(d, a[ks], tl_wgmma_desc_advance(qb, 32 * ks), ks > 0);
        else
            tl_wgmma_m64n32k32_e4m3_rs(d, a[ks], tl_wgmma_desc_advance(qb, 32 * ks), ks > 0);
    }
    tl_wgmma_commit();
}

/* A row's partial sums of tile j0 from a product's accumulators (columns RR H .. RR H + H - 1 are
 * its heads): this lane's share of positions 16 (warp % 4) + g (v[0]) and + 8 (v[1]), w: the row's
 * weights in shared memory. Per head and score one max and one FMA, in four independent chains of
 * H / 8. */
template <int H, int N, int RR>
static __device__ __forceinline__ void idxw_partial(const float (&d)[N / 2], const float *w, float (&v)[2])
{
    const int t = tl_lane() % 4;
    float a0 = 0.0f, b0 = 0.0f, a1 = 0.0f, b1 = 0.0f;
#pragma unroll
    for (int j = RR * H / 8; j < (RR + 1) * H / 8; j++) {
        const float2 wj = *(const float2 *)(w + 8 * j - RR * H + 2 * t);
        a0 = fmaf(wj.x, fmaxf(d[4 * j + 0], 0.0f), a0);
        b0 = fmaf(wj.y, fmaxf(d[4 * j + 1], 0.0f), b0);
        a1 = fmaf(wj.x, fmaxf(d[4 * j + 2], 0.0f), a1);
        b1 = fmaf(wj.y, fmaxf(d[4 * j + 3], 0.0f), b1);
    }
    v[0] = a0 + b0, v[1] = a1 + b1;
}

/* Two rows' logits of tile j0 from their partial sums (pa: row a, pb: row b; pb zero and ob null
 * when there is one row): the quad's four lanes sum their four values in two exchange rounds (3
 * shuffles a lane instead of 4 a row) so that lane t ends with row (t / 2 ? b : a), position
 * 16 (warp % 4) + g + 8 (t % 2), which it scales by |k_scale| and stores (-inf outside the row's
 * window [w.x, w.y)). */
static __device__ __forceinline__ void idxw_finish(const float (&pa)[2], const float (&pb)[2], const float *sc, int j0,
                                                   int2 wa, float *oa, int2 wb, float *ob, int kv)
{
    const int l = tl_lane(), t = l % 4, odd = t & 1, hi_lane = t >> 1;
    /* round 1 (lanes t ^ 1): keep the position this lane ends with, send the other */
    const float kx = odd ? pa[1] : pa[0], ky = odd ? pb[1] : pb[0];
    const float sx = odd ? pa[0] : pa[1], sy = odd ? pb[0] : pb[1];
    const float ux = kx + tl_shfl_xor(sx, 1), uy = ky + tl_shfl_xor(sy, 1);
    /* round 2 (lanes t ^ 2): keep the row this lane ends with */
    const float total = (hi_lane ? uy : ux) + tl_shfl_xor(hi_lane ? ux : uy, 2);
    float *o = hi_lane ? ob : oa;
    if (!o) return;
    const int pos = 16 * (tl_wave_id() % 4) + l / 4 + 8 * odd;
    const int j = j0 + pos, lo = hi_lane ? wb.x : wa.x, hi = hi_lane ? wb.y : wa.y;
    if (j < kv) o[j] = j >= lo && j < hi ? total * fabsf(sc[pos]) : -__builtin_inff();
}

template <int H, int BQ>
static __device__ __forceinline__ void idx_body_wgmma(const IdxArgs &a)
{
    constexpr int WGS = BQ >= 2 ? 2 : 1, R = BQ / WGS;
    TL_SHARED_DYNAMIC(1024, uint8_t, idxw_smem);
    /* the swizzled tiles need 1024-byte alignment in the shared window */
    uint8_t *qs = idxw_smem + ((1024u - (tl_smem_addr(idxw_smem) & 1023u)) & 1023u); /* [BQ][H][128] */
    uint8_t *ks = qs + BQ * H * IDX_D;                         /* [STAGES][64][128] */
    float *scs = (float *)(ks + IDXW_STAGES * IDXW_KBYTES);   /* [STAGES][64] */
    float *ws = scs + IDXW_STAGES * IDX_TILE;                  /* [BQ][H] */
    int2 *wins = (int2 *)(ws + BQ * H);                        /* [BQ]: start, end */
    const int nthreads = WGS * 128;
    const int wg = IDX_TID / 128;
    const long blk = (long)tl_grid_x() - 1 - IDX_BID;
    long ulo = a.kv, uhi = 0;
    for (int r = 0; r < BQ; r++) {
        const long i = blk * BQ + r;
        if (i >= a.rows || a.starts[i] >= a.ends[i]) continue;
        ulo = a.starts[i] < ulo ? a.starts[i] : ulo;
        uhi = a.ends[i] > uhi ? a.ends[i] : uhi;
    }
    if (uhi <= ulo) ulo = uhi = 0;
    const long t0 = ulo / IDX_TILE, t1 = (uhi + IDX_TILE - 1) / IDX_TILE;
    /* the first tiles' copies, one group each (empty past t1) */
#pragma unroll
    for (int k = 0; k < IDXW_STAGES - 1; k++) {
        if (t0 + k < t1) idxw_issue(a, (t0 + k) * IDX_TILE, ks + k * IDXW_KBYTES, scs + k * IDX_TILE, nthreads);
        tl_cp_async_commit();
    }
    /* Q and w of the block's rows (rows past the last: zeros) */
    for (int c = IDX_TID; c < BQ * H * 8; c += nthreads) {
        const int rh = c / 8, col = 16 * (c % 8);
        const long i = blk * BQ + rh / H;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (i < a.rows) v = *(const uint4 *)(a.q + ((size_t)i * H + rh % H) * IDX_D + col);
        *(uint4 *)(qs + tl_wgmma_sw128_offset(rh, col)) = v;
    }
    for (int c = IDX_TID; c < BQ * H; c += nthreads) {
        const long i = blk * BQ + c / H;
        ws[c] = i < a.rows ? a.w[(size_t)i * H + c % H] : 0.0f;
    }
    if (IDX_TID < BQ) { /* windows as int: kv <= TL_INDEXER_MAX_KV (2^22); rows past the last empty */
        const long i = blk * BQ + IDX_TID;
        wins[IDX_TID] = i < a.rows ? make_int2((int)a.starts[i], (int)a.ends[i]) : make_int2(0, 0);
    }
    /* -inf outside the tiles the block walks, every row of the block, all threads */
    {
        const long a0 = t0 * IDX_TILE, a1 = t1 * IDX_TILE < a.kv ? t1 * IDX_TILE : a.kv;
        for (int r = 0; r < BQ; r++) {
            const long i = blk * BQ + r;
            if (i >= a.rows) break;
            float *o = a.logits + (size_t)i * a.kv;
            for (long j = IDX_TID; j < a0; j += nthreads) o[j] = -__builtin_inff();
            for (long j = a1 + IDX_TID; j < a.kv; j += nthreads) o[j] = -__builtin_inff();
        }
    }
    tl_fence_proxy_async(); /* Q, written by this thread, is read by the wgmma (the async proxy) */
    if (t1 <= t0) return;
    /* this warpgroup's rows' windows, read from shared memory where used (registers are full at
     * BLOCK_Q 8) */
    const int2 *win = wins + wg * R;
    const uint64_t qdesc0 = tl_wgmma_desc_sw128(qs + wg * R * H * IDX_D);
    /* a product covers RP rows: N = RP H columns (64 when R allows), PR products a tile */
    constexpr int RP = 64 / H <= R ? 64 / H : 1, N = RP * H, PR = R / RP;
    float acc[2][N / 2];
    float held[2] = {0.0f, 0.0f}; /* an even row's partial sums, until its odd neighbour's */
    uint32_t afr[4][4];
    for (long t = t0; t < t1; t++) {
        const int k = (int)((t - t0) % IDXW_STAGES);
        /* tile t in (its group and the STAGES - 2 after it may still fly: none of them is read) */
        tl_cp_async_wait<IDXW_STAGES - 2>();
        IDX_SYNC(); /* tile t visible to all; tile t - 1's stage read by all (ldmatrix, last iteration) */
        {
            const long tn = t + IDXW_STAGES - 1;
            const int kn = (int)((tn - t0) % IDXW_STAGES);
            if (tn < t1) idxw_issue(a, tn * IDX_TILE, ks + kn * IDXW_KBYTES, scs + kn * IDX_TILE, nthreads);
            tl_cp_async_commit();
        }
        const long j0 = t * IDX_TILE;
        const float *sc = scs + k * IDX_TILE;
        /* a tile none of this warpgroup's rows sees is -inf for all of them; otherwise every row is
         * scored and its epilogue writes -inf where the tile leaves its window */
        bool any = false;
#pragma unroll
        for (int r = 0; r < R; r++) any |= !(j0 >= win[r].y || j0 + IDX_TILE <= win[r].x);
        if (!any) {
            for (int r = 0; r < R; r++) {
                const long i = blk * BQ + wg * R + r;
                if (i >= a.rows) break;
                float *o = a.logits + (size_t)i * a.kv;
                for (long j = j0 + (IDX_TID % 128); j < j0 + IDX_TILE && j < a.kv; j += 128) o[j] = -__builtin_inff();
            }
            continue;
        }
        idxw_load_a(afr, ks + k * IDXW_KBYTES, sc);
        /* product p (rows p RP ..) issued before product p - 1's epilogue (accumulator sets p % 2) */
#pragma unroll
        for (int p = 0; p <= PR; p++) {
            if (p < PR) idxw_product<N>(acc[p & 1], afr, tl_wgmma_desc_advance(qdesc0, p * N * IDX_D));
            if (p == 0) continue;
            if (p < PR) tl_wgmma_wait<1>();
            else tl_wgmma_wait<0>();
            const int q = p - 1;
            tl_wgmma_hold(acc[q & 1]);
            /* rows are finished in pairs (2m, 2m + 1), the even row's partials held until the odd
             * row's are ready; a last unpaired row is finished alone */
#pragma unroll
            for (int rr = 0; rr < RP; rr++) {
                const int r = q * RP + rr;
                float v[2];
                if (rr == 0) idxw_partial<H, N, 0>(acc[q & 1], ws + (wg * R + r) * H, v);
                else idxw_partial<H, N, (RP > 1 ? 1 : 0)>(acc[q & 1], ws + (wg * R + r) * H, v);
                if (r % 2 == 0 && r + 1 < R) {
                    held[0] = v[0], held[1] = v[1];
                    continue;
                }
                const int ra = r % 2 ? r - 1 : r;
                const long ia = blk * BQ + wg * R + ra, ib = ia + 1;
                float *oa = ia < a.rows ? a.logits + (size_t)ia * a.kv : nullptr;
                float *ob = r % 2 && ib < a.rows ? a.logits + (size_t)ib * a.kv : nullptr;
                const float zero[2] = {0.0f, 0.0f};
                if (r % 2) idxw_finish(held, v, sc, (int)j0, win[ra], oa, win[r], ob, (int)a.kv);
                else idxw_finish(v, zero, sc, (int)j0, win[ra], oa, make_int2(0, 0), nullptr, (int)a.kv);
            }
        }
    }
}
#endif

#if defined(TL_HAVE_WGMMA)
template <int H, int BQ>
__global__ void __launch_bounds__((BQ >= 2 ? 2 : 1) * 128, 2) indexer_wgmma_kernel(IdxArgs a)
{
#if TL_WGMMA_AVAILABLE
    idx_body_wgmma<H, BQ>(a);
#else
    (void)a;
#endif
}
#endif

/* On sm_90 a block has BLOCK_Q x H / 32 warps (a warp scores 32 heads of its row) and a thread may
 * take 128 registers, so that an SM holds 16 warps (Q 64, w 8, accumulators 32, A fragments 8). */
#if defined(TL_MMA_TARGET_SM80)
#define IDX_WARPS(h, bq) ((bq) * (h) / TL_INDEXER_HEADS_PER_WARP_SM90)
#define IDX_MIN_BLOCKS(h, bq) (16 / IDX_WARPS(h, bq) > 0 ? 16 / IDX_WARPS(h, bq) : 1)
#else
#define IDX_WARPS(h, bq) (bq)
#define IDX_MIN_BLOCKS(h, bq) 1
#endif
template <int H, int BQ>
__global__ void __launch_bounds__(IDX_WARPS(H, BQ) * TL_WAVE, IDX_MIN_BLOCKS(H, BQ)) indexer_kernel(IdxArgs a)
{
#if defined(TL_MMA_TARGET_SM80)
    idx_body_sm90<H, BQ>(a);
#elif defined(TL_MMA_TARGET_GFX950) || defined(TL_MMA_TARGET_GFX942)
    TL_SHARED_ALIGNED(16, uint8_t, ktile, [2][IDX_TILE * IDX_STRIDE]);
    TL_SHARED(float, kscale, [2][IDX_TILE]);
    const int nthreads = BQ * TL_WAVE;
    const long row = IDX_BID * BQ + tl_wave_id();
    const bool live = row < a.rows;
    /* the block's union window, and this row's */
    long ulo = a.kv, uhi = 0;
    for (int r = 0; r < BQ; r++) {
        const long i = IDX_BID * BQ + r;
        if (i >= a.rows || a.starts[i] >= a.ends[i]) continue;
        ulo = a.starts[i] < ulo ? a.starts[i] : ulo;
        uhi = a.ends[i] > uhi ? a.ends[i] : uhi;
    }
    if (uhi <= ulo) ulo = uhi = 0;
    const long lo = live ? a.starts[row] : 0, hi = live ? a.ends[row] : 0;
    const long t0 = ulo / IDX_TILE, t1 = (uhi + IDX_TILE - 1) / IDX_TILE; /* tiles [t0, t1) */
    float *out = a.logits + (size_t)(live ? row : 0) * a.kv;
    /* -inf outside the tiles the block walks */
    if (live) {
        const long a0 = t0 * IDX_TILE, a1 = t1 * IDX_TILE < a.kv ? t1 * IDX_TILE : a.kv;
        for (long j = tl_lane(); j < a.kv; j += TL_WAVE)
            if (j < a0 || j >= a1) out[j] = -__builtin_inff();
    }
    if (t1 <= t0) return; /* the whole block: no tile */
    /* Q (B fragments) and w of the row, for the whole run */
    IdxB qf[H / IDX_N][IDX_KSTEPS];
    float wv[H / IDX_N][2];
    const uint8_t *q = a.q + (size_t)(live ? row : 0) * H * IDX_D;
    const float *w = a.w + (size_t)(live ? row : 0) * H;
#pragma unroll
    for (int n = 0; n < H / IDX_N; n++) {
#pragma unroll
        for (int s = 0; s < IDX_KSTEPS; s++) idx_load_q(qf[n][s], q, n, s);
        wv[n][0] = w[16 * n + tl_lane() % 16];
        wv[n][1] = 0.0f;
    }
    /* double-buffered tiles: tile t + 1 is copied while tile t is scored */
    idx_copy_tile(a, t0 * IDX_TILE, ktile[0], kscale[0], nthreads);
    idx_copy_commit();
    for (long t = t0; t < t1; t++) {
        const int buf = (int)((t - t0) & 1);
        idx_copy_wait();
        IDX_SYNC(); /* tile t is in; every wave is done with tile t - 1's buffer */
        if (t + 1 < t1) idx_copy_tile(a, (t + 1) * IDX_TILE, ktile[buf ^ 1], kscale[buf ^ 1], nthreads);
        idx_copy_commit();
        const long j0 = t * IDX_TILE;
        /* the window bound, once per tile: a tile wholly outside the row is -inf, never scored */
        if (!live) continue;
        if (j0 >= hi || j0 + IDX_TILE <= lo) {
            for (long j = j0 + tl_lane(); j < j0 + IDX_TILE && j < a.kv; j += TL_WAVE) out[j] = -__builtin_inff();
            continue;
        }
#pragma unroll 1
        for (int m = 0; m < IDX_TILE / 16; m++)
            idx_score16<H>(ktile[buf] + m * 16 * IDX_STRIDE, kscale[buf] + m * 16, qf, wv, j0 + 16 * m, lo, hi, a.kv, out);
    }
#endif
}

/* ---- the launcher ----------------------------------------------------------------------------- */
struct tl_indexer_gpu {
    tl_indexer_shape s;
    int32_t *starts_host, *ends_host;
    uint8_t *q, *k;
    float *k_scale, *w, *logits;
    int32_t *starts, *ends;
    int wave;
    int wgmma; /* 1: the sm_90a kernel (this build has it and the device is a Hopper) */
};

static int gpu_alloc(void **p, size_t bytes, const char *what)
{
    *p = NULL;
    hipError_t e = hipMalloc(p, bytes ? bytes : 16);
    if (e != hipSuccess) {
        *p = NULL;
        (void)hipGetLastError();
        return tl_error(TL_EFAIL, "indexer gpu", "cannot allocate %.3f GB for %s: %s", bytes / 1e9, what,
                        hipGetErrorString(e));
    }
    return 0;
}
#define GALLOC(ptr, bytes, what) gpu_alloc((void **)&(ptr), (bytes), (what))

extern "C" void tl_indexer_gpu_close(tl_indexer_gpu *g)
{
    if (!g) return;
    void *ptrs[] = {g->q, g->k, g->k_scale, g->w, g->logits, g->starts, g->ends};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) (void)hipFree(ptrs[i]);
    free(g->starts_host);
    free(g->ends_host);
    free(g);
}

static int raise_smem();
extern "C" int tl_indexer_gpu_open(const tl_indexer_shape *s, tl_indexer_gpu **out)
{
    *out = NULL;
    int rc = tl_indexer_shape_check(s);
    if (rc) return rc;
    if (s->heads != 32 && s->heads != 64)
        return tl_error(TL_EUSAGE, "indexer gpu", "heads = %d: the kernel is built for 32 and 64", s->heads);
    tl_indexer_gpu *g = (tl_indexer_gpu *)calloc(1, sizeof *g);
    if (!g) return tl_error(TL_EFAIL, "indexer gpu", "out of memory");
    g->s = *s;
    g->s.starts = g->s.ends = NULL;
    g->wave = tl_gpu_wave_size();
    if (!g->wave) {
        tl_indexer_gpu_close(g);
        return TL_EFAIL;
    }
#if defined(TL_HAVE_WGMMA)
    {
        int dev = 0;
        hipDeviceProp_t prop;
        if (hipGetDevice(&dev) == hipSuccess && hipGetDeviceProperties(&prop, dev) == hipSuccess)
            g->wgmma = prop.major == 9 && prop.minor == 0;
    }
#endif
    const size_t rows = (size_t)s->rows;
    g->starts_host = (int32_t *)malloc(rows * sizeof(int32_t));
    g->ends_host = (int32_t *)malloc(rows * sizeof(int32_t));
    if (!g->starts_host || !g->ends_host) {
        tl_indexer_gpu_close(g);
        return tl_error(TL_EFAIL, "indexer gpu", "out of memory");
    }
    for (long i = 0; i < s->rows; i++) {
        long a, e;
        tl_indexer_window(s, i, &a, &e);
        g->starts_host[i] = (int32_t)a, g->ends_host[i] = (int32_t)e;
    }
    rc = GALLOC(g->q, (size_t)tl_indexer_q_bytes(s), "Q");
    if (!rc) rc = GALLOC(g->k, (size_t)tl_indexer_k_bytes(s), "K");
    if (!rc) rc = GALLOC(g->k_scale, (size_t)s->kv * sizeof(float), "k_scale");
    if (!rc) rc = GALLOC(g->w, rows * s->heads * sizeof(float), "w");
    if (!rc) rc = GALLOC(g->logits, rows * (size_t)s->kv * sizeof(float), "logits");
    if (!rc) rc = GALLOC(g->starts, rows * sizeof(int32_t), "window starts");
    if (!rc) rc = GALLOC(g->ends, rows * sizeof(int32_t), "window ends");
    if (!rc) rc = raise_smem();
    if (rc) {
        tl_indexer_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

extern "C" int tl_indexer_gpu_upload(tl_indexer_gpu *g, const uint8_t *q, const uint8_t *k, const float *k_scale,
                                     const float *w)
{
    const tl_indexer_shape *s = &g->s;
    TL_GPU_CHECK(hipMemcpy(g->q, q, (size_t)tl_indexer_q_bytes(s), hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->k, k, (size_t)tl_indexer_k_bytes(s), hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->k_scale, k_scale, (size_t)s->kv * sizeof(float), hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->w, w, (size_t)s->rows * s->heads * sizeof(float), hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->starts, g->starts_host, (size_t)s->rows * sizeof(int32_t), hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->ends, g->ends_host, (size_t)s->rows * sizeof(int32_t), hipMemcpyHostToDevice));
    return 0;
}

extern "C" int tl_indexer_gpu_poison(tl_indexer_gpu *g)
{
    TL_GPU_CHECK(hipMemset(g->logits, 0xFF, (size_t)g->s.rows * g->s.kv * sizeof(float))); /* NaN */
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

/* Threads and dynamic shared memory of a block: on NVIDIA BLOCK_Q x H / 32 warps and
 * TL_INDEXER_SMEM_SM90 bytes; on AMD BLOCK_Q waves, none. */
#if defined(TL_GPU_NVIDIA)
#define IDX_HOST_WARPS(h, bq) ((bq) * (h) / TL_INDEXER_HEADS_PER_WARP_SM90)
#define IDX_SMEM(h, bq) TL_INDEXER_SMEM_SM90(h, bq)
#else
#define IDX_HOST_WARPS(h, bq) (bq)
#define IDX_SMEM(h, bq) 0
#endif
template <int H, int BQ>
static int launch_hq(const IdxArgs &a, unsigned blocks, int wave, int wgmma, hipStream_t st)
{
#if defined(TL_HAVE_WGMMA)
    if (wgmma) {
        (void)tl_launch(indexer_wgmma_kernel<H, BQ>, blocks, (BQ >= 2 ? 2 : 1) * 128, TL_INDEXER_SMEM_WGMMA(H, BQ), st, false, a);
        return 0;
    }
#else
    (void)wgmma;
#endif
    (void)tl_launch(indexer_kernel<H, BQ>, blocks, IDX_HOST_WARPS(H, BQ) * wave, IDX_SMEM(H, BQ), st, false, a);
    return 0;
}
/* Raises the dynamic shared-memory limit of every instantiation (above 48 KiB it must be asked
 * for); called when the launcher opens, outside any stream capture. */
template <int H, int BQ>
static int raise_smem_hq()
{
    if (IDX_SMEM(H, BQ) > 48 * 1024) {
        const void *f = (const void *)indexer_kernel<H, BQ>;
        TL_GPU_CHECK(hipFuncSetAttribute(f, hipFuncAttributeMaxDynamicSharedMemorySize, (int)IDX_SMEM(H, BQ)));
    }
#if defined(TL_HAVE_WGMMA)
    if (TL_INDEXER_SMEM_WGMMA(H, BQ) > 48 * 1024) {
        const void *f = (const void *)indexer_wgmma_kernel<H, BQ>;
        TL_GPU_CHECK(hipFuncSetAttribute(f, hipFuncAttributeMaxDynamicSharedMemorySize, (int)TL_INDEXER_SMEM_WGMMA(H, BQ)));
    }
#endif
    return 0;
}
static int raise_smem()
{
    int rc = raise_smem_hq<32, 1>();
    if (!rc) rc = raise_smem_hq<32, 2>();
    if (!rc) rc = raise_smem_hq<32, 4>();
    if (!rc) rc = raise_smem_hq<32, 8>();
    if (!rc) rc = raise_smem_hq<64, 1>();
    if (!rc) rc = raise_smem_hq<64, 2>();
    if (!rc) rc = raise_smem_hq<64, 4>();
    if (!rc) rc = raise_smem_hq<64, 8>();
    return rc;
}
template <int H>
static int launch_h(const IdxArgs &a, int bq, int wave, int wgmma, hipStream_t st)
{
    const unsigned blocks = (unsigned)((a.rows + bq - 1) / bq);
    int rc;
    switch (bq) {
    case 1: rc = launch_hq<H, 1>(a, blocks, wave, wgmma, st); break;
    case 2: rc = launch_hq<H, 2>(a, blocks, wave, wgmma, st); break;
    case 4: rc = launch_hq<H, 4>(a, blocks, wave, wgmma, st); break;
    case 8: rc = launch_hq<H, 8>(a, blocks, wave, wgmma, st); break;
    default: return tl_error(TL_EUSAGE, "indexer gpu", "block_q %d: the kernel is built for 1, 2, 4 and 8", bq);
    }
    if (rc) return rc;
    TL_GPU_CHECK_LAUNCH("indexer_kernel");
    return 0;
}

static int enqueue(tl_indexer_gpu *g, int bq, hipStream_t st)
{
    IdxArgs a;
    a.q = g->q, a.k = g->k, a.k_scale = g->k_scale, a.w = g->w;
    a.starts = g->starts, a.ends = g->ends, a.logits = g->logits;
    a.rows = g->s.rows, a.kv = g->s.kv;
    return g->s.heads == 32 ? launch_h<32>(a, bq, g->wave, g->wgmma, st) : launch_h<64>(a, bq, g->wave, g->wgmma, st);
}

extern "C" int tl_indexer_gpu_run(tl_indexer_gpu *g, int block_q)
{
    int rc = enqueue(g, block_q, 0);
    if (rc) return rc;
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

extern "C" int tl_indexer_gpu_acc_bits(const tl_indexer_gpu *g) { return g->wgmma ? TL_WGMMA_E4M3_ACC_BITS : 23; }

extern "C" int tl_indexer_gpu_read(tl_indexer_gpu *g, long first, long n, float *logits)
{
    if (first < 0 || n < 0 || first + n > g->s.rows)
        return tl_error(TL_EUSAGE, "indexer gpu", "rows %ld..%ld outside 0..%ld", first, first + n, g->s.rows);
    const size_t row = (size_t)g->s.kv * sizeof(float);
    TL_GPU_CHECK(hipMemcpy(logits, g->logits + (size_t)first * g->s.kv, (size_t)n * row, hipMemcpyDeviceToHost));
    return 0;
}

struct idx_time_ctx {
    tl_indexer_gpu *g;
    int bq;
};
static int idx_time_fn(void *ctx, void *stream)
{
    idx_time_ctx *c = (idx_time_ctx *)ctx;
    return enqueue(c->g, c->bq, (hipStream_t)stream);
}

extern "C" int tl_indexer_gpu_time(tl_indexer_gpu *g, int block_q, const tl_bench_opts *o, tl_bench_result *r)
{
    idx_time_ctx c = {g, block_q};
    return tl_bench_run(o, idx_time_fn, &c, r);
}

/* the exported table: host code only (the device pass of a HIP build has no host functions) */
#if !defined(__HIP_DEVICE_COMPILE__) && !defined(__CUDA_ARCH__)
extern "C" {
static const tl_indexer_gpu_api indexer_gpu_api = {tl_indexer_gpu_open,    tl_indexer_gpu_upload, tl_indexer_gpu_poison,
                                                   tl_indexer_gpu_run,     tl_indexer_gpu_read,   tl_indexer_gpu_time,
                                                   tl_indexer_gpu_acc_bits, tl_indexer_gpu_close};
TL_GPU_EXPORT(const tl_indexer_gpu_api, tl_indexer_gpu) = &indexer_gpu_api;
}
#endif
