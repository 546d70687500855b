/* kernels/decode_paged.hip: the paged GQA decode shard kernel (contract/decode.h, kind paged; the
 * launcher: kernels/decode.hip).
 *
 * One work-group of 4 waves per (request, KV head, shard); it serves the gqa <= 16 query heads of
 * that KV head. Wave w takes the shard's pages w, w + 4, ... in units of one page (bf16) or two
 * (fp8): 8 KB of K and V either way. Every byte of K and V is read once and used in the registers
 * it lands in (no shared tile that several waves read), and the wave runs one online-softmax step
 * in float32 per unit with the matrix cores; the 4 waves' (max, sum, O) are combined through shared
 * memory at the end and the group writes o and lse (decode_launch.h).
 *
 * The trick that lets a lane's 16-byte loads be matrix fragments as they are: a dot product does
 * not care in which order its dims are summed, so the dims a lane's load brings are declared to be
 * the dims its fragment wants, and Q (loaded once) is laid out in the same permuted order. Values
 * need pairs of keys in one register: two rows' words are merged with byte permutes.
 *
 *   sm_90  (warps of 32; lane = (g, t), g = lane / 4, t = lane % 4) heads as M, mma.sync m16n8k16:
 *          S[16 heads][16 keys] = Q K^T as 2 n-tiles of 8 keys x 8 k-steps (16 mma); lane (g, t)
 *          reads K rows g and 8 + g, chunks t, t + 4, t + 8, t + 12 (bf16; fp8: two 16-code chunks).
 *          The S accumulators are P's A fragments as they are (FlashAttention-2's register reuse).
 *          O[16 heads][128] += P V as 16 n-tiles of 8 dims; lane (g, t) reads V rows 2t, 2t + 1,
 *          2t + 8, 2t + 9, chunk g (and g + 8 for bf16). The pieces come through a per-warp ring of
 *          3 stages in shared memory (2 units in flight ahead of the one computed: 8 warps x 16 KB
 *          per SM against HBM's ~4600-cycle loaded latency), by one of two copy paths:
 *          sm_90a (TL_GPU_TENSOR_MAPS, a 9.x device; both formats): one tensor copy
 *            (cp.async.bulk.tensor from the pools' tensor maps, a __grid_constant__ parameter) a
 *            page's K or V rows of the KV head, 4 KB (bf16) or 2 KB (fp8), issued by lane 0 on the
 *            stage's mbarrier, landing with the 128-byte swizzle; the fragments' keys are permuted
 *            (pg_pi) so that the swizzled reads are conflict-free; fp8 scales by 4-byte cp.async;
 *          otherwise:
 *          bf16: each 256-byte row by one bulk copy (cp.async.bulk: a page is one instruction of
 *            the warp, lane r < 16 copying K row r and lane 16 + r V row r) that completes on the
 *            stage's mbarrier; the rows land at offsets that keep the fragment reads free of bank
 *            conflicts (pg_krow, pg_vrow); below sm_90 (no bulk copies, no mbarriers) the same
 *            layout by 16-byte cp.async, 16 a lane (PG_BULK_COPIES 0);
 *          fp8: 16-byte cp.async copies (LDGSTS) of whole 128-byte lines (K: 4 rows of 32 lanes x
 *            16 bytes; V: 4 rows' 128-byte spans), each piece landing where the lane that reads it
 *            looks (piece-major, lane-contiguous: conflict-free).
 *          Cost: a bulk copy moves one row (rows of a page are 4 KB apart in the pool); the H200
 *          completes about 16 G of them a second, so fp8's 128-byte rows (twice the copies a
 *          byte) stream faster through 16-byte cp.async; bf16's 256-byte rows through bulk copies.
 *          A tensor copy moves 16 rows: 16 (bf16) or 32 (fp8) times fewer copies a byte.
 *   gfx942 / gfx950 (waves of 64; lane = (n, q), n = lane % 16, q = lane / 16) keys as M:
 *          S^T[16 keys][16 heads] = K Q^T, 8 v_mfma_f32_16x16x16_bf16 (gfx950 runs the same
 *          CDNA3 instruction: this kernel is bound by HBM, not by the matrix rate); the S^T
 *          accumulators are the P^T B fragments of O^T[128 dims][16 heads] += V^T P^T. Direct
 *          loads (not tuned: never run here). fp8 codes go through v_cvt_pk_f32_fp8 (gfx942 reads
 *          them as FNUZ, i.e. halved except 0x80, rewritten to 0; the factor 2 is in the scales).
 * FP8: codes decoded exactly to bf16 (sm_90: the 2^-120-scaled bit move of numerics/codes.h and one
 * packed FMA per pair); the key scale multiplies the score, the value scale multiplies p.
 * P (x value scale) enters P V as bf16 hi + bf16 lo (two MMAs): ~2^-17 relative, where one bf16
 * rounding (2^-9) would be the largest error of the whole kernel.
 * Masking: a key at or past the shard's end scores -inf (its V row must then hold zeros so that
 * p = 0 meets 0: tensor and bulk copies bring or skip such rows and the V rows are zeroed in shared
 * memory after the wait; cp.async zero-fills them, source size 0); a running max of -inf is replaced
 * by 0 in the exponent (no -inf - -inf); a shard with no key (lo == hi, also at a row's unaligned
 * end) runs no page: o = 0, lse = -inf.
 * Cost per page and wave: sm_90a two tensor copies (K, V) by lane 0; otherwise one bulk copy a lane
 * (fp8: 8 cp.async of 16 bytes; below sm_90 bf16 16); 16 shared loads of 16 bytes, AMD 8 loads of
 * 16 bytes a lane; 48 mma (AMD 24 MFMA); 16 exp2; fp8 ~9 integer ops per 4 codes. Occupancy on
 * sm_90: 2 groups (8 warps, 2 x 100-106 KB of rings) per SM, by registers (<= 255 a thread) and by
 * shared memory (the launcher asks for the largest carveout, 228 KB); sm_89 allows 99 KB a block,
 * less than one ring of this kernel: the launcher refuses it with a one-line error. The model
 * charges both kinds the HBM rate.
 */
#include "decode_launch.h"
#include "mma.h"

#define PG_WAVES 4
#define PG_D TL_DECODE_PAGED_DIM
/* sm_90: each warp's ring of stages, one unit a stage: bf16, its page's K and V rows as the bulk
 * copies put them (16 K rows of 256 bytes, 16 V rows, 256 bytes of padding); fp8, its 2 pages' 16
 * pieces a lane (16 x 32 x 16 bytes) and their 32 scales; then one mbarrier a stage and warp */
#define PG_STAGES 3
#define PG_PAGE_BYTES(RB) (32 * (RB) + 256)
#define PG_STAGE_BYTES (2 * PG_PAGE_BYTES(128) + 2 * 32 * 4)
#define PG_RING_BYTES (PG_WAVES * PG_STAGES * PG_STAGE_BYTES)
/* sm_90a tensor copies: a stage holds its unit's K and V boxes as the copies put them (page u's K
 * at 2 u 16 RB, its V 16 RB further; 8 KB a unit), rows swizzled in 128-byte segments, the ring
 * 1024-byte aligned; after the ring, 256 bytes of fp8 scales a stage, then the barriers */
#define PG_TSTAGE_BYTES 8192
#define PG_TRING_BYTES (PG_WAVES * PG_STAGES * PG_TSTAGE_BYTES)
#define PG_TSCL_BYTES 256
#define PG_PAGE TL_DECODE_PAGE

