/* reference/decode.c: decode attention's CPU reference, sharded reference, naive loop and inputs
 * (reference/decode.h). */
#include "decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "../numerics/formats.h"

static const char *const dist_names[TL_DECODE_NDISTS] = {"normal", "peaked", "outliers", "edges"};

int tl_decode_dist_parse(const char *s, tl_decode_dist *out)
{
    for (int d = 0; d < TL_DECODE_NDISTS; d++)
        if (s && strcmp(s, dist_names[d]) == 0) {
            *out = (tl_decode_dist)d;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--dist", "unknown input distribution '%s' (normal, peaked, outliers or edges)", s ? s : "");
}

const char *tl_decode_dist_name(tl_decode_dist d) { return (unsigned)d < TL_DECODE_NDISTS ? dist_names[d] : "?"; }

/* ---- buffers ---- */

int tl_decode_buffers_alloc(const tl_decode_shape *s, tl_decode_buffers *b)
{
    memset(b, 0, sizeof *b);
    int rc = tl_decode_shape_check(s);
    if (rc) return rc;
    const size_t e = (size_t)tl_decode_kv_bytes_per_elem(s), cache = tl_decode_cache_elems(s);
    const int paged = s->kind == TL_DECODE_PAGED, fp8 = s->kv == TL_DECODE_KV_FP8;
    int bad = !(b->q = calloc(tl_decode_q_elems(s), sizeof *b->q));
    bad |= !(b->k = calloc(cache, e));
    if (paged) bad |= !(b->v = calloc(cache, e));
    if (fp8) bad |= !(b->k_scale = calloc(tl_decode_scale_elems(s), sizeof(float)));
    if (fp8 && paged) bad |= !(b->v_scale = calloc(tl_decode_scale_elems(s), sizeof(float)));
    if (paged) bad |= !(b->block_table = calloc(tl_decode_table_elems(s), sizeof(int32_t)));
    if (!paged && s->topk) bad |= !(b->topk = calloc(tl_decode_topk_elems(s), sizeof(int32_t)));
    if (!bad) return TL_OK;
    tl_decode_buffers_free(b);
    return tl_error(TL_EFAIL, "decode", "out of memory for the inputs (%.3f GB of cache)",
                    (double)cache * e * (paged ? 2 : 1) / 1e9);
}

void tl_decode_buffers_free(tl_decode_buffers *b)
{
    free(b->q), free(b->k), free(b->v), free(b->k_scale), free(b->v_scale), free(b->block_table), free(b->topk);
    memset(b, 0, sizeof *b);
}

tl_decode_inputs tl_decode_buffers_view(const tl_decode_buffers *b)
{
    tl_decode_inputs in = {b->q, b->k, b->v, b->k_scale, b->v_scale, b->block_table, b->topk};
    return in;
}

/* ---- seeded inputs ---- */

/* A stream per (array, index): independent of the thread that draws it. */
static void stream_rng(tl_rng *r, uint64_t seed, uint64_t tag, uint64_t i)
{
    tl_rng_seed(r, seed ^ (tag * 0x9E3779B97F4A7C15ull) ^ (i * 0xD1B54A32D192ED03ull));
}

/* n values N(0, 1) x gain, channels c with c % 32 == outlier_ch times 20 (outlier_ch < 0: none),
 * rounded to bf16 (the cache's values before any FP8 quantization). */
static void draw_vector(tl_rng *r, float *x, int n, float gain, int outlier_ch)
{
    for (int c = 0; c < n; c++) {
        float v = (float)tl_rng_normal(r) * gain;
        if (outlier_ch >= 0 && c % 32 == outlier_ch) v *= 20.0f;
        x[c] = tl_code_bits_f32(tl_code_bf16_from_f32(v) << 16);
    }
}

/* Stores one vector of n bf16-exact values: bf16 codes, or E4M3 codes with scale amax / 448
 * (returned; 1 for bf16). */
static float store_vector(const float *x, int n, int fp8, void *dst, size_t at)
{
    if (!fp8) {
        uint16_t *d = (uint16_t *)dst + at;
        for (int c = 0; c < n; c++) d[c] = (uint16_t)tl_code_bf16_from_exact_f32(x[c]);
        return 1.0f;
    }
    float amax = 0;
    for (int c = 0; c < n; c++) amax = fmaxf(amax, fabsf(x[c]));
    const float scale = amax > 0 ? amax / 448.0f : 1.0f;
    uint8_t *d = (uint8_t *)dst + at;
    for (int c = 0; c < n; c++) d[c] = (uint8_t)tl_code_e4m3_from_f32(x[c] / scale);
    return scale;
}

static void make_q(const tl_decode_shape *s, tl_decode_dist dist, uint64_t seed, uint16_t *q)
{
    const int dim = tl_decode_qk_dim(s), H = tl_decode_heads(s);
    const float gain = dist == TL_DECODE_DIST_PEAKED ? 3.0f : 1.0f;
    const long vecs = tl_decode_rows(s) * H;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < vecs; i++) {
        tl_rng r;
        float x[TL_DECODE_MLA_QK_DIM];
        stream_rng(&r, seed, 1, (uint64_t)i);
        draw_vector(&r, x, dim, gain, -1);
        for (int c = 0; c < dim; c++) q[(size_t)i * dim + c] = (uint16_t)tl_code_bf16_from_exact_f32(x[c]);
    }
}

