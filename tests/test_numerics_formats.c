/* Formats: every code of every format against the FACTS.md definitions, decode-then-encode identity,
 * array versions against the scalar ones, the FACTS.md test vectors, classes, parsing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/tl.h"
#include "numerics/formats.h"

/* The FACTS.md table, written out again independently of the library. */
typedef struct {
    tl_numfmt f;
    int bits, ebits, mbits, bias;
    double max, min_normal, min_sub;
    int has_inf, fnuz, has_nan;
} fact;

static const fact FACTS[] = {
    {TL_NF_E4M3FN, 8, 4, 3, 7, 448, 0x1p-6, 0x1p-9, 0, 0, 1},
    {TL_NF_E5M2, 8, 5, 2, 15, 57344, 0x1p-14, 0x1p-16, 1, 0, 1},
    {TL_NF_E4M3FNUZ, 8, 4, 3, 8, 240, 0x1p-7, 0x1p-10, 0, 1, 1},
    {TL_NF_E5M2FNUZ, 8, 5, 2, 16, 57344, 0x1p-15, 0x1p-17, 0, 1, 1},
    {TL_NF_E2M3, 6, 2, 3, 1, 7.5, 1, 0.125, 0, 0, 0},
    {TL_NF_E3M2, 6, 3, 2, 3, 28, 0.25, 0.0625, 0, 0, 0},
    {TL_NF_E2M1, 4, 2, 1, 1, 6, 1, 0.5, 0, 0, 0},
    {TL_NF_BF16, 16, 8, 7, 127, 0x1.FEp127, 0x1p-126, 0x1p-133, 1, 0, 1},
    {TL_NF_FP16, 16, 5, 10, 15, 65504, 0x1p-14, 0x1p-24, 1, 0, 1},
};
#define NFACTS (sizeof FACTS / sizeof FACTS[0])

/* Independent decoder: returns the value; *is_nan set for NaN codes. */
static double ref_decode(const fact *fc, uint32_t code, int *is_nan)
{
    *is_nan = 0;
    uint32_t sbit = 1u << (fc->bits - 1), mag = code & (sbit - 1);
    uint32_t e = mag >> fc->mbits, m = mag & ((1u << fc->mbits) - 1);
    uint32_t eall = (1u << fc->ebits) - 1;
    double sign = (code & sbit) ? -1 : 1;
    if (fc->fnuz && code == 0x80) return *is_nan = 1, NAN;
    if (fc->f == TL_NF_E4M3FN && mag == 0x7F) return *is_nan = 1, NAN;
    if (fc->has_inf && e == eall) {
        if (m) return *is_nan = 1, NAN;
        return sign * INFINITY;
    }
    if (e == 0) return sign * ldexp((double)m, 1 - fc->bias - fc->mbits);
    return sign * ldexp(1.0 + ldexp((double)m, -fc->mbits), (int)e - fc->bias);
}

static void every_code_matches_facts(void **state)
{
    (void)state;
    for (size_t k = 0; k < NFACTS; k++) {
        const fact *fc = &FACTS[k];
        assert_int_equal(tl_numfmt_bits(fc->f), fc->bits);
        assert_true(tl_numfmt_max(fc->f) == fc->max);
        assert_true(tl_numfmt_min_normal(fc->f) == fc->min_normal);
        assert_true(tl_numfmt_min_subnormal(fc->f) == fc->min_sub);
        assert_int_equal(tl_numfmt_has_inf(fc->f), fc->has_inf);
        assert_int_equal(tl_numfmt_has_nan(fc->f), fc->has_nan);
        double seen_max = 0, seen_min_normal = INFINITY, seen_min_sub = INFINITY;
        for (uint32_t c = 0; c < (1u << fc->bits); c++) {
            int nan;
            double want = ref_decode(fc, c, &nan);
            float got = tl_decode(fc->f, (uint16_t)c);
            if (nan) {
                assert_true(isnan(got));
                continue;
            }
            if ((double)got != want) fail_msg("%s code 0x%X: got %.9g want %.9g", tl_numfmt_name(fc->f), c, got, want);
            assert_int_equal(signbit(got) != 0, signbit(want) != 0);
            double a = fabs(want);
            if (isfinite(a) && a > seen_max) seen_max = a;
            if (a > 0 && isfinite(a)) {
                if ((c & ((1u << (fc->bits - 1)) - 1)) >> fc->mbits) seen_min_normal = fmin(seen_min_normal, a);
                else seen_min_sub = fmin(seen_min_sub, a);
            }
        }
        assert_true(seen_max == fc->max);
        assert_true(seen_min_normal == fc->min_normal);
        assert_true(seen_min_sub == fc->min_sub);
    }
}

