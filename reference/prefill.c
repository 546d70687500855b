/* reference/prefill.c: causal prefill attention on the CPU (reference/prefill.h). */
#include "prefill.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "../numerics/dist.h"
#include "../numerics/formats.h"
#include "../numerics/rotate.h"

#define ROW_BLOCK 64 /* query rows per OpenMP work item */
#define KEY_BLOCK 128 /* keys per online-softmax step (the kernel's KV tile) */

static const char *const DIST_NAMES[TL_PREFILL_NDISTS] = {"normal", "outliers", "qk-outliers"};

int tl_prefill_dist_parse(const char *s, tl_prefill_dist *out)
{
    for (int i = 0; i < TL_PREFILL_NDISTS; i++)
        if (s && strcmp(s, DIST_NAMES[i]) == 0) return *out = (tl_prefill_dist)i, TL_OK;
    return tl_error(TL_EUSAGE, "--dist", "'%s' is not normal, outliers or qk-outliers", s ? s : "(null)");
}

const char *tl_prefill_dist_name(tl_prefill_dist d) { return d < TL_PREFILL_NDISTS ? DIST_NAMES[d] : "?"; }

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Outlier channels of K: in each KV head, max(1, dqk / 32) channels times U[10, 100]; with_q: the
 * same channels of every query head reading that KV head too, each times its own U[10, 100]. */
static void add_outliers(const tl_prefill_shape *s, uint64_t seed, int with_q, float *q, float *k)
{
    uint64_t st = seed ^ 0x071E5ULL;
    const int per = s->dqk / 32 > 1 ? s->dqk / 32 : 1, group = s->heads / s->kv_heads;
    for (int g = 0; g < s->kv_heads; g++)
        for (int c = 0; c < per; c++) {
            const int ch = (int)(splitmix(&st) % (uint64_t)s->dqk);
            const float f = 10.0f + 90.0f * (float)((splitmix(&st) >> 11) * 0x1.0p-53);
            for (long t = 0; t < s->seq; t++) k[((size_t)t * s->kv_heads + g) * s->dqk + ch] *= f;
            for (int h = g * group; with_q && h < (g + 1) * group; h++) {
                const float fq = 10.0f + 90.0f * (float)((splitmix(&st) >> 11) * 0x1.0p-53);
                for (long t = 0; t < s->seq; t++) q[((size_t)t * s->heads + h) * s->dqk + ch] *= fq;
            }
        }
}

void tl_prefill_make(const tl_prefill_shape *s, tl_prefill_dist d, uint64_t seed, float *q, float *k, float *v)
{
    tl_dist_fill(TL_DIST_NORMAL, seed ^ 0x51ULL, q, tl_prefill_q_elems(s), (size_t)s->dqk);
    tl_dist_fill(TL_DIST_NORMAL, seed ^ 0x4bULL, k, tl_prefill_k_elems(s), (size_t)s->dqk);
    tl_dist_fill(TL_DIST_NORMAL, seed ^ 0x56ULL, v, tl_prefill_v_elems(s), (size_t)s->dv);
    if (d != TL_PREFILL_DIST_NORMAL) add_outliers(s, seed, d == TL_PREFILL_DIST_QK_OUTLIERS, q, k);
}

/* ---- the engine ---- */

/* Row i of head h: online softmax over key blocks of KEY_BLOCK, in double. acc [dv], sc [KEY_BLOCK]
 * are scratch. round_p: P rounded by the FP8 kernel's rule before the PV product (the sum l keeps
 * the unrounded P, as a kernel's row sum does). */
