/* kernels/gpu.h: the one place where GPU platforms differ.
 *
 * Every .hip file under kernels/ includes this header first and then writes plain HIP:
 *   - on AMD (hipcc, or clang -x hip: __HIP__ / __HIP_PLATFORM_AMD__) it includes
 *     <hip/hip_runtime.h> and adds nothing but the helpers below;
 *   - under nvcc (__CUDACC__ without __HIP__) it includes <cuda_runtime.h> and maps the HIP
 *     names the kernels use onto CUDA. Debian's HIP 5.2 headers for the NVIDIA platform do not
 *     build with CUDA 13, so this mapping is the project's own and covers only what is used:
 *     add a name here when a kernel needs one, never in a .hip file.
 *
 * Wave size. Device code uses TL_WAVE, a compile-time constant: 64 on gfx9 (CDNA), 32 on NVIDIA.
 * Host code never uses TL_WAVE (in HIP's host pass it is only defined so that device function
 * bodies parse); host launch geometry asks the device: tl_gpu_wave_size() in kernels/bench.h.
 *
 * Checked calls. Host code in .hip files is C++ but reports errors through the C API of
 * core/tl.h:
 *   TL_GPU_CHECK(hipMalloc(&p, n));           -> on failure records "hipMalloc: out of memory
 *                                                (kernels/x.hip:12)" and returns TL_EFAIL
 *   TL_GPU_CHECK_GOTO(call, status, label);   -> same record, sets status = TL_EFAIL, goto label
 *                                                (for functions that must free what they hold)
 *   kern<<<g, b, 0, s>>>(...); TL_GPU_CHECK_LAUNCH("kern");  -> after EVERY launch
 *   TL_GPU_CHECK_LAUNCH_GOTO("kern", status, label);
 * The enclosing function must return int (the tl status contract).
 */
#ifndef TL_KERNELS_GPU_H
#define TL_KERNELS_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../core/tl.h"
#ifdef __cplusplus
}
#endif
#include "../numerics/codes.h" /* the software encoders behind tl_e4m3x2_hw */

/* ---------------------------------------------------------------------------------------------
 * Platform selection
 * ------------------------------------------------------------------------------------------- */
#if defined(TL_GPU_EMU)
/* the CPU executor: this .hip file compiled as host C++ for one AMD target (executor/hip_emu.h) */
#define TL_GPU_AMD 1
#include "../executor/hip_emu.h"
#elif defined(__HIP__) || defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#define TL_GPU_AMD 1
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#define TL_GPU_NVIDIA 1
#include <cuda_runtime.h>
#else
#error "kernels/gpu.h: compile .hip files with hipcc, clang -x hip, or nvcc -x cu"
#endif
/* TL_GPU_AMD_DEVICE: AMD device code, which uses the amdgcn builtins (a HIP build's device pass,
 * and the executor, which runs that code on the CPU). */
#if defined(TL_GPU_AMD) && (defined(__HIP_DEVICE_COMPILE__) || defined(TL_GPU_EMU))
#define TL_GPU_AMD_DEVICE 1
#endif

/* The op tables a kernels/OP.hip file exports (its kernels/OP.h declares them):
 *   TL_GPU_EXPORT(const tl_quant_gpu_api, tl_quant_gpu) = &api;
 * defines tl_quant_gpu_native in a GPU build and tl_quant_gpu_emu_gfx942 / _gfx950 in the
 * executor's build of the file for that target; kernels/devices.c selects one of them. */
#if defined(TL_GPU_EMU) && defined(__gfx950__)
#define TL_GPU_EXPORT(T, name) extern "C" __attribute__((visibility("default"))) T *const name##_emu_gfx950
#elif defined(TL_GPU_EMU)
#define TL_GPU_EXPORT(T, name) extern "C" __attribute__((visibility("default"))) T *const name##_emu_gfx942
#else
#define TL_GPU_EXPORT(T, name) extern "C" T *const name##_native
#endif

/* Work-group shared memory (LDS on AMD), declared inside a kernel:
 *   TL_SHARED(int, s_idx, [ROWS]);              a static array (dims may be empty: a scalar)
 *   TL_SHARED_ALIGNED(16, PgShared, sm, );       the same, aligned
 *   TL_SHARED_DYNAMIC(16, uint8_t, smem);        the launch's dynamic shared memory (uint8_t *smem)
 * On a GPU these are __shared__ declarations; on the executor they name the work-group's own LDS
 * (poisoned with 0xFF bytes when the work-group starts). */
