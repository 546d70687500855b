/* kernels/quant.hip: the fused quantization kernels and their launcher (the tl_quant_gpu_* API of
 * kernels/quant.h, exported as tl_quant_gpu_kernels). What each kernel does: kernels/quant.h; the
 * arithmetic of a group is contract/quant.h's tl_quant_* functions, the same ones tests/test_quant.c
 * runs on the host against numerics' quantizers. */
#include "gpu.h"
#include "quant.h"

#include <stdlib.h>

enum { QK_FP8 = 0, QK_FNUZ = 1, QK_MXFP8 = 2, QK_MXFP4 = 3, QK_DISPATCH = 4 };

/* Where a group kernel writes (dispatch: into the records, whose field offsets come from the contract). */
struct QuantOut {
    uint8_t *codes;        /* codes, or the records */
    void *scales;          /* float32 or E8M0 bytes; unused for dispatch */
    int col_layout;        /* fp8 family: scales [K/128][rows] */
    const int32_t *ids;    /* dispatch: [rows][topk] */
    const float *weights;
    int topk, src_rank;
    int rec_bytes, rec_scales, rec_ids, rec_words; /* record stride and offsets; routing words incl. padding */
};

/* The 8 bf16 values of a 16-byte load as float32 (exact). */
static __device__ __forceinline__ void unpack_bf16x8(uint4 q, float *f)
{
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = tl_code_bf16_to_f32((w[i / 2] >> (16 * (i % 2))) & 0xFFFFu);
}

/* The largest of v over the `lanes` consecutive lanes of a group (a power of two <= 16). */
template <int LANES>
static __device__ __forceinline__ uint32_t group_max(uint32_t v)
{
#pragma unroll
    for (int o = 1; o < LANES; o <<= 1) {
        const uint32_t w = (uint32_t)tl_shfl_xor((int)v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* dispatch: the routing words of row r's record (ids, weights, source row and rank, zero padding),
 * written by the 16 lanes of the team that holds the row's first group. */
static __device__ __forceinline__ void write_routing(const QuantOut &o, long long r, int lane)
{
    uint32_t *words = (uint32_t *)(o.codes + r * o.rec_bytes + o.rec_ids);
    for (int w = lane; w < o.rec_words; w += 16) {
        uint32_t v = 0;
        if (w < o.topk) v = (uint32_t)o.ids[r * o.topk + w];
        else if (w < 2 * o.topk) v = tl_code_f32_bits(o.weights[r * o.topk + w - o.topk]);
        else if (w == 2 * o.topk) v = (uint32_t)r;
        else if (w == 2 * o.topk + 1) v = (uint32_t)o.src_rank;
        words[w] = v;
    }
}

/* The largest |x| bits of the eight, NaN included (NaN above Inf): >= 0x7F800000 when any is NaN or
 * Inf. */
static __device__ __forceinline__ uint32_t max_abs_bits8(const float *f)
{
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) m = max(m, tl_quant_abs_bits(f[i]));
    return m;
}

/* Eight FP8 codes (two words, the first value in the low byte) of f under one group's scale:
 * tl_quant_fp8_code of each. Without NaN or Inf among them (`special` false) and under a finite
 * scale that is the encoder applied to x / scale, computed as tl_quant_div_by from one reciprocal
 * (which needs both finite), and E4M3FN takes the hardware's pair conversion where gpu.h has it
 * (one instruction a pair); otherwise (rare: the group holds a NaN or Inf) the contract's function
 * itself. CANON_NAN: tl_quant_fp8_code_canon_nan (the rotated query's rule). */
template <int FNUZ, int CANON_NAN = 0>
static __device__ __forceinline__ uint2 fp8_codes8(const float *f, float scale, bool special)
{
    uint32_t lo = 0, hi = 0;
    if (special || tl_code_f32_bits(scale) >= 0x7F800000u) { /* an Inf in another lane's values: x / Inf */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo |= (CANON_NAN ? tl_quant_fp8_code_canon_nan(f[i], scale, FNUZ) : tl_quant_fp8_code(f[i], scale, FNUZ))
                  << (8 * i);
            hi |= (CANON_NAN ? tl_quant_fp8_code_canon_nan(f[i + 4], scale, FNUZ)
                             : tl_quant_fp8_code(f[i + 4], scale, FNUZ))
                  << (8 * i);
        }
        return make_uint2(lo, hi);
    }
    const float r = 1.0f / scale;
    float q[8];
#pragma unroll
    for (int i = 0; i < 8; i++) q[i] = tl_quant_div_by(f[i], scale, r);
    if (!FNUZ && TL_GPU_HAS_E4M3X2_HW) {
        lo = tl_e4m3x2_hw(q[0], q[1]) | tl_e4m3x2_hw(q[2], q[3]) << 16;
        hi = tl_e4m3x2_hw(q[4], q[5]) | tl_e4m3x2_hw(q[6], q[7]) << 16;
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo |= (FNUZ ? tl_code_e4m3fnuz_from_f32(q[i]) : tl_code_e4m3_from_f32(q[i])) << (8 * i);
            hi |= (FNUZ ? tl_code_e4m3fnuz_from_f32(q[i + 4]) : tl_code_e4m3_from_f32(q[i + 4])) << (8 * i);
        }
    }
    return make_uint2(lo, hi);
}