static void row_online(const tl_prefill_shape *s, double scale, const double *q, const double *k, const double *v,
                       int round_p, int h, long i, double *acc, double *sc, float *o, float *lse)
{
    const int g = h / (s->heads / s->kv_heads), dqk = s->dqk, dv = s->dv;
    const double *qi = q + ((size_t)i * s->heads + h) * dqk;
    const long nk = tl_prefill_keys(s->causal, s->seq, i);
    double m = -INFINITY, l = 0;
    memset(acc, 0, (size_t)dv * sizeof *acc);
    for (long j0 = 0; j0 < nk; j0 += KEY_BLOCK) {
        const long j1 = j0 + KEY_BLOCK < nk ? j0 + KEY_BLOCK : nk;
        double bm = -INFINITY;
        for (long j = j0; j < j1; j++) {
            const double *kj = k + ((size_t)j * s->kv_heads + g) * dqk;
            double dot = 0;
            for (int d = 0; d < dqk; d++) dot += qi[d] * kj[d];
            sc[j - j0] = dot * scale;
            if (sc[j - j0] > bm) bm = sc[j - j0];
        }
        const double mn = bm > m ? bm : m, corr = exp(m - mn);
        l *= corr;
        for (int d = 0; d < dv; d++) acc[d] *= corr;
        for (long j = j0; j < j1; j++) {
            const double p = exp(sc[j - j0] - mn);
            const double pv = round_p ? tl_prefill_p_value(tl_prefill_p_code((float)p)) : p;
            const double *vj = v + ((size_t)j * s->kv_heads + g) * dv;
            l += p;
            for (int d = 0; d < dv; d++) acc[d] += pv * vj[d];
        }
        m = mn;
    }
    float *oi = o + ((size_t)i * s->heads + h) * dv;
    for (int d = 0; d < dv; d++) oi[d] = (float)(acc[d] / l);
    lse[(size_t)h * s->seq + i] = (float)(m + log(l));
}

int tl_prefill_reference_f64(const tl_prefill_shape *s, const double *q, const double *k, const double *v, float *o,
                             float *lse)
{
    return tl_prefill_reference_f64_p(s, q, k, v, 0, o, lse);
}

/* The engine on the query rows of [lo[r], hi[r]) (r < nr), in blocks of ROW_BLOCK rows per head. */
static int engine(const tl_prefill_shape *s, const double *q, const double *k, const double *v, int round_p, int nr,
                  const long *lo, const long *hi, float *o, float *lse)
{
    int rc = tl_prefill_shape_check(s);
    if (rc) return rc;
    if (!q || !k || !v || !o || !lse) return tl_error(TL_EUSAGE, "prefill reference", "a NULL array");
    long nrb = 0;
    for (int r = 0; r < nr; r++) {
        if (lo[r] < 0 || hi[r] > s->seq || lo[r] > hi[r])
            return tl_error(TL_EUSAGE, "prefill reference", "rows [%ld, %ld) outside [0, %ld)", lo[r], hi[r], s->seq);
        nrb += (hi[r] - lo[r] + ROW_BLOCK - 1) / ROW_BLOCK;
    }
    long *b0 = malloc((size_t)(nrb > 0 ? nrb : 1) * sizeof *b0);
    if (!b0) return tl_error(TL_EFAIL, "prefill reference", "out of memory");
    long nb = 0;
    for (int r = 0; r < nr; r++)
        for (long i = lo[r]; i < hi[r]; i += ROW_BLOCK) b0[nb++] = i;
    const double scale = tl_prefill_scale(s);
    const long items = nrb * s->heads;
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        double *acc = malloc((size_t)s->dv * sizeof *acc), *sc = malloc(KEY_BLOCK * sizeof *sc);
        if (!acc || !sc) fail = 1;
        /* the blocks listed last (the latest rows of the last range) see the most keys: hand them out first */
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < items; it++) {
            if (!acc || !sc) continue;
            const long blk = nrb - 1 - it / s->heads;
            const int h = (int)(it % s->heads);
            long end = b0[blk] + ROW_BLOCK;
            for (int r = 0; r < nr; r++)
                if (b0[blk] >= lo[r] && b0[blk] < hi[r] && end > hi[r]) end = hi[r];
            for (long i = b0[blk]; i < end; i++) row_online(s, scale, q, k, v, round_p, h, i, acc, sc, o, lse);
        }
        free(acc);
        free(sc);
    }
    free(b0);
    return fail ? tl_error(TL_EFAIL, "prefill reference", "out of memory") : TL_OK;
}

