/* kernels/roofline.hip: the empirical roofline's microbenchmarks (seed 000, Table 1).
 *
 *   tl_roofline_mma_bf16 / _fp8   matrix-core loop through kernels/mma.h: the operands stay in
 *                                 registers, NACC independent accumulators per wave hide the
 *                                 instruction latency; one value per lane is written at the end.
 *   tl_roofline_mma_f8f6f4        gfx950 only: the same with FP6 (E2M3) or FP4 (E2M1) operands.
 *   tl_roofline_hbm_read          read-only reduction: 16-byte loads, UNROLL of them in flight
 *                                 per thread, a grid that fills the GPU; sums the words as uint32
 *                                 so the result is checked exactly against a closed form.
 *   tl_roofline_hbm_copy          16-byte copy; the copy is checked word by word on the device.
 *   tl_roofline_check_mma         one tile through tl_frag_load / tl_mma / tl_frag_store,
 *                                 compared with a host product: the fragment layouts of mma.h are
 *                                 right on the device that reports the ceiling.
 *   tl_roofline_wgmma_bf16 / _fp8 sm_90a only (kernels/wgmma.h): each warpgroup issues
 *                                 m64n256 products from one swizzled shared-memory tile, groups of
 *                                 four (one 128-byte K row) committed, at most two in flight.
 *   tl_roofline_check_wgmma       one 64 x 64 x 128-byte product through the descriptors, the
 *                                 swizzle and the register-A forms (BF16 also with an MN-major B
 *                                 of two 64-column blocks: 64 x 128), against a host product.
 */
#include "gpu.h"
#include "mma.h"
#include "roofline.h"
#include "wgmma.h"

#include <math.h>
#include <stdlib.h>

/* The loops' operand tiles, TILE_BYTES in all: bf16 in the first half, E4M3 bytes in the second;
 * within each half the B fragments start TILE_B_OFFSET bytes in. Sized for gfx950 FP8:
 * (16 + 2) rows x 128 bytes of A, (16 + 8) rows x 128 bytes of B. */
#define TILE_BYTES 16384
#define TILE_B_OFFSET 4096

/* ---------------------------------------------------------------------------------------------
 * Matrix-core loops
 * ------------------------------------------------------------------------------------------- */
/* The loops compute a warp tile the way a GEMM's inner loop does: NA = 2 A fragments times
 * NB = NACC/2 B fragments, NACC accumulators, every product a distinct pair of operands.
 *
 * FP8 on NVIDIA sm_90 needs one more step. There, ptxas expands mma.sync ... e4m3 into
 * conversions (F2FP) and f16 HMMAs plus FADDs into the accumulator (sm_90 has no FP8 mma.sync in
 * hardware; Hopper's FP8 tensor path is wgmma). Seen with ncu and cuobjdump on the H200,
 * 2026-11-29: with operands shared by the accumulators the product was computed once and the
 * loop was left with FADDs (2048 HMMA per warp for 32768 mma.sync, and 10 HMMA against 384 FADD
 * in the SASS of the 16-accumulator loop), a "rate" that is no rate. So the FP8 loop XORs z (0 at
 * run time, unknown to the compiler) into every operand register in every iteration: the
 * products are new in every iteration, as in a GEMM. Cost: one LOP3 per register per iteration.
 * BF16 HMMA is executed as written (ncu: one HMMA per mma.sync), so its operands stay untouched
 * in registers. On AMD the MFMA builtins are executed as written: nothing to do. */
template <typename F>
static __device__ __forceinline__ void perturb(F *f, uint32_t z)
{
#if defined(TL_MMA_TARGET_SM80)
#pragma unroll
    for (unsigned r = 0; r < sizeof f->r / sizeof f->r[0]; r++) f->r[r] ^= z;
#else
    (void)f;
    (void)z;
#endif
}

#define MMA_NA 2

template <int NACC>
__global__ void __launch_bounds__(256) tl_roofline_mma_bf16(const uint16_t *tile, float *out, int iters)
{
    constexpr int NB = NACC / MMA_NA;
    tl_frag_a_bf16 a[MMA_NA];
    tl_frag_b_bf16 b[NB];
#pragma unroll
    for (int i = 0; i < MMA_NA; i++) tl_frag_load_a_bf16(&a[i], tile + i * TL_MMA_BF16_K, TL_MMA_BF16_K);
#pragma unroll
    for (int j = 0; j < NB; j++)
        tl_frag_load_bt_bf16(&b[j], tile + TILE_B_OFFSET / 2 + j * TL_MMA_BF16_K, TL_MMA_BF16_K);
    tl_frag_c acc[NACC];
#pragma unroll
    for (int j = 0; j < NACC; j++) tl_frag_zero(&acc[j]);
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < MMA_NA; i++)
#pragma unroll
            for (int j = 0; j < NB; j++) tl_mma_bf16(&acc[i * NB + j], &a[i], &b[j]);
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < NACC; j++)
#pragma unroll
        for (int r = 0; r < TL_FRAG_C_COUNT; r++) s += acc[j].v[r];
    out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int NACC>
__global__ void __launch_bounds__(256) tl_roofline_mma_fp8(const uint8_t *tile, float *out, int iters, uint32_t salt)
{
    constexpr int NB = NACC / MMA_NA;
    tl_frag_a_fp8 a[MMA_NA];
    tl_frag_b_fp8 b[NB];
#pragma unroll
    for (int i = 0; i < MMA_NA; i++) tl_frag_load_a_fp8(&a[i], tile + i * TL_MMA_FP8_K, TL_MMA_FP8_K);
#pragma unroll
    for (int j = 0; j < NB; j++)
        tl_frag_load_bt_fp8(&b[j], tile + TILE_B_OFFSET + j * TL_MMA_FP8_K, TL_MMA_FP8_K);
    tl_frag_c acc[NACC];
#pragma unroll
    for (int j = 0; j < NACC; j++) tl_frag_zero(&acc[j]);
    for (int it = 0; it < iters; it++) {
        uint32_t z = salt * (uint32_t)it;
#pragma unroll
        for (int i = 0; i < MMA_NA; i++) perturb(&a[i], z);
#pragma unroll
        for (int j = 0; j < NB; j++) perturb(&b[j], z);
#pragma unroll
        for (int i = 0; i < MMA_NA; i++)
#pragma unroll
            for (int j = 0; j < NB; j++) tl_mma_fp8(&acc[i * NB + j], &a[i], &b[j]);
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < NACC; j++)
#pragma unroll
        for (int r = 0; r < TL_FRAG_C_COUNT; r++) s += acc[j].v[r];
    out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = s;
}

/* gfx950: FMT = TL_F8F6F4_E2M3 (FP6) or TL_F8F6F4_E2M1 (FP4) on both operands. Elsewhere the
 * body is empty and the host never launches it. */
template <int NACC, int FMT>
__global__ void __launch_bounds__(256) tl_roofline_mma_f8f6f4(const int *words, float *out, int iters)
{
#if defined(TL_MMA_TARGET_GFX950)
    int l = tl_lane();
    tl_i32x8 a, b;
    for (int e = 0; e < 8; e++) {
        a[e] = words[(l * 8 + e) % 64];
        b[e] = words[64 + (l * 8 + e) % 64];
    }
    tl_frag_c acc[NACC];
#pragma unroll
    for (int j = 0; j < NACC; j++) tl_frag_zero(&acc[j]);
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int j = 0; j < NACC; j++) tl_mma_f8f6f4_16x16x128<FMT, FMT>(&acc[j], a, b);
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < NACC; j++)
#pragma unroll
        for (int r = 0; r < TL_FRAG_C_COUNT; r++) s += acc[j].v[r];
    out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = s;
