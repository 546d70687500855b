/* kernels/topk_kernels.hip: the exact top-k kernel (what it does: kernels/topk.h) and its launch
 * wrapper tl_topk_launch (kernels/topk_launch.h).
 *
 * Chunks. A row's positions [0, len) lie at elements [b n, b n + len) of the scores; the 16-byte
 * vectors that hold any of them, [v0, v1), are cut into `split` contiguous chunks in index order,
 * chunk j = [v0 + nv j / split, v0 + nv (j + 1) / split), at most `cv` vectors each
 * (tl_topk_chunk_vecs). A block keeps vector i of its chunk, as keys, at keys[i] in shared memory
 * (i < cv; past the chunk, zero). A vector at the edge of a row also holds positions of the
 * neighbouring row (or the allocation's padding): those lanes get key 0 and are taken out.
 * Keys: numerics/keys.h (float32: 32-bit keys; bfloat16, float16: 16-bit keys in the two halves of
 * a word, low half first).
 */
#include "topk_launch.h"

#define NT TL_TOPK_THREADS
#define U TL_TOPK_VECS
#define NW (TL_TOPK_THREADS / TL_WAVE)

/* ---- keys ---- */
/* Scores a 16-byte vector holds: 4 float32 or 8 16-bit scores. */
template <int DT> struct Lanes { enum { E = DT == TL_TOPK_F32 ? 4 : 8 }; };

/* The vector's scores turned into their keys, in place (16-bit keys stay in their halves). */
template <int DT>
static __device__ __forceinline__ void to_keys(uint4 &v)
{
    uint32_t *w = &v.x;
#pragma unroll
    for (int c = 0; c < 4; c++) {
        if (DT == TL_TOPK_F32) {
            w[c] = tl_key_f32(w[c]);
        } else {
            const uint16_t lo = (uint16_t)(w[c] & 0xFFFFu), hi = (uint16_t)(w[c] >> 16);
            const uint32_t klo = DT == TL_TOPK_BF16 ? tl_key_bf16(lo) : tl_key_f16(lo);
            const uint32_t khi = DT == TL_TOPK_BF16 ? tl_key_bf16(hi) : tl_key_f16(hi);
            w[c] = klo | khi << 16;
        }
    }
}

/* Key e of a vector of keys (e a compile-time constant after unrolling). */
template <int DT>
static __device__ __forceinline__ uint32_t key_at(const uint4 &v, int e)
{
    const int c = DT == TL_TOPK_F32 ? e : e >> 1;
    const uint32_t w = c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
    if (DT == TL_TOPK_F32) return w;
    return (e & 1) ? w >> 16 : w & 0xFFFFu;
}

/* contract/topk.h's tl_topk_rank: larger ranks higher, the lower index winning. */
static __device__ __forceinline__ uint64_t rank_of(uint32_t key, int pos)
{
    return (uint64_t)key << 32 | (uint64_t)(0xFFFFFFFFu - (uint32_t)pos);
}

/* ---- chunks ---- */
struct ChunkRange {
    long long lo, hi; /* vectors [lo, hi) of the whole scores array */
    long long row0;   /* element of the row's position 0: b n */
};
template <int DT>
static __device__ __forceinline__ ChunkRange chunk_of(int b, int j, int split, long n, int len)
{
    const int E = Lanes<DT>::E;
    ChunkRange r;
    r.row0 = (long long)b * n;
    const long long v0 = r.row0 / E, v1 = (r.row0 + len + E - 1) / E, nv = v1 - v0;
    r.lo = v0 + nv * j / split;
    r.hi = v0 + nv * (j + 1) / split;
    return r;
}

/* Where a block's scores lie in its row: score e of chunk vector i is at position c0 + i E + e,
 * one of the row's (and the chunk's) when that position is in [lo, hi). 32-bit: a row has at
 * most TL_TOPK_MAX_N positions. */
struct ChunkPos {
    int c0, lo, hi;
    __device__ __forceinline__ bool valid(int pos) const { return (unsigned)(pos - lo) < (unsigned)(hi - lo); }
};
template <int DT>
static __device__ __forceinline__ ChunkPos chunk_pos(const ChunkRange &r, int len)
{
    const int E = Lanes<DT>::E;
    ChunkPos l;
    l.c0 = (int)(r.lo * E - r.row0);
    const int c1 = (int)(r.hi * E - r.row0);
    l.lo = l.c0 > 0 ? l.c0 : 0;
    l.hi = c1 < len ? c1 : len;
    return l;
}

/* Loads the chunk's vectors (TL_TOPK_VECS a thread in flight), turns them into keys and stores
 * them at keys[0, cv); a lane that holds none of the chunk's positions gets key 0 (NaN's, the
 * lowest). Returns this thread's count of such lanes: the passes take them out of digit 0, and
 * the gather never places them. */
template <int DT>
static __device__ uint32_t load_chunk(const uint4 *vec, const ChunkRange &r, const ChunkPos &l, int cv, uint4 *keys)
{
    const int E = Lanes<DT>::E, x = tl_thread_x();
    for (int t = 0; t < cv; t += U * NT) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long vi = r.lo + t + u * NT + x;
            v[u] = t + u * NT + x < cv && vi < r.hi ? tl_load_once(vec + vi) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            to_keys<DT>(v[u]);
            if (t + u * NT + x < cv) keys[t + u * NT + x] = v[u];
        }
    }
    /* the lanes outside [lo, hi): in the row's first vector and from the chunk's end on */
    uint32_t off = 0u;
