/* executor/hip_emu.h: the HIP that the kernels' .hip files see on the CPU executor (kernels/gpu.h includes it
 * when TL_GPU_EMU is defined, in place of <hip/hip_runtime.h>).
 *
 * The executor compiles the same .hip sources as host C++ (clang++, which knows the vector types
 * the AMD paths use) with one AMD target's code selected: -D__gfx942__ or -D__gfx950__, so that
 * kernels/mma.h picks TL_MMA_TARGET_GFX942 / GFX950 exactly as the device pass of a HIP build does.
 * Host and device code share that one pass: host code sees the target's macros too (a HIP build's
 * host pass sees none), which the kernels' host code must not depend on (DESIGN.md).
 *
 * What this header gives the kernels, all implemented by executor/runtime.cpp and executor/amdgcn.c:
 *   - the CUDA/HIP keywords (__global__, __device__, __shared__ is NOT given: static and dynamic LDS
 *     go through kernels/gpu.h's TL_SHARED / TL_SHARED_DYNAMIC, which place them in the work-group's
 *     own LDS, poisoned with 0xFF bytes at the start of every work-group);
 *   - threadIdx / blockIdx / blockDim / gridDim of the running work-item;
 *   - the wave operations (__shfl, __shfl_xor, __ballot, every MFMA builtin): each lane of the wave
 *     arrives, waits, and the last to arrive computes the operation for all 64 lanes (lockstep);
 *     lanes of one wave at different wave operations, or at a wave operation and a barrier, are an
 *     error naming the kernel, the work-group and both source lines;
 *   - the work-group barrier (__syncthreads, __builtin_amdgcn_s_barrier): every work-item of the
 *     group must reach the same barrier; one that exits or waits elsewhere is an error;
 *   - the amdgcn builtins the kernels use, from their documented semantics (executor/amdgcn.c);
 *   - atomics (C++ / GCC atomics on host memory), fences, clocks (host counters);
 *   - the host API the launchers call: hipMalloc (host memory: AddressSanitizer sees every access
 *     outside a buffer in the sanitizer build), hipMemcpy, hipMemset, streams and events (launches
 *     run to completion before tl_launch returns), device properties of the emulated target.
 * Graph capture is refused (hipErrorNotSupported): the executor has no timing.
 */
#ifndef TL_EXECUTOR_HIP_EMU_H
#define TL_EXECUTOR_HIP_EMU_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#if !defined(__gfx942__) && !defined(__gfx950__)
#error "executor/hip_emu.h: define __gfx942__ or __gfx950__ (the AMD target whose code runs)"
#endif
#if !defined(__clang__)
#error "executor/hip_emu.h: the executor's kernel objects are compiled with clang++ (ext_vector_type)"
#endif

/* ---- keywords ---------------------------------------------------------------------------- */
#define __global__
#define __device__
#define __host__
#define __constant__ static
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __HIP_MEMORY_SCOPE_SINGLETHREAD 1
#define __HIP_MEMORY_SCOPE_WAVEFRONT 2
#define __HIP_MEMORY_SCOPE_WORKGROUP 3
#define __HIP_MEMORY_SCOPE_AGENT 4
#define __HIP_MEMORY_SCOPE_SYSTEM 5
static constexpr int warpSize = 64;

/* HIP's min / max of two values of one type */
#define TL_EMU_MINMAX(T)                                            \
    static inline T min(T a, T b) { return b < a ? b : a; }         \
    static inline T max(T a, T b) { return a < b ? b : a; }
TL_EMU_MINMAX(int)
TL_EMU_MINMAX(unsigned)
TL_EMU_MINMAX(long long)
TL_EMU_MINMAX(unsigned long long)
TL_EMU_MINMAX(long)
TL_EMU_MINMAX(unsigned long)
#undef TL_EMU_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }

/* ---- vector types -------------------------------------------------------------------------- */
#include "emu_abi.h" /* dim3, tl_emu_item, tl_emu_wave_fn, hipError_t, the device attributes and properties */
#define TL_EMU_VEC2(T, N) struct __attribute__((aligned(2 * sizeof(T)))) N { T x, y; };
#define TL_EMU_VEC4(T, N) struct __attribute__((aligned(4 * sizeof(T) > 16 ? 16 : 4 * sizeof(T)))) N { T x, y, z, w; };
TL_EMU_VEC2(unsigned, uint2)
TL_EMU_VEC4(unsigned, uint4)
TL_EMU_VEC2(int, int2)
TL_EMU_VEC4(int, int4)
TL_EMU_VEC2(float, float2)
TL_EMU_VEC4(float, float4)
TL_EMU_VEC2(unsigned short, ushort2)
TL_EMU_VEC4(unsigned short, ushort4)
TL_EMU_VEC4(unsigned char, uchar4)
TL_EMU_VEC2(unsigned long long, ulonglong2)
#undef TL_EMU_VEC2
#undef TL_EMU_VEC4
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

