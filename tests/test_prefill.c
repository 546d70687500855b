/* Causal prefill attention (contract/prefill.h, reference/prefill.h): the reference against the naive
 * loop (GQA, MLA dims, lengths not multiples of 128, seq 1, non-causal), the quantized-input entries,
 * causality, the FP8 block-scale round trip, the error study on a tiny shape, rotation invariance of
 * the exact attention, presets and bad shapes; the model (simulator/prefill.h): its counts against
 * the contract's and an independent tile walk, its limiters, its schedule; the figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "contract/prefill.h"
#include "core/tl.h"
#include "numerics/formats.h"
#include "ops/ops.h"
#include "reference/prefill.h"
#include "simulator/model.h"
#include "simulator/prefill.h"

static tl_prefill_shape shape(int H, int Hkv, int dqk, int dv, long seq, int causal)
{
    tl_prefill_shape s = {.heads = H, .kv_heads = Hkv, .dqk = dqk, .dv = dv, .seq = seq, .causal = causal};
    assert_int_equal(tl_prefill_shape_check(&s), 0);
    return s;
}

/* Seeded float inputs and their double copies (owned by the caller). */
typedef struct {
    float *q, *k, *v;
    double *dq, *dk, *dv;
} inputs;

static double *widen(const float *x, size_t n)
{
    double *y = malloc(n * sizeof *y);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static inputs make(const tl_prefill_shape *s, tl_prefill_dist d, uint64_t seed)
{
    inputs in;
    in.q = malloc(tl_prefill_q_elems(s) * sizeof(float));
    in.k = malloc(tl_prefill_k_elems(s) * sizeof(float));
    in.v = malloc(tl_prefill_v_elems(s) * sizeof(float));
    assert_true(in.q && in.k && in.v);
    tl_prefill_make(s, d, seed, in.q, in.k, in.v);
    in.dq = widen(in.q, tl_prefill_q_elems(s));
    in.dk = widen(in.k, tl_prefill_k_elems(s));
    in.dv = widen(in.v, tl_prefill_v_elems(s));
    return in;
}

static void drop(inputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->dq), free(in->dk), free(in->dv);
}

/* Largest |a - b| / (1 + |b|) over n floats. */
static double max_diff(const float *a, const float *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
        if (!(d <= w)) w = d; /* NaN wins */
    }
    return w;
}

typedef struct {
    float *o, *lse;
} outputs;

static outputs alloc_out(const tl_prefill_shape *s)
{
    outputs r = {malloc(tl_prefill_o_elems(s) * sizeof(float)), malloc(tl_prefill_lse_elems(s) * sizeof(float))};
    assert_true(r.o && r.lse);
    for (size_t i = 0; i < tl_prefill_o_elems(s); i++) r.o[i] = NAN; /* poisoned: every element written */
    for (size_t i = 0; i < tl_prefill_lse_elems(s); i++) r.lse[i] = NAN;
    return r;
}

static void free_out(outputs *r) { free(r->o), free(r->lse); }

static void test_reference_vs_naive(void **state)
{
    (void)state;
    const int cases[][6] = {
        /* H, Hkv, dqk, dv, seq, causal */
        {4, 1, 16, 8, 1, 1},     /* seq 1 */
        {4, 2, 32, 32, 130, 1},  /* GQA 2, one full KV block and a bit */
        {8, 2, 128, 128, 257, 1}, /* Mistral-like GQA 4 */
        {2, 2, 192, 128, 67, 1}, /* MLA dims */
        {2, 1, 16, 16, 50, 0},   /* non-causal */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tl_prefill_shape s = shape(cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4], cases[c][5]);
        inputs in = make(&s, c % 2 ? TL_PREFILL_DIST_OUTLIERS : TL_PREFILL_DIST_NORMAL, 100 + c);
        outputs a = alloc_out(&s), b = alloc_out(&s);
        assert_int_equal(tl_prefill_reference_f64(&s, in.dq, in.dk, in.dv, a.o, a.lse), 0);
        assert_int_equal(tl_prefill_naive(&s, in.dq, in.dk, in.dv, b.o, b.lse), 0);
        assert_true(max_diff(a.o, b.o, tl_prefill_o_elems(&s)) < 1e-6);
        assert_true(max_diff(a.lse, b.lse, tl_prefill_lse_elems(&s)) < 1e-6);
        /* the float32 entry is the f64 engine on the widened inputs: bit for bit */
        outputs f = alloc_out(&s);
        assert_int_equal(tl_prefill_reference_f32(&s, in.q, in.k, in.v, f.o, f.lse), 0);
        assert_memory_equal(f.o, a.o, tl_prefill_o_elems(&s) * sizeof(float));
        assert_memory_equal(f.lse, a.lse, tl_prefill_lse_elems(&s) * sizeof(float));
        free_out(&a), free_out(&b), free_out(&f);
        drop(&in);
    }
}

/* seq 1: O is V's one row (per KV head), LSE the one score. */
static void test_seq1(void **state)
{
    (void)state;
    tl_prefill_shape s = shape(4, 2, 8, 8, 1, 1);
    inputs in = make(&s, TL_PREFILL_DIST_NORMAL, 7);
    outputs a = alloc_out(&s);
    assert_int_equal(tl_prefill_reference_f64(&s, in.dq, in.dk, in.dv, a.o, a.lse), 0);
    for (int h = 0; h < 4; h++)
        for (int d = 0; d < 8; d++) assert_true(a.o[h * 8 + d] == in.v[(h / 2) * 8 + d]);
    free_out(&a);
    drop(&in);
}

/* The quantized-input entry decodes bf16 bits and fp8 codes x scales exactly: it equals the naive
 * loop on the values decoded here. */
