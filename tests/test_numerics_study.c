/* Metrics, the derived tolerance, rotations, distributions, and the error anchors of FACTS.md. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/tl.h"
#include "numerics/dist.h"
#include "numerics/formats.h"
#include "numerics/metrics.h"
#include "numerics/quant.h"
#include "numerics/rotate.h"

static void metrics_known_values(void **state)
{
    (void)state;
    float ref[4] = {1, -2, 3, 4}, out[4] = {1, -2, 3, 5};
    tl_err_metrics m;
    assert_int_equal(tl_compare(ref, out, 4, &m), 0);
    assert_true(m.max_abs == 1);
    assert_true(fabs(m.max_rel - 0.25) < 1e-12);
    assert_true(fabs(m.rel_rms - sqrt(1.0 / 30)) < 1e-12);
    assert_true(fabs(m.nmse - 1.0 / 30) < 1e-12);
    assert_true(fabs(m.sqnr_db - 10 * log10(30.0)) < 1e-9);
    assert_true(fabs(m.cosine - 34.0 / sqrt(30.0 * 39.0)) < 1e-12);
    assert_true(fabs(m.ref_rms - sqrt(30.0 / 4)) < 1e-12);
    assert_int_equal(m.nan_count, 0);
    assert_int_equal(tl_compare(ref, ref, 4, &m), 0);
    assert_true(m.rel_rms == 0 && m.sqnr_db == 999 && m.cosine == 1);
    assert_int_equal(tl_compare(ref, out, 0, &m), TL_EUSAGE);
}

/* One wrong row among 1024: the whole array's rel_rms stays inside the bound, the row bound fails. */
static void worst_row_catches_a_wrong_row(void **state)
{
    (void)state;
    enum { ROWS = 1024, LEN = 64 };
    float *ref = malloc(ROWS * LEN * sizeof(float)), *out = malloc(ROWS * LEN * sizeof(float));
    assert_non_null(ref);
    assert_non_null(out);
    for (int i = 0; i < ROWS * LEN; i++) ref[i] = out[i] = (float)sin(0.37 * i + 0.1 * (i % 7)) + 0.01f;
    for (int i = 100 * LEN; i < 101 * LEN; i++) out[i] = 1.1f * ref[i]; /* row 100 off by 10% */
    tl_err_metrics m;
    assert_int_equal(tl_compare_rows(ref, out, ROWS * LEN, LEN, &m), 0);
    assert_true(m.rel_rms > 0.09 / 32 && m.rel_rms < 0.11 / 32); /* 10% of one row in 1024 */
    assert_true(m.worst_row > 0.07 && m.worst_row < 0.13);
    tl_tolerance t = {.rel_rms = 5e-3, .predicted = 1.25e-3, .check_max_abs = 0, .row_factor = 0};
    assert_true(tl_check_pass(&m, &t));
    t.row_factor = 10; /* rows within 0.05 */
    assert_false(tl_check_pass(&m, &t));
    for (int i = 100 * LEN; i < 101 * LEN; i++) out[i] = 1.01f * ref[i]; /* 1%: inside */
    assert_int_equal(tl_compare_rows(ref, out, ROWS * LEN, LEN, &m), 0);
    assert_true(tl_check_pass(&m, &t));
    assert_int_equal(tl_compare(ref, out, ROWS * LEN, &m), 0);
    assert_true(m.worst_row == -1); /* not computed: the row bound does not apply */
    assert_int_equal(tl_compare_rows(ref, out, ROWS * LEN, 100, &m), TL_EUSAGE);
    assert_int_equal(tl_compare_rows(ref, out, ROWS * LEN, 0, &m), TL_EUSAGE);
    free(ref);
    free(out);
}

static void nan_never_passes(void **state)
{
    (void)state;
    float ref[5] = {1, 2, 3, 4, NAN}, out[5] = {1, 2, NAN, 4, NAN};
    tl_err_metrics m;
    tl_tolerance loose = {.rel_rms = 1e9, .predicted = 1, .check_max_abs = 0};
    tl_compare(ref, out, 5, &m);
    assert_int_equal(m.nan_count, 1); /* out NaN where ref finite; NaN vs NaN agrees */
    assert_false(tl_check_pass(&m, &loose));
    out[2] = 3;
    out[4] = 0; /* the NaN was lost */
    tl_compare(ref, out, 5, &m);
    assert_int_equal(m.nan_count, 1);
    assert_false(tl_check_pass(&m, &loose));
    out[4] = NAN;
    out[1] = INFINITY;
    tl_compare(ref, out, 5, &m);
    assert_int_equal(m.nan_count, 1);
    out[1] = 2;
    tl_compare(ref, out, 5, &m);
    assert_int_equal(m.nan_count, 0);
    assert_true(tl_check_pass(&m, &loose));
}