/* ---- the runtime's C interface (executor/runtime.cpp) -------------------------------------- */
#define TL_EMU_API extern "C" __attribute__((visibility("default")))
/* The running work-item (thread-local: the OS thread's current fiber). */
TL_EMU_API const tl_emu_item *tl_emu_self(void);

/* One wave operation: every live lane of the wave calls it at the same site with its input; once
 * all have, op runs once for the wave (its failure is reported as the launch's) and each lane then
 * has its output. */
TL_EMU_API void tl_emu_wave(const char *what, tl_emu_wave_fn op, const void *in, void *out, uint32_t imm,
                            const void *site);
/* The work-group barrier. */
TL_EMU_API void tl_emu_barrier(const void *site);
/* A short sleep between two polls of memory another work-group writes: lets other work-items and
 * work-groups run (one that polls forever is reported). */
TL_EMU_API void tl_emu_spin(void);
/* The work-group's LDS: a static variable (one allocation per key and work-group, size bytes,
 * aligned) and the launch's dynamic LDS. Both lie in the work-group's LDS, poisoned with 0xFF. */
TL_EMU_API void *tl_emu_lds_static(const void *key, size_t size, size_t align);
TL_EMU_API void *tl_emu_lds_dynamic(size_t align);
/* The dispatch packet of the running launch (hsa_kernel_dispatch_packet_t's layout: workgroup
 * sizes at bytes 4, 6, 8, grid sizes in work-items at 12, 16, 20). */
TL_EMU_API const void *tl_emu_dispatch_packet(void);
/* A kernel's own failure (a trap): the launch fails with this reason. Does not return. */
TL_EMU_API void tl_emu_trap(const char *why) __attribute__((noreturn));
/* The emulated CU (the OS thread) the calling work-item runs on, and clocks. */
TL_EMU_API int tl_emu_cu(void);
TL_EMU_API unsigned long long tl_emu_realtime(void); /* 100 MHz ticks */
TL_EMU_API unsigned long long tl_emu_cycles(void);
/* The launch: body(ctx) runs once per work-item of grid x block, with smem bytes of dynamic LDS.
 * kernel: the kernel's address (its name in reports). Synchronous; returns a hipError_t value. */
TL_EMU_API int tl_emu_launch(const void *kernel, dim3 grid, dim3 block, size_t smem, void (*body)(const void *),
                             const void *ctx);

/* Wave operations and barriers: on the GPU two of them in two branches are two instructions, each
 * for its own lanes. nomerge keeps clang from merging such calls into one (it does, with a select
 * of their operands, otherwise), convergent from moving one into a branch. */
#define TL_EMU_WAVE_FN __attribute__((noinline, convergent, nomerge))
/* The call site of a wave operation or barrier: the return address inside the kernel (every
 * wave helper of gpu.h and mma.h is inlined, so distinct source sites have distinct addresses). */
#define TL_EMU_SITE() __builtin_return_address(0)

/* ---- the work-item's indices --------------------------------------------------------------- */
#define threadIdx (tl_emu_self()->thread)
#define blockIdx (tl_emu_self()->block)
#define blockDim (tl_emu_self()->block_dim)
#define gridDim (tl_emu_self()->grid_dim)

TL_EMU_WAVE_FN static void __syncthreads(void) { tl_emu_barrier(TL_EMU_SITE()); }
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline int __smid(void) { return tl_emu_cu(); }