static void test_quantized_inputs(void **state)
{
    (void)state;
    tl_prefill_shape s = shape(4, 2, 64, 32, 200, 1);
    inputs in = make(&s, TL_PREFILL_DIST_OUTLIERS, 11);
    const size_t nq = tl_prefill_q_elems(&s), nk = tl_prefill_k_elems(&s), nv = tl_prefill_v_elems(&s);
    /* bf16 */
    uint16_t *bq = malloc(nq * 2), *bk = malloc(nk * 2), *bv = malloc(nv * 2);
    tl_encode_array16(TL_NF_BF16, in.q, nq, 1, bq);
    tl_encode_array16(TL_NF_BF16, in.k, nk, 1, bk);
    tl_encode_array16(TL_NF_BF16, in.v, nv, 1, bv);
    for (size_t i = 0; i < nq; i++) in.dq[i] = tl_decode(TL_NF_BF16, bq[i]);
    for (size_t i = 0; i < nk; i++) in.dk[i] = tl_decode(TL_NF_BF16, bk[i]);
    for (size_t i = 0; i < nv; i++) in.dv[i] = tl_decode(TL_NF_BF16, bv[i]);
    outputs a = alloc_out(&s), b = alloc_out(&s);
    tl_prefill_inputs pin = {.q = bq, .k = bk, .v = bv};
    assert_int_equal(tl_prefill_reference(&s, &pin, a.o, a.lse), 0);
    assert_int_equal(tl_prefill_naive(&s, in.dq, in.dk, in.dv, b.o, b.lse), 0);
    assert_true(max_diff(a.o, b.o, tl_prefill_o_elems(&s)) < 1e-6);
    /* fp8 */
    s.dtype = TL_PREFILL_FP8;
    const long nb = tl_prefill_nblk(s.seq);
    uint8_t *cq = malloc(nq), *ck = malloc(nk), *cv = malloc(nv);
    float *sq = malloc(s.heads * nb * sizeof(float)), *sk = malloc(s.kv_heads * nb * sizeof(float)),
          *sv = malloc(s.kv_heads * nb * sizeof(float));
    assert_int_equal(tl_prefill_quantize_fp8(in.q, s.seq, s.heads, s.dqk, cq, sq), 0);
    assert_int_equal(tl_prefill_quantize_fp8(in.k, s.seq, s.kv_heads, s.dqk, ck, sk), 0);
    assert_int_equal(tl_prefill_quantize_fp8(in.v, s.seq, s.kv_heads, s.dv, cv, sv), 0);
    tl_prefill_dequantize_fp8(cq, sq, s.seq, s.heads, s.dqk, in.dq);
    tl_prefill_dequantize_fp8(ck, sk, s.seq, s.kv_heads, s.dqk, in.dk);
    tl_prefill_dequantize_fp8(cv, sv, s.seq, s.kv_heads, s.dv, in.dv);
    tl_prefill_inputs fin = {.q = cq, .k = ck, .v = cv, .q_scale = sq, .k_scale = sk, .v_scale = sv};
    assert_int_equal(tl_prefill_reference(&s, &fin, a.o, a.lse), 0);
    assert_int_equal(tl_prefill_naive(&s, in.dq, in.dk, in.dv, b.o, b.lse), 0);
    assert_true(max_diff(a.o, b.o, tl_prefill_o_elems(&s)) < 1e-6);
    assert_true(max_diff(a.lse, b.lse, tl_prefill_lse_elems(&s)) < 1e-6);
    /* fp8 without scales is refused */
    fin.k_scale = NULL;
    assert_int_equal(tl_prefill_reference(&s, &fin, a.o, a.lse), TL_EUSAGE);
    free(bq), free(bk), free(bv), free(cq), free(ck), free(cv), free(sq), free(sk), free(sv);
    free_out(&a), free_out(&b);
    drop(&in);
}

/* The reference on row ranges (what a check of a long sequence compares): the ranges' rows equal
 * the full reference's bit for bit, the rows outside stay untouched, bad ranges are refused. */
static void test_reference_rows(void **state)
{
    (void)state;
    tl_prefill_shape s = shape(4, 2, 32, 16, 333, 1);
    inputs in = make(&s, TL_PREFILL_DIST_NORMAL, 21);
    const size_t nq = tl_prefill_q_elems(&s), nk = tl_prefill_k_elems(&s), nv = tl_prefill_v_elems(&s);
    uint16_t *bq = malloc(nq * 2), *bk = malloc(nk * 2), *bv = malloc(nv * 2);
    assert_true(bq && bk && bv);
    tl_encode_array16(TL_NF_BF16, in.q, nq, 1, bq);
    tl_encode_array16(TL_NF_BF16, in.k, nk, 1, bk);
    tl_encode_array16(TL_NF_BF16, in.v, nv, 1, bv);
    tl_prefill_inputs pin = {.q = bq, .k = bk, .v = bv};
    outputs full = alloc_out(&s), part = alloc_out(&s);
    assert_int_equal(tl_prefill_reference(&s, &pin, full.o, full.lse), 0);
    const long lo[3] = {0, 100, 250}, hi[3] = {5, 230, 333}; /* ranges of 5, 130 (over two blocks) and 83 rows */
    assert_int_equal(tl_prefill_reference_rows(&s, &pin, 3, lo, hi, part.o, part.lse), 0);
    for (long i = 0; i < s.seq; i++) {
        int in_range = 0;
        for (int r = 0; r < 3; r++) in_range |= i >= lo[r] && i < hi[r];
        for (int h = 0; h < s.heads; h++) {
            const size_t o = ((size_t)i * s.heads + h) * s.dv, l = (size_t)h * s.seq + i;
            if (in_range) {
                assert_memory_equal(part.o + o, full.o + o, s.dv * sizeof(float));
                assert_memory_equal(&part.lse[l], &full.lse[l], sizeof(float));
            } else {
                assert_true(isnan(part.o[o]) && isnan(part.lse[l]));
            }
        }
    }
    const long blo = 300, bhi = 334;
    assert_int_equal(tl_prefill_reference_rows(&s, &pin, 1, &blo, &bhi, part.o, part.lse), TL_EUSAGE);
    free(bq), free(bk), free(bv);
    free_out(&full), free_out(&part);
    drop(&in);
}