/* Loads the TL_QUANT_VECS 16-byte pieces of thread t in the tile at `base` (zeros past n). */
static __device__ __forceinline__ void load_tile(const uint16_t *__restrict__ x, long long base, long long n, int t,
                                                 uint4 *q)
{
#pragma unroll
    for (int v = 0; v < TL_QUANT_VECS; v++) {
        const long long at = base + (long long)v * TL_QUANT_THREADS * 8 + 8LL * t;
        q[v] = at < n ? *(const uint4 *)(x + at) : make_uint4(0, 0, 0, 0);
    }
}

/* Converts and stores thread t's pieces of the tile at `base`. A 1 x 128 group is 16 consecutive
 * lanes, an MX block 4; n and K are multiples of them, so a group is wholly in or wholly out of
 * range. Index arithmetic in 32 bits (n <= 2^32: TL_QUANT_MAX_ELEMS). */
template <int MODE>
static __device__ __forceinline__ void convert_tile(const uint4 *q, long long base, long long n, int t, int k, int rows,
                                                    int ue8m0, int round_up, const QuantOut &o)
{
    constexpr bool MX = MODE == QK_MXFP8 || MODE == QK_MXFP4;
    constexpr int LANES = MX ? TL_QUANT_MX_BLOCK / 8 : TL_QUANT_GROUP / 8;
    const int lane = t % LANES;
#pragma unroll
    for (int v = 0; v < TL_QUANT_VECS; v++) {
        const long long at = base + (long long)v * TL_QUANT_THREADS * 8 + 8LL * t;
        float f[8];
        unpack_bf16x8(q[v], f);
        uint32_t m = max_abs_bits8(f);
        const bool special = m >= 0x7F800000u; /* a NaN or Inf among this lane's eight */
        if (!MX && m > 0x7F800000u) { /* FP8's amax skips NaN */
            m = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) m = max(m, tl_quant_abs_bits_no_nan(f[i]));
        }
        m = group_max<LANES>(m); /* every lane takes part: the shuffles need the whole wave */
        if (at >= n) continue;
        if (MX) {
            const uint32_t sc = tl_quant_mx_scale(m, MODE == QK_MXFP4, round_up);
            if (MODE == QK_MXFP8 && TL_GPU_HAS_E4M3X2_HW) {
                /* sc != 0xFF: every value finite, x x 2^(127 - sc) exact, so the pair conversion
                 * gives tl_quant_mx_code's codes; 0xFF: the block's codes are 0 */
                const float inv = tl_code_e8m0_inverse(sc);
                uint2 c = make_uint2(0, 0);
                if (sc != 0xFFu) {
                    c.x = tl_e4m3x2_hw(f[0] * inv, f[1] * inv) | tl_e4m3x2_hw(f[2] * inv, f[3] * inv) << 16;
                    c.y = tl_e4m3x2_hw(f[4] * inv, f[5] * inv) | tl_e4m3x2_hw(f[6] * inv, f[7] * inv) << 16;
                }
                *(uint2 *)(o.codes + at) = c;
            } else {
                uint32_t c[8];
#pragma unroll
                for (int i = 0; i < 8; i++) c[i] = tl_quant_mx_code(f[i], sc, MODE == QK_MXFP4);
                if (MODE == QK_MXFP4)
                    *(uint32_t *)(o.codes + at / 2) = (c[0] | c[1] << 4) | (c[2] | c[3] << 4) << 8 |
                                                      (c[4] | c[5] << 4) << 16 | (c[6] | c[7] << 4) << 24;
                else
                    *(uint2 *)(o.codes + at) = make_uint2(c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24,
                                                          c[4] | c[5] << 8 | c[6] << 16 | c[7] << 24);
            }
            if (lane == 0) ((uint8_t *)o.scales)[at / TL_QUANT_MX_BLOCK] = (uint8_t)sc;
            continue;
        }
        const float scale = tl_quant_fp8_scale(tl_code_bits_f32(m), MODE == QK_FNUZ, ue8m0);
        const uint2 c = fp8_codes8<MODE == QK_FNUZ>(f, scale, special);
        const uint32_t gi = (uint32_t)(at / TL_QUANT_GROUP), gk = (uint32_t)k / TL_QUANT_GROUP;
        if (MODE == QK_DISPATCH) {
            const uint32_t r = gi / gk, g = gi - r * gk;
            uint8_t *rec = o.codes + (long long)r * o.rec_bytes;
            *(uint2 *)(rec + (long long)(at - (long long)r * k)) = c; /* the stride is a multiple of 8 */
            if (lane == 0) *(float *)(rec + o.rec_scales + 4 * g) = scale;
            if (g == 0) write_routing(o, r, lane);
            continue;
        }
        *(uint2 *)(o.codes + at) = c;
        if (lane == 0) {
            long long si = gi;
            if (o.col_layout) {
                const uint32_t r = gi / gk;
                si = (long long)(gi - r * gk) * rows + r;
            }
            ((float *)o.scales)[si] = scale;
        }
    }
}