#if defined(TL_GPU_AMD)
#define pg_exp2 __builtin_exp2f
#define pg_log2 __builtin_log2f
#else
#define pg_exp2 exp2f
#define pg_log2 log2f
#endif

/* The group's epilogue: the waves' (m, l) per head are in sm_m / sm_l, each wave has written its O
 * times exp2(m_w - M) / L into sm_o[w]; the group sums them and writes o and lse. */
struct PgShared {
    float m[PG_WAVES][16], l[PG_WAVES][16];
    float o[PG_WAVES][16][PG_D];
};

/* For head row `row`: the merged (M with -inf as 0, L) of the group's waves. */
static __device__ __forceinline__ void pg_group_stats(const PgShared &sm, int row, float &mu, float &lsum)
{
    float mx = -__builtin_inff();
    for (int w = 0; w < PG_WAVES; w++) mx = tl_fmaxf(mx, sm.m[w][row]);
    mu = mx == -__builtin_inff() ? 0.0f : mx;
    lsum = 0.0f;
    for (int w = 0; w < PG_WAVES; w++) lsum += sm.l[w][row] * pg_exp2(sm.m[w][row] - mu);
}
/* The factor wave w's O takes: exp2(m_w - M) / L, 0 for a head with no counted key. */
static __device__ __forceinline__ float pg_wave_factor(const PgShared &sm, int w, int row)
{
    float mu, lsum;
    pg_group_stats(sm, row, mu, lsum);
    return lsum > 0.0f ? pg_exp2(sm.m[w][row] - mu) / lsum : 0.0f;
}
static __device__ __forceinline__ void pg_group_write(const PgShared &sm, const DecPagedArgs &a, long b, int h, int s)
{
    const int H = a.kv_heads * a.gqa, tid = (int)tl_thread_x(), nthreads = PG_WAVES * TL_WAVE;
    const size_t base = (size_t)b * H + (size_t)h * a.gqa; /* row-head of the group's first head */
    for (int i = tid; i < a.gqa * PG_D; i += nthreads) {
        const int row = i / PG_D, d = i % PG_D;
        float v = 0.0f;
        for (int w = 0; w < PG_WAVES; w++) v += sm.o[w][row][d];
        a.o[((base + row) * a.shards + s) * PG_D + d] = v;
    }
    for (int row = tid; row < a.gqa; row += nthreads) {
        float mu, lsum;
        pg_group_stats(sm, row, mu, lsum);
        a.lse[(base + row) * a.shards + s] = lsum > 0.0f ? (mu + pg_log2(lsum)) * 0.69314718055994531f : -__builtin_inff();
    }
}

/* The sm_90a kernel's tensor maps of the K and V pools (gpu.h's tl_tmap, copied from the
 * CUtensorMap that dec_paged_prepare encodes): one __grid_constant__ parameter, which the tensor
 * copies read in place. Declared in every build (the sm_90 body takes it; only dec_paged_tma_kernel,
 * under TL_GPU_TENSOR_MAPS, passes one). */
struct PgMaps {
    tl_tmap k, v;
};
static_assert(sizeof(tl_tmap) == 128 && offsetof(PgMaps, v) == 128, "PgMaps: two 128-byte maps");

/* =============================================================================================
 * sm_90: mma.sync, heads as M
 * =========================================================================================== */
#if defined(TL_MMA_TARGET_SM80)
static __device__ __forceinline__ uint32_t pg_pack_bf16(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
/* (a, b) as a bf16 pair hi plus a bf16 pair lo = the rounding error of hi: hi + lo holds a and b to
 * ~2^-17 relative (P enters P V with two MMAs instead of one bf16 rounding). */
static __device__ __forceinline__ void pg_split2(float a, float b, uint32_t &hi, uint32_t &lo)
{
    hi = pg_pack_bf16(a, b);
    lo = pg_pack_bf16(a - tl_code_bits_f32(hi << 16), b - tl_code_bits_f32(hi & 0xFFFF0000u));
}
static __device__ __forceinline__ uint32_t pg_unscale(uint32_t x)
{
    uint32_t y;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;"
        : "=r"(y)
        : "r"(x), "r"(tl_code_bf16x2_splat(TL_CODE_E4M3_BF16_UNSCALE)), "r"(TL_CODE_BF16X2_MINUS0));
    return y;
}
/* Four E4M3 codes b0..b3 (low byte first) as two exact bf16 pairs: lo = (b0, b2), hi = (b1, b3). */
static __device__ __forceinline__ void pg_e4m3x4(uint32_t w, uint32_t &lo, uint32_t &hi)
{
    lo = pg_unscale(((w << 4) & 0x07F007F0u) | ((w << 8) & 0x80008000u));
    hi = pg_unscale(((w >> 4) & 0x07F007F0u) | (w & 0x80008000u));
}
static __device__ __forceinline__ uint32_t pg_word(const uint4 &x, int i)
{
    return i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w;
}
/* The warp's stage barriers are gpu.h's mbarriers (tl_mbar_*), one arrival a phase (lane 0's, with
 * the bytes to expect). Bulk copies and mbarriers need sm_90; an sm_80-89 build brings bf16 rows by
 * cp.async instead. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define PG_BULK_COPIES 0
#else
#define PG_BULK_COPIES 1
#endif
/* a bulk copy of `bytes` (a multiple of 16; both ends 16-byte aligned) that completes on bar */
static __device__ __forceinline__ void pg_bulk(void *dst, const void *src, unsigned bytes, uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(tl_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(tl_smem_addr(bar))
                 : "memory");
}
/* Where row r of a page's K and V lands in the stage (RB bytes a row): K rows even then odd, the
 * odd ones 64 bytes further on the banks, so that the two rows a quarter-warp reads (g, g + 1,
 * chunks t + 4i) hit 8 distinct 16-byte banks; V rows each shifted by 32 bytes a row pair, so that
 * the four rows a quarter-warp reads (2t + d, chunk g) do. */
template <int RB>
static __device__ __forceinline__ int pg_krow(int r)
{
    return (r & 1) * (8 * RB + 64) + (r >> 1) * RB;
}
template <int RB>
static __device__ __forceinline__ int pg_vrow(int r)
{
    return 16 * RB + 64 + r * RB + 32 * ((r >> 1) & 3) + 96 * (r >> 3);
}
/* Tensor copies (sm_90a: gpu.h's tl_tma_load_3d/4d from a __grid_constant__ map): the box of a
 * page and KV head is 16 rows of RB bytes, stored with the 128-byte swizzle (16-byte chunk c of
 * 128-byte segment q at chunk c ^ (q % 8)); pg_sw gives where chunk c of row r lands. */
template <int RB>
static __device__ __forceinline__ int pg_sw(int r, int c)
{
    const int q = RB == 256 ? 2 * r + (c >> 3) : r;
    return q * 128 + (((c & 7) ^ (q & 7)) << 4);
}
/* With tensor copies the rows of a page land in key order, so the fragments' keys are permuted
 * instead: column n of an n-tile of S (and k-index n of P V's 8-key halves) is key 8 nt + pg_pi(n),
 * pi = (0 6 2 4 5 3 7 1). The softmax does not care in which order the keys come, and with it the
 * K reads (rows pi(g), pi(g + 1) of a quarter-warp) and the V reads (rows pi(2t + e), t = 0..3) hit
 * 8 distinct 16-byte banks under the swizzle, for both row sizes. */