/* ---- wave operations ------------------------------------------------------------------------ */
#include "amdgcn_ops.h"
/* A shuffle's lane input: the value's bytes (up to 8) and the lane it reads. */
struct tl_emu_shfl_in {
    uint64_t bits;
    int src;
};
template <typename T>
TL_EMU_WAVE_FN static T tl_emu_shfl_at(T v, int src, int width, const void *site)
{
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    tl_emu_shfl_in in = {0, 0};
    memcpy(&in.bits, &v, sizeof v);
    const int lane = (int)(tl_emu_self()->flat % 64u);
    /* HIP: the source lane is taken modulo width, within the caller's width-sized segment */
    in.src = (lane & ~(width - 1)) + (src & (width - 1));
    uint64_t o = 0;
    tl_emu_wave("__shfl", tl_emu_op_shfl, &in, &o, 0, site);
    T r;
    memcpy(&r, &o, sizeof r);
    return r;
}
template <typename T>
TL_EMU_WAVE_FN static T __shfl(T v, int src, int width = 64)
{
    return tl_emu_shfl_at(v, src, width, TL_EMU_SITE());
}
template <typename T>
TL_EMU_WAVE_FN static T __shfl_xor(T v, int mask, int width = 64)
{
    const int lane = (int)(tl_emu_self()->flat % 64u);
    return tl_emu_shfl_at(v, lane ^ mask, width, TL_EMU_SITE());
}
TL_EMU_WAVE_FN static unsigned long long __ballot(int p)
{
    const int in = p != 0;
    unsigned long long o = 0;
    tl_emu_wave("__ballot", tl_emu_op_ballot, &in, &o, 0, TL_EMU_SITE());
    return o;
}
static inline int __popcll(unsigned long long m) { return __builtin_popcountll(m); }
static inline int __popc(unsigned m) { return __builtin_popcount(m); }
static inline int __clzll(long long m) { return m ? __builtin_clzll((unsigned long long)m) : 64; }
static inline int __clz(int m) { return m ? __builtin_clz((unsigned)m) : 32; }
static inline int __ffsll(long long m) { return __builtin_ffsll(m); }
static inline int __ffs(int m) { return __builtin_ffs(m); }