/* Paged: K and V of every (page, slot, KV head); the table deals a shuffled list of pages. */
static void make_paged_cache(const tl_decode_shape *s, tl_decode_dist dist, uint64_t seed, tl_decode_buffers *b)
{
    const int D = TL_DECODE_PAGED_DIM, fp8 = s->kv == TL_DECODE_KV_FP8;
    const int outlier = dist == TL_DECODE_DIST_OUTLIERS ? (int)(seed % 32) : -1;
    const long vecs = s->pages * TL_DECODE_PAGE * s->kv_heads;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < vecs; i++) {
        tl_rng r;
        float x[TL_DECODE_PAGED_DIM];
        stream_rng(&r, seed, 2, (uint64_t)i);
        draw_vector(&r, x, D, 1.0f, outlier);
        float ks = store_vector(x, D, fp8, b->k, (size_t)i * D);
        draw_vector(&r, x, D, 1.0f, -1);
        float vs = store_vector(x, D, fp8, b->v, (size_t)i * D);
        if (fp8) b->k_scale[i] = ks, b->v_scale[i] = vs;
    }
    tl_rng r;
    stream_rng(&r, seed, 3, 0);
    int32_t *perm = malloc((size_t)s->pages * sizeof *perm);
    for (long p = 0; perm && p < s->pages; p++) perm[p] = (int32_t)p;
    for (long p = s->pages - 1; perm && p > 0; p--) {
        long j = (long)tl_rng_below(&r, (uint64_t)p + 1);
        int32_t t = perm[p];
        perm[p] = perm[j], perm[j] = t;
    }
    long next = 0;
    for (int bq = 0; bq < s->batch; bq++)
        for (int i = 0; i < s->max_blocks; i++) {
            const int used = i < (s->lens[bq] + TL_DECODE_PAGE - 1) / TL_DECODE_PAGE;
            int32_t page = -1;
            if (used) page = perm ? perm[next++ % s->pages] : (int32_t)(next++ % s->pages);
            b->block_table[(size_t)bq * s->max_blocks + i] = page;
        }
    free(perm);
}

static void make_latent(const tl_decode_shape *s, tl_decode_dist dist, uint64_t seed, tl_decode_buffers *b)
{
    const int D = TL_DECODE_MLA_QK_DIM, fp8 = s->kv == TL_DECODE_KV_FP8;
    const int outlier = dist == TL_DECODE_DIST_OUTLIERS ? (int)(seed % 32) : -1;
    const long vecs = (long)s->batch * s->max_len;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < vecs; i++) {
        tl_rng r;
        float x[TL_DECODE_MLA_QK_DIM];
        stream_rng(&r, seed, 4, (uint64_t)i);
        draw_vector(&r, x, D, 1.0f, outlier);
        float ks = store_vector(x, D, fp8, b->k, (size_t)i * D);
        if (fp8) b->k_scale[i] = ks;
    }
}

static int cmp_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* k distinct positions of [0, visible) in random order (visible > k). */
static void distinct_positions(tl_rng *r, long visible, int k, int32_t *out)
{
    int have = 0;
    while (have < k) {
        for (int i = have; i < k; i++) out[i] = (int32_t)tl_rng_below(r, (uint64_t)visible);
        qsort(out, (size_t)k, sizeof *out, cmp_i32);
        have = 0;
        for (int i = 0; i < k; i++)
            if (i == 0 || out[i] != out[i - 1]) out[have++] = out[i];
    }
    for (int i = k - 1; i > 0; i--) {
        int j = (int)tl_rng_below(r, (uint64_t)i + 1);
        int32_t t = out[i];
        out[i] = out[j], out[j] = t;
    }
}

