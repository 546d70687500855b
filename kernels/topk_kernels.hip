/* kernels/topk_kernels.hip: the exact top-k kernels (what each does: kernels/topk.h) and their
 * launch wrapper tl_topk_launch (kernels/topk_launch.h).
 *
 * Chunks. A row's positions [0, len) lie at elements [b n, b n + len) of the scores; the 16-byte
 * vectors that hold any of them, [v0, v1), are cut into `split` contiguous chunks in index order,
 * chunk j = [v0 + nv j / split, v0 + nv (j + 1) / split). A vector at the edge of a row also holds
 * positions of the neighbouring row (or the allocation's padding): their lanes are masked, never
 * counted. Tiles: a block reads TOPK_U (the gather: GATHER_U) x TOPK_THREADS vectors at a time, vector u x TOPK_THREADS + x
 * of the tile by thread x, so the tile's index order is (u, thread, lane).
 * Keys: numerics/keys.h (float32: 32-bit keys; bfloat16, float16: 16-bit keys).
 */
#include "topk_launch.h"

#define NT TOPK_THREADS
#define NW (TOPK_THREADS / TL_WAVE)

/* ---- keys ---- */
/* Scores a 16-byte vector holds: 4 float32 or 8 16-bit scores. */
template <int DT> struct Lanes { enum { E = DT == TL_TOPK_F32 ? 4 : 8 }; };

/* The key of score e of vector v (e a compile-time constant after unrolling). */
template <int DT>
static __device__ __forceinline__ uint32_t vec_key(const uint4 &v, int e)
{
    const int c = DT == TL_TOPK_F32 ? e : e >> 1;
    const uint32_t w = c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
    if (DT == TL_TOPK_F32) return tl_key_f32(w);
    const uint16_t h = (uint16_t)((e & 1) ? w >> 16 : w & 0xFFFFu);
    return DT == TL_TOPK_BF16 ? tl_key_bf16(h) : tl_key_f16(h);
}

/* The key of element g of the scores (scalar). */
template <int DT>
static __device__ __forceinline__ uint32_t elem_key(const void *scores, long long g)
{
    if (DT == TL_TOPK_F32) return tl_key_f32(((const uint32_t *)scores)[g]);
    const uint16_t h = ((const uint16_t *)scores)[g];
    return DT == TL_TOPK_BF16 ? tl_key_bf16(h) : tl_key_f16(h);
}

/* contract/topk.h's tl_topk_rank (host-only there): larger ranks higher, the lower index winning. */
static __device__ __forceinline__ uint64_t rank_of(uint32_t key, int pos)
{
    return (uint64_t)key << 32 | (uint64_t)(0xFFFFFFFFu - (uint32_t)pos);
}

/* ---- chunks and tiles ---- */
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

/* Loads the tile at `base` of the chunk (U vectors a thread: TOPK_U, or GATHER_U in topk_gather):
 * vector u of this thread is base + u NT + threadIdx.x
 * (zero past the chunk: those lanes are masked by tile_pos). */
template <int U>
static __device__ __forceinline__ void load_tile(const uint4 *vec, long long base, long long hi, uint4 (&v)[U])
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        const long long vi = base + (long long)u * NT + threadIdx.x;
        v[u] = vi < hi ? vec[vi] : make_uint4(0u, 0u, 0u, 0u);
    }
}
/* The row position of lane 0 of this thread's vector u in the tile at `base`, or a position the
 * masks reject (-2^30) when that vector lies past the chunk. */
template <int DT>
static __device__ __forceinline__ int tile_pos(const ChunkRange &r, long long base, int u)
{
    const long long vi = base + (long long)u * NT + threadIdx.x;
    return vi < r.hi ? (int)(vi * Lanes<DT>::E - r.row0) : -(1 << 30);
}

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
    __syncthreads();
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
    __syncthreads();
    const uint32_t r = ws[w] + inc - v;
    *total = ws[NW];
    __syncthreads();
    return r;
}

