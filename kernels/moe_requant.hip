/* kernels/moe_requant.hip: stage 2's input re-quantized (Q2, contract/moe.h): fp8's rows to E4M3
 * in 1x128 groups (moe_quant_act), the MX types' to MXFP8 (moe_quant_act_mx), and their launch
 * wrappers tl_moe_launch_requant and tl_moe_launch_requant_mx (kernels/moe_launch.h). */
#include "moe_launch.h"
#include "../contract/quant.h"    /* the MX block's scale and codes, as the quant op computes them */
#include "../numerics/blockfp8.h" /* the FP8 scale group and amax clamp */
#include "../numerics/codes.h"    /* BF16 and E4M3 conversions */
#include "../numerics/mx.h"       /* the MX block */

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
    (void)tl_launch(moe_quant_act, rows, 256, 0, st, false, act, sorted_ids, n_tiles, width, act_q, act_s);
    TL_GPU_CHECK_LAUNCH("moe_quant_act");
    return 0;
}

/* The MX types' Q2 (tl_moe_launch_requant_mx): one block per worklist row, one thread per 8 values
 * (an MX block is 4 lanes), every load issued at once; the block's largest |x| bits (NaN above Inf)
 * by a 2-step butterfly, then contract/quant.h's scale and codes: the quant op's own functions. */
__global__ void moe_quant_act_mx(const uint16_t *act, const int32_t *sorted_ids, const int32_t *n_tiles, int width,
                                 uint8_t *act_q, uint8_t *act_e, uint16_t *act_b)
{
    tl_grid_dep_launch(); /* the stage-2 GEMM may be scheduled now: it waits before reading the rows */
    const int row = blockIdx.x, nv = width / 8;
    if (row / TL_MOE_TILE_M >= *n_tiles || sorted_ids[row] < 0) return; /* padding rows are never read */
    for (int v0 = 0; v0 < nv; v0 += blockDim.x) { /* the same trip count for every thread */
        const int v = v0 + threadIdx.x;
        const bool on = v < nv;
        const size_t at = (size_t)row * width + 8 * (size_t)v;
        uint4 q = on ? *(const uint4 *)(act + at) : make_uint4(0, 0, 0, 0);
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
        float x[8];
        uint32_t amax = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            x[i] = tl_code_bf16_to_f32((w[i / 2] >> (16 * (i % 2))) & 0xFFFFu);
            const uint32_t a = tl_quant_abs_bits(x[i]);
            amax = a > amax ? a : amax;
        }
#pragma unroll
        for (int o = 1; o < TL_MX_BLOCK / 8; o <<= 1) {
            const uint32_t a = (uint32_t)tl_shfl_xor((int)amax, o);
            amax = a > amax ? a : amax;
        }
        const uint32_t sc = tl_quant_mx_scale(amax, 0, 0);
        uint32_t c[8];
#pragma unroll
        for (int i = 0; i < 8; i++) c[i] = tl_quant_mx_code(x[i], sc, 0);
        if (!on) continue;
#if TL_MOE_SCALED_MX
        (void)act_b;
        *(uint2 *)(act_q + at) = make_uint2(c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24, c[4] | c[5] << 8 | c[6] << 16 | c[7] << 24);
        if (v % (TL_MX_BLOCK / 8) == 0) act_e[(size_t)row * (width / TL_MX_BLOCK) + v / (TL_MX_BLOCK / 8)] = (uint8_t)sc;
#else
        (void)act_q, (void)act_e;
        const float s = tl_code_e8m0_to_f32(sc);
        uint32_t o[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            o[i] = tl_code_bf16_from_f32(tl_code_e4m3_to_f32(c[2 * i]) * s) |
                   tl_code_bf16_from_f32(tl_code_e4m3_to_f32(c[2 * i + 1]) * s) << 16;
        *(uint4 *)(act_b + at) = make_uint4(o[0], o[1], o[2], o[3]);
#endif
    }
}

int tl_moe_launch_requant_mx(const uint16_t *act, const int32_t *sorted_ids, const int32_t *n_tiles, int rows,
                             int width, uint8_t *act_q, uint8_t *act_e, uint16_t *act_b, hipStream_t st)
{
    (void)tl_launch(moe_quant_act_mx, rows, 256, 0, st, false, act, sorted_ids, n_tiles, width, act_q, act_e, act_b);
    TL_GPU_CHECK_LAUNCH("moe_quant_act_mx");
    return 0;
}
