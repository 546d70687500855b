/* MX blocks (scale rules, FACTS.md vectors, special blocks, FP4 packing, partial blocks), DeepSeek
 * block FP8 and INT4 groups: round trips against element-by-element references. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/tl.h"
#include "numerics/blockfp8.h"
#include "numerics/codes.h"
#include "numerics/formats.h"
#include "numerics/int4.h"
#include "numerics/mx.h"
#include "numerics/quant.h"

static const tl_numfmt MX_ELEMS[] = {TL_NF_E4M3FN, TL_NF_E5M2, TL_NF_E2M3, TL_NF_E3M2, TL_NF_E2M1};

static void fill_normal(float *x, size_t n, uint64_t seed, double scale)
{
    tl_rng r;
    tl_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(tl_rng_normal(&r) * scale);
}

static uint8_t fp4_code(const uint8_t *codes, size_t i) { return (uint8_t)((codes[i / 2] >> (4 * (i & 1))) & 0xF); }

static void mxfp4_max7_vector(void **state)
{
    (void)state;
    float x[32] = {7, 1, -3.5f, 0.25f, 2};
    uint8_t codes[16], sc[1];
    float y[32];
    assert_int_equal(tl_mx_quantize(TL_NF_E2M1, TL_SCALE_FLOOR, 32, x, 32, codes, sc), 0);
    assert_int_equal(sc[0], 127); /* X = 1 */
    assert_int_equal(fp4_code(codes, 0), 0x7); /* 7 clamps to 6 */
    tl_mx_dequantize(TL_NF_E2M1, 32, codes, sc, 32, y);
    assert_true(y[0] == 6 && y[1] == 1 && y[2] == -4 && y[3] == 0 && y[4] == 2);
    assert_int_equal(tl_mx_quantize(TL_NF_E2M1, TL_SCALE_RCEIL, 32, x, 32, codes, sc), 0);
    assert_int_equal(sc[0], 128); /* X = 2 */
    tl_mx_dequantize(TL_NF_E2M1, 32, codes, sc, 32, y);
    assert_true(y[0] == 8 && y[1] == 1 && y[2] == -4 && y[4] == 2);
    assert_int_equal(tl_mx_quantize(TL_NF_E2M1, TL_SCALE_EVEN, 32, x, 32, codes, sc), 0);
    assert_int_equal(sc[0], 128); /* 7 = 1.75 * 4 rounds to 8 in one mantissa bit: next binade */
    assert_int_equal(tl_mx_scale_code(TL_NF_E2M1, TL_SCALE_EVEN, 6.0f), 127);
    assert_int_equal(tl_mx_scale_code(TL_NF_E2M1, TL_SCALE_RCEIL, 6.0f), 127);
    assert_int_equal(tl_mx_scale_code(TL_NF_E2M1, TL_SCALE_RCEIL, 6.000001f), 128);
}

static void scale_rules_match_definitions(void **state)
{
    (void)state;
    tl_rng r;
    tl_rng_seed(&r, 3);
    for (int k = 0; k < 20000; k++) {
        float amax = (float)ldexp(1.0 + tl_rng_uniform(&r), (int)tl_rng_below(&r, 200) - 100);
        for (size_t e = 0; e < 5; e++) {
            tl_numfmt el = MX_ELEMS[e];
            double mx = tl_numfmt_max(el);
            int fl = (int)floor(log2((double)amax)) - tl_numfmt_emax_elem(el);
            assert_int_equal(tl_mx_scale_code(el, TL_SCALE_FLOOR, amax), fl + 127);
            int rc = tl_mx_scale_code(el, TL_SCALE_RCEIL, amax) - 127;
            assert_true((double)amax <= mx * ldexp(1.0, rc));         /* nothing clamps */
            assert_true((double)amax > mx * ldexp(1.0, rc - 1));      /* and it is the smallest such */
            int ev = tl_mx_scale_code(el, TL_SCALE_EVEN, amax) - 127;
            assert_true(ev == fl || ev == fl + 1);
        }
    }
    assert_int_equal(tl_mx_scale_code(TL_NF_E4M3FN, TL_SCALE_FLOOR, 0x1p-140f), 0);   /* clamps low */
    assert_int_equal(tl_mx_scale_code(TL_NF_E4M3FN, TL_SCALE_FLOOR, 0x1.fp127f), 127 + 127 - 8);
    assert_int_equal(tl_mx_scale_code(TL_NF_E4M3FN, TL_SCALE_FLOOR, 0), 0);
    assert_int_equal(tl_mx_scale_code(TL_NF_E4M3FN, TL_SCALE_FLOOR, NAN), 0xFF);
    assert_int_equal(tl_mx_scale_code(TL_NF_E4M3FN, TL_SCALE_FLOOR, INFINITY), 0xFF);
    tl_scale_rule rule;
    assert_int_equal(tl_scale_rule_parse("rceil", &rule), 0);
    assert_int_equal(rule, TL_SCALE_RCEIL);
    assert_int_equal(tl_scale_rule_parse("ceil", &rule), TL_EUSAGE);
}