int tl_prefill_reference_f64_p(const tl_prefill_shape *s, const double *q, const double *k, const double *v,
                               int round_p, float *o, float *lse)
{
    const long lo = 0, hi = s->seq;
    return engine(s, q, k, v, round_p, 1, &lo, &hi, o, lse);
}

int tl_prefill_naive(const tl_prefill_shape *s, const double *q, const double *k, const double *v, float *o,
                     float *lse)
{
    int rc = tl_prefill_shape_check(s);
    if (rc) return rc;
    double *sc = malloc((size_t)s->seq * sizeof *sc);
    if (!sc) return tl_error(TL_EFAIL, "prefill naive", "out of memory");
    const double scale = tl_prefill_scale(s);
    const int gqa = s->heads / s->kv_heads;
    for (int h = 0; h < s->heads; h++)
        for (long i = 0; i < s->seq; i++) {
            const long nk = tl_prefill_keys(s->causal, s->seq, i);
            double m = -INFINITY, l = 0;
            for (long j = 0; j < nk; j++) {
                double dot = 0;
                for (int d = 0; d < s->dqk; d++)
                    dot += q[((size_t)i * s->heads + h) * s->dqk + d] * k[((size_t)j * s->kv_heads + h / gqa) * s->dqk + d];
                sc[j] = dot * scale;
                m = fmax(m, sc[j]);
            }
            for (long j = 0; j < nk; j++) l += sc[j] = exp(sc[j] - m);
            for (int d = 0; d < s->dv; d++) {
                double a = 0;
                for (long j = 0; j < nk; j++) a += sc[j] * v[((size_t)j * s->kv_heads + h / gqa) * s->dv + d];
                o[((size_t)i * s->heads + h) * s->dv + d] = (float)(a / l);
            }
            lse[(size_t)h * s->seq + i] = (float)(m + log(l));
        }
    free(sc);
    return TL_OK;
}

/* ---- inputs ---- */

