/* kernels/moe_sort.hip: the MoE worklist on the device (moe_sort_count, moe_sort_scatter; equal to
 * tl_worklist_build bit for bit) and its launch wrapper tl_moe_launch_sort (kernels/moe_launch.h). */
#include "moe_launch.h"

#define SORT_MAX_E 4096 /* experts the shared counts hold (tl_moe_kernel_supports refuses more) */
/* One block of 1024 threads: counts the edges per expert in shared memory (ids outside
 * [0, n_experts) are not counted), then prefix-sums the experts' tile counts: tile_off[e],
 * expert_count[e] and n_tiles. Cost: edges / 1024 shared atomics a thread and a 10-step scan. */
__global__ void moe_sort_count(const int32_t *ids, int edges, int n_experts, int32_t *expert_count,
                               int32_t *tile_off, int32_t *n_tiles)
{
    TL_SHARED(int, cnt, [SORT_MAX_E]);
    TL_SHARED(int, part, [1024]);
    const int t = threadIdx.x;
    for (int e = t; e < n_experts; e += 1024) cnt[e] = 0;
    __syncthreads();
    for (int i = t; i < edges; i += 1024) {
        int e = ids[i];
        if (e >= 0 && e < n_experts) atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    const int per = (n_experts + 1023) / 1024, lo = t * per;
    int local = 0;
    for (int e = lo; e < lo + per && e < n_experts; e++) local += (cnt[e] + TL_MOE_TILE_M - 1) / TL_MOE_TILE_M;
    part[t] = local;
    __syncthreads();
    for (int off = 1; off < 1024; off <<= 1) { /* inclusive scan of the threads' tile counts */
        int v = t >= off ? part[t - off] : 0;
        __syncthreads();
        part[t] += v;
        __syncthreads();
    }
    int run = part[t] - local;
    for (int e = lo; e < lo + per && e < n_experts; e++) {
        tile_off[e] = run;
        expert_count[e] = cnt[e];
        run += (cnt[e] + TL_MOE_TILE_M - 1) / TL_MOE_TILE_M;
    }
    if (t == 1023) *n_tiles = part[1023];
}

/* One wave per expert: its edges in ascending id (ballot + popcount ranks), then the padding. */
__global__ void moe_sort_scatter(const int32_t *ids, int edges, int n_experts, const int32_t *expert_count,
                                 const int32_t *tile_off, int32_t *sorted_ids, int32_t *tile_expert,
                                 int32_t *tile_rows)
{
    const int lane = tl_lane(), e = blockIdx.x * (blockDim.x / TL_WAVE) + tl_wave_id();
    if (e >= n_experts) return;
    const int count = expert_count[e];
    if (count == 0) return;
    const int t0 = tile_off[e], base = t0 * TL_MOE_TILE_M;
    const tl_wave_mask below = (tl_wave_mask)(((unsigned long long)1 << lane) - 1);
    int found = 0;
    for (int i0 = 0; i0 < edges && found < count; i0 += TL_WAVE) {
        int i = i0 + lane;
        bool mine = i < edges && ids[i] == e;
        tl_wave_mask m = tl_ballot(mine);
        if (mine) sorted_ids[base + found + tl_popc(m & below)] = i;
        found += tl_popc(m);
    }
    const int tiles = (count + TL_MOE_TILE_M - 1) / TL_MOE_TILE_M;
    for (int r = count + lane; r < tiles * TL_MOE_TILE_M; r += TL_WAVE) sorted_ids[base + r] = TL_WL_PAD;
    for (int j = lane; j < tiles; j += TL_WAVE) {
        tile_expert[t0 + j] = e;
        int rows = count - j * TL_MOE_TILE_M;
        tile_rows[t0 + j] = rows < TL_MOE_TILE_M ? rows : TL_MOE_TILE_M;
    }
}

int tl_moe_launch_sort(const int32_t *ids, int edges, int n_experts, int32_t *expert_count, int32_t *tile_off,
                       int32_t *n_tiles, int32_t *sorted_ids, int32_t *tile_expert, int32_t *tile_rows,
                       hipStream_t st)
{
    (void)tl_launch(moe_sort_count, 1, 1024, 0, st, false, ids, edges, n_experts, expert_count, tile_off, n_tiles);
    TL_GPU_CHECK_LAUNCH("moe_sort_count");
    const int waves_per_block = 256 / tl_gpu_wave_size();
    (void)tl_launch(moe_sort_scatter, (n_experts + waves_per_block - 1) / waves_per_block, 256, 0, st, false, 
        ids, edges, n_experts, expert_count, tile_off, sorted_ids, tile_expert, tile_rows);
    TL_GPU_CHECK_LAUNCH("moe_sort_scatter");
    return 0;
}
