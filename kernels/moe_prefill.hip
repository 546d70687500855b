/* kernels/moe_prefill.hip: bf16 stage 1 of the fused MoE for prefill sizes on sm_90a (Hopper's
 * warpgroup MMA, kernels/wgmma.h), and its launch wrapper tl_moe_launch_prefill_s1
 * (kernels/moe_launch.h); stage 2, moe_prefill_s2, below (tl_moe_launch_prefill_s2). Other targets
 * compile empty bodies; the launchers refuse them.
 *
 * Contract: the same function as moe_gemm<bf16, 1, *> (kernels/moe.h, stage 1): for every
 * worklist row of a valid tile, act[row][c] = bf16(silu(g) * u), g and u the row's token x
 * (bf16) times the expert's gate row c and up row width + c of W1 (packed, kernels/moe_pack.h,
 * as tl_moe_gpu_open stores it), float32 sums; padding rows of valid tiles get 0; rows of no valid
 * tile are not written.
 *
 * Geometry. A work item is (group, n-block): a group is up to 8 consecutive 16-row tiles of one
 * expert (128 rows: an expert of c edges has ceil(c / 128) groups), an n-block 64 SwiGLU columns
 * (64 gate + 64 up weight rows: 4 of the packing's 32-row groups, whose packed chunks of 128 K
 * values are 8 KiB contiguous each). Grid: x = n-block (width / 64), y = group, numbered over the
 * experts in order (at most max_tiles / 8 + E; a block past the device's group count exits).
 * A block is 3 warpgroups (384 threads), warp-specialized:
 *   - warpgroup 0, the producer (MP_PRODUCER_REGS registers a thread), copies K step s (64 values)
 *     into ring slot s % MP_STAGES by cp.async: the step's activation rows (128 x 128 bytes,
 *     gathered by token; padding rows are not copied: their products only reach rows the
 *     epilogue writes as 0 or not at all) and its weight rows (128 x 128 bytes: half of each of
 *     the 4 packed chunks, permuted into the 128-byte swizzle); each producer thread then arrives
 *     on the slot's full barrier once its copies land (cp.async.mbarrier.arrive.noinc: 128
 *     arrivals a phase). Before step s >= MP_STAGES it waits for the slot's empty barrier.
 *     The tensor-copy form (where the launcher has W1's rows copy and its map: MpS1Args) lands the
 *     weight rows as two boxes of 64 rows (gate, then up) issued by thread 0 instead, their bytes
 *     announced on the full barrier (129 arrivals a phase); the activation rows stay cp.async's.
 *   - warpgroups 1 and 2, the consumers (MP_CONSUMER_REGS registers), own rows 0-63 and 64-127
 *     of the group (warpgroup 2 exits at once when the group has at most 4 tiles, and the empty
 *     barriers then count its warps out). For each step: wait for the full barrier, fence the
 *     async proxy, issue 4 m64n128k16 BF16 products from shared memory, commit, wait until one
 *     group is in flight (wgmma.wait_group 1: the previous step's products have retired), and
 *     release the previous step's slot (one arrival per warp on its empty barrier). So the
 *     tensor cores hold the current step's products while the consumer waits for the next
 *     step's data, and the producer runs up to MP_STAGES - 1 steps ahead of the step being
 *     multiplied (6 x 32 KiB in flight an SM).
 * Accumulators: the wgmma chain restarts (scale-d 0) every MP_CHAIN steps (MP_CHAIN_K values)
 * and alternates between two register sets c0 and c1; a chain's sum is added into the float32
 * sums d (ordinary round-to-nearest adds) after the next chain's first products are issued and
 * the chain's last ones have retired, so the adds run beside the tensor cores. Epilogue in
 * registers: a thread holds gate column c and up column c of the same rows (its accumulator
 * columns j and j + 64), so SwiGLU needs no shared memory.
 * Cost: 2 x 128 x 128 x K flops an item (a group of at most 4 tiles: half); reads K x 256 bytes
 * of weights (L2 fetches each 128-byte line whole: a step reads half of it) and K x 2 bytes of
 * each valid activation row, into shared memory MP_STAGES x 32 KiB + 1 KiB alignment + 1.1 KiB
 * (one block an SM). A step of two warpgroups is 512 tensor clocks (4096 BF16 flops a clock), 32
 * KiB copied into and 48 KiB read by wgmma from shared memory: at full tensor rate an SM takes
 * 64 bytes a clock from L2, about 15 TB/s over 132 SMs, so the item is bound by L2's bandwidth
 * first (activation rows are read once per n-block, weights once per group).
 */
#include "moe_launch.h"
#include "wgmma.h"
#include "../numerics/codes.h" /* tl_code_bf16_from_f32: the activation's rounding, as moe_gemm's */

#include <string.h>

#define MP_ROWS TL_MOE_PF_ROWS     /* rows of a group: 8 tiles of TL_MOE_TILE_M */
#define MP_TILES (MP_ROWS / TL_MOE_TILE_M)
#define MP_NB TL_MOE_PF_NB         /* SwiGLU columns an item */
#define MP_KSTEP TL_MOE_PF_KSTEP   /* K values a step: one 128-byte column block, half a packed chunk */
#define MP_CHUNK_K TL_MOE_PF_KCHUNK /* K values of a packed chunk (bf16: 4 k-groups x 64-byte runs) */
#define MP_STAGES TL_MOE_PF_STAGES
/* K values a wgmma accumulator chain runs before its sum is added into the float32 sums (d +=
 * c, round to nearest). The tensor cores' float32 accumulation is less accurate than the
 * round-to-nearest float32 that tl_moe_compare_act's allowance models: one chain over K = 7168
 * (448 k16 products) put about 1 activation in 10^6 beyond it on the H100. A chain of 512 K
 * values (32 products) keeps the sum near float32's rounding. Cost: 64 FADD a consumer thread
 * every chain, issued while the next chain's products run, and 64 registers for the second set. */
#define MP_CHAIN_K 512
#define MP_CHAIN (MP_CHAIN_K / MP_KSTEP) /* steps a chain */
#define MP_THREADS TL_MOE_PF_THREADS     /* producer warpgroup + 2 consumer warpgroups */
#define MP_PRODUCER_REGS 40
#define MP_CONSUMER_REGS 232             /* 128 x 40 + 256 x 232 <= 65536 */
#define MP_A_BYTES (MP_ROWS * MP_KSTEP * 2)                /* 128 rows x 128 bytes */
#define MP_STEP_BYTES (2 * MP_A_BYTES)                     /* A, then B (128 weight rows x 128 bytes) */
#define MP_SMEM (MP_STAGES * MP_STEP_BYTES + 1024)         /* + 1024: the ring's alignment slack */

