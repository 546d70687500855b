// Pattern benchmark 2: the packed stage-1 stream of DeepSeek-V3.2 at M = 1 (8 experts, bf16 470 MB,
// fp8 235 MB) under other block geometries: K split in parts (no reduction), items per block,
// waves per block, blocks per SM, bytes in flight per lane. Loads and a sum only.
// Session 9 (2026-11-29), run on the lent H200 as recorded in h200_moe_pattern_geometry.txt: built with
//   nvcc -O3 -arch=sm_90 -o pat2 h200_moe_pattern_geometry.cu;  ./pat2 60 (call 3)
// Each configuration: 5 warm-up + 60 timed runs, each after a 256 MiB read flush, event-timed;
// median, p10 and p90. Two rounds of every configuration. bench/results/h200_moe_notes.md, session 9.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("cuda %s line %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

// item = 32 rows x row_bytes contiguous; chunk = 32 rows x 64 WVEC bytes; a wave's chunk is 4 x WVEC
// instructions of 512 contiguous bytes. Block b: items [b / kparts * ipb, +ipb), K part b % kparts.
template <int THREADS, int MINB, int WVEC>
__global__ void __launch_bounds__(THREADS, MINB) s1p(const uint8_t *W, int row_bytes, int kparts, int ipb, int n_items, unsigned *sink)
{
    const int lane = threadIdx.x % 32, wave = threadIdx.x / 32, NW = THREADS / 32;
    const int chunk = 32 * 64 * WVEC, nch = row_bytes / (64 * WVEC);
    const int part = blockIdx.x % kparts, c_lo = part * nch / kparts, c_hi = (part + 1) * nch / kparts;
    unsigned s = 0;
    for (int it = blockIdx.x / kparts * ipb; it < (blockIdx.x / kparts + 1) * ipb && it < n_items; it++) {
        const uint8_t *item = W + (size_t)it * 32 * row_bytes + lane * 16;
        for (int c = c_lo + wave; c < c_hi; c += NW) {
            uint4 v[4][WVEC];
#pragma unroll
            for (int f = 0; f < 4; f++)
#pragma unroll
                for (int q = 0; q < WVEC; q++) v[f][q] = __ldcs((const uint4 *)(item + (size_t)c * chunk + (f * WVEC + q) * 512));
#pragma unroll
            for (int f = 0; f < 4; f++)
#pragma unroll
                for (int q = 0; q < WVEC; q++) s += v[f][q].x ^ v[f][q].y ^ v[f][q].z ^ v[f][q].w;
        }
    }
    if (s == 0x12345678u) sink[0] = s;
}
__global__ void __launch_bounds__(256) plain(const uint4 *src, size_t n16, unsigned *sink)
{
    size_t b0 = (size_t)blockIdx.x * 2048, i = b0 + threadIdx.x, end = b0 + 2048 < n16 ? b0 + 2048 : n16;
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
    const size_t maxbytes = (size_t)8 * 4096 * 14336;
    uint8_t *W; uint4 *F; unsigned *sink;
    CK(cudaMalloc(&W, maxbytes)); CK(cudaMalloc(&F, 256u << 20)); CK(cudaMalloc(&sink, 64));
    CK(cudaMemset(W, 1, maxbytes)); CK(cudaMemset(F, 2, 256u << 20));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    const int reps = argc > 1 ? atoi(argv[1]) : 60;
    struct Cfg { const char *name; int geo; int row; int kparts; int ipb; };
    // geo: 0 = 128 thr x 4/SM WVEC 4 (the kernel, bf16), 1 = 256 x 2 WVEC 4, 2 = 128 x 8 WVEC 2,
    //      3 = 128 x 4 WVEC 8 (twice the bytes in flight), 4 = 128 x 4 WVEC 2 (fp8's 2 x 32 B: same bytes), 5 = plain
    const Cfg cfgs[] = {
        {"bf16 kernel geometry     ", 0, 14336, 1, 1}, {"bf16 K in 2 parts        ", 0, 14336, 2, 1},
        {"bf16 K in 4 parts        ", 0, 14336, 4, 1}, {"bf16 K in 7 parts        ", 0, 14336, 7, 1},
        {"bf16 2 items a block     ", 0, 14336, 1, 2}, {"bf16 8 waves x 2 blocks  ", 1, 14336, 1, 1},
        {"bf16 4 waves x 8, 128B   ", 2, 14336, 1, 1}, {"bf16 4 x 4, 512 B a lane ", 3, 14336, 1, 1},
        {"bf16 4 x 4 half in flight", 4, 14336, 1, 1}, {"plain 470MB              ", 5, 14336, 1, 1},
        {"fp8  kernel geometry     ", 0, 7168, 1, 1},  {"fp8  K in 2 parts        ", 0, 7168, 2, 1},
        {"fp8  K in 4 parts        ", 0, 7168, 4, 1},  {"fp8  4 x 4, 512 B a lane ", 3, 7168, 1, 1},
        {"plain 235MB              ", 5, 7168, 1, 1},
    };
    for (int round = 0; round < 2; round++)
    for (const Cfg &c : cfgs) {
        const size_t bytes = (size_t)8 * 4096 * c.row;
        const int n_items = 8 * 128, grid = (n_items + c.ipb - 1) / c.ipb * c.kparts;
        std::vector<float> t;
        for (int r = 0; r < reps + 5; r++) {
            flush<<<1056, 256>>>(F, (256u << 20) / 16, sink);
            CK(cudaEventRecord(a));
            switch (c.geo) {
            case 0: s1p<128, 4, 4><<<grid, 128>>>(W, c.row, c.kparts, c.ipb, n_items, sink); break;
            case 1: s1p<256, 2, 4><<<grid, 256>>>(W, c.row, c.kparts, c.ipb, n_items, sink); break;
            case 2: s1p<128, 8, 2><<<grid, 128>>>(W, c.row, c.kparts, c.ipb, n_items, sink); break;
            case 3: s1p<128, 4, 8><<<grid, 128>>>(W, c.row, c.kparts, c.ipb, n_items, sink); break;
            case 4: s1p<128, 4, 2><<<grid, 128>>>(W, c.row, c.kparts, c.ipb, n_items, sink); break;
            case 5: plain<<<(unsigned)((bytes / 16 + 2047) / 2048), 256>>>((const uint4 *)W, bytes / 16, sink); break;
            }
            CK(cudaGetLastError());
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
