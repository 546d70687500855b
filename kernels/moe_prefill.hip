/* kernels/moe_prefill.hip: bf16 stage 1 of the fused MoE for prefill sizes on sm_90a (Hopper's
 * warpgroup MMA, kernels/wgmma.h), and its launch wrapper tl_moe_launch_prefill_s1
 * (kernels/moe_launch.h). Other targets compile an empty body; the launcher refuses them.
 *
 * Contract: the same function as moe_gemm<bf16, 1, *> (kernels/moe.h, stage 1): for every
 * worklist row of a valid tile, act[row][c] = bf16(silu(g) * u), g and u the row's token x
 * (bf16) times the expert's gate row c and up row width + c of W1 (packed, kernels/moe_pack.h,
 * as tl_moe_gpu_open stores it), float32 sums; padding rows of valid tiles get 0; rows of no valid
 * tile are not written.
 *
 * Geometry. A work item is (group, n-block): a group is up to 8 consecutive 16-row tiles of one
 * expert (128 rows: an expert of c edges has ceil(c / 128) groups), an n-block 64 SwiGLU columns
 * (64 gate + 64 up weight rows: 4 of the packing's 32-row groups, whose packed chunks are 8 KiB
 * contiguous each). Grid: x = n-block (width / 64), y = group, numbered over the experts in order
 * (at most max_tiles / 8 + E; a block past the device's group count exits). A block is 2
 * warpgroups (256 threads), warpgroup w multiplying rows 64 w.. of the group by all 128 weight
 * rows: m64n128k16 BF16 products from shared memory, float32 accumulators (64 a thread, whose
 * chain is added into 64 float32 sums every MP_PROMOTE steps). K runs
 * in steps of 128 values (one packed chunk): the step's activation rows (128 x 256 bytes, gathered
 * by token, padding zero-filled) and weight rows (128 x 256 bytes) land by cp.async in two
 * 128-byte column blocks each, in wgmma's 128-byte swizzle, STAGES steps in flight (a
 * STAGES-deep ring, 64 KiB a step). The weights of an item are read once; its activation rows
 * once per n-block (from L2 after the first). Epilogue in registers: a thread holds gate column c
 * and up column c of the same rows (its accumulator columns j and j + 64), so SwiGLU needs no
 * shared memory.
 * Cost: 2 x 128 x 128 x K flops an item; shared memory STAGES x 64 KiB + 1.5 KiB (one block an SM).
 */
#include "moe_launch.h"
#include "wgmma.h"
#include "../numerics/codes.h" /* tl_code_bf16_from_f32: the activation's rounding, as moe_gemm's */

#define MP_ROWS 128                /* rows of a group: 8 tiles of TL_MOE_TILE_M */
#define MP_TILES (MP_ROWS / TL_MOE_TILE_M)
#define MP_NB 64                   /* SwiGLU columns an item */
#define MP_KSTEP 128               /* K values a step: one packed chunk of bf16 (4 x 64-byte runs) */
#define MP_STAGES 3
/* K steps a wgmma accumulator chain runs before its sum is added into the float32 sums (d +=
 * c, round to nearest). The tensor cores' float32 accumulation is less accurate than the
 * round-to-nearest float32 that tl_moe_compare_act's allowance models: one chain over K = 7168
 * (448 k16 products) put about 1 activation in 10^6 beyond it on the H100. A chain of 4 steps
 * (512 K values, 32 products) keeps the sum near float32's rounding. Cost: 64 FADD a thread
 * every MP_PROMOTE steps (about 3% of a step's tensor time at 4, not overlapped with it) and 64
 * registers. */
#define MP_PROMOTE 4
#define MP_THREADS 256
#define MP_STEP_BYTES (2 * MP_ROWS * MP_KSTEP * 2) /* A and B: 128 rows x 256 bytes each */
#define MP_SMEM (MP_STAGES * MP_STEP_BYTES + 1024)   /* + 1024: the ring's alignment slack */

static_assert(TL_MOE_NCOLS == 32 && TL_MOE_S1_NB == 16, "an n-block is 4 packing groups of 16 gate + 16 up rows");