static_assert(TL_MOE_NCOLS == 32 && TL_MOE_S1_NB == 16, "an n-block is 4 packing groups of 16 gate + 16 up rows");
static_assert(MP_CHAIN_K % MP_KSTEP == 0 && MP_CHAIN >= 1, "a chain is whole steps");
static_assert(128 * MP_PRODUCER_REGS + 256 * MP_CONSUMER_REGS <= 65536, "the register file");

#if TL_WGMMA_AVAILABLE
/* One arrival on *bar once every cp.async this thread issued so far has landed (the barrier's
 * count includes it: .noinc). */
static __device__ __forceinline__ void mp_cp_async_arrive(uint64_t *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(tl_smem_addr(bar)) : "memory");
}
/* tl_cp_async16 of 16 bytes with L2's 128-byte prefetch: a step reads two 32-byte sectors of each
 * 128 bytes of a packed chunk, the next step the other two; the hint has L2 fetch the whole line
 * from memory once. */
static __device__ __forceinline__ void mp_cp_async16_line(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(tl_smem_addr(dst)), "l"(src));
}
/* Which group grid row gi is (both kernels; warp 0 calls it, lane = its lane): the warp scans the
 * experts' group counts ceil(count / MP_ROWS) in order, TL_MOE_PF_SCAN at a time, and writes the
 * group's expert, first tile and tile count (at most MP_TILES) to *se, *sfirst, *sntile, or -1 to
 * *se for a row past the device's groups. Dependent loads: the scan's, then the expert's tile
 * offset. */
static __device__ __forceinline__ void mp_find_group(const GemmArgs &p, int gi, int lane, int *se, int *sfirst, int *sntile)
{
    const int tid = lane;
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
                *se = e;
                *sfirst = first;
                *sntile = left < MP_TILES ? left : MP_TILES;
            }
        }
        before += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (tid == 0 && !found) *se = -1;
}

/* The computing warpgroup cw's K loop (both kernels; all 128 threads of the warpgroup call it, lane
 * = tid % 32): multiplies the ring's nsteps steps, rows cw x 64.. of each step's A (MP_ROWS x 128
 * bytes) by its B (the 128 rows after A), into the float32 sums d (columns as kernels/wgmma.h's D
 * layout). Step s is in slot s % MP_STAGES: it waits for s_full[slot]'s phase s / MP_STAGES, and
 * once step s's products have retired (after step s + 1's are issued, or at the end) each warp
 * arrives once on s_empty[slot] - but the last step's slot, whose release nobody waits for.
 * GENERIC: the copies were cp.async's (generic proxy), fenced before the products read them;
 * tensor copies (async proxy) need no fence. */
template <bool GENERIC>
static __device__ __forceinline__ void mp_consume(const uint8_t *ring, uint64_t *s_full, uint64_t *s_empty, const int nsteps,
                                                  const int cw, const int lane, float (&d)[64])
{
    /* d: the float32 sums (ordinary adds, round to nearest); c0, c1: the chains, alternately */
    float c0[64], c1[64];
#pragma unroll
    for (int i = 0; i < 64; i++) d[i] = 0.0f;
    int s = 0, slot = 0;
    uint32_t phase = 0;
    /* step s into cc: wait for its data, issue its products, retire step s - 1's and release that
     * slot. acc (a constant): whether cc's chain goes on (0: its first step, scale-d 0, and no
     * earlier value of cc kept alive) */
    auto step = [&](float(&cc)[64], const int acc) {
        tl_mbar_wait(s_full + slot, phase);
        if (GENERIC) tl_fence_proxy_async(); /* cp.async's copies (generic proxy) before the products (async proxy) */
        const uint8_t *A = ring + (size_t)slot * MP_STEP_BYTES, *B = A + MP_A_BYTES;
        const uint64_t da = tl_wgmma_desc_sw128(A + cw * 64 * 128), db = tl_wgmma_desc_sw128(B);
        tl_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < MP_KSTEP / 16; ks++) {
            const uint64_t a = tl_wgmma_desc_advance(da, 32 * ks), b = tl_wgmma_desc_advance(db, 32 * ks);
            if (ks == 0 && !acc) tl_wgmma_m64n128k16_bf16_z(cc, a, b); /* cc's earlier values dead */
            else tl_wgmma_m64n128k16_bf16(cc, a, b, 1);
        }
        tl_wgmma_commit();
        tl_wgmma_wait<1>(); /* step s - 1's products have retired */
        if (s > 0 && lane == 0) tl_mbar_arrive(s_empty + (slot == 0 ? MP_STAGES - 1 : slot - 1));
        s++;
        if (++slot == MP_STAGES) slot = 0, phase ^= 1u;
    };
    /* d += co, co's chain retired (the hold keeps its reads after the wait before it) */
    auto promote = [&](float(&co)[64]) {
        tl_wgmma_hold(co);
#pragma unroll
        for (int i = 0; i < 64; i++) d[i] += co[i];
    };
    /* Chains alternate between c0 and c1, 2 MP_CHAIN steps an iteration, each chain's first step
     * issued before the other chain's sum is promoted. The loop is rotated so that the products
     * in flight across its back edge are c0's, which nothing reads until retired, and every
     * chain's steps are unrolled: ptxas proves then that the promoted registers are retired (a
     * group in flight across a back edge and read after a later wait<1> makes it serialize every
     * wgmma, C7514). */
    step(c0, 0);
    while (nsteps - s >= 2 * MP_CHAIN) {
#pragma unroll
        for (int j = 1; j < MP_CHAIN; j++) step(c0, 1);
        step(c1, 0);
        promote(c0);
#pragma unroll
        for (int j = 1; j < MP_CHAIN; j++) step(c1, 1);
        step(c0, 0);
        promote(c1);
    }
    /* the rest (K not a multiple of 2 MP_CHAIN_K values: fewer than 2 MP_CHAIN steps, c0's chain
     * begun): c0's chain to its end, then c1's; unrolled, read only after wait<0> */
    const int rest = nsteps - s;
#pragma unroll
    for (int j = 0; j < 2 * MP_CHAIN - 1; j++) {
        if (j < rest) {
            if (j < MP_CHAIN - 1) step(c0, 1);
            else step(c1, j > MP_CHAIN - 1);
        }
    }
    tl_wgmma_wait<0>();
    promote(c0);
    if (rest >= MP_CHAIN) promote(c1);
}
#endif

