/* kernels/bench.hip: the device queries and the timing harness of kernels/bench.h. */
#include "gpu.h"
#include "bench.h"
#include "roofline.h" /* tl_roofline_read_floor, in the exported table */

#include <stdlib.h>
#include <time.h>

/* ---- the device ---- */

extern "C" int tl_gpu_count(void)
{
    int n = 0;
    const hipError_t e = hipGetDeviceCount(&n);
    if (e == hipSuccess) return n;
    (void)hipGetLastError(); /* clear the sticky error */
    if (e == hipErrorNoDevice || e == hipErrorInsufficientDriver) return 0;
    (void)tl_gpu_fail("hipGetDeviceCount", hipGetErrorString(e), __FILE__, __LINE__);
    return -1;
}

static int attribute_or_zero(hipDeviceAttribute_t attr, int device)
{
    int v = 0;
    if (hipDeviceGetAttribute(&v, attr, device) != hipSuccess) {
        (void)hipGetLastError();
        return 0;
    }
    return v;
}

extern "C" int tl_gpu_query(int device, tl_gpu_info *out)
{
    int n = tl_gpu_count();
    if (n < 0) return TL_EFAIL;
    if (device < 0 || device >= n)
        return tl_error(TL_EUSAGE, "gpu", "device %d does not exist (%d visible)", device, n);
    memset(out, 0, sizeof *out);
    TL_GPU_CHECK(hipSetDevice(device));
    hipDeviceProp_t p;
    TL_GPU_CHECK(hipGetDeviceProperties(&p, device));
    out->device = device;
    snprintf(out->name, sizeof out->name, "%s", p.name);
#if defined(TL_GPU_AMD)
    out->vendor_amd = 1;
    snprintf(out->arch, sizeof out->arch, "%s", p.gcnArchName);
#else
    out->vendor_amd = 0;
    snprintf(out->arch, sizeof out->arch, "sm_%d%d", p.major, p.minor);
#endif
    out->compute_units = p.multiProcessorCount;
    out->wave_size = p.warpSize;
    /* clock rates come back in kHz */
    out->clock_mhz = attribute_or_zero(hipDeviceAttributeClockRate, device) / 1000;
    out->mem_clock_mhz = attribute_or_zero(hipDeviceAttributeMemoryClockRate, device) / 1000;
    out->mem_bus_bits = attribute_or_zero(hipDeviceAttributeMemoryBusWidth, device);
    out->l2_bytes = (size_t)p.l2CacheSize;
    out->smem_per_block = (size_t)attribute_or_zero(hipDeviceAttributeMaxSharedMemoryPerBlock, device);
    if (out->smem_per_block == 0) out->smem_per_block = p.sharedMemPerBlock;
    size_t fr = 0, tot = 0;
    TL_GPU_CHECK(hipMemGetInfo(&fr, &tot));
    out->mem_total_bytes = tot;
    out->mem_free_bytes = fr;
    return 0;
}

extern "C" int tl_gpu_wave_size(void)
{
    int dev = 0, w = 0;
    if (hipGetDevice(&dev) != hipSuccess) {
        (void)hipGetLastError();
        tl_error(TL_EFAIL, "gpu", "no current device");
        return 0;
    }
    hipDeviceProp_t p;
    if (hipGetDeviceProperties(&p, dev) != hipSuccess) {
        (void)hipGetLastError();
        tl_error(TL_EFAIL, "hipGetDeviceProperties", "failed for device %d", dev);
        return 0;
    }
    w = p.warpSize;
    return w;
}

/* ---- labels ---- */

extern "C" void tl_bench_date(char *buf, size_t n)
{
    time_t now = time(NULL);
    struct tm t;
    gmtime_r(&now, &t);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &t);
}

extern "C" void tl_bench_label(const tl_gpu_info *g, char *buf, size_t n)
{
    char date[32];
    tl_bench_date(date, sizeof date);
    snprintf(buf, n, "%s, %s, %d %s, %d MHz, %s", g->name, g->arch, g->compute_units,
             g->vendor_amd ? "CUs" : "SMs", g->clock_mhz, date);
}

/* ---- timing ---- */

