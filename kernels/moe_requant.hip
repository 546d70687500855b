/* kernels/moe_requant.hip: stage 2's FP8 input, the activation rows re-quantized to E4M3 in 1x128
 * groups (moe_quant_act), and its launch wrapper tl_moe_launch_requant (kernels/moe_launch.h). */
#include "moe_launch.h"
#include "../numerics/blockfp8.h" /* the FP8 scale group and amax clamp */
#include "../numerics/codes.h"    /* BF16 and E4M3 conversions */

/* One block per worklist row, one thread per 8 values (a 128 group is 16 lanes of one wave), every
 * load issued at once: amax by a 4-step butterfly, scale = max(amax, TL_BFP8_AMAX_MIN) / 448. */
__global__ void moe_quant_act(const uint16_t *act, const int32_t *sorted_ids, const int32_t *n_tiles, int width,
                              uint8_t *act_q, float *act_s)
{
    tl_grid_dep_launch(); /* the stage-2 GEMM may be scheduled now: it waits before reading act_q */
    const int row = blockIdx.x, nv = width / 8;
    if (row / TL_MOE_TILE_M >= *n_tiles || sorted_ids[row] < 0) return; /* padding rows are never read */
    for (int v0 = 0; v0 < nv; v0 += blockDim.x) { /* the same trip count for every thread */
        const int v = v0 + threadIdx.x;
        const bool on = v < nv;
        const size_t at = (size_t)row * width + 8 * (size_t)v;
        uint4 q = on ? *(const uint4 *)(act + at) : make_uint4(0, 0, 0, 0);
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
        float x[8], a = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            x[i] = tl_code_bf16_to_f32((w[i / 2] >> (16 * (i % 2))) & 0xFFFFu);
            a = tl_fmaxf(a, tl_fabsf(x[i]));
        }
#pragma unroll
        for (int o = 1; o < TL_BFP8_GROUP / 8; o <<= 1) a = tl_fmaxf(a, tl_shfl_xor(a, o));
        const float scale = tl_fmaxf(a, TL_BFP8_AMAX_MIN) / 448.0f; /* E4M3FN max */
        uint32_t lo = 0, hi = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo |= tl_code_e4m3_from_f32(x[i] / scale) << (8 * i);
            hi |= tl_code_e4m3_from_f32(x[i + 4] / scale) << (8 * i);
        }
        if (on) {
            *(uint2 *)(act_q + at) = make_uint2(lo, hi);
            if (v % (TL_BFP8_GROUP / 8) == 0) act_s[(size_t)row * (width / TL_BFP8_GROUP) + v / (TL_BFP8_GROUP / 8)] = scale;
        }
    }
}

int tl_moe_launch_requant(const uint16_t *act, const int32_t *sorted_ids, const int32_t *n_tiles, int rows,
                          int width, uint8_t *act_q, float *act_s, hipStream_t st)
{
    moe_quant_act<<<rows, 256, 0, st>>>(act, sorted_ids, n_tiles, width, act_q, act_s);
    TL_GPU_CHECK_LAUNCH("moe_quant_act");
    return 0;
}