/* Dot products y_i = sum_k a_ik b_k of FP8-quantized inputs: the kernel side accumulates in float32
 * (or in bf16, as a careless kernel would) and stores bf16; the reference uses double. */
static void dot_products(const float *a, const float *b, int rows, int k, int acc_bf16, float *y)
{
    for (int i = 0; i < rows; i++) {
        float s = 0;
        for (int j = 0; j < k; j++) {
            s += a[(size_t)i * k + j] * b[j];
            if (acc_bf16) s = tl_decode(TL_NF_BF16, tl_encode(TL_NF_BF16, s, 1));
        }
        y[i] = tl_decode(TL_NF_BF16, tl_encode(TL_NF_BF16, s, 1));
    }
}

static void tolerance_from_formats(void **state)
{
    (void)state;
    enum { ROWS = 256, K = 7168 }; /* DeepSeek-V3 hidden size as the reduction length */
    float *a = malloc((size_t)ROWS * K * sizeof *a), *b = malloc(K * sizeof *b);
    float *y = malloc(ROWS * sizeof *y), *ref = malloc(ROWS * sizeof *ref);
    assert_non_null(a), assert_non_null(b), assert_non_null(y), assert_non_null(ref);
    tl_dist_fill(TL_DIST_NORMAL, 41, a, (size_t)ROWS * K, K);
    tl_dist_fill(TL_DIST_NORMAL, 42, b, K, K);
    tl_quant_roundtrip(TL_QS_FP8_E4M3_TENSOR, TL_SCALE_FLOOR, a, (size_t)ROWS * K, a);
    tl_quant_roundtrip(TL_QS_FP8_E4M3_TENSOR, TL_SCALE_FLOOR, b, K, b);
    for (int i = 0; i < ROWS; i++) {
        double s = 0;
        for (int j = 0; j < K; j++) s += (double)a[(size_t)i * K + j] * b[j];
        ref[i] = (float)s;
    }
    tl_tol_spec spec = {TL_NF_E4M3FN, TL_NF_E4M3FN, TL_TOL_FP32, TL_NF_BF16, K, 1, 0};
    tl_tolerance t;
    assert_int_equal(tl_tolerance_make(&spec, &t), 0);
    assert_true(t.rel_rms > 4e-3 && t.rel_rms < 2e-2); /* bf16 output rounding dominates: 4 * 2^-8/sqrt 3 */
    tl_err_metrics m;
    dot_products(a, b, ROWS, K, 0, y);
    tl_compare(ref, y, ROWS, &m);
    print_message("fp32 accumulation: rel_rms %.3g, bound %.3g\n", m.rel_rms, t.rel_rms);
    assert_true(tl_check_pass(&m, &t));
    assert_true(m.rel_rms > t.predicted / 10); /* the model is not absurdly loose either */
    /* accumulating in bf16 breaks the fp32 bound but meets the bf16 one */
    dot_products(a, b, ROWS, K, 1, y);
    tl_compare(ref, y, ROWS, &m);
    print_message("bf16 accumulation: rel_rms %.3g\n", m.rel_rms);
    assert_false(tl_check_pass(&m, &t));
    tl_tol_spec bspec = spec;
    bspec.acc_fmt = TL_NF_BF16;
    tl_tolerance tb;
    tl_tolerance_make(&bspec, &tb);
    assert_true(tl_check_pass(&m, &tb));
    /* one wrong output among many is caught by the max_abs bound even when rel_rms passes */
    dot_products(a, b, ROWS, K, 0, y);
    y[7] += (float)(10 * t.rel_rms * fabs(ref[7]) + 0.5 * m.ref_rms);
    tl_compare(ref, y, ROWS, &m);
    assert_false(tl_check_pass(&m, &t));
    /* the bound grows as sqrt(K) once accumulation dominates */
    tl_tol_spec s1 = {TL_TOL_FP32, TL_TOL_FP32, TL_NF_FP16, TL_TOL_FP32, 1024, 1, 0}, s4 = s1;
    s4.k = 4096;
    assert_true(fabs(tl_tolerance_rel_rms(&s4) / tl_tolerance_rel_rms(&s1) - 2.0) < 0.01);
    /* quantized inputs that the reference does not share add their own rounding */
    tl_tol_spec q = spec;
    q.ref_same_inputs = 0;
    assert_true(tl_tolerance_rel_rms(&q) > 3 * tl_tolerance_rel_rms(&spec));
    spec.k = 0;
    assert_int_equal(tl_tolerance_make(&spec, &t), TL_EUSAGE);
    spec.k = 1;
    spec.acc_fmt = 99;
    assert_int_equal(tl_tolerance_make(&spec, &t), TL_EUSAGE);
    free(a), free(b), free(y), free(ref);
}