/* A change to key/value row t changes nothing in the output rows before t. */
static void test_causality(void **state)
{
    (void)state;
    tl_prefill_shape s = shape(4, 2, 32, 16, 150, 1);
    inputs in = make(&s, TL_PREFILL_DIST_NORMAL, 21);
    outputs a = alloc_out(&s), b = alloc_out(&s);
    assert_int_equal(tl_prefill_reference_f64(&s, in.dq, in.dk, in.dv, a.o, a.lse), 0);
    const long t = 97;
    for (int g = 0; g < s.kv_heads; g++) {
        for (int d = 0; d < s.dqk; d++) in.dk[((size_t)t * s.kv_heads + g) * s.dqk + d] += 5.0;
        for (int d = 0; d < s.dv; d++) in.dv[((size_t)t * s.kv_heads + g) * s.dv + d] -= 3.0;
    }
    assert_int_equal(tl_prefill_reference_f64(&s, in.dq, in.dk, in.dv, b.o, b.lse), 0);
    const size_t before = (size_t)t * s.heads * s.dv;
    assert_memory_equal(a.o, b.o, before * sizeof(float));
    assert_memory_not_equal(a.o + before, b.o + before, (size_t)s.heads * s.dv * sizeof(float));
    for (int h = 0; h < s.heads; h++)
        assert_memory_equal(a.lse + (size_t)h * s.seq, b.lse + (size_t)h * s.seq, (size_t)t * sizeof(float));
    free_out(&a), free_out(&b);
    drop(&in);
}

/* FP8 block scales: one per 128 rows per head (the last block partial), scale = amax / 448, and
 * every element back within E4M3's half ulp (relative 2^-4, or 2^-10 x scale below the normals). */
static void test_fp8_roundtrip(void **state)
{
    (void)state;
    const long seq = 200;
    const int heads = 3, dim = 40;
    const size_t n = (size_t)seq * heads * dim;
    float *x = malloc(n * sizeof *x), *sc = malloc(heads * 2 * sizeof *sc);
    uint8_t *c = malloc(n);
    double *y = malloc(n * sizeof *y);
    tl_prefill_shape s = shape(heads, heads, dim, dim, seq, 1);
    float *dummy_k = malloc(n * sizeof(float)), *dummy_v = malloc(n * sizeof(float));
    tl_prefill_make(&s, TL_PREFILL_DIST_NORMAL, 5, x, dummy_k, dummy_v);
    x[((size_t)150 * heads + 1) * dim + 3] = 1000.0f; /* head 1, block 1 gets a large amax */
    assert_int_equal(tl_prefill_nblk(seq), 2);
    assert_int_equal(tl_prefill_quantize_fp8(x, seq, heads, dim, c, sc), 0);
    for (int h = 0; h < heads; h++)
        for (long b = 0; b < 2; b++) {
            float amax = 0;
            for (long r = b * 128; r < seq && r < (b + 1) * 128; r++)
                for (int d = 0; d < dim; d++) amax = fmaxf(amax, fabsf(x[((size_t)r * heads + h) * dim + d]));
            assert_true(fabsf(sc[h * 2 + b] - amax / 448.0f) <= 1e-6f * amax);
        }
    assert_true(sc[1 * 2 + 1] > 2.0f); /* 1000 / 448 */
    tl_prefill_dequantize_fp8(c, sc, seq, heads, dim, y);
    for (long r = 0; r < seq; r++)
        for (int h = 0; h < heads; h++)
            for (int d = 0; d < dim; d++) {
                const size_t i = ((size_t)r * heads + h) * dim + d;
                const double scale = sc[h * 2 + r / 128];
                assert_true(fabs(y[i] - x[i]) <= fabs(x[i]) / 16 + scale * 0x1p-10 + 1e-12);
            }
    x[7] = NAN;
    assert_int_equal(tl_prefill_quantize_fp8(x, seq, heads, dim, c, sc), TL_EUSAGE);
    free(x), free(sc), free(c), free(y), free(dummy_k), free(dummy_v);
}

/* The FP8 kernel's P rule: encode(P x 448) as numerics encodes it, 1 -> 448 (0x7E), the smallest P
 * kept is 2^-9 / 448, and every P in [0, 1] comes back within E4M3's half ulp. */
static void test_p_rule(void **state)
{
    (void)state;
    assert_int_equal(tl_prefill_p_code(1.0f), 0x7E);
    assert_true(tl_prefill_p_value(0x7E) == 1.0f);
    assert_int_equal(tl_prefill_p_code(0.0f), 0);
    assert_int_equal(tl_prefill_p_code(0x1p-9f / 448.0f), 1);
    assert_int_equal(tl_prefill_p_code(0x1p-11f / 448.0f), 0); /* below half the smallest step: 0 */
    for (int i = 0; i <= 100000; i++) {
        const float p = expf(-(float)i * 2e-4f); /* exp(0) .. exp(-20) */
        const uint32_t c = tl_prefill_p_code(p);
        assert_int_equal(c, tl_encode(TL_NF_E4M3FN, p * 448.0f, 1));
        assert_true(fabsf(tl_prefill_p_value(c) - p) <= p / 16 + 0x1p-10f / 448.0f);
    }
}