/* One launch quantizes n = rows x K values in tiles of TL_QUANT_THREADS x TL_QUANT_VECS x 8: block b
 * takes tiles b, b + grid, ... (the launcher sizes the grid to the blocks the GPU holds at once),
 * thread t the 8 values at the tile's start + v x 2048 + 8 t for v < TL_QUANT_VECS (coalesced).
 * The next tile's loads are issued before the current tile is converted, so every thread keeps
 * TL_QUANT_VECS 16-byte loads in flight while it computes. */
template <int MODE>
__global__ void __launch_bounds__(TL_QUANT_THREADS)
    quant_group(const uint16_t *__restrict__ x, long long n, int k, int rows, int ue8m0, int round_up, QuantOut o)
{
    const int t = (int)tl_thread_x();
    const long long tile = (long long)TL_QUANT_THREADS * TL_QUANT_VECS * 8, stride = (long long)gridDim.x * tile;
    long long base = (long long)blockIdx.x * tile;
    uint4 q[TL_QUANT_VECS];
    load_tile(x, base, n, t, q);
    for (; base < n; base += stride) {
        uint4 next[TL_QUANT_VECS];
        load_tile(x, base + stride, n, t, next);
        convert_tile<MODE>(q, base, n, t, k, rows, ue8m0, round_up, o);
#pragma unroll
        for (int v = 0; v < TL_QUANT_VECS; v++) q[v] = next[v];
    }
}

/* The query: block (b, h) quantizes tokens [128 b, 128 b + 128) of head h, one scale. Team j (16
 * lanes) holds rows 128 b + j + 32 i, i < 4, a lane 8 consecutive values of each; the Hadamard
 * butterfly runs as tl_fwht's (stages 1, 2, 4 in a thread, 8 .. 64 across lanes: lower = own +
 * partner, upper = partner - own), then the multiply by hscale. */