extern "C" void tl_bench_default_opts(tl_bench_opts *o)
{
    o->warmup = 20;
    o->iters = 200;
    o->flush_l2 = TL_BENCH_FLUSH_READ;
    o->flush_bytes = (size_t)256 << 20;
    o->use_graph = 0;
    o->spin_us = 20.0;
}

/* Busy-waits `ticks` of the device clock (one thread); writes the clock at its end to *t_end. */
__global__ void tl_bench_spin_kernel(unsigned long long ticks, unsigned long long *t_end)
{
    const unsigned long long t0 = tl_gpu_clock();
    unsigned long long t = t0;
    while (t - t0 < ticks) t = tl_gpu_clock();
    if (t_end) *t_end = t;
}

extern "C" double tl_gpu_clock_per_us(void)
{
#if defined(TL_GPU_AMD) && defined(HIP_VERSION_MAJOR) && HIP_VERSION_MAJOR >= 6
    int dev = 0, khz = 0;
    if (hipGetDevice(&dev) != hipSuccess || hipDeviceGetAttribute(&khz, hipDeviceAttributeWallClockRate, dev) !=
                                                 hipSuccess || khz <= 0) {
        (void)tl_error(TL_EFAIL, "bench", "the device does not report its wall clock rate");
        return 0.0;
    }
    return khz / 1000.0;
#elif defined(TL_GPU_AMD)
    return 100.0; /* HIP before 6 cannot ask; s_memrealtime counts at 100 MHz on gfx9 (CDNA) */
#else
    return 1000.0; /* %globaltimer counts nanoseconds */
#endif
}

/* The flush and the busy-wait of o: known values in range (TL_EUSAGE otherwise). */
static int check_method(const tl_bench_opts *o)
{
    if (o->flush_l2 != 0 && o->flush_l2 != TL_BENCH_FLUSH_READ && o->flush_l2 != TL_BENCH_FLUSH_WRITE)
        return tl_error(TL_EUSAGE, "bench", "unknown flush mode %d", o->flush_l2);
    if (!(o->spin_us >= 0.0 && o->spin_us <= 1e6))
        return tl_error(TL_EUSAGE, "bench", "busy-wait of %g us is out of range [0, 1e6]", o->spin_us);
    return 0;
}

/* The busy-wait of spin_us (none when 0 and t_dev is NULL). */
static int enqueue_spin(double spin_us, hipStream_t stream, unsigned long long *t_dev)
{
    if (spin_us <= 0.0 && !t_dev) return 0;
    double per_us = tl_gpu_clock_per_us();
    if (per_us <= 0.0) return TL_EFAIL;
    (void)tl_launch(tl_bench_spin_kernel, 1, 1, 0, stream, false, (unsigned long long)(spin_us * per_us), t_dev);
    TL_GPU_CHECK_LAUNCH("tl_bench_spin_kernel");
    return 0;
}


/* Writes every byte of the flush buffer (a store pass evicts what L2 held before). */
__global__ void tl_bench_flush_kernel(uint4 *buf, size_t n16, unsigned salt)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride)
        buf[i] = make_uint4(salt, (unsigned)i, salt ^ 0x9e3779b9u, (unsigned)(i >> 32));
}

/* Loads every byte of the flush buffer (evicts what L2 held, leaves no dirty line). The sum is
 * stored only if it equals the salt, which keeps the loads without writing in practice. */
__global__ void tl_bench_flush_read_kernel(uint4 *buf, size_t n16, unsigned salt)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned x = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) {
        uint4 v = buf[i];
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == salt) buf[(size_t)blockIdx.x * blockDim.x + threadIdx.x].x = x;
}