#else
    (void)words;
    (void)out;
    (void)iters;
#endif
}

/* One tile: C = A1 * B1 + A2 * B2 (two K steps, so accumulation is checked too). */
__global__ void tl_roofline_check_mma_bf16(const uint16_t *A, const uint16_t *Bt, float *C)
{
    tl_frag_a_bf16 a;
    tl_frag_b_bf16 b;
    tl_frag_c c;
    tl_frag_zero(&c);
    for (int step = 0; step < 2; step++) {
        tl_frag_load_a_bf16(&a, A + step * TL_MMA_BF16_K, 2 * TL_MMA_BF16_K);
        tl_frag_load_bt_bf16(&b, Bt + step * TL_MMA_BF16_K, 2 * TL_MMA_BF16_K);
        tl_mma_bf16(&c, &a, &b);
    }
    if (threadIdx.x < TL_WAVE) tl_frag_store_c(&c, C, TL_MMA_BF16_N);
}

__global__ void tl_roofline_check_mma_fp8(const uint8_t *A, const uint8_t *Bt, float *C)
{
    tl_frag_a_fp8 a;
    tl_frag_b_fp8 b;
    tl_frag_c c;
    tl_frag_zero(&c);
    for (int step = 0; step < 2; step++) {
        tl_frag_load_a_fp8(&a, A + step * TL_MMA_FP8_K, 2 * TL_MMA_FP8_K);
        tl_frag_load_bt_fp8(&b, Bt + step * TL_MMA_FP8_K, 2 * TL_MMA_FP8_K);
        tl_mma_fp8(&c, &a, &b);
    }
    if (threadIdx.x < TL_WAVE) tl_frag_store_c(&c, C, TL_MMA_FP8_N);
}

/* ---------------------------------------------------------------------------------------------
 * Warpgroup matrix loops (sm_90a)
 * ------------------------------------------------------------------------------------------- */
#define WG_A_BYTES (64 * 128)
#define WG_B_BYTES (256 * 128)

#if TL_WGMMA_AVAILABLE
/* Copies `rows` rows of 128 bytes into the 128-byte swizzle, row r from row r % src_rows of the
 * row-major global tile g. */
static __device__ void wg_stage_sw128(uint8_t *smem, const uint8_t *g, int rows, int src_rows)
{
    for (int i = threadIdx.x; i < rows * 8; i += blockDim.x) {
        int r = i / 8, c = i % 8;
        *(uint4 *)(smem + tl_wgmma_sw128_offset(r, c * 16)) = *(const uint4 *)(g + (r % src_rows) * 128 + c * 16);
    }
}
#endif

template <int FP8>
__global__ void __launch_bounds__(384, 1) tl_roofline_wgmma(const uint8_t *tile, float *out, int iters)
{
#if TL_WGMMA_AVAILABLE
    TL_SHARED_ALIGNED(1024, uint8_t, sa, [WG_A_BYTES]);
    TL_SHARED_ALIGNED(1024, uint8_t, sb, [WG_B_BYTES]);
    wg_stage_sw128(sa, tile, 64, 64);
    wg_stage_sw128(sb, tile, 256, TILE_BYTES / 2 / 128);
    tl_fence_proxy_async();
    __syncthreads();
    const uint64_t da = tl_wgmma_desc_sw128(sa), db = tl_wgmma_desc_sw128(sb);
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; i++) d[i] = 0.0f;
    for (int it = 0; it < iters; it++) {
        tl_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            if (FP8) tl_wgmma_m64n256k32_e4m3(d, tl_wgmma_desc_advance(da, 32 * ks), tl_wgmma_desc_advance(db, 32 * ks), 1);
            else tl_wgmma_m64n256k16_bf16(d, tl_wgmma_desc_advance(da, 32 * ks), tl_wgmma_desc_advance(db, 32 * ks), 1);
        }
        tl_wgmma_commit();
        tl_wgmma_wait<1>();
    }
    tl_wgmma_wait<0>();
    tl_wgmma_hold(d);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 128; i++) s += d[i];
    out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = s;
#else
    (void)tile;
    (void)out;
    (void)iters;
#endif
}

/* C = A * Bt^T for A [64][128 bytes], Bt [64][128 bytes] (64 BF16 or 128 E4M3 a row), one
 * warpgroup: C[64][64] from the shared-memory form, C2 from the register-A form; for BF16 also
 * C3 [64][128] from the register-A form with an MN-major B: column n < 64 is Bt's row n, column
 * 64 + n Bt's row 63 - n (the second column block, reached through the leading byte offset). */
template <int FP8>
__global__ void tl_roofline_check_wgmma(const uint8_t *A, const uint8_t *Bt, float *C, float *C2, float *C3)
{
#if TL_WGMMA_AVAILABLE
    TL_SHARED_ALIGNED(1024, uint8_t, sa, [64 * 128]);
    TL_SHARED_ALIGNED(1024, uint8_t, sb, [64 * 128]);
    TL_SHARED_ALIGNED(1024, uint8_t, sbt, [2 * 64 * 128]);
    wg_stage_sw128(sa, A, 64, 64);
    wg_stage_sw128(sb, Bt, 64, 64);
    if (!FP8) /* [k][n] in two column blocks of 64 n: k-row k holds n's element k, 128 bytes a row */
        for (int i = threadIdx.x; i < 2 * 64 * 64; i += blockDim.x) {
            const int blk = i / 4096, k = (i / 64) % 64, n = i % 64, src = blk ? 63 - n : n;
            *(uint16_t *)(sbt + blk * 8192 + tl_wgmma_sw128_offset(k, 2 * n)) = *(const uint16_t *)(Bt + src * 128 + 2 * k);
        }
    tl_fence_proxy_async();
    __syncthreads();
    const uint64_t da = tl_wgmma_desc_sw128(sa), db = tl_wgmma_desc_sw128(sb);
    const int w = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
    float d[32];
    tl_wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        if (FP8) tl_wgmma_m64n64k32_e4m3(d, tl_wgmma_desc_advance(da, 32 * ks), tl_wgmma_desc_advance(db, 32 * ks), ks > 0);
        else tl_wgmma_m64n64k16_bf16(d, tl_wgmma_desc_advance(da, 32 * ks), tl_wgmma_desc_advance(db, 32 * ks), ks > 0);
    }
    tl_wgmma_commit();
    tl_wgmma_wait<0>();
    tl_wgmma_hold(d);
    for (int j = 0; j < 8; j++)
        for (int h = 0; h < 4; h++)
            C[(16 * w + g + 8 * (h / 2)) * 64 + 8 * j + 2 * t + h % 2] = d[4 * j + h];
    /* register A: word k0 of row r is bytes 4 k0..4 k0 + 3 (two BF16 or four E4M3), the same
     * fragment layout for both */
    const uint32_t *A32 = (const uint32_t *)A; /* 32 words a row */
    tl_wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        const int r0 = 16 * w + g, k0 = ks * 8 + t;
        uint32_t a[4] = {A32[r0 * 32 + k0], A32[(r0 + 8) * 32 + k0], A32[r0 * 32 + k0 + 4], A32[(r0 + 8) * 32 + k0 + 4]};
        if (FP8) tl_wgmma_m64n64k32_e4m3_rs(d, a, tl_wgmma_desc_advance(db, 32 * ks), ks > 0);
        else tl_wgmma_m64n64k16_bf16_rs(d, a, tl_wgmma_desc_advance(db, 32 * ks), ks > 0);
    }
    tl_wgmma_commit();
    tl_wgmma_wait<0>();
    tl_wgmma_hold(d);
    for (int j = 0; j < 8; j++)
        for (int h = 0; h < 4; h++)
            C2[(16 * w + g + 8 * (h / 2)) * 64 + 8 * j + 2 * t + h % 2] = d[4 * j + h];
    if (!FP8) {
        float e[64];
        const uint64_t dbt = tl_wgmma_desc_sw128_mn(sbt, 8192);
        tl_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const int r0 = 16 * w + g, k0 = ks * 8 + t;
            uint32_t a[4] = {A32[r0 * 32 + k0], A32[(r0 + 8) * 32 + k0], A32[r0 * 32 + k0 + 4], A32[(r0 + 8) * 32 + k0 + 4]};
            tl_wgmma_m64n128k16_bf16_rs_tb(e, a, tl_wgmma_desc_advance(dbt, 2048 * ks), ks > 0);
        }
        tl_wgmma_commit();
        tl_wgmma_wait<0>();
        tl_wgmma_hold(e);
        for (int j = 0; j < 16; j++)
            for (int h = 0; h < 4; h++)
                C3[(16 * w + g + 8 * (h / 2)) * 128 + 8 * j + 2 * t + h % 2] = e[4 * j + h];
    }
