/* reference/topk.c: exact top-k on the CPU (reference/topk.h). */
#include "topk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "../numerics/formats.h"

static const char *const dist_names[TL_TOPK_NDISTS] = {"normal", "ties", "few-distinct", "nan", "inf", "sorted",
                                                       "reversed"};

int tl_topk_dist_parse(const char *s, tl_topk_dist *out)
{
    for (int d = 0; d < TL_TOPK_NDISTS; d++)
        if (s && strcmp(s, dist_names[d]) == 0) {
            *out = (tl_topk_dist)d;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--dist", "unknown distribution '%s' (normal, ties, few-distinct, nan, inf, sorted "
                    "or reversed)", s ? s : "");
}

const char *tl_topk_dist_name(tl_topk_dist d) { return d < TL_TOPK_NDISTS ? dist_names[d] : "?"; }

/* Score i of a row of n under dist, from the row's generator. */
static float draw_score(tl_topk_dist dist, tl_rng *g, long i, long n)
{
    switch (dist) {
    case TL_TOPK_DIST_TIES: return (float)((long)tl_rng_below(g, 64) - 32) * 0.25f;
    case TL_TOPK_DIST_FEW: return (float)((long)tl_rng_below(g, 3) - 1);
    case TL_TOPK_DIST_NAN: {
        uint64_t u = tl_rng_below(g, 16);
        if (u < 2) { /* NaN of either sign and a random payload */
            uint32_t bits = 0x7F800001u | (uint32_t)(tl_rng_u64(g) & 0x003FFFFFu) | (u ? 0x80000000u : 0u);
            float f;
            memcpy(&f, &bits, sizeof f);
            return f;
        }
        if (u == 2) return -0.0f;
        if (u == 3) return 0.0f;
        return (float)tl_rng_normal(g);
    }
    case TL_TOPK_DIST_INF: {
        uint64_t u = tl_rng_below(g, 16);
        return u == 0 ? INFINITY : u == 1 ? -INFINITY : (float)tl_rng_normal(g);
    }
    case TL_TOPK_DIST_SORTED: return (float)i / (float)n;
    case TL_TOPK_DIST_REVERSED: return (float)(n - i) / (float)n;
    default: return (float)tl_rng_normal(g);
    }
}

int tl_topk_scores_make(const tl_topk_shape *s, tl_topk_dist dist, uint64_t seed, void *scores)
{
    int rc = tl_topk_shape_check(s);
    if (rc) return rc;
    if (dist >= TL_TOPK_NDISTS) return tl_error(TL_EUSAGE, "--dist", "unknown distribution");
    float *tmp = NULL;
    int fail = 0;
#pragma omp parallel private(tmp) reduction(| : fail)
    {
        tmp = s->dtype == TL_TOPK_F32 ? NULL : malloc((size_t)s->n * sizeof(float));
        fail |= s->dtype != TL_TOPK_F32 && !tmp;
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < s->batch; b++) {
            if (s->dtype != TL_TOPK_F32 && !tmp) continue;
            tl_rng g;
            tl_rng_seed(&g, seed ^ (0x70b0c0ull + (uint64_t)b * 0x9E3779B97F4A7C15ull));
            float *row = s->dtype == TL_TOPK_F32 ? (float *)scores + (size_t)b * s->n : tmp;
            const long len = tl_topk_row_len(s, b);
            for (long i = 0; i < s->n; i++) row[i] = i < len ? draw_score(dist, &g, i, len) : INFINITY;
            if (s->dtype != TL_TOPK_F32)
                tl_encode_array16(s->dtype == TL_TOPK_BF16 ? TL_NF_BF16 : TL_NF_FP16, row, (size_t)s->n, 0,
                                  (uint16_t *)scores + (size_t)b * s->n);
        }
        free(tmp);
    }
    return fail ? tl_error(TL_EFAIL, "topk", "out of memory for the scores") : TL_OK;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* A rank's index (contract/topk.h's tl_topk_rank). */
static long rank_index(uint64_t r) { return (long)(0xFFFFFFFFu - (uint32_t)r); }

static int cmp_index(const void *a, const void *b)
{
    long x = rank_index(*(const uint64_t *)a), y = rank_index(*(const uint64_t *)b);
    return x < y ? -1 : x > y;
}

/* The first `count` ranks of top (the selected ones, any order) as the contract's output row. */
static void write_row(const tl_topk_shape *s, uint64_t *top, int count, int32_t *idx)
{
    qsort(top, (size_t)count, sizeof *top, s->sorted ? cmp_desc : cmp_index);
    for (int j = 0; j < count; j++) idx[j] = (int32_t)rank_index(top[j]);
    for (int j = count; j < s->k; j++) idx[j] = -1;
}

static void row_ranks(const tl_topk_shape *s, const void *scores, int b, long len, uint64_t *r)
{
    const char *row = (const char *)scores + (size_t)b * s->n * tl_topk_score_bytes(s->dtype);
    for (long i = 0; i < len; i++) r[i] = tl_topk_rank(tl_topk_key(s->dtype, row, i), i);
}

/* Moves the k highest of r[0..n) (all distinct) to r[0..k), any order: Hoare partition around the
 * median of three, on the side that holds the k-th. O(n) expected. */
static void select_top(uint64_t *r, long n, long k)
{
    long lo = 0, hi = n - 1;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        uint64_t a = r[lo], b = r[mid], c = r[hi];
        uint64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        long i = lo, j = hi;
        while (i <= j) { /* descending: >= pivot to the left */
            while (r[i] > pivot) i++;
            while (r[j] < pivot) j--;
            if (i <= j) {
                uint64_t t = r[i];
                r[i++] = r[j];
                r[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else return;
    }
}

int tl_topk_reference(const tl_topk_shape *s, const void *scores, int32_t *idx, int32_t *count)
{
    int rc = tl_topk_shape_check(s);
    if (rc) return rc;
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        uint64_t *r = malloc((size_t)s->n * sizeof *r);
        fail |= !r;
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < s->batch; b++) {
            if (!r) continue;
            const long len = tl_topk_row_len(s, b);
            const int c = len < s->k ? (int)len : s->k;
            row_ranks(s, scores, b, len, r);
            if (c < len) select_top(r, len, c);
            write_row(s, r, c, idx + (size_t)b * s->k);
            count[b] = c;
        }
        free(r);
    }
    return fail ? tl_error(TL_EFAIL, "topk", "out of memory (%ld positions a row)", s->n) : TL_OK;
}

int tl_topk_naive(const tl_topk_shape *s, const void *scores, int32_t *idx, int32_t *count)
{
    int rc = tl_topk_shape_check(s);
    if (rc) return rc;
    uint64_t *r = malloc((size_t)s->n * sizeof *r);
    if (!r) return tl_error(TL_EFAIL, "topk", "out of memory (%ld positions a row)", s->n);
    for (int b = 0; b < s->batch; b++) {
        const long len = tl_topk_row_len(s, b);
        const int c = len < s->k ? (int)len : s->k;
        row_ranks(s, scores, b, len, r);
        qsort(r, (size_t)len, sizeof *r, cmp_desc);
        write_row(s, r, c, idx + (size_t)b * s->k);
        count[b] = c;
    }
    free(r);
    return TL_OK;
}
