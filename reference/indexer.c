/* reference/indexer.c: the indexer's CPU reference, naive loop, inputs and tolerance
 * (reference/indexer.h). */
#include "indexer.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "../numerics/formats.h"

int tl_indexer_inputs_alloc(const tl_indexer_shape *s, tl_indexer_inputs *in)
{
    memset(in, 0, sizeof *in);
    int rc = tl_indexer_shape_check(s);
    if (rc) return rc;
    in->q = calloc((size_t)tl_indexer_q_bytes(s), 1);
    in->k = calloc((size_t)tl_indexer_k_bytes(s), 1);
    in->k_scale = calloc((size_t)s->kv, sizeof(float));
    in->w = calloc((size_t)s->rows * s->heads, sizeof(float));
    if (in->q && in->k && in->k_scale && in->w) return TL_OK;
    tl_indexer_inputs_free(in);
    return tl_error(TL_EFAIL, "indexer", "out of memory for the inputs (%.3f GB)",
                    (tl_indexer_q_bytes(s) + tl_indexer_k_bytes(s)) / 1e9);
}

void tl_indexer_inputs_free(tl_indexer_inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->k_scale);
    free(in->w);
    memset(in, 0, sizeof *in);
}

/* One vector of D values, N(0, 1) with an 8-sigma outlier in a random channel, quantized to E4M3
 * with scale amax / 448; returns the scale. */
static float quantize_vector(tl_rng *r, int d, uint8_t *codes)
{
    float x[TL_INDEXER_DIM];
    float amax = 0;
    for (int c = 0; c < d; c++) x[c] = (float)tl_rng_normal(r);
    x[tl_rng_below(r, (uint64_t)d)] = tl_rng_uniform(r) < 0.5 ? 8.0f : -8.0f;
    for (int c = 0; c < d; c++) amax = fmaxf(amax, fabsf(x[c]));
    const float scale = amax / 448.0f;
    for (int c = 0; c < d; c++) codes[c] = (uint8_t)tl_encode(TL_NF_E4M3FN, x[c] / scale, 1);
    return scale;
}

/* A row's stream: independent of the thread that draws it. */
static void row_rng(tl_rng *r, uint64_t seed, uint64_t tag, long row)
{
    tl_rng_seed(r, seed ^ (tag * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)row * 0xD1B54A32D192ED03ull));
}

int tl_indexer_inputs_make(const tl_indexer_shape *s, uint64_t seed, tl_indexer_inputs *in)
{
    int rc = tl_indexer_shape_check(s);
    if (rc) return rc;
    const int H = s->heads, D = s->dim;
    const double fold = 1.0 / sqrt((double)H * D);
#pragma omp parallel for schedule(static)
    for (long j = 0; j < s->kv; j++) {
        tl_rng r;
        row_rng(&r, seed, 1, j);
        in->k_scale[j] = quantize_vector(&r, D, in->k + (size_t)j * D);
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < s->rows; i++) {
        tl_rng r;
        row_rng(&r, seed, 2, i);
        for (int h = 0; h < H; h++) {
            float qs = quantize_vector(&r, D, in->q + ((size_t)i * H + h) * D);
            in->w[(size_t)i * H + h] = (float)(tl_rng_normal(&r) * qs * fold);
        }
    }
    return TL_OK;
}

static int e4m3_nan(uint8_t c) { return (c & 0x7F) == 0x7F; }

int tl_indexer_inputs_valid(const tl_indexer_shape *s, const tl_indexer_inputs *in, const char **what)
{
    const size_t nq = (size_t)tl_indexer_q_bytes(s), nk = (size_t)tl_indexer_k_bytes(s);
    for (size_t i = 0; i < nq; i++)
        if (e4m3_nan(in->q[i])) return *what = "q", 0;
    for (size_t i = 0; i < nk; i++)
        if (e4m3_nan(in->k[i])) return *what = "k", 0;
    for (long j = 0; j < s->kv; j++)
        if (!isfinite(in->k_scale[j])) return *what = "kscale", 0;
    for (size_t i = 0; i < (size_t)s->rows * s->heads; i++)
        if (!isfinite(in->w[i])) return *what = "w", 0;
    return 1;
}

/* E4M3FN code -> value x 2^9, an integer in [-229376, 229376] (448 x 512). */
static int32_t e4m3_int(uint8_t c)
{
    const int32_t e = (c >> 3) & 15, m = c & 7;
    const int32_t mag = e ? (8 + m) << (e - 1) : m; /* normal: (1 + m/8) 2^(e-7) x 2^9 */
    return c & 0x80 ? -mag : mag;
}

static void fill_row(float *row, long kv, float v)
{
    for (long j = 0; j < kv; j++) row[j] = v;
}

/* Rows a block of the reference and KV positions a chunk: a chunk's K times the block's Q (RB x H
 * vectors) is one DGEMM of JB x D x RB H, its product JB x RB H doubles (4 MB at H = 64). */
#define REF_RB 8
#define REF_JB 1024

/* E4M3 codes -> their integers (e4m3_int) as doubles, n of them. */
static void e4m3_ints(const uint8_t *c, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++) out[i] = (double)e4m3_int(c[i]);
}

/* One block of rows [i0, i1) against KV chunk [j0, j1): the dots of every (row, head, position) by
 * DGEMM (exact: each product of two integers below 2^18 is below 2^36, a sum of D <= 128 of them
 * below 2^43, so every partial sum is an integer a double holds exactly, in any order), then each
 * row's logits in the window over the chunk, the head sum in head order. */