/* One list of the normal rule: k distinct visible positions, or all of them shuffled then -1. */
static void list_normal(tl_rng *r, long visible, int k, int32_t *list)
{
    if (visible > k) {
        distinct_positions(r, visible, k, list);
        return;
    }
    for (int i = 0; i < k; i++) list[i] = i < visible ? i : -1;
    for (long i = visible - 1; i > 0; i--) {
        long j = (long)tl_rng_below(r, (uint64_t)i + 1);
        int32_t t = list[i];
        list[i] = list[j], list[j] = t;
    }
}

/* One list of edge cases: -1, positions of the window, repeats of earlier entries, any visible one. */
static void list_edges(tl_rng *r, long visible, long window, int k, int32_t *list)
{
    long lo, hi;
    tl_decode_window(visible, window, &lo, &hi);
    for (int i = 0; i < k; i++) {
        const double u = tl_rng_uniform(r);
        int32_t p = -1;
        if (visible > 0 && u >= 0.2) {
            if (u < 0.4 && hi > lo) p = (int32_t)(lo + (long)tl_rng_below(r, (uint64_t)(hi - lo)));
            else if (u < 0.6 && i > 0) p = list[tl_rng_below(r, (uint64_t)i)];
            else p = (int32_t)tl_rng_below(r, (uint64_t)visible);
        }
        list[i] = p;
    }
}

void tl_decode_make_topk(const tl_decode_shape *s, tl_decode_dist dist, uint64_t seed, int32_t *topk)
{
#pragma omp parallel for schedule(dynamic, 4)
    for (long row = 0; row < tl_decode_rows(s); row++) {
        tl_rng r;
        stream_rng(&r, seed, 5, (uint64_t)row);
        const long visible = tl_decode_visible(s->lens[row / s->mtp], s->mtp, (int)(row % s->mtp));
        int32_t *list = topk + (size_t)row * s->topk;
        if (dist == TL_DECODE_DIST_EDGES) list_edges(&r, visible, s->window, s->topk, list);
        else list_normal(&r, visible, s->topk, list);
    }
}

int tl_decode_make(const tl_decode_shape *s, tl_decode_dist dist, uint64_t seed, tl_decode_buffers *b)
{
    int rc = tl_decode_shape_check(s);
    if (rc) return rc;
    if ((unsigned)dist >= TL_DECODE_NDISTS) return tl_error(TL_EUSAGE, "decode", "unknown input distribution");
    make_q(s, dist, seed, b->q);
    if (s->kind == TL_DECODE_PAGED) {
        make_paged_cache(s, dist, seed, b);
        return TL_OK;
    }
    make_latent(s, dist, seed, b);
    if (s->topk) tl_decode_make_topk(s, dist, seed, b->topk);
    return TL_OK;
}

/* ---- decoding a cache element ---- */

typedef struct {
    int fp8;
    const uint16_t *bf16;
    const uint8_t *e4m3;
    float table[256]; /* E4M3FN code -> value */
} cache_reader;

static void reader_init(cache_reader *c, const tl_decode_shape *s, const void *data)
{
    c->fp8 = s->kv == TL_DECODE_KV_FP8;
    c->bf16 = data;
    c->e4m3 = data;
    for (int i = 0; i < 256; i++) c->table[i] = tl_code_e4m3_to_f32((uint32_t)i);
}

/* n elements from `at`, times scale, into x (double: exact). */
static void read_vector(const cache_reader *c, size_t at, int n, double scale, double *x)
{
    if (c->fp8)
        for (int i = 0; i < n; i++) x[i] = (double)c->table[c->e4m3[at + i]] * scale;
    else
        for (int i = 0; i < n; i++) x[i] = (double)tl_code_bf16_to_f32(c->bf16[at + i]);
}

/* ---- the online softmax, in double ---- */

typedef struct {
    double m, l;
    double *acc; /* [dv] */
} softmax_state;

static void state_reset(softmax_state *st, int dv)
{
    st->m = -INFINITY;
    st->l = 0;
    memset(st->acc, 0, (size_t)dv * sizeof *st->acc);
}

/* Adds key (score s, value v) to the running state. */
static void state_add(softmax_state *st, double s, const double *v, int dv)
{
    if (s > st->m) {
        const double c = exp(st->m - s); /* 0 on the first key (m = -inf) */
        st->l *= c;
        for (int d = 0; d < dv; d++) st->acc[d] *= c;
        st->m = s;
    }
    const double p = exp(s - st->m);
    st->l += p;
    for (int d = 0; d < dv; d++) st->acc[d] += p * v[d];
}