static __host__ __device__ constexpr int pg_pi(int n) { return (int)((0x17354260u >> (4 * n)) & 7u); }
/* The promise above, checked at compile time: every 8 lanes that share a shared-memory pass (a
 * quarter-warp: g = 2 p, 2 p + 1; t = 0..3) read 8 distinct 16-byte banks, K (row 8 nt + pi(g),
 * chunk t + 4 i) and V (row pi(2 t + e) + 8 h, chunk g, bf16 also g + 8). */
template <int RB>
static constexpr int pg_sw_bank(int r, int c)
{
    return (((RB == 256 ? 2 * r + (c >> 3) : r) * 8 + (((c & 7) ^ ((RB == 256 ? 2 * r + (c >> 3) : r) & 7)))) & 7);
}
template <int RB>
static constexpr bool pg_pi_conflict_free()
{
    for (int pass = 0; pass < 4; pass++) {
        for (int nt = 0; nt < 2; nt++)
            for (int i = 0; i < RB / 64; i++) {
                int seen = 0;
                for (int l = 8 * pass; l < 8 * pass + 8; l++) seen |= 1 << pg_sw_bank<RB>(8 * nt + pg_pi(l / 4), l % 4 + 4 * i);
                if (seen != 0xFF) return false;
            }
        for (int e = 0; e < 2; e++)
            for (int h = 0; h < 2; h++)
                for (int half = 0; half < RB / 128; half++) {
                    int seen = 0;
                    for (int l = 8 * pass; l < 8 * pass + 8; l++)
                        seen |= 1 << pg_sw_bank<RB>(pg_pi(2 * (l % 4) + e) + 8 * h, l / 4 + 8 * half);
                    if (seen != 0xFF) return false;
                }
    }
    return true;
}
static_assert(pg_pi_conflict_free<128>() && pg_pi_conflict_free<256>(), "pg_pi: the swizzled reads must be conflict-free");

/* Each warp streams its units through a ring of PG_STAGES stages in shared memory, one unit (8 KB
 * of K and V codes, fp8: plus the 2 pages' 32 scales) a stage, PG_STAGES - 1 units in flight ahead
 * of the one it computes: 8 warps x 16 KB per SM, more than HBM's latency x bandwidth share
 * (~4600 cycles x 17 B/cycle). bf16: the rows come by bulk copies on the stage's mbarrier (lane 0
 * announces the unit's bytes first). fp8: the pieces and the scales come by cp.async (a commit
 * group a unit); V pieces are copied by the lane that reads them, K pieces and the scales by others
 * (whole rows a copy). Each iteration waits for its unit, then a __syncwarp orders the warp's
 * copies (and any zeroed rows) before the reads, and every lane's reads of a stage before it is
 * refilled. */

template <bool FP8, bool TMA>
static __device__ __forceinline__ void pg_body(const DecPagedArgs &a, const PgMaps *maps)
{
    TL_SHARED_DYNAMIC(16, uint8_t, pg_smem);
    tl_grid_dep_launch(); /* the merge may be scheduled; it waits for this grid to finish */
    const int lane = tl_lane(), w = tl_wave_id(), g = lane >> 2, t = lane & 3;
    const long wg = (long)tl_block_x();
    const int s = (int)(wg % a.shards), h = (int)((wg / a.shards) % a.kv_heads);
    const long b = wg / a.shards / a.kv_heads;
    const int H = a.kv_heads * a.gqa;
    long lo, hi;
    tl_decode_shard_range(a.lens[b], a.shards, PG_PAGE, s, &lo, &hi);

    /* Q A-fragments, k-step ks: a0 = Q[g][dA, dA'], a2 = Q[g][dB, dB'], a1 / a3 the same for row
     * g + 8 (rows >= gqa: 0). bf16 K: dims 8c + 4j + {0,1} and {2,3} of chunk c = t + 4i (ks = 2i + j);
     * fp8 K: dims 16c + 4m + {0,2} and {1,3} of chunk c = t + 4i (ks = 4i + m), as pg_e4m3x4 pairs them. */
    uint32_t qa[8][4];
    {
        const uint16_t *q = a.q + ((size_t)b * H + (size_t)h * a.gqa) * PG_D;
#pragma unroll
        for (int ks = 0; ks < 8; ks++) {
            int d0, d1, d2, d3;
            if (FP8) {
                const int c = t + 4 * (ks >> 2), m = ks & 3;
                d0 = 16 * c + 4 * m, d1 = d0 + 2, d2 = d0 + 1, d3 = d0 + 3;
            } else {
                const int c = t + 4 * (ks >> 1), j = ks & 1;
                d0 = 8 * c + 4 * j, d1 = d0 + 1, d2 = d0 + 2, d3 = d0 + 3;
            }
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int row = g + 8 * half;
                const uint16_t *qr = q + (size_t)row * PG_D;
                const bool live = row < a.gqa;
                qa[ks][half] = live ? (uint32_t)qr[d0] | (uint32_t)qr[d1] << 16 : 0u;
                qa[ks][2 + half] = live ? (uint32_t)qr[d2] | (uint32_t)qr[d3] << 16 : 0u;
            }
        }
    }

    float m0 = -__builtin_inff(), m1 = -__builtin_inff(), l0 = 0.0f, l1 = 0.0f; /* rows g, g + 8 */
    tl_frag_c o[16];
