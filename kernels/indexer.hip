/* kernels/indexer.hip: the DSA lightning indexer kernel and its launcher (kernels/indexer.h says
 * what runs; contract/indexer.h the function; simulator/indexer.h the cost).
 *
 * Block: BLOCK_Q waves, wave r = query row blockIdx.x * BLOCK_Q + r (a wave past the last row
 * still copies tiles and waits at the barriers, and writes nothing). The scores of one tile are
 * the matrix product S[position][head] = K_tile[position][:] . Q_row[head][:]: A = the K tile
 * (16 positions a fragment, from shared memory), B = the row's Q given as its transpose
 * (Q[head][d], held in registers for the whole run), float32 accumulators of 16 positions x H heads.
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
/* Two E4M3 codes (low byte first) as their exact bf16 pair: the 2^-120-scaled pair of
 * numerics/codes.h times 2^120 in one packed FMA (bf16 subnormals are honoured by fma.bf16x2). */
static __device__ __forceinline__ uint32_t idx_e4m3x2_bf16(uint32_t h)
{
    const uint32_t x = ((h & 0x7Fu) << 4) | ((h & 0x80u) << 8) | ((h & 0x7F00u) << 12) | ((h & 0x8000u) << 16);
    uint32_t y;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;"
        : "=r"(y)
        : "r"(x), "r"(tl_code_bf16x2_splat(TL_CODE_E4M3_BF16_UNSCALE)), "r"(TL_CODE_BF16X2_MINUS0));
    return y;
}
static __device__ __forceinline__ uint32_t idx_u16(const uint8_t *p) { return *(const uint16_t *)p; }
typedef tl_frag_b_bf16 IdxB;
/* Q row fragments: n-tile n (heads 8n..8n+7), k-step s (d 16s..16s+15): lane (g, t) holds
 * Q[8n + g][16s + 2t, +1] and [16s + 8 + 2t, +1], decoded to bf16 once. */
static __device__ __forceinline__ void idx_load_q(IdxB &b, const uint8_t *q, int n, int s)
{
    const int l = tl_lane(), g = l / 4, t = l % 4;
    const uint8_t *p = q + (size_t)(8 * n + g) * IDX_D + 16 * s + 2 * t;
    b.r[0] = idx_e4m3x2_bf16(idx_u16(p));
    b.r[1] = idx_e4m3x2_bf16(idx_u16(p + 8));
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

/* ---- the tile copy: K [tile][D] codes and k_scale [tile], positions >= kv read as zero ---------- */
static __device__ __forceinline__ void idx_copy_tile(const IdxArgs &a, long j0, uint8_t *ks_dst, float *sc_dst,
                                                     int nthreads)
{
    const int chunks = IDX_TILE * (IDX_D / 16); /* 16-byte pieces of K */
    for (int c = IDX_TID; c < chunks; c += nthreads) {
        const int row = c / (IDX_D / 16), col = 16 * (c % (IDX_D / 16));
        const long j = j0 + row;
        uint8_t *dst = ks_dst + row * IDX_STRIDE + col;
#if defined(TL_MMA_TARGET_SM80)
        const uint8_t *src = a.k + (size_t)(j < a.kv ? j : 0) * IDX_D + col;
        const unsigned sa = (unsigned)__cvta_generic_to_shared(dst);
        const int bytes = j < a.kv ? 16 : 0; /* predicated: zero fill past kv */
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa), "l"(src), "r"(bytes));
#else
        uint4 v = make_uint4(0, 0, 0, 0);
        if (j < a.kv) v = *(const uint4 *)(a.k + (size_t)j * IDX_D + col);
#if defined(TL_MMA_TARGET_GFX942)
        v.x = idx_fnuz4(v.x), v.y = idx_fnuz4(v.y), v.z = idx_fnuz4(v.z), v.w = idx_fnuz4(v.w);
#endif
        *(uint4 *)dst = v;
#endif
    }
    for (int c = IDX_TID; c < IDX_TILE; c += nthreads) sc_dst[c] = j0 + c < a.kv ? a.k_scale[j0 + c] : 0.0f;
}
static __device__ __forceinline__ void idx_copy_commit()
{
#if defined(TL_MMA_TARGET_SM80)
    asm volatile("cp.async.commit_group;");
#endif
}
static __device__ __forceinline__ void idx_copy_wait()
{
#if defined(TL_MMA_TARGET_SM80)
    asm volatile("cp.async.wait_group 0;");
#endif
}