template <int HADAMARD>
__global__ void __launch_bounds__(TL_QUANT_QUERY_THREADS)
    quant_query(const uint16_t *__restrict__ x, int rows, int k, int ue8m0, float hscale, uint8_t *__restrict__ codes,
                float *__restrict__ scales)
{
    constexpr int TEAMS = TL_QUANT_QUERY_THREADS / 16, R = TL_QUANT_QUERY_ROWS / TEAMS; /* 4 rows a thread */
    TL_SHARED(uint32_t, red, [TEAMS]);
    const int heads = k / TL_QUANT_HEAD_DIM, b = (int)blockIdx.x / heads, h = (int)blockIdx.x % heads;
    const int t = (int)tl_thread_x(), team = t / 16, lane = t % 16;
    float f[R][8];
    uint4 q[R];
#pragma unroll
    for (int i = 0; i < R; i++) {
        const long long r = (long long)b * TL_QUANT_QUERY_ROWS + team + TEAMS * i;
        q[i] = r < rows ? *(const uint4 *)(x + r * k + h * TL_QUANT_HEAD_DIM + 8 * lane) : make_uint4(0, 0, 0, 0);
    }
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < R; i++) {
        unpack_bf16x8(q[i], f[i]);
        if (HADAMARD) {
#pragma unroll
            for (int s = 1; s < 8; s <<= 1)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    if (!(j & s)) {
                        const float a = f[i][j], c = f[i][j + s];
                        f[i][j] = a + c;
                        f[i][j + s] = a - c;
                    }
#pragma unroll
            for (int s = 1; s < 16; s <<= 1)
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const float p = tl_shfl_xor(f[i][j], s);
                    f[i][j] = (lane & s) ? p - f[i][j] : f[i][j] + p;
                }
#pragma unroll
            for (int j = 0; j < 8; j++) f[i][j] *= hscale;
        }
        const long long r = (long long)b * TL_QUANT_QUERY_ROWS + team + TEAMS * i;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint32_t a = r < rows ? tl_quant_abs_bits_no_nan(f[i][j]) : 0u;
            m = a > m ? a : m;
        }
    }
    m = group_max<16>(m);
    if (lane == 0) red[team] = m;
#if !defined(TL_EMU_MUTANT) /* the executor's mutation test only (tests/cli_executor.sh): a missing barrier */
    tl_block_sync();
#endif
#pragma unroll
    for (int j = 0; j < TEAMS; j++) m = red[j] > m ? red[j] : m;
    const float scale = tl_quant_fp8_scale(tl_code_bits_f32(m), 0, ue8m0);
#pragma unroll
    for (int i = 0; i < R; i++) {
        const long long r = (long long)b * TL_QUANT_QUERY_ROWS + team + TEAMS * i;
        if (r >= rows) continue;
        *(uint2 *)(codes + r * k + h * TL_QUANT_HEAD_DIM + 8 * lane) =
            fp8_codes8<0, HADAMARD>(f[i], scale, max_abs_bits8(f[i]) >= 0x7F800000u);
    }
    if (t == 0) scales[(long long)b * heads + h] = scale;
}

/* The records back into their fields: block r copies record r (8-byte words, then 4-byte ones). */
__global__ void __launch_bounds__(TL_QUANT_THREADS)
    quant_unpack(const uint8_t *__restrict__ rec, int k, int topk, int rec_bytes, int rec_scales, int rec_ids,
                 uint8_t *__restrict__ codes, float *__restrict__ scales, int32_t *__restrict__ ids,
                 float *__restrict__ weights, int32_t *__restrict__ src)
{
    const long long r = blockIdx.x;
    const uint8_t *in = rec + r * rec_bytes;
    const int t = (int)tl_thread_x(), ng = k / TL_QUANT_GROUP;
    for (int i = t; i < k / 8; i += TL_QUANT_THREADS) *(uint2 *)(codes + r * k + 8 * i) = *(const uint2 *)(in + 8 * i);
    for (int i = t; i < ng; i += TL_QUANT_THREADS) scales[r * ng + i] = *(const float *)(in + rec_scales + 4 * i);
    const uint32_t *words = (const uint32_t *)(in + rec_ids);
    for (int i = t; i < 2 * topk + 2; i += TL_QUANT_THREADS) {
        if (i < topk) ids[r * topk + i] = (int32_t)words[i];
        else if (i < 2 * topk) weights[r * topk + i - topk] = tl_code_bits_f32(words[i]);
        else src[2 * r + (i - 2 * topk)] = (int32_t)words[i];
    }
}