/* ---- the kernels ---- */
/* One block per row: the row's state; its histogram zeroed. */
__global__ void __launch_bounds__(NT) topk_init(const int32_t *lens, int k, TopkRow *rows, uint32_t *hist,
                                                 int hist_stride)
{
    const int b = blockIdx.x;
    uint32_t *h = hist + (size_t)b * hist_stride;
    for (int d = threadIdx.x; d < hist_stride; d += NT) h[d] = 0u;
    if (threadIdx.x == 0) {
        TopkRow st;
        st.len = lens[b];
        st.c = st.len < k ? st.len : k;
        st.prefix = 0u;
        st.rem = st.c;
        st.gt = 0;
        st.flags = st.len <= k ? TOPK_ROW_ALL : 0;
        rows[b] = st;
    }
}

/* split blocks per row (block b split + j: row b, chunk j): the chunk's keys that match the row's
 * prefix on the bits above the digit (shift, bits), counted by digit, added into the row's
 * histogram. */
template <int DT>
__global__ void __launch_bounds__(NT) topk_hist(const uint4 *scores, long n, int split, const TopkRow *rows,
                                                 uint32_t *hist, int hist_stride, int shift, int bits)
{
    __shared__ uint32_t sh[TOPK_BINS_F32];
    const int b = blockIdx.x / split, j = blockIdx.x % split;
    const TopkRow st = rows[b];
    if (st.flags) return; /* the whole block */
    const int nb = 1 << bits;
    for (int d = threadIdx.x; d < nb; d += NT) sh[d] = 0u;
    __syncthreads();
    const int top = shift + bits;
    const uint32_t mask = top >= 32 ? 0u : ~0u << top, dmask = (uint32_t)nb - 1u;
    const ChunkRange r = chunk_of<DT>(b, j, split, n, st.len);
    for (long long base = r.lo; base < r.hi; base += (long long)TOPK_U * NT) {
        uint4 v[TOPK_U];
        load_tile(scores, base, r.hi, v);
#pragma unroll
        for (int u = 0; u < TOPK_U; u++) {
            const int p0 = tile_pos<DT>(r, base, u);
#pragma unroll
            for (int e = 0; e < Lanes<DT>::E; e++) {
                const uint32_t key = vec_key<DT>(v[u], e);
                const int pos = p0 + e;
                if (pos >= 0 && pos < st.len && (key & mask) == st.prefix) atomicAdd(&sh[(key >> shift) & dmask], 1u);
            }
        }
    }
    __syncthreads();
    uint32_t *h = hist + (size_t)b * hist_stride;
    for (int d = threadIdx.x; d < nb; d += NT) {
        const uint32_t c = sh[d];
        if (c) atomicAdd(&h[d], c);
    }
}

/* One block per row: the bin of digit (shift, bits) that holds the rem-th highest matching key,
 * scanning from the top digit; the row's prefix, gt and rem updated; the histogram zeroed. */
__global__ void __launch_bounds__(NT) topk_select(TopkRow *rows, uint32_t *hist, int hist_stride, int shift, int bits)
{
    __shared__ uint32_t ws[NW + 1];
    __shared__ int found_d;
    __shared__ uint32_t found_above;
    const int b = blockIdx.x, x = threadIdx.x;
    TopkRow st = rows[b];
    if (st.flags) return;
    const int nb = 1 << bits, per = nb / NT; /* 8, 4 or 1 bins a thread (bits >= 8) */
    uint32_t *h = hist + (size_t)b * hist_stride;
    uint32_t mine[TOPK_BINS_F32 / NT], run = 0u;
#pragma unroll
    for (int q = 0; q < TOPK_BINS_F32 / NT; q++) { /* thread x: bins nb-1-x per .. nb-1-(x per+per-1), descending */
        mine[q] = 0u;
        if (q < per) {
            const int d = nb - 1 - (x * per + q);
            mine[q] = h[d];
            h[d] = 0u;
            run += mine[q];
        }
    }
    if (x == 0) found_d = -1;
    uint32_t total, above = block_excl_scan(run, ws, &total); /* keys in the bins above this thread's */
    const uint32_t rem = (uint32_t)st.rem;
#pragma unroll
    for (int q = 0; q < TOPK_BINS_F32 / NT; q++) {
        if (q < per) {
            if (above < rem && rem <= above + mine[q]) { /* exactly one bin, when total >= rem */
                found_d = nb - 1 - (x * per + q);
                found_above = above;
            }
            above += mine[q];
        }
    }
    __syncthreads();
    if (x == 0) {
        if (found_d < 0) {
            st.flags |= TOPK_ROW_BAD;
        } else {
            st.prefix |= (uint32_t)found_d << shift;
            st.gt += (int32_t)found_above;
            st.rem -= (int32_t)found_above;
        }
        rows[b] = st;
    }
}