#pragma unroll 1
    for (int i = x; i < cv; i += NT) {
        const int p0 = l.c0 + i * E;
        if (p0 >= l.lo && p0 + E <= l.hi) continue;
        uint32_t keep[4] = {~0u, ~0u, ~0u, ~0u}; /* the bits of each word that stay */
#pragma unroll
        for (int e = 0; e < E; e++) {
            if (l.valid(p0 + e)) continue;
            off++;
            if (DT == TL_TOPK_F32) keep[e] = 0u;
            else keep[e >> 1] &= (e & 1) ? 0x0000FFFFu : 0xFFFF0000u;
        }
        const uint4 v = keys[i];
        keys[i] = make_uint4(v.x & keep[0], v.y & keep[1], v.z & keep[2], v.w & keep[3]);
    }
    return off;
}

/* ---- block-wide steps ---- */
/* Exclusive prefix sum over the block's NT threads, in thread order; *total gets the block's sum.
 * Every thread calls it. ws: NW + 1 words of shared memory. Cost: 2 x log2(TL_WAVE) shuffles, 3
 * barriers (the last lets the caller reuse ws). */
static __device__ __forceinline__ uint32_t block_excl_scan(uint32_t v, uint32_t *ws, uint32_t *total)
{
    const int lane = tl_lane(), w = tl_wave_id();
    uint32_t inc = v;
#pragma unroll
    for (int off = 1; off < TL_WAVE; off <<= 1) {
        const uint32_t o = tl_shfl(inc, lane >= off ? lane - off : lane);
        if (lane >= off) inc += o;
    }
    if (lane == TL_WAVE - 1) ws[w] = inc;
    tl_block_sync();
    if (w == 0) { /* NW <= TL_WAVE */
        const uint32_t t = lane < NW ? ws[lane] : 0u;
        uint32_t ti = t;
#pragma unroll
        for (int off = 1; off < TL_WAVE; off <<= 1) {
            const uint32_t o = tl_shfl(ti, lane >= off ? lane - off : lane);
            if (lane >= off) ti += o;
        }
        if (lane < NW) ws[lane] = ti - t;
        if (lane == NW - 1) ws[NW] = ti;
    }
    tl_block_sync();
    const uint32_t r = ws[w] + inc - v;
    *total = ws[NW];
    tl_block_sync();
    return r;
}

/* Sum over the block; every thread gets it. ws: NW words. Cost: log2(TL_WAVE) shuffles, 2 barriers. */
static __device__ __forceinline__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long *ws)
{
#pragma unroll
    for (int off = TL_WAVE / 2; off > 0; off >>= 1) v += tl_shfl_xor(v, off);
    if (tl_lane() == 0) ws[tl_wave_id()] = v;
    tl_block_sync();
    unsigned long long t = 0;
#pragma unroll
    for (int w = 0; w < NW; w++) t += ws[w];
    tl_block_sync();
    return t;
}

/* The barrier of one row's `split` blocks: returns when `target` arrivals have been counted on
 * *arrive (this block's included), every write the row's blocks made before arriving visible to
 * tl_load_relaxed_* (kernels/gpu.h; the arrival is a release, the poll an acquire). Safe from deadlock because a row's blocks wait only for one
 * another, blocks start in ticket order, and the launcher keeps split within the blocks the device
 * holds at once. Cost: an atomic and the polls of one thread, about one L2 round trip after the
 * last block arrives. */
static __device__ __forceinline__ void row_barrier(uint32_t *arrive, uint32_t target)
{
    tl_block_sync();
    if (tl_thread_x() == 0) {
        if (tl_atomic_add_release_u32(arrive, 1u) + 1u < target)
            while (tl_load_acquire_u32(arrive) < target) tl_spin_pause();
    }
    tl_block_sync();
}

/* The bin that holds the rem-th highest of the counted keys, scanning from the top digit. */
struct BinPick {
    uint32_t d, above, cnt; /* the bin, the keys in bins above it, the keys in it */
    int ok;                 /* 0 when the counts hold fewer than rem keys (a kernel bug) */
};
/* h: the pass's nb bins (256 <= nb <= TL_TOPK_BINS_32), in shared memory or (global) the row's
 * histogram in device memory. Every thread calls it and gets the same answer. */
static __device__ __forceinline__ BinPick pick_bin(const uint32_t *h, bool global, int nb, uint32_t rem,
                                                   uint32_t *ws, BinPick *sp)
{
    const int x = tl_thread_x(), per = nb >= NT ? nb / NT : 1; /* 256-bin passes: threads 0..255, one bin each */
    uint32_t mine[TL_TOPK_BINS_32 / NT], run = 0u;
#pragma unroll
    for (int q = 0; q < TL_TOPK_BINS_32 / NT; q++) { /* thread x: bins nb-1-x per .. nb-1-(x per+per-1), descending */
        mine[q] = 0u;
        if (q < per && x * per + q < nb) {
            const int d = nb - 1 - (x * per + q);
            mine[q] = global ? tl_load_relaxed_u32(h + d) : h[d];
            run += mine[q];
        }
    }
    if (x == 0) sp->ok = 0;
    uint32_t total, above = block_excl_scan(run, ws, &total); /* keys in the bins above this thread's */
#pragma unroll
    for (int q = 0; q < TL_TOPK_BINS_32 / NT; q++) {
        if (q < per && x * per + q < nb) {
            if (above < rem && rem <= above + mine[q]) { /* exactly one bin, when total >= rem */
                sp->d = (uint32_t)(nb - 1 - (x * per + q));
                sp->above = above;
                sp->cnt = mine[q];
                sp->ok = 1;
            }
            above += mine[q];
        }
    }
    tl_block_sync();
    return *sp;
}