#else
    (void)A;
    (void)Bt;
    (void)C;
    (void)C2;
    (void)C3;
#endif
}

/* ---------------------------------------------------------------------------------------------
 * HBM kernels
 * ------------------------------------------------------------------------------------------- */
/* Load modes: 0 plain, 1 streaming (evict-first / non-temporal), 2 non-coherent with a 256-byte
 * L2 prefetch hint (NVIDIA; the same as 1 on AMD). */
template <int MODE>
static __device__ __forceinline__ uint4 load16(const uint4 *p)
{
#if defined(TL_GPU_NVIDIA)
    if (MODE == 1) return __ldcs(p);
    if (MODE == 2) {
        uint4 v;
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p));
        return v;
    }
    return *p;
#else
    if (MODE == 0) return *p;
    uint4 v;
    v.x = __builtin_nontemporal_load(&p->x);
    v.y = __builtin_nontemporal_load(&p->y);
    v.z = __builtin_nontemporal_load(&p->z);
    v.w = __builtin_nontemporal_load(&p->w);
    return v;
#endif
}

template <int MODE>
static __device__ __forceinline__ void store16(uint4 *p, uint4 v)
{
#if defined(TL_GPU_NVIDIA)
    if (MODE == 1) __stcs(p, v);
    else *p = v;
#else
    if (MODE == 1) {
        __builtin_nontemporal_store(v.x, &p->x);
        __builtin_nontemporal_store(v.y, &p->y);
        __builtin_nontemporal_store(v.z, &p->z);
        __builtin_nontemporal_store(v.w, &p->w);
    } else {
        *p = v;
    }
#endif
}

/* Block sum of one uint32 per thread into partial[blockIdx.x]; blockDim.x <= 1024. */
static __device__ __forceinline__ void block_sum_u32(unsigned s, unsigned *partial)
{
    TL_SHARED(unsigned, red, [1024 / 32]);
    for (int m = TL_WAVE / 2; m > 0; m >>= 1) s += tl_shfl_xor(s, m);
    int waves = (int)(blockDim.x / TL_WAVE);
    if (tl_lane() == 0) red[tl_wave_id()] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned t = 0;
        for (int w = 0; w < waves; w++) t += red[w];
        partial[blockIdx.x] = t;
    }
}

/* The index range of this thread's block. LAYOUT 0: the whole buffer, grid-stride (persistent
 * grid); LAYOUT 1: a contiguous chunk per block (DRAM-page friendly; with a large grid this is
 * the one-shot kernel). step = the distance between a thread's consecutive vectors. */
template <int LAYOUT>
static __device__ __forceinline__ void block_range(size_t n16, size_t *begin, size_t *end, size_t *step)
{
    if (LAYOUT == 0) {
        *begin = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
        *end = n16;
        *step = (size_t)gridDim.x * blockDim.x;
    } else {
        size_t chunk = (n16 + gridDim.x - 1) / gridDim.x;
        chunk = (chunk + blockDim.x - 1) / blockDim.x * blockDim.x;
        size_t b0 = (size_t)blockIdx.x * chunk;
        *begin = b0 + threadIdx.x;
        *end = b0 + chunk < n16 ? b0 + chunk : n16;
        *step = blockDim.x;
    }
}

template <int UNROLL, int MODE, int LAYOUT>
__global__ void __launch_bounds__(1024) tl_roofline_hbm_read(const uint4 *src, size_t n16, unsigned *partial)
{
    size_t i, end, step;
    block_range<LAYOUT>(n16, &i, &end, &step);
    unsigned s = 0;
    for (; i + (UNROLL - 1) * step < end; i += UNROLL * step) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = load16<MODE>(src + i + u * step);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) s += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    for (; i < end; i += step) {
        uint4 v = load16<MODE>(src + i);
        s += v.x + v.y + v.z + v.w;
    }
    block_sum_u32(s, partial);
}

template <int UNROLL, int MODE, int LAYOUT>
__global__ void __launch_bounds__(1024) tl_roofline_hbm_copy(const uint4 *src, uint4 *dst, size_t n16)
{
    size_t i, end, step;
    block_range<LAYOUT>(n16, &i, &end, &step);
    for (; i + (UNROLL - 1) * step < end; i += UNROLL * step) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = load16<MODE == 1 ? 1 : (MODE == 2 ? 2 : 0)>(src + i + u * step);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) store16<MODE == 1 ? 1 : 0>(dst + i + u * step, v[u]);
    }
    for (; i < end; i += step) dst[i] = src[i];
}

/* word w of the buffer holds w (mod 2^32): sums and copies have closed-form answers. */
__global__ void tl_roofline_fill_index(unsigned *buf, size_t nwords)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += stride)
        buf[i] = (unsigned)i;
}

__global__ void tl_roofline_count_mismatch(const unsigned *buf, size_t nwords, unsigned long long *bad)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned long long n = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += stride)
        n += buf[i] != (unsigned)i;
    if (n) atomicAdd(bad, n);
}

/* ---------------------------------------------------------------------------------------------
 * Host side
 * ------------------------------------------------------------------------------------------- */
extern "C" void tl_roofline_default_opts(tl_roofline_opts *o)
{
    o->warmup = 20;
    o->iters = 200;
    o->hbm_gib = 8.0;
    o->quick = 0;
}

/* the most blocks an HBM kernel is launched with (the size of the partial-sum array) */
#define MAX_HBM_BLOCKS (1 << 20)

typedef enum { ARCH_NVIDIA, ARCH_GFX942, ARCH_GFX950, ARCH_OTHER } arch_kind;

static arch_kind arch_of(const tl_gpu_info *g)
{
    if (!g->vendor_amd) return ARCH_NVIDIA;
    if (strncmp(g->arch, "gfx950", 6) == 0) return ARCH_GFX950;
    if (strncmp(g->arch, "gfx94", 5) == 0) return ARCH_GFX942;
    return ARCH_OTHER;
}