static double *widen_f32(const float *x, size_t n)
{
    double *y = malloc(n * sizeof *y);
    if (y)
        for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static double *widen_bf16(const uint16_t *x, size_t n)
{
    double *y = malloc(n * sizeof *y);
    if (y)
        for (size_t i = 0; i < n; i++) y[i] = tl_decode(TL_NF_BF16, x[i]);
    return y;
}

static double *widen_fp8(const uint8_t *c, const float *scales, long seq, int heads, int dim)
{
    double *y = malloc((size_t)seq * heads * dim * sizeof *y);
    if (y) tl_prefill_dequantize_fp8(c, scales, seq, heads, dim, y);
    return y;
}

/* The engine on rows [lo[r], hi[r]) of the widened inputs, which it frees. */
static int run_f64(const tl_prefill_shape *s, double *q, double *k, double *v, int nr, const long *lo, const long *hi,
                   float *o, float *lse)
{
    int rc = (!q || !k || !v) ? tl_error(TL_EFAIL, "prefill reference", "out of memory")
                              : engine(s, q, k, v, 0, nr, lo, hi, o, lse);
    free(q), free(k), free(v);
    return rc;
}

int tl_prefill_reference_rows(const tl_prefill_shape *s, const tl_prefill_inputs *in, int nr, const long *lo,
                              const long *hi, float *o, float *lse)
{
    int rc = tl_prefill_shape_check(s);
    if (rc) return rc;
    if (!in || !in->q || !in->k || !in->v) return tl_error(TL_EUSAGE, "prefill reference", "missing Q, K or V");
    if (s->dtype == TL_PREFILL_BF16)
        return run_f64(s, widen_bf16(in->q, tl_prefill_q_elems(s)), widen_bf16(in->k, tl_prefill_k_elems(s)),
                       widen_bf16(in->v, tl_prefill_v_elems(s)), nr, lo, hi, o, lse);
    if (!in->q_scale || !in->k_scale || !in->v_scale)
        return tl_error(TL_EUSAGE, "prefill reference", "fp8 inputs need q, k and v scales");
    return run_f64(s, widen_fp8(in->q, in->q_scale, s->seq, s->heads, s->dqk),
                   widen_fp8(in->k, in->k_scale, s->seq, s->kv_heads, s->dqk),
                   widen_fp8(in->v, in->v_scale, s->seq, s->kv_heads, s->dv), nr, lo, hi, o, lse);
}

int tl_prefill_reference(const tl_prefill_shape *s, const tl_prefill_inputs *in, float *o, float *lse)
{
    const long lo = 0, hi = s->seq;
    return tl_prefill_reference_rows(s, in, 1, &lo, &hi, o, lse);
}

int tl_prefill_reference_f32(const tl_prefill_shape *s, const float *q, const float *k, const float *v, float *o,
                             float *lse)
{
    int rc = tl_prefill_shape_check(s);
    if (rc) return rc;
    if (!q || !k || !v) return tl_error(TL_EUSAGE, "prefill reference", "missing Q, K or V");
    const long lo = 0, hi = s->seq;
    return run_f64(s, widen_f32(q, tl_prefill_q_elems(s)), widen_f32(k, tl_prefill_k_elems(s)),
                   widen_f32(v, tl_prefill_v_elems(s)), 1, &lo, &hi, o, lse);
}

/* ---- rotation ---- */

int tl_prefill_rotate(tl_rotation rot, uint64_t seed, float *x, size_t rows, int dqk)
{
    if (rot == TL_ROT_NONE) return TL_OK;
    if (rot == TL_ROT_HADAMARD) {
        for (size_t r = 0; r < rows; r++) {
            int off = 0;
            for (int bit = 1 << 30; bit > 0; bit >>= 1)
                if (dqk & bit) {
                    int rc = tl_fwht(x + r * dqk + off, (size_t)bit);
                    if (rc) return rc;
                    off += bit;
                }
        }
        return TL_OK;
    }
    double *R = malloc((size_t)dqk * dqk * sizeof *R);
    if (!R) return tl_error(TL_EFAIL, "prefill rotate", "out of memory");
    int rc = tl_random_orthogonal((size_t)dqk, seed, R);
    if (!rc) rc = tl_rotate_rows(R, (size_t)dqk, x, rows, 0);
    free(R);
    return rc;
}

/* ---- the error study ---- */

/* Q, K, V rounded to bf16 and widened to double. */
static int quant_bf16(const float *x, size_t n, double **out)
{
    uint16_t *c = malloc(n * sizeof *c);
    if (!c) return tl_error(TL_EFAIL, "prefill study", "out of memory");
    tl_encode_array16(TL_NF_BF16, x, n, 1, c);
    *out = widen_bf16(c, n);
    free(c);
    return *out ? TL_OK : tl_error(TL_EFAIL, "prefill study", "out of memory");
}

static int quant_fp8(const float *x, long seq, int heads, int dim, double **out)
{
    const size_t n = (size_t)seq * heads * dim;
    uint8_t *c = malloc(n);
    float *sc = malloc((size_t)heads * tl_prefill_nblk(seq) * sizeof *sc);
    int rc = (!c || !sc) ? tl_error(TL_EFAIL, "prefill study", "out of memory")
                         : tl_prefill_quantize_fp8(x, seq, heads, dim, c, sc);
    *out = rc ? NULL : widen_fp8(c, sc, seq, heads, dim);
    if (!rc && !*out) rc = tl_error(TL_EFAIL, "prefill study", "out of memory");
    free(c), free(sc);
    return rc;
}

/* One row: q, k, v quantized to `fp8` or bf16, the reference (P rounded by the FP8 rule when
 * round_p), compared with ref_o. */
static int study_row(const tl_prefill_shape *s, const float *q, const float *k, const float *v, int fp8, int round_p,
                     const float *ref_o, float *o, float *lse, tl_err_metrics *m)
{
    double *dq = NULL, *dk = NULL, *dv = NULL;
    int rc;
    if (fp8) {
        rc = quant_fp8(q, s->seq, s->heads, s->dqk, &dq);
        if (!rc) rc = quant_fp8(k, s->seq, s->kv_heads, s->dqk, &dk);
        if (!rc) rc = quant_fp8(v, s->seq, s->kv_heads, s->dv, &dv);
    } else {
        rc = quant_bf16(q, tl_prefill_q_elems(s), &dq);
        if (!rc) rc = quant_bf16(k, tl_prefill_k_elems(s), &dk);
        if (!rc) rc = quant_bf16(v, tl_prefill_v_elems(s), &dv);
    }
    if (!rc) rc = tl_prefill_reference_f64_p(s, dq, dk, dv, round_p, o, lse);
    if (!rc) rc = tl_compare(ref_o, o, tl_prefill_o_elems(s), m);
    free(dq), free(dk), free(dv);
    return rc;
}

static int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

int tl_prefill_error_study(const tl_prefill_shape *s, const float *q, const float *k, const float *v,
                           tl_rotation rot, uint64_t seed, tl_prefill_err_row *rows, int *nrows)
{
    int rc = tl_prefill_shape_check(s);
    if (rc) return rc;
    if (!all_finite(q, tl_prefill_q_elems(s)) || !all_finite(k, tl_prefill_k_elems(s)) ||
        !all_finite(v, tl_prefill_v_elems(s)))
        return tl_error(TL_EUSAGE, "prefill study", "the inputs hold NaN or Inf");
    *nrows = 0;
    const size_t no = tl_prefill_o_elems(s), nl = tl_prefill_lse_elems(s);
    float *ref = malloc(no * sizeof *ref), *o = malloc(no * sizeof *o), *lse = malloc(nl * sizeof *lse);
    float *rq = NULL, *rk = NULL;
    if (!ref || !o || !lse) rc = tl_error(TL_EFAIL, "prefill study", "out of memory");
    if (!rc) rc = tl_prefill_reference_f32(s, q, k, v, ref, lse);
    for (int r = 0; r < (rot == TL_ROT_NONE ? 1 : 2) && !rc; r++) {
        const float *uq = q, *uk = k;
        if (r == 1) { /* the same R on Q and K; V untouched */
            rq = malloc(tl_prefill_q_elems(s) * sizeof *rq), rk = malloc(tl_prefill_k_elems(s) * sizeof *rk);
            if (!rq || !rk) {
                rc = tl_error(TL_EFAIL, "prefill study", "out of memory");
                break;
            }
            memcpy(rq, q, tl_prefill_q_elems(s) * sizeof *rq);
            memcpy(rk, k, tl_prefill_k_elems(s) * sizeof *rk);
            rc = tl_prefill_rotate(rot, seed, rq, (size_t)s->seq * s->heads, s->dqk);
            if (!rc) rc = tl_prefill_rotate(rot, seed, rk, (size_t)s->seq * s->kv_heads, s->dqk);
            uq = rq, uk = rk;
        }
        static const char *const formats[TL_PREFILL_STUDY_FORMATS] = {"bf16", "fp8", "fp8+p8"};
        for (int f = 0; f < TL_PREFILL_STUDY_FORMATS && !rc; f++) {
            tl_prefill_err_row *row = &rows[*nrows];
            row->format = formats[f];
            row->rot = r ? rot : TL_ROT_NONE;
            rc = study_row(s, uq, uk, v, f > 0, f == 2, ref, o, lse, &row->m);
            if (!rc) (*nrows)++;
        }
    }
    free(ref), free(o), free(lse), free(rq), free(rk);
    return rc;
}