#pragma unroll
    for (int n = 0; n < 16; n++) tl_frag_zero(&o[n]);

    /* A wave's pages come in units of PPI pages (fp8: 2, so that a unit is 8 KB like a bf16 page):
     * unit it holds pages first + it * 4 PPI + u; one online-softmax step per unit. Block-table
     * entries come 32 units at a time (lane j holds unit j's, handed out by shuffles), the next 32
     * loaded one chunk ahead. */
    constexpr int PPI = FP8 ? 2 : 1;
    constexpr bool ROWL = !FP8 && !TMA;          /* bf16's row layout (pg_krow, pg_vrow) */
    constexpr bool BULK = ROWL && PG_BULK_COPIES; /* its rows by bulk copies (see above) */
    constexpr int KL = FP8 ? 4 : 8; /* 16-byte K pieces of a page a lane reads */
    constexpr int VL = FP8 ? 4 : 8;
    constexpr int PP = KL + VL;     /* pieces a page (cp.async layout) */
    constexpr int SCL = 16 * 32 * 16; /* the fp8 scales' offset in a stage */
    const long p_begin = lo / PG_PAGE, p_end = lo < hi ? (hi + PG_PAGE - 1) / PG_PAGE : p_begin;
    const long ustride = PG_WAVES * PPI, first = p_begin + (long)w * PPI;
    const long nunits = first < p_end ? (p_end - first + ustride - 1) / ustride : 0;
    const int32_t *table = a.table + (size_t)b * a.max_blocks;
    constexpr int RB = FP8 ? 128 : 256, PAGEB = PG_PAGE_BYTES(RB);
    constexpr int STB = TMA ? PG_TSTAGE_BYTES : PG_STAGE_BYTES;
    uint8_t *tbase = pg_smem + ((1024u - (tl_smem_addr(pg_smem) & 1023u)) & 1023u); /* TMA: the swizzle's alignment */
    uint8_t *ring = TMA ? tbase + (size_t)w * PG_STAGES * PG_TSTAGE_BYTES : pg_smem + (size_t)w * PG_STAGES * PG_STAGE_BYTES;
    uint8_t *tscl = tbase + PG_TRING_BYTES + (size_t)w * PG_STAGES * PG_TSCL_BYTES;
    uint64_t *bars = TMA ? (uint64_t *)(tbase + PG_TRING_BYTES + PG_WAVES * PG_STAGES * PG_TSCL_BYTES) + w * PG_STAGES
                         : (uint64_t *)(pg_smem + PG_RING_BYTES) + w * PG_STAGES;
    const tl_tmap *kmap = TMA ? &maps->k : nullptr, *vmap = TMA ? &maps->v : nullptr; /* maps: NULL without TMA */
    if constexpr (BULK || TMA) {
        if (lane == 0) {
#pragma unroll
            for (int j = 0; j < PG_STAGES; j++) tl_mbar_init(bars + j, 1);
            tl_mbar_init_fence();
        }
    }
    __syncwarp();
    int32_t tb[PPI], tbn[PPI];
    auto table_chunk = [&](long chunk, int32_t (&dst)[PPI]) {
#pragma unroll
        for (int u = 0; u < PPI; u++) {
            const long p = first + (chunk * 32 + lane) * ustride + u;
            dst[u] = p < p_end ? table[p] : 0;
        }
    };
    /* unit j's copies into stage j % PG_STAGES (units issued in order j = 0, 1, 2, ...) */
    auto issue = [&](long j) {
        if (j < nunits) {
            if ((j & 31) == 0 && j > 0) {
#pragma unroll
                for (int u = 0; u < PPI; u++) tb[u] = tbn[u];
                table_chunk((j >> 5) + 1, tbn);
            }
            uint8_t *st = ring + (size_t)(j % PG_STAGES) * STB;
            uint8_t *scs = TMA ? tscl + (size_t)(j % PG_STAGES) * PG_TSCL_BYTES : st + SCL;
            if constexpr (TMA) {
                /* lane 0: the unit's boxes, K and V of each page before the shard's end (the rows
                 * of its last page past the end come too: masked in the scores, V zeroed when used) */
                uint64_t *bar = bars + j % PG_STAGES;
                int32_t blk[PPI];
#pragma unroll
                for (int u = 0; u < PPI; u++) blk[u] = tl_shfl(tb[u], (int)(j & 31));
                if (lane == 0) {
                    unsigned n = 0;
#pragma unroll
                    for (int u = 0; u < PPI; u++) n += first + j * ustride + u < p_end ? 1u : 0u;
                    tl_mbar_expect_tx(bar, n * 2u * 16u * RB);
#pragma unroll
                    for (int u = 0; u < PPI; u++) {
                        if (first + j * ustride + u >= p_end) continue;
                        const int row = blk[u] * PG_PAGE;
                        uint8_t *kd = st + u * 2 * 16 * RB;
                        if (FP8) {
                            tl_tma_load_3d(kd, kmap, 0, h, row, bar);
                            tl_tma_load_3d(kd + 16 * RB, vmap, 0, h, row, bar);
                        } else {
                            tl_tma_load_4d(kd, kmap, 0, 0, h, row, bar);
                            tl_tma_load_4d(kd + 16 * RB, vmap, 0, 0, h, row, bar);
                        }
                    }
                }
            }
            if constexpr (BULK) {
                uint64_t *bar = bars + j % PG_STAGES;
                /* lane 0 announces the unit's bytes (its live rows', K and V) before any copy lands */
                unsigned bytes = 0;
#pragma unroll
                for (int u = 0; u < PPI; u++) {
                    const long live = hi - (first + j * ustride + u) * PG_PAGE;
                    bytes += 2u * RB * (unsigned)(live < 0 ? 0 : live > PG_PAGE ? PG_PAGE : live);
                }
                if (lane == 0) tl_mbar_expect_tx(bar, bytes);
                __syncwarp();
            }
#pragma unroll
            for (int u = 0; u < PPI; u++) {
                const long p = first + j * ustride + u, pos0 = p * PG_PAGE;
                const size_t slot0 = (size_t)tl_shfl(tb[u], (int)(j & 31)) * PG_PAGE;
                const int key = lane & 15;
                if constexpr (TMA) {
                    /* lane 0 issued the unit's boxes above */
                } else if constexpr (BULK) {
                    /* lane < 16: K row `lane`; lane >= 16: V row lane - 16, one bulk copy each; rows
                     * past the shard's end are not copied (their V rows are zeroed when the unit is
                     * used) */
                    if (pos0 + key < hi) {
                        const size_t e = ((slot0 + key) * a.kv_heads + h) * PG_D;
                        const void *src = lane < 16 ? (const void *)((const uint16_t *)a.k + e)
                                                    : (const void *)((const uint16_t *)a.v + e);
                        pg_bulk(st + u * PAGEB + (lane < 16 ? pg_krow<RB>(key) : pg_vrow<RB>(key)), src, RB,
                                bars + j % PG_STAGES);
                    }
                } else if constexpr (ROWL) {
                    /* sm_80-89: the bulk path's layout by 16-byte cp.async, the page's 16 K and 16 V
                     * rows of 16 chunks, 16 chunks a lane; rows past the shard's end land as zeros */
#pragma unroll
                    for (int x = 0; x < 16; x++) {
                        const int c = 32 * x + lane, row = c >> 4, ch = c & 15, kk = row & 15;
                        const size_t e = ((slot0 + kk) * a.kv_heads + h) * PG_D + 8 * ch;
                        const uint16_t *src = (row < 16 ? (const uint16_t *)a.k : (const uint16_t *)a.v) + e;
                        tl_cp_async16(st + u * PAGEB + (row < 16 ? pg_krow<RB>(kk) : pg_vrow<RB>(kk)) + 16 * ch, src,
                                pos0 + kk < hi ? 16 : 0);
                    }
                } else {
#pragma unroll
                    for (int x = 0; x < KL; x++) {
                        /* K piece x' = C/4 nt + i of lane (g, t) holds key 8 nt + g, chunk t + 4i (16
                         * codes). The copies take whole rows instead: copy x brings R = 32 / C rows of C
                         * chunks (a row of 128 bytes: whole lines, one L2 request each), and each chunk
                         * lands where its reader looks for it. */
                        constexpr int C = 8, R = 32 / C;
                        const int nt = x / (8 / R), kk = 8 * nt + R * (x % (8 / R)) + lane / C, ch = lane % C;
                        const size_t e = ((slot0 + kk) * a.kv_heads + h) * PG_D;
                        tl_cp_async16(st + (u * PP + (C / 4) * nt + (ch >> 2)) * 512 + (4 * (kk & 7) + (ch & 3)) * 16,
                                (const uint8_t *)a.k + e + 16 * ch, pos0 + kk < hi ? 16 : 0);
                    }
#pragma unroll
                    for (int x = 0; x < VL; x++) {
                        /* keys 2t, 2t + 1, 2t + 8, 2t + 9 (x & 3), chunk g: the copy's 8 lanes g bring
                         * 128 contiguous bytes of a row (whole lines) as they are */
                        const int kq = x & 3, kk = 2 * t + (kq & 1) + 8 * (kq >> 1);
                        const size_t e = ((slot0 + kk) * a.kv_heads + h) * PG_D;
                        tl_cp_async16(st + (u * PP + KL + x) * 512 + lane * 16, (const uint8_t *)a.v + e + 16 * g,
                                pos0 + kk < hi ? 16 : 0);
                    }
                }
                if (FP8) { /* lane < 16: k_scale of key lane; lane >= 16: v_scale of key lane - 16 */
                    const float *src = (lane < 16 ? a.ks : a.vs) + (slot0 + key) * a.kv_heads + h;
                    tl_cp_async4(scs + u * 128 + lane * 4, src, pos0 + key < hi ? 4 : 0);
                }
            }
        }
        tl_cp_async_commit(); /* an empty group past the last unit keeps the count */
    };
    if (nunits > 0) {
        table_chunk(0, tb);
        table_chunk(1, tbn);
    }