/* ---- the launcher ---- */

struct tl_quant_gpu {
    tl_quant_shape s;
    tl_quant_record rec;
    size_t code_bytes, scale_bytes;
    uint16_t *x;
    int32_t *ids;
    float *weights;
    uint8_t *codes;
    void *scales;
    uint8_t *u_codes; /* dispatch's unpacked fields */
    float *u_scales, *u_weights;
    int32_t *u_ids, *u_src;
};

static int gpu_alloc(void **p, size_t bytes, const char *what)
{
    *p = NULL;
    hipError_t e = hipMalloc(p, bytes ? bytes : 16);
    if (e != hipSuccess) {
        *p = NULL;
        (void)hipGetLastError();
        return tl_error(TL_EFAIL, "quant gpu", "cannot allocate %.3f GB for %s: %s", bytes / 1e9, what,
                        hipGetErrorString(e));
    }
    return 0;
}
#define GALLOC(ptr, bytes, what) gpu_alloc((void **)&(ptr), (bytes), (what))

extern "C" void tl_quant_gpu_close(tl_quant_gpu *g)
{
    if (!g) return;
    void *ptrs[] = {g->x, g->ids, g->weights, g->codes, g->scales, g->u_codes, g->u_scales, g->u_weights, g->u_ids, g->u_src};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) (void)hipFree(ptrs[i]);
    free(g);
}

extern "C" int tl_quant_gpu_open(const tl_quant_shape *s, tl_quant_gpu **out)
{
    *out = NULL;
    int rc = tl_quant_shape_check(s);
    if (rc) return rc;
    tl_quant_gpu *g = (tl_quant_gpu *)calloc(1, sizeof *g);
    if (!g) return tl_error(TL_EFAIL, "quant gpu", "out of memory");
    g->s = *s;
    g->rec = tl_quant_record_layout(s->k, s->topk);
    const size_t n = (size_t)s->rows * (size_t)s->k, t = (size_t)s->rows * (size_t)s->topk;
    g->code_bytes = tl_quant_code_bytes(s);
    g->scale_bytes = tl_quant_scale_count(s) * tl_quant_scale_size(s);
    rc = GALLOC(g->x, n * 2, "x");
    if (!rc) rc = GALLOC(g->codes, g->code_bytes, "codes");
    if (!rc) rc = GALLOC(g->scales, g->scale_bytes, "scales");
    if (!rc && s->scheme == TL_QUANT_DISPATCH) {
        rc = GALLOC(g->ids, t * 4, "ids");
        if (!rc) rc = GALLOC(g->weights, t * 4, "weights");
        if (!rc) rc = GALLOC(g->u_codes, n, "unpacked codes");
        if (!rc) rc = GALLOC(g->u_scales, n / TL_QUANT_GROUP * 4, "unpacked scales");
        if (!rc) rc = GALLOC(g->u_ids, t * 4, "unpacked ids");
        if (!rc) rc = GALLOC(g->u_weights, t * 4, "unpacked weights");
        if (!rc) rc = GALLOC(g->u_src, (size_t)s->rows * 8, "unpacked sources");
    }
    if (rc) {
        tl_quant_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

extern "C" int tl_quant_gpu_upload(tl_quant_gpu *g, const uint16_t *x, const int32_t *ids, const float *weights)
{
    const size_t n = (size_t)g->s.rows * (size_t)g->s.k, t = (size_t)g->s.rows * (size_t)g->s.topk;
    TL_GPU_CHECK(hipMemcpy(g->x, x, n * 2, hipMemcpyHostToDevice));
    if (g->s.scheme != TL_QUANT_DISPATCH) return 0;
    if (!ids || !weights) return tl_error(TL_EUSAGE, "quant gpu", "dispatch needs ids and weights");
    TL_GPU_CHECK(hipMemcpy(g->ids, ids, t * 4, hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->weights, weights, t * 4, hipMemcpyHostToDevice));
    return 0;
}

extern "C" int tl_quant_gpu_poison(tl_quant_gpu *g, int byte)
{
    TL_GPU_CHECK(hipMemset(g->codes, byte, g->code_bytes));
    if (g->scale_bytes) TL_GPU_CHECK(hipMemset(g->scales, byte, g->scale_bytes));
    return 0;
}

/* A group kernel on min(tiles, the blocks the GPU holds at once) blocks: the kernel loops over the
 * rest. The resident count is asked of the driver once per instantiation (tilelab drives one device). */
template <int MODE>
static int launch_group(const uint16_t *x, long long n, int k, int rows, int ue8m0, int round_up, const QuantOut &o,
                        long long tiles, hipStream_t st)
{
    static long long resident = 0;
    if (!resident) {
        int dev = 0, sms = 0, per_sm = 0;
        TL_GPU_CHECK(hipGetDevice(&dev));
        TL_GPU_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev));
        TL_GPU_CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, quant_group<MODE>, TL_QUANT_THREADS, 0));
        resident = (long long)sms * (per_sm > 0 ? per_sm : 1);
    }
    const unsigned grid = (unsigned)(tiles < resident ? tiles : resident);
    (void)tl_launch(quant_group<MODE>, grid, TL_QUANT_THREADS, 0, st, false, x, n, k, rows, ue8m0, round_up, o);
    TL_GPU_CHECK_LAUNCH("quant_group");
    return 0;
}

