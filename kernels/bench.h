/* kernels/bench.h: the device, and the seed's timing method as a reusable C API.
 *
 * Plain C header (callable from the C files of cli/); implemented in kernels/bench.hip, which exists only in
 * GPU builds (TILELAB_HAVE_GPU=1 for the cli sources). Without a GPU build, do not call these.
 *
 * Timing method (seed 000, DESIGN.md "Checking and timing"):
 *   - 20 warm-up iterations, then 200 timed ones; the figure is the median;
 *   - between iterations a 256 MB buffer is read, so no iteration finds the previous one's
 *     data in L2 (60 MB reported on the H200, 4 MB per XCD + 256 MB MALL on MI355X: 256 MB covers L2;
 *     on AMD it does not fully clear the MALL, which the result's label says nothing about);
 *     a read leaves no dirty line, so the timed work pays for its own traffic only (a written
 *     buffer, TL_BENCH_FLUSH_WRITE, leaves ~42 MB dirty on the H200 that the timed work writes
 *     back: ~9 us; the seed writes "flush" without saying which, and says its events "measure
 *     only the GEMM kernel");
 *   - then a short busy-wait on the GPU (seed: "flush L2 and run a short GPU busy-wait, so the
 *     timing events measure only the kernel"): the host has enqueued the work before the GPU
 *     reaches the start event (measured on the H200 with graph replay: no difference, the
 *     flush already covers it);
 *   - device events around each iteration (the flush and the wait are outside the events);
 *   - optional graph replay: the iteration is captured once into a graph and replayed, which
 *     removes the host launch gaps of iterations made of several small launches.
 * Every figure carries where it was measured: tl_bench_label().
 */
#ifndef TL_KERNELS_BENCH_H
#define TL_KERNELS_BENCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the device ---- */
typedef struct {
    int device;             /* ordinal */
    char name[256];         /* "NVIDIA H200", "AMD Instinct MI355X" */
    char arch[64];          /* "sm_90", or the gcnArchName ("gfx950:sramecc+:xnack-") */
    int vendor_amd;         /* 1 on AMD, 0 on NVIDIA */
    int compute_units;      /* SMs or CUs */
    int wave_size;          /* 32 or 64: the device's own value */
    int clock_mhz;          /* peak engine clock the driver reports, 0 if unknown */
    int mem_clock_mhz;      /* memory clock the driver reports, 0 if unknown */
    int mem_bus_bits;       /* memory bus width, 0 if unknown */
    size_t l2_bytes;        /* L2 size the driver reports */
    size_t mem_total_bytes; /* device memory */
    size_t mem_free_bytes;  /* free when queried */
    size_t smem_per_block;  /* largest shared memory / LDS a block may ask for */
} tl_gpu_info;

/* Number of visible GPUs; 0 (no error recorded) when the driver reports no device or there is no
 * driver; -1 with the driver's error recorded when it fails otherwise (a GPU it cannot use). */
int tl_gpu_count(void);
/* Fills *out for device `device` and makes it current. TL_EFAIL (recorded) on failure,
 * TL_EUSAGE for an ordinal out of range. Cost: a few driver queries. */
int tl_gpu_query(int device, tl_gpu_info *out);
/* The current device's wave size (32 or 64), or 0 with an error recorded. Host launch geometry
 * uses this, never the device-only TL_WAVE. */
int tl_gpu_wave_size(void);

/* ---- timing ---- */
/* One iteration's work: enqueue it on `stream` (a hipStream_t / cudaStream_t passed as void *)
 * and return 0, or a tl status after tl_error(). It must not synchronize (graph capture would
 * fail) and must leave the device ready for the next iteration. */
typedef int (*tl_bench_fn)(void *ctx, void *stream);

typedef struct {
    int warmup;         /* default 20 */
    int iters;          /* default 200; at most TL_BENCH_MAX_ITERS */
    int flush_l2;       /* default TL_BENCH_FLUSH_READ; TL_BENCH_FLUSH_WRITE; 0: no flush */
    size_t flush_bytes; /* default 256 MiB */
    int use_graph;      /* default 0: 1 = capture one iteration into a graph and replay it */
    double spin_us;     /* default 20: busy-wait after the flush, before the start event (0: none) */
} tl_bench_opts;