/* split blocks per row: chunk j's keys > T and == T (T: the row's prefix after the last pass). */
template <int DT>
__global__ void __launch_bounds__(NT) topk_count(const uint4 *scores, long n, int split, const TopkRow *rows, int2 *chunk)
{
    __shared__ int sg, se;
    const int b = blockIdx.x / split, j = blockIdx.x % split;
    const TopkRow st = rows[b];
    if (st.flags) return;
    if (threadIdx.x == 0) sg = se = 0;
    __syncthreads();
    const uint32_t T = st.prefix;
    const ChunkRange r = chunk_of<DT>(b, j, split, n, st.len);
    int g = 0, q = 0;
    for (long long base = r.lo; base < r.hi; base += (long long)TOPK_U * NT) {
        uint4 v[TOPK_U];
        load_tile(scores, base, r.hi, v);
#pragma unroll
        for (int u = 0; u < TOPK_U; u++) {
            const int p0 = tile_pos<DT>(r, base, u);
#pragma unroll
            for (int e = 0; e < Lanes<DT>::E; e++) {
                const uint32_t key = vec_key<DT>(v[u], e);
                const int pos = p0 + e;
                const bool ok = pos >= 0 && pos < st.len;
                g += ok && key > T;
                q += ok && key == T;
            }
        }
    }
    if (g) atomicAdd(&sg, g);
    if (q) atomicAdd(&se, q);
    __syncthreads();
    if (threadIdx.x == 0) chunk[(size_t)b * TL_TOPK_MAX_SPLIT + j] = make_int2(sg, se);
}

/* The gather's tile: 4 vectors a thread (8 held 224-256 VGPRs on gfx942; most tiles hold no key
 * to place and cost only their loads and one barrier). */
#define GATHER_U 4

/* split blocks per row: chunk j's keys > T to cand[b][gt_before + their rank in the chunk], its
 * ties to cand[b][gt + ties_before + their rank] while that rank is below need; ranks in index
 * order (a block-wide prefix sum of packed (gt << 16 | eq) counts per tile). */