/* M, N, K of the device's instruction for one dtype, from mma_shapes.h (host-side facts). */
static void mma_shape(arch_kind a, int fp8, int *m, int *n, int *k)
{
    switch (a) {
    case ARCH_NVIDIA:
        *m = fp8 ? TL_MMA_SM89_FP8_M : TL_MMA_SM80_BF16_M;
        *n = fp8 ? TL_MMA_SM89_FP8_N : TL_MMA_SM80_BF16_N;
        *k = fp8 ? TL_MMA_SM89_FP8_K : TL_MMA_SM80_BF16_K;
        break;
    case ARCH_GFX950:
        *m = fp8 ? TL_MMA_GFX950_FP8_M : TL_MMA_GFX950_BF16_M;
        *n = fp8 ? TL_MMA_GFX950_FP8_N : TL_MMA_GFX950_BF16_N;
        *k = fp8 ? TL_MMA_GFX950_FP8_K : TL_MMA_GFX950_BF16_K;
        break;
    default:
        *m = fp8 ? TL_MMA_GFX942_FP8_M : TL_MMA_GFX942_BF16_M;
        *n = fp8 ? TL_MMA_GFX942_FP8_N : TL_MMA_GFX942_BF16_N;
        *k = fp8 ? TL_MMA_GFX942_FP8_K : TL_MMA_GFX942_BF16_K;
        break;
    }
}

/* A random E4M3 byte that is finite in both the OCP and the FNUZ reading (not 0x7F/0xFF, 0x80). */
static uint8_t random_fp8(tl_rng *r)
{
    for (;;) {
        uint8_t b = (uint8_t)tl_rng_below(r, 256);
        if ((b & 0x7F) != 0x7F && b != 0x80) return b;
    }
}

static float fp8_value(uint8_t b, int fnuz)
{
    float v = tl_code_e4m3_to_f32(b);
    return fnuz ? 0.5f * v : v; /* FNUZ bias 8: the same bits mean half */
}

typedef struct {
    tl_roofline_report *rep;
    const tl_roofline_opts *o;
    tl_bench_opts bopts;
    arch_kind arch;
    int threads_mma;
    /* device buffers */
    uint4 *hbm;   /* read buffer, n16 x 16 bytes */
    uint4 *dst;   /* copy destination */
    size_t n16;
    unsigned *partial;
    float *mma_out;
    void *mma_tile;
} roofline_ctx;

/* ---- one timed configuration ---- */
typedef struct {
    roofline_ctx *c;
    int which; /* kernel family */
    int nacc, blocks, threads, unroll, mode, fmt, layout;
    int iters;
} launch_desc;

enum { K_BF16, K_FP8, K_F8F6F4, K_READ, K_COPY, K_MEMCPY, K_WGMMA_BF16, K_WGMMA_FP8 };

/* 1 when this build holds the sm_90a kernels and the device runs them (Hopper). */
static int wgmma_runs(const roofline_ctx *c)
{
#if defined(TL_HAVE_WGMMA)
    return c->arch == ARCH_NVIDIA && strncmp(c->rep->gpu.arch, "sm_90", 5) == 0;
#else
    (void)c;
    return 0;
#endif
}


template <int NACC>
static void launch_mma(const launch_desc *d, hipStream_t s)
{
    roofline_ctx *c = d->c;
    if (d->which == K_BF16)
        (void)tl_launch(tl_roofline_mma_bf16<NACC>, d->blocks, d->threads, 0, s, false, (const uint16_t *)c->mma_tile, c->mma_out, d->iters);
    else if (d->which == K_FP8)
        (void)tl_launch(tl_roofline_mma_fp8<NACC>, d->blocks, d->threads, 0, s, false, (const uint8_t *)c->mma_tile + TILE_BYTES / 2, c->mma_out, d->iters, 0u);
    else if (d->fmt == 2)
        (void)tl_launch(tl_roofline_mma_f8f6f4<NACC, 2>, d->blocks, d->threads, 0, s, false, (const int *)((const uint8_t *)c->mma_tile + TILE_BYTES / 2), c->mma_out, d->iters);
    else
        (void)tl_launch(tl_roofline_mma_f8f6f4<NACC, 4>, d->blocks, d->threads, 0, s, false, (const int *)((const uint8_t *)c->mma_tile + TILE_BYTES / 2), c->mma_out, d->iters);
}

template <int UNROLL, int LAYOUT>
static void launch_hbm(const launch_desc *d, hipStream_t s)
{
    roofline_ctx *c = d->c;
    if (d->which == K_READ) {
        if (d->mode == 0) (void)tl_launch(tl_roofline_hbm_read<UNROLL, 0, LAYOUT>, d->blocks, d->threads, 0, s, false, c->hbm, c->n16, c->partial);
        else if (d->mode == 1) (void)tl_launch(tl_roofline_hbm_read<UNROLL, 1, LAYOUT>, d->blocks, d->threads, 0, s, false, c->hbm, c->n16, c->partial);
        else (void)tl_launch(tl_roofline_hbm_read<UNROLL, 2, LAYOUT>, d->blocks, d->threads, 0, s, false, c->hbm, c->n16, c->partial);
    } else {
        size_t half = c->n16 / 2;
        if (d->mode == 0) (void)tl_launch(tl_roofline_hbm_copy<UNROLL, 0, LAYOUT>, d->blocks, d->threads, 0, s, false, c->hbm, c->dst, half);
        else if (d->mode == 1) (void)tl_launch(tl_roofline_hbm_copy<UNROLL, 1, LAYOUT>, d->blocks, d->threads, 0, s, false, c->hbm, c->dst, half);
        else (void)tl_launch(tl_roofline_hbm_copy<UNROLL, 2, LAYOUT>, d->blocks, d->threads, 0, s, false, c->hbm, c->dst, half);
    }
}

template <int UNROLL>
static void launch_hbm_layout(const launch_desc *d, hipStream_t s)
{
    if (d->layout == 1) launch_hbm<UNROLL, 1>(d, s);
    else launch_hbm<UNROLL, 0>(d, s);
}

static const char *kernel_name(int which)
{
    switch (which) {
    case K_BF16: return "tl_roofline_mma_bf16";
    case K_FP8: return "tl_roofline_mma_fp8";
    case K_F8F6F4: return "tl_roofline_mma_f8f6f4";
    case K_READ: return "tl_roofline_hbm_read";
    case K_MEMCPY: return "hipMemcpyAsync";
    case K_WGMMA_BF16: return "tl_roofline_wgmma_bf16";
    case K_WGMMA_FP8: return "tl_roofline_wgmma_fp8";
    default: return "tl_roofline_hbm_copy";
    }
}

