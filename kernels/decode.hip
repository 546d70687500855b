/* kernels/decode.hip: the split-KV decode launcher (kernels/decode.h says what runs) and the merge
 * kernel that both kinds share. The shard kernels: kernels/decode_paged.hip (paged GQA) and
 * kernels/decode_mla.hip (dual-scope MLA).
 *
 * The merge: one group of dv / 4 threads per row-head (8 row-heads a block at dv = 128, 2 at 512),
 * each thread owns 4 consecutive dims; every thread computes the contract's (m, S) over the shards'
 * lse (tl_decode_merge_stats: shards exps, L1 broadcasts) and sums w_i o_i for its dims with 16-byte
 * loads, the partials of up to 32 shards in flight at once (8, 16 or 32 by the shard count), the
 * first of them issued before the statistics; a shard of weight 0 (empty or -inf) adds nothing (a
 * select), so no NaN can come in. It is launched as a programmatic dependent of the shard launch
 * (NVIDIA: it is scheduled while the shard grid's last wave runs and waits in
 * griddepcontrol.wait). Cost: reads the partials once (rows x H x shards x (dv + 1) x 4 bytes),
 * writes O and LSE once.
 */
#include "decode.h"

#include <stdlib.h>

#include "decode_launch.h"

#define MERGE_THREADS 256

/* The block's row-heads (thread tid serves row-head tid / (dv / 4), dims 4 (tid % (dv / 4)) ..). Every
 * partial and lse of NB shards at a time is loaded before anything waits on one, so that a merge of
 * up to NB shards costs one trip to L2 (its statistics then come from the registers). A shard of
 * weight 0 (empty or -inf) adds nothing (a select, not a product: whatever its o holds). */
template <int NB>
static __device__ __forceinline__ void dec_merge_rows(const float *op, const float *lsep, float *o, float *lse, long items,
                                                      int shards, int dv)
{
    const int tid = (int)tl_thread_x(), tpi = dv / 4;
    const long item = (long)tl_block_x() * (MERGE_THREADS / tpi) + tid / tpi;
    const int d = 4 * (tid % tpi);
    if (item >= items) return;
    const float *ls = lsep + item * shards;
    const float *ob = op + (size_t)item * shards * dv + d;
    float m = 0.0f, sum = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int i = 0; i < shards; i += NB) {
        float4 v[NB];
        float lv[NB];
#pragma unroll
        for (int k = 0; k < NB; k++)
            if (i + k < shards) v[k] = *(const float4 *)(ob + (size_t)(i + k) * dv), lv[k] = ls[i + k];
        if (i == 0 && shards <= NB) {
            /* tl_decode_merge_stats on the registers: the same operations in the same order */
            m = tl_decode_neg_inf();
#pragma unroll
            for (int k = 0; k < NB; k++)
                if (k < shards && lv[k] > m) m = lv[k];
            if (m != tl_decode_neg_inf())
#pragma unroll
                for (int k = 0; k < NB; k++)
                    if (k < shards) sum += tl_decode_expf_(lv[k] - m);
        } else if (i == 0) {
            tl_decode_merge_stats(shards, ls, 1, &m, &sum);
        }
#pragma unroll
        for (int k = 0; k < NB; k++) {
            if (i + k >= shards) continue;
            const float w = tl_decode_merge_weight(lv[k], m, sum);
            acc.x += w != 0.0f ? w * v[k].x : 0.0f;
            acc.y += w != 0.0f ? w * v[k].y : 0.0f;
            acc.z += w != 0.0f ? w * v[k].z : 0.0f;
            acc.w += w != 0.0f ? w * v[k].w : 0.0f;
        }
    }
    *(float4 *)(o + (size_t)item * dv + d) = acc;
    if (d == 0) lse[item] = tl_decode_merge_lse(m, sum);
}