#pragma unroll
    for (int j = 0; j < PG_STAGES - 1; j++) issue(j);

    for (long it = 0; it < nunits; it++) {
        tl_cp_async_wait<PG_STAGES - 2>(); /* this lane's cp.async copies of unit it have landed */
        uint8_t *st = ring + (size_t)(it % PG_STAGES) * STB;
        if constexpr (TMA) {
            tl_mbar_wait(bars + it % PG_STAGES, (unsigned)((it / PG_STAGES) & 1)); /* the unit's boxes */
            /* V rows at or past the shard's end (a page's tail, a page not copied) as zeros */
            bool zeroed = false;
#pragma unroll
            for (int u = 0; u < PPI; u++) {
                const long live = hi - (first + it * ustride + u) * PG_PAGE;
                if (live < PG_PAGE) {
                    const int from = live < 0 ? 0 : (int)live;
                    uint8_t *vz = st + u * 2 * 16 * RB + 16 * RB + from * RB;
                    for (int c = lane; c < (PG_PAGE - from) * (RB / 16); c += 32) *(uint4 *)(vz + 16 * c) = make_uint4(0, 0, 0, 0);
                    zeroed = true;
                }
            }
            if (zeroed) tl_fence_proxy_async(); /* before a later tensor copy */
        }
        if constexpr (BULK) {
            tl_mbar_wait(bars + it % PG_STAGES, (unsigned)((it / PG_STAGES) & 1)); /* the unit's bulk copies */
            /* a shard's last page: V rows past its end as zeros (p = 0 there) */
            const long live = hi - (first + it * ustride) * PG_PAGE;
            if (live < PG_PAGE) {
                const int from = live < 0 ? 0 : (int)live;
                for (int c = lane; c < (PG_PAGE - from) * (RB / 16); c += 32)
                    *(uint4 *)(st + pg_vrow<RB>(from + c / (RB / 16)) + 16 * (c % (RB / 16))) = make_uint4(0, 0, 0, 0);
                tl_fence_proxy_async(); /* before a later bulk copy */
            }
        }
        __syncwarp(); /* every lane's copies and zeros; every lane is done with unit it - 1 */
        issue(it + PG_STAGES - 1);
        const float *scl = (const float *)(TMA ? tscl + (size_t)(it % PG_STAGES) * PG_TSCL_BYTES : st + SCL);
        /* ---- QK of the unit's pages ---- */
        tl_frag_c sc[PPI][2];
#pragma unroll
        for (int u = 0; u < PPI; u++) {
            uint4 kr[KL];
#pragma unroll
            for (int x = 0; x < KL; x++) {
                /* bf16: x = 4 nt + i, fp8: x = 2 nt + i; key 8 nt + g, chunk t + 4i */
                const int nt = FP8 ? x >> 1 : x >> 2, i = FP8 ? x & 1 : x & 3;
                kr[x] = TMA    ? *(const uint4 *)(st + u * 2 * 16 * RB + pg_sw<RB>(8 * nt + pg_pi(g), t + 4 * i))
                        : ROWL ? *(const uint4 *)(st + pg_krow<RB>(8 * nt + g) + 16 * (t + 4 * i))
                               : *(const uint4 *)(st + (u * PP + x) * 512 + lane * 16);
            }
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                tl_frag_zero(&sc[u][nt]);
#pragma unroll
                for (int ks = 0; ks < 8; ks++) {
                    tl_frag_b_bf16 kb;
                    tl_frag_a_bf16 qf;
                    qf.r[0] = qa[ks][0], qf.r[1] = qa[ks][1], qf.r[2] = qa[ks][2], qf.r[3] = qa[ks][3];
                    if (FP8) {
                        pg_e4m3x4(pg_word(kr[nt * 2 + (ks >> 2)], ks & 3), kb.r[0], kb.r[1]);
                    } else {
                        const uint4 &x = kr[nt * 4 + (ks >> 1)];
                        kb.r[0] = (ks & 1) ? x.z : x.x;
                        kb.r[1] = (ks & 1) ? x.w : x.y;
                    }
                    tl_mma_bf16(&sc[u][nt], &qf, &kb);
                }
            }
        }
        /* ---- one online-softmax step over the unit's 16 PPI keys ----
         * scores in base 2; sc[u][nt].v[e]: row g (e < 2) or g + 8, key 8 nt + 2t + (e & 1) of page u */
        float x[PPI][2][4];
        float mx0 = -__builtin_inff(), mx1 = -__builtin_inff();
#pragma unroll
        for (int u = 0; u < PPI; u++) {
            const long pos0 = (first + it * ustride + u) * PG_PAGE;
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = 8 * nt + (TMA ? pg_pi(2 * t + (e & 1)) : 2 * t + (e & 1));
                    const float ksc = FP8 ? scl[u * 32 + key] : 1.0f;
                    x[u][nt][e] = pos0 + key < hi ? sc[u][nt].v[e] * ksc * a.scale_log2 : -__builtin_inff();
                }
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                mx0 = tl_fmaxf(mx0, tl_fmaxf(x[u][nt][0], x[u][nt][1]));
                mx1 = tl_fmaxf(mx1, tl_fmaxf(x[u][nt][2], x[u][nt][3]));
            }
        }
        mx0 = tl_fmaxf(mx0, tl_shfl_xor(mx0, 1));
        mx1 = tl_fmaxf(mx1, tl_shfl_xor(mx1, 1));
        mx0 = tl_fmaxf(mx0, tl_shfl_xor(mx0, 2));
        mx1 = tl_fmaxf(mx1, tl_shfl_xor(mx1, 2));
        const float mn0 = tl_fmaxf(m0, mx0), mn1 = tl_fmaxf(m1, mx1);
        const float mu0 = mn0 == -__builtin_inff() ? 0.0f : mn0, mu1 = mn1 == -__builtin_inff() ? 0.0f : mn1;
        const float al0 = pg_exp2(m0 - mu0), al1 = pg_exp2(m1 - mu1);
        m0 = mn0, m1 = mn1;
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int u = 0; u < PPI; u++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                x[u][nt][0] = pg_exp2(x[u][nt][0] - mu0), x[u][nt][1] = pg_exp2(x[u][nt][1] - mu0);
                x[u][nt][2] = pg_exp2(x[u][nt][2] - mu1), x[u][nt][3] = pg_exp2(x[u][nt][3] - mu1);
                s0 += x[u][nt][0] + x[u][nt][1];
                s1 += x[u][nt][2] + x[u][nt][3];
            }
        l0 = l0 * al0 + s0;
        l1 = l1 * al1 + s1;