/* Counts the keys of this thread's vectors (keys[x], keys[x + NT], ...) that match `prefix` on
 * the bits of `mask`, by their digit (shift, dmask), into the shared histogram h; runs of one
 * digit cost one atomic. off: the thread's lanes outside the chunk (key 0), taken back out of
 * digit 0. 16-bit keys are compared in place in their word (mask and prefix shifted to the half). */
template <int DT>
static __device__ __forceinline__ void count_digits(const uint4 *keys, int cv, uint32_t off, uint32_t mask,
                                                    uint32_t prefix, int shift, uint32_t dmask, uint32_t *h)
{
    const int E = Lanes<DT>::E;
    uint32_t run_d = 0u, run_n = 0u;
#pragma unroll 1
    for (int i = tl_thread_x(); i < cv; i += NT) {
        const uint4 v = keys[i];
#pragma unroll
        for (int e = 0; e < E; e++) {
            const int hs = DT == TL_TOPK_F32 ? 0 : (e & 1) * 16; /* the key's half */
            const int c = DT == TL_TOPK_F32 ? e : e >> 1;
            const uint32_t word = c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
            if ((word & (mask << hs)) == (prefix << hs)) {
                const uint32_t d = (word >> (shift + hs)) & dmask;
                if (d != run_d && run_n) {
                    atomicAdd(&h[run_d], run_n);
                    run_n = 0u;
                }
                run_d = d;
                run_n++;
            }
        }
    }
    if (run_n) atomicAdd(&h[run_d], run_n);
    if (off && prefix == 0u) atomicSub(&h[0], off);
}

/* A slot's (vector's) keys above the threshold and equal to it (on the bits of mask), packed
 * (above << 16 | equal); its scores are at positions pos0 + e (a lane outside the chunk has key
 * 0: never above, equal only to a threshold of 0, where its position tells). */
template <int DT>
static __device__ __forceinline__ uint32_t slot_counts(const uint4 &v, const ChunkPos &l, int pos0, uint32_t mask,
                                                       uint32_t prefix)
{
    uint32_t pk = 0u;
#pragma unroll
    for (int e = 0; e < Lanes<DT>::E; e++) {
        const uint32_t km = key_at<DT>(v, e) & mask;
        pk += (uint32_t)(km > prefix) << 16;
        if (km == prefix && (prefix != 0u || l.valid(pos0 + e))) pk++;
    }
    return pk;
}

/* The row's c ranks sorted in shared memory s (kp >= c entries, a power of two), descending; the
 * indices they carry written to o[0, c). Bitonic: log2(kp)(log2(kp)+1)/2 steps, a barrier each. */
static __device__ void sort_ranks_out(unsigned long long *s, int kp, int c, int32_t *o)
{
    const int x = tl_thread_x();
    for (int size = 2; size <= kp; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int t = x; t < kp / 2; t += NT) {
                const int i = 2 * t - (t & (stride - 1)), i2 = i + stride;
                const unsigned long long a = s[i], a2 = s[i2];
                if ((i & size) == 0 ? a < a2 : a > a2) { /* descending runs where bit `size` of i is 0 */
                    s[i] = a2;
                    s[i2] = a;
                }
            }
            tl_block_sync();
        }
    for (int i = x; i < c; i += NT) o[i] = (int32_t)(0xFFFFFFFFu - (uint32_t)s[i]);
}

/* ---- the kernel ---- */
struct Pass {
    int shift, bits;
};
/* Radix pass p's digit: float32 keys (21, 11), (10, 11), (0, 10); 16-bit keys (8, 8), (0, 8). */
template <int DT>
static __device__ __forceinline__ Pass pass_of(int p)
{
    Pass ps;
    if (DT == TL_TOPK_F32) {
        ps.bits = p < 2 ? 11 : 10;
        ps.shift = p < 2 ? 21 - 11 * p : 0;
    } else {
        ps.bits = 8;
        ps.shift = 8 - 8 * p;
    }
    return ps;
}

/* Places the chunk's taken keys: a key above the threshold (on the bits of mask), or a tie among
 * the rem of lowest index across the row, goes to output position = the row's taken keys of lower
 * index. g_before, e_before: the keys above and equal in the lower chunks. Tiles of U x NT
 * vectors, each scanned over the block in index order (packed above << 16 | equal counts). */
