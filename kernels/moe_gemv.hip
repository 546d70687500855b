/* kernels/moe_gemv.hip: bf16 stage 2 at one token (moe_gemv_down: a dot product per weight row in
 * small, tapered blocks) and its launch wrapper tl_moe_launch_gemv_down (kernels/moe_launch.h). */
#include "moe_launch.h"
#include "../numerics/codes.h" /* tl_code_bits_f32 */

/* The geometry: kernels/moe.h, TL_MOE_GEMV_*. At one token each of the k tiles holds one row, and
 * the GEMM's stage 2 is one round of 448 items of 512 KB on 528 slots (DeepSeek-V3.2), whose SMs
 * end up to 15 us apart on the H200. Here a group of gs threads owns 2 weight rows over the whole K (every
 * thread's 4 16-byte vectors of each row loaded at once), a block up to 8 such tasks in turn, and
 * the last 15% of the tasks go one to a block, so that those short blocks, issued last, fill the
 * SMs that end early. After each task's products its registers at once take the next task's
 * weights, which stream while the task's sums are reduced (shuffles, then shared memory when gs
 * spans waves) and written. About 7% faster than the GEMM there; the same design is slower for
 * stage 1 and for fp8 (bench/journal/moe-kernel.md, decode). */
static __device__ __forceinline__ void bf16x8_f32(uint4 q, float *out)
{
    const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        out[2 * i] = tl_code_bits_f32(u[i] << 16);
        out[2 * i + 1] = tl_code_bits_f32(u[i] & 0xFFFF0000u);
    }
}

/* Grid (tl_moe_gemv_geometry): blocks [0, big) take `tasks` consecutive tasks (tile-major; tasks
 * divides a tile's tasks, so no block spans two tiles), the blocks after them one each; a task is
 * (tile, a block-wide set of 2 x blockDim / gs output columns). Writes ybuf[edge][n] = topk_w[edge]
 * x (act row . W2[e] row n) for each of the tile's rows (one per token that chose expert e: at one
 * token, one row unless the token repeats an expert). */
__global__ void __launch_bounds__(TL_MOE_GEMV_THREADS, TL_LAUNCH_MIN_BLOCKS(TL_MOE_GEMV_MINB))
    moe_gemv_down(GemmArgs p, int gs, int tasks, int big)
{
#if defined(MOE_NO_DEVICE)
    (void)p, (void)gs, (void)tasks, (void)big;
#else
    enum { R = TL_MOE_GEMV_R, VJ = TL_MOE_GEMV_VJ };
    TL_SHARED(float, red, [2][TL_MOE_GEMV_THREADS / TL_WAVE][R]);
    const unsigned long long t_start = p.trace ? tl_gpu_clock() : 0;
    tl_grid_dep_launch(); /* the dependent combine may be scheduled now (it waits for this grid) */
    const int outs = (int)blockDim.x / gs * R, per_tile = p.n_out / outs, b = blockIdx.x;
    const int first = (int)gemv_first_task(b, big, tasks);
    if (b >= big) tasks = 1;
    const int tile = first / per_tile, nb0 = first % per_tile;
    /* one round trip: the tile count, the tile's expert and row count, its first row */
    const int n_tiles = *p.n_tiles, e = p.tile_expert[tile], rows = p.tile_rows[tile];
    int edge = p.sorted_ids[tile * TL_MOE_TILE_M];
    if (tile >= n_tiles) return;
    const int tid = threadIdx.x, grp = tid / gs, gl = tid % gs;
    const int nv = p.K / 8; /* 16-byte vectors of a weight row and of an activation row */
    const uint8_t *wexp = p.W + (size_t)e * p.w_mat_bytes;
    auto col_of = [&](int q, int i) { return (nb0 + q) * outs + grp * R + i; }; /* row i of task q */
    uint4 w[R][VJ];
    auto load_task = [&](int q) { /* the thread's vectors gl, gl + gs, ...: one round trip */
#pragma unroll
        for (int i = 0; i < R; i++) {
            const uint8_t *row = wexp + (size_t)col_of(q, i) * nv * 16;
#pragma unroll
            for (int j = 0; j < VJ; j++) {
                const int v = gl + j * gs;
                w[i][j] = v < nv ? tl_load_once(row + 16 * (size_t)v) : make_uint4(0, 0, 0, 0);
            }
        }
    };
    load_task(0);
    for (int r = 0; r < rows; r++) {
        if (r) edge = p.sorted_ids[tile * TL_MOE_TILE_M + r];
        uint4 a[VJ]; /* the activation row's vectors at the same k */
#pragma unroll
        for (int j = 0; j < VJ; j++) {
            const int v = gl + j * gs;
            a[j] = v < nv ? *(const uint4 *)(p.A + ((size_t)(tile * TL_MOE_TILE_M + r) * nv + v) * 16)
                          : make_uint4(0, 0, 0, 0);
        }
        for (int q = 0; q < tasks; q++) {
            float acc[R] = {};
#pragma unroll
            for (int j = 0; j < VJ; j++) {
                float x[8];
                bf16x8_f32(a[j], x);
#pragma unroll
                for (int i = 0; i < R; i++) {
                    float wf[8];
                    bf16x8_f32(w[i][j], wf);
#pragma unroll
                    for (int k = 0; k < 8; k++) acc[i] = fmaf(wf[k], x[k], acc[i]);
                }
            }
            if (q + 1 < tasks) load_task(q + 1);
            else if (r + 1 < rows) load_task(0);
            /* the group's sums in a fixed order: lanes, then (gs > a wave) its waves through
             * shared memory, double-buffered so that one barrier per task suffices */
            const int span = gs < TL_WAVE ? gs : TL_WAVE;
#pragma unroll
            for (int i = 0; i < R; i++)
                for (int m = span / 2; m > 0; m >>= 1) acc[i] += tl_shfl_xor(acc[i], m);
            if (gs > TL_WAVE) {
                float(*rb)[R] = red[(r * tasks + q) & 1];
                if (tl_lane() == 0)
#pragma unroll
                    for (int i = 0; i < R; i++) rb[tl_wave_id()][i] = acc[i];
                __syncthreads();
                if (gl == 0)
#pragma unroll
                    for (int i = 0; i < R; i++) {
                        float sum = 0.0f;
                        for (int wv = 0; wv < gs / TL_WAVE; wv++) sum += rb[tid / TL_WAVE + wv][i];
                        acc[i] = sum;
                    }
            }
            if (gl == 0)
#pragma unroll
                for (int i = 0; i < R; i++) p.ybuf[(size_t)edge * p.n_out + col_of(q, i)] = p.topk_w[edge] * acc[i];
        }
    }
    if (p.trace) {
        __syncthreads();
        if (tid == 0) {
            p.trace[3 * (size_t)blockIdx.x] = t_start;
            p.trace[3 * (size_t)blockIdx.x + 1] = tl_gpu_clock();
            p.trace[3 * (size_t)blockIdx.x + 2] = (unsigned long long)tl_gpu_sm_id();
        }
    }
#endif
}

int tl_moe_launch_gemv_down(const GemmArgs &a, const StageGrid &g, hipStream_t st)
{
    /* bf16: no kernel ahead of it to wait for (it never calls tl_grid_dep_wait) */
    hipError_t e = tl_launch(moe_gemv_down, dim3((unsigned)g.blocks), dim3(g.geom.threads), 0, st, false, a, g.geom.gs,
                             g.geom.tasks, (int)g.big);
    return e == hipSuccess ? 0 : tl_gpu_fail("moe_gemv_down", hipGetErrorString(e), __FILE__, __LINE__);
}