static int launch_one(void *ctx, void *stream)
{
    const launch_desc *d = (const launch_desc *)ctx;
    hipStream_t s = (hipStream_t)stream;
    if (d->which == K_MEMCPY) {
        /* the runtime's own device-to-device copy, for comparison (not a ceiling) */
        TL_GPU_CHECK(hipMemcpyAsync(d->c->dst, d->c->hbm, d->c->n16 / 2 * 16, hipMemcpyDeviceToDevice, s));
        return 0;
    }
    if (d->which == K_WGMMA_BF16)
        (void)tl_launch(tl_roofline_wgmma<0>, d->blocks, d->threads, 0, s, false, (const uint8_t *)d->c->mma_tile, d->c->mma_out, d->iters);
    else if (d->which == K_WGMMA_FP8)
        (void)tl_launch(tl_roofline_wgmma<1>, d->blocks, d->threads, 0, s, false, (const uint8_t *)d->c->mma_tile + TILE_BYTES / 2, d->c->mma_out, d->iters);
    else if (d->which == K_READ || d->which == K_COPY) {
        if (d->unroll == 1) launch_hbm_layout<1>(d, s);
        else if (d->unroll == 4) launch_hbm_layout<4>(d, s);
        else if (d->unroll == 8) launch_hbm_layout<8>(d, s);
        else launch_hbm_layout<2>(d, s);
    } else {
        if (d->nacc == 4) launch_mma<4>(d, s);
        else if (d->nacc == 16) launch_mma<16>(d, s);
        else launch_mma<8>(d, s);
    }
    TL_GPU_CHECK_LAUNCH(kernel_name(d->which));
    return 0;
}

static const char *mode_name(int which, int mode)
{
    if (mode == 0) return "plain";
    if (mode == 1) return which == K_COPY ? "stream ld/st" : "stream";
    return "nc+L2::256B";
}

static int time_config(roofline_ctx *c, launch_desc *d, const char *ceiling)
{
    tl_roofline_report *rep = c->rep;
    if (rep->npoints >= TL_ROOFLINE_MAX_POINTS)
        return tl_error(TL_EFAIL, "roofline", "too many configurations");
    tl_bench_result r;
    int st = tl_bench_run(&c->bopts, launch_one, d, &r);
    if (st) return st;
    tl_roofline_point *p = &rep->points[rep->npoints++];
    memset(p, 0, sizeof *p);
    snprintf(p->ceiling, sizeof p->ceiling, "%s", ceiling);
    snprintf(p->kernel, sizeof p->kernel, "%s", kernel_name(d->which));
    p->median_ms = r.median_ms;
    double waves = (double)d->blocks * d->threads / rep->gpu.wave_size;
    if (d->which == K_MEMCPY) {
        double bytes = 2.0 * (double)(c->n16 / 2) * 16;
        p->bytes = bytes;
        p->value = bytes / (r.median_ms * 1e-3) / 1e9;
        snprintf(p->config, sizeof p->config, "device-to-device, %.2f GiB", bytes / 1073741824.0);
    } else if (d->which == K_READ || d->which == K_COPY) {
        double bytes = d->which == K_READ ? (double)c->n16 * 16 : 2.0 * (double)(c->n16 / 2) * 16;
        p->bytes = bytes;
        p->value = bytes / (r.median_ms * 1e-3) / 1e9;
        snprintf(p->config, sizeof p->config, "grid %d x %d, unroll %d, %s, %s, %.2f GiB", d->blocks,
                 d->threads, d->unroll, mode_name(d->which, d->mode),
                 d->layout ? "chunk per block" : "grid-stride", bytes / 1073741824.0);
    } else if (d->which == K_WGMMA_BF16 || d->which == K_WGMMA_FP8) {
        int k = d->which == K_WGMMA_FP8 ? 32 : 16;
        double warpgroups = (double)d->blocks * d->threads / 128.0;
        p->flops = warpgroups * d->iters * 4 * 2.0 * 64 * 256 * k;
        p->value = p->flops / (r.median_ms * 1e-3) / 1e12;
        snprintf(p->config, sizeof p->config, "grid %d x %d, %d iters, wgmma m64n256k%d, 2 groups in flight",
                 d->blocks, d->threads, d->iters, k);
    } else {
        int m, n, k;
        mma_shape(c->arch, d->which != K_BF16, &m, &n, &k);
        if (d->which == K_F8F6F4) m = 16, n = 16, k = 128;
        p->flops = waves * d->iters * d->nacc * 2.0 * m * n * k;
        p->bytes = 0;
        p->value = p->flops / (r.median_ms * 1e-3) / 1e12;
        snprintf(p->config, sizeof p->config, "grid %d x %d, %d acc/wave, %d iters, %dx%dx%d",
                 d->blocks, d->threads, d->nacc, d->iters, m, n, k);
    }
    return 0;
}

/* Marks the best point of a ceiling and returns its value. */
static double best_of(tl_roofline_report *rep, const char *ceiling)
{
    int bi = -1;
    for (int i = 0; i < rep->npoints; i++)
        if (strcmp(rep->points[i].ceiling, ceiling) == 0 &&
            (bi < 0 || rep->points[i].value > rep->points[bi].value))
            bi = i;
    if (bi < 0) return 0.0;
    rep->points[bi].best = 1;
    return rep->points[bi].value;
}

typedef struct {
    int unroll, mode, layout, per_cu, threads;
} hbm_config;

/* The read-only reduction's configurations (the first is the one --quick and the read floor run). */
static const hbm_config rcfg[] = {
    {8, 0, 1, 0, 256}, {4, 0, 1, 0, 256}, {2, 0, 1, 0, 256}, {4, 0, 1, 0, 512}, {8, 0, 1, 0, 512},
    {8, 1, 1, 0, 256}, {8, 0, 1, 2, 1024}, {8, 0, 0, 2, 1024}, {4, 0, 1, 4, 512}, {8, 2, 1, 0, 256},
};

/* The launch of one memory-kernel configuration over n16 16-byte vectors: a persistent grid of
 * per_cu blocks per CU, or (per_cu 0) one UNROLL group of vectors per thread. */
static void hbm_desc(roofline_ctx *c, const hbm_config *cfg, int which, size_t n16, int cus, launch_desc *d)
{
    memset(d, 0, sizeof *d);
    d->c = c;
    d->which = which;
    d->unroll = cfg->unroll;
    d->mode = cfg->mode;
    d->layout = cfg->layout;
    d->threads = cfg->threads;
    size_t per_group = (size_t)cfg->threads * (size_t)cfg->unroll;
    size_t blocks = cfg->per_cu > 0 ? (size_t)cus * (size_t)cfg->per_cu : (n16 + per_group - 1) / per_group;
    d->blocks = (int)(blocks > MAX_HBM_BLOCKS ? MAX_HBM_BLOCKS : blocks);
}