/* Quantile q of sorted v[0..n) by the nearest rank. */
static double quantile(const double *v, int n, double q)
{
    int i = (int)(q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

typedef struct {
    hipStream_t stream;
    hipEvent_t ev[2];
    int have_stream, have_ev[2];
    uint4 *flush;
    size_t flush16;
    int flush_mode; /* TL_BENCH_FLUSH_WRITE or _READ */
    double spin_us;
    hipGraph_t graph;
    hipGraphExec_t exec;
    int have_graph, have_exec;
    double *times;
} bench_state;

static void bench_free(bench_state *s)
{
    if (s->have_exec) (void)hipGraphExecDestroy(s->exec);
    if (s->have_graph) (void)hipGraphDestroy(s->graph);
    for (int i = 0; i < 2; i++)
        if (s->have_ev[i]) (void)hipEventDestroy(s->ev[i]);
    if (s->flush) (void)hipFree(s->flush);
    if (s->have_stream) (void)hipStreamDestroy(s->stream);
    free(s->times);
}

/* One iteration: the work itself (a graph replay or a direct call). */
static int run_once(bench_state *s, tl_bench_fn fn, void *ctx)
{
    if (s->have_exec) {
        TL_GPU_CHECK(hipGraphLaunch(s->exec, s->stream));
        return 0;
    }
    return fn(ctx, (void *)s->stream);
}

static int enqueue_flush(uint4 *buf, size_t n16, int mode, unsigned salt, hipStream_t stream)
{
    if (!buf) return 0;
    if (mode == TL_BENCH_FLUSH_READ) {
        (void)tl_launch(tl_bench_flush_read_kernel, 1024, 256, 0, stream, false, buf, n16, salt);
        TL_GPU_CHECK_LAUNCH("tl_bench_flush_read_kernel");
    } else {
        (void)tl_launch(tl_bench_flush_kernel, 1024, 256, 0, stream, false, buf, n16, salt);
        TL_GPU_CHECK_LAUNCH("tl_bench_flush_kernel");
    }
    return 0;
}

/* The stream and the flush buffer of o (the caller frees them with bench_free). */
static int state_open(bench_state *s, const tl_bench_opts *o)
{
    TL_GPU_CHECK(hipStreamCreateWithFlags(&s->stream, hipStreamNonBlocking));
    s->have_stream = 1;
    if (o->flush_l2 && o->flush_bytes >= 16) {
        s->flush16 = o->flush_bytes / 16;
        s->flush_mode = o->flush_l2;
        TL_GPU_CHECK(hipMalloc((void **)&s->flush, s->flush16 * 16));
    }
    s->spin_us = o->spin_us;
    return 0;
}

/* What comes before each iteration: the flush, then the busy-wait. */
static int flush_l2(bench_state *s, unsigned salt)
{
    int st = enqueue_flush(s->flush, s->flush16, s->flush_mode, salt, s->stream);
    return st ? st : enqueue_spin(s->spin_us, s->stream, NULL);
}

extern "C" int tl_bench_run_marked(const tl_bench_opts *opts, tl_bench_fn fn, void *ctx, unsigned long long *t0_dev,
                                   unsigned long long *t1_dev)
{
    tl_bench_opts o;
    if (opts) o = *opts;
    else tl_bench_default_opts(&o);
    int rc = check_method(&o);
    if (rc) return rc;
    if (!fn) return tl_error(TL_EUSAGE, "bench", "no function to run");
    bench_state s;
    memset(&s, 0, sizeof s);
    /* every allocation first: a new mapping would leave the warm-up's address translations cold */
    if ((rc = state_open(&s, &o))) goto done;
    if (o.warmup > 0) {
        if ((rc = enqueue_flush(s.flush, s.flush16, s.flush_mode, 0x7ace0000u, s.stream))) goto done;
        if ((rc = fn(ctx, (void *)s.stream))) goto done;
    }
    if ((rc = enqueue_flush(s.flush, s.flush16, s.flush_mode, 0x7ace0001u, s.stream))) goto done;
    if ((rc = enqueue_spin(s.spin_us, s.stream, t0_dev))) goto done;
    if ((rc = fn(ctx, (void *)s.stream))) goto done;
    if ((rc = enqueue_spin(0.0, s.stream, t1_dev))) goto done;
    TL_GPU_CHECK_GOTO(hipStreamSynchronize(s.stream), rc, done);
done:
    if (s.have_stream) (void)hipStreamSynchronize(s.stream);
    bench_free(&s);
    return rc;
}

extern "C" int tl_bench_run(const tl_bench_opts *opts, tl_bench_fn fn, void *ctx,
                            tl_bench_result *out)
{
    tl_bench_opts o;
    if (opts) o = *opts;
    else tl_bench_default_opts(&o);
    if (o.warmup < 0 || o.warmup > TL_BENCH_MAX_ITERS)
        return tl_error(TL_EUSAGE, "bench", "warm-up count %d is out of range", o.warmup);
    if (o.iters < 1 || o.iters > TL_BENCH_MAX_ITERS)
        return tl_error(TL_EUSAGE, "bench", "iteration count %d is out of range [1, %d]", o.iters,
                        TL_BENCH_MAX_ITERS);
    int st0 = check_method(&o);
    if (st0) return st0;
    if (!fn) return tl_error(TL_EUSAGE, "bench", "no function to time");

    bench_state s;
    memset(&s, 0, sizeof s);
    int st = 0;
    memset(out, 0, sizeof *out);
    s.times = (double *)malloc(sizeof(double) * (size_t)o.iters);
    if (!s.times) return tl_error(TL_EFAIL, "bench", "out of host memory");

    if ((st = state_open(&s, &o))) goto done;
    for (int i = 0; i < 2; i++) {
        TL_GPU_CHECK_GOTO(hipEventCreate(&s.ev[i]), st, done);
        s.have_ev[i] = 1;
    }
    if (o.use_graph) {
        TL_GPU_CHECK_GOTO(hipStreamBeginCapture(s.stream, hipStreamCaptureModeThreadLocal), st, done);
        int fst = fn(ctx, (void *)s.stream);
        hipError_t e = hipStreamEndCapture(s.stream, &s.graph);
        if (fst) {
            if (e == hipSuccess) s.have_graph = 1;
            st = fst;
            goto done;
        }
        if (e != hipSuccess) {
            st = tl_gpu_fail("hipStreamEndCapture", hipGetErrorString(e), __FILE__, __LINE__);
            goto done;
        }
        s.have_graph = 1;
        TL_GPU_CHECK_GOTO(hipGraphInstantiateWithFlags(&s.exec, s.graph, 0), st, done);
        s.have_exec = 1;
    }

    for (int i = 0; i < o.warmup; i++) {
        if ((st = flush_l2(&s, (unsigned)i))) goto done;
        if ((st = run_once(&s, fn, ctx))) goto done;
    }
    TL_GPU_CHECK_GOTO(hipStreamSynchronize(s.stream), st, done);
    for (int i = 0; i < o.iters; i++) {
        if ((st = flush_l2(&s, 0x5eed0000u + (unsigned)i))) goto done;
        TL_GPU_CHECK_GOTO(hipEventRecord(s.ev[0], s.stream), st, done);
        if ((st = run_once(&s, fn, ctx))) goto done;
        TL_GPU_CHECK_GOTO(hipEventRecord(s.ev[1], s.stream), st, done);
        TL_GPU_CHECK_GOTO(hipEventSynchronize(s.ev[1]), st, done);
        float ms = 0.0f;
        TL_GPU_CHECK_GOTO(hipEventElapsedTime(&ms, s.ev[0], s.ev[1]), st, done);
        s.times[i] = ms;
    }

    {
        double sum = 0.0;
        for (int i = 0; i < o.iters; i++) sum += s.times[i];
        qsort(s.times, (size_t)o.iters, sizeof(double), tl_cmp_double);
        out->iters = o.iters;
        out->median_ms = o.iters % 2 ? s.times[o.iters / 2]
                                     : 0.5 * (s.times[o.iters / 2 - 1] + s.times[o.iters / 2]);
        out->min_ms = s.times[0];
        out->max_ms = s.times[o.iters - 1];
        out->mean_ms = sum / o.iters;
        out->p10_ms = quantile(s.times, o.iters, 0.10);
        out->p90_ms = quantile(s.times, o.iters, 0.90);
        out->used_graph = s.have_exec;
    }
done:
    if (s.have_stream) (void)hipStreamSynchronize(s.stream);
    bench_free(&s);
    return st;
}

/* the exported table: host code only (the device pass of a HIP build has no host functions) */
#if !defined(__HIP_DEVICE_COMPILE__) && !defined(__CUDA_ARCH__)
extern "C" {
static const tl_gpu_api gpu_api = {tl_gpu_count, tl_gpu_query, tl_bench_default_opts, tl_bench_date,
                                   tl_roofline_read_floor};
TL_GPU_EXPORT(const tl_gpu_api, tl_gpu) = &gpu_api;
}
#endif
