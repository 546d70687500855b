/* kernels/decode_mla.hip: the dual-scope (CSA / DSA) MLA sparse decode shard kernel
 * (contract/decode.h, kind dual-scope; the launcher: kernels/decode.hip).
 *
 * One work-group of 256 threads per (row, head block of HB = 16 MT heads, shard); the waves form an
 * MT x DS grid: wave w serves the 16 heads of m-tile w % MT and the d = w / MT-th share of the
 * q.k dims (split K) and of the 512 value dims. Per tile of 32 slots (TL_DECODE_DS_GRANULE):
 *   1. the tile's 32 latent rows (576 dims each) are in registers since the previous tile (each
 *      thread holds 4.5 (fp8) or 9 (bf16) 16-byte pieces), decoded exactly to bf16 (fp8: the key
 *      scale is left for the score and for p) and stored once into shared memory: the one copy
 *      every head of the group reads (never a second decode);
 *   2. the next tile's rows are loaded (in flight during 3-5);
 *   3. QK: each wave multiplies its Q fragments (registers, loaded once: 16 heads x 576 / DS dims)
 *      by the tile's K fragments (shared memory) and leaves its partial S [16][32] in shared memory;
 *   4. softmax: 8 (or 16) threads per head sum the DS partials, scale by the key scale and the
 *      softmax scale (base 2), mask the slots that do not count, keep the running (max, sum) per
 *      head in shared memory and write P x key scale as bf16 hi + bf16 lo (~2^-17 relative; one
 *      bf16 rounding, 2^-9, would be the kernel's largest error);
 *   5. PV: each wave rescales its O (16 heads x 512 / DS dims, float32 registers) and adds P V
 *      (two MMAs: hi and lo), V = the first 512 dims of the same shared tile (read as a row-major
 *      B operand: ldmatrix.trans on sm_90, 2-byte LDS reads on AMD).
 * Four barriers a tile. Matrix work per tile and wave: 32 / N x (36 / DS) QK steps and 2 x 2 x 512 /
 * (DS N) PV steps (kernels/mma.h: mma.sync m16n8k16 on sm_90, v_mfma 16x16x16 bf16 on gfx942,
 * 16x16x32 on gfx950).
 * The key set: slot i < nwin is window position wlo + i; slot nwin + i is top-k entry i, counted
 * as tl_decode_topk_counts says: when it is a candidate (in [0, visible), before the window) and no
 * entry j < i holds its position. A tile's 32 slots are settled by the whole group at once (ml
 * tile_pos). The shard's first tile by comparison: 8 threads a slot, each comparing a strided
 * eighth of the entries before it, four a 16-byte shared load, OR-ed by shuffles (i / 32 loads a
 * thread, no atomics). The tiles after it by a hash set of the entries before the shard's end
 * (position -> lowest entry index: a compare-and-swap and an atomic min an entry, k_end / 256 a
 * thread), built while the first tile's loads are in flight, then one probe a slot: without it a
 * tile's compares cost i / 32 loads a thread every tile, which at k = 2048 outgrew the tile's
 * work. A shard of one tile (batch 1's) builds none. Slots that do not count load their request's
 * row 0 (nothing waits on a load before its use) and are stored as zero rows with scale 0; they
 * score -inf. The first tile's loads are issued before its repeats are settled, from the list as
 * it is (a repeat is zeroed at the store like any slot that does not count). One tile's loads are
 * in flight in registers; the tile after it is prefetched into L2 (sm_90), so that its loads,
 * issued a tile later, find L2 rather than HBM.
 * Epilogue: O / l through shared memory (one m-tile at a time over the tile's space) as 16-byte
 * stores of whole rows.
 * Shared memory: the tile (32 x 584 bf16), the S partials (waves x 16 x 36 f32), P (HB x 40 bf16),
 * per-head statistics, the positions and scales of the tile, the list, its hash set (position and
 * entry index, 2 x 4 bytes a slot; dec_mla_smem). Registers
 * (sm_90, HB = 32): O 64, Q 36, next tile 20 (fp8) / 36 (bf16).
 */
#include "decode_launch.h"
#include "mma.h"