template <int DT>
static __device__ void place_chunk(const uint4 *keys, int cv, const ChunkPos &l, uint32_t mask, uint32_t prefix,
                                   uint32_t rem, uint32_t g_before, uint32_t e_before, int sorted, int32_t *out_idx,
                                   unsigned long long *out_rank, uint32_t *sh_slot, uint32_t *ws)
{
    const int E = Lanes<DT>::E, x = tl_thread_x();
    uint32_t g_run = g_before, e_run = e_before;
    for (int t = 0; t < cv; t += U * NT) {
        uint32_t mine = 0u;
#pragma unroll 1
        for (int u = 0; u < U; u++) {
            const int i = t + u * NT + x;
            const uint32_t pk = i < cv ? slot_counts<DT>(keys[i], l, l.c0 + i * E, mask, prefix) : 0u;
            sh_slot[u * NT + x] = pk;
            mine |= pk;
        }
        tl_block_sync();
        uint32_t run = 0u;
#pragma unroll
        for (int q = 0; q < U; q++) { /* thread x's run of slots x U .. x U + U - 1, exclusive */
            const uint32_t c1 = sh_slot[x * U + q];
            sh_slot[x * U + q] = run;
            run += c1;
        }
        uint32_t tile;
        const uint32_t before = block_excl_scan(run, ws, &tile);
#pragma unroll
        for (int q = 0; q < U; q++) sh_slot[x * U + q] += before;
        tl_block_sync();
        if (mine) {
#pragma unroll 1
            for (int u = 0; u < U; u++) {
                const int i = t + u * NT + x;
                if (i >= cv) break;
                const uint32_t sc = sh_slot[u * NT + x];
                uint32_t gi = g_run + (sc >> 16), qi = e_run + (sc & 0xFFFFu);
                const uint4 v = keys[i];
#pragma unroll
                for (int e = 0; e < E; e++) {
                    const int pos = l.c0 + i * E + e;
                    const uint32_t key = key_at<DT>(v, e), km = key & mask;
                    if (km < prefix || (km == prefix && prefix == 0u && !l.valid(pos))) continue;
                    if (km > prefix || qi < rem) {
                        const uint32_t o = gi + (qi < rem ? qi : rem);
                        if (sorted) out_rank[o] = rank_of(key, pos);
                        else out_idx[o] = pos;
                    }
                    gi += km > prefix;
                    qi += km == prefix;
                }
            }
        }
        g_run += tile >> 16;
        e_run += tile & 0xFFFFu;
        tl_block_sync(); /* sh_slot is rewritten by the next tile */
    }
}

/* The chunk's keys above the threshold and equal to it (on the bits of mask), packed as
 * (above << 32 | equal), summed over the block. */
template <int DT>
static __device__ unsigned long long chunk_counts(const uint4 *keys, int cv, const ChunkPos &l, uint32_t mask,
                                                  uint32_t prefix, unsigned long long *ws64)
{
    const int E = Lanes<DT>::E;
    unsigned long long ge = 0;
    for (int i = tl_thread_x(); i < cv; i += NT) {
        const uint32_t pk = slot_counts<DT>(keys[i], l, l.c0 + i * E, mask, prefix);
        ge += (unsigned long long)(pk >> 16) << 32 | (pk & 0xFFFFu);
    }
    return block_sum_u64(ge, ws64);
}

/* B x split blocks (with split > 1 the row and chunk of a block come from its ticket; with split 1
 * block b is row b), cv vectors a chunk at most. Row b's length: lens[b], or (lens NULL) n, or
 * under `causal` n - (B - 1 - b). Dynamic shared memory: tl_topk_block_smem(). With trace, each
 * block's thread 0 records TOPK_TRACE_WORDS words at trace[t TOPK_TRACE_WORDS] (t = b split + j):
 * the device clock (tl_gpu_clock) at entry, its SM, then its cycle counter at each TopkTrace
 * point. What it does: kernels/topk.h. */