#if defined(TL_GPU_EMU)
#define TL_SHARED_ALIGNED(al, T, name, dims)                                                        \
    static const char tl_lds_key_##name = 0;                                                       \
    T(&name) dims = *reinterpret_cast<T(*) dims>(tl_emu_lds_static(&tl_lds_key_##name, sizeof(T dims), (al)))
#define TL_SHARED_DYNAMIC(al, T, name) T *const name = (T *)tl_emu_lds_dynamic(al)
#else
#define TL_SHARED_ALIGNED(al, T, name, dims) __shared__ __attribute__((aligned(al))) T name dims
#define TL_SHARED_DYNAMIC(al, T, name) extern __shared__ __attribute__((aligned(al))) T name[]
#endif
#define TL_SHARED(T, name, dims) TL_SHARED_ALIGNED(alignof(T), T, name, dims)

/* ---------------------------------------------------------------------------------------------
 * HIP names on CUDA (only those the kernels use)
 * ------------------------------------------------------------------------------------------- */
#ifdef TL_GPU_NVIDIA
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaGraph_t hipGraph_t;
typedef cudaGraphExec_t hipGraphExec_t;
typedef cudaDeviceProp hipDeviceProp_t;
typedef cudaDeviceAttr hipDeviceAttribute_t;
#define hipSuccess cudaSuccess
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipGetErrorString cudaGetErrorString
#define hipGetErrorName cudaGetErrorName
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeClockRate cudaDevAttrClockRate
#define hipDeviceAttributeMemoryClockRate cudaDevAttrMemoryClockRate
#define hipDeviceAttributeMemoryBusWidth cudaDevAttrGlobalMemoryBusWidth
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeL2CacheSize cudaDevAttrL2CacheSize
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlockOptin
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc(p, n, flags) cudaMallocHost(p, n)
#define hipHostFree cudaFreeHost
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemGetInfo cudaMemGetInfo
#define hipStreamCreate cudaStreamCreate
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamCaptureModeGlobal cudaStreamCaptureModeGlobal
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphDestroy cudaGraphDestroy
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipFuncSetAttribute(f, attr, v) cudaFuncSetAttribute(f, attr, v)
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipFuncAttributePreferredSharedMemoryCarveout cudaFuncAttributePreferredSharedMemoryCarveout
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
/* hipLaunchKernelGGL(kernel, grid, block, shmem, stream, args...) */
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#endif

/* ---------------------------------------------------------------------------------------------
 * Device-side helpers that differ between the platforms
 * ------------------------------------------------------------------------------------------- */
#if defined(TL_GPU_AMD)
#if defined(TL_GPU_EMU)
#define TL_WAVE 64
#elif defined(__HIP_DEVICE_COMPILE__)
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define TL_WAVE __AMDGCN_WAVEFRONT_SIZE
#else
#define TL_WAVE 64
#endif
#else
#define TL_WAVE 64 /* host pass: lets device bodies parse; host code must call tl_gpu_wave_size() */
#endif
#else
#define TL_WAVE 32 /* every NVIDIA GPU: warpSize is 32 */
#endif

/* The thread's index in its block, the block's in the grid, the grid's blocks (x only), and a
 * block barrier. On AMD built with -nogpulib (the tests' clang-19 and clang-22 device builds),
 * HIP's threadIdx / blockIdx / gridDim / __syncthreads are calls into the device library, left
 * unresolved, whose frames show up as scratch; these read the hardware registers, the dispatch
 * packet (grid_size_x at byte 12, workgroup_size_x at byte 4) and the barrier instruction instead. */
#if defined(TL_GPU_AMD_DEVICE)
#define tl_thread_x() ((unsigned)__builtin_amdgcn_workitem_id_x())
#define tl_block_x() ((unsigned)__builtin_amdgcn_workgroup_id_x())
static __device__ __forceinline__ unsigned tl_grid_x(void)
{
    const char *pk = (const char *)__builtin_amdgcn_dispatch_ptr();
    return *(const unsigned *)(pk + 12) / *(const unsigned short *)(pk + 4);
}
#define tl_block_sync()                                            \
    do {                                                           \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");     \
        __builtin_amdgcn_s_barrier();                              \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");     \
    } while (0)
#else
#define tl_thread_x() ((unsigned)threadIdx.x)
#define tl_block_x() ((unsigned)blockIdx.x)
#define tl_grid_x() ((unsigned)gridDim.x)
#define tl_block_sync() __syncthreads()
#endif

/* Lane index inside the wave. Requires blockDim.x to be a multiple of TL_WAVE. */
#define tl_lane() ((int)(tl_thread_x() % TL_WAVE))
/* Wave index inside the block. */
#define tl_wave_id() ((int)(tl_thread_x() / TL_WAVE))

/* Butterfly shuffle across the whole wave: the value of lane (lane ^ mask). */
#if defined(TL_GPU_AMD)
#define tl_shfl_xor(v, mask) __shfl_xor((v), (mask))
#define tl_shfl(v, src) __shfl((v), (src))
#else
#define tl_shfl_xor(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask))
#define tl_shfl(v, src) __shfl_sync(0xffffffffu, (v), (src))
#endif

/* Math without a device library (AMD builds use -nogpulib: builtins only; NVIDIA: libdevice). */
#if defined(TL_GPU_AMD)
#define tl_expf __builtin_expf
#define tl_fabsf __builtin_fabsf
#define tl_fmaxf __builtin_fmaxf
#else
#define tl_expf expf
#define tl_fabsf fabsf
#define tl_fmaxf fmaxf
#endif

/* Wave votes. tl_ballot(p): bit l set when lane l's p holds (every lane of the wave calls it);
 * tl_popc(m): the set bits of a tl_wave_mask (TL_WAVE bits wide). */
#if defined(TL_GPU_AMD)
typedef unsigned long long tl_wave_mask;
#define tl_ballot(p) ((unsigned long long)__ballot(p))
#define tl_popc(m) __popcll(m)
#else
typedef unsigned int tl_wave_mask;
#define tl_ballot(p) __ballot_sync(0xffffffffu, (p))
#define tl_popc(m) __popc(m)
#endif

/* The second argument of __launch_bounds__: blocks per SM that NVIDIA cuts the register budget
 * for. HIP reads that argument as waves per EU, so on AMD it is 1 (no cut). */
#if defined(TL_GPU_AMD)
#define TL_LAUNCH_MIN_BLOCKS(n) 1
#else
#define TL_LAUNCH_MIN_BLOCKS(n) (n)
#endif

/* A 16-byte vector that is read once: NVIDIA loads it with the streaming hint (ld.global.cs,
 * evict first); AMD with a plain load (no hint tuned there). p must be 16-byte aligned. */
static __device__ __forceinline__ uint4 tl_load_once(const void *p)
{
#if defined(TL_GPU_AMD)
    return *(const uint4 *)p;
#else
    return __ldcs((const uint4 *)p);
#endif
}

/* A hint that the line holding p will be read soon: NVIDIA prefetches it into L2 (prefetch.global.L2,
 * no register, nothing waits on it; p must be a valid address); AMD: nothing (no prefetch used there). */
static __device__ __forceinline__ void tl_prefetch_l2(const void *p)
{
#if defined(TL_GPU_AMD)
    (void)p;
#else
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

/* A clock shared by every SM / CU, for timestamps that compare across blocks (device code).
 * NVIDIA: %globaltimer in ns (its resolution is about 1 us unless a profiler is attached); AMD:
 * s_memrealtime ticks of the constant wall clock (hipDeviceAttributeWallClockRate, 100 MHz on
 * gfx9). tl_gpu_sm_id(): the SM / CU the calling wave runs on. The host converts ticks with
 * tl_gpu_clock_per_us() (kernels/bench.h). */
#if defined(TL_GPU_AMD)
#define tl_gpu_clock() ((unsigned long long)__builtin_amdgcn_s_memrealtime())
#define tl_gpu_sm_id() ((int)__smid())
#else
static __device__ __forceinline__ unsigned long long tl_gpu_clock(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
static __device__ __forceinline__ int tl_gpu_sm_id(void)
{
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return (int)s;
}
#endif

/* Two float32 values to E4M3FN (OCP) codes in one instruction where the hardware has it:
 * tl_e4m3x2_hw(a, b) = code(a) | code(b) << 8, rounding to nearest even and saturating at +-448
 * (Inf too), NaN to 0x7F. That is numerics/codes.h's tl_code_e4m3_from_f32 for every input but
 * NaN (whose sign the software keeps): callers patch NaN themselves. TL_GPU_HAS_E4M3X2_HW is 1 on
 * NVIDIA sm_89+ (cvt.rn.satfinite.e4m3x2.f32, one F2FP); elsewhere 0 and the function is the
 * software encoder twice (gfx950's v_cvt_pk_fp8_f32 is not used: its saturation follows a mode
 * this project has not run).
 * And back: tl_e4m3x2_f16x2(h) = the f16 pair of the two E4M3FN codes in h's low 16 bits (low byte
 * first, low half first), exact: every E4M3FN value is an f16 (NaN codes give an f16 NaN). NVIDIA
 * sm_89+: one cvt.rn.f16x2.e4m3x2; elsewhere tl_e4m3_f16_bits on each byte (integer operations). */
static __host__ __device__ __forceinline__ uint32_t tl_e4m3_f16_bits(uint32_t b)
{
    const uint32_t s = (b & 0x80u) << 8, e = (b >> 3) & 15u, m = b & 7u;
    if ((b & 0x7Fu) == 0x7Fu) return s | 0x7E00u;
    if (e) return s | (e + 8u) << 10 | m << 7; /* exponent bias 7 -> 15 */
    if (!m) return s;
    const uint32_t p = m >= 4u ? 2u : m >= 2u ? 1u : 0u; /* m 2^-9 = 1.f 2^(p - 9) */
    return s | (p + 6u) << 10 | (m ^ (1u << p)) << (10u - p);
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define TL_GPU_HAS_E4M3X2_HW 1
static __device__ __forceinline__ uint32_t tl_e4m3x2_hw(float a, float b)
{
    unsigned short h;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(h) : "f"(a), "f"(b));
    return h;
}
static __device__ __forceinline__ uint32_t tl_e4m3x2_f16x2(uint32_t h)
{
    uint32_t y;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(y) : "h"((unsigned short)h));
    return y;
}
#else
#define TL_GPU_HAS_E4M3X2_HW 0
static __device__ __forceinline__ uint32_t tl_e4m3x2_hw(float a, float b)
{
    return tl_code_e4m3_from_f32(a) | tl_code_e4m3_from_f32(b) << 8;
}
static __device__ __forceinline__ uint32_t tl_e4m3x2_f16x2(uint32_t h)
{
    return tl_e4m3_f16_bits(h & 0xFFu) | tl_e4m3_f16_bits((h >> 8) & 0xFFu) << 16;
}
#endif

/* Programmatic dependent launch (NVIDIA sm_90+; no-ops elsewhere). A kernel launched with
 * tl_launch(..., dependent = true) may start before the kernel ahead of it on the stream has
 * finished, once every block of that kernel has called tl_grid_dep_launch() (or exited); it must
 * call tl_grid_dep_wait() before it reads anything that kernel writes (the wait returns when that
 * kernel has completed and its writes are visible; at once in a kernel launched normally). What
 * comes before the wait may only read what was complete before the earlier kernel started. */
static __device__ __forceinline__ void tl_grid_dep_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void tl_grid_dep_launch(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Loads and atomics that see other blocks' writes (device code, device scope). Blocks of one
 * launch that hand data to one another (kernels/topk_kernels.hip's row barrier) write, then bump
 * a counter with tl_atomic_add_release_u32 (their earlier writes, and those of their block before
 * a __syncthreads, visible first); the reader polls the counter with tl_load_acquire_u32 (or takes
 * it with tl_atomic_add_acq_rel_u32) and reads the data with the relaxed loads, which go to the
 * device-coherent level (L2), never a stale L1 line. tl_spin_pause(): a short sleep between two
 * polls. tl_cycles(): the calling CU's / SM's cycle counter (comparable within a block only).
 * tl_atomic_inc_wrap_u32(p, limit): returns *p and stores *p >= limit ? 0 : *p + 1 (CUDA's
 * atomicInc; Debian's HIP 5.2 header names an intrinsic that clang-22 no longer has). */
#if defined(TL_GPU_AMD)
static __device__ __forceinline__ uint32_t tl_load_acquire_u32(const uint32_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ uint32_t tl_load_relaxed_u32(const uint32_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ uint64_t tl_load_relaxed_u64(const uint64_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ void tl_spin_pause(void) { __builtin_amdgcn_s_sleep(1); }
static __device__ __forceinline__ uint32_t tl_atomic_add_release_u32(uint32_t *p, uint32_t v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ uint32_t tl_atomic_add_acq_rel_u32(uint32_t *p, uint32_t v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ unsigned long long tl_cycles(void) { return __builtin_readcyclecounter(); }
static __device__ __forceinline__ uint32_t tl_atomic_inc_wrap_u32(uint32_t *p, uint32_t limit)
{
    return __builtin_amdgcn_atomic_inc32(p, limit, __ATOMIC_RELAXED, "agent");
}
#else
static __device__ __forceinline__ uint32_t tl_load_acquire_u32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ uint32_t tl_load_relaxed_u32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ uint64_t tl_load_relaxed_u64(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void tl_spin_pause(void) { __nanosleep(32); }
static __device__ __forceinline__ uint32_t tl_atomic_add_release_u32(uint32_t *p, uint32_t v)
{
    uint32_t old;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
static __device__ __forceinline__ uint32_t tl_atomic_add_acq_rel_u32(uint32_t *p, uint32_t v)
{
    uint32_t old;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
static __device__ __forceinline__ unsigned long long tl_cycles(void) { return clock64(); }
static __device__ __forceinline__ uint32_t tl_atomic_inc_wrap_u32(uint32_t *p, uint32_t limit) { return atomicInc(p, limit); }
#endif

/* Sum over the wave; every lane gets the result. Cost: log2(TL_WAVE) shuffles. */
#define TL_DEFINE_WAVE_SUM(T)                                                                  \
    static __device__ __forceinline__ T tl_wave_sum_##T(T v)                                   \
    {                                                                                          \
        for (int m = TL_WAVE / 2; m > 0; m >>= 1) v += tl_shfl_xor(v, m);                      \
        return v;                                                                              \
    }
TL_DEFINE_WAVE_SUM(float)
TL_DEFINE_WAVE_SUM(double)

/* Launches kernel k (host code); dependent = a programmatic dependent launch (NVIDIA: the
 * ProgrammaticStreamSerialization attribute, kept by graph capture; AMD: an ordinary launch).
 * Returns the launch's error. */
template <typename... KArgs, typename... Args>
static inline hipError_t tl_launch(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, hipStream_t st,
                                   bool dependent, Args... args)
{
#if defined(TL_GPU_NVIDIA)
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1] = {};
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = dependent ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...);
#else
    (void)dependent;
    hipLaunchKernelGGL(k, grid, block, smem, st, ((KArgs)args)...);
    return hipPeekAtLastError(); /* left for the caller's TL_GPU_CHECK_LAUNCH too */
#endif
}

/* Asks for the largest shared-memory carveout for kernel k (host code), so that as many of its
 * work-groups as their shared memory allows fit on an SM (NVIDIA: the L1/shared split is otherwise
 * the driver's guess); a no-op on AMD (LDS is fixed). Returns the call's error. */
template <typename... KArgs>
static inline hipError_t tl_prefer_shared(void (*k)(KArgs...))
{
#if defined(TL_GPU_NVIDIA)
    return cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
#else
    (void)k;
    return hipSuccess;
#endif
}

#if defined(TL_GPU_NVIDIA)
/* ---- the copy engine (bulk and tensor copies) and its barriers (NVIDIA sm_90+) --------------
 * Declared in every NVIDIA pass, emitted only where a kernel compiled for sm_90 or later calls them
 * (kernels for older targets keep them in discarded `if constexpr` branches or behind __CUDA_ARCH__).
 * mbarrier: a 64-bit shared-memory barrier (PTX ISA, "Parallel Synchronization and Communication
 * Instructions: mbarrier"). tl_mbar_init(bar, n): a phase completes once n arrivals and every byte
 * announced by tl_mbar_expect_tx have come; tl_mbar_wait(bar, parity) returns once the phase of that
 * parity (0 for the first, 1 for the second, ...) has completed. Initialized by one thread, then
 * tl_mbar_init_fence and a block barrier before any other thread uses it.
 * tl_tma_load_2d/3d/4d: one cp.async.bulk.tensor of a box of the tensor map (host:
 * tl_tensor_map_tiled, below; wgmma.h's tl_tma_encode) at coordinates (c0 innermost) into shared memory (1024-byte aligned for the
 * 128-byte swizzle), completing the box's bytes of the barrier's transaction count (the whole box:
 * the engine fills elements outside the tensor with zeros and counts them; tl_mbar_expect_tx
 * announces them). One thread issues it. */
#define TL_ASYNC_FN static __device__ __forceinline__
/* the 32-bit shared-window address of a generic pointer into shared memory (PTX's shared operands) */
TL_ASYNC_FN uint32_t tl_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* cp.async (sm_80+): 16 (tl_cp_async16, through L2 only) or 4 (tl_cp_async4) bytes from global into
 * shared memory; bytes = 0 writes zeros and does not read the source. tl_cp_async_commit closes
 * this thread's group of copies; tl_cp_async_wait<N> returns once at most N of its groups are still
 * in flight (their data then visible to this thread; a block or warp barrier shares it). */
TL_ASYNC_FN void tl_cp_async16(void *dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(tl_smem_addr(dst)), "l"(src), "r"(bytes));
}
TL_ASYNC_FN void tl_cp_async4(void *dst, const void *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(tl_smem_addr(dst)), "l"(src), "r"(bytes));
}
TL_ASYNC_FN void tl_cp_async_commit(void) { asm volatile("cp.async.commit_group;"); }
template <int N>
TL_ASYNC_FN void tl_cp_async_wait(void) { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }
/* Orders this thread's generic-proxy writes to shared memory (stores, cp.async data it waited for)
 * before later async-proxy accesses (wgmma operands, bulk and tensor copies into the same bytes). */
TL_ASYNC_FN void tl_fence_proxy_async(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
TL_ASYNC_FN void tl_mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(tl_smem_addr(bar)), "r"(count) : "memory");
}
TL_ASYNC_FN void tl_mbar_init_fence(void) { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
TL_ASYNC_FN void tl_mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(tl_smem_addr(bar)), "r"(bytes) : "memory");
}
TL_ASYNC_FN void tl_mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(tl_smem_addr(bar)) : "memory");
}
TL_ASYNC_FN void tl_mbar_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(tl_smem_addr(bar)), "r"(parity)
                     : "memory");
    } while (!done);
}
TL_ASYNC_FN void tl_tma_load_3d(void *dst, const void *tmap, int c0, int c1, int c2, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                 ::"r"(tl_smem_addr(dst)), "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(tl_smem_addr(bar))
                 : "memory");
}
TL_ASYNC_FN void tl_tma_load_4d(void *dst, const void *tmap, int c0, int c1, int c2, int c3, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
                 ::"r"(tl_smem_addr(dst)), "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(tl_smem_addr(bar))
                 : "memory");
}
TL_ASYNC_FN void tl_tma_load_2d(void *dst, const void *tmap, int c0, int c1, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(tl_smem_addr(dst)), "l"(tmap), "r"(c0), "r"(c1), "r"(tl_smem_addr(bar))
                 : "memory");
}
#endif