/* The kernel's arguments: the GemmArgs, and for the tensor-copy form (TMA) the map of W1's
 * rows copy, [E x 2 width][hidden] bf16 in boxes of 64 rows x MP_KSTEP values (128-byte swizzle;
 * kernels/moe.hip encodes it): each step's 64 gate and 64 up rows then land as two boxes, issued by
 * producer thread 0 with their bytes announced on the full barrier (one arrival more a phase), in
 * place of the packed chunks' 16-byte cp.async pieces; the gathered activation rows stay cp.async's.
 * The cp.async form (TMA = false) leaves the map unread. */
#if defined(TL_GPU_NVIDIA)
struct MpS1Args {
    tl_tmap tw;
    GemmArgs a;
};

template <bool TMA>
__global__ void __launch_bounds__(MP_THREADS, 1) moe_prefill_s1(const __grid_constant__ MpS1Args w)
{
#if !TL_WGMMA_AVAILABLE
    (void)w;
#else
    const GemmArgs &p = w.a;
    TL_SHARED_DYNAMIC(16, uint8_t, mp_smem_raw);
    TL_SHARED(int, s_src, [MP_ROWS]);  /* the row's token, or -1 (padding, or no tile) */
    TL_SHARED(int, s_out, [MP_ROWS]);  /* its worklist row, or -1 (no valid tile of the group) */
    TL_SHARED(int, s_e, ); TL_SHARED(int, s_first, ); TL_SHARED(int, s_ntile, );
    /* full[i]: step s = phase x MP_STAGES + i has landed (128 producer arrivals); empty[i]: its
     * products have retired (one arrival per active consumer warp) */
    TL_SHARED_ALIGNED(8, uint64_t, s_full, [MP_STAGES]); TL_SHARED_ALIGNED(8, uint64_t, s_empty, [MP_STAGES]);
    uint8_t *ring = (uint8_t *)(((uintptr_t)mp_smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, nb = blockIdx.x, gi = blockIdx.y;

    if (tid < 32) mp_find_group(p, gi, tid, &s_e, &s_first, &s_ntile);
    __syncthreads();
    const int e = s_e;
    if (e < 0) return; /* past the device's groups */
    const int first = s_first, ntile = s_ntile;
    const int nact = ntile > MP_TILES / 2 ? 2 : 1; /* consumer warpgroups with valid rows */
    if (tid < MP_ROWS) {
        const int t = tid / TL_MOE_TILE_M;
        const int row = first * TL_MOE_TILE_M + tid;
        const int id = t < ntile ? p.sorted_ids[row] : -1;
        s_src[tid] = id >= 0 ? id / p.top_k : -1;
        s_out[tid] = t < ntile ? row : -1;
    }
    if (tid == 0) {
#pragma unroll
        for (int i = 0; i < MP_STAGES; i++) tl_mbar_init(s_full + i, 128 + (TMA ? 1 : 0)), tl_mbar_init(s_empty + i, 4 * nact);
        tl_mbar_init_fence();
    }
    __syncthreads();

    const int K = p.K, nsteps = K / MP_KSTEP;
    const int wg = tid / 128;

    if (wg == 0) { /* the producer */
        tl_setmaxnreg_dec<MP_PRODUCER_REGS>();
        const size_t row_bytes = (size_t)K * 2, group_bytes = (size_t)TL_MOE_NCOLS * row_bytes;
        const uint8_t *wexp = p.W + (size_t)e * p.w_mat_bytes + (size_t)(nb * 4) * group_bytes;
        /* A: this thread copies piece c = tid % 8 (16 bytes) of rows tid / 8 + 16 k, k = 0..7 (a
         * warp: 4 whole 128-byte rows an instruction); the rows' swizzle phase is tid / 8 % 8 */
        const int ac = tid % 8, ar = tid / 8;
        const uint32_t a_dst = (uint32_t)ar * 128u + ((uint32_t)((ac ^ ar) & 7) << 4);
        /* B: pieces u = tid and tid + 128 of each packing group's half chunk: packed piece q = 4 (u
         * / 2) + 2 h + u % 2 of the chunk (h: the step's half; lane 4 col + k-group, NVIDIA's map,
         * kernels/moe_pack.h), weight row n of the item, byte kb of the step's 128 */
        uint32_t b_dst[2], b_src[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int u = tid + 128 * i, f = u / 64, v = (u / 16) % 4, col = (u / 2) % 8, kodd = u % 2;
            const int n = f < 2 ? f * 8 + col : MP_NB + (f - 2) * 8 + col; /* + 16 x packing group */
            b_dst[i] = tl_wgmma_sw128_offset((uint32_t)n, (uint32_t)(kodd * 64 + v * 16));
            b_src[i] = (uint32_t)(16 * (4 * (u / 2) + kodd));
        }
        for (int s = 0; s < nsteps; s++) {
            const int slot = s % MP_STAGES;
            if (s >= MP_STAGES) tl_mbar_wait(s_empty + slot, (uint32_t)(s / MP_STAGES - 1) & 1u);
            uint8_t *A = ring + (size_t)slot * MP_STEP_BYTES, *B = A + MP_A_BYTES;
            const size_t ka = (size_t)s * (MP_KSTEP * 2) + 16 * ac;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const int tok = s_src[ar + 16 * k];
                if (tok >= 0) tl_cp_async16(A + a_dst + 16 * 128 * k, p.A + (size_t)tok * row_bytes + ka, 16);
            }
            if (TMA) {
                if (tid == 0) { /* gate rows nb x 64.. and up rows width + nb x 64.. of expert e */
                    const int wrow = e * 2 * p.n_out + nb * MP_NB;
                    tl_mbar_expect_tx(s_full + slot, (uint32_t)MP_A_BYTES);
                    tl_tma_load_2d(B, &w.tw, s * MP_KSTEP, wrow, s_full + slot);
                    tl_tma_load_2d(B + MP_NB * 128, &w.tw, s * MP_KSTEP, wrow + p.n_out, s_full + slot);
                }
            } else {
                const uint8_t *wsrc = wexp + (size_t)(s / 2) * tl_moe_pack_chunk_bytes(64) + 32 * (s % 2);
#pragma unroll
                for (int k = 0; k < 8; k++) { /* packing group k / 2 holds item rows 16 (k / 2) .. and 64 + 16 (k / 2) .. */
                    const int gl = k / 2, i = k % 2;
                    mp_cp_async16_line(B + b_dst[i] + 16 * 128 * gl, wsrc + (size_t)gl * group_bytes + b_src[i]);
                }
            }
            mp_cp_async_arrive(s_full + slot);
        }
        tl_cp_async_commit();
        tl_cp_async_wait<0>(); /* no copy outlives its thread */
        return;
    }

    /* the consumers */
    const int cw = wg - 1;
    if (cw >= nact) return; /* rows 64..127 are all past the group's tiles */
    tl_setmaxnreg_inc<MP_CONSUMER_REGS>();
    const int lane = tid % 32;
    float d[64];
    mp_consume<true>(ring, s_full, s_empty, nsteps, cw, lane, d);

    /* SwiGLU: accumulator column 8 j + 2 t (+1) is gate column c for j < 8, its up column for j + 8 */
    const int warp = (tid / 32) % 4, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = cw * 64 + warp * 16 + g + 8 * h, orow = s_out[r];
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
#endif /* TL_GPU_NVIDIA */

#if defined(TL_HAVE_WGMMA)
template <bool TMA>
static int launch_s1(const MpS1Args &w, int groups, hipStream_t st)
{
    static bool attr = false;
    const void *fn = (const void *)moe_prefill_s1<TMA>;
    if (!attr) {
        TL_GPU_CHECK(hipFuncSetAttribute(fn, hipFuncAttributeMaxDynamicSharedMemorySize, MP_SMEM));
        attr = true;
    }
    dim3 grid((unsigned)(w.a.n_out / MP_NB), (unsigned)groups);
    (void)tl_launch(moe_prefill_s1<TMA>, grid, MP_THREADS, MP_SMEM, st, false, w);
    TL_GPU_CHECK_LAUNCH("moe_prefill_s1");
    return 0;
}
#endif

int tl_moe_launch_prefill_s1(const GemmArgs &a, const void *tmap_w1, int groups, hipStream_t st)
{
#if !defined(TL_HAVE_WGMMA)
    (void)a, (void)tmap_w1, (void)groups, (void)st;
    return tl_error(TL_EUSAGE, "moe prefill", "the prefill stage-1 kernel needs an sm_90a build (wgmma)");
#else
    if (a.K <= 0 || a.K % MP_CHUNK_K || a.n_out <= 0 || a.n_out % MP_NB)
        return tl_error(TL_EUSAGE, "moe prefill", "hidden %d must be a positive multiple of %d and the width %d of %d", a.K,
                        MP_CHUNK_K, a.n_out, MP_NB);
    MpS1Args w;
    memset(&w, 0, sizeof w);
    if (tmap_w1) memcpy(&w.tw, tmap_w1, sizeof w.tw);
    w.a = a;
    return tmap_w1 ? launch_s1<true>(w, groups, st) : launch_s1<false>(w, groups, st);
#endif
}

/* ---- moe_prefill_s2: bf16 stage 2 (the down projection) for prefill sizes ----
 *
 * Contract: the same function as moe_gemm<bf16, 2, *> (kernels/moe.h, stage 2): for every
 * worklist row of a valid tile whose edge id (sorted_ids) is >= 0, ybuf[edge][c] = topk_w[edge] x
 * (the row's activation (bf16, the stage-1 output) . row c of the expert's W2 (bf16, row-major
 * [hidden][width] as tl_moe_gpu_open stores it)), float32 sums (chains of MP_CHAIN_K values, as
 * stage 1's); padding rows and rows of no valid tile are not written. The combine kernel then runs
 * as after moe_gemm.
 *
 * Geometry (contract/moe.h, TL_MOE_PF2_*): a work item is (group, n-block), the group as stage 1's
 * (the same scan: mp_find_group), an n-block MP2_NB output columns. Grid: x = n-block (hidden /
 * MP2_NB), y = group (tl_moe_max_groups). A block is 3 warpgroups (384 threads):
 *   - thread 0 of warpgroup 0, the producer, issues K step s (64 values) into ring slot s %
 *     MP_STAGES as tensor copies (the copy engine, 128-byte swizzle, no gather): the group's rows
 *     first x 16 .. + 127 of the activation buffer in boxes of MP2_ABOX rows (one box when the
 *     group has at most 4 tiles: the second computing warpgroup then exits and its half of A
 *     stays unwritten) and the expert's W2 rows nb x 128 .. + 127, each at K columns 64 s ..; it
 *     announces the step's bytes on the slot's full barrier first (one arrival with the
 *     transaction count: the phase completes when the boxes have landed). Before step s >=
 *     MP_STAGES it waits for the slot's empty barrier. Rows of a box past the group (padding, the
 *     next expert's rows, zeros past the buffer: the copy engine fills them) only reach
 *     accumulator rows the epilogue does not write.
 *   - warpgroups 1 and 2 compute rows 0-63 and 64-127 of the group as stage 1's (mp_consume:
 *     m64n128k16 products, chains promoted into float32 sums), then write their rows: thread
 *     (warp w, lane g x 4 + t) holds rows 16 w + g (+8) and columns 8 j + 2 t (+1), j = 0..15,
 *     each pair one 8-byte store of topk_w x sum. The row's edge id and top-k weight are loaded
 *     before the K loop (their latency beside the first step's copies).
 * Cost: 2 x 128 x 128 x K flops an item (a group of one box: half); 128 x 2K bytes of W2 (from L2
 * after the expert's first group at the same n-block) and 64 or 128 x 2K bytes of activation rows
 * (from L2 after the group's first n-block) copied into shared memory a item; 512 bytes of float32
 * written per valid row. Shared memory MP_SMEM + 64 bytes (one block an SM).
 */
#define MP2_NB TL_MOE_PF2_NB     /* output columns an item: W2 rows of a step's B */
#define MP2_ABOX TL_MOE_PF2_ABOX /* activation rows a box: one computing warpgroup's */
static_assert(MP2_NB == 128 && MP2_ABOX == 64 && MP_ROWS == 2 * MP2_ABOX, "B is 128 rows after A's 2 boxes of 64");
static_assert(MP_A_BYTES == MP2_NB * MP_KSTEP * 2, "a step's B is as large as its A (the ring of stage 1)");

/* NVIDIA only: a __grid_constant__ parameter (the tensor maps read in place), which HIP lacks */
#if defined(TL_GPU_NVIDIA)
/* The kernel's arguments: the activation map ta, [rows][width] bf16 in boxes of MP2_ABOX rows x
 * MP_KSTEP values, and W2's tw, [E x hidden][width] bf16 in boxes of MP2_NB rows x MP_KSTEP values
 * (kernels/moe.hip encodes both; 128-byte swizzle). */
struct MpS2Args {
    tl_tmap ta, tw;
    GemmArgs a;
};

__global__ void __launch_bounds__(MP_THREADS, 1) moe_prefill_s2(const __grid_constant__ MpS2Args w)
{
#if !TL_WGMMA_AVAILABLE
    (void)w;
#else
    const GemmArgs &p = w.a;
    TL_SHARED_DYNAMIC(16, uint8_t, mp_smem_raw);
    TL_SHARED(int, s_e, ); TL_SHARED(int, s_first, ); TL_SHARED(int, s_ntile, );
    /* full[i]: step s = phase x MP_STAGES + i has landed (one arrival with its bytes); empty[i]: its
     * products have retired (one arrival per active computing warp) */
    TL_SHARED_ALIGNED(8, uint64_t, s_full, [MP_STAGES]); TL_SHARED_ALIGNED(8, uint64_t, s_empty, [MP_STAGES]);
    uint8_t *ring = (uint8_t *)(((uintptr_t)mp_smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, nb = blockIdx.x, gi = blockIdx.y;

    if (tid < 32) mp_find_group(p, gi, tid, &s_e, &s_first, &s_ntile);
    __syncthreads();
    const int e = s_e;
    if (e < 0) return; /* past the device's groups */
    const int first = s_first, ntile = s_ntile;
    const int nact = ntile > MP_TILES / 2 ? 2 : 1; /* activation boxes and computing warpgroups */
    if (tid == 0) {
#pragma unroll
        for (int i = 0; i < MP_STAGES; i++) tl_mbar_init(s_full + i, 1), tl_mbar_init(s_empty + i, 4 * nact);
        tl_mbar_init_fence();
    }
    __syncthreads();

    const int nsteps = p.K / MP_KSTEP;
    const int wg = tid / 128;

    if (wg == 0) { /* the producer */
        tl_setmaxnreg_dec<MP_PRODUCER_REGS>();
        if (tid == 0) {
            const int arow = first * TL_MOE_TILE_M, wrow = e * p.n_out + nb * MP2_NB;
            const uint32_t bytes = (uint32_t)(nact * MP2_ABOX * MP_KSTEP * 2 + MP_A_BYTES);
            for (int s = 0; s < nsteps; s++) {
                const int slot = s % MP_STAGES;
                if (s >= MP_STAGES) tl_mbar_wait(s_empty + slot, (uint32_t)(s / MP_STAGES - 1) & 1u);
                uint8_t *A = ring + (size_t)slot * MP_STEP_BYTES, *B = A + MP_A_BYTES;
                uint64_t *full = s_full + slot;
                tl_mbar_expect_tx(full, bytes);
                tl_tma_load_2d(A, &w.ta, s * MP_KSTEP, arow, full);
                if (nact == 2) tl_tma_load_2d(A + MP2_ABOX * 128, &w.ta, s * MP_KSTEP, arow + MP2_ABOX, full);
                tl_tma_load_2d(B, &w.tw, s * MP_KSTEP, wrow, full);
            }
        }
        return;
    }

    /* the computing warpgroups */
    const int cw = wg - 1;
    if (cw >= nact) return; /* rows 64..127 are all past the group's tiles */
    tl_setmaxnreg_inc<MP_CONSUMER_REGS>();
    const int lane = tid % 32, warp = (tid / 32) % 4, g = lane / 4, t = lane % 4;
    /* this thread's two rows: their edge ids (-1: padding or no valid tile) and top-k weights */
    int edge[2];
    float wt[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = cw * 64 + warp * 16 + g + 8 * h;
        edge[h] = r / TL_MOE_TILE_M < ntile ? p.sorted_ids[first * TL_MOE_TILE_M + r] : -1;
    }
#pragma unroll
    for (int h = 0; h < 2; h++) wt[h] = edge[h] >= 0 ? p.topk_w[edge[h]] : 0.0f;
    float d[64];
    mp_consume<false>(ring, s_full, s_empty, nsteps, cw, lane, d);

    /* the edges' weighted rows: accumulator column 8 j + 2 t (+1), rows g (h = 0) and g + 8 (h = 1) */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if (edge[h] < 0) continue;
        float *dst = p.ybuf + (size_t)edge[h] * p.n_out + nb * MP2_NB + 2 * t;
#pragma unroll
        for (int j = 0; j < MP2_NB / 8; j++)
            *(float2 *)(dst + 8 * j) = make_float2(wt[h] * d[4 * j + 2 * h], wt[h] * d[4 * j + 2 * h + 1]);
    }
#endif
}
#endif /* TL_GPU_NVIDIA */

int tl_moe_launch_prefill_s2(const GemmArgs &a, const void *tmap_act, const void *tmap_w2, int groups, hipStream_t st)
{
#if !defined(TL_HAVE_WGMMA)
    (void)a, (void)tmap_act, (void)tmap_w2, (void)groups, (void)st;
    return tl_error(TL_EUSAGE, "moe prefill", "the prefill stage-2 kernel needs an sm_90a build (wgmma)");
#else
    if (a.K <= 0 || a.K % MP_KSTEP || a.n_out <= 0 || a.n_out % MP2_NB)
        return tl_error(TL_EUSAGE, "moe prefill", "the width %d must be a positive multiple of %d and hidden %d of %d", a.K,
                        MP_KSTEP, a.n_out, MP2_NB);
    static bool attr = false;
    if (!attr) {
        TL_GPU_CHECK(hipFuncSetAttribute((const void *)moe_prefill_s2, hipFuncAttributeMaxDynamicSharedMemorySize, MP_SMEM));
        attr = true;
    }
    MpS2Args w;
    memcpy(&w.ta, tmap_act, sizeof w.ta);
    memcpy(&w.tw, tmap_w2, sizeof w.tw);
    w.a = a;
    dim3 grid((unsigned)(a.n_out / MP2_NB), (unsigned)groups);
    (void)tl_launch(moe_prefill_s2, grid, MP_THREADS, MP_SMEM, st, false, w);
    TL_GPU_CHECK_LAUNCH("moe_prefill_s2");
    return 0;
#endif
}

/* ---- moe_prefill_fp8<STAGE>: fp8 (block-scaled E4M3) stages 1 and 2 for prefill sizes ----
 *
 * Contract: the same functions as moe_gemm<fp8, STAGE, 1> (kernels/moe.h): stage 1 writes act[row][c]
 * = bf16(silu(g) u) for every worklist row of a valid tile (padding rows 0), g and u the row's
 * token's E4M3 codes x (xq, 1x128 group scales xs) times gate row c and up row width + c of W1
 * (E4M3 codes packed as tl_moe_gpu_open stores them, kernels/moe_pack.h; 128 x 128 block scales);
 * stage 2 writes ybuf[edge][c] = topk_w[edge] x (the row's re-quantized activation codes (act_q,
 * 1x128 scales act_s) . row c of W2 (packed, block scales)) for every worklist row whose edge id is
 * >= 0. Each 128-value K block's products are summed on their own and added times the product of
 * the row's group scale and the weight block's scale: sum over blocks b of (codes . codes)_b x
 * sa_b x sw_b in float32 (round-to-nearest adds), as moe_gemm does.
 *
 * Geometry (contract/moe.h, TL_MOE_PF8_*): items as the bf16 kernels' (mp_find_group's groups of up
 * to 128 rows; stage 1: n-blocks of 64 SwiGLU columns = 128 W1 rows, 4 packing groups; stage 2:
 * n-blocks of 128 output columns = 128 W2 rows, 4 packing groups). A K step is TL_MOE_PF8_KSTEP =
 * 128 values: one 128-byte column block of the 128-byte swizzle, one activation scale group and
 * one weight block, one packed chunk (4 KiB) of each packing group. A block is 3 warpgroups:
 *   - warpgroup 0, the producer, copies step s into ring slot s % MP8_STAGES by cp.async: the A
 *     rows (stage 1 gathered by token, stage 2 the group's own worklist rows; padding rows not
 *     copied), the 4 packed weight chunks permuted into the swizzle (each 16-byte piece of the
 *     chunk to its row and k, the same map as the bf16 kernel's), and the step's scales into the
 *     slot's scale row: thread r the A scale of row r (0 for padding: a zero-filling copy), threads 0
 *     and 1 the weight block scales (stage 1: gate and up; stage 2: the same block twice); then
 *     each producer thread arrives on the slot's full barrier once its copies land.
 *   - warpgroups 1 and 2 compute rows 0-63 and 64-127 (the second exits for a group of at most 4
 *     tiles): a step is 4 m64n128k32 E4M3 products from shared memory into a fresh accumulator
 *     (scale-d 0 first), c0 and c1 alternately; once a step's products have retired (the next
 *     step's issued, wgmma.wait_group 1) the thread reads that step's 4 scales from the slot,
 *     releases the slot and adds the accumulator times its scales into the float32 sums d, while
 *     the tensor cores run the next step. So every product is promoted out of the 13-bit E4M3
 *     accumulator (TL_WGMMA_E4M3_ACC_BITS) after 128 K values, the block it belongs to.
 * Cost: 2 x 128 x 128 x K flops an item (a group of at most 4 tiles: half); reads K bytes of each
 * weight row (128 an item; each L2 line whole) and K bytes + K / 32 scale bytes of each real
 * activation row, 32 KiB + 528 bytes a step into shared memory MP8_STAGES x 32 KiB + 1 KiB (one
 * block an SM). A step of two warpgroups is 512 tensor clocks (8192 E4M3 flops a clock): 64 bytes a
 * clock from L2 at full tensor rate, as the bf16 kernel's, for twice its flops a byte. The
 * promotion is 64 FMUL/FFMA a thread a step beside 4 products.
 */
#define MP8_KSTEP TL_MOE_PF8_KSTEP
#define MP8_STAGES TL_MOE_PF8_STAGES
#define MP8_SMEM (MP8_STAGES * MP_STEP_BYTES + 1024)
#define MP8_SC (MP_ROWS + 4) /* a slot's scale row: MP_ROWS activation scales, 2 weight scales, padding */
static_assert(MP8_KSTEP == 128 && MP8_KSTEP == TL_MOE_K_ALIGN, "a step is one 128-byte column block, one scale group");
static_assert(MP_A_BYTES == MP_ROWS * MP8_KSTEP, "an fp8 step's A fills a bf16 step's");
static_assert(MP8_SMEM + (size_t)MP8_STAGES * MP8_SC * 4 + 2 * MP_ROWS * 4 + 256 <= 232448, "shared memory of one block an SM");

#if TL_WGMMA_AVAILABLE
/* The computing warpgroup cw's K loop (fp8): nsteps steps of the ring, rows cw x 64.. of each
 * step's A times its B, promoted per step into d (see above). Step s is in slot s % MP8_STAGES
 * (phase s / MP8_STAGES); once its products have retired each warp arrives on s_empty[slot], but
 * for the last step. r0: this thread's first row in the group (the second is r0 + 8). */
static __device__ __forceinline__ void mp8_consume(const uint8_t *ring, const float (*s_sc)[MP8_SC], uint64_t *s_full,
                                                   uint64_t *s_empty, const int nsteps, const int cw, const int lane,
                                                   const int r0, float (&d)[64])
{
    float c0[64], c1[64];
#pragma unroll
    for (int i = 0; i < 64; i++) d[i] = 0.0f;
    int s = 0, slot = 0, prev = 0;
    uint32_t phase = 0;
    /* issue step s into cc (scale-d 0: a fresh block sum), then retire step s - 1's products */
    auto step = [&](float(&cc)[64]) {
        tl_mbar_wait(s_full + slot, phase);
        tl_fence_proxy_async(); /* cp.async's copies (generic proxy) before the products (async proxy) */
        const uint8_t *A = ring + (size_t)slot * MP_STEP_BYTES, *B = A + MP_A_BYTES;
        const uint64_t da = tl_wgmma_desc_sw128(A + cw * 64 * 128), db = tl_wgmma_desc_sw128(B);
        tl_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < MP8_KSTEP / 32; ks++) {
            const uint64_t a = tl_wgmma_desc_advance(da, 32 * ks), b = tl_wgmma_desc_advance(db, 32 * ks);
            if (ks == 0) tl_wgmma_m64n128k32_e4m3_z(cc, a, b);
            else tl_wgmma_m64n128k32_e4m3(cc, a, b, 1);
        }
        tl_wgmma_commit();
        tl_wgmma_wait<1>(); /* step s - 1's products have retired */
    };
    /* d += co x its step's scales (the step before the one just issued: slot prev), then that slot
     * released (its scales read first) */
    auto promote = [&](float(&co)[64], const bool release) {
        tl_wgmma_hold(co);
        const float *sc = s_sc[prev];
        const float sa0 = sc[r0], sa1 = sc[r0 + 8], sw0 = sc[MP_ROWS], sw1 = sc[MP_ROWS + 1];
        if (release && lane == 0) tl_mbar_arrive(s_empty + prev);
        const float f[4] = {sa0 * sw0, sa1 * sw0, sa0 * sw1, sa1 * sw1}; /* rows g, g + 8; columns < 64, >= 64 */
#pragma unroll
        for (int i = 0; i < 64; i++) d[i] += co[i] * f[(i / 4 >= 8 ? 2 : 0) + (i % 4) / 2];
    };
    auto next = [&]() {
        prev = slot;
        s++;
        if (++slot == MP8_STAGES) slot = 0, phase ^= 1u;
    };
    /* rotated as the bf16 loop with one-step chains: the products in flight across the back edge
     * are c0's, read only after the next wait<1> */
    step(c0);
    next();
    while (nsteps - s >= 2) {
        step(c1);
        promote(c0, true);
        next();
        step(c0);
        promote(c1, true);
        next();
    }
    if (s < nsteps) {
        step(c1);
        promote(c0, true);
        next();
        tl_wgmma_wait<0>();
        promote(c1, false);
    } else {
        tl_wgmma_wait<0>();
        promote(c0, false);
    }
}
#endif

/* The kernel's arguments: the GemmArgs, and for the TMA form (TMA = true) the tensor maps of the
 * weights' rows copy (tw: stage 1 W1 [E x 2 width][hidden] in boxes of 64 rows, stage 2 W2 [E x
 * hidden][width] in boxes of 128 rows) and of stage 2's activation codes (ta: act_q [rows][width]
 * in boxes of 64 rows), each box TL_MOE_PF8_KSTEP bytes wide in the 128-byte swizzle
 * (kernels/moe.hip encodes them). The cp.async form leaves them unread. */
#if defined(TL_GPU_NVIDIA)
struct Mp8Args {
    tl_tmap tw, ta;
    GemmArgs a;
};

/* TMA: the weights (both stages) and stage 2's activation rows land by tensor copies, issued by
 * producer thread 0 with the step's byte count announced on the full barrier (one arrival more a
 * phase); stage 1's gathered rows and every scale stay cp.async's. Rows of stage 2's boxes past
 * the group's real rows (padding codes, the next expert's rows, zeros past the buffer) reach only
 * accumulator rows the epilogue does not write, as moe_prefill_s2's. */
template <int STAGE, bool TMA>
__global__ void __launch_bounds__(MP_THREADS, 1) moe_prefill_fp8(const __grid_constant__ Mp8Args w)
{
#if !TL_WGMMA_AVAILABLE
    (void)w;
#else
    const GemmArgs &p = w.a;
    TL_SHARED_DYNAMIC(16, uint8_t, mp_smem_raw);
    TL_SHARED(int, s_src, [MP_ROWS]); /* the row's source row of A (stage 1 its token, stage 2 its worklist row), or -1 */
    TL_SHARED(int, s_out, [MP_ROWS]); /* stage 1: its worklist row, or -1 (no valid tile); stage 2: its edge id, or -1 */
    TL_SHARED_ALIGNED(16, float, s_sc, [MP8_STAGES][MP8_SC]);
    TL_SHARED(int, s_e, ); TL_SHARED(int, s_first, ); TL_SHARED(int, s_ntile, );
    TL_SHARED_ALIGNED(8, uint64_t, s_full, [MP8_STAGES]); TL_SHARED_ALIGNED(8, uint64_t, s_empty, [MP8_STAGES]);
    uint8_t *ring = (uint8_t *)(((uintptr_t)mp_smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, nb = blockIdx.x, gi = blockIdx.y;

    if (tid < 32) mp_find_group(p, gi, tid, &s_e, &s_first, &s_ntile);
    __syncthreads();
    const int e = s_e;
    if (e < 0) return; /* past the device's groups */
    const int first = s_first, ntile = s_ntile;
    const int nact = ntile > MP_TILES / 2 ? 2 : 1;
    if (tid < MP_ROWS) {
        const int t = tid / TL_MOE_TILE_M, row = first * TL_MOE_TILE_M + tid;
        const int id = t < ntile ? p.sorted_ids[row] : -1;
        s_src[tid] = id < 0 ? -1 : STAGE == 1 ? id / p.top_k : row;
        s_out[tid] = STAGE == 1 ? (t < ntile ? row : -1) : id;
    }
    if (tid == 0) {
#pragma unroll
        for (int i = 0; i < MP8_STAGES; i++) tl_mbar_init(s_full + i, 128 + (TMA ? 1 : 0)), tl_mbar_init(s_empty + i, 4 * nact);
        tl_mbar_init_fence();
    }
    __syncthreads();

    const int K = p.K, nsteps = K / MP8_KSTEP, kg = K / TL_MOE_K_ALIGN; /* scale groups a row */
    const int wg = tid / 128;

    if (wg == 0) { /* the producer */
        tl_setmaxnreg_dec<MP_PRODUCER_REGS>();
        const size_t group_bytes = (size_t)TL_MOE_NCOLS * K; /* a packing group: 32 rows of K codes */
        const uint8_t *wexp = p.W + (size_t)e * p.w_mat_bytes + (size_t)(nb * 4) * group_bytes;
        const int ac = tid % 8, ar = tid / 8;
        const uint32_t a_dst = (uint32_t)ar * 128u + ((uint32_t)((ac ^ ar) & 7) << 4);
        /* B (cp.async form): pieces q = tid and tid + 128 of each packing group's 4 KiB chunk of the
         * step: lane l = q % 32 (column l / 4, k-group l % 4), fragment f = q / 64, vector v = q / 32
         * % 2 (NVIDIA's map, kernels/moe_pack.h: row f x 8 + column of the group (stage 1: fragments
         * 0-1 gate, 2-3 up), k bytes 32 k-group + 16 v); item row n: stage 1 gate 16 gl + .., up
         * 64 + 16 gl + ..; stage 2 32 gl + .. (gl: the packing group) */
        uint32_t b_dst[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int q = tid + 128 * i, l = q % 32, f = q / 64, v = (q / 32) % 2, col = l / 4, kgrp = l % 4;
            const int n = STAGE == 1 ? (f < 2 ? f * 8 + col : MP_NB + (f - 2) * 8 + col) : f * 8 + col;
            b_dst[i] = tl_wgmma_sw128_offset((uint32_t)n, (uint32_t)(kgrp * 32 + v * 16));
        }
        const uint32_t gl_rows = STAGE == 1 ? 16 : 32; /* item rows a packing group adds per half */
        /* TMA form: the weights' rows (stage 1 gate rows nb x 64.., up rows width + nb x 64.. of
         * expert e's 2 width; stage 2 rows nb x 128.. of its hidden) and stage 2's group rows */
        const int wrow = STAGE == 1 ? e * 2 * p.n_out + nb * MP_NB : e * p.n_out + nb * MP2_NB;
        const int arow = first * TL_MOE_TILE_M;
        const uint32_t tx = (uint32_t)MP_A_BYTES + (STAGE == 2 ? (uint32_t)(nact * MP2_ABOX * MP8_KSTEP) : 0u);
        /* scales: row tid's activation group scale; threads 0 and 1 the weight block of the gate
         * (stage 2: the n-block's) and of the up rows */
        const int src = s_src[tid];
        const float *as = p.a_scale + (size_t)(src < 0 ? 0 : src) * kg;
        const int rb = STAGE == 1 ? (tid == 0 ? nb * MP_NB : p.n_out + nb * MP_NB) / TL_MOE_K_ALIGN : nb;
        const float *ws = p.w_scale + (size_t)e * p.w_mat_scales + (size_t)rb * kg;
        for (int s = 0; s < nsteps; s++) {
            const int slot = s % MP8_STAGES;
            if (s >= MP8_STAGES) tl_mbar_wait(s_empty + slot, (uint32_t)(s / MP8_STAGES - 1) & 1u);
            uint8_t *A = ring + (size_t)slot * MP_STEP_BYTES, *B = A + MP_A_BYTES;
            uint64_t *full = s_full + slot;
            if (TMA && tid == 0) {
                tl_mbar_expect_tx(full, tx);
                if (STAGE == 1) {
                    tl_tma_load_2d(B, &w.tw, s * MP8_KSTEP, wrow, full);
                    tl_tma_load_2d(B + MP_NB * 128, &w.tw, s * MP8_KSTEP, wrow + p.n_out, full);
                } else {
                    tl_tma_load_2d(B, &w.tw, s * MP8_KSTEP, wrow, full);
                    tl_tma_load_2d(A, &w.ta, s * MP8_KSTEP, arow, full);
                    if (nact == 2) tl_tma_load_2d(A + MP2_ABOX * 128, &w.ta, s * MP8_KSTEP, arow + MP2_ABOX, full);
                }
            }
            if (!TMA || STAGE == 1) {
                const size_t ka = (size_t)s * MP8_KSTEP + 16 * ac;
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const int r = s_src[ar + 16 * k];
                    if (r >= 0) tl_cp_async16(A + a_dst + 16 * 128 * k, p.A + (size_t)r * K + ka, 16);
                }
            }
            if (!TMA) {
                const uint8_t *wsrc = wexp + (size_t)s * tl_moe_pack_chunk_bytes(32);
#pragma unroll
                for (int gl = 0; gl < 4; gl++)
#pragma unroll
                    for (int i = 0; i < 2; i++)
                        mp_cp_async16_line(B + b_dst[i] + gl_rows * 128 * gl, wsrc + (size_t)gl * group_bytes + 16 * (tid + 128 * i));
            }
            tl_cp_async4(&s_sc[slot][tid], as + s, src < 0 ? 0 : 4);
            if (tid < 2) tl_cp_async4(&s_sc[slot][MP_ROWS + tid], ws + s, 4);
            mp_cp_async_arrive(full);
        }
        tl_cp_async_commit();
        tl_cp_async_wait<0>();
        return;
    }

    const int cw = wg - 1;
    if (cw >= nact) return;
    tl_setmaxnreg_inc<MP_CONSUMER_REGS>();
    const int lane = tid % 32, warp = (tid / 32) % 4, g = lane / 4, t = lane % 4;
    const int r0 = cw * 64 + warp * 16 + g;
    float wt[2] = {0.0f, 0.0f};
    if (STAGE == 2) {
#pragma unroll
        for (int h = 0; h < 2; h++) wt[h] = s_out[r0 + 8 * h] >= 0 ? p.topk_w[s_out[r0 + 8 * h]] : 0.0f;
    }
    float d[64];
    mp8_consume(ring, s_sc, s_full, s_empty, nsteps, cw, lane, r0, d);

    if (STAGE == 1) { /* SwiGLU, as moe_prefill_s1's epilogue */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = r0 + 8 * h, orow = s_out[r];
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
    } else { /* the edges' weighted rows, as moe_prefill_s2's */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int edge = s_out[r0 + 8 * h];
            if (edge < 0) continue;
            float *dst = p.ybuf + (size_t)edge * p.n_out + nb * MP2_NB + 2 * t;
#pragma unroll
            for (int j = 0; j < MP2_NB / 8; j++)
                *(float2 *)(dst + 8 * j) = make_float2(wt[h] * d[4 * j + 2 * h], wt[h] * d[4 * j + 2 * h + 1]);
        }
    }
#endif
}
#endif /* TL_GPU_NVIDIA */

#if defined(TL_HAVE_WGMMA)
template <int STAGE, bool TMA>
static int launch_fp8(const Mp8Args &w, int groups, hipStream_t st)
{
    static bool attr = false;
    const void *fn = (const void *)moe_prefill_fp8<STAGE, TMA>;
    if (!attr) {
        TL_GPU_CHECK(hipFuncSetAttribute(fn, hipFuncAttributeMaxDynamicSharedMemorySize, MP8_SMEM));
        attr = true;
    }
    dim3 grid((unsigned)(w.a.n_out / (STAGE == 1 ? MP_NB : MP2_NB)), (unsigned)groups);
    (void)tl_launch(moe_prefill_fp8<STAGE, TMA>, grid, MP_THREADS, MP8_SMEM, st, false, w);
    TL_GPU_CHECK_LAUNCH("moe_prefill_fp8");
    return 0;
}
#endif

int tl_moe_launch_prefill_fp8(int stage, const GemmArgs &a, const void *tmap_w, const void *tmap_act, int groups, hipStream_t st)
{
#if !defined(TL_HAVE_WGMMA)
    (void)stage, (void)a, (void)tmap_w, (void)tmap_act, (void)groups, (void)st;
    return tl_error(TL_EUSAGE, "moe prefill", "the fp8 prefill kernels need an sm_90a build (wgmma)");
#else
    const int nbw = stage == 1 ? MP_NB : MP2_NB;
    if ((stage != 1 && stage != 2) || a.K <= 0 || a.K % MP8_KSTEP || a.n_out <= 0 || a.n_out % nbw)
        return tl_error(TL_EUSAGE, "moe prefill", "fp8 stage %d: K %d must be a positive multiple of %d and the columns %d of %d",
                        stage, a.K, MP8_KSTEP, a.n_out, nbw);
    if (stage == 2 && tmap_w && !tmap_act)
        return tl_error(TL_EUSAGE, "moe prefill", "fp8 stage 2's tensor copies need both maps");
    Mp8Args w;
    memset(&w, 0, sizeof w);
    if (tmap_w) memcpy(&w.tw, tmap_w, sizeof w.tw);
    if (tmap_act) memcpy(&w.ta, tmap_act, sizeof w.ta);
    w.a = a;
    if (stage == 1) return tmap_w ? launch_fp8<1, true>(w, groups, st) : launch_fp8<1, false>(w, groups, st);
    return tmap_w ? launch_fp8<2, true>(w, groups, st) : launch_fp8<2, false>(w, groups, st);
#endif
}
