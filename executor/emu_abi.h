/* executor/emu_abi.h: the types the kernels' side (executor/hip_emu.h, built by clang++ for one AMD
 * target) and the runtime (executor/runtime.cpp, built by the host C++ compiler) both pass across
 * the executor's C interface, declared once so that their layouts and values cannot drift apart.
 * Plain C++: no target macros, no clang extensions. */
#ifndef TL_EXECUTOR_EMU_ABI_H
#define TL_EXECUTOR_EMU_ABI_H

#include <stddef.h>
#include <stdint.h>

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct tl_emu_item { /* the running work-item, as the kernel sees it */
    dim3 thread, block, block_dim, grid_dim;
    unsigned flat; /* its index in the work-group (x fastest) */
};

/* One wave operation's computation: in[l] / out[l] are lane l's buffers (in[l] == NULL for a lane
 * that has exited); returns 0, or nonzero after writing a reason to why (an error of the kernel). */
typedef int (*tl_emu_wave_fn)(const void *const *in, void *const *out, uint64_t live, uint32_t imm, char *why,
                              size_t why_n);

/* hipError_t's values that the executor returns */
typedef int hipError_t;
enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorInsufficientDriver = 35,
    hipErrorNotSupported = 801,
    hipErrorLaunchFailure = 719,
};

/* the device attributes the kernels' launchers ask for */
typedef enum {
    hipDeviceAttributeClockRate,
    hipDeviceAttributeMemoryClockRate,
    hipDeviceAttributeMemoryBusWidth,
    hipDeviceAttributeMultiprocessorCount,
    hipDeviceAttributeL2CacheSize,
    hipDeviceAttributeMaxSharedMemoryPerBlock,
    hipDeviceAttributeWallClockRate,
    hipDeviceAttributeWarpSize,
} hipDeviceAttribute_t;

/* the device properties they read */
typedef struct {
    char name[256];
    char gcnArchName[256];
    size_t totalGlobalMem, sharedMemPerBlock, maxSharedMemoryPerMultiProcessor;
    int regsPerBlock, warpSize, maxThreadsPerBlock, clockRate, memoryClockRate, memoryBusWidth;
    int multiProcessorCount, l2CacheSize, major, minor, maxThreadsPerMultiProcessor;
} hipDeviceProp_t;

#endif