template <int DT>
__global__ void __launch_bounds__(NT, TL_LAUNCH_MIN_BLOCKS(2))
    topk_rows(const uint4 *scores, long n, const int32_t *lens, int causal, int k, int sorted, int split, int cv,
              uint32_t *ticket, TopkSync *sync, uint32_t *hist, uint2 *chunk, unsigned long long *cand, int32_t *idx,
              int32_t *count, unsigned long long *trace)
{
    TL_SHARED_DYNAMIC(16, uint4, smem_raw);
    uint4 *keys = smem_raw;                                        /* cv vectors */
    uint32_t *work = (uint32_t *)(smem_raw + cv);                  /* the histogram, or the slots' scan */
    unsigned long long *sh_sort = (unsigned long long *)smem_raw;  /* the last block's sort (reuses all) */
    TL_SHARED(uint32_t, ws, [NW + 1]);
    TL_SHARED(unsigned long long, ws64, [NW]);
    TL_SHARED(BinPick, pick, );
    TL_SHARED(uint32_t, s_ticket, ); TL_SHARED(uint32_t, s_last, );
    TL_SHARED(unsigned long long, s_tr, [TL_TOPK_TRACE_POINTS]);
#define TRACE_AT(i)                                                                                                    \
    do {                                                                                                               \
        if (trace && x == 0) s_tr[i] = tl_cycles();                                                                    \
    } while (0)

    const int x = tl_thread_x(), E = Lanes<DT>::E;
    unsigned long long t_entry = 0;
    if (trace && x == 0) {
        t_entry = tl_gpu_clock();
        for (int i = 0; i < TL_TOPK_TRACE_POINTS; i++) s_tr[i] = 0;
    }
    TRACE_AT(TL_TOPK_TRACE_ENTRY);
    if (split > 1) { /* a row's blocks wait for one another: they start in ticket order */
        if (x == 0) s_ticket = tl_atomic_inc_wrap_u32(ticket, tl_grid_x() - 1u); /* wraps to 0 after the last block */
        tl_block_sync();
    }
    const uint32_t tk = split > 1 ? s_ticket : tl_block_x();
    const int b = (int)(tk / (uint32_t)split), j = (int)(tk % (uint32_t)split);
    long lrow = lens ? (long)lens[b] : causal ? n - (long)(tl_grid_x() / (uint32_t)split - 1u - (uint32_t)b) : n;
    const int len = lrow > 0 ? (int)lrow : 0, c = len < k ? len : k;
    const ChunkRange r = chunk_of<DT>(b, j, split, n, len);
    const ChunkPos l = chunk_pos<DT>(r, len);
    const uint32_t off = load_chunk<DT>(scores, r, l, cv, keys);
    tl_block_sync();
    TRACE_AT(TL_TOPK_TRACE_LOADED);
    TopkSync *rs = sync + b;
    const int bins_row = DT == TL_TOPK_F32 ? TL_TOPK_BINS_32 : TL_TOPK_BINS_16;
    uint32_t *gh = hist + (size_t)b * (DT == TL_TOPK_F32 ? TL_TOPK_PASSES_32 : TL_TOPK_PASSES_16) * bins_row;
    int32_t *out_idx = idx + (size_t)b * k;
    unsigned long long *out_rank = cand + (size_t)b * k;
    int bad = 0, passes_run = 0;

    if (len <= k) { /* the row takes every position: rank = position */
        for (int i = x; i < cv; i += NT) {
            const uint4 v = keys[i];
#pragma unroll
            for (int e = 0; e < E; e++) {
                const int pos = l.c0 + i * E + e;
                if (!l.valid(pos)) continue;
                if (sorted) out_rank[pos] = rank_of(key_at<DT>(v, e), pos);
                else out_idx[pos] = pos;
            }
        }
    } else {
        /* the radix passes: the threshold key's digits, most significant first */
        const int np = DT == TL_TOPK_F32 ? TL_TOPK_PASSES_32 : TL_TOPK_PASSES_16;
        uint32_t prefix = 0u, mask = 0u, rem = (uint32_t)k, gt = 0u;
#pragma unroll 1
        for (int p = 0; p < np; p++) {
            const Pass ps = pass_of<DT>(p);
            const int nb = 1 << ps.bits;
            for (int d = x; d < nb; d += NT) work[d] = 0u;
            tl_block_sync();
            count_digits<DT>(keys, cv, off, mask, prefix, ps.shift, (uint32_t)nb - 1u, work);
            tl_block_sync();
            TRACE_AT(TL_TOPK_TRACE_HIST0 + 2 * p);
            const uint32_t *h = work;
            if (split > 1) {
                uint32_t *g = gh + (size_t)p * bins_row;
                for (int d = x; d < nb; d += NT)
                    if (work[d]) atomicAdd(&g[d], work[d]);
                row_barrier(&rs->arrive, (uint32_t)split * (uint32_t)(p + 1));
                h = g;
            }
            const BinPick bp = pick_bin(h, split > 1, nb, rem, ws, &pick);
            TRACE_AT(TL_TOPK_TRACE_SELECT0 + 2 * p);
            passes_run = p + 1;
            if (!bp.ok) {
                bad = 1;
                break;
            }
            prefix |= bp.d << ps.shift;
            mask |= ((uint32_t)nb - 1u) << ps.shift;
            gt += bp.above;
            rem -= bp.above;
            if (bp.cnt == rem) break; /* the bin is taken whole: no further digit matters */
        }
        if (!bad) {
            /* this chunk's keys above the threshold and equal to it; the lower chunks' */
            const unsigned long long mine = chunk_counts<DT>(keys, cv, l, mask, prefix, ws64);
            unsigned long long lo = 0, all = mine;
            if (split > 1) {
                if (x == 0) chunk[(size_t)b * split + j] = make_uint2((uint32_t)(mine >> 32), (uint32_t)mine);
                row_barrier(&rs->arrive, (uint32_t)split * (uint32_t)(passes_run + 1));
                all = 0;
                for (int i = x; i < split; i += NT) {
                    const unsigned long long w = tl_load_relaxed_u64((const uint64_t *)(chunk + (size_t)b * split + i));
                    const unsigned long long ge = (w & 0xFFFFFFFFull) << 32 | w >> 32; /* (above << 32 | equal) */
                    all += ge;
                    if (i < j) lo += ge;
                }
                lo = block_sum_u64(lo, ws64);
                all = block_sum_u64(all, ws64);
            }
            TRACE_AT(TL_TOPK_TRACE_COUNTED);
            bad = (uint32_t)(all >> 32) != gt || (uint32_t)all < rem || rem < 1u;
            if (!bad && mine != 0)
                place_chunk<DT>(keys, cv, l, mask, prefix, rem, (uint32_t)(lo >> 32), (uint32_t)lo, sorted, out_idx,
                                out_rank, work, ws);
        }
    }
    TRACE_AT(TL_TOPK_TRACE_PLACED);
    if (j == 0) {
        for (int i = c + x; i < k; i += NT) out_idx[i] = -1;
        if (x == 0) count[b] = bad ? -1 : c;
    }
    /* the row's last block: the sorted output, then the row's state zeroed for the next launch */
    tl_block_sync();
    if (x == 0) {
        s_last = 1u;
        if (split > 1) s_last = tl_atomic_add_acq_rel_u32(&rs->done, 1u) == (uint32_t)split - 1u;
    }
    tl_block_sync();
    if (s_last) {
        if (sorted && !bad && c > 0) {
            const int kp = tl_topk_pow2(c);
            for (int i = x; i < kp; i += NT) /* padding 0: below every real rank (their low words are ~index > 0) */
                sh_sort[i] = i < c ? tl_load_relaxed_u64((const uint64_t *)out_rank + i) : 0ull;
            tl_block_sync();
            sort_ranks_out(sh_sort, kp, c, out_idx);
        }
        if (split > 1) {
            for (int i = x; i < passes_run * bins_row; i += NT) gh[i] = 0u;
            if (x == 0) {
                rs->arrive = 0u;
                rs->done = 0u;
            }
        }
    }
    TRACE_AT(TL_TOPK_TRACE_END);
    if (trace && x == 0) {
        unsigned long long *w = trace + (size_t)tk * TOPK_TRACE_WORDS;
        w[0] = t_entry;
        w[1] = (unsigned long long)tl_gpu_sm_id();
        for (int i = 0; i < TL_TOPK_TRACE_POINTS; i++) /* a point not reached (a pass not made): the one before */
            w[2 + i] = s_tr[i] ? s_tr[i] : (i ? w[1 + i] : 0);
    }
#undef TRACE_AT
}