/* ---- atomics (device scope: real atomics, work-groups run on several OS threads) ------------ */
template <typename T>
static inline T tl_emu_atomic_rmw(T *p, T v, int op)
{
    T old = __atomic_load_n(p, __ATOMIC_RELAXED), nv;
    do {
        switch (op) {
        case 0: nv = old + v; break;
        case 1: nv = old - v; break;
        case 2: nv = v < old ? v : old; break;
        case 3: nv = v > old ? v : old; break;
        default: nv = v; break;
        }
    } while (!__atomic_compare_exchange(p, &old, &nv, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
}
template <typename T> static inline T atomicAdd(T *p, T v) { return tl_emu_atomic_rmw(p, v, 0); }
template <typename T> static inline T atomicSub(T *p, T v) { return tl_emu_atomic_rmw(p, v, 1); }
template <typename T> static inline T atomicMin(T *p, T v) { return tl_emu_atomic_rmw(p, v, 2); }
template <typename T> static inline T atomicMax(T *p, T v) { return tl_emu_atomic_rmw(p, v, 3); }
template <typename T> static inline T atomicExch(T *p, T v) { return tl_emu_atomic_rmw(p, v, 4); }
template <typename T>
static inline T atomicCAS(T *p, T cmp, T v)
{
    __atomic_compare_exchange(p, &cmp, &v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
static inline unsigned atomicInc(unsigned *p, unsigned limit)
{
    unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED), nv;
    do nv = old >= limit ? 0u : old + 1u;
    while (!__atomic_compare_exchange_n(p, &old, nv, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
}
#define __hip_atomic_load(p, order, scope) __atomic_load_n((p), (order))
#define __hip_atomic_store(p, v, order, scope) __atomic_store_n((p), (v), (order))
#define __hip_atomic_fetch_add(p, v, order, scope) __atomic_fetch_add((p), (v), (order))

/* ---- the amdgcn builtins -------------------------------------------------------------------- */
#include "amdgcn.h"

/* ---- the host API ----------------------------------------------------------------------------- */
typedef struct tl_emu_stream *hipStream_t;
typedef struct tl_emu_event *hipEvent_t;
typedef struct tl_emu_graph *hipGraph_t;
typedef struct tl_emu_graph *hipGraphExec_t;
typedef enum { hipMemcpyHostToHost, hipMemcpyHostToDevice, hipMemcpyDeviceToHost, hipMemcpyDeviceToDevice, hipMemcpyDefault } hipMemcpyKind;
enum { hipStreamDefault = 0, hipStreamNonBlocking = 1 };
typedef enum { hipStreamCaptureModeGlobal, hipStreamCaptureModeThreadLocal, hipStreamCaptureModeRelaxed } hipStreamCaptureMode;
typedef enum {
    hipFuncAttributeMaxDynamicSharedMemorySize,
    hipFuncAttributePreferredSharedMemoryCarveout,
} hipFuncAttribute;

TL_EMU_API hipError_t tl_emu_malloc(void **p, size_t n);
template <typename T> static inline hipError_t hipMalloc(T **p, size_t n) { return tl_emu_malloc((void **)p, n); }
TL_EMU_API hipError_t hipFree(void *p);
TL_EMU_API hipError_t tl_emu_host_malloc(void **p, size_t n);
template <typename T> static inline hipError_t hipHostMalloc(T **p, size_t n, unsigned flags = 0) { return tl_emu_host_malloc((void **)p, n); }
TL_EMU_API hipError_t hipHostFree(void *p);
TL_EMU_API hipError_t tl_emu_memcpy(void *dst, const void *src, size_t n);
static inline hipError_t hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind k) { return tl_emu_memcpy(dst, src, n); }
static inline hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind k, hipStream_t s = 0) { return tl_emu_memcpy(dst, src, n); }
TL_EMU_API hipError_t tl_emu_memset(void *p, int v, size_t n);
static inline hipError_t hipMemset(void *p, int v, size_t n) { return tl_emu_memset(p, v, n); }
static inline hipError_t hipMemsetAsync(void *p, int v, size_t n, hipStream_t s = 0) { return tl_emu_memset(p, v, n); }
TL_EMU_API hipError_t hipMemGetInfo(size_t *free_b, size_t *total_b);
TL_EMU_API hipError_t hipGetLastError(void);
TL_EMU_API hipError_t hipPeekAtLastError(void);
TL_EMU_API const char *hipGetErrorString(hipError_t e);
TL_EMU_API const char *hipGetErrorName(hipError_t e);
TL_EMU_API hipError_t hipGetDeviceCount(int *n);
TL_EMU_API hipError_t hipGetDevice(int *d);
TL_EMU_API hipError_t hipSetDevice(int d);
TL_EMU_API hipError_t hipGetDeviceProperties(hipDeviceProp_t *p, int d);
TL_EMU_API hipError_t hipDeviceGetAttribute(int *v, hipDeviceAttribute_t a, int d);
TL_EMU_API hipError_t hipDeviceSynchronize(void);
TL_EMU_API hipError_t hipStreamCreate(hipStream_t *s);
static inline hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned flags) { return hipStreamCreate(s); }
TL_EMU_API hipError_t hipStreamDestroy(hipStream_t s);
TL_EMU_API hipError_t hipStreamSynchronize(hipStream_t s);
TL_EMU_API hipError_t hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode m);
TL_EMU_API hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t *g);
TL_EMU_API hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t *e, hipGraph_t g, unsigned long long flags);
TL_EMU_API hipError_t hipGraphLaunch(hipGraphExec_t e, hipStream_t s);
TL_EMU_API hipError_t hipGraphDestroy(hipGraph_t g);
TL_EMU_API hipError_t hipGraphExecDestroy(hipGraphExec_t e);
TL_EMU_API hipError_t hipEventCreate(hipEvent_t *e);
TL_EMU_API hipError_t hipEventDestroy(hipEvent_t e);
TL_EMU_API hipError_t hipEventRecord(hipEvent_t e, hipStream_t s = 0);
TL_EMU_API hipError_t hipEventSynchronize(hipEvent_t e);
TL_EMU_API hipError_t hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b);
TL_EMU_API hipError_t tl_emu_func_set_attribute(const void *f, hipFuncAttribute a, int v);
template <typename F> static inline hipError_t hipFuncSetAttribute(F f, hipFuncAttribute a, int v) { return tl_emu_func_set_attribute((const void *)f, a, v); }
TL_EMU_API hipError_t tl_emu_occupancy(int *blocks, const void *f, int threads, size_t smem);
template <typename F>
static inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, F f, int threads, size_t smem)
{
    return tl_emu_occupancy(blocks, (const void *)f, threads, smem);
}

/* Launches k over grid x block: every work-item calls k(args...) (converted to the kernel's
 * parameter types once, on the host, as a launch copies its arguments). */
template <typename... KArgs, typename... Args>
static inline hipError_t tl_emu_launch_kernel(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, Args... args)
{
    auto call = [&](void) { k(((KArgs)args)...); };
    return (hipError_t)tl_emu_launch((const void *)k, grid, block, smem,
                                     [](const void *c) { (*(const decltype(call) *)c)(); }, &call);
}
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
    tl_emu_launch_kernel(kernel, dim3(grid), dim3(block), (shmem), __VA_ARGS__)

#endif