#define ML_THREADS 256
#define ML_WAVES (ML_THREADS / TL_WAVE)
#define ML_QK TL_DECODE_MLA_QK_DIM
#define ML_DV TL_DECODE_MLA_V_DIM
#define ML_TK TL_DECODE_DS_GRANULE
#define ML_LDK (ML_QK + 8) /* bf16 elements a tile row takes: 1168 bytes, rows on distinct banks */
#define ML_LDS (ML_TK + 4) /* floats a row of S takes */
#define ML_LDP (ML_TK + 8) /* bf16 a row of P takes */
#define ML_LDO (ML_DV + 8) /* floats a row of the epilogue's O stage takes (16 rows fit in the tile) */
static_assert(16 * ML_LDO * 4 <= ML_TK * ML_LDK * 2, "the epilogue's O stage fits in the tile");

#if defined(TL_GPU_AMD)
#define ml_exp2 __builtin_exp2f
#define ml_log2 __builtin_log2f
#else
#define ml_exp2 exp2f
#define ml_log2 log2f
#endif

/* the shared-memory carve (bytes), in this order; every part 16-byte aligned */
struct MlLayout {
    size_t kt, sp, ps, stat, pos, sc, list, hkey, hidx, total;
};
static __host__ __device__ inline size_t ml_align16(size_t x) { return (x + 15) & ~(size_t)15; }
/* the hash set's slots for n entries: the power of two >= 2 n (at most half full), 0 for none */
static __host__ __device__ inline int ml_hash_slots(int n)
{
    int hs = 4;
    while (hs < 2 * n) hs *= 2;
    return n > 0 ? hs : 0;
}
static __device__ __forceinline__ uint32_t ml_hash(uint32_t p, uint32_t mask) { return (p * 0x9E3779B1u >> 11) & mask; }
static __host__ __device__ inline MlLayout ml_layout(int hb, int topk, int waves)
{
    MlLayout L;
    size_t at = 0;
    L.kt = at, at += ml_align16((size_t)ML_TK * ML_LDK * 2);
    L.sp = at, at += ml_align16((size_t)waves * 16 * ML_LDS * 4);
    L.ps = at, at += ml_align16((size_t)2 * hb * ML_LDP * 2); /* P hi, then P lo */
    L.stat = at, at += ml_align16((size_t)3 * hb * 4);
    L.pos = at, at += ml_align16((size_t)2 * ML_TK * 4);
    L.sc = at, at += ml_align16((size_t)ML_TK * 4);
    L.list = at, at += ml_align16((size_t)(topk > 0 ? topk : 0) * 4);
    const size_t hs = (size_t)ml_hash_slots(topk > 0 ? topk : 0);
    L.hkey = at, at += hs * 4;
    L.hidx = at, at += hs * 4;
    L.total = at;
    return L;
}

size_t dec_mla_smem(int heads, int topk, int wave)
{
    return ml_layout(tl_decode_ds_block_heads(heads), topk, ML_THREADS / wave).total;
}