/* Every element equals decode(encode_sat(x / X)) * X for every format, rule and block size,
 * including partial last blocks and odd block sizes (FP4 packing across bytes). */
static void roundtrip_matches_elementwise(void **state)
{
    (void)state;
    enum { N = 1000 };
    float x[N], y[N];
    uint8_t codes[N], sc[N];
    fill_normal(x, N, 11, 3.0);
    x[17] = 0;
    x[18] = -0.0f;
    x[100] = 1e-30f;
    static const int blocks[] = {32, 16, 7, 1, 1000};
    for (size_t e = 0; e < 5; e++)
        for (int rule = 0; rule < 3; rule++)
            for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
                tl_numfmt el = MX_ELEMS[e];
                int bs = blocks[b];
                size_t n = N - 3; /* not a multiple of any block above but 1 */
                memset(codes, 0xAA, sizeof codes);
                assert_int_equal(tl_mx_quantize(el, (tl_scale_rule)rule, bs, x, n, codes, sc), 0);
                assert_int_equal(tl_mx_dequantize(el, bs, codes, sc, n, y), 0);
                for (size_t i = 0; i < n; i++) {
                    size_t blk = i / (size_t)bs, s0 = blk * (size_t)bs;
                    float amax = 0;
                    for (size_t j = s0; j < n && j < s0 + (size_t)bs; j++) amax = fmaxf(amax, fabsf(x[j]));
                    assert_int_equal(sc[blk], tl_mx_scale_code(el, (tl_scale_rule)rule, amax));
                    float X = ldexpf(1.0f, sc[blk] - 127);
                    uint16_t c = tl_encode(el, x[i] / X, 1);
                    uint8_t stored = el == TL_NF_E2M1 ? fp4_code(codes, i) : codes[i];
                    if (stored != c) fail_msg("%s rule %d block %d: element %zu code 0x%X want 0x%X", tl_numfmt_name(el), rule, bs, i, stored, c);
                    assert_true(y[i] == tl_decode(el, c) * X);
                }
                if (el == TL_NF_E2M1 && n % 2) assert_int_equal(codes[n / 2] >> 4, 0); /* last high nibble */
            }
}

static void fp4_packing_low_nibble_first(void **state)
{
    (void)state;
    float x[7] = {1, 2, 3, 4, -1, -2, 6}; /* amax 6 -> X = 1 under FLOOR */
    uint8_t codes[4], sc[1];
    assert_int_equal(tl_mx_code_bytes(TL_NF_E2M1, 7), 4);
    assert_int_equal(tl_mx_quantize(TL_NF_E2M1, TL_SCALE_FLOOR, 32, x, 7, codes, sc), 0);
    assert_int_equal(sc[0], 127);
    assert_int_equal(codes[0], 0x42); /* 1 -> 0x2 low, 2 -> 0x4 high */
    assert_int_equal(codes[1], 0x65); /* 3 -> 0x5, 4 -> 0x6 */
    assert_int_equal(codes[2], 0xCA); /* -1 -> 0xA, -2 -> 0xC */
    assert_int_equal(codes[3], 0x07); /* 6 -> 0x7, high nibble empty */
}

static void special_blocks(void **state)
{
    (void)state;
    for (size_t e = 0; e < 5; e++) {
        tl_numfmt el = MX_ELEMS[e];
        float x[96], y[96];
        uint8_t codes[96], sc[3];
        fill_normal(x, 96, 5, 1.0);
        for (int i = 0; i < 32; i++) x[i] = (i % 2) ? -0.0f : 0.0f; /* block 0: all zeros */
        x[40] = NAN;                                                /* block 1: a NaN */
        x[95] = -INFINITY;                                          /* block 2: an Inf */
        assert_int_equal(tl_mx_quantize(el, TL_SCALE_FLOOR, 32, x, 96, codes, sc), 0);
        assert_int_equal(sc[0], 0x00);
        assert_int_equal(sc[1], 0xFF);
        assert_int_equal(sc[2], 0xFF);
        assert_int_equal(tl_mx_dequantize(el, 32, codes, sc, 96, y), 0);
        for (int i = 0; i < 32; i++) {
            assert_true(y[i] == 0);
            assert_int_equal(signbit(y[i]) != 0, i % 2); /* signs of zeros kept */
        }
        for (int i = 32; i < 96; i++) assert_true(isnan(y[i]));
        /* a NaN block does not leak into its neighbours */
        x[40] = 1;
        x[95] = 1;
        tl_mx_quantize(el, TL_SCALE_FLOOR, 32, x, 96, codes, sc);
        tl_mx_dequantize(el, 32, codes, sc, 96, y);
        for (int i = 32; i < 96; i++) assert_false(isnan(y[i]));
    }
}