static void rotations_are_orthogonal(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 7, 128, 256};
    for (size_t s = 0; s < 4; s++) {
        size_t n = sizes[s];
        double *Q = malloc(n * n * sizeof *Q);
        assert_int_equal(tl_random_orthogonal(n, 99 + s, Q), 0);
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double d = 0;
                for (size_t k = 0; k < n; k++) d += Q[k * n + i] * Q[k * n + j];
                worst = fmax(worst, fabs(d - (i == j)));
            }
        assert_true(worst < 1e-12);
        /* rotate then rotate back gives the rows again */
        float x[2 * 256], x0[2 * 256];
        tl_dist_fill(TL_DIST_NORMAL, 5, x, 2 * n, n);
        memcpy(x0, x, 2 * n * sizeof *x);
        tl_rotate_rows(Q, n, x, 2, 0);
        if (n > 1) assert_true(fabsf(x[0] - x0[0]) > 1e-6f);
        tl_rotate_rows(Q, n, x, 2, 1);
        for (size_t i = 0; i < 2 * n; i++) assert_true(fabsf(x[i] - x0[i]) < 1e-5f);
        free(Q);
    }
    double Q1[4], Q2[4];
    tl_random_orthogonal(2, 1, Q1);
    tl_random_orthogonal(2, 1, Q2);
    assert_memory_equal(Q1, Q2, sizeof Q1); /* seeded */
    assert_int_equal(tl_random_orthogonal(0, 1, Q1), TL_EUSAGE);
}

static void hadamard(void **state)
{
    (void)state;
    double d[256], d0[256];
    for (int i = 0; i < 256; i++) d[i] = d0[i] = sin(i * 0.37) + (i == 3);
    assert_int_equal(tl_fwht_double(d, 256), 0);
    assert_int_equal(tl_fwht_double(d, 256), 0);
    for (int i = 0; i < 256; i++) assert_true(fabs(d[i] - d0[i]) < 1e-12);
    float e[128] = {1};
    assert_int_equal(tl_fwht(e, 128), 0);
    for (int i = 0; i < 128; i++) assert_true(fabsf(e[i] - 1 / sqrtf(128)) < 1e-7f);
    float x[1024], x0[1024];
    tl_dist_fill(TL_DIST_LAPLACE, 3, x, 1024, 0);
    memcpy(x0, x, sizeof x);
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 1024; i++) n0 += (double)x[i] * x[i];
    tl_fwht_rows(x, 4, 256);
    for (int i = 0; i < 1024; i++) n1 += (double)x[i] * x[i];
    assert_true(fabs(n1 / n0 - 1) < 1e-6); /* orthogonal: norm kept */
    tl_fwht_rows(x, 4, 256);
    for (int i = 0; i < 1024; i++) assert_true(fabsf(x[i] - x0[i]) < 1e-5f);
    assert_int_equal(tl_fwht(x, 96), TL_EUSAGE);
    assert_int_equal(tl_fwht(x, 0), TL_EUSAGE);
}

static void distributions(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x), *x2 = malloc(N * sizeof *x2);
    for (int d = 0; d < TL_DIST_COUNT; d++) {
        tl_dist_fill((tl_dist)d, 77, x, N, 128);
        tl_dist_fill((tl_dist)d, 77, x2, N, 128);
        assert_memory_equal(x, x2, N * sizeof *x);
        double s = 0, s2 = 0;
        for (int i = 0; i < N; i++) s += x[i], s2 += (double)x[i] * x[i];
        double var = s2 / N - (s / N) * (s / N);
        if (d != TL_DIST_OUTLIERS) assert_true(fabs(var - 1) < 0.03);
        else assert_true(var > 5); /* two channels of 128 scaled by 20-100x */
    }
    tl_dist dd;
    assert_int_equal(tl_dist_parse("gauss", &dd), TL_EUSAGE);
    free(x), free(x2);
}

static double study(tl_quant_scheme s, tl_dist d, tl_rotation r, tl_err_metrics *m)
{
    enum { N = 1 << 18 };
    float *x = malloc(N * sizeof *x);
    tl_dist_fill(d, 2026, x, N, 128);
    assert_int_equal(tl_quant_study(s, TL_SCALE_FLOOR, r, 128, 9, x, N, m), 0);
    free(x);
    return m->rel_rms;
}