static int enqueue(tl_quant_gpu *g, int src_rank, hipStream_t st)
{
    const tl_quant_shape *s = &g->s;
    const long long n = (long long)s->rows * s->k;
    const unsigned blocks = (unsigned)tl_quant_blocks(s);
    if (s->scheme == TL_QUANT_FP8_QUERY) {
        if (s->hadamard)
            (void)tl_launch(quant_query<1>, blocks, TL_QUANT_QUERY_THREADS, 0, st, false, g->x, (int)s->rows, (int)s->k, s->ue8m0,
                                                                tl_quant_hadamard_scale(), g->codes, (float *)g->scales);
        else
            (void)tl_launch(quant_query<0>, blocks, TL_QUANT_QUERY_THREADS, 0, st, false, g->x, (int)s->rows, (int)s->k, s->ue8m0,
                                                                tl_quant_hadamard_scale(), g->codes, (float *)g->scales);
        TL_GPU_CHECK_LAUNCH("quant_query");
        return 0;
    }
    QuantOut o;
    o.codes = g->codes;
    o.scales = g->scales;
    o.col_layout = s->layout == TL_QUANT_SCALES_COL;
    o.ids = g->ids;
    o.weights = g->weights;
    o.topk = s->topk;
    o.src_rank = src_rank;
    o.rec_bytes = (int)g->rec.bytes;
    o.rec_scales = (int)g->rec.scales;
    o.rec_ids = (int)g->rec.ids;
    o.rec_words = (int)(g->rec.bytes - g->rec.ids) / 4;
    const int k = (int)s->k, rows = (int)s->rows;
    switch (s->scheme) {
    case TL_QUANT_FP8: return launch_group<QK_FP8>(g->x, n, k, rows, s->ue8m0, 0, o, blocks, st);
    case TL_QUANT_FP8_FNUZ: return launch_group<QK_FNUZ>(g->x, n, k, rows, s->ue8m0, 0, o, blocks, st);
    case TL_QUANT_MXFP8: return launch_group<QK_MXFP8>(g->x, n, k, rows, 0, s->round_up, o, blocks, st);
    case TL_QUANT_MXFP4: return launch_group<QK_MXFP4>(g->x, n, k, rows, 0, s->round_up, o, blocks, st);
    default: return launch_group<QK_DISPATCH>(g->x, n, k, rows, s->ue8m0, 0, o, blocks, st);
    }
}