static void mx_bad_input(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4};
    uint8_t c[4], s[4];
    assert_int_equal(tl_mx_quantize(TL_NF_BF16, TL_SCALE_FLOOR, 32, x, 4, c, s), TL_EUSAGE);
    assert_int_equal(tl_mx_quantize(TL_NF_E4M3FNUZ, TL_SCALE_FLOOR, 32, x, 4, c, s), TL_EUSAGE);
    assert_int_equal(tl_mx_quantize(TL_NF_E2M1, TL_SCALE_FLOOR, 0, x, 4, c, s), TL_EUSAGE);
    assert_int_equal(tl_mx_quantize(TL_NF_E2M1, TL_SCALE_FLOOR, 32, NULL, 4, c, s), TL_EUSAGE);
    assert_int_equal(tl_mx_num_blocks(65, 32), 3);
}

/* ---- block FP8 ---- */

static void blockfp8_act_partial_groups(void **state)
{
    (void)state;
    enum { R = 3, C = 300 }; /* groups of 128, 128, 44 */
    float *x = malloc(R * C * sizeof *x), *y = malloc(R * C * sizeof *y);
    uint8_t *codes = malloc(R * C);
    float sc[R * 3];
    fill_normal(x, R * C, 21, 2.0);
    for (int c = 0; c < 128; c++) x[C + c] = 0; /* row 1, group 0 all zero: amax clamps to 1e-4 */
    for (int fnuz = 0; fnuz <= 1; fnuz++)
        for (int ue = 0; ue <= 1; ue++) {
            tl_numfmt f = fnuz ? TL_NF_E4M3FNUZ : TL_NF_E4M3FN;
            float fmax = fnuz ? 240.0f : 448.0f;
            assert_int_equal(tl_bfp8_quantize_act(f, ue, 128, x, R, C, codes, sc), 0);
            assert_int_equal(tl_bfp8_dequantize_act(f, 128, codes, sc, R, C, y), 0);
            for (int r = 0; r < R; r++)
                for (int g = 0; g < 3; g++) {
                    float amax = 0;
                    for (int c = g * 128; c < C && c < (g + 1) * 128; c++) amax = fmaxf(amax, fabsf(x[r * C + c]));
                    float want = fmaxf(amax, 1e-4f) / fmax;
                    float s = sc[r * 3 + g];
                    if (ue) {
                        assert_true(s >= want && s < 2 * want);
                        int e;
                        assert_true(frexpf(s, &e) == 0.5f); /* a power of two */
                    } else {
                        assert_true(s == want);
                    }
                    for (int c = g * 128; c < C && c < (g + 1) * 128; c++) {
                        float v = x[r * C + c];
                        assert_true(y[r * C + c] == tl_decode(f, tl_encode(f, v / s, 1)) * s);
                        assert_true(fabsf(y[r * C + c] - v) <= 0.0625f * fabsf(v) + s * 0x1p-9f);
                    }
                }
            for (int c = 0; c < 128; c++) assert_true(y[C + c] == 0);
        }
    /* a NaN element stays NaN (FP8 NaN code) and does not disturb its group's scale */
    float keep = x[2 * C + 5];
    x[2 * C + 5] = NAN;
    float sc2[R * 3];
    assert_int_equal(tl_bfp8_quantize_act(TL_NF_E4M3FN, 0, 128, x, R, C, codes, sc2), 0);
    tl_bfp8_dequantize_act(TL_NF_E4M3FN, 128, codes, sc2, R, C, y);
    assert_true(isnan(y[2 * C + 5]) && !isnan(y[2 * C + 6]));
    x[2 * C + 5] = keep;
    tl_bfp8_quantize_act(TL_NF_E4M3FN, 0, 128, x, R, C, codes, sc);
    assert_true(sc2[2 * 3] <= sc[2 * 3]);
    free(x), free(y), free(codes);
}

