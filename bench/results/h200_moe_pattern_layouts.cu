// Access-pattern microbenchmark: stage 1's weight stream at M = 1 (8 experts) and M = 8-like (64),
// rows layout (as moe_gemm reads [E][N][K]) against an item-packed layout (each item's bytes in the
// order the lanes load them), and a plain read. No arithmetic beyond a sum.
// Session 9 (2026-11-29), run on the lent H200 as recorded in h200_moe_pattern_layouts.txt: built with
//   nvcc -O3 -arch=sm_90 -o pat h200_moe_pattern_layouts.cu;  ./pat 60 (call 1)
// Each configuration: 5 warm-up + 60 timed runs, each after a 256 MiB read flush, event-timed;
// median, p10 and p90. Two rounds of every configuration. bench/results/h200_moe_notes.md, session 9.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("cuda %s line %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

template <int WVEC, int U, bool PACKED>
__global__ void __launch_bounds__(128, 4) s1(const uint8_t *W, int row_bytes, int n_out, int n_exp, unsigned *sink)
{
    const int e = blockIdx.x % n_exp, nb = blockIdx.x / n_exp;
    const int lane = threadIdx.x % 32, wave = threadIdx.x / 32, kgrp = lane % 4, bcol = lane / 4;
    const int chunk_row = 4 * 16 * WVEC;            // bytes of a row per chunk (4 lanes)
    const int nchunks = row_bytes / chunk_row;
    const size_t mat = (size_t)2 * n_out * row_bytes;
    const uint8_t *wrow[4];
    for (int f = 0; f < 4; f++) {
        int n = f < 2 ? nb * 16 + f * 8 : n_out + nb * 16 + (f - 2) * 8;
        wrow[f] = W + (size_t)e * mat + (size_t)(n + bcol) * row_bytes;
    }
    const uint8_t *item = W + (size_t)e * mat + (size_t)nb * 32 * row_bytes;
    unsigned s = 0;
    for (int c0 = wave; c0 < nchunks; c0 += 4 * U) {
        uint4 v[U][4][WVEC];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + 4 * u;
            if (c >= nchunks) break;
#pragma unroll
            for (int f = 0; f < 4; f++)
#pragma unroll
                for (int q = 0; q < WVEC; q++) {
                    const uint8_t *p = PACKED ? item + (size_t)c * 32 * chunk_row + ((f * WVEC + q) * 32 + lane) * 16
                                              : wrow[f] + (size_t)c * chunk_row + kgrp * 16 * WVEC + 16 * q;
                    v[u][f][q] = __ldcs((const uint4 *)p);
                }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (c0 + 4 * u >= nchunks) break;
#pragma unroll
            for (int f = 0; f < 4; f++)
#pragma unroll
                for (int q = 0; q < WVEC; q++) s += v[u][f][q].x ^ v[u][f][q].y ^ v[u][f][q].z ^ v[u][f][q].w;
        }
    }
    if (s == 0x12345678u) sink[0] = s;
}

__global__ void __launch_bounds__(256) plain(const uint4 *src, size_t n16, unsigned *sink)
{
    size_t chunk = 256 * 8, b0 = (size_t)blockIdx.x * chunk, i = b0 + threadIdx.x, end = b0 + chunk < n16 ? b0 + chunk : n16;
    unsigned s = 0;
    uint4 v[8];
    if (i + 7 * 256 < end) {
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = src[i + u * 256];
#pragma unroll
        for (int u = 0; u < 8; u++) s += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    } else
        for (; i < end; i += 256) s += src[i].x;
    if (s == 0x12345678u) sink[0] = s;
}
__global__ void flush(const uint4 *f, size_t n, unsigned *sink)
{
    unsigned s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) s += f[i].x;
    if (s == 0x12345678u) sink[1] = s;
}

int main(int argc, char **argv)
{
    const int n_out = 2048;
    const size_t maxbytes = (size_t)64 * 2 * n_out * 14336;
    uint8_t *W; uint4 *F; unsigned *sink;
    CK(cudaMalloc(&W, maxbytes)); CK(cudaMalloc(&F, 256u << 20)); CK(cudaMalloc(&sink, 64));
    CK(cudaMemset(W, 1, maxbytes)); CK(cudaMemset(F, 2, 256u << 20));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    const int reps = argc > 1 ? atoi(argv[1]) : 60;
    struct Cfg { const char *name; int kind; int n_exp; int row; };
    const Cfg cfgs[] = {
        {"bf16 rows   E8 ", 0, 8, 14336}, {"bf16 packed E8 ", 1, 8, 14336}, {"plain 470MB    ", 4, 8, 14336},
        {"fp8  rows   E8 ", 2, 8, 7168},  {"fp8  packed E8 ", 3, 8, 7168},  {"plain 235MB    ", 4, 8, 7168},
        {"bf16 rows   E64", 0, 64, 14336}, {"bf16 packed E64", 1, 64, 14336}, {"plain 3.76GB   ", 4, 64, 14336},
        {"fp8  rows   E64", 2, 64, 7168},  {"fp8  packed E64", 3, 64, 7168},
    };
    for (int round = 0; round < 2; round++)
    for (const Cfg &c : cfgs) {
        const size_t bytes = (size_t)c.n_exp * 2 * n_out * c.row;
        std::vector<float> t;
        for (int r = 0; r < reps + 5; r++) {
            flush<<<1056, 256>>>(F, (256u << 20) / 16, sink);
            CK(cudaEventRecord(a));
            const int grid = c.n_exp * (n_out / 16);
            switch (c.kind) {
            case 0: s1<4, 1, false><<<grid, 128>>>(W, c.row, n_out, c.n_exp, sink); break;
            case 1: s1<4, 1, true><<<grid, 128>>>(W, c.row, n_out, c.n_exp, sink); break;
            case 2: s1<2, 2, false><<<grid, 128>>>(W, c.row, n_out, c.n_exp, sink); break;
            case 3: s1<2, 2, true><<<grid, 128>>>(W, c.row, n_out, c.n_exp, sink); break;
            case 4: plain<<<(unsigned)((bytes / 16 + 2047) / 2048), 256>>>((const uint4 *)W, bytes / 16, sink); break;
            }
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            float ms; CK(cudaEventElapsedTime(&ms, a, b));
            if (r >= 5) t.push_back(ms * 1e3f);
        }
        std::sort(t.begin(), t.end());
        printf("%s  %8.2f us  (p10 %8.2f p90 %8.2f)  %.3f TB/s\n", c.name, t[t.size() / 2], t[t.size() / 10],
               t[t.size() * 9 / 10], bytes / (t[t.size() / 2] * 1e-6) / 1e12);
    }
    return 0;
}
