/* Encoding against an independent slow oracle: the nearest value in the decoded table found by
 * binary search, ties to the even code, with the overflow rule applied afterwards. At least 2^24
 * inputs over all formats and both modes: every representable value, every midpoint between
 * neighbours and the floats just above and below each (both signs), float32 subnormals, +-0, +-Inf,
 * NaNs, and random bit patterns (every float32 binade). Scalar and array encoders are both checked. */
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

typedef struct {
    tl_numfmt f;
    uint32_t count; /* number of magnitudes in v, the last one being the first beyond max */
    double *v;      /* ascending non-negative values */
    uint32_t *code; /* their codes */
    uint32_t sign_bit;
} oracle;

/* The value the code after the largest finite one would have if the format's exponent went on
 * (the "unbounded exponent" of IEEE rounding): RNE decides between max and it. */
static double next_beyond_max(tl_numfmt f)
{
    double max = tl_numfmt_max(f);
    if (f == TL_NF_E8M0) return 2 * max;
    int m = tl_numfmt_mbits(f);
    int e;
    frexp(max, &e); /* max = fr * 2^e, fr in [0.5, 1): the ulp of its binade is 2^(e - 1 - m) */
    return max + ldexp(1.0, e - 1 - m);
}

static void oracle_build(oracle *o, tl_numfmt f)
{
    o->f = f;
    uint32_t n = tl_numfmt_code_count(f);
    o->v = malloc((n + 1) * sizeof *o->v);
    o->code = malloc((n + 1) * sizeof *o->code);
    assert_non_null(o->v);
    assert_non_null(o->code);
    o->sign_bit = f == TL_NF_E8M0 ? 0 : n >> 1;
    uint32_t k = 0;
    /* non-negative finite codes in increasing code order are increasing in value */
    uint32_t limit = f == TL_NF_E8M0 ? n : n >> 1;
    for (uint32_t c = 0; c < limit; c++) {
        float d = tl_decode(f, (uint16_t)c);
        if (!isfinite(d)) continue;
        if (k > 0) assert_true((double)d > o->v[k - 1]);
        o->v[k] = d;
        o->code[k] = c;
        k++;
    }
    o->v[k] = next_beyond_max(f);
    o->code[k] = 0xFFFFFFFFu; /* overflow marker */
    o->count = k + 1;
}

static void oracle_free(oracle *o)
{
    free(o->v);
    free(o->code);
}

static uint32_t overflow_code(tl_numfmt f, int neg, int sat)
{
    uint32_t maxc = tl_encode(f, (float)tl_numfmt_max(f), 1); /* checked against FACTS elsewhere */
    uint32_t sb = f == TL_NF_E8M0 ? 0 : tl_numfmt_code_count(f) >> 1;
    if (sat || (!tl_numfmt_has_inf(f) && !tl_numfmt_has_nan(f))) return maxc | (neg ? sb : 0);
    if (f == TL_NF_E8M0) return 0xFF;
    if (f == TL_NF_E4M3FNUZ || f == TL_NF_E5M2FNUZ) return 0x80;
    return (maxc + 1) | (neg ? sb : 0); /* Inf follows max (E5M2, BF16, FP16); E4M3FN: NaN 0x7F/0xFF */
}

static uint32_t nan_code(tl_numfmt f, int neg)
{
    switch (f) {
    case TL_NF_E4M3FN: return neg ? 0xFF : 0x7F;
    case TL_NF_E5M2: return neg ? 0xFE : 0x7E;
    case TL_NF_E4M3FNUZ: case TL_NF_E5M2FNUZ: return 0x80;
    case TL_NF_E8M0: return 0xFF;
    case TL_NF_BF16: return neg ? 0xFFC0 : 0x7FC0;
    case TL_NF_FP16: return neg ? 0xFE00 : 0x7E00;
    default: return 0; /* FP4/FP6: documented +0 */
    }
}

static uint32_t oracle_encode(const oracle *o, float x, int sat)
{
    tl_numfmt f = o->f;
    int neg = signbit(x) != 0;
    if (isnan(x)) return nan_code(f, neg);
    if (f == TL_NF_E8M0 && neg && x != 0) return 0xFF;
    double a = fabs((double)x);
    if (isinf(a) || a > o->v[o->count - 1]) return overflow_code(f, neg, sat);
    uint32_t idx;
    if (a <= o->v[0]) idx = 0; /* E8M0: nothing below 2^-127, so the nearest is code 0 */
    else {
        uint32_t lo = 0, hi = o->count - 1; /* v[lo] < a <= v[hi] */
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (o->v[mid] < a) lo = mid;
            else hi = mid;
        }
        double dlo = a - o->v[lo], dhi = o->v[hi] - a;
        if (dlo < dhi) idx = lo;
        else if (dhi < dlo) idx = hi;
        else /* tie: adjacent codes (the beyond-max one is code[lo] + 1): take the even one */
            idx = (o->code[lo] % 2 == 0) ? lo : hi;
    }
    if (o->code[idx] == 0xFFFFFFFFu) return overflow_code(f, neg, sat);
    uint32_t c = o->code[idx];
    if ((f == TL_NF_E4M3FNUZ || f == TL_NF_E5M2FNUZ) && c == 0) return 0; /* FNUZ zero has no sign */
    if (f == TL_NF_E8M0) return c;
    return c | (neg ? o->sign_bit : 0);
}