static void blockfp8_weight_tiles(void **state)
{
    (void)state;
    enum { R = 200, C = 300 }; /* tiles 2 x 3, the last row and column of tiles partial */
    float *w = malloc(R * C * sizeof *w), *y = malloc(R * C * sizeof *y);
    uint8_t *codes = malloc(R * C);
    float sc[2 * 3];
    fill_normal(w, R * C, 22, 0.02);
    w[150 * C + 290] = 5; /* only tile (1, 2) sees it */
    assert_int_equal(tl_bfp8_quantize_weight(TL_NF_E4M3FN, 0, 128, w, R, C, codes, sc), 0);
    assert_int_equal(tl_bfp8_dequantize_weight(TL_NF_E4M3FN, 128, codes, sc, R, C, y), 0);
    assert_true(sc[1 * 3 + 2] == 5.0f / 448);
    for (int t = 0; t < 5; t++) assert_true(sc[t] < 0.2f / 448);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float s = sc[(r / 128) * 3 + c / 128], v = w[r * C + c];
            assert_true(y[r * C + c] == tl_decode(TL_NF_E4M3FN, tl_encode(TL_NF_E4M3FN, v / s, 1)) * s);
        }
    assert_int_equal(tl_bfp8_quantize_weight(TL_NF_E5M2, 0, 128, w, R, C, codes, sc), TL_EUSAGE);
    free(w), free(y), free(codes);
}

/* ---- INT4 ---- */

static void int4_groups_roundtrip(void **state)
{
    (void)state;
    enum { R = 4, K = 300 };
    float *w = malloc(R * K * sizeof *w), *y = malloc(R * K * sizeof *y);
    uint8_t *packed = malloc(R * tl_int4_row_bytes(K));
    float sc[R * 10];
    uint8_t z[R * 10];
    fill_normal(w, R * K, 31, 0.05);
    w[5] = 0;
    static const int groups[] = {32, 64, 128};
    for (int asym = 0; asym <= 1; asym++)
        for (int gi = 0; gi < 3; gi++) {
            int g = groups[gi];
            size_t ng = tl_int4_groups(K, g);
            assert_int_equal(tl_int4_quantize(asym, g, w, R, K, packed, sc, z), 0);
            assert_int_equal(tl_int4_dequantize(g, packed, sc, z, R, K, y), 0);
            for (int r = 0; r < R; r++)
                for (int k = 0; k < K; k++) {
                    size_t j = (size_t)r * ng + (size_t)k / (size_t)g;
                    float err = fabsf(y[r * K + k] - w[r * K + k]);
                    if (err > 0.5f * sc[j] * (1 + 1e-5f)) fail_msg("asym %d group %d: error %g > scale/2 %g", asym, g, err, sc[j] / 2);
                    assert_true(z[j] <= 15);
                    if (!asym) assert_int_equal(z[j], 8);
                }
            assert_true(y[5] == 0); /* zero is exact in both schemes */
            if (!asym) { /* symmetric without zeros buffer: z = 8 implied */
                float *y2 = malloc(R * K * sizeof *y2);
                tl_int4_dequantize(g, packed, sc, NULL, R, K, y2);
                assert_memory_equal(y, y2, R * K * sizeof *y);
                free(y2);
            }
        }
    free(w), free(y), free(packed);
}

static void int4_known_group(void **state)
{
    (void)state;
    float w[32] = {7, -7, 3.5f, 2.5f, -0.4f}; /* amax 7 -> scale 1 */
    uint8_t packed[16], z[1];
    float sc[1], y[32];
    assert_int_equal(tl_int4_quantize(0, 32, w, 1, 32, packed, sc, z), 0);
    assert_true(sc[0] == 1.0f);
    assert_int_equal(packed[0], (uint8_t)((15) | (1 << 4))); /* 7 + 8 = 15 low, -7 + 8 = 1 high */
    assert_int_equal(packed[1], (uint8_t)((12) | (10 << 4))); /* 3.5 -> 4 (even), 2.5 -> 2 (even) */
    tl_int4_dequantize(32, packed, sc, z, 1, 32, y);
    assert_true(y[0] == 7 && y[1] == -7 && y[2] == 4 && y[3] == 2 && y[4] == 0);
    /* asymmetric: range [-1, 2] (0 included), scale 0.2, zero point 5 */
    float a[32] = {2, -1, 0.5f};
    for (int i = 3; i < 32; i++) a[i] = 0.1f;
    assert_int_equal(tl_int4_quantize(1, 32, a, 1, 32, packed, sc, z), 0);
    assert_true(fabsf(sc[0] - 0.2f) < 1e-7f);
    assert_int_equal(z[0], 5);
    tl_int4_dequantize(32, packed, sc, z, 1, 32, y);
    assert_true(fabsf(y[0] - 2) < 1e-6f && fabsf(y[1] + 1) < 1e-6f);
    assert_int_equal(tl_int4_quantize(0, 1, w, 1, 32, packed, sc, z), TL_EUSAGE);
}