__global__ void __launch_bounds__(MP_THREADS, 1) moe_prefill_s1(GemmArgs p)
{
#if !TL_WGMMA_AVAILABLE
    (void)p;
#else
    extern __shared__ __attribute__((aligned(16))) uint8_t mp_smem_raw[];
    __shared__ int s_src[MP_ROWS];  /* the row's token, or -1 (padding, or no tile) */
    __shared__ int s_out[MP_ROWS];  /* its worklist row, or -1 (no valid tile of the group) */
    __shared__ int s_e, s_first, s_ntile;
    uint8_t *ring = (uint8_t *)(((uintptr_t)mp_smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, nb = blockIdx.x, gi = blockIdx.y;

    /* which group: warp 0 scans the experts' group counts ceil(count / 128) in order */
    if (tid < 32) {
        const int E = p.n_experts;
        int before = 0, found = 0;
        for (int e0 = 0; e0 < E && !found; e0 += 32) {
            const int e = e0 + tid;
            const int g = e < E ? (p.expert_count[e] + MP_ROWS - 1) / MP_ROWS : 0;
            int incl = g; /* inclusive scan over the warp */
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const int v = __shfl_up_sync(0xffffffffu, incl, o);
                if (tid >= o) incl += v;
            }
            const int mine = before + incl - g; /* groups before expert e */
            const bool here = e < E && g > 0 && gi >= mine && gi < mine + g;
            const unsigned hit = __ballot_sync(0xffffffffu, here);
            if (hit) {
                found = 1;
                if (here) {
                    const int first = p.tile_off[e] + (gi - mine) * MP_TILES;
                    const int tiles_e = (p.expert_count[e] + TL_MOE_TILE_M - 1) / TL_MOE_TILE_M;
                    const int left = p.tile_off[e] + tiles_e - first;
                    s_e = e;
                    s_first = first;
                    s_ntile = left < MP_TILES ? left : MP_TILES;
                }
            }
            before += __shfl_sync(0xffffffffu, incl, 31);
        }
        if (tid == 0 && !found) s_e = -1;
    }
    __syncthreads();
    const int e = s_e;
    if (e < 0) return; /* past the device's groups */
    const int first = s_first, ntile = s_ntile;
    if (tid < MP_ROWS) {
        const int t = tid / TL_MOE_TILE_M;
        const int row = first * TL_MOE_TILE_M + tid;
        const int id = t < ntile ? p.sorted_ids[row] : -1;
        s_src[tid] = id >= 0 ? id / p.top_k : -1;
        s_out[tid] = t < ntile ? row : -1;
    }
    __syncthreads();

    const int K = p.K, nsteps = K / MP_KSTEP;
    const size_t row_bytes = (size_t)K * 2, group_bytes = (size_t)TL_MOE_NCOLS * row_bytes;
    const uint8_t *wexp = p.W + (size_t)e * p.w_mat_bytes + (size_t)(nb * 4) * group_bytes;
    /* step s into ring slot `slot`: A = 2 column blocks of 128 rows x 128 bytes, then B likewise */
    auto load_step = [&](int s, int slot) {
        uint8_t *A = ring + (size_t)slot * MP_STEP_BYTES, *B = A + MP_ROWS * MP_KSTEP * 2;
#pragma unroll
        for (int i = tid; i < MP_ROWS * 16; i += MP_THREADS) { /* 16 pieces of 16 bytes a row */
            const int r = i / 16, c = i % 16, tok = s_src[r];
            const uint8_t *src = tok >= 0 ? p.A + (size_t)tok * row_bytes + (size_t)s * MP_KSTEP * 2 + 16 * c : p.A;
            tl_cp_async16(A + (c / 8) * (MP_ROWS * 128) + tl_wgmma_sw128_offset(r, (c % 8) * 16), src, tok >= 0 ? 16 : 0);
        }
#pragma unroll
        for (int i = tid; i < 4 * 512; i += MP_THREADS) { /* 4 packed chunks of 512 pieces */
            const int gl = i / 512, q = i % 512, lane = q % 32, fv = q / 32, f = fv / 4, v = fv % 4;
            const int col = lane / 4, kgrp = lane % 4; /* NVIDIA's lane map (kernels/moe_pack.h) */
            const int n = f < 2 ? gl * 16 + f * 8 + col : MP_NB + gl * 16 + (f - 2) * 8 + col;
            const uint8_t *src = wexp + (size_t)gl * group_bytes + (size_t)s * tl_moe_pack_chunk_bytes(64) + 16 * q;
            const int kb = kgrp * 64 + v * 16; /* byte of K within the step */
            tl_cp_async16(B + (kb / 128) * (MP_ROWS * 128) + tl_wgmma_sw128_offset(n, kb % 128), src, 16);
        }
    };

    const int wg = tid / 128;
    /* d: the float32 sums (ordinary adds, round to nearest); c: the products of the current
     * MP_PROMOTE steps, the wgmma chain (restarted with scale-d 0 every MP_PROMOTE steps) */
    float d[64], c[64];
#pragma unroll
    for (int i = 0; i < 64; i++) d[i] = c[i] = 0.0f;
#pragma unroll
    for (int s = 0; s < MP_STAGES - 1; s++) {
        if (s < nsteps) load_step(s, s);
        tl_cp_async_commit();
    }
    for (int s = 0; s < nsteps; s++) {
        tl_cp_async_wait<MP_STAGES - 2>(); /* step s landed (this thread's pieces) */
        tl_fence_proxy_async();
        __syncthreads(); /* every thread's pieces; every warpgroup done with slot (s - 1) % STAGES */
        if (s + MP_STAGES - 1 < nsteps) load_step(s + MP_STAGES - 1, (s + MP_STAGES - 1) % MP_STAGES);
        tl_cp_async_commit();
        const uint8_t *A = ring + (size_t)(s % MP_STAGES) * MP_STEP_BYTES, *B = A + MP_ROWS * MP_KSTEP * 2;
        const uint64_t da = tl_wgmma_desc_sw128(A + wg * 64 * 128), db = tl_wgmma_desc_sw128(B);
        const int chained = s % MP_PROMOTE != 0; /* 0: the chain restarts (scale-d 0) */
        tl_wgmma_hold(c);
        tl_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < MP_KSTEP / 16; ks++) {
            const uint32_t off = (ks / 4) * (MP_ROWS * 128) + (ks % 4) * 32;
            tl_wgmma_m64n128k16_bf16(c, tl_wgmma_desc_advance(da, off), tl_wgmma_desc_advance(db, off),
                                     ks > 0 || chained);
        }
        tl_wgmma_commit();
        tl_wgmma_wait<0>();
        tl_wgmma_hold(c);
        if ((s + 1) % MP_PROMOTE == 0 || s + 1 == nsteps) {
#pragma unroll
            for (int i = 0; i < 64; i++) d[i] += c[i];
        }
    }

    /* SwiGLU: accumulator column 8 j + 2 t (+1) is gate column c for j < 8, its up column for j + 8 */
    const int lane = tid % 32, warp = (tid / 32) % 4, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = wg * 64 + warp * 16 + g + 8 * h, orow = s_out[r];
        if (orow < 0) continue;
        const bool pad = s_src[r] < 0;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int col = 8 * j + 2 * t;
            uint32_t pk[2];
#pragma unroll
            for (int q = 0; q < 2; q++) {
                const float gs = d[4 * j + 2 * h + q], us = d[4 * (j + 8) + 2 * h + q];
                pk[q] = pad ? 0u : (uint32_t)tl_code_bf16_from_f32(gs / (1.0f + tl_expf(-gs)) * us);
            }
            *(uint32_t *)(p.act + (size_t)orow * p.n_out + nb * MP_NB + col) = pk[0] | (pk[1] << 16);
        }
    }
#endif
}

int tl_moe_launch_prefill_s1(const GemmArgs &a, int groups, hipStream_t st)
{
#if !defined(TL_HAVE_WGMMA)
    (void)a, (void)groups, (void)st;
    return tl_error(TL_EUSAGE, "moe prefill", "the prefill stage-1 kernel needs an sm_90a build (wgmma)");
#else
    if (a.K % MP_KSTEP || a.n_out % MP_NB)
        return tl_error(TL_EUSAGE, "moe prefill", "hidden %d must be a multiple of %d and the width %d of %d", a.K,
                        MP_KSTEP, a.n_out, MP_NB);
    static bool attr = false;
    if (!attr) {
        TL_GPU_CHECK(hipFuncSetAttribute((const void *)moe_prefill_s1, hipFuncAttributeMaxDynamicSharedMemorySize, MP_SMEM));
        attr = true;
    }
    dim3 grid((unsigned)(a.n_out / MP_NB), (unsigned)groups);
    moe_prefill_s1<<<grid, MP_THREADS, MP_SMEM, st>>>(a);
    TL_GPU_CHECK_LAUNCH("moe_prefill_s1");
    return 0;
#endif
}