static void special_codes(void **state)
{
    (void)state;
    /* E4M3FN */
    assert_true(tl_decode(TL_NF_E4M3FN, 0x7E) == 448.0f);
    assert_true(isnan(tl_decode(TL_NF_E4M3FN, 0x7F)) && isnan(tl_decode(TL_NF_E4M3FN, 0xFF)));
    assert_true(tl_decode(TL_NF_E4M3FN, 0x80) == 0 && signbit(tl_decode(TL_NF_E4M3FN, 0x80)));
    assert_true(tl_decode(TL_NF_E4M3FN, 0x08) == 0x1p-6f && tl_decode(TL_NF_E4M3FN, 0x01) == 0x1p-9f);
    /* E5M2 */
    assert_true(tl_decode(TL_NF_E5M2, 0x7B) == 57344.0f);
    assert_true(isinf(tl_decode(TL_NF_E5M2, 0x7C)) && tl_decode(TL_NF_E5M2, 0xFC) < 0);
    for (int c = 0x7D; c <= 0x7F; c++) assert_true(isnan(tl_decode(TL_NF_E5M2, (uint16_t)c)) && isnan(tl_decode(TL_NF_E5M2, (uint16_t)(c | 0x80))));
    /* FNUZ: 0x80 is NaN, the only one; no -0; no Inf */
    assert_true(isnan(tl_decode(TL_NF_E4M3FNUZ, 0x80)) && isnan(tl_decode(TL_NF_E5M2FNUZ, 0x80)));
    assert_true(tl_decode(TL_NF_E4M3FNUZ, 0x7F) == 240.0f && tl_decode(TL_NF_E4M3FNUZ, 0xFF) == -240.0f);
    assert_true(tl_decode(TL_NF_E5M2FNUZ, 0x7F) == 57344.0f);
    assert_true(tl_decode(TL_NF_E4M3FNUZ, 0x01) == 0x1p-10f && tl_decode(TL_NF_E5M2FNUZ, 0x01) == 0x1p-17f);
    /* FN bits read as FNUZ halve the value */
    for (int c = 1; c < 0x7F; c++) assert_true(tl_decode(TL_NF_E4M3FNUZ, (uint16_t)c) * 2 == tl_decode(TL_NF_E4M3FN, (uint16_t)c));
    /* E2M1 magnitudes */
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 16; c++) assert_true(tl_decode(TL_NF_E2M1, (uint16_t)c) == (c & 8 ? -e2m1[c & 7] : e2m1[c & 7]));
    assert_true(signbit(tl_decode(TL_NF_E2M1, 0x8)));
    /* E8M0 */
    assert_true(tl_decode(TL_NF_E8M0, 0xFE) == 0x1p127f && tl_decode(TL_NF_E8M0, 0x00) == 0x1p-127f);
    assert_true(tl_decode(TL_NF_E8M0, 0x7F) == 1.0f && isnan(tl_decode(TL_NF_E8M0, 0xFF)));
    for (int c = 0; c < 255; c++) assert_true(tl_decode(TL_NF_E8M0, (uint16_t)c) == ldexpf(1.0f, c - 127));
    assert_true(tl_numfmt_max(TL_NF_E8M0) == 0x1p127);
    /* emax_elem from FACTS.md */
    assert_int_equal(tl_numfmt_emax_elem(TL_NF_E4M3FN), 8);
    assert_int_equal(tl_numfmt_emax_elem(TL_NF_E5M2), 15);
    assert_int_equal(tl_numfmt_emax_elem(TL_NF_E2M1), 2);
    assert_int_equal(tl_numfmt_emax_elem(TL_NF_E2M3), 2);
    assert_int_equal(tl_numfmt_emax_elem(TL_NF_E3M2), 4);
}

static int is_nan_code(tl_numfmt f, uint16_t c) { return isnan(tl_decode(f, c)); }

static void decode_then_encode_is_identity(void **state)
{
    (void)state;
    for (int f = 0; f < TL_NF_COUNT; f++)
        for (int sat = 0; sat <= 1; sat++)
            for (uint32_t c = 0; c < tl_numfmt_code_count((tl_numfmt)f); c++) {
                if (is_nan_code((tl_numfmt)f, (uint16_t)c)) continue;
                float v = tl_decode((tl_numfmt)f, (uint16_t)c);
                uint16_t back = tl_encode((tl_numfmt)f, v, sat);
                uint16_t want = (uint16_t)c;
                if (isinf(v) && sat) /* saturating mode maps +-Inf to +-max by design */
                    want = tl_encode((tl_numfmt)f, v < 0 ? -(float)tl_numfmt_max((tl_numfmt)f) : (float)tl_numfmt_max((tl_numfmt)f), 1);
                if (back != want)
                    fail_msg("%s sat=%d code 0x%X (%.9g) re-encodes to 0x%X", tl_numfmt_name((tl_numfmt)f), sat, c, v, back);
            }
}

