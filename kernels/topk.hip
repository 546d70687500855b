/* kernels/topk.hip: the exact top-k kernel's launcher (the tl_topk_gpu_* API of kernels/topk.h,
 * exported as tl_topk_gpu_kernels): the device buffers, upload, poisoning, running, reading back
 * and timing. The kernels and the order of their launches: kernels/topk_kernels.hip; what each
 * does: kernels/topk.h. */
#include "topk_launch.h"

#include <stdlib.h>

__global__ void topk_fill_u32(uint32_t *p, size_t n, uint32_t v)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

struct tl_topk_gpu {
    tl_topk_shape s;    /* s.lens = NULL: the lengths live in lens_host */
    int32_t *lens_host; /* [B] */
    int has_list;       /* the lengths were a list: the kernel reads them (else it knows the rule) */
    unsigned long long *trace; /* while tl_topk_gpu_trace runs: the blocks' records */
    size_t score_bytes; /* B x n x bytes of a score */
    void *scores;       /* the allocation: score_bytes rounded up to 16 */
    int32_t *lens, *idx, *count;
    uint32_t *ticket;
    TopkSync *sync;
    uint32_t *hist;
    uint2 *chunk;       /* [B][TL_TOPK_MAX_SPLIT] */
    uint64_t *cand;
    uint64_t *merge;    /* the stream path's [B][split][k], allocated for the largest split run */
    size_t merge_bytes;
};

static int gpu_alloc(void **p, size_t bytes, const char *what)
{
    *p = NULL;
    hipError_t e = hipMalloc(p, bytes ? bytes : 16);
    if (e != hipSuccess) {
        *p = NULL;
        (void)hipGetLastError();
        return tl_error(TL_EFAIL, "topk gpu", "cannot allocate %.3f GB for %s: %s", bytes / 1e9, what,
                        hipGetErrorString(e));
    }
    return 0;
}
#define GALLOC(ptr, bytes, what) gpu_alloc((void **)&(ptr), (bytes), (what))

extern "C" void tl_topk_gpu_close(tl_topk_gpu *g)
{
    if (!g) return;
    void *ptrs[] = {g->scores, g->lens, g->idx, g->count, g->ticket, g->sync, g->hist, g->chunk, g->cand, g->merge};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) (void)hipFree(ptrs[i]);
    free(g->lens_host);
    free(g);
}