/* ---- one 16-position fragment of a tile: scores, epilogue, store -------------------------------- */
template <int H>
static __device__ __forceinline__ void idx_score16(const uint8_t *kt, const float *sc, const IdxB (&qf)[H / IDX_N][IDX_KSTEPS],
                                                   const float (&wv)[H / IDX_N][2], long j0, long lo, long hi, long kv,
                                                   float *out)
{
#if defined(TL_MMA_TARGET_SM80)
    tl_frag_c c[H / 8];
    for (int n = 0; n < H / 8; n++) tl_frag_zero(&c[n]);
    const int l = tl_lane(), g = l / 4, t = l % 4;
#pragma unroll
    for (int s = 0; s < IDX_KSTEPS; s++) {
        tl_frag_a_bf16 af;
        const uint8_t *r0 = kt + g * IDX_STRIDE + 16 * s + 2 * t, *r1 = r0 + 8 * IDX_STRIDE;
        af.r[0] = idx_e4m3x2_bf16(idx_u16(r0));
        af.r[1] = idx_e4m3x2_bf16(idx_u16(r1));
        af.r[2] = idx_e4m3x2_bf16(idx_u16(r0 + 8));
        af.r[3] = idx_e4m3x2_bf16(idx_u16(r1 + 8));
#pragma unroll
        for (int n = 0; n < H / 8; n++) tl_mma_bf16(&c[n], &af, &qf[n][s]);
    }
    const float s0 = sc[g], s1 = sc[g + 8];
    float p0 = 0.0f, p1 = 0.0f;
#pragma unroll
    for (int n = 0; n < H / 8; n++) {
        p0 += wv[n][0] * fmaxf(c[n].v[0] * s0, 0.0f) + wv[n][1] * fmaxf(c[n].v[1] * s0, 0.0f);
        p1 += wv[n][0] * fmaxf(c[n].v[2] * s1, 0.0f) + wv[n][1] * fmaxf(c[n].v[3] * s1, 0.0f);
    }
    p0 += tl_shfl_xor(p0, 1), p1 += tl_shfl_xor(p1, 1);
    p0 += tl_shfl_xor(p0, 2), p1 += tl_shfl_xor(p1, 2);
    if (t < 2) {
        const long j = j0 + g + 8 * t;
        if (j < kv) out[j] = j >= lo && j < hi ? (t ? p1 : p0) : -__builtin_inff();
    }
#elif defined(TL_MMA_TARGET_GFX950) || defined(TL_MMA_TARGET_GFX942)
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

/* ---- the kernel ------------------------------------------------------------------------------- */
template <int H, int BQ>
__global__ void __launch_bounds__(BQ * TL_WAVE) indexer_kernel(IdxArgs a)
{
#if defined(TL_MMA_TARGET_SM80) || defined(TL_MMA_TARGET_GFX950) || defined(TL_MMA_TARGET_GFX942)
    __shared__ __attribute__((aligned(16))) uint8_t ktile[2][IDX_TILE * IDX_STRIDE];
    __shared__ float kscale[2][IDX_TILE];
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
#if defined(TL_MMA_TARGET_SM80)
        wv[n][0] = w[8 * n + 2 * (tl_lane() % 4)];
        wv[n][1] = w[8 * n + 2 * (tl_lane() % 4) + 1];
#else
        wv[n][0] = w[16 * n + tl_lane() % 16];
        wv[n][1] = 0.0f;
#endif
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

template <int H>
static int launch_h(const IdxArgs &a, int bq, int wave, hipStream_t st)
{
    const unsigned blocks = (unsigned)((a.rows + bq - 1) / bq);
    switch (bq) {
    case 1: indexer_kernel<H, 1><<<blocks, 1 * wave, 0, st>>>(a); break;
    case 2: indexer_kernel<H, 2><<<blocks, 2 * wave, 0, st>>>(a); break;
    case 4: indexer_kernel<H, 4><<<blocks, 4 * wave, 0, st>>>(a); break;
    default: return tl_error(TL_EUSAGE, "indexer gpu", "block_q %d: the kernel is built for 1, 2 and 4", bq);
    }
    TL_GPU_CHECK_LAUNCH("indexer_kernel");
    return 0;
}

static int enqueue(tl_indexer_gpu *g, int bq, hipStream_t st)
{
    IdxArgs a;
    a.q = g->q, a.k = g->k, a.k_scale = g->k_scale, a.w = g->w;
    a.starts = g->starts, a.ends = g->ends, a.logits = g->logits;
    a.rows = g->s.rows, a.kv = g->s.kv;
    return g->s.heads == 32 ? launch_h<32>(a, bq, g->wave, st) : launch_h<64>(a, bq, g->wave, st);
}

extern "C" int tl_indexer_gpu_run(tl_indexer_gpu *g, int block_q)
{
    int rc = enqueue(g, block_q, 0);
    if (rc) return rc;
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

extern "C" int tl_indexer_gpu_read(tl_indexer_gpu *g, float *logits)
{
    TL_GPU_CHECK(hipMemcpy(logits, g->logits, (size_t)g->s.rows * g->s.kv * sizeof(float), hipMemcpyDeviceToHost));
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
static const tl_indexer_gpu_api indexer_gpu_api = {tl_indexer_gpu_open, tl_indexer_gpu_upload, tl_indexer_gpu_poison,
                                                   tl_indexer_gpu_run,  tl_indexer_gpu_read,   tl_indexer_gpu_time,
                                                   tl_indexer_gpu_close};
extern const tl_indexer_gpu_api *const tl_indexer_gpu_kernels = &indexer_gpu_api;
}
#endif