/* ---- the stream path ---- */
#define SU TL_TOPK_STREAM_VECS
/* A block's candidate buffer (shared memory): ranks cand[0, n) (n may pass cap while a tile
 * overflows it: the ranks past cap were not stored), every one of them above tau; keep: the
 * destination of a cut (kp ranks). */
struct StreamBuf {
    unsigned long long *cand, *keep;
    uint32_t *hist;
    int cap, k;
};
struct StreamShared {
    uint32_t n, kept, bad;
    unsigned long long tau;
    uint32_t ws[NW + 1];
    BinPick pick;
};

/* Appends rank r (when take) to buf[*counter ...]: one atomic a wave. Every lane of the wave calls
 * it. Returns the slot, or ~0u when not take. */
static __device__ __forceinline__ uint32_t wave_append(bool take, uint32_t *counter)
{
    const unsigned long long m = (unsigned long long)tl_ballot(take);
    if (!m) return ~0u;
    const unsigned long long below = (1ull << tl_lane()) - 1ull;
    uint32_t base = 0u;
    if (tl_lane() == 0) base = atomicAdd(counter, (uint32_t)tl_popc(m));
    base = tl_shfl(base, 0);
    return take ? base + (uint32_t)tl_popc(m & below) : ~0u;
}

/* Cuts the buffer's min(n, cap) ranks to their best k (exactly k: ranks are distinct): a radix
 * select over the 64-bit ranks, 11/11/10 bits a half, most significant first, ending when the
 * bin holding the k-th is taken whole; the ranks at or above the resolved prefix move to keep
 * and back. Afterwards n = k and tau = the prefix (at or below every kept rank, above every rank
 * cut). Every thread calls it. Cost: per pass a cleared histogram, one shared atomic a rank and a
 * scan; then two copies of k ranks. */
static __device__ void stream_cut(const StreamBuf &b, StreamShared *sh)
{
    const int x = tl_thread_x();
    const int m = sh->n < (uint32_t)b.cap ? (int)sh->n : b.cap;
    unsigned long long prefix = 0ull, mask = 0ull;
    uint32_t rem = (uint32_t)b.k;
#pragma unroll 1
    for (int p = 0; p < 6; p++) {
        const int bits = p % 3 == 2 ? 10 : 11;
        const int shift = p < 3 ? 53 - 11 * p + (p == 2) : 21 - 11 * (p - 3) + (p == 5); /* 53 42 32 21 10 0 */
        const int nb = 1 << bits;
        for (int d = x; d < nb; d += NT) b.hist[d] = 0u;
        tl_block_sync();
        for (int i = x; i < m; i += NT) {
            const unsigned long long r = b.cand[i];
            if ((r & mask) == prefix) atomicAdd(&b.hist[(uint32_t)(r >> shift) & (uint32_t)(nb - 1)], 1u);
        }
        tl_block_sync();
        const BinPick bp = pick_bin(b.hist, false, nb, rem, sh->ws, &sh->pick);
        if (!bp.ok) {
            if (x == 0) sh->bad = 1u;
            break;
        }
        prefix |= (unsigned long long)bp.d << shift;
        mask |= (unsigned long long)(nb - 1) << shift;
        rem -= bp.above;
        if (bp.cnt == rem) break;
    }
    if (x == 0) sh->kept = 0u;
    tl_block_sync();
    for (int i0 = 0; i0 < m; i0 += NT) { /* wave-uniform trip count: wave_append needs every lane */
        const int i = i0 + x;
        const unsigned long long r = i < m ? b.cand[i] : 0ull;
        const bool take = i < m && (r & mask) >= prefix;
        const uint32_t slot = wave_append(take, &sh->kept);
        if (take) b.keep[slot] = r;
    }
    tl_block_sync();
    const uint32_t kept = sh->kept;
    for (uint32_t i = (uint32_t)x; i < kept; i += NT) b.cand[i] = b.keep[i];
    tl_block_sync();
    if (x == 0) {
        if (kept != (uint32_t)b.k) sh->bad = 1u;
        sh->n = kept;
        sh->tau = prefix;
    }
    tl_block_sync();
}

/* Offers M ranks a thread (rank(e) for e < M; 0 is none) to the buffer: those above tau enter;
 * when the buffer overflows, it is cut (stream_cut) and the ranks that did not get in are offered
 * again against the raised threshold. Every thread calls it with the same M. */