/* ---- per-target pieces ------------------------------------------------------------------------ */
#if defined(TL_MMA_TARGET_SM80)
#define ML_DEC_UNSCALE 1.0f
/* 16 E4M3 codes (natural order) -> 16 exact bf16 (two uint4) */
static __device__ __forceinline__ uint32_t ml_unscale(uint32_t x)
{
    uint32_t y;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;"
        : "=r"(y)
        : "r"(x), "r"(tl_code_bf16x2_splat(TL_CODE_E4M3_BF16_UNSCALE)), "r"(TL_CODE_BF16X2_MINUS0));
    return y;
}
static __device__ __forceinline__ void ml_e4m3x4(uint32_t w, uint32_t &p01, uint32_t &p23)
{
    const uint32_t lo = ml_unscale(((w << 4) & 0x07F007F0u) | ((w << 8) & 0x80008000u)); /* (b0, b2) */
    const uint32_t hi = ml_unscale(((w >> 4) & 0x07F007F0u) | (w & 0x80008000u));        /* (b1, b3) */
    p01 = __byte_perm(lo, hi, 0x5410u);
    p23 = __byte_perm(lo, hi, 0x7632u);
}
/* B fragments of two n-tiles (cols n0..n0+15) from a row-major [k][n] bf16 tile (k rows k0..k0+15) */
static __device__ __forceinline__ void ml_load_b_rm2(tl_frag_b_bf16 &b0, tl_frag_b_bf16 &b1, const uint16_t *base, int ld)
{
    const int l = tl_lane();
    const uint16_t *p = base + (size_t)((l & 7) + 8 * ((l >> 3) & 1)) * ld + 8 * (l >> 4);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(b0.r[0]), "=r"(b0.r[1]), "=r"(b1.r[0]), "=r"(b1.r[1])
                 : "r"(tl_smem_addr(p)));
}
#elif defined(TL_MMA_TARGET_GFX942) || defined(TL_MMA_TARGET_GFX950)
#if defined(TL_MMA_TARGET_GFX942)
#define ML_DEC_UNSCALE 2.0f /* the FNUZ converter halves every E4M3FN value */
static __device__ __forceinline__ uint32_t ml_fnuz_fix(uint32_t x)
{
    uint32_t r = x;
    for (int i = 0; i < 4; i++)
        if (((x >> (8 * i)) & 0xFFu) == 0x80u) r &= ~(0xFFu << (8 * i));
    return r;
}
#else
#define ML_DEC_UNSCALE 1.0f
static __device__ __forceinline__ uint32_t ml_fnuz_fix(uint32_t x) { return x; }
#endif
static __device__ __forceinline__ uint32_t ml_bf16_pair(float lo, float hi)
{
    return (tl_code_f32_bits(lo) >> 16) | (tl_code_f32_bits(hi) & 0xFFFF0000u);
}
static __device__ __forceinline__ void ml_e4m3x4(uint32_t w, uint32_t &p01, uint32_t &p23)
{
    const uint32_t x = ml_fnuz_fix(w);
    const auto a = __builtin_amdgcn_cvt_pk_f32_fp8((int)x, false), b = __builtin_amdgcn_cvt_pk_f32_fp8((int)x, true);
    p01 = ml_bf16_pair(a[0], a[1]);
    p23 = ml_bf16_pair(b[0], b[1]);
}
/* One B fragment (cols n0..n0+15, k rows k0..k0+K-1) from a row-major [k][n] bf16 tile */
static __device__ __forceinline__ void ml_load_b_rm(tl_frag_b_bf16 &b, const uint16_t *base, int ld)
{
    const int l = tl_lane();
#if defined(TL_MMA_TARGET_GFX942)
    tl_i16x4 v;
    for (int e = 0; e < 4; e++) v[e] = (short)base[(size_t)(4 * (l >> 4) + e) * ld + (l & 15)];
    b.v = v;
#else
    typedef short ml_i16x8 __attribute__((ext_vector_type(8)));
    ml_i16x8 v;
    for (int e = 0; e < 8; e++) v[e] = (short)base[(size_t)(8 * (l >> 4) + e) * ld + (l & 15)];
    b.v = __builtin_bit_cast(tl_bf16x8, v);
#endif
}
#endif