#pragma unroll
        for (int n = 0; n < 16; n++) {
            o[n].v[0] *= al0, o[n].v[1] *= al0;
            o[n].v[2] *= al1, o[n].v[3] *= al1;
        }
        /* ---- P V per page: P (x v_scale) as bf16 hi + lo, two MMAs per n-tile ---- */
#pragma unroll
        for (int u = 0; u < PPI; u++) {
            tl_frag_a_bf16 ph, pl;
            {
                /* keys 2t, 2t + 1 (nt 0) and 2t + 8, 2t + 9 (nt 1) */
                float v0 = 1.0f, v1 = 1.0f, v2 = 1.0f, v3 = 1.0f;
                if (FP8) {
                    const int k0 = TMA ? pg_pi(2 * t) : 2 * t, k1 = TMA ? pg_pi(2 * t + 1) : 2 * t + 1;
                    v0 = scl[u * 32 + 16 + k0], v1 = scl[u * 32 + 16 + k1];
                    v2 = scl[u * 32 + 24 + k0], v3 = scl[u * 32 + 24 + k1];
                }
                pg_split2(x[u][0][0] * v0, x[u][0][1] * v1, ph.r[0], pl.r[0]);
                pg_split2(x[u][0][2] * v0, x[u][0][3] * v1, ph.r[1], pl.r[1]);
                pg_split2(x[u][1][0] * v2, x[u][1][1] * v3, ph.r[2], pl.r[2]);
                pg_split2(x[u][1][2] * v2, x[u][1][3] * v3, ph.r[3], pl.r[3]);
            }
            uint4 vr[VL];
#pragma unroll
            for (int xx = 0; xx < VL; xx++) {
                /* keys 2t, 2t + 1, 2t + 8, 2t + 9 (xx & 3); bf16 chunk g + 8 (xx >> 2), fp8 chunk g */
                const int kk = xx & 3;
                const int key = (TMA ? pg_pi(2 * t + (kk & 1)) : 2 * t + (kk & 1)) + 8 * (kk >> 1);
                vr[xx] = TMA    ? *(const uint4 *)(st + u * 2 * 16 * RB + 16 * RB + pg_sw<RB>(key, FP8 ? g : g + 8 * (xx >> 2)))
                         : ROWL ? *(const uint4 *)(st + pg_vrow<RB>(key) + 16 * (g + 8 * (xx >> 2)))
                                : *(const uint4 *)(st + (u * PP + KL + xx) * 512 + lane * 16);
            }
            /* O += P V: n-tile n, column = lane g's chunk; B rows (keys) 2t, 2t + 1 | 2t + 8, 2t + 9 */
#pragma unroll
            for (int n = 0; n < 16; n++) {
                tl_frag_b_bf16 vb;
                if (FP8) {
                    /* n = 4 m + e: dims 16 g + n; words m of keys (2t, 2t+1) and (2t+8, 2t+9) */
                    const int m = n >> 2, e = n & 3;
                    const uint32_t sel = e < 2 ? 0x5410u : 0x7632u;
                    uint32_t lo2, hi2;
                    pg_e4m3x4(__byte_perm(pg_word(vr[0], m), pg_word(vr[1], m), sel), lo2, hi2);
                    vb.r[0] = (e & 1) ? hi2 : lo2;
                    pg_e4m3x4(__byte_perm(pg_word(vr[2], m), pg_word(vr[3], m), sel), lo2, hi2);
                    vb.r[1] = (e & 1) ? hi2 : lo2;
                } else {
                    /* n = 8 p + j: dims 8 (g + 8p) + j */
                    const int p = n >> 3, j = n & 7;
                    const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
                    vb.r[0] = __byte_perm(pg_word(vr[4 * p + 0], j >> 1), pg_word(vr[4 * p + 1], j >> 1), sel);
                    vb.r[1] = __byte_perm(pg_word(vr[4 * p + 2], j >> 1), pg_word(vr[4 * p + 3], j >> 1), sel);
                }
                tl_mma_bf16(&o[n], &ph, &vb);
                tl_mma_bf16(&o[n], &pl, &vb);
            }
        }
    }
    tl_cp_async_wait<0>();

    /* ---- the group: the 4 warps' partial softmaxes into one (the ring's memory reused) ---- */
    tl_block_sync();
    PgShared &sm = *(PgShared *)pg_smem;
    l0 += tl_shfl_xor(l0, 1);
    l1 += tl_shfl_xor(l1, 1);
    l0 += tl_shfl_xor(l0, 2);
    l1 += tl_shfl_xor(l1, 2);
    if (t == 0) {
        sm.m[w][g] = m0, sm.m[w][g + 8] = m1;
        sm.l[w][g] = l0, sm.l[w][g + 8] = l1;
    }
    tl_block_sync();
    const float f0 = pg_wave_factor(sm, w, g), f1 = pg_wave_factor(sm, w, g + 8);
#pragma unroll
    for (int n = 0; n < 16; n++) {
        /* C columns 2t, 2t + 1 of n-tile n: bf16 dims 16t + 64p + j (+8), fp8 dims 32t + n (+16) */
        const int d0 = FP8 ? 32 * t + n : 16 * t + 64 * (n >> 3) + (n & 7), d1 = d0 + (FP8 ? 16 : 8);
        sm.o[w][g][d0] = o[n].v[0] * f0, sm.o[w][g][d1] = o[n].v[1] * f0;
        sm.o[w][g + 8][d0] = o[n].v[2] * f1, sm.o[w][g + 8][d1] = o[n].v[3] * f1;
    }
    tl_block_sync();
    pg_group_write(sm, a, b, h, s);
}

#elif defined(TL_MMA_TARGET_GFX942) || defined(TL_MMA_TARGET_GFX950)
typedef short pg_i16x4 __attribute__((ext_vector_type(4)));
typedef float pg_f32x4 __attribute__((ext_vector_type(4)));
typedef unsigned pg_u32x2 __attribute__((ext_vector_type(2)));
/* A 4 x bf16 fragment from two words (elements 0, 1 in x; 2, 3 in y). */
static __device__ __forceinline__ pg_i16x4 pg_frag(uint32_t x, uint32_t y)
{
    return __builtin_bit_cast(pg_i16x4, (pg_u32x2){x, y});
}

/* Eight fp8 codes (a uint2) as eight bf16 in code order (a uint4). gfx942's converter reads FNUZ:
 * every value comes out halved (0x80, FN's -0, is first made +0). */