static void nan_codes_encode_to_nan(void **state)
{
    (void)state;
    for (int f = 0; f < TL_NF_COUNT; f++) {
        if (!tl_numfmt_has_nan((tl_numfmt)f)) {
            assert_int_equal(tl_encode((tl_numfmt)f, NAN, 1), 0); /* FP4/FP6: documented +0 */
            continue;
        }
        for (int sat = 0; sat <= 1; sat++) {
            assert_true(is_nan_code((tl_numfmt)f, tl_encode((tl_numfmt)f, NAN, sat)));
            assert_true(is_nan_code((tl_numfmt)f, tl_encode((tl_numfmt)f, -NAN, sat)));
        }
    }
}

static void arrays_match_scalar(void **state)
{
    (void)state;
    enum { N = 70000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *c8 = malloc(N);
    uint16_t *c16 = malloc(N * sizeof *c16);
    assert_non_null(x), assert_non_null(y), assert_non_null(c8), assert_non_null(c16);
    tl_rng r;
    tl_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) {
        uint32_t b = (uint32_t)tl_rng_u64(&r);
        if (i % 3 == 0) x[i] = (float)(tl_rng_normal(&r) * ldexp(1.0, (int)tl_rng_below(&r, 60) - 30));
        else memcpy(&x[i], &b, 4);
    }
    for (int f = 0; f < TL_NF_COUNT; f++)
        for (int sat = 0; sat <= 1; sat++) {
            assert_int_equal(tl_encode_array16((tl_numfmt)f, x, N, sat, c16), 0);
            int small = tl_numfmt_bits((tl_numfmt)f) <= 8;
            if (small) assert_int_equal(tl_encode_array8((tl_numfmt)f, x, N, sat, c8), 0);
            else assert_int_equal(tl_encode_array8((tl_numfmt)f, x, N, sat, c8), TL_EUSAGE);
            for (int i = 0; i < N; i++) {
                uint16_t want = tl_encode((tl_numfmt)f, x[i], sat);
                if (c16[i] != want || (small && c8[i] != want))
                    fail_msg("%s: array encode of %a differs (0x%X vs 0x%X)", tl_numfmt_name((tl_numfmt)f), x[i], c16[i], want);
            }
            if (small) {
                tl_decode_array8((tl_numfmt)f, c8, N, y);
                for (int i = 0; i < N; i++) {
                    float w = tl_decode((tl_numfmt)f, c8[i]);
                    assert_true(memcmp(&w, &y[i], 4) == 0 || (isnan(w) && isnan(y[i])));
                }
            }
            tl_decode_array16((tl_numfmt)f, c16, N, y);
            for (int i = 0; i < N; i++) {
                float w = tl_decode((tl_numfmt)f, c16[i]);
                assert_true(memcmp(&w, &y[i], 4) == 0 || (isnan(w) && isnan(y[i])));
            }
        }
    free(x), free(y), free(c8), free(c16);
}

typedef struct {
    tl_numfmt f;
    float in;
    int sat;
    uint16_t code;
    float value;
} vec;