/* Tensor maps (host code): the descriptor of a tiled view of a global tensor that Hopper's tensor
 * copy (cp.async.bulk.tensor, "TMA") reads one box of at a time. TL_GPU_TENSOR_MAPS is 1 in an
 * NVIDIA build that includes sm_90a (TL_HAVE_WGMMA: the kernels that use tensor maps are compiled
 * for it); it is 0 on AMD and in other NVIDIA builds, which keep their kernels' other copy paths.
 * tl_tensor_map_tiled(map, type, rank, base, dims, strides, box, swizzle): dims[rank] innermost
 * first, strides[rank - 1] in bytes of dims 1.., box[rank] elements; every element stride 1, no
 * interleave, no out-of-range fill beyond zeros. The driver's cuTensorMapEncodeTiled is found
 * through the runtime (cudaGetDriverEntryPointByVersion: no link to libcuda). Returns 0, or
 * TL_EFAIL with a one-line reason. tl_gpu_tensor_maps_usable(): the current device runs this
 * build's sm_90a code (compute capability 9.x). */
/* A tensor map's 128 opaque bytes as plain storage, in every build (host structs and kernel
 * arguments hold it where <cuda.h>'s CUtensorMap is not included): a kernel argument copied from a
 * CUtensorMap, 64-byte aligned as the copies read it in place (a __grid_constant__ parameter). */