/* ---- input generation ---- */

typedef struct {
    float *x;
    size_t n, cap;
} inputs;

static void push(inputs *in, float x)
{
    if (in->n == in->cap) {
        in->cap = in->cap ? 2 * in->cap : 1 << 16;
        in->x = realloc(in->x, in->cap * sizeof *in->x);
        assert_non_null(in->x);
    }
    in->x[in->n++] = x;
}

static void push_both_signs(inputs *in, double v)
{
    if (v > 0x1.fffffep127) return; /* the beyond-max point of BF16 / E8M0 (2^128) is no float */
    float f = (float)v;
    if ((double)f != v) fail_msg("point %.17g is not a float", v);
    push(in, f);
    push(in, -f);
    push(in, nextafterf(f, INFINITY));
    push(in, nextafterf(f, -INFINITY));
    push(in, -nextafterf(f, INFINITY));
    push(in, -nextafterf(f, -INFINITY));
}

static void structured_inputs(const oracle *o, inputs *in)
{
    for (uint32_t i = 0; i < o->count; i++) {
        push_both_signs(in, o->v[i]);
        if (i + 1 < o->count) push_both_signs(in, 0.5 * (o->v[i] + o->v[i + 1]));
    }
    push_both_signs(in, 0.5 * o->v[0]); /* below the smallest (E8M0) / between 0 and min subnormal */
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f,
                                    0x1p-127f, 0x1.8p-127f, 0x1.7fffffp-127f, 0x1.800002p-127f,
                                    0x1.fffffep127f, -0x1.fffffep127f, 0x1p-126f, 0x1.fffffcp-127f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) push(in, special[i]);
    uint32_t payload = 0x7FC00001u; /* a NaN with a payload, and a signalling one */
    float p;
    memcpy(&p, &payload, 4);
    push(in, p);
    payload = 0xFF800001u;
    memcpy(&p, &payload, 4);
    push(in, p);
}

static void random_inputs(tl_rng *r, inputs *in, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        uint32_t b = (uint32_t)tl_rng_u64(r);
        float f;
        memcpy(&f, &b, 4); /* uniform over bit patterns: every float32 binade, subnormals, NaNs */
        push(in, f);
    }
}

static size_t total_checked;

static void check_format(tl_numfmt f, size_t random_count)
{
    oracle o;
    oracle_build(&o, f);
    inputs in = {0};
    structured_inputs(&o, &in);
    tl_rng r;
    tl_rng_seed(&r, 1000 + (uint64_t)f);
    random_inputs(&r, &in, random_count);
    uint16_t *codes = malloc(in.n * sizeof *codes);
    assert_non_null(codes);
    for (int sat = 0; sat <= 1; sat++) {
        tl_encode_array16(f, in.x, in.n, sat, codes);
        for (size_t i = 0; i < in.n; i++) {
            uint32_t want = oracle_encode(&o, in.x[i], sat);
            uint16_t got = codes[i];
            if (i % 8 == 0) got = tl_encode(f, in.x[i], sat); /* the scalar path too */
            if (got != want)
                fail_msg("%s sat=%d: %a (%.9g) -> 0x%X, oracle 0x%X", tl_numfmt_name(f), sat, in.x[i],
                         in.x[i], got, want);
        }
        total_checked += in.n;
    }
    free(codes);
    free(in.x);
    oracle_free(&o);
}

/* 2^24 inputs in all: the structured ones plus random patterns, about 800 k per format and mode. */
#define RANDOM_PER_FORMAT 800000

static void fp8_formats(void **state)
{
    (void)state;
    check_format(TL_NF_E4M3FN, RANDOM_PER_FORMAT);
    check_format(TL_NF_E5M2, RANDOM_PER_FORMAT);
    check_format(TL_NF_E4M3FNUZ, RANDOM_PER_FORMAT);
    check_format(TL_NF_E5M2FNUZ, RANDOM_PER_FORMAT);
}

static void fp6_fp4_e8m0(void **state)
{
    (void)state;
    check_format(TL_NF_E2M3, RANDOM_PER_FORMAT);
    check_format(TL_NF_E3M2, RANDOM_PER_FORMAT);
    check_format(TL_NF_E2M1, RANDOM_PER_FORMAT);
    check_format(TL_NF_E8M0, RANDOM_PER_FORMAT);
}

static void bf16_fp16(void **state)
{
    (void)state;
    check_format(TL_NF_BF16, RANDOM_PER_FORMAT);
    check_format(TL_NF_FP16, RANDOM_PER_FORMAT);
}

static void enough_inputs(void **state)
{
    (void)state;
    print_message("oracle checked %zu (input, mode) pairs\n", total_checked);
    assert_true(total_checked >= (size_t)1 << 24);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp8_formats),
        cmocka_unit_test(fp6_fp4_e8m0),
        cmocka_unit_test(bf16_fp16),
        cmocka_unit_test(enough_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
