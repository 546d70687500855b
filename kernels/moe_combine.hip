/* kernels/moe_combine.hip: each token's k weighted rows summed in slot order (moe_combine), and its
 * launch wrapper tl_moe_launch_combine (kernels/moe_launch.h). */
#include "moe_launch.h"

__global__ void moe_combine(const float *ybuf, int tokens, int k, int hidden, float *out)
{
    tl_grid_dep_wait(); /* ybuf is the stage-2 GEMM's output */
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, n4 = (size_t)tokens * hidden / 4;
    if (i >= n4) return;
    size_t t = i / (hidden / 4), c = (i % (hidden / 4)) * 4;
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sl = 0; sl < k; sl++) {
        float4 y = *(const float4 *)(ybuf + ((size_t)t * k + sl) * hidden + c);
        s.x += y.x;
        s.y += y.y;
        s.z += y.z;
        s.w += y.w;
    }
    *(float4 *)(out + t * hidden + c) = s;
}

int tl_moe_launch_combine(const float *ybuf, int tokens, int k, int hidden, float *out, hipStream_t st)
{
    const size_t n4 = (size_t)tokens * hidden / 4;
    hipError_t e = tl_launch(moe_combine, dim3((unsigned)((n4 + 255) / 256)), dim3(256), 0, st, true, ybuf, tokens, k,
                             hidden, out);
    return e == hipSuccess ? 0 : tl_gpu_fail("moe_combine", hipGetErrorString(e), __FILE__, __LINE__);
}
