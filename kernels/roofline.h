/* kernels/roofline.h: the empirical roofline's microbenchmarks (kernels/roofline.hip), as a
 * plain C API for `tilelab bench roofline`.
 *
 * Ceilings measured (each the best median over a few launch configurations, timed with
 * kernels/bench.h: 20 warm-up, 200 timed iterations, a 256 MB L2 flush between them (a read and a
 * 20 us busy-wait by default, tl_bench_default_opts):
 *   hbm_read_gbps   read-only reduction over a multi-GB buffer, 16-byte loads, several in flight
 *   hbm_copy_gbps   copy kernel, bytes read + bytes written
 *   bf16_tflops     matrix-core loop through kernels/mma.h, operands in registers
 *   fp8_tflops      the same for E4M3 (FNUZ on gfx942)
 *   fp6_tflops, fp4_tflops  gfx950 only (f8f6f4 with E2M3 / E2M1); 0 elsewhere
 *   memcpy_gbps     the runtime's device-to-device memcpy, a reference point (not a ceiling)
 * Available only in GPU builds (TILELAB_HAVE_GPU).
 */
#ifndef TL_KERNELS_ROOFLINE_H
#define TL_KERNELS_ROOFLINE_H

#include <stddef.h>

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One measured kernel configuration. */
typedef struct {
    char ceiling[32]; /* "hbm_read_gbps", "bf16_tflops", ... */
    char kernel[64];  /* the kernel's name, as profilers show it */
    char config[96];  /* launch configuration, e.g. "grid 264 x 1024, unroll 8, 4.00 GiB" */
    double median_ms;
    double flops;     /* per launch (0 for the memory kernels) */
    double bytes;     /* device-memory bytes per launch, counted by construction */
    double value;     /* GB/s (1e9 B/s) or TFLOP/s (1e12) from the median */
    int best;         /* 1 for the configuration that gives the ceiling */
} tl_roofline_point;

#define TL_ROOFLINE_MAX_POINTS 48

typedef struct {
    int warmup, iters;    /* timing (defaults 20, 200) */
    double hbm_gib;       /* read buffer size in GiB (default 8); the copy moves half each way */
    int quick;            /* 1: one configuration per ceiling (for profilers) */
} tl_roofline_opts;

typedef struct {
    tl_gpu_info gpu;
    char date[32];
    double hbm_read_gbps, hbm_copy_gbps, bf16_tflops, fp8_tflops, fp6_tflops, fp4_tflops;
    double memcpy_gbps; /* hipMemcpyAsync device to device (read + write), for comparison only */
    char mma_target[32]; /* "mma.sync m16n8k16 / m16n8k32" or the MFMA names */
    int npoints;
    tl_roofline_point points[TL_ROOFLINE_MAX_POINTS];
} tl_roofline_report;

void tl_roofline_default_opts(tl_roofline_opts *o);
/* Runs every microbenchmark on device `device` and fills *rep. Checks each kernel's result
 * (the reduction against a value known by construction, the copy by comparing a sample), so a
 * fast wrong kernel fails with TL_EFAIL instead of reporting a ceiling. Cost: a few seconds and
 * hbm_gib x 1.5 GiB of device memory. */
int tl_roofline_run(int device, const tl_roofline_opts *o, tl_roofline_report *rep);

/* The read floor of `bytes`: the median time (us) of a plain streaming read of exactly that many
 * bytes (the hbm_read kernel's first configuration: 256 threads x 8 16-byte loads in flight, one
 * block per chunk, a grid sized to the buffer) timed with opts (NULL: tl_bench_default_opts) on
 * device 0. No kernel that must read those bytes from HBM under the same method can beat it by
 * much: it includes the launch, the ramp-up and the tail that a weight stream pays too. Measured
 * on the H200 (2026-11-29, read flush): 470 MB 106.2 us, 235 MB 55.0 us, 117 MB 29.5 us (4.42,
 * 4.27, 3.98 TB/s against the 4.68 TB/s ceiling). The reduction is checked (TL_EFAIL if wrong).
 * Cost: bytes of device memory and (warmup + iters) reads. */
int tl_roofline_read_floor(double bytes, const tl_bench_opts *opts, double *us);

#ifdef __cplusplus
}
#endif

#endif