struct alignas(64) tl_tmap {
    unsigned long long w[16];
};

#if defined(TL_GPU_NVIDIA) && defined(TL_HAVE_WGMMA)
#define TL_GPU_TENSOR_MAPS 1
#include <cuda.h>
#include <cudaTypedefs.h>
static inline int tl_tensor_map_tiled(CUtensorMap *map, CUtensorMapDataType type, unsigned rank, const void *base,
                                      const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                      CUtensorMapSwizzle swizzle)
{
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (!encode) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn) {
            (void)cudaGetLastError(); /* leave no sticky error for the next checked call */
            return tl_error(TL_EFAIL, "cuTensorMapEncodeTiled", "not found in the driver (%s)", cudaGetErrorString(e));
        }
        encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }
    const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
    const CUresult r = encode(map, type, rank, (void *)base, dims, strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return tl_error(TL_EFAIL, "cuTensorMapEncodeTiled", "error %d (rank %u)", (int)r, rank);
    return 0;
}
static inline int tl_gpu_tensor_maps_usable(void)
{
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major == 9;
}
#else
#define TL_GPU_TENSOR_MAPS 0
#endif

/* ---------------------------------------------------------------------------------------------
 * Checked calls (host code)
 * ------------------------------------------------------------------------------------------- */
/* Records "<call name>: <why> (<file>:<line>)" where <call name> is the text of the call up to
 * its first '(' ("hipMalloc"), and returns TL_EFAIL. */