/* ---- checks ---- */
static int check_mma_tiles(roofline_ctx *c)
{
    int st = 0;
    int mb, nb, kb, mf, nf, kf;
    mma_shape(c->arch, 0, &mb, &nb, &kb);
    mma_shape(c->arch, 1, &mf, &nf, &kf);
    int fnuz = c->arch == ARCH_GFX942;
    int has_fp8 = c->arch != ARCH_OTHER;
    size_t na = (size_t)mb * 2 * kb, nbt = (size_t)nb * 2 * kb;
    size_t fa = (size_t)mf * 2 * kf, fbt = (size_t)nf * 2 * kf;
    uint16_t *hA = (uint16_t *)malloc(na * 2), *hB = (uint16_t *)malloc(nbt * 2);
    uint8_t *qA = (uint8_t *)malloc(fa), *qB = (uint8_t *)malloc(fbt);
    float *hC = (float *)malloc(sizeof(float) * 32 * 32);
    void *dA = NULL, *dB = NULL;
    float *dC = NULL;
    tl_rng rng;
    tl_rng_seed(&rng, 0x600dfeedULL);
    if (!hA || !hB || !qA || !qB || !hC) {
        st = tl_error(TL_EFAIL, "roofline", "out of host memory");
        goto done;
    }
    for (size_t i = 0; i < na; i++) hA[i] = (uint16_t)tl_code_bf16_from_f32((float)(2.0 * tl_rng_uniform(&rng) - 1.0));
    for (size_t i = 0; i < nbt; i++) hB[i] = (uint16_t)tl_code_bf16_from_f32((float)(2.0 * tl_rng_uniform(&rng) - 1.0));
    for (size_t i = 0; i < fa; i++) qA[i] = random_fp8(&rng);
    for (size_t i = 0; i < fbt; i++) qB[i] = random_fp8(&rng);
    TL_GPU_CHECK_GOTO(hipMalloc(&dA, 4096), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc(&dB, 4096), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&dC, sizeof(float) * 32 * 32), st, done);

    for (int pass = 0; pass < 1 + has_fp8; pass++) {
        int m = pass ? mf : mb, n = pass ? nf : nb, k = pass ? kf : kb;
        /* poison: every element of C must be written */
        for (int i = 0; i < m * n; i++) hC[i] = NAN;
        TL_GPU_CHECK_GOTO(hipMemcpy(dC, hC, sizeof(float) * m * n, hipMemcpyHostToDevice), st, done);
        if (pass == 0) {
            TL_GPU_CHECK_GOTO(hipMemcpy(dA, hA, na * 2, hipMemcpyHostToDevice), st, done);
            TL_GPU_CHECK_GOTO(hipMemcpy(dB, hB, nbt * 2, hipMemcpyHostToDevice), st, done);
            (void)tl_launch(tl_roofline_check_mma_bf16, 1, c->rep->gpu.wave_size, 0, 0, false, (const uint16_t *)dA, (const uint16_t *)dB, dC);
            TL_GPU_CHECK_LAUNCH_GOTO("tl_roofline_check_mma_bf16", st, done);
        } else {
            TL_GPU_CHECK_GOTO(hipMemcpy(dA, qA, fa, hipMemcpyHostToDevice), st, done);
            TL_GPU_CHECK_GOTO(hipMemcpy(dB, qB, fbt, hipMemcpyHostToDevice), st, done);
            (void)tl_launch(tl_roofline_check_mma_fp8, 1, c->rep->gpu.wave_size, 0, 0, false, (const uint8_t *)dA, (const uint8_t *)dB, dC);
            TL_GPU_CHECK_LAUNCH_GOTO("tl_roofline_check_mma_fp8", st, done);
        }
        TL_GPU_CHECK_GOTO(hipMemcpy(hC, dC, sizeof(float) * m * n, hipMemcpyDeviceToHost), st, done);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double ref = 0.0, mag = 0.0;
                for (int kk = 0; kk < 2 * k; kk++) {
                    double x = pass ? fp8_value(qA[i * 2 * k + kk], fnuz) : tl_code_bf16_to_f32(hA[i * 2 * k + kk]);
                    double y = pass ? fp8_value(qB[j * 2 * k + kk], fnuz) : tl_code_bf16_to_f32(hB[j * 2 * k + kk]);
                    ref += x * y;
                    mag += fabs(x * y);
                }
                double got = hC[i * n + j];
                /* f32 accumulation of 2k exact products: a few ulps of the magnitude */
                if (!(fabs(got - ref) <= 1e-5 * mag + 1e-30)) {
                    st = tl_error(TL_EFAIL, pass ? "tl_roofline_check_mma_fp8" : "tl_roofline_check_mma_bf16",
                                  "C[%d][%d] = %.9g, host product %.9g: the fragment layout is wrong on %s",
                                  i, j, got, ref, c->rep->gpu.arch);
                    goto done;
                }
            }
    }
done:
    if (dA) (void)hipFree(dA);
    if (dB) (void)hipFree(dB);
    if (dC) (void)hipFree(dC);
    free(hA);
    free(hB);
    free(qA);
    free(qB);
    free(hC);
    return st;
}

/* The wgmma descriptors, swizzle and accumulator layout (kernels/wgmma.h) against a host product:
 * one 64 x 64 x 128-byte tile in E4M3 and in BF16 (shared-memory and register A). */
static int check_wgmma_tiles(roofline_ctx *c)
{
    if (!wgmma_runs(c)) return 0;
    int st = 0;
    uint8_t *hA = (uint8_t *)malloc(8192), *hB = (uint8_t *)malloc(8192);
    float *hC = (float *)malloc(sizeof(float) * 4096 * 4); /* C, C2, C3 (64 x 128) */
    uint8_t *dA = NULL, *dB = NULL;
    float *dC = NULL;
    tl_rng rng;
    tl_rng_seed(&rng, 0x3e11a5edULL);
    if (!hA || !hB || !hC) {
        st = tl_error(TL_EFAIL, "roofline", "out of host memory");
        goto done;
    }
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&dA, 8192), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&dB, 8192), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&dC, sizeof(float) * 4096 * 4), st, done);
    for (int fp8 = 0; fp8 < 2; fp8++) {
        const char *name = fp8 ? "tl_roofline_check_wgmma<fp8>" : "tl_roofline_check_wgmma<bf16>";
        for (int i = 0; i < 8192; i += 1 + !fp8) {
            if (fp8) {
                hA[i] = random_fp8(&rng);
                hB[i] = random_fp8(&rng);
            } else {
                uint16_t a = (uint16_t)tl_code_bf16_from_f32((float)(2.0 * tl_rng_uniform(&rng) - 1.0));
                uint16_t b = (uint16_t)tl_code_bf16_from_f32((float)(2.0 * tl_rng_uniform(&rng) - 1.0));
                memcpy(hA + i, &a, 2);
                memcpy(hB + i, &b, 2);
            }
        }
        for (int i = 0; i < 4096 * 4; i++) hC[i] = NAN;
        TL_GPU_CHECK_GOTO(hipMemcpy(dC, hC, sizeof(float) * 4096 * 4, hipMemcpyHostToDevice), st, done);
        TL_GPU_CHECK_GOTO(hipMemcpy(dA, hA, 8192, hipMemcpyHostToDevice), st, done);
        TL_GPU_CHECK_GOTO(hipMemcpy(dB, hB, 8192, hipMemcpyHostToDevice), st, done);
        if (fp8) (void)tl_launch(tl_roofline_check_wgmma<1>, 1, 128, 0, 0, false, dA, dB, dC, dC + 4096, dC + 8192);
        else (void)tl_launch(tl_roofline_check_wgmma<0>, 1, 128, 0, 0, false, dA, dB, dC, dC + 4096, dC + 8192);
        TL_GPU_CHECK_LAUNCH_GOTO(name, st, done);
        TL_GPU_CHECK_GOTO(hipMemcpy(hC, dC, sizeof(float) * 4096 * 4, hipMemcpyDeviceToHost), st, done);
        int k = fp8 ? 128 : 64;
        /* forms: 0 shared-memory A, 1 register A, 2 (BF16) register A with the MN-major B, whose
         * columns 64..127 are Bt's rows 63..0 */
        for (int form = 0; form < 3 - fp8; form++)
            for (int i = 0; i < 64; i++)
                for (int jc = 0; jc < (form == 2 ? 128 : 64); jc++) {
                    const int j = jc < 64 ? jc : 127 - jc;
                    double ref = 0.0, mag = 0.0;
                    for (int kk = 0; kk < k; kk++) {
                        double x, y;
                        if (fp8) {
                            x = fp8_value(hA[i * 128 + kk], 0);
                            y = fp8_value(hB[j * 128 + kk], 0);
                        } else {
                            uint16_t a, b;
                            memcpy(&a, hA + i * 128 + 2 * kk, 2);
                            memcpy(&b, hB + j * 128 + 2 * kk, 2);
                            x = tl_code_bf16_to_f32(a);
                            y = tl_code_bf16_to_f32(b);
                        }
                        ref += x * y;
                        mag += fabs(x * y);
                    }
                    double got = form == 2 ? hC[8192 + i * 128 + jc] : hC[form * 4096 + i * 64 + j];
                    /* BF16: exact products summed in f32 (a few ulps of the magnitude). E4M3: Hopper's
                     * FP8 accumulator is narrower than f32 (13 mantissa bits, "FP22", per the
                     * SageAttention2 paper; DeepSeek-V3's report: about 14 bits): up to one of its
                     * ulps lost per group of 4 products added, K / 4 groups, so 2^-13 K / 4 of the
                     * magnitude; a wrong layout errs by the magnitude itself. */
                    const double tol = fp8 ? ldexp(1.0, -TL_WGMMA_E4M3_ACC_BITS) * (k / 4) * mag : 1e-5 * mag;
                    if (!(fabs(got - ref) <= tol + 1e-30)) {
                        static const char *const form_name[] = {"", "register-A form: ", "register-A form, MN-major B: "};
                        st = tl_error(TL_EFAIL, name, "%sC[%d][%d] = %.9g, host product %.9g: the descriptor, swizzle or layout is wrong",
                                      form_name[form], i, jc, got, ref);
                        goto done;
                    }
                }
    }