template <int DT>
__global__ void __launch_bounds__(NT) topk_gather(const uint4 *scores, long n, int k, int split, const TopkRow *rows,
                                                   const int2 *chunk, uint64_t *cand)
{
    __shared__ uint32_t sh[GATHER_U * NT];
    __shared__ uint32_t ws[NW + 1];
    __shared__ int any_w[2][NW];
    const int b = blockIdx.x / split, j = blockIdx.x % split, x = threadIdx.x;
    const TopkRow st = rows[b];
    if (st.flags) return;
    const uint32_t T = st.prefix;
    const int need = st.rem, gt_all = st.gt;
    const int2 *ch = chunk + (size_t)b * TL_TOPK_MAX_SPLIT;
    int g_base = 0, e_base = 0; /* keys > T and == T in the chunks below j */
    for (int i = 0; i < j; i++) {
        const int2 c = ch[i];
        g_base += c.x;
        e_base += c.y;
    }
    const int2 mine = ch[j];
    if (mine.x == 0 && (mine.y == 0 || e_base >= need)) return;
    uint64_t *out = cand + (size_t)b * k;
    const ChunkRange r = chunk_of<DT>(b, j, split, n, st.len);
    int g_run = 0, e_run = 0, parity = 0; /* this chunk's keys > T and == T placed so far */
    for (long long base = r.lo; base < r.hi; base += (long long)GATHER_U * NT) {
        if (g_run == mine.x && (e_run == mine.y || e_base + e_run >= need)) break; /* uniform */
        uint4 v[GATHER_U];
        load_tile(scores, base, r.hi, v);
        uint32_t p[GATHER_U], any = 0u;
#pragma unroll
        for (int u = 0; u < GATHER_U; u++) {
            const int p0 = tile_pos<DT>(r, base, u);
            p[u] = 0u;
#pragma unroll
            for (int e = 0; e < Lanes<DT>::E; e++) {
                const uint32_t key = vec_key<DT>(v[u], e);
                const int pos = p0 + e;
                const bool ok = pos >= 0 && pos < st.len;
                p[u] += (uint32_t)(ok && key > T) << 16 | (uint32_t)(ok && key == T);
            }
            any |= p[u];
        }
        /* does any thread of the tile hold a key to place? (double-buffered by tile parity: the
         * flags of tile t + 2 are written after every thread passed tile t + 1's barrier) */
        const tl_wave_mask m = tl_ballot(any != 0u);
        if (tl_lane() == 0) any_w[parity][tl_wave_id()] = m != 0;
        __syncthreads();
        int some = 0;
        for (int w = 0; w < NW; w++) some |= any_w[parity][w];
        parity ^= 1;
        if (!some) continue;
        /* exclusive prefix of p over slots s = u NT + x (the tile's vector order) */
#pragma unroll
        for (int u = 0; u < GATHER_U; u++) sh[u * NT + x] = p[u];
        __syncthreads();
        uint32_t ex[GATHER_U], t = 0u;
#pragma unroll
        for (int q = 0; q < GATHER_U; q++) { /* thread x's run of slots x U .. x U + U - 1 */
            ex[q] = t;
            t += sh[x * GATHER_U + q];
        }
        uint32_t total;
        const uint32_t before = block_excl_scan(t, ws, &total);
#pragma unroll
        for (int q = 0; q < GATHER_U; q++) sh[x * GATHER_U + q] = before + ex[q];
        __syncthreads();
#pragma unroll
        for (int u = 0; u < GATHER_U; u++) {
            if (!p[u]) continue;
            const uint32_t s = sh[u * NT + x];
            int gpos = g_base + g_run + (int)(s >> 16), epos = e_base + e_run + (int)(s & 0xFFFFu);
            const int p0 = tile_pos<DT>(r, base, u);
#pragma unroll
            for (int e = 0; e < Lanes<DT>::E; e++) {
                const uint32_t key = vec_key<DT>(v[u], e);
                const int pos = p0 + e;
                if (pos < 0 || pos >= st.len) continue;
                if (key > T) {
                    if (gpos < gt_all) out[gpos] = rank_of(key, pos); /* (the bound only guards a bug) */
                    gpos++;
                } else if (key == T) {
                    if (epos < need) out[gt_all + epos] = rank_of(key, pos);
                    epos++;
                }
            }
        }
        g_run += (int)(total >> 16);
        e_run += (int)(total & 0xFFFFu);
        __syncthreads(); /* sh is rewritten by the next tile */
    }
}

/* One block per row: the row's c ranks (from cand, or from the scores when len <= k) sorted in
 * shared memory, descending (by rank when sorted, else by the rank's low word ~index: ascending
 * index); idx, -1 past c, count. A row whose chunk counts disagree with its select gets count -1. */