#if defined(TL_MMA_TARGET_SM80) || defined(TL_MMA_TARGET_GFX942) || defined(TL_MMA_TARGET_GFX950)
/* ---- the body --------------------------------------------------------------------------------- */
template <int MT, bool FP8>
static __device__ __forceinline__ void ml_body(const DecMlaArgs &a)
{
    constexpr int HB = 16 * MT, DS = ML_WAVES / MT;
    constexpr int KK = TL_MMA_BF16_K, NN = TL_MMA_BF16_N;
    constexpr int KS = ML_QK / KK;                 /* QK k-steps */
    constexpr int QKS = (KS + DS - 1) / DS;        /* a wave's k-steps, at most */
    constexpr int DVW = ML_DV / DS;                /* a wave's value dims */
    constexpr int NF = DVW / NN;                   /* its O fragments */
    constexpr int NT = ML_TK / NN;                 /* QK n-tiles of a tile */
    constexpr int PVS = ML_TK / KK;                /* PV k-steps of a tile */
    constexpr int TPH = ML_THREADS / HB;           /* softmax threads per head */
    constexpr int KPT = ML_TK / TPH;               /* keys per softmax thread */
    constexpr int BPE = FP8 ? 1 : 2;
    constexpr int CPR = ML_QK * BPE / 16;          /* 16-byte pieces of a latent row */
    constexpr int PIECES = ML_TK * CPR;
    constexpr int PPT = (PIECES + ML_THREADS - 1) / ML_THREADS; /* pieces per thread */

    TL_SHARED_DYNAMIC(16, uint8_t, ml_smem);
    const MlLayout L = ml_layout(HB, a.topk_n, ML_WAVES);
    uint16_t *kt = (uint16_t *)(ml_smem + L.kt);
    float *sp = (float *)(ml_smem + L.sp);
    uint16_t *ps = (uint16_t *)(ml_smem + L.ps), *psl = ps + HB * ML_LDP;
    float *m_s = (float *)(ml_smem + L.stat), *l_s = m_s + HB, *al_s = l_s + HB;
    int32_t *posb = (int32_t *)(ml_smem + L.pos); /* [2][TK] */
    float *scb = (float *)(ml_smem + L.sc);
    int32_t *list = (int32_t *)(ml_smem + L.list);
    int32_t *hkey = (int32_t *)(ml_smem + L.hkey), *hidx = (int32_t *)(ml_smem + L.hidx);

    tl_grid_dep_launch();
    const int tid = (int)tl_thread_x(), lane = tl_lane(), w = tl_wave_id();
    /* --trace: thread 0 notes the cycle counter at each point (a point not reached: the one before) */
    TL_SHARED(unsigned long long, tr_cyc, [TL_DECODE_TRACE_POINTS]);
    unsigned long long tr_entry = 0;
    if (a.trace && tid == 0) {
        tr_entry = tl_gpu_clock();
        for (int i = 0; i < TL_DECODE_TRACE_POINTS; i++) tr_cyc[i] = 0;
        tr_cyc[TL_DECODE_TRACE_ENTRY] = tl_cycles();
    }
    const int mt = w % MT, dsi = w / MT;
    const long wg = (long)tl_block_x();
    const int s = (int)(wg % a.shards), hb = (int)((wg / a.shards) % a.hblocks);
    const long r = wg / a.shards / a.hblocks;
    const long bq = r / a.mtp;
    const int tq = (int)(r % a.mtp);
    const int32_t *glist = a.topk + (size_t)r * a.topk_n;
    const size_t rowbase = (size_t)bq * a.max_len;

    /* ---- what depends on nothing goes first, all in flight at once: this wave's Q fragments
     * (heads hb HB + 16 mt .. +15, k-steps [kb0, kb1)), the row's whole top-k list (into shared
     * memory) and the request's length ---- */
    const int kb0 = dsi * KS / DS, kb1 = (dsi + 1) * KS / DS;
    tl_frag_a_bf16 qa[QKS];
    {
        const uint16_t *q = a.q + ((size_t)r * a.heads + (size_t)hb * HB + 16 * mt) * ML_QK;
#pragma unroll
        for (int j = 0; j < QKS; j++)
            if (kb0 + j < kb1) tl_frag_load_a_bf16(&qa[j], q + (kb0 + j) * KK, ML_QK);
    }
    const long len = a.lens[bq];
    for (int base = 0; base < a.topk_n; base += 8 * ML_THREADS) {
        int32_t v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int i = base + u * ML_THREADS + tid;
            if (i < a.topk_n) v[u] = glist[i];
        }
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int i = base + u * ML_THREADS + tid;
            if (i < a.topk_n) list[i] = v[u];
        }
    }
    const long vis = tl_decode_visible(len, a.mtp, tq);
    long wlo, whi;
    tl_decode_window(vis, a.window, &wlo, &whi);
    const long nwin = whi - wlo;
    long lo, hi;
    tl_decode_shard_range(nwin + a.topk_n, a.shards, ML_TK, s, &lo, &hi);

    /* the hash set: for shards of more than one tile with top-k slots, the entries before the end */
    const int k_end = hi - lo > ML_TK && hi > nwin ? (int)(hi - nwin < a.topk_n ? hi - nwin : a.topk_n) : 0;
    const int hslots = ml_hash_slots(k_end);
    const uint32_t hmask = (uint32_t)hslots - 1u;

    /* ---- prologue: statistics; the first tile's loads; its positions settled ---- */
    for (int i = tid; i < HB; i += ML_THREADS) m_s[i] = -__builtin_inff(), l_s[i] = 0.0f, al_s[i] = 1.0f;
    for (int i = tid; i < hslots; i += ML_THREADS) hkey[i] = -1, hidx[i] = 0x7FFFFFFF;
    tl_block_sync();
    /* the position slot `slot` loads before its repeats are settled (-1: none): the window's, or a
     * top-k candidate's (a repeat of an earlier entry is found by tile_pos) */
    auto raw_pos = [&](long slot) -> int32_t {
        if (slot >= hi) return -1;
        if (slot < nwin) return (int32_t)(wlo + slot);
        const long p = list[slot - nwin];
        return p < 0 || p >= vis || p >= wlo ? -1 : (int32_t)p;
    };
    if (tid < ML_TK) posb[ML_TK + tid] = raw_pos(lo + tid);
    tl_block_sync();
    uint4 raw[PPT];
    float sc_next = 1.0f;
    /* The next tile's loads. A slot that does not count loads row 0 of its request instead (always
     * there) and is zeroed when the tile is stored: nothing waits on a load before its use. */
    auto issue = [&](const int32_t *pb) {
#pragma unroll
        for (int u = 0; u < PPT; u++) {
            const int c = tid + u * ML_THREADS;
            if (c < PIECES) {
                const int32_t p = pb[c / CPR];
                raw[u] = tl_load_once((const uint8_t *)a.kv + ((rowbase + (p > 0 ? p : 0)) * ML_QK) * BPE + 16 * (c % CPR));
            }
        }
        if (FP8 && tid < ML_TK) sc_next = a.ks[rowbase + (pb[tid] > 0 ? pb[tid] : 0)];
    };
    issue(posb + ML_TK); /* in flight while the positions are settled */
    /* The rows of tile t0 (its slots' positions as they are: a repeat costs a wasted line) prefetched
     * into L2, a line a thread: the loads issued a tile later then find them (and their address
     * translations) warm instead of waiting for HBM with one tile of work to hide behind. */
    auto prefetch = [&](long t0) {
        constexpr int RB = ML_QK * BPE, LINES = (RB + 127) / 128 + 1; /* offsets 0, 128, .., and the last byte */
        for (int c = tid; c < ML_TK * LINES; c += ML_THREADS) {
            const int32_t p = raw_pos(t0 + c / LINES);
            if (p < 0) continue;
            const int off = 128 * (c % LINES) < RB ? 128 * (c % LINES) : RB - 1;
            tl_prefetch_l2((const uint8_t *)a.kv + (rowbase + p) * RB + off);
            if (FP8 && c % LINES == 0) tl_prefetch_l2(a.ks + rowbase + p);
        }
    };
    prefetch(lo + ML_TK);
    /* the hash set (see above): entry j inserted as (position, lowest index); a slot's key, once set,
     * never changes */
    for (int j = tid; j < k_end; j += ML_THREADS) {
        const int32_t p = list[j];
        if (p < 0 || p >= vis || p >= wlo) continue;
        for (uint32_t at = ml_hash((uint32_t)p, hmask);; at = (at + 1) & hmask) {
            int32_t cur = ((volatile int32_t *)hkey)[at];
            if (cur < 0) cur = atomicCAS(&hkey[at], -1, p);
            if (cur < 0 || cur == p) {
                atomicMin(&hidx[at], j);
                break;
            }
        }
    }
    /* The positions of the 32 slots t0 .. t0 + 31 into pb (-1: does not count), by the whole group:
     * slot tid / 8; the shard's first tile: thread tid % 8 compares the entries 4 q .. 4 q + 3 before
     * it, q = tid % 8, + 8, .. (the list's region holds whole 16-byte chunks: ml_align16; entries at
     * or past i are masked); later tiles: thread tid % 8 = 0 probes the hash set. */
    static_assert(ML_THREADS == 8 * ML_TK, "tile_pos: 8 threads a slot");
    auto tile_pos = [&](long t0, int32_t *pb) {
        const int sl = tid >> 3, c = tid & 7;
        const long slot = t0 + sl;
        const int32_t p = raw_pos(slot);
        int dup = 0;
        if (p >= 0 && slot >= nwin) {
            const int i = (int)(slot - nwin);
            if (t0 != lo && hslots > 0) {
                if (c == 0)
                    for (uint32_t at = ml_hash((uint32_t)p, hmask);; at = (at + 1) & hmask) {
                        const int32_t kk = hkey[at];
                        if (kk == p) {
                            dup = hidx[at] < i;
                            break;
                        }
                        if (kk < 0) break; /* not in the set: cannot happen for i < k_end */
                    }
            } else {
                const int4 *l4 = (const int4 *)list;
#pragma unroll 2
                for (int q = c; 4 * q < i; q += 8) {
                    const int4 v = l4[q];
                    const int j = 4 * q;
                    dup |= (v.x == p) | ((v.y == p) & (j + 1 < i)) | ((v.z == p) & (j + 2 < i)) | ((v.w == p) & (j + 3 < i));
                }
            }
        }
        dup |= tl_shfl_xor(dup, 1);
        dup |= tl_shfl_xor(dup, 2);
        dup |= tl_shfl_xor(dup, 4);
        if (c == 0) pb[sl] = dup ? -1 : p;
    };

    tl_frag_c o[NF];