done:
    if (dA) (void)hipFree(dA);
    if (dB) (void)hipFree(dB);
    if (dC) (void)hipFree(dC);
    free(hA);
    free(hB);
    free(hC);
    return st;
}

static int check_read_sum(roofline_ctx *c, int blocks)
{
    unsigned *h = (unsigned *)malloc(sizeof(unsigned) * (size_t)blocks);
    if (!h) return tl_error(TL_EFAIL, "roofline", "out of host memory");
    hipError_t e = hipMemcpy(h, c->partial, sizeof(unsigned) * (size_t)blocks, hipMemcpyDeviceToHost);
    if (e != hipSuccess) {
        free(h);
        return tl_gpu_fail("hipMemcpy", hipGetErrorString(e), __FILE__, __LINE__);
    }
    unsigned got = 0;
    for (int b = 0; b < blocks; b++) got += h[b];
    free(h);
    /* sum of w for w in [0, n) mod 2^32, with n = 4 n16 words */
    uint64_t n = (uint64_t)c->n16 * 4;
    unsigned __int128 full = (unsigned __int128)n * (n - 1) / 2;
    unsigned want = (unsigned)(uint64_t)full;
    if (got != want)
        return tl_error(TL_EFAIL, "tl_roofline_hbm_read", "sum %u, expected %u: the reduction is wrong",
                        got, want);
    return 0;
}

static int check_copy(roofline_ctx *c)
{
    unsigned long long *dbad = NULL, bad = 0;
    int st = 0;
    size_t words = c->n16 / 2 * 4;
    TL_GPU_CHECK(hipMalloc((void **)&dbad, sizeof bad));
    TL_GPU_CHECK_GOTO(hipMemset(dbad, 0, sizeof bad), st, done);
    (void)tl_launch(tl_roofline_count_mismatch, 1024, 256, 0, 0, false, (const unsigned *)c->dst, words, dbad);
    TL_GPU_CHECK_LAUNCH_GOTO("tl_roofline_count_mismatch", st, done);
    TL_GPU_CHECK_GOTO(hipMemcpy(&bad, dbad, sizeof bad, hipMemcpyDeviceToHost), st, done);
    if (bad)
        st = tl_error(TL_EFAIL, "tl_roofline_hbm_copy", "%llu of %zu words differ after the copy",
                      bad, words);
done:
    (void)hipFree(dbad);
    return st;
}

static int clear_dst(roofline_ctx *c)
{
    TL_GPU_CHECK(hipMemset(c->dst, 0xFF, c->n16 / 2 * 16));
    return 0;
}

/* ---- the whole run ---- */
static int run_all(roofline_ctx *c)
{
    tl_roofline_report *rep = c->rep;
    const tl_roofline_opts *o = c->o;
    int cus = rep->gpu.compute_units;
    int st;

    if ((st = check_mma_tiles(c))) return st;
    if ((st = check_wgmma_tiles(c))) return st;

    /* matrix-core loops */
    int threads = 256;
    struct { int nacc, per_cu; } mcfg[] = {{8, 4}, {4, 4}, {8, 2}, {16, 2}, {16, 4}};
    int nm = o->quick ? 1 : (int)(sizeof mcfg / sizeof mcfg[0]);
    int kinds[3] = {K_BF16, K_FP8, K_F8F6F4};
    for (int ki = 0; ki < 3; ki++) {
        int which = kinds[ki];
        if (which == K_FP8 && c->arch == ARCH_OTHER) continue;
        int nfmt = which == K_F8F6F4 ? (c->arch == ARCH_GFX950 ? 2 : 0) : 1;
        for (int f = 0; f < nfmt; f++) {
            for (int i = 0; i < nm; i++) {
                launch_desc d;
                memset(&d, 0, sizeof d);
                d.c = c;
                d.which = which;
                d.nacc = mcfg[i].nacc;
                d.blocks = cus * mcfg[i].per_cu;
                d.threads = threads;
                d.fmt = f == 0 ? 2 : 4;
                d.iters = (which == K_BF16 ? 8192 : 4096) * 8 / d.nacc;
                const char *ceil_name = which == K_BF16 ? "bf16_tflops"
                                      : which == K_FP8  ? "fp8_tflops"
                                      : (d.fmt == 2 ? "fp6_tflops" : "fp4_tflops");
                if ((st = time_config(c, &d, ceil_name))) return st;
            }
        }
    }

    /* warpgroup loops: 1-3 warpgroups a block, one block an SM */
    if (wgmma_runs(c)) {
        static const int wg_threads[] = {256, 384, 128};
        int nw = o->quick ? 1 : 3;
        for (int fp8 = 0; fp8 < 2; fp8++)
            for (int i = 0; i < nw; i++) {
                launch_desc d;
                memset(&d, 0, sizeof d);
                d.c = c;
                d.which = fp8 ? K_WGMMA_FP8 : K_WGMMA_BF16;
                d.blocks = cus;
                d.threads = wg_threads[i];
                d.iters = 2048;
                if ((st = time_config(c, &d, fp8 ? "fp8_tflops" : "bf16_tflops"))) return st;
            }
    }

    /* HBM read-only reduction (rcfg, above) and copy (hbm_desc says what per_cu means); the
     * first entry of each list is the one --quick runs. */
    static const hbm_config ccfg[] = {
        {2, 0, 1, 0, 256}, {1, 0, 1, 0, 256}, {1, 0, 1, 0, 512}, {2, 0, 1, 0, 512}, {1, 0, 1, 0, 1024},
        {2, 1, 1, 0, 256}, {4, 0, 1, 0, 256}, {8, 0, 0, 2, 1024}, {4, 0, 1, 2, 1024},
    };
    for (int pass = 0; pass < 2; pass++) {
        const hbm_config *cfg = pass == 0 ? rcfg : ccfg;
        int n = pass == 0 ? (int)(sizeof rcfg / sizeof rcfg[0]) : (int)(sizeof ccfg / sizeof ccfg[0]);
        if (o->quick) n = 1;
        size_t n16 = pass == 0 ? c->n16 : c->n16 / 2;
        for (int i = 0; i < n; i++) {
            launch_desc d;
            hbm_desc(c, &cfg[i], pass == 0 ? K_READ : K_COPY, n16, cus, &d);
            if (pass == 1 && (st = clear_dst(c))) return st;
            if ((st = time_config(c, &d, pass == 0 ? "hbm_read_gbps" : "hbm_copy_gbps"))) return st;
            if (pass == 0 && (st = check_read_sum(c, d.blocks))) return st;
            if (pass == 1 && (st = check_copy(c))) return st;
        }
    }
    if (!o->quick) { /* the runtime's memcpy, as a reference point beside the copy kernel */
        launch_desc d;
        memset(&d, 0, sizeof d);
        d.c = c;
        d.which = K_MEMCPY;
        if ((st = clear_dst(c))) return st;
        if ((st = time_config(c, &d, "memcpy_gbps"))) return st;
        if ((st = check_copy(c))) return st;
    }

    rep->bf16_tflops = best_of(rep, "bf16_tflops");
    rep->fp8_tflops = best_of(rep, "fp8_tflops");
    rep->fp6_tflops = best_of(rep, "fp6_tflops");
    rep->fp4_tflops = best_of(rep, "fp4_tflops");
    rep->hbm_read_gbps = best_of(rep, "hbm_read_gbps");
    rep->hbm_copy_gbps = best_of(rep, "hbm_copy_gbps");
    rep->memcpy_gbps = best_of(rep, "memcpy_gbps");
    return 0;
}