template <int DT>
__global__ void __launch_bounds__(TOPK_FINAL_THREADS)
    topk_final(const void *scores, long n, int k, int sorted, int split, const TopkRow *rows, const int2 *chunk,
               const uint64_t *cand, int32_t *idx, int32_t *count)
{
    __shared__ uint64_t s[TL_TOPK_MAX_K];
    __shared__ int bad;
    const int b = blockIdx.x, x = threadIdx.x;
    const TopkRow st = rows[b];
    const int c = st.c, all = st.flags & TOPK_ROW_ALL;
    if (x == 0) {
        int wrong = (st.flags & TOPK_ROW_BAD) != 0;
        if (!all && !wrong) {
            int g = 0, q = 0;
            for (int i = 0; i < split; i++) {
                const int2 cc = chunk[(size_t)b * TL_TOPK_MAX_SPLIT + i];
                g += cc.x;
                q += cc.y;
            }
            wrong = g != st.gt || q < st.rem || st.rem < 1 || st.gt + st.rem != c;
        }
        bad = wrong;
    }
    __syncthreads();
    if (bad) {
        if (x == 0) count[b] = -1;
        return;
    }
    int n2 = 1;
    while (n2 < c) n2 <<= 1;
    for (int i = x; i < n2; i += TOPK_FINAL_THREADS) {
        uint64_t v = 0u; /* padding: below every real entry (their low words are ~index > 0) */
        if (i < c) {
            v = all ? rank_of(elem_key<DT>(scores, (long long)b * n + i), i) : cand[(size_t)b * k + i];
            if (!sorted) v &= 0xFFFFFFFFull;
        }
        s[i] = v;
    }
    __syncthreads();
    for (int size = 2; size <= n2; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int t = x; t < n2 / 2; t += TOPK_FINAL_THREADS) {
                const int i = 2 * t - (t & (stride - 1)), i2 = i + stride;
                const uint64_t a = s[i], a2 = s[i2];
                if ((i & size) == 0 ? a < a2 : a > a2) { /* descending runs where bit `size` of i is 0 */
                    s[i] = a2;
                    s[i2] = a;
                }
            }
            __syncthreads();
        }
    int32_t *o = idx + (size_t)b * k;
    for (int i = x; i < k; i += TOPK_FINAL_THREADS) o[i] = i < c ? (int32_t)(0xFFFFFFFFu - (uint32_t)s[i]) : -1;
    if (x == 0) count[b] = c;
}

/* ---- the launch wrapper ---- */
struct Pass {
    int shift, bits;
};
static const Pass passes_f32[] = {{21, 11}, {10, 11}, {0, 10}};
static const Pass passes_16[] = {{8, 8}, {0, 8}};

template <int DT>
static int launch_dt(const tl_topk_shape *s, const TopkBuffers &f, int split, hipStream_t st)
{
    const unsigned B = (unsigned)s->batch, blocks = B * (unsigned)split;
    const uint4 *vec = (const uint4 *)f.scores;
    const Pass *ps = DT == TL_TOPK_F32 ? passes_f32 : passes_16;
    const int np = DT == TL_TOPK_F32 ? 3 : 2;
    topk_init<<<B, NT, 0, st>>>(f.lens, s->k, f.rows, f.hist, f.hist_stride);
    TL_GPU_CHECK_LAUNCH("topk_init");
    for (int p = 0; p < np; p++) {
        topk_hist<DT><<<blocks, NT, 0, st>>>(vec, s->n, split, f.rows, f.hist, f.hist_stride, ps[p].shift, ps[p].bits);
        TL_GPU_CHECK_LAUNCH("topk_hist");
        topk_select<<<B, NT, 0, st>>>(f.rows, f.hist, f.hist_stride, ps[p].shift, ps[p].bits);
        TL_GPU_CHECK_LAUNCH("topk_select");
    }
    topk_count<DT><<<blocks, NT, 0, st>>>(vec, s->n, split, f.rows, f.chunk);
    TL_GPU_CHECK_LAUNCH("topk_count");
    topk_gather<DT><<<blocks, NT, 0, st>>>(vec, s->n, s->k, split, f.rows, f.chunk, f.cand);
    TL_GPU_CHECK_LAUNCH("topk_gather");
    topk_final<DT><<<B, TOPK_FINAL_THREADS, 0, st>>>(f.scores, s->n, s->k, s->sorted, split, f.rows, f.chunk, f.cand,
                                                     f.idx, f.count);
    TL_GPU_CHECK_LAUNCH("topk_final");
    return 0;
}

int tl_topk_launch(const tl_topk_shape *s, const TopkBuffers &f, int split, hipStream_t st)
{
    if (split < 1 || split > TL_TOPK_MAX_SPLIT)
        return tl_error(TL_EUSAGE, "topk gpu", "split %d outside [1, %d]", split, TL_TOPK_MAX_SPLIT);
    switch (s->dtype) {
    case TL_TOPK_F32: return launch_dt<TL_TOPK_F32>(s, f, split, st);
    case TL_TOPK_BF16: return launch_dt<TL_TOPK_BF16>(s, f, split, st);
    case TL_TOPK_F16: return launch_dt<TL_TOPK_F16>(s, f, split, st);
    default: return tl_error(TL_EUSAGE, "topk gpu", "unknown score type");
    }
}