/* Rotating Q and K by the same orthogonal matrix leaves the exact attention unchanged up to the float32
 * rounding of the rotated inputs. */
static void test_rotation_invariance(void **state)
{
    (void)state;
    const int dims[] = {128, 192, 48};
    for (int c = 0; c < 3; c++)
        for (int rot = TL_ROT_HADAMARD; rot <= TL_ROT_RANDOM; rot++) {
            tl_prefill_shape s = shape(4, 2, dims[c], 32, 140, 1);
            inputs in = make(&s, TL_PREFILL_DIST_OUTLIERS, 31 + c);
            outputs a = alloc_out(&s), b = alloc_out(&s);
            assert_int_equal(tl_prefill_reference_f32(&s, in.q, in.k, in.v, a.o, a.lse), 0);
            assert_int_equal(tl_prefill_rotate((tl_rotation)rot, 9, in.q, (size_t)s.seq * s.heads, s.dqk), 0);
            assert_true(fabs(in.q[0] - in.dq[0]) + fabs(in.q[1] - in.dq[1]) > 1e-3); /* it did rotate */
            assert_int_equal(tl_prefill_rotate((tl_rotation)rot, 9, in.k, (size_t)s.seq * s.kv_heads, s.dqk), 0);
            assert_int_equal(tl_prefill_reference_f32(&s, in.q, in.k, in.v, b.o, b.lse), 0);
            tl_err_metrics m;
            assert_int_equal(tl_compare(a.o, b.o, tl_prefill_o_elems(&s), &m), 0);
            assert_true(m.rel_rms < 1e-4);
            assert_int_equal(m.nan_count, 0);
            free_out(&a), free_out(&b);
            drop(&in);
        }
}