extern "C" int tl_roofline_run(int device, const tl_roofline_opts *opts, tl_roofline_report *rep)
{
    tl_roofline_opts o;
    if (opts) o = *opts;
    else tl_roofline_default_opts(&o);
    if (!(o.hbm_gib >= 0.0625 && o.hbm_gib <= 64.0))
        return tl_error(TL_EUSAGE, "roofline", "HBM buffer of %g GiB is out of range [0.0625, 64]", o.hbm_gib);
    memset(rep, 0, sizeof *rep);
    int st = tl_gpu_query(device, &rep->gpu);
    if (st) return st;
    tl_bench_date(rep->date, sizeof rep->date);

    roofline_ctx c;
    memset(&c, 0, sizeof c);
    c.rep = rep;
    c.o = &o;
    tl_bench_default_opts(&c.bopts);
    c.bopts.warmup = o.warmup;
    c.bopts.iters = o.iters;
    c.arch = arch_of(&rep->gpu);
    switch (c.arch) {
    case ARCH_NVIDIA:
        snprintf(rep->mma_target, sizeof rep->mma_target, "%s", wgmma_runs(&c) ? "mma.sync and wgmma" : "mma.sync m16n8k16/m16n8k32");
        break;
    case ARCH_GFX950: snprintf(rep->mma_target, sizeof rep->mma_target, "mfma 16x16x32/16x16x128"); break;
    case ARCH_GFX942: snprintf(rep->mma_target, sizeof rep->mma_target, "mfma 16x16x16/16x16x32"); break;
    default: snprintf(rep->mma_target, sizeof rep->mma_target, "plain loop"); break;
    }

    size_t bytes = (size_t)(o.hbm_gib * 1073741824.0);
    bytes &= ~(size_t)((1 << 20) - 1);
    c.n16 = bytes / 16;
    if (bytes + bytes / 2 + ((size_t)512 << 20) > rep->gpu.mem_free_bytes)
        return tl_error(TL_EUSAGE, "roofline", "%.2f GiB of buffers do not fit in %.2f GiB free",
                        (bytes * 1.5) / 1073741824.0, rep->gpu.mem_free_bytes / 1073741824.0);

    size_t out_n = (size_t)rep->gpu.compute_units * 8 * 1024;
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&c.hbm, bytes), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&c.dst, bytes / 2), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&c.partial, sizeof(unsigned) * (size_t)MAX_HBM_BLOCKS), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&c.mma_out, sizeof(float) * out_n), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc(&c.mma_tile, TILE_BYTES), st, done);

    (void)tl_launch(tl_roofline_fill_index, 2048, 256, 0, 0, false, (unsigned *)c.hbm, bytes / 4);
    TL_GPU_CHECK_LAUNCH_GOTO("tl_roofline_fill_index", st, done);
    {
        /* the loops' operand tiles: bf16 in the first half, E4M3 bytes (finite in the OCP and
         * FNUZ readings) in the second; random, never zeros */
        unsigned char host[TILE_BYTES];
        tl_rng r;
        tl_rng_seed(&r, 0x5eed1234ULL);
        for (int i = 0; i < TILE_BYTES / 2; i += 2) {
            uint16_t h = (uint16_t)tl_code_bf16_from_f32((float)(0.25 * (2.0 * tl_rng_uniform(&r) - 1.0)));
            memcpy(host + i, &h, 2);
        }
        for (int i = TILE_BYTES / 2; i < TILE_BYTES; i++) host[i] = random_fp8(&r);
        TL_GPU_CHECK_GOTO(hipMemcpy(c.mma_tile, host, TILE_BYTES, hipMemcpyHostToDevice), st, done);
    }
    TL_GPU_CHECK_GOTO(hipDeviceSynchronize(), st, done);
    st = run_all(&c);
    if (st == 0) TL_GPU_CHECK_GOTO(hipDeviceSynchronize(), st, done);
done:
    if (c.hbm) (void)hipFree(c.hbm);
    if (c.dst) (void)hipFree(c.dst);
    if (c.partial) (void)hipFree(c.partial);
    if (c.mma_out) (void)hipFree(c.mma_out);
    if (c.mma_tile) (void)hipFree(c.mma_tile);
    return st;
}

extern "C" int tl_roofline_read_floor(double bytes, const tl_bench_opts *opts, double *us)
{
    *us = 0.0;
    if (!(bytes >= 16.0 && bytes <= 64.0 * 1073741824.0))
        return tl_error(TL_EUSAGE, "roofline", "a read floor of %g bytes is out of range [16 B, 64 GiB]", bytes);
    tl_gpu_info gpu;
    int st = tl_gpu_query(0, &gpu);
    if (st) return st;
    roofline_ctx c;
    memset(&c, 0, sizeof c);
    c.n16 = (size_t)((bytes + 15.0) / 16.0);
    if (opts) c.bopts = *opts;
    else tl_bench_default_opts(&c.bopts);
    launch_desc d; /* the first (--quick) read configuration: a grid sized to the buffer */
    hbm_desc(&c, &rcfg[0], K_READ, c.n16, gpu.compute_units, &d);
    tl_bench_result r;
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&c.hbm, c.n16 * 16), st, done);
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&c.partial, sizeof(unsigned) * (size_t)d.blocks), st, done);
    (void)tl_launch(tl_roofline_fill_index, 2048, 256, 0, 0, false, (unsigned *)c.hbm, c.n16 * 4);
    TL_GPU_CHECK_LAUNCH_GOTO("tl_roofline_fill_index", st, done);
    if ((st = tl_bench_run(&c.bopts, launch_one, &d, &r))) goto done;
    if ((st = check_read_sum(&c, d.blocks))) goto done;
    *us = r.median_ms * 1e3;
done:
    if (c.hbm) (void)hipFree(c.hbm);
    if (c.partial) (void)hipFree(c.partial);
    return st;
}