static __device__ __forceinline__ uint32_t pg_bf16_pair(float lo, float hi)
{
    return (tl_code_f32_bits(lo) >> 16) | (tl_code_f32_bits(hi) & 0xFFFF0000u);
}
static __device__ __forceinline__ uint32_t pg_fnuz_fix(uint32_t x)
{
#if defined(TL_MMA_TARGET_GFX942)
    uint32_t r = x;
    for (int i = 0; i < 4; i++)
        if (((x >> (8 * i)) & 0xFFu) == 0x80u) r &= ~(0xFFu << (8 * i));
    return r;
#else
    return x;
#endif
}
static __device__ __forceinline__ uint4 pg_fp8x8_bf16(uint2 c)
{
    const uint32_t a = pg_fnuz_fix(c.x), b = pg_fnuz_fix(c.y);
    const auto a0 = __builtin_amdgcn_cvt_pk_f32_fp8((int)a, false), a1 = __builtin_amdgcn_cvt_pk_f32_fp8((int)a, true);
    const auto b0 = __builtin_amdgcn_cvt_pk_f32_fp8((int)b, false), b1 = __builtin_amdgcn_cvt_pk_f32_fp8((int)b, true);
    return make_uint4(pg_bf16_pair(a0[0], a0[1]), pg_bf16_pair(a1[0], a1[1]), pg_bf16_pair(b0[0], b0[1]),
                      pg_bf16_pair(b1[0], b1[1]));
}
#if defined(TL_MMA_TARGET_GFX942)
#define PG_FP8_UNSCALE 2.0f /* FNUZ halves every code */
#else
#define PG_FP8_UNSCALE 1.0f
#endif
/* 8 dims of row e of the pool as 8 bf16 (fp8: 8 codes decoded) */
template <bool FP8>
static __device__ __forceinline__ uint4 pg_row8(const void *pool, size_t e, bool live)
{
    if (!live) return make_uint4(0, 0, 0, 0);
    if (FP8) return pg_fp8x8_bf16(*(const uint2 *)((const uint8_t *)pool + e));
    return tl_load_once((const uint16_t *)pool + e);
}
static __device__ __forceinline__ uint32_t pg_word(const uint4 &x, int i)
{
    return i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w;
}

template <bool FP8>
static __device__ __forceinline__ void pg_body(const DecPagedArgs &a)
{
    TL_SHARED_ALIGNED(16, PgShared, sm, );
    const int lane = tl_lane(), w = tl_wave_id(), n16 = lane & 15, q4 = lane >> 4;
    const long wg = (long)tl_block_x();
    const int s = (int)(wg % a.shards), h = (int)((wg / a.shards) % a.kv_heads);
    const long b = wg / a.shards / a.kv_heads;
    const int H = a.kv_heads * a.gqa;
    long lo, hi;
    tl_decode_shard_range(a.lens[b], a.shards, PG_PAGE, s, &lo, &hi);

    /* Q^T B-fragments: k-step ks = 2i + j holds Q[head n16][8c + 4j + e], c = q4 + 4i, e = 0..3 */
    pg_i16x4 qb[8];
    {
        const uint16_t *qr = a.q + ((size_t)b * H + (size_t)h * a.gqa + n16) * PG_D;
        const bool live = n16 < a.gqa;
#pragma unroll
        for (int ks = 0; ks < 8; ks++) {
            const int d = 8 * (q4 + 4 * (ks >> 1)) + 4 * (ks & 1);
            const uint32_t *qw = (const uint32_t *)(qr + d);
            qb[ks] = live ? pg_frag(qw[0], qw[1]) : pg_frag(0, 0);
        }
    }
    float m = -__builtin_inff(), l = 0.0f; /* head n16 */
    pg_f32x4 o[8];
#pragma unroll
    for (int j = 0; j < 8; j++) o[j] = (pg_f32x4){0, 0, 0, 0};
    const long p_begin = lo / PG_PAGE, p_end = lo < hi ? (hi + PG_PAGE - 1) / PG_PAGE : p_begin;
    const int32_t *table = a.table + (size_t)b * a.max_blocks;
    const float kf = FP8 ? PG_FP8_UNSCALE : 1.0f;

    for (long p = p_begin + w; p < p_end; p += PG_WAVES) {
        const long blk = table[p], pos0 = p * PG_PAGE;
        const size_t slot0 = (size_t)blk * PG_PAGE;
        uint4 kr[4], vr[4];
        const bool klive = pos0 + n16 < hi;
#pragma unroll
        for (int i = 0; i < 4; i++)
            kr[i] = pg_row8<FP8>(a.k, ((slot0 + n16) * a.kv_heads + h) * PG_D + 8 * (q4 + 4 * i), klive);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int key = 4 * q4 + e;
            vr[e] = pg_row8<FP8>(a.v, ((slot0 + key) * a.kv_heads + h) * PG_D + 8 * n16, pos0 + key < hi);
        }
        float ksc[4], vsc[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int key = 4 * q4 + r;
            const bool live = pos0 + key < hi;
            ksc[r] = vsc[r] = 1.0f;
            if (FP8 && live) {
                const size_t e = (slot0 + key) * a.kv_heads + h;
                ksc[r] = a.ks[e] * kf, vsc[r] = a.vs[e] * kf;
            }
        }
        /* S^T = K Q^T */
        pg_f32x4 sc = {0, 0, 0, 0};
#pragma unroll
        for (int ks = 0; ks < 8; ks++) {
            const uint4 &x = kr[ks >> 1];
            const pg_i16x4 kf4 = (ks & 1) ? pg_frag(x.z, x.w) : pg_frag(x.x, x.y);
            sc = tl_mma_bf16_16x16x16(kf4, qb[ks], sc);
        }
        /* sc[r]: key 4 q4 + r, head n16 */
        float x[4];
#pragma unroll
        for (int r = 0; r < 4; r++) x[r] = pos0 + 4 * q4 + r < hi ? sc[r] * ksc[r] * a.scale_log2 : -__builtin_inff();
        float mx = tl_fmaxf(tl_fmaxf(x[0], x[1]), tl_fmaxf(x[2], x[3]));
        mx = tl_fmaxf(mx, tl_shfl_xor(mx, 16));
        mx = tl_fmaxf(mx, tl_shfl_xor(mx, 32));
        const float mn = tl_fmaxf(m, mx), mu = mn == -__builtin_inff() ? 0.0f : mn, al = pg_exp2(m - mu);
        m = mn;
        float pr[4], ps = 0.0f;
#pragma unroll
        for (int r = 0; r < 4; r++) pr[r] = pg_exp2(x[r] - mu), ps += pr[r];
        l = l * al + ps;
#pragma unroll
        for (int j = 0; j < 8; j++) o[j] *= al;
        /* P^T (x v_scale) as bf16 hi + lo: two MFMAs per m-tile */
        uint32_t ph[4], pl[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const float v = pr[r] * vsc[r];
            ph[r] = tl_code_bf16_from_f32(v);
            pl[r] = tl_code_bf16_from_f32(v - tl_code_bits_f32(ph[r] << 16));
        }
        const pg_i16x4 pb = pg_frag(ph[0] | ph[1] << 16, ph[2] | ph[3] << 16);
        const pg_i16x4 pbl = pg_frag(pl[0] | pl[1] << 16, pl[2] | pl[3] << 16);
        /* O^T += V^T P^T: m-tile j, row n16 = dim 8 n16 + j, k = keys 4 q4 + e */
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint32_t sel = (j & 1) ? 0x07060302u : 0x05040100u;
            const pg_i16x4 va = pg_frag(__builtin_amdgcn_perm(pg_word(vr[1], j >> 1), pg_word(vr[0], j >> 1), sel),
                                        __builtin_amdgcn_perm(pg_word(vr[3], j >> 1), pg_word(vr[2], j >> 1), sel));
            o[j] = tl_mma_bf16_16x16x16(va, pb, o[j]);
            o[j] = tl_mma_bf16_16x16x16(va, pbl, o[j]);
        }
    }

    l += tl_shfl_xor(l, 16);
    l += tl_shfl_xor(l, 32);
    if (q4 == 0) sm.m[w][n16] = m, sm.l[w][n16] = l;
    tl_block_sync();
    const float f = pg_wave_factor(sm, w, n16);
    /* o[j][r]: dim 8 (4 q4 + r) + j, head n16 */
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int r = 0; r < 4; r++) sm.o[w][n16][8 * (4 * q4 + r) + j] = o[j][r] * f;
    tl_block_sync();
    pg_group_write(sm, a, b, h, s);
}