template <int NB>
__global__ void __launch_bounds__(MERGE_THREADS) dec_merge_kernel(const float *op, const float *lsep, float *o,
                                                                    float *lse, long items, int shards, int dv,
                                                                    unsigned long long *trace)
{
    TL_SHARED(unsigned long long, tr, [3]); /* --trace: device clock at entry; cycles at entry, after the wait */
    if (trace && tl_thread_x() == 0) tr[0] = tl_gpu_clock(), tr[1] = tl_cycles();
    tl_grid_dep_wait();
    if (trace && tl_thread_x() == 0) tr[2] = tl_cycles();
    dec_merge_rows<NB>(op, lsep, o, lse, items, shards, dv);
    if (trace) {
        tl_block_sync(); /* every thread's rows written */
        if (tl_thread_x() == 0) {
            unsigned long long *w = trace + (size_t)tl_block_x() * DEC_TRACE_WORDS;
            w[0] = tr[0], w[1] = (unsigned long long)tl_gpu_sm_id();
            w[2 + TL_DECODE_TRACE_ENTRY] = tr[1];
            w[2 + TL_DECODE_TRACE_READY] = w[2 + TL_DECODE_TRACE_LANDED] = w[2 + TL_DECODE_TRACE_TILES] = tr[2];
            w[2 + TL_DECODE_TRACE_END] = tl_cycles();
        }
    }
}

long dec_merge_blocks(long items, int dv)
{
    const int per_block = MERGE_THREADS / (dv / 4);
    return (items + per_block - 1) / per_block;
}

int dec_merge_launch(const float *op, const float *lsep, float *o, float *lse, long items, int shards, int dv,
                     hipStream_t st, bool dependent, unsigned long long *trace)
{
    const dim3 grid((unsigned)dec_merge_blocks(items, dv)), block(MERGE_THREADS);
    /* the shards' partials in flight at once: 8, 16 or 32 (registers: 4 a shard) */
    const hipError_t e =
        shards <= 8 ? tl_launch(dec_merge_kernel<8>, grid, block, 0, st, dependent, op, lsep, o, lse, items, shards, dv, trace)
        : shards <= 16
            ? tl_launch(dec_merge_kernel<16>, grid, block, 0, st, dependent, op, lsep, o, lse, items, shards, dv, trace)
            : tl_launch(dec_merge_kernel<32>, grid, block, 0, st, dependent, op, lsep, o, lse, items, shards, dv, trace);
    if (e != hipSuccess) return tl_gpu_fail("dec_merge_kernel", hipGetErrorString(e), __FILE__, __LINE__);
    return 0;
}

/* ---- the launcher ----------------------------------------------------------------------------- */
struct tl_decode_gpu {
    tl_decode_shape s;
    int32_t *lens_host;
    uint16_t *q;
    void *k, *v;
    float *ks, *vs;
    int32_t *table, *topk, *lens;
    float *o, *lse;
    float *op, *lsep;     /* partials for up to part_shards shards */
    int part_shards;
    int wave, cus;
    size_t mla_smem;
    DecPagedMaps maps;    /* paged: the pools' tensor maps (maps.tma = 0: not used) */
    unsigned long long *trace; /* while tl_decode_gpu_trace runs: the shard groups' records, then the merge's */
};

static int gpu_alloc(void **p, size_t bytes, const char *what)
{
    *p = NULL;
    hipError_t e = hipMalloc(p, bytes ? bytes : 16);
    if (e != hipSuccess) {
        *p = NULL;
        (void)hipGetLastError();
        return tl_error(TL_EFAIL, "decode gpu", "cannot allocate %.3f GB for %s: %s", bytes / 1e9, what,
                        hipGetErrorString(e));
    }
    return 0;
}
#define GALLOC(ptr, bytes, what) gpu_alloc((void **)&(ptr), (bytes), (what))

static void free_partials(tl_decode_gpu *g)
{
    if (g->op) (void)hipFree(g->op);
    if (g->lsep) (void)hipFree(g->lsep);
    g->op = g->lsep = NULL;
    g->part_shards = 0;
}