template <int M, class RankFn>
static __device__ __forceinline__ void stream_offer(const StreamBuf &b, StreamShared *sh, RankFn rank)
{
    static_assert(M <= 64, "one bit a rank");
    unsigned long long tau = sh->tau, pend = 0ull;
#pragma unroll
    for (int e = 0; e < M; e++) pend |= (unsigned long long)(rank(e) > tau) << e;
    for (;;) {
#pragma unroll
        for (int e = 0; e < M; e++) {
            const bool take = (pend >> e) & 1ull;
            const uint32_t slot = wave_append(take, &sh->n);
            if (take && slot < (uint32_t)b.cap) {
                b.cand[slot] = rank(e);
                pend &= ~(1ull << e);
            }
        }
        tl_block_sync();
        const uint32_t n = sh->n;
        tl_block_sync(); /* every thread has read n before the next appends or the cut change it */
        if (n <= (uint32_t)b.cap) break;
        stream_cut(b, sh);
        tau = sh->tau;
#pragma unroll
        for (int e = 0; e < M; e++)
            if (((pend >> e) & 1ull) && !(rank(e) > tau)) pend &= ~(1ull << e);
    }
}

/* The buffer's ranks cut to at most k, then written out: sorted, the indices by rank descending;
 * else by index ascending (the low words sorted descending). o: the row's k indices, -1 past c;
 * *count: c, or -1 when the buffer does not hold exactly c ranks (a kernel bug). */
static __device__ void stream_finish(const StreamBuf &b, StreamShared *sh, int c, int sorted, int32_t *o, int32_t *count)
{
    const int x = tl_thread_x();
    if (sh->n > (uint32_t)b.k) stream_cut(b, sh);
    const int have = (int)sh->n;
    const int kp = tl_topk_pow2(have);
    for (int i = x; i < kp; i += NT) {
        const unsigned long long r = i < have ? b.cand[i] : 0ull;
        b.cand[i] = sorted ? r : (r & 0xFFFFFFFFull);
    }
    tl_block_sync();
    if (have > 0) sort_ranks_out(b.cand, kp, have < c ? have : c, o);
    for (int i = c + x; i < b.k; i += NT) o[i] = -1;
    if (x == 0) *count = have == c && !sh->bad ? c : -1;
}

/* B x split blocks, block t = b split + j taking chunk j of row b (the resident path's chunks);
 * cand: [B][split][k] ranks, each block's best k (0 past its count), read by the row's last
 * block when split > 1; sync[b].done counts the row's finished blocks (left zero). Dynamic shared
 * memory: tl_topk_stream_smem_cap(k, cap), cap = tl_topk_stream_cap_fit(k, the device's limit). What it
 * does: contract/topk.h's TL_TOPK_STREAM. */
template <int DT>
__global__ void __launch_bounds__(NT, TL_LAUNCH_MIN_BLOCKS(2))
    topk_stream(const uint4 *scores, long n, const int32_t *lens, int causal, int k, int cap, int sorted, int split,
                TopkSync *sync, unsigned long long *cand, int32_t *idx, int32_t *count)
{
    TL_SHARED_DYNAMIC(8, unsigned long long, smem_u64);
    TL_SHARED(StreamShared, sh, );
    TL_SHARED(uint32_t, s_last, );
    const int x = tl_thread_x(), E = Lanes<DT>::E;
    StreamBuf buf;
    buf.k = k;
    buf.cap = cap;
    buf.cand = smem_u64;
    buf.keep = smem_u64 + buf.cap;
    buf.hist = (uint32_t *)(smem_u64 + buf.cap + tl_topk_pow2(k));
    const uint32_t t = tl_block_x();
    const int b = (int)(t / (uint32_t)split), j = (int)(t % (uint32_t)split);
    const long lrow = lens ? (long)lens[b] : causal ? n - (long)(tl_grid_x() / (uint32_t)split - 1u - (uint32_t)b) : n;
    const int len = lrow > 0 ? (int)lrow : 0, c = len < k ? len : k;
    if (x == 0) {
        sh.n = 0u;
        sh.bad = 0u;
        sh.tau = 0ull; /* every rank is above 0: its low word is ~index >= 2^31 */
    }
    tl_block_sync();
    const ChunkRange r = chunk_of<DT>(b, j, split, n, len);
    const ChunkPos l = chunk_pos<DT>(r, len);
    const long long nv = r.hi - r.lo;
    for (long long t0 = 0; t0 < nv; t0 += SU * NT) {
        uint4 v[SU];
#pragma unroll
        for (int u = 0; u < SU; u++) {
            const long long i = t0 + u * NT + x;
            v[u] = i < nv ? tl_load_once(scores + r.lo + i) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < SU; u++) to_keys<DT>(v[u]);
        stream_offer<SU * Lanes<DT>::E>(buf, &sh, [&](int e) -> unsigned long long {
            const int u = e / E, q = e % E;
            const long long i = t0 + u * NT + x;
            const int pos = l.c0 + (int)i * E + q;
            return i < nv && l.valid(pos) ? rank_of(key_at<DT>(v[u], q), pos) : 0ull;
        });
    }
    int32_t *out = idx + (size_t)b * k;
    if (split == 1) {
        stream_finish(buf, &sh, c, sorted, out, count + b);
        return;
    }
    /* this chunk's best k to the row's merge area, then the row's last block merges them */
    if (sh.n > (uint32_t)k) stream_cut(buf, &sh);
    unsigned long long *mine = cand + ((size_t)b * split + j) * k;
    const int have = (int)sh.n;
    for (int i = x; i < k; i += NT) mine[i] = i < have ? buf.cand[i] : 0ull;
    tl_block_sync();
    if (x == 0) s_last = tl_atomic_add_acq_rel_u32(&sync[b].done, 1u) == (uint32_t)split - 1u;
    tl_block_sync();
    if (!s_last) return;
    const uint32_t bad = sh.bad;
    if (x == 0) {
        sh.n = 0u;
        sh.bad = bad;
        sh.tau = 0ull;
        sync[b].done = 0u;
    }
    tl_block_sync();
    const unsigned long long *row = cand + (size_t)b * split * k;
    const long long all = (long long)split * k;
    for (long long t0 = 0; t0 < all; t0 += 8 * NT)
        stream_offer<8>(buf, &sh, [&](int e) -> unsigned long long {
            const long long i = t0 + (long long)e * NT + x;
            return i < all ? tl_load_relaxed_u64((const uint64_t *)row + i) : 0ull;
        });
    stream_finish(buf, &sh, c, sorted, out, count + b);
}