static void reference_block(const tl_indexer_shape *s, const tl_indexer_inputs *in, long i0, long i1, long j0, long j1,
                            const double *qd, double *kd, double *dots, float *logits)
{
    const int H = s->heads, D = s->dim;
    const long nj = j1 - j0;
    e4m3_ints(in->k + (size_t)j0 * D, (size_t)nj * D, kd);
    const int rh = (int)((i1 - i0) * H); /* dots[j - j0][(i - i0) H + h]: a position's heads contiguous */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nj, rh, D, 1.0, kd, D, qd, D, 0.0, dots, rh);
    const double unit = 0x1p-18; /* a product of two integers above is value x 2^18 */
    for (long i = i0; i < i1; i++) {
        long a, e;
        tl_indexer_window(s, i, &a, &e);
        const long lo = a > j0 ? a : j0, hi = e < j1 ? e : j1;
        const float *w = in->w + (size_t)i * H;
        float *row = logits + (size_t)i * s->kv;
        for (long j = lo; j < hi; j++) {
            const double ks = in->k_scale[j], *dj = dots + (size_t)(j - j0) * rh + (size_t)(i - i0) * H;
            double sum = 0;
            for (int h = 0; h < H; h++) {
                const double v = dj[h] * unit * ks;
                if (v > 0) sum += (double)w[h] * v;
            }
            row[j] = (float)sum;
        }
    }
}

int tl_indexer_reference(const tl_indexer_shape *s, const tl_indexer_inputs *in, float *logits)
{
    int rc = tl_indexer_shape_check(s);
    if (rc) return rc;
    const int H = s->heads, D = s->dim;
    const long blocks = (s->rows + REF_RB - 1) / REF_RB;
    const int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1); /* parallel over row blocks instead */
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        double *qd = malloc((size_t)REF_RB * H * D * sizeof(double));
        double *kd = malloc((size_t)REF_JB * D * sizeof(double));
        double *dots = malloc((size_t)REF_RB * H * REF_JB * sizeof(double));
        fail = !qd || !kd || !dots;
#pragma omp for schedule(dynamic, 1)
        for (long bl = 0; bl < blocks; bl++) {
            if (fail) continue;
            const long i0 = bl * REF_RB, i1 = i0 + REF_RB < s->rows ? i0 + REF_RB : s->rows;
            long ua = s->kv, ue = 0; /* the block's union window */
            for (long i = i0; i < i1; i++) {
                long a, e;
                fill_row(logits + (size_t)i * s->kv, s->kv, -INFINITY);
                tl_indexer_window(s, i, &a, &e);
                if (a < e) ua = a < ua ? a : ua, ue = e > ue ? e : ue;
            }
            e4m3_ints(in->q + (size_t)i0 * H * D, (size_t)(i1 - i0) * H * D, qd);
            for (long j0 = ua; j0 < ue; j0 += REF_JB)
                reference_block(s, in, i0, i1, j0, j0 + REF_JB < ue ? j0 + REF_JB : ue, qd, kd, dots, logits);
        }
        free(qd);
        free(kd);
        free(dots);
    }
    openblas_set_num_threads(blas_threads);
    return fail ? tl_error(TL_EFAIL, "indexer reference", "out of memory") : TL_OK;
}

int tl_indexer_naive(const tl_indexer_shape *s, const tl_indexer_inputs *in, float *logits)
{
    int rc = tl_indexer_shape_check(s);
    if (rc) return rc;
    const int H = s->heads, D = s->dim;
    for (long i = 0; i < s->rows; i++) {
        long a, e;
        tl_indexer_window(s, i, &a, &e);
        for (long j = 0; j < s->kv; j++) {
            if (j < a || j >= e) {
                logits[(size_t)i * s->kv + j] = -INFINITY;
                continue;
            }
            double logit = 0;
            for (int h = 0; h < H; h++) {
                double dot = 0;
                for (int c = 0; c < D; c++)
                    dot += (double)tl_decode(TL_NF_E4M3FN, in->q[((size_t)i * H + h) * D + c]) *
                           (double)tl_decode(TL_NF_E4M3FN, in->k[(size_t)j * D + c]);
                double score = dot * (double)in->k_scale[j];
                logit += (double)in->w[(size_t)i * H + h] * (score > 0 ? score : 0);
            }
            logits[(size_t)i * s->kv + j] = (float)logit;
        }
    }
    return TL_OK;
}

int tl_indexer_tolerance(const tl_indexer_shape *s, int acc_bits, tl_tolerance *t)
{
    if (acc_bits < 8 || acc_bits > 52)
        return tl_error(TL_EUSAGE, "indexer tolerance", "accumulator of %d mantissa bits outside [8, 52]", acc_bits);
    const double u = 0x1p-24, ulp = ldexp(1.0, -acc_bits);
    const double e2 = (double)s->dim * ulp * ulp / 6.0 /* the dot's truncating accumulator */
                      + 2.0 * u * u / 3.0              /* x k_scale, x w */
                      + (double)s->heads * u * u / 6.0 /* the head sum */
                      + 2.0 * u * u / 3.0;             /* the two float32 stores */
    memset(t, 0, sizeof *t);
    t->predicted = sqrt(e2);
    t->rel_rms = 4.0 * t->predicted;
    t->check_max_abs = 1;
    return TL_OK;
}