/* The study on a tiny shape: bf16 well below fp8, both small, rows in the documented order. */
static void test_error_study(void **state)
{
    (void)state;
    tl_prefill_shape s = shape(4, 2, 64, 64, 256, 1);
    inputs in = make(&s, TL_PREFILL_DIST_NORMAL, 41);
    tl_prefill_err_row rows[TL_PREFILL_STUDY_MAX_ROWS];
    int n = 0;
    assert_int_equal(tl_prefill_error_study(&s, in.q, in.k, in.v, TL_ROT_NONE, 1, rows, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(rows[0].format, "bf16");
    assert_string_equal(rows[1].format, "fp8");
    assert_string_equal(rows[2].format, "fp8+p8");
    assert_true(rows[0].m.rel_rms > 0 && rows[0].m.rel_rms < 1e-2);
    assert_true(rows[1].m.rel_rms < 0.1);
    assert_true(rows[0].m.rel_rms * 5 < rows[1].m.rel_rms);
    /* P's rounding adds error of its own, but stays within E4M3's reach */
    assert_true(rows[2].m.rel_rms != rows[1].m.rel_rms && rows[2].m.rel_rms < 0.1);
    assert_int_equal(tl_prefill_error_study(&s, in.q, in.k, in.v, TL_ROT_HADAMARD, 1, rows, &n), 0);
    assert_int_equal(n, 6);
    assert_int_equal(rows[2].rot, TL_ROT_NONE);
    assert_int_equal(rows[3].rot, TL_ROT_HADAMARD);
    assert_string_equal(rows[4].format, "fp8");
    assert_true(rows[3].m.rel_rms * 5 < rows[4].m.rel_rms);
    for (int i = 0; i < 6; i++) assert_int_equal(rows[i].m.nan_count, 0);
    in.k[5] = INFINITY;
    assert_int_equal(tl_prefill_error_study(&s, in.q, in.k, in.v, TL_ROT_NONE, 1, rows, &n), TL_EUSAGE);
    drop(&in);
}

/* Rotation where it pays: channels large in both Q and K (qk-outliers) put most of a score's
 * rounding error in a few products; the Hadamard rotation spreads them and at least halves FP8's
 * output error (2.3x at Mistral-7B's shape, README's table); the dist parses by name. */
static void test_rotation_pays_on_qk_outliers(void **state)
{
    (void)state;
    tl_prefill_dist d;
    assert_int_equal(tl_prefill_dist_parse("qk-outliers", &d), 0);
    assert_int_equal(d, TL_PREFILL_DIST_QK_OUTLIERS);
    assert_string_equal(tl_prefill_dist_name(d), "qk-outliers");
    tl_prefill_shape s = shape(4, 1, 128, 128, 256, 1);
    inputs in = make(&s, TL_PREFILL_DIST_QK_OUTLIERS, 7);
    tl_prefill_err_row rows[TL_PREFILL_STUDY_MAX_ROWS];
    int n = 0;
    assert_int_equal(tl_prefill_error_study(&s, in.q, in.k, in.v, TL_ROT_HADAMARD, 1, rows, &n), 0);
    assert_int_equal(n, 6);
    assert_string_equal(rows[1].format, "fp8");
    assert_string_equal(rows[4].format, "fp8");
    assert_true(rows[4].m.rel_rms * 2 < rows[1].m.rel_rms);
    drop(&in);
}

/* The contract's preset table agrees with presets/models. */
static void test_presets(void **state)
{
    (void)state;
    const char *const *names = tl_prefill_presets();
    int count = 0;
    for (; names[count]; count++) {
        tl_prefill_shape s;
        tl_model m;
        assert_int_equal(tl_prefill_shape_parse(names[count], &s), 0);
        assert_int_equal(tl_model_load(names[count], &m), 0);
        assert_int_equal(s.heads, m.n_heads);
        assert_int_equal(s.kv_heads, m.n_kv_heads);
        s.seq = 1024;
        assert_int_equal(tl_prefill_shape_check(&s), 0);
    }
    assert_int_equal(count, 3);
    tl_prefill_shape s;
    assert_int_equal(tl_prefill_shape_parse("deepseek-v2-lite", &s), 0);
    assert_int_equal(s.dqk, 192);
    assert_int_equal(s.dv, 128);
    assert_int_equal(tl_prefill_shape_parse("qwen3-8b", &s), 0);
    assert_int_equal(s.dqk, 128);
    assert_int_equal(tl_prefill_shape_parse("32x8x128", &s), 0);
    assert_int_equal(s.kv_heads, 8);
    assert_int_equal(tl_prefill_shape_parse("16x64", &s), 0);
    assert_int_equal(s.kv_heads, 16);
    assert_int_equal(s.dv, 64);
}

static void test_bad_shapes(void **state)
{
    (void)state;
    const char *bad_text[] = {"", "llama", "32x", "x128", "32x8x128x4x2", "-4x128", "32 x 128", "1234567x8"};
    tl_prefill_shape s;
    for (size_t i = 0; i < sizeof bad_text / sizeof bad_text[0]; i++)
        assert_int_equal(tl_prefill_shape_parse(bad_text[i], &s), TL_EUSAGE);
    assert_int_equal(tl_prefill_shape_parse(NULL, &s), TL_EUSAGE);
    /* HxKVxDQKxDV: MLA's expanded heads, q.k and value dims apart (DeepSeek's 192 / 128) */
    assert_int_equal(tl_prefill_shape_parse("16x16x192x128", &s), TL_OK);
    assert_true(s.heads == 16 && s.kv_heads == 16 && s.dqk == 192 && s.dv == 128);
    const tl_prefill_shape bad[] = {
        {.heads = 0, .kv_heads = 1, .dqk = 128, .dv = 128, .seq = 16, .causal = 1},
        {.heads = 32, .kv_heads = 7, .dqk = 128, .dv = 128, .seq = 16, .causal = 1},   /* not a multiple */
        {.heads = 8, .kv_heads = 16, .dqk = 128, .dv = 128, .seq = 16, .causal = 1},   /* more KV than Q heads */
        {.heads = 512, .kv_heads = 8, .dqk = 128, .dv = 128, .seq = 16, .causal = 1},  /* too many heads */
        {.heads = 8, .kv_heads = 8, .dqk = 0, .dv = 128, .seq = 16, .causal = 1},
        {.heads = 8, .kv_heads = 8, .dqk = 128, .dv = 4096, .seq = 16, .causal = 1},
        {.heads = 8, .kv_heads = 8, .dqk = 128, .dv = 128, .seq = 0, .causal = 1},
        {.heads = 8, .kv_heads = 8, .dqk = 128, .dv = 128, .seq = -5, .causal = 1},
        {.heads = 8, .kv_heads = 8, .dqk = 128, .dv = 128, .seq = (1L << 20) + 1, .causal = 1},
        {.heads = 256, .kv_heads = 256, .dqk = 512, .dv = 512, .seq = 1L << 20, .causal = 1}, /* absurd size */
        {.heads = 8, .kv_heads = 8, .dqk = 128, .dv = 128, .seq = 16, .causal = 2},
        {.heads = 8, .kv_heads = 8, .dqk = 128, .dv = 128, .seq = 16, .causal = 1, .scale = -1},
        {.heads = 8, .kv_heads = 8, .dqk = 128, .dv = 128, .seq = 16, .causal = 1, .scale = NAN},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(tl_prefill_shape_check(&bad[i]), TL_EUSAGE);
    float o[4], lse[4];
    double x[4] = {1, 2, 3, 4};
    assert_int_equal(tl_prefill_reference_f64(&bad[0], x, x, x, o, lse), TL_EUSAGE);
    assert_int_equal(tl_prefill_naive(&bad[6], x, x, x, o, lse), TL_EUSAGE);
    tl_prefill_dtype d;
    assert_int_equal(tl_prefill_dtype_parse("fp16", &d), TL_EUSAGE);
    assert_int_equal(tl_prefill_dtype_parse("fp8", &d), 0);
    tl_prefill_dist dist;
    assert_int_equal(tl_prefill_dist_parse("laplace", &dist), TL_EUSAGE);
}

/* ---- the model (simulator/prefill.h) ---- */

static tl_hw load_hw(const char *name)
{
    tl_hw hw;
    assert_int_equal(tl_hw_load(name, &hw), 0);
    return hw;
}

static tl_prefill_shape preset_shape(const char *name, long seq, tl_prefill_dtype d)
{
    tl_prefill_shape s;
    assert_int_equal(tl_prefill_shape_parse(name, &s), 0);
    s.seq = seq, s.dtype = d;
    assert_int_equal(tl_prefill_shape_check(&s), 0);
    return s;
}

/* The counts against the contract's causal count and a walk over every (query block, key tile):
 * a tile is skipped when its first key lies beyond the block's last row (the upper triangle),
 * masked when it is computed and holds a key beyond the block's first row. */
static void test_model_counts(void **state)
{
    (void)state;
    const char *hws[] = {"h200", "mi355x", "mi300x"};
    const char *shapes[] = {"mistral-7b", "deepseek-v2-lite", "4x2x64"};
    const long seqs[] = {1, 100, 1000, 4097, 16384};
    for (size_t a = 0; a < 3; a++) {
        tl_hw hw = load_hw(hws[a]);
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < sizeof seqs / sizeof seqs[0]; c++)
                for (int d = 0; d < 2; d++)
                    for (int causal = 0; causal < 2; causal++) {
                        tl_prefill_shape s = preset_shape(shapes[b], seqs[c], d);
                        s.causal = causal;
                        tl_prefill_model_result r;
                        assert_int_equal(tl_prefill_model(&hw, &s, &r), 0);
                        const double n = (double)s.seq, keys = causal ? n * (n + 1) / 2 : n * n;
                        assert_true(r.flops == 2.0 * (s.dqk + s.dv) * s.heads * keys);
                        assert_true(r.flops == tl_prefill_flops(&s));
                        const tl_prefill_tiling t = tl_prefill_tiling_for(hw.arch, &s);
                        assert_memory_equal(&t, &r.tile, sizeof t);
                        long skipped = 0, masked = 0, total = 0;
                        const long nq = (s.seq + t.block_m - 1) / t.block_m, nk = (s.seq + t.block_n - 1) / t.block_n;
                        for (long qb = 0; qb < nq; qb++) {
                            const long first = qb * t.block_m, last = (qb + 1) * t.block_m < s.seq ? (qb + 1) * t.block_m - 1 : s.seq - 1;
                            for (long j = 0; j < nk; j++) {
                                const long k0 = j * t.block_n, k1 = (j + 1) * t.block_n - 1; /* past seq: padding */
                                total++;
                                if (causal && k0 > last) skipped++;
                                else if ((causal && k1 > first) || k1 >= s.seq) masked++;
                            }
                        }
                        assert_int_equal(r.tiles_total, total * s.heads);
                        assert_int_equal(r.tiles_skipped, skipped * s.heads);
                        assert_int_equal(r.tiles_masked, masked * s.heads);
                        assert_int_equal(r.tiles_computed + r.tiles_skipped, r.tiles_total);
                        if (!causal) assert_int_equal(r.tiles_skipped, 0);
                        /* whole tiles: never fewer FLOPs than counted; exps one per computed score and row */
                        assert_true(r.flops_computed >= r.flops && r.flops_matrix >= r.flops_computed);
                        assert_true(r.exps == (double)r.tiles_computed * t.block_m * (t.block_n + 1.0));
                        assert_int_equal(r.blocks, nq * s.heads);
                    }
    }
}

static int known_limiter(const char *l)
{
    const char *const names[] = {"matrix", "exp", "vector", "pipeline", "load", "lds", "l2", "hbm", "tail", "fixed",
                                 "valu", "issue"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (l && strcmp(l, names[i]) == 0) return 1;
    return 0;
}

/* At 16K the body, not the launch or the tail, bounds it, on the compute side; the time holds
 * every term; the counted rate stays under the instruction's; the instruction is the kernel's. */
static void test_model_limiters(void **state)
{
    (void)state;
    const char *hws[] = {"h200", "mi355x"};
    for (int a = 0; a < 2; a++) {
        tl_hw hw = load_hw(hws[a]);
        for (int d = 0; d < 2; d++) {
            tl_prefill_shape s = preset_shape("mistral-7b", 16384, d);
            tl_prefill_model_result r;
            assert_int_equal(tl_prefill_model(&hw, &s, &r), 0);
            assert_true(known_limiter(r.limiter));
            assert_true(strcmp(r.limiter, "matrix") == 0 || strcmp(r.limiter, "exp") == 0 ||
                        strcmp(r.limiter, "vector") == 0 || strcmp(r.limiter, "pipeline") == 0 || strcmp(r.limiter, "load") == 0 ||
                        strcmp(r.limiter, "lds") == 0 || strcmp(r.limiter, "valu") == 0 || strcmp(r.limiter, "issue") == 0);
            const double terms[] = {r.mma_us, r.exp_us, r.vec_us, r.soft_us, r.compute_us, r.lds_us, r.l2_us, r.hbm_us, r.fixed_us};
            for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++) assert_true(terms[i] > 0 && terms[i] <= r.time_us);
            assert_true(r.tail_us < 0.05 * r.time_us && r.fixed_us < 0.01 * r.time_us);
            assert_true(fabs(r.time_us - (r.fixed_us + r.body_us + r.tail_us)) < 1e-9 * r.time_us);
            assert_true(r.tflops > 0 && r.tflops < r.mma_tflops);
            if (a == 0) { /* wgmma on the codes: both dtypes native, at the preset's wgmma loop rate */
                assert_string_equal(r.operand, d ? "fp8" : "bf16");
                assert_non_null(strstr(r.instr, "wgmma"));
                assert_int_equal(r.instr_k, d ? 32 : 16);
                assert_true(r.mma_tflops == (d ? hw.wgmma_fp8_tflops : hw.wgmma_bf16_tflops));
                /* the tile period holds every part, the chain included */
                assert_true(r.period_cycles >= r.chain_cycles && r.chain_cycles > 0 && r.load_mhz > 1000);
            } else {
                assert_string_equal(r.instr, d ? "v_mfma_scale_f32_16x16x128_f8f6f4" : "v_mfma_f32_16x16x32_bf16");
            }
        }
        /* a handful of tokens: the launch bounds it */
        tl_prefill_shape s = preset_shape("mistral-7b", 16, TL_PREFILL_BF16);
        tl_prefill_model_result r;
        assert_int_equal(tl_prefill_model(&hw, &s, &r), 0);
        assert_string_equal(r.limiter, "fixed");
    }
}

/* sm_90's matrix rate is the preset's own wgmma loop (wgmma_bf16_tflops / wgmma_fp8_tflops): the
 * H100's 876.2 / 1660.4 and the H200's 917.0 / 1717.5 TFLOP/s, so the two presets differ; the
 * clock the model runs the tile period at follows it; a preset without the loop rate falls back
 * to its ceiling of the format (measured, else datasheet). */
static void test_model_wgmma_rate(void **state)
{
    (void)state;
    const struct {
        const char *hw;
        double bf16, fp8;
    } want[] = {{"h100", 876.2, 1660.4}, {"h200", 917.0, 1717.5}};
    double rate[2][2];
    for (int a = 0; a < 2; a++) {
        tl_hw hw = load_hw(want[a].hw);
        assert_true(hw.wgmma_bf16_tflops == want[a].bf16 && hw.wgmma_fp8_tflops == want[a].fp8);
        for (int d = 0; d < 2; d++) {
            tl_prefill_shape s = preset_shape("mistral-7b", 16384, d);
            tl_prefill_model_result r;
            assert_int_equal(tl_prefill_model(&hw, &s, &r), 0);
            assert_true(r.mma_tflops == (d ? want[a].fp8 : want[a].bf16));
            assert_true(fabs(r.load_mhz - r.mma_tflops * 1e6 / (hw.cus * (d ? 8192.0 : 4096.0))) < 1e-9 * r.load_mhz);
            rate[a][d] = r.mma_tflops;
        }
    }
    assert_true(rate[0][0] != rate[1][0] && rate[0][1] != rate[1][1]);
    /* the matrix term scales as 1 / the rate: the h200 preset at the H100's loop rate */
    tl_hw h200 = load_hw("h200"), slow = h200;
    slow.wgmma_bf16_tflops = 876.2;
    tl_prefill_shape s = preset_shape("mistral-7b", 16384, TL_PREFILL_BF16);
    tl_prefill_model_result r0, r1;
    assert_int_equal(tl_prefill_model(&h200, &s, &r0), 0);
    assert_int_equal(tl_prefill_model(&slow, &s, &r1), 0);
    assert_true(fabs(r1.mma_us * 876.2 - r0.mma_us * 917.0) < 1e-9 * r0.mma_us * 917.0);
    assert_true(r1.time_us > r0.time_us);
    /* without the loop rate: the ceiling, measured (h200: cuBLAS's 795) else datasheet */
    tl_hw no_loop = h200;
    no_loop.wgmma_bf16_tflops = 0;
    assert_int_equal(tl_prefill_model(&no_loop, &s, &r1), 0);
    assert_true(r1.mma_tflops == h200.ceilings.bf16_tflops.measured);
    no_loop.ceilings.bf16_tflops.measured = 0;
    assert_int_equal(tl_prefill_model(&no_loop, &s, &r1), 0);
    assert_true(r1.mma_tflops == h200.ceilings.bf16_tflops.datasheet);
}

/* The schedule deals every block once, in the grid's order, each slot's blocks one after another,
 * and ends at the model's time. */
static void test_schedule(void **state)
{
    (void)state;
    const char *hws[] = {"h200", "mi355x"};
    const long seqs[] = {1000, 4096};
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 2; c++) {
            tl_hw hw = load_hw(hws[a]);
            tl_prefill_shape s = preset_shape("qwen3-8b", seqs[c], TL_PREFILL_BF16);
            tl_prefill_model_result r;
            assert_int_equal(tl_prefill_model(&hw, &s, &r), 0);
            tl_prefill_span *sp = malloc((size_t)r.blocks * sizeof *sp);
            assert_non_null(sp);
            assert_int_equal(tl_prefill_schedule(&hw, &s, sp, r.blocks - 1, &r), TL_EUSAGE);
            memset(sp, 0xff, (size_t)r.blocks * sizeof *sp);
            assert_int_equal(tl_prefill_schedule(&hw, &s, sp, r.blocks, &r), 0);
            double end = 0, busy = 0;
            long computed = 0;
            for (long i = 0; i < r.blocks; i++) {
                assert_int_equal(sp[i].qblock * s.heads + sp[i].head, i); /* every block, once */
                assert_int_equal(sp[i].tiles, tl_prefill_block_tiles(&s, r.tile, sp[i].qblock, NULL));
                assert_true(sp[i].cu >= 0 && sp[i].cu < hw.cus && sp[i].slot >= 0 && sp[i].slot < r.resident);
                assert_true(sp[i].start_us >= r.fixed_us - 1e-9 && sp[i].end_us > sp[i].start_us);
                end = fmax(end, sp[i].end_us), busy += sp[i].end_us - sp[i].start_us;
                computed += sp[i].tiles;
            }
            assert_int_equal(computed, r.tiles_computed);
            assert_true(fabs(end - r.time_us) < 1e-9 * r.time_us);
            /* the slots' work is the body's: tiles x tile_us over the slots in use */
            assert_true(fabs(busy / r.slots - r.body_us) < 1e-6 * r.body_us);
            /* longest first: the last query block's heads start at the launch */
            for (long i = (r.qblocks - 1) * s.heads; i < r.blocks; i++) assert_true(sp[i].start_us == r.fixed_us);
            /* no two blocks overlap on a slot */
            for (long i = 0; i < r.blocks; i++)
                for (long j = i + 1; j < r.blocks; j++)
                    if (sp[i].cu == sp[j].cu && sp[i].slot == sp[j].slot)
                        assert_true(sp[i].end_us <= sp[j].start_us + 1e-9 || sp[j].end_us <= sp[i].start_us + 1e-9);
            free(sp);
        }
}

static void test_model_bad(void **state)
{
    (void)state;
    tl_hw hw = load_hw("h200");
    tl_prefill_shape s = preset_shape("mistral-7b", 1024, TL_PREFILL_BF16);
    tl_prefill_model_result r;
    assert_int_equal(tl_prefill_model(NULL, &s, &r), TL_EUSAGE);
    tl_prefill_shape bad = s;
    bad.seq = 0;
    assert_int_equal(tl_prefill_model(&hw, &bad, &r), TL_EUSAGE);
    tl_hw no_exp = hw;
    no_exp.transcendental_per_cu_clk = 0;
    assert_int_equal(tl_prefill_model(&no_exp, &s, &r), TL_EUSAGE);
    tl_hw no_ceiling = hw; /* sm_90 charges the preset's wgmma loop rate, not its GEMM ceiling */
    memset(&no_ceiling.ceilings.bf16_tflops, 0, sizeof no_ceiling.ceilings.bf16_tflops);
    assert_int_equal(tl_prefill_model(&no_ceiling, &s, &r), 0);
    assert_true(r.mma_tflops == hw.wgmma_bf16_tflops);
    no_ceiling.wgmma_bf16_tflops = 0; /* neither: no rate to charge */
    assert_int_equal(tl_prefill_model(&no_ceiling, &s, &r), TL_EUSAGE);
    tl_hw no_bf16 = load_hw("mi355x");
    no_bf16.n_instr = 0;
    assert_int_equal(tl_prefill_model(&no_bf16, &s, &r), TL_EUSAGE);
    assert_int_equal(tl_prefill_schedule(&hw, &s, NULL, 0, &r), TL_EUSAGE);
    tl_clear_error();
}

/* ---- the figures (ops/prefill_figs.c) ---- */

static int draw(const char *name, int argc, const char **argv)
{
    for (int i = 0; tl_prefill_figures[i].name; i++)
        if (strcmp(tl_prefill_figures[i].name, name) == 0) {
            const int rc = tl_prefill_figures[i].draw(argc, (char **)argv);
            tl_clear_error();
            return rc;
        }
    fail_msg("no figure %s", name);
    return -1;
}

static int is_png(const char *path)
{
    unsigned char head[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    const size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return n == 8 && memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0;
}

static void test_figures(void **state)
{
    (void)state;
    char dir[] = "/tmp/tl_prefill_figsXXXXXX", png[64], svg[64];
    assert_non_null(mkdtemp(dir));
    snprintf(png, sizeof png, "%s/f.png", dir);
    snprintf(svg, sizeof svg, "%s/f.svg", dir);
    const char *tiles[] = {"prefill-tiles", "--hw", "mi355x", "--seq", "3000", "--dtype", "fp8", "-o", png};
    assert_int_equal(draw("prefill-tiles", 9, tiles), 0);
    assert_true(is_png(png));
    remove(png);
    const char *tiles2[] = {"prefill-tiles", "--shape", "deepseek-v2-lite", "--no-causal", "-o", svg};
    assert_int_equal(draw("prefill-tiles", 6, tiles2), 0);
    remove(svg);
    const char *err[] = {"prefill-error", "--seq", "64", "--seed", "3", "-o", png};
    assert_int_equal(draw("prefill-error", 7, err), 0);
    assert_true(is_png(png));
    remove(png);
    const char *roof[] = {"prefill-roofline", "--hw", "mi300x", "--shape", "all", "--seq", "2048,8192", "-o", png};
    assert_int_equal(draw("prefill-roofline", 9, roof), 0);
    assert_true(is_png(png));
    remove(png);
    /* refused: no -o, bad numbers, unknown options and shapes; nothing written */
    const char *no_out[] = {"prefill-tiles"};
    const char *long_seq[] = {"prefill-tiles", "--seq", "100000", "-o", png};
    const char *bad_hw[] = {"prefill-tiles", "--hw", "nosuch", "-o", png};
    const char *bad_opt[] = {"prefill-error", "--rotate", "x", "-o", png};
    const char *big_err[] = {"prefill-error", "--seq", "4096", "--kv-heads", "8", "-o", png};
    const char *bad_kv[] = {"prefill-error", "--kv-heads", "9", "-o", png};
    const char *bad_shape[] = {"prefill-roofline", "--shape", "llama", "-o", png};
    const char *bad_seq[] = {"prefill-roofline", "--seq", "0", "-o", png};
    const char *bad_ext[] = {"prefill-roofline", "-o", "/tmp/x.gif"};
    assert_int_equal(draw("prefill-tiles", 1, no_out), TL_EUSAGE);
    assert_int_equal(draw("prefill-tiles", 5, long_seq), TL_EUSAGE);
    assert_int_equal(draw("prefill-tiles", 5, bad_hw), TL_EUSAGE);
    assert_int_equal(draw("prefill-error", 5, bad_opt), TL_EUSAGE);
    assert_int_equal(draw("prefill-error", 7, big_err), TL_EUSAGE);
    assert_int_equal(draw("prefill-error", 5, bad_kv), TL_EUSAGE);
    assert_int_equal(draw("prefill-roofline", 5, bad_shape), TL_EUSAGE);
    assert_int_equal(draw("prefill-roofline", 5, bad_seq), TL_EUSAGE);
    assert_int_equal(draw("prefill-roofline", 3, bad_ext), TL_EUSAGE);
    FILE *f = fopen(png, "rb");
    assert_null(f);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vs_naive), cmocka_unit_test(test_seq1),
        cmocka_unit_test(test_quantized_inputs),   cmocka_unit_test(test_reference_rows),
        cmocka_unit_test(test_causality),
        cmocka_unit_test(test_fp8_roundtrip),      cmocka_unit_test(test_p_rule),
        cmocka_unit_test(test_rotation_invariance),
        cmocka_unit_test(test_error_study),
        cmocka_unit_test(test_rotation_pays_on_qk_outliers),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_model_counts),       cmocka_unit_test(test_model_limiters),
        cmocka_unit_test(test_model_wgmma_rate),
        cmocka_unit_test(test_schedule),           cmocka_unit_test(test_model_bad),
        cmocka_unit_test(test_figures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
