// Probe kernels for checking which ncu metrics count tensor FLOPs (tilelab draw helper).
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
__global__ void mma_bf16_loop(float *out, int iters) {
    unsigned a[4] = {threadIdx.x, 1u, 2u, 3u}, b[2] = {5u, threadIdx.x};
    float c[4] = {0, 0, 0, 0};
    for (int i = 0; i < iters; i++) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = c[0] + c[1] + c[2] + c[3];
}
__global__ void mma_fp8_loop(float *out, int iters) {
    unsigned a[4] = {threadIdx.x, 1u, 2u, 3u}, b[2] = {5u, threadIdx.x};
    float c[4] = {0, 0, 0, 0};
    for (int i = 0; i < iters; i++) {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = c[0] + c[1] + c[2] + c[3];
}
__global__ void read_sum(const float4 *in, size_t n, float *out) {
    float s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = in[i]; s += v.x + v.y + v.z + v.w;
    }
    atomicAdd(out, s);
}
int main() {
    float *out, *acc; float4 *buf; size_t n = (size_t)1 << 26; // 1 GiB of float4
    cudaMalloc(&out, 1 << 22); cudaMalloc(&acc, 4); cudaMalloc(&buf, n * sizeof(float4));
    cudaMemset(buf, 0, n * sizeof(float4));
    // 528 blocks x 128 threads = 2112 warps, 4096 iterations -> 2112*4096*4096 FLOP (bf16)
    mma_bf16_loop<<<528, 128>>>(out, 4096);
    mma_fp8_loop<<<528, 128>>>(out, 4096);
    read_sum<<<132 * 8, 256>>>(buf, n, acc);
    cudaError_t e = cudaDeviceSynchronize();
    printf("done: %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