#pragma unroll
    for (int f = 0; f < NF; f++) tl_frag_zero(&o[f]);

    /* ---- the tile pipeline ---- */
    tile_pos(lo, posb);
    tl_block_sync();
    if (a.trace && tid == 0) tr_cyc[TL_DECODE_TRACE_READY] = tl_cycles();
    int cur = 0;
    for (long t0 = lo; t0 < hi; t0 += ML_TK, cur ^= 1) {
        /* 1. this tile into shared memory, decoded (slots that do not count: zeros); the next tile's
         *    positions */
#pragma unroll
        for (int u = 0; u < PPT; u++) {
            const int c = tid + u * ML_THREADS;
            if (c >= PIECES) continue;
            const int row = c / CPR, col = c % CPR;
            uint16_t *dst = kt + row * ML_LDK + col * (16 / BPE);
            if (posb[cur * ML_TK + row] < 0) raw[u] = make_uint4(0, 0, 0, 0);
            if (FP8) {
                uint4 x0, x1;
                ml_e4m3x4(raw[u].x, x0.x, x0.y);
                ml_e4m3x4(raw[u].y, x0.z, x0.w);
                ml_e4m3x4(raw[u].z, x1.x, x1.y);
                ml_e4m3x4(raw[u].w, x1.z, x1.w);
                *(uint4 *)dst = x0;
                *(uint4 *)(dst + 8) = x1;
            } else {
                *(uint4 *)dst = raw[u];
            }
        }
        if (tid < ML_TK) scb[tid] = posb[cur * ML_TK + tid] < 0 ? 0.0f : FP8 ? sc_next * ML_DEC_UNSCALE : 1.0f;
        tile_pos(t0 + ML_TK, posb + (cur ^ 1) * ML_TK);
        tl_block_sync();
        if (a.trace && tid == 0 && t0 == lo) tr_cyc[TL_DECODE_TRACE_LANDED] = tl_cycles();
        /* 2. the next tile's loads; the one after it prefetched */
        if (t0 + ML_TK < hi) issue(posb + (cur ^ 1) * ML_TK);
        if (t0 + 2 * ML_TK < hi) prefetch(t0 + 2 * ML_TK);
        /* 3. QK: this wave's partial S [16 heads][32 slots] */
        {
            tl_frag_c c[NT]; /* NT independent accumulator chains */
#pragma unroll
            for (int nt = 0; nt < NT; nt++) tl_frag_zero(&c[nt]);
#pragma unroll
            for (int j = 0; j < QKS; j++) {
                if (kb0 + j >= kb1) continue;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    tl_frag_b_bf16 kb;
                    tl_frag_load_bt_bf16(&kb, kt + (nt * NN) * ML_LDK + (kb0 + j) * KK, ML_LDK);
                    tl_mma_bf16(&c[nt], &qa[j], &kb);
                }
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++) tl_frag_store_c(&c[nt], sp + (w * 16) * ML_LDS + nt * NN, ML_LDS);
        }
        tl_block_sync();
        /* 4. softmax: head hh, slots kq KPT .. */
        {
            const int hh = tid / TPH, kq = tid % TPH, hmt = hh / 16, hrow = hh % 16;
            const int32_t *pb = posb + cur * ML_TK;
            float x[KPT], mx = -__builtin_inff();
#pragma unroll
            for (int e = 0; e < KPT; e++) {
                const int key = kq * KPT + e;
                float v = 0.0f;
#pragma unroll
                for (int d = 0; d < DS; d++) v += sp[((d * MT + hmt) * 16 + hrow) * ML_LDS + key];
                x[e] = pb[key] >= 0 ? v * scb[key] * a.scale_log2 : -__builtin_inff();
                mx = tl_fmaxf(mx, x[e]);
            }
#pragma unroll
            for (int m = 1; m < TPH; m *= 2) mx = tl_fmaxf(mx, tl_shfl_xor(mx, m));
            const float m_old = m_s[hh], mn = tl_fmaxf(m_old, mx), mu = mn == -__builtin_inff() ? 0.0f : mn;
            const float al = ml_exp2(m_old - mu);
            float sum = 0.0f;
            uint32_t pk[KPT], pkl[KPT]; /* p x key scale as bf16 hi + lo */
#pragma unroll
            for (int e = 0; e < KPT; e++) {
                const float p = ml_exp2(x[e] - mu);
                sum += p;
                const float v = p * scb[kq * KPT + e];
                pk[e] = tl_code_bf16_from_f32(v);
                pkl[e] = tl_code_bf16_from_f32(v - tl_code_bits_f32(pk[e] << 16));
            }
#pragma unroll
            for (int m = 1; m < TPH; m *= 2) sum += tl_shfl_xor(sum, m);
#pragma unroll
            for (int e = 0; e < KPT; e += 2) {
                *(uint32_t *)(ps + hh * ML_LDP + kq * KPT + e) = pk[e] | pk[e + 1] << 16;
                *(uint32_t *)(psl + hh * ML_LDP + kq * KPT + e) = pkl[e] | pkl[e + 1] << 16;
            }
            const float l_new = l_s[hh] * al + sum;
            if (kq == 0) m_s[hh] = mn, l_s[hh] = l_new, al_s[hh] = al;
        }
        tl_block_sync();
        /* 5. PV: O[16 heads][this wave's dims] = O alpha + P V */
        {
            float alr[TL_FRAG_C_COUNT];
#pragma unroll
            for (int rr = 0; rr < TL_FRAG_C_COUNT; rr++) alr[rr] = al_s[16 * mt + tl_frag_c_row(lane, rr)];
#pragma unroll
            for (int f = 0; f < NF; f++)
#pragma unroll
                for (int rr = 0; rr < TL_FRAG_C_COUNT; rr++) o[f].v[rr] *= alr[rr];
#pragma unroll
            for (int ks = 0; ks < PVS; ks++) {
                tl_frag_a_bf16 pa, pal;
                tl_frag_load_a_bf16(&pa, ps + (16 * mt) * ML_LDP + ks * KK, ML_LDP);
                tl_frag_load_a_bf16(&pal, psl + (16 * mt) * ML_LDP + ks * KK, ML_LDP);
                const uint16_t *vb = kt + (ks * KK) * ML_LDK + dsi * DVW;
#if defined(TL_MMA_TARGET_SM80)
#pragma unroll
                for (int f = 0; f < NF; f += 2) {
                    tl_frag_b_bf16 b0, b1;
                    ml_load_b_rm2(b0, b1, vb + f * NN, ML_LDK);
                    tl_mma_bf16(&o[f], &pa, &b0);
                    tl_mma_bf16(&o[f + 1], &pa, &b1);
                    tl_mma_bf16(&o[f], &pal, &b0);
                    tl_mma_bf16(&o[f + 1], &pal, &b1);
                }
#else
#pragma unroll
                for (int f = 0; f < NF; f++) {
                    tl_frag_b_bf16 b;
                    ml_load_b_rm(b, vb + f * NN, ML_LDK);
                    tl_mma_bf16(&o[f], &pa, &b);
                    tl_mma_bf16(&o[f], &pal, &b);
                }
#endif
            }
        }
        tl_block_sync(); /* the tile and P are free for the next tile */
    }
    if (a.trace && tid == 0 && lo < hi) tr_cyc[TL_DECODE_TRACE_TILES] = tl_cycles();

    /* ---- epilogue: o = O / l, lse. O leaves through shared memory one m-tile (16 heads x 512 dims)
     * at a time, as 16-byte stores of whole 2 KB rows: the fragments' own stores would be 4-byte
     * writes spread over 8 rows a warp instruction. The stage lies over the tile (the loop is done). ---- */
    const size_t head0 = (size_t)r * a.heads + (size_t)hb * HB;
    float *stage = (float *)(ml_smem + L.kt);
    for (int mtp = 0; mtp < MT; mtp++) {
        if (mt == mtp) {
#pragma unroll
            for (int rr = 0; rr < TL_FRAG_C_COUNT; rr++) {
                const int hrow = tl_frag_c_row(lane, rr);
                const float lsum = l_s[16 * mt + hrow], inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
#pragma unroll
                for (int f = 0; f < NF; f++)
                    stage[hrow * ML_LDO + dsi * DVW + f * NN + tl_frag_c_col(lane, rr)] = o[f].v[rr] * inv;
            }
        }
        tl_block_sync();
        for (int i = tid; i < 16 * ML_DV / 4; i += ML_THREADS) {
            const int hrow = i / (ML_DV / 4), c4 = i % (ML_DV / 4);
            *(float4 *)(a.o + ((head0 + 16 * mtp + hrow) * a.shards + s) * ML_DV + 4 * c4) =
                *(const float4 *)(stage + hrow * ML_LDO + 4 * c4);
        }
        tl_block_sync();
    }
    for (int i = tid; i < HB; i += ML_THREADS)
        a.lse[(head0 + i) * a.shards + s] = l_s[i] > 0.0f ? (m_s[i] + ml_log2(l_s[i])) * 0.69314718055994531f : -__builtin_inff();
    if (a.trace) {
        tl_block_sync(); /* every thread's o and lse written */
        if (tid == 0) {
            unsigned long long *tw = a.trace + (size_t)wg * DEC_TRACE_WORDS;
            tr_cyc[TL_DECODE_TRACE_END] = tl_cycles();
            tw[0] = tr_entry, tw[1] = (unsigned long long)tl_gpu_sm_id();
            for (int i = 0; i < TL_DECODE_TRACE_POINTS; i++) tw[2 + i] = tr_cyc[i] ? tr_cyc[i] : tw[1 + i];
        }
    }
}
#endif