/* The state's O and LSE (O = 0, LSE = -inf when no key was added). */
static void state_finish(const softmax_state *st, int dv, float *o, float *lse)
{
    if (st->l == 0) {
        for (int d = 0; d < dv; d++) o[d] = 0.0f;
        *lse = -INFINITY;
        return;
    }
    for (int d = 0; d < dv; d++) o[d] = (float)(st->acc[d] / st->l);
    *lse = (float)(st->m + log(st->l));
}

static double dot(const double *a, const double *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Statistics gathered over the threads. */
typedef struct {
    double s2, n, lse_max;
    long max_keys;
} stats_acc;

static void stats_merge(stats_acc *into, const stats_acc *a)
{
#pragma omp critical(tl_decode_stats)
    {
        into->s2 += a->s2;
        into->n += a->n;
        if (a->lse_max > into->lse_max) into->lse_max = a->lse_max;
        if (a->max_keys > into->max_keys) into->max_keys = a->max_keys;
    }
}

static void stats_out(const stats_acc *a, tl_decode_stats *st)
{
    if (!st) return;
    st->s_rms = a->n > 0 ? sqrt(a->s2 / a->n) : 0;
    st->lse_max = a->lse_max;
    st->max_keys = a->max_keys;
}

static void note_lse(stats_acc *a, float lse)
{
    if (isfinite(lse) && fabs(lse) > a->lse_max) a->lse_max = fabs(lse);
}

/* A query head's values decoded from bf16 bits into double. */
static void read_q(const uint16_t *q, int n, double *x)
{
    for (int i = 0; i < n; i++) x[i] = (double)tl_code_bf16_to_f32(q[i]);
}

/* ---- paged ---- */

/* Where position p of request b lives in the pools: its (page x 16 + slot) x kv_heads + h. */
static size_t paged_vec(const tl_decode_shape *s, const int32_t *table, int b, long p, int h)
{
    const size_t page = (size_t)table[(size_t)b * s->max_blocks + p / TL_DECODE_PAGE];
    return (page * TL_DECODE_PAGE + (size_t)(p % TL_DECODE_PAGE)) * s->kv_heads + (size_t)h;
}

/* Scratch of one (request, KV head): the gqa heads' queries and states, one key and one value. */
typedef struct {
    double *q, *acc, *k, *v;
    softmax_state *st;
} paged_scratch;

static int paged_scratch_alloc(paged_scratch *w, int gqa)
{
    const int D = TL_DECODE_PAGED_DIM;
    w->q = malloc((size_t)gqa * D * sizeof(double));
    w->acc = malloc((size_t)gqa * D * sizeof(double));
    w->k = malloc(D * sizeof(double));
    w->v = malloc(D * sizeof(double));
    w->st = malloc((size_t)gqa * sizeof *w->st);
    if (!(w->q && w->acc && w->k && w->v && w->st)) return TL_EFAIL;
    for (int g = 0; g < gqa; g++) w->st[g].acc = w->acc + (size_t)g * D;
    return TL_OK;
}

static void paged_scratch_free(paged_scratch *w)
{
    free(w->q), free(w->acc), free(w->k), free(w->v), free(w->st);
}

/* Positions [lo, hi) of request b, KV head h, into the gqa states (already reset). */
static void paged_span(const tl_decode_shape *s, const tl_decode_inputs *in, const cache_reader *K,
                       const cache_reader *V, int b, int h, long lo, long hi, double scale, paged_scratch *w,
                       stats_acc *sa)
{
    const int D = TL_DECODE_PAGED_DIM, fp8 = s->kv == TL_DECODE_KV_FP8;
    for (long p = lo; p < hi; p++) {
        const size_t vec = paged_vec(s, in->block_table, b, p, h);
        read_vector(K, vec * D, D, fp8 ? in->k_scale[vec] : 1.0, w->k);
        read_vector(V, vec * D, D, fp8 ? in->v_scale[vec] : 1.0, w->v);
        for (int g = 0; g < s->gqa; g++) {
            const double sc = scale * dot(w->q + (size_t)g * D, w->k, D);
            sa->s2 += sc * sc, sa->n += 1;
            state_add(&w->st[g], sc, w->v, D);
        }
    }
}

/* The gqa query heads of (request b, KV head h) into w->q. */
static void paged_load_q(const tl_decode_shape *s, const tl_decode_inputs *in, int b, int h, paged_scratch *w)
{
    const int D = TL_DECODE_PAGED_DIM, H = tl_decode_heads(s);
    for (int g = 0; g < s->gqa; g++)
        read_q(in->q + ((size_t)b * H + (size_t)h * s->gqa + g) * D, D, w->q + (size_t)g * D);
}

/* shards = 0: one pass; else the contract's shards, float32 partials and merge. */
static int paged_run(const tl_decode_shape *s, const tl_decode_inputs *in, int shards, float *o, float *lse,
                     tl_decode_stats *stats)
{
    const int D = TL_DECODE_PAGED_DIM, H = tl_decode_heads(s), n_sh = shards ? shards : 1;
    const double scale = tl_decode_scale(s);
    cache_reader K, V;
    reader_init(&K, s, in->k);
    reader_init(&V, s, in->v);
    stats_acc total = {0, 0, 0, 0};
    int fail = 0;
    const long pairs = (long)s->batch * s->kv_heads;
#pragma omp parallel reduction(| : fail)
    {
        paged_scratch w;
        stats_acc sa = {0, 0, 0, 0};
        float *po = malloc((size_t)s->gqa * n_sh * D * sizeof(float)), *pl = malloc((size_t)s->gqa * n_sh * sizeof(float));
        fail = paged_scratch_alloc(&w, s->gqa) || !po || !pl;
#pragma omp for schedule(dynamic, 1)
        for (long pair = 0; pair < pairs; pair++) {
            if (fail) continue;
            const int b = (int)(pair / s->kv_heads), h = (int)(pair % s->kv_heads);
            const long len = s->lens[b];
            if (len > sa.max_keys) sa.max_keys = len;
            paged_load_q(s, in, b, h, &w);
            for (int sh = 0; sh < n_sh; sh++) {
                long lo = 0, hi = len;
                if (shards) tl_decode_shard_range(len, shards, TL_DECODE_PAGE, sh, &lo, &hi);
                for (int g = 0; g < s->gqa; g++) state_reset(&w.st[g], D);
                paged_span(s, in, &K, &V, b, h, lo, hi, scale, &w, &sa);
                for (int g = 0; g < s->gqa; g++) {
                    float *pg = po + ((size_t)g * n_sh + sh) * D, *lg = pl + (size_t)g * n_sh + sh;
                    state_finish(&w.st[g], D, pg, lg);
                    note_lse(&sa, *lg);
                }
            }
            for (int g = 0; g < s->gqa; g++) {
                const size_t head = (size_t)b * H + (size_t)h * s->gqa + g;
                tl_decode_merge(n_sh, pl + (size_t)g * n_sh, 1, po + (size_t)g * n_sh * D, D, D, o + head * D, lse + head);
            }
        }
        stats_merge(&total, &sa);
        paged_scratch_free(&w);
        free(po), free(pl);
    }
    stats_out(&total, stats);
    return fail ? tl_error(TL_EFAIL, "decode reference", "out of memory") : TL_OK;
}

/* ---- dual-scope ---- */

/* Row r's counted positions in slot order (the window's, oldest first, then the counted top-k
 * entries) into pos; their count. by_definition: tl_decode_topk_counts entry by entry (O(k^2));
 * else a sort finds the same entries (first occurrence of each position). slot_of (may be NULL):
 * each counted position's slot. Scratch: 2k int32 (the sort path). */
static long row_positions(const tl_decode_shape *s, const int32_t *list, long r, int by_definition, int32_t *pos,
                          int32_t *slot_of, int32_t *scratch)
{
    const long visible = tl_decode_visible(s->lens[r / s->mtp], s->mtp, (int)(r % s->mtp));
    long lo, hi, n = 0;
    tl_decode_window(visible, s->window, &lo, &hi);
    for (long p = lo; p < hi; p++, n++) {
        pos[n] = (int32_t)p;
        if (slot_of) slot_of[n] = (int32_t)(p - lo);
    }
    const long base = hi - lo;
    if (by_definition) {
        for (int i = 0; i < s->topk; i++)
            if (tl_decode_topk_counts(list, i, lo, visible)) {
                if (slot_of) slot_of[n] = (int32_t)(base + i);
                pos[n++] = list[i];
            }
        return n;
    }
    /* sort (position, entry) pairs; the first entry of each position outside the window counts */
    int m = 0;
    for (int i = 0; i < s->topk; i++)
        if (list[i] >= 0 && list[i] < lo) scratch[2 * m] = list[i], scratch[2 * m + 1] = i, m++;
    qsort(scratch, (size_t)m, 2 * sizeof *scratch, cmp_i32); /* by position; equal ones: any order */
    char *keep = calloc((size_t)s->topk + 1, 1);
    if (!keep) return -1;
    for (int i = 0; i < m;) {
        int first = scratch[2 * i + 1], j = i;
        for (; j < m && scratch[2 * j] == scratch[2 * i]; j++)
            if (scratch[2 * j + 1] < first) first = scratch[2 * j + 1];
        keep[first] = 1;
        i = j;
    }
    for (int i = 0; i < s->topk; i++)
        if (keep[i]) {
            if (slot_of) slot_of[n] = (int32_t)(base + i);
            pos[n++] = list[i];
        }
    free(keep);
    return n;
}

#define DS_CHUNK 64 /* positions decoded at once for all heads */

typedef struct {
    double *q;       /* [H][576] */
    double *acc;     /* [H][512] */
    double *kv;      /* [DS_CHUNK][576] */
    softmax_state *st;
    int32_t *pos, *slot, *scratch;
} ds_scratch;

static int ds_scratch_alloc(const tl_decode_shape *s, ds_scratch *w)
{
    const int H = s->heads;
    const long most = s->window + s->topk + 1;
    memset(w, 0, sizeof *w);
    w->q = malloc((size_t)H * TL_DECODE_MLA_QK_DIM * sizeof(double));
    w->acc = malloc((size_t)H * TL_DECODE_MLA_V_DIM * sizeof(double));
    w->kv = malloc((size_t)DS_CHUNK * TL_DECODE_MLA_QK_DIM * sizeof(double));
    w->st = malloc((size_t)H * sizeof *w->st);
    w->pos = malloc((size_t)most * sizeof(int32_t));
    w->slot = malloc((size_t)most * sizeof(int32_t));
    w->scratch = malloc((2 * (size_t)s->topk + 2) * sizeof(int32_t));
    if (!(w->q && w->acc && w->kv && w->st && w->pos && w->slot && w->scratch)) return TL_EFAIL;
    for (int h = 0; h < H; h++) w->st[h].acc = w->acc + (size_t)h * TL_DECODE_MLA_V_DIM;
    return TL_OK;
}

static void ds_scratch_free(ds_scratch *w)
{
    free(w->q), free(w->acc), free(w->kv), free(w->st), free(w->pos), free(w->slot), free(w->scratch);
}

/* The positions pos[0..n) of request b into every head's state (already reset). */
static void ds_span(const tl_decode_shape *s, const tl_decode_inputs *in, const cache_reader *L, int b,
                    const int32_t *pos, long n, double scale, ds_scratch *w, stats_acc *sa)
{
    const int QK = TL_DECODE_MLA_QK_DIM, DV = TL_DECODE_MLA_V_DIM, fp8 = s->kv == TL_DECODE_KV_FP8;
    for (long c0 = 0; c0 < n; c0 += DS_CHUNK) {
        const int m = n - c0 < DS_CHUNK ? (int)(n - c0) : DS_CHUNK;
        for (int j = 0; j < m; j++) {
            const size_t row = (size_t)b * s->max_len + (size_t)pos[c0 + j];
            read_vector(L, row * QK, QK, fp8 ? in->k_scale[row] : 1.0, w->kv + (size_t)j * QK);
        }
        for (int h = 0; h < s->heads; h++)
            for (int j = 0; j < m; j++) {
                const double sc = scale * dot(w->q + (size_t)h * QK, w->kv + (size_t)j * QK, QK);
                sa->s2 += sc * sc, sa->n += 1;
                state_add(&w->st[h], sc, w->kv + (size_t)j * QK, DV);
            }
    }
}

static int ds_run(const tl_decode_shape *s, const tl_decode_inputs *in, int shards, float *o, float *lse,
                  tl_decode_stats *stats)
{
    const int QK = TL_DECODE_MLA_QK_DIM, DV = TL_DECODE_MLA_V_DIM, H = s->heads, n_sh = shards ? shards : 1;
    const double scale = tl_decode_scale(s);
    cache_reader L;
    reader_init(&L, s, in->k);
    stats_acc total = {0, 0, 0, 0};
    int fail = 0;
    const long rows = tl_decode_rows(s);
#pragma omp parallel reduction(| : fail)
    {
        ds_scratch w;
        stats_acc sa = {0, 0, 0, 0};
        float *po = malloc((size_t)H * n_sh * DV * sizeof(float)), *pl = malloc((size_t)H * n_sh * sizeof(float));
        fail = ds_scratch_alloc(s, &w) || !po || !pl;
#pragma omp for schedule(dynamic, 1)
        for (long r = 0; r < rows; r++) {
            if (fail) continue;
            const int b = (int)(r / s->mtp);
            const int32_t *list = s->topk ? in->topk + (size_t)r * s->topk : NULL;
            const long n = row_positions(s, list, r, shards != 0, w.pos, w.slot, w.scratch);
            if (n < 0) {
                fail = 1;
                continue;
            }
            if (n > sa.max_keys) sa.max_keys = n;
            for (int h = 0; h < H; h++) read_q(in->q + ((size_t)r * H + h) * QK, QK, w.q + (size_t)h * QK);
            const long slots = tl_decode_row_slots(s, r);
            long first = 0; /* counted positions are in slot order: each shard takes a run of them */
            for (int sh = 0; sh < n_sh; sh++) {
                long lo = 0, hi = slots, last = first;
                if (shards) tl_decode_shard_range(slots, shards, TL_DECODE_DS_GRANULE, sh, &lo, &hi);
                while (last < n && (!shards || w.slot[last] < hi)) last++;
                for (int h = 0; h < H; h++) state_reset(&w.st[h], DV);
                ds_span(s, in, &L, b, w.pos + first, last - first, scale, &w, &sa);
                for (int h = 0; h < H; h++) {
                    float *ph = po + ((size_t)h * n_sh + sh) * DV, *lh = pl + (size_t)h * n_sh + sh;
                    state_finish(&w.st[h], DV, ph, lh);
                    note_lse(&sa, *lh);
                }
                first = last;
            }
            for (int h = 0; h < H; h++) {
                const size_t head = (size_t)r * H + h;
                tl_decode_merge(n_sh, pl + (size_t)h * n_sh, 1, po + (size_t)h * n_sh * DV, DV, DV, o + head * DV,
                                lse + head);
            }
        }
        stats_merge(&total, &sa);
        ds_scratch_free(&w);
        free(po), free(pl);
    }
    stats_out(&total, stats);
    return fail ? tl_error(TL_EFAIL, "decode reference", "out of memory") : TL_OK;
}

static int check_all(const tl_decode_shape *s, const tl_decode_inputs *in)
{
    int rc = tl_decode_shape_check(s);
    return rc ? rc : tl_decode_inputs_check(s, in);
}

int tl_decode_reference(const tl_decode_shape *s, const tl_decode_inputs *in, float *o, float *lse,
                        tl_decode_stats *stats)
{
    int rc = check_all(s, in);
    if (rc) return rc;
    return s->kind == TL_DECODE_PAGED ? paged_run(s, in, 0, o, lse, stats) : ds_run(s, in, 0, o, lse, stats);
}

int tl_decode_reference_sharded(const tl_decode_shape *s, const tl_decode_inputs *in, int shards, float *o, float *lse,
                                tl_decode_stats *stats)
{
    int rc = check_all(s, in);
    if (rc) return rc;
    if (shards < 1 || shards > TL_DECODE_MAX_SHARDS)
        return tl_error(TL_EUSAGE, "--shards", "%d shards outside [1, %d]", shards, TL_DECODE_MAX_SHARDS);
    return s->kind == TL_DECODE_PAGED ? paged_run(s, in, shards, o, lse, stats) : ds_run(s, in, shards, o, lse, stats);
}

/* ---- the naive loop ---- */

static double naive_elem(const tl_decode_shape *s, const void *data, size_t at)
{
    if (s->kv == TL_DECODE_KV_FP8) return (double)tl_decode(TL_NF_E4M3FN, ((const uint8_t *)data)[at]);
    return (double)tl_decode(TL_NF_BF16, ((const uint16_t *)data)[at]);
}

/* Softmax of a full score row (-inf where masked) against values; o[dv], *lse. */
static void naive_softmax(const double *score, long n, const double *values, int dv, float *o, float *lse)
{
    double m = -INFINITY, l = 0;
    for (long j = 0; j < n; j++)
        if (score[j] > m) m = score[j];
    for (int d = 0; d < dv; d++) o[d] = 0.0f;
    if (m == -INFINITY) {
        *lse = -INFINITY;
        return;
    }
    for (long j = 0; j < n; j++) l += exp(score[j] - m);
    for (int d = 0; d < dv; d++) {
        double acc = 0;
        for (long j = 0; j < n; j++)
            if (score[j] != -INFINITY) acc += exp(score[j] - m) * values[(size_t)j * dv + d];
        o[d] = (float)(acc / l);
    }
    *lse = (float)(m + log(l));
}

static int naive_paged(const tl_decode_shape *s, const tl_decode_inputs *in, float *o, float *lse)
{
    const int D = TL_DECODE_PAGED_DIM, H = tl_decode_heads(s), fp8 = s->kv == TL_DECODE_KV_FP8;
    const double scale = tl_decode_scale(s);
    long most = 1;
    for (int b = 0; b < s->batch; b++) most = s->lens[b] > most ? s->lens[b] : most;
    double *score = malloc((size_t)most * sizeof *score), *vals = malloc((size_t)most * D * sizeof *vals);
    if (!score || !vals) {
        free(score), free(vals);
        return tl_error(TL_EFAIL, "decode naive", "out of memory");
    }
    for (int b = 0; b < s->batch; b++)
        for (int h = 0; h < H; h++) {
            const int kvh = h / s->gqa;
            const long len = s->lens[b];
            for (long p = 0; p < len; p++) {
                const size_t page = (size_t)in->block_table[(size_t)b * s->max_blocks + p / TL_DECODE_PAGE];
                const size_t vec = (page * TL_DECODE_PAGE + (size_t)(p % TL_DECODE_PAGE)) * s->kv_heads + kvh;
                const double ks = fp8 ? in->k_scale[vec] : 1.0, vs = fp8 ? in->v_scale[vec] : 1.0;
                double d = 0;
                for (int c = 0; c < D; c++)
                    d += (double)tl_decode(TL_NF_BF16, in->q[((size_t)b * H + h) * D + c]) * naive_elem(s, in->k, vec * D + c) * ks;
                score[p] = scale * d;
                for (int c = 0; c < D; c++) vals[(size_t)p * D + c] = naive_elem(s, in->v, vec * D + c) * vs;
            }
            naive_softmax(score, len, vals, D, o + ((size_t)b * H + h) * D, lse + (size_t)b * H + h);
        }
    free(score), free(vals);
    return TL_OK;
}

/* Row r's mask over its visible positions: the window, and every listed position it sees. */
static void naive_mask(const tl_decode_shape *s, const int32_t *list, long visible, char *mask)
{
    long lo, hi;
    tl_decode_window(visible, s->window, &lo, &hi);
    for (long p = 0; p < visible; p++) mask[p] = p >= lo;
    for (int i = 0; list && i < s->topk; i++)
        if (list[i] >= 0 && list[i] < visible) mask[list[i]] = 1;
}

static int naive_dual(const tl_decode_shape *s, const tl_decode_inputs *in, float *o, float *lse)
{
    const int QK = TL_DECODE_MLA_QK_DIM, DV = TL_DECODE_MLA_V_DIM, H = s->heads, fp8 = s->kv == TL_DECODE_KV_FP8;
    const double scale = tl_decode_scale(s);
    const long most = s->max_len + 1;
    double *score = malloc((size_t)most * sizeof *score), *vals = malloc((size_t)most * DV * sizeof *vals);
    char *mask = malloc((size_t)most);
    if (!score || !vals || !mask) {
        free(score), free(vals), free(mask);
        return tl_error(TL_EFAIL, "decode naive", "out of memory");
    }
    for (long r = 0; r < tl_decode_rows(s); r++) {
        const int b = (int)(r / s->mtp);
        const long visible = tl_decode_visible(s->lens[b], s->mtp, (int)(r % s->mtp));
        naive_mask(s, s->topk ? in->topk + (size_t)r * s->topk : NULL, visible, mask);
        for (int h = 0; h < H; h++) {
            for (long p = 0; p < visible; p++) {
                score[p] = -INFINITY;
                if (!mask[p]) continue;
                const size_t row = (size_t)b * s->max_len + (size_t)p;
                const double ks = fp8 ? in->k_scale[row] : 1.0;
                double d = 0;
                for (int c = 0; c < QK; c++)
                    d += (double)tl_decode(TL_NF_BF16, in->q[((size_t)r * H + h) * QK + c]) * naive_elem(s, in->k, row * QK + c) * ks;
                score[p] = scale * d;
                for (int c = 0; c < DV; c++) vals[(size_t)p * DV + c] = naive_elem(s, in->k, row * QK + c) * ks;
            }
            naive_softmax(score, visible, vals, DV, o + ((size_t)r * H + h) * DV, lse + (size_t)r * H + h);
        }
    }
    free(score), free(vals), free(mask);
    return TL_OK;
}

int tl_decode_naive(const tl_decode_shape *s, const tl_decode_inputs *in, float *o, float *lse)
{
    int rc = check_all(s, in);
    if (rc) return rc;
    return s->kind == TL_DECODE_PAGED ? naive_paged(s, in, o, lse) : naive_dual(s, in, o, lse);
}