static inline int tl_gpu_fail(const char *call_text, const char *why, const char *file, int line)
{
    char name[96];
    size_t n = strcspn(call_text, "( ");
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, call_text, n);
    name[n] = '\0';
    const char *base = strrchr(file, '/');
    if (base) { /* keep "kernels/x.hip" */
        const char *p = base;
        while (p > file && p[-1] != '/') p--;
        base = p;
    } else {
        base = file;
    }
    return tl_error(TL_EFAIL, name, "%s (%s:%d)", why, base, line);
}

#define TL_GPU_CHECK(call)                                                                    \
    do {                                                                                      \
        hipError_t tl_gpu_e_ = (call);                                                        \
        if (tl_gpu_e_ != hipSuccess)                                                          \
            return tl_gpu_fail(#call, hipGetErrorString(tl_gpu_e_), __FILE__, __LINE__);      \
    } while (0)

#define TL_GPU_CHECK_GOTO(call, status, label)                                                \
    do {                                                                                      \
        hipError_t tl_gpu_e_ = (call);                                                        \
        if (tl_gpu_e_ != hipSuccess) {                                                        \
            (status) = tl_gpu_fail(#call, hipGetErrorString(tl_gpu_e_), __FILE__, __LINE__);  \
            goto label;                                                                       \
        }                                                                                     \
    } while (0)

/* After every kernel launch: a bad configuration (too many threads, too much shared memory)
 * shows up here; a fault inside the kernel shows up at the next synchronizing call. */
#define TL_GPU_CHECK_LAUNCH(kernel_name)                                                      \
    do {                                                                                      \
        hipError_t tl_gpu_e_ = hipGetLastError();                                             \
        if (tl_gpu_e_ != hipSuccess)                                                          \
            return tl_gpu_fail(kernel_name, hipGetErrorString(tl_gpu_e_), __FILE__, __LINE__); \
    } while (0)

#define TL_GPU_CHECK_LAUNCH_GOTO(kernel_name, status, label)                                  \
    do {                                                                                      \
        hipError_t tl_gpu_e_ = hipGetLastError();                                             \
        if (tl_gpu_e_ != hipSuccess) {                                                        \
            (status) = tl_gpu_fail(kernel_name, hipGetErrorString(tl_gpu_e_), __FILE__,       \
                                   __LINE__);                                                 \
            goto label;                                                                       \
        }                                                                                     \
    } while (0)

#endif