/* Every amax and range over data ignores NaN, a signalling NaN (0x7F810000, what bf16 0x7F81
 * widens to) as much as a quiet one: glibc's fmaxf returns NaN for a signalling NaN, which dropped
 * every value before it. Each case: a group of 1.0 with 4.0 (INT4 asymmetric: and -2.0) ahead of
 * the NaN. */
static void nan_is_ignored_by_every_amax(void **state)
{
    (void)state;
    static const uint32_t nan_bits[] = {0x7F810000u, 0xFF810000u, 0x7FC00001u, 0xFFC00000u};
    for (size_t n = 0; n < sizeof nan_bits / sizeof nan_bits[0]; n++) {
        const float nan = tl_code_bits_f32(nan_bits[n]);
        assert_true(tl_code_max_no_nan(0.0f, nan) == 0.0f && tl_code_max_no_nan(nan, 3.0f) == 3.0f);
        assert_true(tl_code_min_no_nan(0.0f, nan) == 0.0f && tl_code_min_no_nan(nan, -3.0f) == -3.0f);
        assert_true(isnan(tl_code_max_no_nan(nan, nan)) && tl_code_max_no_nan(2.0f, 5.0f) == 5.0f);
        assert_true(tl_bfp8_scale(TL_NF_E4M3FN, nan, 0) == 1e-4f / 448.0f); /* a NaN amax: the clamp */
        float x[128 * 128], sc[2], y[256];
        uint8_t c[128 * 128];
        for (int i = 0; i < 128 * 128; i++) x[i] = 1.0f;
        x[0] = 4.0f, x[1] = nan;
        assert_int_equal(tl_bfp8_quantize_act(TL_NF_E4M3FN, 0, 128, x, 1, 256, c, sc), 0);
        assert_true(sc[0] == 4.0f / 448.0f && sc[1] == 1.0f / 448.0f);
        assert_int_equal(c[0], 0x7E);
        assert_int_equal(c[1] & 0x7F, 0x7F);
        assert_int_equal(tl_bfp8_quantize_act(TL_NF_E4M3FNUZ, 0, 128, x, 1, 256, c, sc), 0);
        assert_true(sc[0] == 4.0f / 240.0f);
        assert_int_equal(tl_bfp8_quantize_weight(TL_NF_E4M3FN, 0, 128, x, 128, 128, c, sc), 0);
        assert_true(sc[0] == 4.0f / 448.0f);
        assert_int_equal(tl_quant_roundtrip(TL_QS_FP8_E4M3_TENSOR, TL_SCALE_FLOOR, x, 256, y), 0);
        assert_true(y[0] == 4.0f && isnan(y[1]) && y[2] == 1.0f);
        assert_int_equal(tl_quant_roundtrip(TL_QS_FP8_BLOCK128, TL_SCALE_FLOOR, x, 256, y), 0);
        assert_true(y[0] == 4.0f && isnan(y[1]));
        uint8_t packed[64], z[2];
        float isc[2];
        assert_int_equal(tl_int4_quantize(0, 128, x, 1, 128, packed, isc, z), 0);
        assert_true(isc[0] == 4.0f / 7.0f);
        x[2] = -2.0f;
        assert_int_equal(tl_int4_quantize(1, 128, x, 1, 128, packed, isc, z), 0);
        assert_true(isc[0] == 6.0f / 15.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mxfp4_max7_vector),
        cmocka_unit_test(scale_rules_match_definitions),
        cmocka_unit_test(roundtrip_matches_elementwise),
        cmocka_unit_test(fp4_packing_low_nibble_first),
        cmocka_unit_test(special_blocks),
        cmocka_unit_test(mx_bad_input),
        cmocka_unit_test(blockfp8_act_partial_groups),
        cmocka_unit_test(blockfp8_weight_tiles),
        cmocka_unit_test(int4_groups_roundtrip),
        cmocka_unit_test(int4_known_group),
        cmocka_unit_test(nan_is_ignored_by_every_amax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