#define TL_BENCH_MAX_ITERS 100000
/* How the L2 is flushed between iterations: READ (the default) loads flush_bytes (a clean L2: the
 * timed kernel pays only for its own traffic); WRITE stores them (the lines it leaves dirty are
 * written back to HBM during the timed kernel: on the H200 about 42 MB, ~9 us at 4.7 TB/s). */
enum { TL_BENCH_FLUSH_WRITE = 1, TL_BENCH_FLUSH_READ = 2 };

typedef struct {
    int iters;        /* timed iterations */
    double median_ms; /* the figure to report */
    double min_ms, max_ms, mean_ms;
    double p10_ms, p90_ms; /* spread */
    int used_graph;   /* 1 if the iterations were graph replays */
} tl_bench_result;

/* Fills the defaults above. */
void tl_bench_default_opts(tl_bench_opts *o);
/* Times fn: warm-up, then iters timed iterations, each between two events, with an L2 flush
 * before each iteration when asked. Returns 0 and fills *out, or a tl status (TL_EUSAGE for
 * bad options: warmup < 0, iters < 1 or > TL_BENCH_MAX_ITERS; TL_EFAIL for a GPU error or an
 * error fn returned). Allocates and frees the flush buffer and a stream itself.
 * Cost: (warmup + iters) x (fn + flush, ~0.1 ms for 256 MB at 4 TB/s). */
int tl_bench_run(const tl_bench_opts *opts, tl_bench_fn fn, void *ctx, tl_bench_result *out);

/* Device clock ticks (tl_gpu_clock() of kernels/gpu.h) per microsecond: 1000 on NVIDIA (ns), the
 * wall clock rate on AMD; 0 with an error recorded when the device cannot say. */
double tl_gpu_clock_per_us(void);
/* One iteration as tl_bench_run times it, with the device clock read at its start and end: the
 * flush buffer of opts is allocated, fn runs once as a warm-up (opts.warmup > 0), then the flush,
 * the busy-wait of opts.spin_us, whose last tl_gpu_clock() value goes to *t0_dev (the moment the
 * work could start), fn, and a one-thread kernel that writes tl_gpu_clock() to *t1_dev (when fn's
 * work had ended, plus one launch). t0_dev, t1_dev: device memory. Synchronous; direct launches,
 * no graph. Cost: two runs of fn and two flushes. */
int tl_bench_run_marked(const tl_bench_opts *opts, tl_bench_fn fn, void *ctx, unsigned long long *t0_dev,
                        unsigned long long *t1_dev);

/* Writes "NVIDIA H200, sm_90, 132 SMs, 1980 MHz, 2026-11-29T10:02:11Z" into buf: where and
 * when a figure was measured. */
void tl_bench_label(const tl_gpu_info *g, char *buf, size_t n);
/* Today's UTC date and time as "2026-11-29T10:02:11Z". */
void tl_bench_date(char *buf, size_t n);

/* The device side that op rows (ops/, built without GPU code) call, as a table: kernels/bench.hip
 * exports it in a GPU build, kernels/absent.c defines it as NULL in a build without one. read_floor
 * is kernels/roofline.h's tl_roofline_read_floor. */
typedef struct {
    int (*count)(void);
    int (*query)(int device, tl_gpu_info *out);
    void (*default_opts)(tl_bench_opts *o);
    void (*date)(char *buf, size_t n);
    int (*read_floor)(double bytes, const tl_bench_opts *opts, double *us);
} tl_gpu_api;
/* The selected device's table (kernels/devices.c): this build's GPU (tl_gpu_native, NULL without
 * one: kernels/absent.c), or the CPU executor's for an AMD target; NULL when nothing runs it. */
extern const tl_gpu_api *const tl_gpu_native;
extern const tl_gpu_api *const *tl_gpu_selected;
#define tl_gpu_kernels (*tl_gpu_selected)

#ifdef __cplusplus
}
#endif

#endif