/* Partials for `shards` (no-op when the buffers already hold that many). */
static int ensure_partials(tl_decode_gpu *g, int shards)
{
    if (shards <= 1 || shards <= g->part_shards) return 0;
    free_partials(g);
    const size_t heads = (size_t)tl_decode_rows(&g->s) * tl_decode_heads(&g->s);
    int rc = GALLOC(g->op, heads * shards * tl_decode_v_dim(&g->s) * sizeof(float), "the partial outputs");
    if (!rc) rc = GALLOC(g->lsep, heads * shards * sizeof(float), "the partial LSEs");
    if (rc) {
        free_partials(g);
        return rc;
    }
    g->part_shards = shards;
    return 0;
}

extern "C" void tl_decode_gpu_close(tl_decode_gpu *g)
{
    if (!g) return;
    void *ptrs[] = {g->q, g->k, g->v, g->ks, g->vs, g->table, g->topk, g->lens, g->o, g->lse};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) (void)hipFree(ptrs[i]);
    free_partials(g);
    free(g->lens_host);
    free(g);
}

/* The model's pick: tl_decode_auto_shards fills one wave of work-groups (the contract counts them
 * with their head blocks and the groups a CU holds, tl_decode_groups_per_cu) on the device's CUs. */
static int auto_shards(const tl_decode_gpu *g)
{
    return tl_decode_auto_shards(&g->s, g->cus > 0 ? g->cus : 1);
}