extern "C" int tl_quant_gpu_run(tl_quant_gpu *g, int src_rank)
{
    int rc = enqueue(g, src_rank, 0);
    if (rc) return rc;
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

extern "C" int tl_quant_gpu_read(tl_quant_gpu *g, uint8_t *codes, void *scales)
{
    TL_GPU_CHECK(hipMemcpy(codes, g->codes, g->code_bytes, hipMemcpyDeviceToHost));
    if (scales && g->scale_bytes) TL_GPU_CHECK(hipMemcpy(scales, g->scales, g->scale_bytes, hipMemcpyDeviceToHost));
    return 0;
}

extern "C" int tl_quant_gpu_unpack(tl_quant_gpu *g, uint8_t *codes, float *scales, int32_t *ids, float *weights,
                                   int32_t *src_row, int32_t *src_rank)
{
    const tl_quant_shape *s = &g->s;
    if (s->scheme != TL_QUANT_DISPATCH) return tl_error(TL_EUSAGE, "quant gpu", "only dispatch records unpack");
    const size_t rows = (size_t)s->rows, n = rows * (size_t)s->k, t = rows * (size_t)s->topk;
    (void)tl_launch(quant_unpack, (unsigned)rows, TL_QUANT_THREADS, 0, 0, false, g->codes, (int)s->k, s->topk, (int)g->rec.bytes, (int)g->rec.scales,
                                                       (int)g->rec.ids, g->u_codes, g->u_scales, g->u_ids, g->u_weights,
                                                       g->u_src);
    TL_GPU_CHECK_LAUNCH("quant_unpack");
    TL_GPU_CHECK(hipDeviceSynchronize());
    int32_t *src = (int32_t *)malloc(rows * 8);
    if (!src) return tl_error(TL_EFAIL, "quant gpu", "out of memory");
    int rc = 0;
    if (hipMemcpy(codes, g->u_codes, n, hipMemcpyDeviceToHost) != hipSuccess ||
        hipMemcpy(scales, g->u_scales, n / TL_QUANT_GROUP * 4, hipMemcpyDeviceToHost) != hipSuccess ||
        hipMemcpy(ids, g->u_ids, t * 4, hipMemcpyDeviceToHost) != hipSuccess ||
        hipMemcpy(weights, g->u_weights, t * 4, hipMemcpyDeviceToHost) != hipSuccess ||
        hipMemcpy(src, g->u_src, rows * 8, hipMemcpyDeviceToHost) != hipSuccess)
        rc = tl_error(TL_EFAIL, "quant gpu", "reading the unpacked records back failed: %s",
                      hipGetErrorString(hipGetLastError()));
    for (size_t r = 0; !rc && r < rows; r++) src_row[r] = src[2 * r], src_rank[r] = src[2 * r + 1];
    free(src);
    return rc;
}

struct time_ctx {
    tl_quant_gpu *g;
    int src_rank;
};
static int time_fn(void *ctx, void *stream)
{
    time_ctx *c = (time_ctx *)ctx;
    return enqueue(c->g, c->src_rank, (hipStream_t)stream);
}

extern "C" int tl_quant_gpu_time(tl_quant_gpu *g, int src_rank, const tl_bench_opts *o, tl_bench_result *r)
{
    time_ctx c = {g, src_rank};
    return tl_bench_run(o, time_fn, &c, r);
}

/* the exported table: host code only (the device pass of a HIP build has no host functions) */
#if !defined(__HIP_DEVICE_COMPILE__) && !defined(__CUDA_ARCH__)
extern "C" {
static const tl_quant_gpu_api quant_gpu_api = {tl_quant_gpu_open, tl_quant_gpu_upload, tl_quant_gpu_poison,
                                               tl_quant_gpu_run,  tl_quant_gpu_read,   tl_quant_gpu_unpack,
                                               tl_quant_gpu_time, tl_quant_gpu_close};
TL_GPU_EXPORT(const tl_quant_gpu_api, tl_quant_gpu) = &quant_gpu_api;
}
#endif