static void facts_test_vectors(void **state)
{
    (void)state;
    static const vec V[] = {
        {TL_NF_E4M3FN, 449, 1, 0x7E, 448},      {TL_NF_E4M3FN, 464, 1, 0x7E, 448},
        {TL_NF_E4M3FN, 464, 0, 0x7E, 448},      {TL_NF_E4M3FN, 465, 0, 0x7F, NAN},
        {TL_NF_E4M3FN, 4.25f, 1, 0x48, 4},      {TL_NF_E4M3FN, 4.75f, 1, 0x4A, 5},
        {TL_NF_E4M3FN, 0x1p-10f, 1, 0x00, 0},   {TL_NF_E4M3FN, 0x1.8p-9f, 1, 0x02, 0x1p-8f},
        {TL_NF_E4M3FN, -INFINITY, 1, 0xFE, -448}, {TL_NF_E4M3FN, INFINITY, 0, 0x7F, NAN},
        {TL_NF_E5M2, 61439, 1, 0x7B, 57344},    {TL_NF_E5M2, 61440, 0, 0x7C, INFINITY},
        {TL_NF_E5M2, 61439, 0, 0x7B, 57344},
        {TL_NF_E4M3FNUZ, 248, 1, 0x7F, 240},    {TL_NF_E4M3FNUZ, 248, 0, 0x80, NAN},
        {TL_NF_E4M3FNUZ, -0.0f, 1, 0x00, 0},    {TL_NF_E4M3FNUZ, -0x1p-12f, 1, 0x00, 0},
        {TL_NF_E2M1, 0.25f, 1, 0x0, 0},         {TL_NF_E2M1, 0.75f, 1, 0x2, 1},
        {TL_NF_E2M1, 1.25f, 1, 0x2, 1},         {TL_NF_E2M1, 1.75f, 1, 0x4, 2},
        {TL_NF_E2M1, 2.5f, 1, 0x4, 2},          {TL_NF_E2M1, 3.5f, 1, 0x6, 4},
        {TL_NF_E2M1, 5, 1, 0x6, 4},             {TL_NF_E2M1, 7, 0, 0x7, 6},
        {TL_NF_E2M1, -100, 0, 0xF, -6},
        {TL_NF_E8M0, 1, 1, 0x7F, 1},            {TL_NF_E8M0, 1.5f, 1, 0x80, 2},
        {TL_NF_E8M0, 3, 1, 0x80, 2},            {TL_NF_E8M0, 0, 1, 0x00, 0x1p-127f},
        {TL_NF_E8M0, -1, 1, 0xFF, NAN},         {TL_NF_E8M0, INFINITY, 1, 0xFE, 0x1p127f},
        {TL_NF_BF16, 3.14159f, 1, 0x4049, 3.140625f}, {TL_NF_FP16, 65520, 0, 0x7C00, INFINITY},
        {TL_NF_FP16, 65519, 0, 0x7BFF, 65504},  {TL_NF_FP16, 65520, 1, 0x7BFF, 65504},
    };
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) {
        uint16_t c = tl_encode(V[i].f, V[i].in, V[i].sat);
        if (c != V[i].code) fail_msg("%s %.9g sat=%d: 0x%X, want 0x%X", tl_numfmt_name(V[i].f), V[i].in, V[i].sat, c, V[i].code);
        float v = tl_decode(V[i].f, c);
        assert_true(v == V[i].value || (isnan(v) && isnan(V[i].value)));
    }
}

static void classes(void **state)
{
    (void)state;
    struct { tl_numfmt f; int count[6]; } C[] = {
        /* zero, subnormal, normal, max, inf, nan */
        {TL_NF_E4M3FN, {2, 14, 236, 2, 0, 2}},
        {TL_NF_E5M2, {2, 6, 238, 2, 2, 6}},
        {TL_NF_E4M3FNUZ, {1, 14, 238, 2, 0, 1}},
        {TL_NF_E5M2FNUZ, {1, 6, 246, 2, 0, 1}},
        {TL_NF_E2M1, {2, 2, 10, 2, 0, 0}},
        {TL_NF_E2M3, {2, 14, 46, 2, 0, 0}},
        {TL_NF_E3M2, {2, 6, 54, 2, 0, 0}},
        {TL_NF_E8M0, {0, 0, 254, 1, 0, 1}},
    };
    for (size_t k = 0; k < sizeof C / sizeof C[0]; k++) {
        int got[6] = {0};
        for (uint32_t c = 0; c < tl_numfmt_code_count(C[k].f); c++) got[tl_classify(C[k].f, (uint16_t)c)]++;
        for (int j = 0; j < 6; j++)
            if (got[j] != C[k].count[j])
                fail_msg("%s class %s: %d codes, want %d", tl_numfmt_name(C[k].f), tl_numclass_name((tl_numclass)j), got[j], C[k].count[j]);
    }
    assert_string_equal(tl_numclass_name(TL_NC_SUBNORMAL), "subnormal");
}

static void parse_names(void **state)
{
    (void)state;
    static const char *names[] = {"e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz", "e2m3", "e3m2", "e2m1", "e8m0", "bf16", "fp16"};
    for (int f = 0; f < TL_NF_COUNT; f++) {
        tl_numfmt out;
        assert_int_equal(tl_numfmt_parse(names[f], &out), 0);
        assert_int_equal(out, f);
        assert_string_equal(tl_numfmt_name((tl_numfmt)f), names[f]);
    }
    tl_numfmt out;
    assert_int_equal(tl_numfmt_parse("e4m3", &out), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "e4m3"));
    assert_int_equal(tl_numfmt_parse(NULL, &out), TL_EUSAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_matches_facts),
        cmocka_unit_test(special_codes),
        cmocka_unit_test(decode_then_encode_is_identity),
        cmocka_unit_test(nan_codes_encode_to_nan),
        cmocka_unit_test(arrays_match_scalar),
        cmocka_unit_test(facts_test_vectors),
        cmocka_unit_test(classes),
        cmocka_unit_test(parse_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