extern "C" int tl_decode_gpu_open(const tl_decode_shape *s, tl_decode_gpu **out)
{
    *out = NULL;
    int rc = tl_decode_shape_check(s);
    if (rc) return rc;
    tl_decode_gpu *g = (tl_decode_gpu *)calloc(1, sizeof *g);
    if (!g) return tl_error(TL_EFAIL, "decode gpu", "out of memory");
    g->s = *s;
    g->lens_host = (int32_t *)malloc((size_t)s->batch * sizeof(int32_t));
    if (!g->lens_host) {
        tl_decode_gpu_close(g);
        return tl_error(TL_EFAIL, "decode gpu", "out of memory");
    }
    memcpy(g->lens_host, s->lens, (size_t)s->batch * sizeof(int32_t));
    g->s.lens = g->lens_host;
    g->wave = tl_gpu_wave_size();
    int dev = 0;
    if (!g->wave || hipGetDevice(&dev) != hipSuccess ||
        hipDeviceGetAttribute(&g->cus, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess) {
        (void)hipGetLastError();
        tl_decode_gpu_close(g);
        return g->wave ? tl_error(TL_EFAIL, "decode gpu", "cannot query the device") : TL_EFAIL;
    }
    const tl_decode_shape *t = &g->s;
    const int bpe = tl_decode_kv_bytes_per_elem(t), fp8 = t->kv == TL_DECODE_KV_FP8;
    const int paged = t->kind == TL_DECODE_PAGED;
    rc = GALLOC(g->q, tl_decode_q_elems(t) * sizeof(uint16_t), "Q");
    if (!rc) rc = GALLOC(g->k, tl_decode_cache_elems(t) * bpe, paged ? "the K pool" : "the latent cache");
    if (!rc && paged) rc = GALLOC(g->v, tl_decode_cache_elems(t) * bpe, "the V pool");
    if (!rc && fp8) rc = GALLOC(g->ks, tl_decode_scale_elems(t) * sizeof(float), "the K scales");
    if (!rc && fp8 && paged) rc = GALLOC(g->vs, tl_decode_scale_elems(t) * sizeof(float), "the V scales");
    if (!rc && paged) rc = GALLOC(g->table, tl_decode_table_elems(t) * sizeof(int32_t), "the block table");
    if (!rc && !paged && t->topk > 0) rc = GALLOC(g->topk, tl_decode_topk_elems(t) * sizeof(int32_t), "the top-k lists");
    if (!rc) rc = GALLOC(g->lens, (size_t)t->batch * sizeof(int32_t), "lens");
    if (!rc) rc = GALLOC(g->o, tl_decode_o_elems(t) * sizeof(float), "O");
    if (!rc) rc = GALLOC(g->lse, tl_decode_lse_elems(t) * sizeof(float), "LSE");
    if (!rc) rc = ensure_partials(g, auto_shards(g));
    if (!rc && paged) rc = dec_paged_prepare(&g->maps, g->k, g->v, t->pages, t->kv_heads, fp8, g->wave);
    if (!rc && !paged) {
        g->mla_smem = dec_mla_smem(t->heads, t->topk, g->wave);
        size_t limit = 0;
        tl_gpu_info info;
        if (tl_gpu_query(dev, &info) == 0) limit = info.smem_per_block;
        if (limit && g->mla_smem > limit)
            rc = tl_error(TL_EUSAGE, "decode gpu", "dual-scope with k = %d needs %zu bytes of shared memory a group; the device allows %zu",
                          t->topk, g->mla_smem, limit);
        if (!rc) rc = dec_mla_prepare(t->heads, fp8, g->mla_smem);
    }
    if (rc) {
        tl_decode_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

extern "C" int tl_decode_gpu_upload(tl_decode_gpu *g, const tl_decode_inputs *in)
{
    const tl_decode_shape *t = &g->s;
    const int bpe = tl_decode_kv_bytes_per_elem(t), fp8 = t->kv == TL_DECODE_KV_FP8;
    const int paged = t->kind == TL_DECODE_PAGED;
    TL_GPU_CHECK(hipMemcpy(g->q, in->q, tl_decode_q_elems(t) * sizeof(uint16_t), hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->k, in->k, tl_decode_cache_elems(t) * bpe, hipMemcpyHostToDevice));
    if (paged) TL_GPU_CHECK(hipMemcpy(g->v, in->v, tl_decode_cache_elems(t) * bpe, hipMemcpyHostToDevice));
    if (fp8) TL_GPU_CHECK(hipMemcpy(g->ks, in->k_scale, tl_decode_scale_elems(t) * sizeof(float), hipMemcpyHostToDevice));
    if (fp8 && paged)
        TL_GPU_CHECK(hipMemcpy(g->vs, in->v_scale, tl_decode_scale_elems(t) * sizeof(float), hipMemcpyHostToDevice));
    if (paged)
        TL_GPU_CHECK(hipMemcpy(g->table, in->block_table, tl_decode_table_elems(t) * sizeof(int32_t), hipMemcpyHostToDevice));
    if (!paged && t->topk > 0)
        TL_GPU_CHECK(hipMemcpy(g->topk, in->topk, tl_decode_topk_elems(t) * sizeof(int32_t), hipMemcpyHostToDevice));
    TL_GPU_CHECK(hipMemcpy(g->lens, g->lens_host, (size_t)t->batch * sizeof(int32_t), hipMemcpyHostToDevice));
    return 0;
}

extern "C" int tl_decode_gpu_poison(tl_decode_gpu *g)
{
    const tl_decode_shape *t = &g->s;
    TL_GPU_CHECK(hipMemset(g->o, 0xFF, tl_decode_o_elems(t) * sizeof(float))); /* NaN */
    TL_GPU_CHECK(hipMemset(g->lse, 0xFF, tl_decode_lse_elems(t) * sizeof(float)));
    if (g->part_shards > 1) {
        const size_t heads = (size_t)tl_decode_rows(t) * tl_decode_heads(t);
        TL_GPU_CHECK(hipMemset(g->op, 0xFF, heads * g->part_shards * tl_decode_v_dim(t) * sizeof(float)));
        TL_GPU_CHECK(hipMemset(g->lsep, 0xFF, heads * g->part_shards * sizeof(float)));
    }
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

static int resolve_shards(const tl_decode_gpu *g, int shards, int *out)
{
    if (shards == 0) shards = auto_shards(g);
    if (shards < 1 || shards > TL_DECODE_MAX_SHARDS)
        return tl_error(TL_EUSAGE, "decode gpu", "shards = %d: want 1..%d, or 0 for the model's pick", shards,
                        TL_DECODE_MAX_SHARDS);
    *out = shards;
    return 0;
}

/* One call: the shard launch, and the merge when shards > 1 (partials already allocated). */
static int enqueue(tl_decode_gpu *g, int shards, hipStream_t st)
{
    const tl_decode_shape *t = &g->s;
    const int fp8 = t->kv == TL_DECODE_KV_FP8;
    float *o = shards > 1 ? g->op : g->o, *lse = shards > 1 ? g->lsep : g->lse;
    const float scale_log2 = tl_decode_scale(t) * 1.4426950408889634f;
    int rc;
    if (t->kind == TL_DECODE_PAGED) {
        DecPagedArgs a;
        a.q = g->q, a.k = g->k, a.v = g->v, a.ks = g->ks, a.vs = g->vs, a.table = g->table, a.lens = g->lens;
        a.o = o, a.lse = lse;
        a.kv_heads = t->kv_heads, a.gqa = t->gqa, a.max_blocks = t->max_blocks, a.shards = shards;
        a.scale_log2 = scale_log2;
        rc = dec_paged_launch(a, g->maps, fp8, tl_decode_groups(t, shards), g->wave, st);
    } else {
        DecMlaArgs a;
        a.q = g->q, a.kv = g->k, a.ks = g->ks, a.topk = g->topk, a.lens = g->lens;
        a.o = o, a.lse = lse;
        a.max_len = t->max_len, a.window = t->window;
        a.heads = t->heads, a.mtp = t->mtp, a.topk_n = t->topk, a.shards = shards, a.hblocks = tl_decode_head_blocks(t);
        a.scale_log2 = scale_log2;
        a.trace = g->trace;
        rc = dec_mla_launch(a, fp8, tl_decode_groups(t, shards), g->mla_smem, st);
    }
    if (rc || shards == 1) return rc;
    unsigned long long *mtrace = g->trace ? g->trace + (size_t)DEC_TRACE_WORDS * tl_decode_groups(t, shards) : NULL;
    return dec_merge_launch(g->op, g->lsep, g->o, g->lse, (long)tl_decode_rows(t) * tl_decode_heads(t), shards,
                            tl_decode_v_dim(t), st, true, mtrace);
}

extern "C" int tl_decode_gpu_run(tl_decode_gpu *g, int shards, int *used)
{
    int n = 0, rc = resolve_shards(g, shards, &n);
    if (!rc) rc = ensure_partials(g, n);
    if (!rc) rc = enqueue(g, n, 0);
    if (rc) return rc;
    TL_GPU_CHECK(hipDeviceSynchronize());
    if (used) *used = n;
    return 0;
}

extern "C" int tl_decode_gpu_read(tl_decode_gpu *g, float *o, float *lse)
{
    TL_GPU_CHECK(hipMemcpy(o, g->o, tl_decode_o_elems(&g->s) * sizeof(float), hipMemcpyDeviceToHost));
    TL_GPU_CHECK(hipMemcpy(lse, g->lse, tl_decode_lse_elems(&g->s) * sizeof(float), hipMemcpyDeviceToHost));
    return 0;
}

struct dec_time_ctx {
    tl_decode_gpu *g;
    int shards;
};
static int dec_time_fn(void *ctx, void *stream)
{
    dec_time_ctx *c = (dec_time_ctx *)ctx;
    return enqueue(c->g, c->shards, (hipStream_t)stream);
}

extern "C" int tl_decode_gpu_time(tl_decode_gpu *g, int shards, const tl_bench_opts *o, tl_bench_result *r)
{
    int n = 0, rc = resolve_shards(g, shards, &n);
    if (!rc) rc = ensure_partials(g, n);
    if (rc) return rc;
    dec_time_ctx c = {g, n};
    return tl_bench_run(o, dec_time_fn, &c, r);
}

extern "C" int tl_decode_gpu_trace(tl_decode_gpu *g, int shards, const tl_bench_opts *opts, tl_decode_trace_block **blocks,
                                   long *n_blocks, double *end_us)
{
    *blocks = NULL;
    *n_blocks = 0;
    *end_us = 0.0;
    const tl_decode_shape *t = &g->s;
    if (t->kind != TL_DECODE_DUAL_SCOPE) return tl_error(TL_EUSAGE, "--trace", "records the dual-scope kernel only");
    int n = 0, rc = resolve_shards(g, shards, &n);
    if (!rc) rc = ensure_partials(g, n);
    if (rc) return rc;
    const long groups = tl_decode_groups(t, n);
    const long merges = n > 1 ? dec_merge_blocks((long)tl_decode_rows(t) * tl_decode_heads(t), tl_decode_v_dim(t)) : 0;
    const long total = groups + merges;
    const size_t words = 2 + (size_t)DEC_TRACE_WORDS * (size_t)total; /* t0, t1, then the blocks' */
    const double per_us = tl_gpu_clock_per_us();
    int dev_id = 0, khz = 0;
    TL_GPU_CHECK(hipGetDevice(&dev_id));
    TL_GPU_CHECK(hipDeviceGetAttribute(&khz, hipDeviceAttributeClockRate, dev_id));
    if (per_us <= 0.0) return TL_EFAIL;
    if (khz <= 0) return tl_error(TL_EFAIL, "decode gpu", "the device does not say its clock");
    const double cycles_per_us = khz / 1e3;
    unsigned long long *dev = NULL, *host = (unsigned long long *)malloc(words * sizeof *host);
    tl_decode_trace_block *b = (tl_decode_trace_block *)calloc((size_t)total, sizeof *b);
    dec_time_ctx c = {g, n};
    if (!host || !b) {
        rc = tl_error(TL_EFAIL, "decode gpu", "out of memory");
        goto done;
    }
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&dev, words * sizeof *dev), rc, done);
    TL_GPU_CHECK_GOTO(hipMemset(dev, 0, words * sizeof *dev), rc, done);
    g->trace = dev + 2;
    rc = tl_bench_run_marked(opts, dec_time_fn, &c, dev, dev + 1);
    g->trace = NULL;
    if (rc) goto done;
    TL_GPU_CHECK_GOTO(hipMemcpy(host, dev, words * sizeof *host, hipMemcpyDeviceToHost), rc, done);
    for (long i = 0; i < total; i++) {
        const unsigned long long *w = host + 2 + (size_t)DEC_TRACE_WORDS * i, *cyc = w + 2;
        tl_decode_trace_block *e = &b[i];
        e->merge = i >= groups;
        e->block = e->merge ? i - groups : i;
        e->shard = e->merge ? -1 : (int)(i % n);
        e->hblock = e->merge ? -1 : (int)((i / n) % tl_decode_head_blocks(t));
        e->row = e->merge ? -1 : i / n / tl_decode_head_blocks(t);
        e->sm = (int)w[1];
        const double entry = (double)(long long)(w[0] - host[0]) / per_us;
        for (int p = 0; p < TL_DECODE_TRACE_POINTS; p++)
            e->t_us[p] = entry + (double)(long long)(cyc[p] - cyc[0]) / cycles_per_us;
    }
    *end_us = (double)(long long)(host[1] - host[0]) / per_us;
done:
    if (dev) (void)hipFree(dev);
    free(host);
    if (rc) free(b);
    else *blocks = b, *n_blocks = total;
    return rc;
}

/* the exported table: host code only (the device pass of a HIP build has no host functions) */
#if !defined(__HIP_DEVICE_COMPILE__) && !defined(__CUDA_ARCH__)
extern "C" {
static const tl_decode_gpu_api decode_gpu_api = {tl_decode_gpu_open, tl_decode_gpu_upload, tl_decode_gpu_poison,
                                                 tl_decode_gpu_run,  tl_decode_gpu_read,   tl_decode_gpu_time,
                                                 tl_decode_gpu_trace, tl_decode_gpu_close};
TL_GPU_EXPORT(const tl_decode_gpu_api, tl_decode_gpu) = &decode_gpu_api;
}
#endif