static void anchors_on_normal_data(void **state)
{
    (void)state;
    tl_err_metrics m;
    double e4 = study(TL_QS_MXFP4, TL_DIST_NORMAL, TL_ROT_NONE, &m);
    double e8 = study(TL_QS_MXFP8_E4M3, TL_DIST_NORMAL, TL_ROT_NONE, &m);
    print_message("N(0,1): mxfp4 rel_rms %.4f (anchor 0.115), mxfp8_e4m3 %.4f (anchor 0.029)\n", e4, e8);
    assert_true(fabs(e4 / 0.115 - 1) < 0.15);
    assert_true(fabs(e8 / 0.029 - 1) < 0.15);
    assert_true(fabs(10 * log10(1 / (e4 * e4)) - 18.8) < 1.0); /* SQNR anchor */
}

static void rotation_helps_on_outliers(void **state)
{
    (void)state;
    tl_err_metrics plain, rot;
    /* FP8 with one tensor scale: floating point keeps the relative error about the same, but the
     * big errors of the outlier channels are spread out: the largest error drops several-fold. */
    double e0 = study(TL_QS_FP8_E4M3_TENSOR, TL_DIST_OUTLIERS, TL_ROT_NONE, &plain);
    double e1 = study(TL_QS_FP8_E4M3_TENSOR, TL_DIST_OUTLIERS, TL_ROT_HADAMARD, &rot);
    print_message("fp8_e4m3_tensor on outliers: rel_rms %.4f -> %.4f, max_abs %.3g -> %.3g\n", e0, e1,
                  plain.max_abs, rot.max_abs);
    assert_true(rot.max_abs < plain.max_abs / 2);
    assert_true(e1 <= e0 * 1.01);
    /* block formats whose block scale an outlier sets gain in relative RMS too */
    double i0 = study(TL_QS_INT4_G128_SYM, TL_DIST_OUTLIERS, TL_ROT_NONE, &plain);
    double i1 = study(TL_QS_INT4_G128_SYM, TL_DIST_OUTLIERS, TL_ROT_HADAMARD, &rot);
    print_message("int4_g128_sym on outliers: rel_rms %.4f -> %.4f\n", i0, i1);
    assert_true(i1 < i0 * 0.8);
    double r1 = study(TL_QS_FP8_E4M3_TENSOR, TL_DIST_OUTLIERS, TL_ROT_RANDOM, &rot);
    assert_true(rot.max_abs < plain.max_abs);
    assert_true(r1 <= e0 * 1.02);
    float x[100];
    tl_dist_fill(TL_DIST_NORMAL, 1, x, 100, 0);
    assert_int_equal(tl_quant_study(TL_QS_MXFP4, TL_SCALE_FLOOR, TL_ROT_HADAMARD, 128, 1, x, 100, &rot), TL_EUSAGE);
    assert_int_equal(tl_quant_study(TL_QS_MXFP4, TL_SCALE_FLOOR, TL_ROT_HADAMARD, 50, 1, x, 100, &rot), TL_EUSAGE);
}

static void scheme_names(void **state)
{
    (void)state;
    for (int s = 0; s < TL_QS_COUNT; s++) {
        tl_quant_scheme out;
        assert_int_equal(tl_quant_scheme_parse(tl_quant_scheme_name((tl_quant_scheme)s), &out), 0);
        assert_int_equal(out, s);
    }
    tl_quant_scheme out;
    assert_int_equal(tl_quant_scheme_parse("mxfp5", &out), TL_EUSAGE);
    assert_true(tl_quant_scheme_bits(TL_QS_MXFP4) == 4.25);
    float x[64], y[64];
    tl_dist_fill(TL_DIST_NORMAL, 1, x, 64, 0);
    memcpy(y, x, sizeof x);
    for (int s = 0; s < TL_QS_COUNT; s++) { /* in place equals out of place */
        float a[64], b[64];
        memcpy(a, x, sizeof a);
        assert_int_equal(tl_quant_roundtrip((tl_quant_scheme)s, TL_SCALE_RCEIL, x, 64, b), 0);
        assert_int_equal(tl_quant_roundtrip((tl_quant_scheme)s, TL_SCALE_RCEIL, a, 64, a), 0);
        assert_memory_equal(a, b, sizeof a);
    }
    assert_memory_equal(x, y, sizeof x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(metrics_known_values),
        cmocka_unit_test(nan_never_passes),
        cmocka_unit_test(worst_row_catches_a_wrong_row),
        cmocka_unit_test(tolerance_from_formats),
        cmocka_unit_test(rotations_are_orthogonal),
        cmocka_unit_test(hadamard),
        cmocka_unit_test(distributions),
        cmocka_unit_test(anchors_on_normal_data),
        cmocka_unit_test(rotation_helps_on_outliers),
        cmocka_unit_test(scheme_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