/* ---- the launch wrapper ---- */
template <int DT>
static int resident_dt(const tl_topk_shape *s, int split, int *blocks)
{
    int dev = 0, sms = 0, per = 0;
    const size_t smem = tl_topk_block_smem(s->dtype, s->n, split, s->sorted, s->k);
    TL_GPU_CHECK(hipGetDevice(&dev));
    TL_GPU_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev));
    TL_GPU_CHECK(hipFuncSetAttribute((const void *)topk_rows<DT>, hipFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    TL_GPU_CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per, topk_rows<DT>, NT, smem));
    *blocks = per * sms;
    return 0;
}

int tl_topk_resident_blocks(const tl_topk_shape *s, int split, int *blocks)
{
    *blocks = 0;
    int dev = 0, v = 0;
    TL_GPU_CHECK(hipGetDevice(&dev));
    TL_GPU_CHECK(hipDeviceGetAttribute(&v, hipDeviceAttributeMaxSharedMemoryPerBlock, dev));
    if (tl_topk_block_smem(s->dtype, s->n, split, s->sorted, s->k) > (size_t)v) return 0; /* the chunk does not fit */
    switch (s->dtype) {
    case TL_TOPK_F32: return resident_dt<TL_TOPK_F32>(s, split, blocks);
    case TL_TOPK_BF16: return resident_dt<TL_TOPK_BF16>(s, split, blocks);
    case TL_TOPK_F16: return resident_dt<TL_TOPK_F16>(s, split, blocks);
    default: return tl_error(TL_EUSAGE, "topk gpu", "unknown score type");
    }
}

template <int DT>
static int launch_dt(const tl_topk_shape *s, const TopkBuffers &f, const tl_topk_plan &plan, hipStream_t st)
{
    const int split = plan.split;
    const unsigned blocks = (unsigned)s->batch * (unsigned)split;
    if (plan.path == TL_TOPK_STREAM) {
        int dev = 0, limit = 0;
        TL_GPU_CHECK(hipGetDevice(&dev));
        TL_GPU_CHECK(hipDeviceGetAttribute(&limit, hipDeviceAttributeMaxSharedMemoryPerBlock, dev));
        const int cap = tl_topk_stream_cap_fit(s->k, (size_t)limit);
        if (!cap)
            return tl_error(TL_EUSAGE, "topk gpu", "the stream path's buffer for k = %d does not fit this device's %d bytes of shared memory",
                            s->k, limit);
        const size_t smem = tl_topk_stream_smem_cap(s->k, cap);
        TL_GPU_CHECK(hipFuncSetAttribute((const void *)topk_stream<DT>, hipFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem));
        (void)tl_launch(topk_stream<DT>, blocks, NT, smem, st, false, (const uint4 *)f.scores, s->n, f.lens, s->causal, s->k, cap, s->sorted,
                                                  split, f.sync, (unsigned long long *)f.merge, f.idx, f.count);
        TL_GPU_CHECK_LAUNCH("topk_stream");
        return 0;
    }
    const int cv = (int)tl_topk_chunk_vecs(s->dtype, s->n, split);
    const size_t smem = tl_topk_block_smem(s->dtype, s->n, split, s->sorted, s->k);
    (void)tl_launch(topk_rows<DT>, blocks, NT, smem, st, false, (const uint4 *)f.scores, s->n, f.lens, s->causal, s->k, s->sorted, split,
                                            cv, f.ticket, f.sync, f.hist, f.chunk, (unsigned long long *)f.cand,
                                            f.idx, f.count, f.trace);
    TL_GPU_CHECK_LAUNCH("topk_rows");
    return 0;
}

int tl_topk_launch(const tl_topk_shape *s, const TopkBuffers &f, const tl_topk_plan &plan, hipStream_t st)
{
    switch (s->dtype) {
    case TL_TOPK_F32: return launch_dt<TL_TOPK_F32>(s, f, plan, st);
    case TL_TOPK_BF16: return launch_dt<TL_TOPK_BF16>(s, f, plan, st);
    case TL_TOPK_F16: return launch_dt<TL_TOPK_F16>(s, f, plan, st);
    default: return tl_error(TL_EUSAGE, "topk gpu", "unknown score type");
    }
}