template <int MT, bool FP8>
__global__ void __launch_bounds__(ML_THREADS, 1) dec_mla_kernel(DecMlaArgs a)
{
#if defined(TL_MMA_TARGET_SM80) || defined(TL_MMA_TARGET_GFX942) || defined(TL_MMA_TARGET_GFX950)
    ml_body<MT, FP8>(a);
#endif
}

/* Raises the kernel's dynamic shared-memory limit to smem once (not a stream operation: done at
 * open, never inside a graph capture). */
template <int MT, bool FP8>
static int ml_allow(size_t smem)
{
    static size_t allowed = 48 * 1024;
    if (smem <= allowed) return 0;
    void (*k)(DecMlaArgs) = dec_mla_kernel<MT, FP8>;
    TL_GPU_CHECK(hipFuncSetAttribute((const void *)k, hipFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    allowed = smem;
    return 0;
}

template <int MT, bool FP8>
static int ml_launch(const DecMlaArgs &a, long groups, size_t smem, hipStream_t st)
{
    int rc = ml_allow<MT, FP8>(smem);
    if (rc) return rc;
    const hipError_t e = tl_launch(dec_mla_kernel<MT, FP8>, dim3((unsigned)groups), dim3(ML_THREADS), smem, st, false, a);
    if (e != hipSuccess) return tl_gpu_fail("dec_mla_kernel", hipGetErrorString(e), __FILE__, __LINE__);
    return 0;
}

int dec_mla_prepare(int heads, int fp8, size_t smem)
{
    if (tl_decode_ds_block_heads(heads) == 32) return fp8 ? ml_allow<2, true>(smem) : ml_allow<2, false>(smem);
    return fp8 ? ml_allow<1, true>(smem) : ml_allow<1, false>(smem);
}

int dec_mla_launch(const DecMlaArgs &a, int fp8, long groups, size_t smem, hipStream_t st)
{
    const int mt = tl_decode_ds_block_heads(a.heads) / 16;
    if (mt == 2) return fp8 ? ml_launch<2, true>(a, groups, smem, st) : ml_launch<2, false>(a, groups, smem, st);
    return fp8 ? ml_launch<1, true>(a, groups, smem, st) : ml_launch<1, false>(a, groups, smem, st);
}