extern "C" int tl_topk_gpu_open(const tl_topk_shape *s, tl_topk_gpu **out)
{
    *out = NULL;
    int rc = tl_topk_shape_check(s);
    if (rc) return rc;
    tl_topk_gpu *g = (tl_topk_gpu *)calloc(1, sizeof *g);
    if (!g) return tl_error(TL_EFAIL, "topk gpu", "out of memory");
    const size_t B = (size_t)s->batch, k = (size_t)s->k;
    g->s = *s;
    g->s.lens = NULL;
    g->has_list = s->lens != NULL;
    g->lens_host = (int32_t *)malloc(B * sizeof(int32_t));
    if (!g->lens_host) {
        tl_topk_gpu_close(g);
        return tl_error(TL_EFAIL, "topk gpu", "out of memory");
    }
    for (int b = 0; b < s->batch; b++) g->lens_host[b] = (int32_t)tl_topk_row_len(s, b);
    g->score_bytes = B * (size_t)s->n * tl_topk_score_bytes(s->dtype);
    const size_t padded = (g->score_bytes + 15) & ~(size_t)15; /* the last 16-byte load stays inside */
    rc = GALLOC(g->scores, padded, "scores");
    if (!rc) rc = GALLOC(g->lens, B * sizeof(int32_t), "lengths");
    if (!rc) rc = GALLOC(g->idx, B * k * sizeof(int32_t), "indices");
    if (!rc) rc = GALLOC(g->count, B * sizeof(int32_t), "counts");
    if (!rc) rc = GALLOC(g->ticket, sizeof(uint32_t), "block ticket");
    if (!rc) rc = GALLOC(g->sync, B * sizeof(TopkSync), "row barriers");
    if (!rc) rc = GALLOC(g->hist, B * tl_topk_hist_words(s->dtype) * sizeof(uint32_t), "histograms");
    if (!rc) rc = GALLOC(g->chunk, B * TL_TOPK_MAX_SPLIT * sizeof(uint2), "chunk counts");
    if (!rc) rc = GALLOC(g->cand, B * k * sizeof(uint64_t), "candidates");
    /* the kernel leaves its state zero after every launch; it must start so */
    if (!rc) TL_GPU_CHECK_GOTO(hipMemset(g->ticket, 0, sizeof(uint32_t)), rc, fail);
    if (!rc) TL_GPU_CHECK_GOTO(hipMemset(g->sync, 0, B * sizeof(TopkSync)), rc, fail);
    if (!rc) TL_GPU_CHECK_GOTO(hipMemset(g->hist, 0, B * tl_topk_hist_words(s->dtype) * sizeof(uint32_t)), rc, fail);
    if (!rc && padded > g->score_bytes) /* the padding is read (masked) by the last vector: defined bytes */
        TL_GPU_CHECK_GOTO(hipMemset((char *)g->scores + g->score_bytes, 0, padded - g->score_bytes), rc, fail);
fail:
    if (rc) {
        tl_topk_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

extern "C" int tl_topk_gpu_upload(tl_topk_gpu *g, const void *scores)
{
    TL_GPU_CHECK(hipMemcpy(g->scores, scores, g->score_bytes, hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->lens, g->lens_host, (size_t)g->s.batch * sizeof(int32_t), hipMemcpyHostToDevice));
    return 0;
}

static int fill_u32(void *p, size_t n, uint32_t v)
{
    if (!n) return 0;
    (void)tl_launch(topk_fill_u32, (unsigned)((n + 255) / 256), 256, 0, 0, false, (uint32_t *)p, n, v);
    TL_GPU_CHECK_LAUNCH("topk_fill_u32");
    return 0;
}

extern "C" int tl_topk_gpu_poison(tl_topk_gpu *g)
{
    int rc = fill_u32(g->idx, (size_t)g->s.batch * g->s.k, 0x7FFFFFFFu);
    if (!rc) rc = fill_u32(g->count, (size_t)g->s.batch, 0x7FFFFFFFu);
    if (!rc) TL_GPU_CHECK(hipDeviceSynchronize());
    return rc;
}

/* The stream path's merge area for `split` (grown, never shrunk): B x split x k ranks. */
static int stream_merge_area(tl_topk_gpu *g, int split)
{
    const size_t bytes = split > 1 ? (size_t)g->s.batch * (size_t)split * (size_t)g->s.k * sizeof(uint64_t) : 0;
    if (bytes <= g->merge_bytes) return 0;
    if (g->merge) (void)hipFree(g->merge);
    g->merge = NULL;
    g->merge_bytes = 0;
    int rc = GALLOC(g->merge, bytes, "the stream path's merge area");
    if (!rc) g->merge_bytes = bytes;
    return rc;
}

/* A plan the kernel can run: resident, a block's chunk fits its shared memory and a row's blocks
 * fit the device at once (they wait for one another); stream, any split (its merge area is
 * allocated here). */
static int check_plan(tl_topk_gpu *g, const tl_topk_plan *plan)
{
    int resident = 0;
    const int split = plan->split;
    if (split < 1 || split > TL_TOPK_MAX_SPLIT)
        return tl_error(TL_EUSAGE, "--split", "%d outside [1, %d]", split, TL_TOPK_MAX_SPLIT);
    if (plan->path == TL_TOPK_STREAM) return stream_merge_area(g, split);
    if (plan->path != TL_TOPK_RESIDENT) return tl_error(TL_EUSAGE, "--path", "unknown path");
    int rc = tl_topk_resident_blocks(&g->s, split, &resident);
    if (rc) return rc;
    if (resident == 0)
        return tl_error(TL_EUSAGE, "--split", "%d: a block's share of a row of %ld (%zu bytes of shared memory) does not "
                        "fit this GPU's shared memory; split the rows further", split, g->s.n,
                        tl_topk_block_smem(g->s.dtype, g->s.n, split, g->s.sorted, g->s.k));
    if (split > resident)
        return tl_error(TL_EUSAGE, "--split", "%d: a row's blocks wait for one another, and this GPU holds %d of them "
                        "at once", split, resident);
    return 0;
}

static int enqueue(tl_topk_gpu *g, const tl_topk_plan *plan, hipStream_t st)
{
    TopkBuffers f;
    f.scores = g->scores;
    f.lens = g->has_list ? g->lens : NULL;
    f.idx = g->idx;
    f.count = g->count;
    f.ticket = g->ticket;
    f.sync = g->sync;
    f.hist = g->hist;
    f.chunk = g->chunk;
    f.cand = g->cand;
    f.merge = g->merge;
    f.trace = g->trace;
    return tl_topk_launch(&g->s, f, *plan, st);
}

extern "C" int tl_topk_gpu_run(tl_topk_gpu *g, const tl_topk_plan *plan)
{
    int rc = check_plan(g, plan);
    if (!rc) rc = enqueue(g, plan, 0);
    if (rc) return rc;
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

extern "C" int tl_topk_gpu_read(tl_topk_gpu *g, int32_t *idx, int32_t *count)
{
    const size_t B = (size_t)g->s.batch;
    TL_GPU_CHECK(hipMemcpy(idx, g->idx, B * g->s.k * sizeof(int32_t), hipMemcpyDeviceToHost));
    TL_GPU_CHECK(hipMemcpy(count, g->count, B * sizeof(int32_t), hipMemcpyDeviceToHost));
    return 0;
}

struct time_ctx {
    tl_topk_gpu *g;
    const tl_topk_plan *plan;
};
static int time_fn(void *ctx, void *stream)
{
    time_ctx *c = (time_ctx *)ctx;
    return enqueue(c->g, c->plan, (hipStream_t)stream);
}

extern "C" int tl_topk_gpu_time(tl_topk_gpu *g, const tl_topk_plan *plan, const tl_bench_opts *o, tl_bench_result *r)
{
    int rc = check_plan(g, plan);
    if (rc) return rc;
    time_ctx c = {g, plan};
    return tl_bench_run(o, time_fn, &c, r);
}

extern "C" int tl_topk_gpu_trace(tl_topk_gpu *g, const tl_topk_plan *plan, const tl_bench_opts *opts,
                                 tl_topk_trace_block **blocks, int *n_blocks, double *end_us)
{
    *blocks = NULL;
    *n_blocks = 0;
    *end_us = 0.0;
    if (plan->path != TL_TOPK_RESIDENT)
        return tl_error(TL_EUSAGE, "--trace", "records the resident path's blocks only (this plan streams)");
    const int split = plan->split;
    int rc = check_plan(g, plan);
    if (rc) return rc;
    const long long grid = (long long)g->s.batch * split;
    const size_t words = 2 + (size_t)TOPK_TRACE_WORDS * (size_t)grid; /* t0, t1, then the blocks' */
    const double per_us = tl_gpu_clock_per_us();
    int dev_id = 0, khz = 0;
    TL_GPU_CHECK(hipGetDevice(&dev_id));
    TL_GPU_CHECK(hipDeviceGetAttribute(&khz, hipDeviceAttributeClockRate, dev_id));
    if (per_us <= 0.0) return TL_EFAIL;
    if (khz <= 0) return tl_error(TL_EFAIL, "topk gpu", "the device does not say its clock");
    const double cycles_per_us = khz / 1e3;
    unsigned long long *dev = NULL, *host = (unsigned long long *)malloc(words * sizeof *host);
    tl_topk_trace_block *b = (tl_topk_trace_block *)calloc((size_t)grid, sizeof *b);
    time_ctx c = {g, plan};
    if (!host || !b) {
        rc = tl_error(TL_EFAIL, "topk gpu", "out of memory");
        goto done;
    }
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&dev, words * sizeof *dev), rc, done);
    TL_GPU_CHECK_GOTO(hipMemset(dev, 0, words * sizeof *dev), rc, done);
    g->trace = dev + 2;
    rc = tl_bench_run_marked(opts, time_fn, &c, dev, dev + 1);
    g->trace = NULL;
    if (rc) goto done;
    TL_GPU_CHECK_GOTO(hipMemcpy(host, dev, words * sizeof *host, hipMemcpyDeviceToHost), rc, done);
    for (long long i = 0; i < grid; i++) {
        const unsigned long long *w = host + 2 + (size_t)TOPK_TRACE_WORDS * i, *cyc = w + 2;
        tl_topk_trace_block *e = &b[i];
        e->row = (int)(i / split);
        e->chunk = (int)(i % split);
        e->sm = (int)w[1];
        const double entry = (double)(long long)(w[0] - host[0]) / per_us;
        for (int p = 0; p < TL_TOPK_TRACE_POINTS; p++)
            e->t_us[p] = entry + (double)(long long)(cyc[p] - cyc[0]) / cycles_per_us;
        e->passes = 0;
        for (int p = 0; p < TL_TOPK_PASSES_32; p++) /* a pass not made repeats the point before it */
            if (cyc[TL_TOPK_TRACE_SELECT0 + 2 * p] != cyc[TL_TOPK_TRACE_HIST0 + 2 * p - 1]) e->passes = p + 1;
    }
    *end_us = (double)(long long)(host[1] - host[0]) / per_us;
done:
    if (dev) (void)hipFree(dev);
    free(host);
    if (rc) free(b);
    else *blocks = b, *n_blocks = (int)grid;
    return rc;
}

/* the exported table: host code only (the device pass of a HIP build has no host functions) */
#if !defined(__HIP_DEVICE_COMPILE__) && !defined(__CUDA_ARCH__)
extern "C" {
static const tl_topk_gpu_api topk_gpu_api = {tl_topk_gpu_open, tl_topk_gpu_upload, tl_topk_gpu_poison,
                                             tl_topk_gpu_run,  tl_topk_gpu_read,   tl_topk_gpu_time,
                                             tl_topk_gpu_trace, tl_topk_gpu_close};
TL_GPU_EXPORT(const tl_topk_gpu_api, tl_topk_gpu) = &topk_gpu_api;
}
#endif