#endif

template <bool FP8>
__global__ void __launch_bounds__(PG_WAVES * TL_WAVE, TL_LAUNCH_MIN_BLOCKS(2)) dec_paged_kernel(DecPagedArgs a)
{
#if defined(TL_MMA_TARGET_SM80)
    pg_body<FP8, false>(a, nullptr);
#elif defined(TL_MMA_TARGET_GFX942) || defined(TL_MMA_TARGET_GFX950)
    pg_body<FP8>(a);
#endif
}

#if TL_GPU_TENSOR_MAPS
/* The sm_90a kernel: the pools' pages by tensor copies (one per 4 KB of K or V for bf16, 2 KB for
 * fp8) from the maps, passed as a __grid_constant__ parameter (the copies read them in place). */
template <bool FP8>
__global__ void __launch_bounds__(PG_WAVES * TL_WAVE, TL_LAUNCH_MIN_BLOCKS(2))
    dec_paged_tma_kernel(DecPagedArgs a, const __grid_constant__ PgMaps maps)
{
#if defined(TL_MMA_TARGET_SM80) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    pg_body<FP8, true>(a, &maps);
#endif
}
#endif

/* Dynamic shared memory of the paged kernel: the sm_90 rings (bulk / cp.async 105 KB, tensor copies
 * 100 KB with the 1 KB the alignment may take: two groups per SM); none on AMD (its epilogue's
 * memory is static). */
static size_t pg_smem_bytes(int wave, int tma)
{
    if (wave != 32) return 0;
    if (tma) return 1024 + (size_t)PG_TRING_BYTES + PG_WAVES * PG_STAGES * (PG_TSCL_BYTES + 8);
    return (size_t)PG_RING_BYTES + PG_WAVES * PG_STAGES * 8;
}

/* Raises kernel k's dynamic shared-memory limit to smem (once: *allowed remembers it). */
template <typename... P>
static int pg_allow(void (*k)(P...), size_t smem, size_t *allowed)
{
    if (smem <= *allowed) return 0;
    int dev = 0, most = 0; /* the opt-in limit a block (sm_89: 99 KB, below the non-TMA ring) */
    TL_GPU_CHECK(hipGetDevice(&dev));
    TL_GPU_CHECK(hipDeviceGetAttribute(&most, hipDeviceAttributeMaxSharedMemoryPerBlock, dev));
    if (smem > (size_t)most)
        return tl_error(TL_EFAIL, "decode paged", "the kernel needs %zu bytes of shared memory a block; this GPU allows %d",
                        smem, most);
    TL_GPU_CHECK(hipFuncSetAttribute((const void *)k, hipFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    /* two groups' rings (2 x 100-105 KB) fit only the largest shared-memory carveout: ask for it
     * rather than leave it to the driver's choice */
    TL_GPU_CHECK(hipFuncSetAttribute((const void *)k, hipFuncAttributePreferredSharedMemoryCarveout, 100));
    *allowed = smem;
    return 0;
}
static size_t pg_allowed[2][2] = {{48 * 1024, 48 * 1024}, {48 * 1024, 48 * 1024}}; /* [tma][fp8] */

static int pg_allow_kind(int fp8, int tma, int wave)
{
    const size_t smem = pg_smem_bytes(wave, tma);
#if TL_GPU_TENSOR_MAPS
    if (tma)
        return fp8 ? pg_allow(dec_paged_tma_kernel<true>, smem, &pg_allowed[1][1])
                   : pg_allow(dec_paged_tma_kernel<false>, smem, &pg_allowed[1][0]);
#endif
    return fp8 ? pg_allow(dec_paged_kernel<true>, smem, &pg_allowed[0][1]) : pg_allow(dec_paged_kernel<false>, smem, &pg_allowed[0][0]);
}

int dec_paged_prepare(DecPagedMaps *m, const void *k, const void *v, long pages, int kv_heads, int fp8, int wave)
{
    memset(m, 0, sizeof *m);
#if TL_GPU_TENSOR_MAPS
    if (wave == 32 && tl_gpu_tensor_maps_usable()) {
        /* [pages x 16 rows][kv_heads][128]: fp8 a 3-d map, box 128 x 1 x 16 (2 KB); bf16 the 128 dims
         * as 2 x 64 (the swizzle takes rows of at most 128 bytes), box 64 x 2 x 1 x 16 (4 KB) */
        const cuuint64_t rows = (cuuint64_t)pages * PG_PAGE, kvh = (cuuint64_t)kv_heads;
        static_assert(sizeof(CUtensorMap) == sizeof(tl_tmap) && sizeof(CUtensorMap) == sizeof m->k, "a tensor map is 128 bytes");
        CUtensorMap mk, mv;
        int rc;
        if (fp8) {
            const cuuint64_t dims[3] = {PG_D, kvh, rows}, strides[2] = {PG_D, kvh * PG_D};
            const cuuint32_t box[3] = {PG_D, 1, PG_PAGE};
            rc = tl_tensor_map_tiled(&mk, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, k, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
            if (!rc) rc = tl_tensor_map_tiled(&mv, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, v, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
        } else {
            const cuuint64_t dims[4] = {PG_D / 2, 2, kvh, rows}, strides[3] = {PG_D, 2 * PG_D, kvh * 2 * PG_D};
            const cuuint32_t box[4] = {PG_D / 2, 2, 1, PG_PAGE};
            rc = tl_tensor_map_tiled(&mk, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, k, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
            if (!rc) rc = tl_tensor_map_tiled(&mv, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, v, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
        }
        if (rc) return rc;
        memcpy(m->k, &mk, sizeof mk);
        memcpy(m->v, &mv, sizeof mv);
        m->tma = 1;
    }
#else
    (void)k, (void)v, (void)pages, (void)kv_heads;
#endif
    return pg_allow_kind(fp8, m->tma, wave);
}

int dec_paged_launch(const DecPagedArgs &a, const DecPagedMaps &m, int fp8, long groups, int wave, hipStream_t st)
{
    int rc = pg_allow_kind(fp8, m.tma, wave);
    if (rc) return rc;
    const size_t smem = pg_smem_bytes(wave, m.tma);
    const dim3 grid((unsigned)groups), block((unsigned)(PG_WAVES * wave));
    hipError_t e;
#if TL_GPU_TENSOR_MAPS
    if (m.tma) {
        PgMaps pm;
        memcpy(pm.k.w, m.k, sizeof pm.k), memcpy(pm.v.w, m.v, sizeof pm.v);
        e = fp8 ? tl_launch(dec_paged_tma_kernel<true>, grid, block, smem, st, false, a, pm)
                : tl_launch(dec_paged_tma_kernel<false>, grid, block, smem, st, false, a, pm);
        if (e != hipSuccess) return tl_gpu_fail("dec_paged_tma_kernel", hipGetErrorString(e), __FILE__, __LINE__);
        return 0;
    }
#endif
    e = fp8 ? tl_launch(dec_paged_kernel<true>, grid, block, smem, st, false, a)
            : tl_launch(dec_paged_kernel<false>, grid, block, smem, st, false, a);
    if (e != hipSuccess) return tl_gpu_fail("dec_paged_kernel", hipGetErrorString(e), __FILE__, __LINE__);
    return 0;
}
