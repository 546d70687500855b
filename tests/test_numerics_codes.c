/* numerics/codes.h (the kernels' per-element conversions) against numerics/formats.h: every code
 * decoded, and encoding checked on every rounding boundary of BF16 and E4M3FN (each float32 whose
 * bits below the kept ones are 0, just under half, half, just over half, or all ones), on the
 * specials, and on a strided sweep of all 2^32 bit patterns. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "numerics/codes.h"
#include "numerics/formats.h"
#include "numerics/blockfp8.h"
#include "numerics/int4.h"
#include "numerics/mx.h"

static float f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* decoded values agree bit for bit (NaN: both NaN) */
static void same_value(float got, float want, uint32_t code, const char *fmt)
{
    if (isnan(want)) {
        if (!isnan(got)) fail_msg("%s code 0x%X: %g, want NaN", fmt, code, (double)got);
        return;
    }
    uint32_t g, w;
    memcpy(&g, &got, sizeof g);
    memcpy(&w, &want, sizeof w);
    if (g != w) fail_msg("%s code 0x%X: %a, want %a", fmt, code, (double)got, (double)want);
}

static void every_code_decodes_as_numerics_does(void **state)
{
    (void)state;
    for (uint32_t c = 0; c < 65536; c++)
        same_value(tl_code_bf16_to_f32(c), tl_decode(TL_NF_BF16, (uint16_t)c), c, "bf16");
    for (uint32_t c = 0; c < 256; c++) {
        same_value(tl_code_e4m3_to_f32(c), tl_decode(TL_NF_E4M3FN, (uint16_t)c), c, "e4m3");
        same_value(tl_code_e8m0_to_f32(c), tl_decode(TL_NF_E8M0, (uint16_t)c), c, "e8m0");
        /* bits above the code are ignored */
        same_value(tl_code_e4m3_to_f32(c | 0xA500u), tl_decode(TL_NF_E4M3FN, (uint16_t)c), c, "e4m3 high bits");
    }
    for (uint32_t c = 0; c < 16; c++) {
        same_value(tl_code_e2m1_to_f32(c), tl_decode(TL_NF_E2M1, (uint16_t)c), c, "e2m1");
        same_value(tl_code_e2m1_to_f32(c | 0xF0u), tl_decode(TL_NF_E2M1, (uint16_t)c), c, "e2m1 high bits");
    }
}

/* every BF16 value goes back to its own code without rounding; NaN codes stay NaN */
static void exact_values_keep_their_bf16_code(void **state)
{
    (void)state;
    for (uint32_t c = 0; c < 65536; c++) {
        const uint32_t back = tl_code_bf16_from_exact_f32(tl_code_bf16_to_f32(c));
        if (isnan(tl_decode(TL_NF_BF16, (uint16_t)c))) assert_true(isnan(tl_code_bf16_to_f32(back)));
        else if (back != c) fail_msg("bf16 code 0x%04X came back as 0x%04X", c, back);
    }
    /* decoded E2M1 values times any E8M0 scale, and E4M3 values times scales from code 3 on, are
     * BF16 values: the shift equals RNE (the contract's exact inputs) */
    int e4m3_inexact = 0;
    for (uint32_t b = 0; b < 256; b++)
        for (uint32_t sc = 0; sc < 255; sc++) {
            const float v = tl_code_e4m3_to_f32(b) * tl_code_e8m0_to_f32(sc), w = tl_code_e2m1_to_f32(b) * tl_code_e8m0_to_f32(sc);
            if (!isnan(v)) {
                if (sc >= 3) assert_int_equal(tl_code_bf16_from_exact_f32(v), tl_code_bf16_from_f32(v));
                else e4m3_inexact += tl_code_bf16_from_exact_f32(v) != tl_code_bf16_from_f32(v);
            }
            assert_int_equal(tl_code_bf16_from_exact_f32(w), tl_code_bf16_from_f32(w));
        }
    assert_true(e4m3_inexact > 0); /* the contract's bound is tight: codes 0-2 do lose a step */
}

/* every byte of packed INT4: the BF16 pair minus the offset is what tl_int4_dequantize gives */
static void int4_bytes_match_numerics(void **state)
{
    (void)state;
    uint8_t packed[256];
    float scale = 1.0f, y[512];
    for (int b = 0; b < 256; b++) packed[b] = (uint8_t)b;
    assert_int_equal(tl_int4_dequantize(512, packed, &scale, NULL, 1, 512, y), 0); /* symmetric: zero 8 */
    const float off = tl_code_bf16_to_f32(TL_CODE_INT4_BF16_OFFSET);
    assert_true(off == 128.0f + (float)TL_CODE_INT4_ZERO);
    for (uint32_t b = 0; b < 256; b++) {
        const uint32_t pair = tl_code_int4x2_bf16_plus128(b);
        assert_true(tl_code_bf16_to_f32(pair & 0xFFFFu) - off == y[2 * b]);
        assert_true(tl_code_bf16_to_f32(pair >> 16) - off == y[2 * b + 1]);
    }
}

/* place() puts two codes of format f (the low `bits` of its input first) into a BF16 pair of their
 * values times 1 / unscale: check every input, both halves, against tl_decode */
static void placed_pairs_match(uint32_t (*place)(uint32_t), uint32_t unscale_code, float unscale_want, tl_numfmt f,
                               int bits, const char *name)
{
    const float unscale = tl_code_bf16_to_f32(unscale_code);
    assert_true(unscale == unscale_want);
    const uint32_t mask = (1u << bits) - 1u;
    for (uint32_t x = 0; x < 1u << (2 * bits); x++) {
        const uint32_t pair = place(x);
        same_value(tl_code_bf16_to_f32(pair & 0xFFFFu) * unscale, tl_decode(f, (uint16_t)(x & mask)), x, name);
        same_value(tl_code_bf16_to_f32(pair >> 16) * unscale, tl_decode(f, (uint16_t)(x >> bits)), x, name);
    }
}

/* every pair of E4M3 codes (NaN codes: NaN) and every byte of packed E2M1 */
static void e4m3_pairs_match_numerics(void **state)
{
    (void)state;
    placed_pairs_match(tl_code_e4m3x2_bf16_2m120, TL_CODE_E4M3_BF16_UNSCALE, 0x1p120f, TL_NF_E4M3FN, 8, "e4m3 pair");
}
static void e2m1_bytes_match_numerics(void **state)
{
    (void)state;
    placed_pairs_match(tl_code_e2m1x2_bf16_2m126, TL_CODE_E2M1_BF16_UNSCALE, 0x1p126f, TL_NF_E2M1, 4, "e2m1 byte");
}

/* fma.rn.bf16x2 on the host: each half a x b + c, rounded once to BF16 (RNE). Exact for the
 * kernels' chains: their products have at most 8 significant bits, so float holds them exactly. */
static uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t d = 0;
    for (int h = 0; h < 32; h += 16) {
        const float x = tl_code_bf16_to_f32((a >> h) & 0xFFFFu) * tl_code_bf16_to_f32((b >> h) & 0xFFFFu) +
                        tl_code_bf16_to_f32((c >> h) & 0xFFFFu);
        d |= tl_code_bf16_from_f32(x) << h;
    }
    return d;
}

/* each half of the chain's pair is the BF16 (RNE) of the value the reference reads */
static void same_bf16(uint32_t pair, float lo, float hi, uint32_t what, const char *name)
{
    const float want[2] = {lo, hi};
    for (int h = 0; h < 2; h++) {
        const uint32_t got = (pair >> (16 * h)) & 0xFFFFu, w = tl_encode(TL_NF_BF16, want[h], 0);
        if (isnan(want[h]) ? !isnan(tl_code_bf16_to_f32(got)) : got != w)
            fail_msg("%s 0x%X half %d: 0x%04X, want 0x%04X", name, what, h, got, w);
    }
}

/* The kernel's dequantization chains (kernels/moe.hip, weights_bf16 on NVIDIA), constants and all,
 * against numerics: INT4 every byte; E2M1 every byte at every E8M0 scale; E4M3 every pair at the
 * scales at either end of the range and a few between. */
static void kernel_chains_match_numerics(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 256; b++)
        same_bf16(fma_bf16x2(tl_code_int4x2_bf16_plus128(b), TL_CODE_BF16X2_ONE, TL_CODE_INT4_BF16X2_MINUS_OFFSET),
                  (float)((int)(b & 15u) - (int)TL_CODE_INT4_ZERO), (float)((int)(b >> 4) - (int)TL_CODE_INT4_ZERO), b, "int4");
    static const uint32_t e4m3_scales[] = {0, 1, 2, 3, 4, 64, 120, 127, 128, 200, 253, 254, 255};
    for (uint32_t c = 0; c < 256; c++) {
        const float s = tl_code_e8m0_to_f32(c);
        const uint32_t scale = tl_code_bf16x2_splat(tl_code_bf16_from_exact_f32(s));
        for (uint32_t b = 0; b < 256; b++) {
            const uint32_t u = fma_bf16x2(tl_code_e2m1x2_bf16_2m126(b), tl_code_bf16x2_splat(TL_CODE_E2M1_BF16_UNSCALE),
                                          TL_CODE_BF16X2_MINUS0);
            same_bf16(fma_bf16x2(u, scale, TL_CODE_BF16X2_MINUS0), tl_decode(TL_NF_E2M1, (uint16_t)(b & 15u)) * s,
                      tl_decode(TL_NF_E2M1, (uint16_t)(b >> 4)) * s, b | c << 8, "e2m1 x scale");
        }
    }
    for (size_t i = 0; i < sizeof e4m3_scales / sizeof e4m3_scales[0]; i++) {
        const float s = tl_code_e8m0_to_f32(e4m3_scales[i]);
        const uint32_t scale = tl_code_bf16x2_splat(tl_code_bf16_from_exact_f32(s));
        for (uint32_t h = 0; h < 65536; h++) {
            const uint32_t u = fma_bf16x2(tl_code_e4m3x2_bf16_2m120(h), tl_code_bf16x2_splat(TL_CODE_E4M3_BF16_UNSCALE),
                                          TL_CODE_BF16X2_MINUS0);
            same_bf16(fma_bf16x2(u, scale, TL_CODE_BF16X2_MINUS0), tl_decode(TL_NF_E4M3FN, (uint16_t)(h & 0xFFu)) * s,
                      tl_decode(TL_NF_E4M3FN, (uint16_t)(h >> 8)) * s, h, "e4m3 x scale");
        }
    }
}

/* one input through both encoders; *checked counts them */
static void encodes_alike(uint32_t u, long *checked)
{
    const float x = f32(u);
    const uint32_t b = tl_code_bf16_from_f32(x), bw = tl_encode(TL_NF_BF16, x, 0);
    if (b != bw) fail_msg("bf16 of %a (0x%08X): 0x%04X, want 0x%04X", (double)x, u, b, bw);
    const uint32_t e = tl_code_e4m3_from_f32(x), ew = tl_encode(TL_NF_E4M3FN, x, 1);
    if (e != ew) fail_msg("e4m3 of %a (0x%08X): 0x%02X, want 0x%02X", (double)x, u, e, ew);
    const uint32_t z = tl_code_e4m3fnuz_from_f32(x), zw = tl_encode(TL_NF_E4M3FNUZ, x, 1);
    if (z != zw) fail_msg("e4m3fnuz of %a (0x%08X): 0x%02X, want 0x%02X", (double)x, u, z, zw);
    const uint32_t f = tl_code_e2m1_from_f32(x), fw = tl_encode(TL_NF_E2M1, x, 1);
    if (f != fw) fail_msg("e2m1 of %a (0x%08X): 0x%X, want 0x%X", (double)x, u, f, fw);
    (*checked)++;
}

static void rounding_boundaries_encode_as_numerics_does(void **state)
{
    (void)state;
    long checked = 0;
    /* BF16 keeps the top 16 bits: its boundaries sit in the low 16 */
    static const uint32_t low16[] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
    for (uint32_t hi = 0; hi < 65536; hi++)
        for (size_t i = 0; i < sizeof low16 / sizeof low16[0]; i++) encodes_alike(hi << 16 | low16[i], &checked);
    /* E4M3 keeps 3 mantissa bits of a normal float32: its boundaries sit in the low 20 bits */
    static const uint32_t low20[] = {0x00000u, 0x00001u, 0x7FFFFu, 0x80000u, 0x80001u, 0xFFFFFu};
    for (uint32_t hi = 0; hi < 4096; hi++)
        for (size_t i = 0; i < sizeof low20 / sizeof low20[0]; i++) encodes_alike(hi << 20 | low20[i], &checked);
    /* E4M3 subnormals are steps of 2^-9 below 2^-6: each step, half step and its neighbours */
    for (int k = 0; k <= 16; k++) {
        const float half = (float)k * (1.0f / 1024.0f); /* k half-steps of 2^-10 */
        uint32_t u;
        memcpy(&u, &half, sizeof u);
        for (int d = -2; d <= 2; d++) {
            encodes_alike(u + (uint32_t)d, &checked);
            encodes_alike((u + (uint32_t)d) | 0x80000000u, &checked);
        }
    }
    /* E4M3FNUZ subnormals are steps of 2^-10; E2M1's grid and its midpoints: each and its neighbours */
    static const float grid[] = {0x1p-11f, 0x1p-10f, 0x3p-11f, 0x1p-9f, 0x5p-11f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f,
                                 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f, 232.0f, 240.0f, 248.0f};
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) {
        uint32_t u;
        memcpy(&u, &grid[i], sizeof u);
        for (int d = -2; d <= 2; d++) {
            encodes_alike(u + (uint32_t)d, &checked);
            encodes_alike((u + (uint32_t)d) | 0x80000000u, &checked);
        }
    }
    /* specials: zeros, Inf, NaN (quiet, signalling, negative), the largest and smallest floats */
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                       0xFFC00000u, 0x7F800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F7FFFFFu,
                                       0x00000001u, 0x80000001u, 0x43E00000u, 0x43E80000u, 0x43F00000u};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) encodes_alike(special[i], &checked);
    /* and a stride through every bit pattern */
    for (uint64_t u = 0; u < (1ull << 32); u += 65521u) encodes_alike((uint32_t)u, &checked);
    assert_true(checked > 450000);
}

/* The MX scale code and the power-of-two round-up the quant kernels compute in integers, against
 * numerics' own (mx.h, blockfp8.h): every bf16 amax pattern and a stride through float32. */
static void mx_scale_and_pow2_match_numerics(void **state)
{
    (void)state;
    long checked = 0;
    for (uint64_t u = 0; u < 0x80000000ull; u += (u < 0x8000u ? 1u : 4093u)) {
        const uint32_t bits = u < 0x8000u ? (uint32_t)u << 16 : (uint32_t)u; /* every positive bf16, then a stride */
        const float a = f32(bits);
        for (int up = 0; up < 2; up++) {
            const tl_scale_rule rule = up ? TL_SCALE_RCEIL : TL_SCALE_FLOOR;
            const uint32_t c8 = tl_code_e8m0_mx_scale(bits, 8, 0x600000u, up), w8 = tl_mx_scale_code(TL_NF_E4M3FN, rule, a);
            const uint32_t c4 = tl_code_e8m0_mx_scale(bits, 2, 0x400000u, up), w4 = tl_mx_scale_code(TL_NF_E2M1, rule, a);
            if (c8 != w8) fail_msg("mxfp8 %s scale of %a: 0x%02X, want 0x%02X", tl_scale_rule_name(rule), (double)a, c8, w8);
            if (c4 != w4) fail_msg("mxfp4 %s scale of %a: 0x%02X, want 0x%02X", tl_scale_rule_name(rule), (double)a, c4, w4);
            if (c8 != 0xFFu && tl_code_e8m0_inverse(c8) != ldexpf(1.0f, 127 - (int)c8)) fail_msg("inverse of 0x%02X", c8);
        }
        if (a > 0 && isfinite(a)) {
            const float s = a / 448.0f;
            if (!isnormal(s)) continue;
            int e;
            const float fr = frexpf(s, &e), want = ldexpf(1.0f, fr == 0.5f ? e - 1 : e);
            if (tl_code_pow2_ceil(s) != want) fail_msg("pow2 ceil of %a", (double)s);
        }
        checked++;
    }
    assert_true(tl_code_pow2_ceil(INFINITY) == tl_bfp8_scale(TL_NF_E4M3FN, INFINITY, 1)); /* the host's 1.0 */
    assert_true(checked > 500000 && checked < 1000000);
}

/* The values the kernels rely on, written out. */
static void known_values(void **state)
{
    (void)state;
    assert_true(tl_code_e4m3_to_f32(0x7E) == 448.0f && tl_code_e4m3_to_f32(0x38) == 1.0f);
    assert_true(tl_code_e4m3_to_f32(0xC0) == -2.0f && tl_code_e4m3_to_f32(0x01) == 1.0f / 512);
    assert_true(isnan(tl_code_e4m3_to_f32(0x7F)) && isnan(tl_code_e4m3_to_f32(0xFF)));
    assert_int_equal(tl_code_e4m3_from_f32(449.0f), 0x7E);  /* FACTS.md: 449 -> 448 */
    assert_int_equal(tl_code_e4m3_from_f32(464.0f), 0x7E);  /* tie to even */
    assert_int_equal(tl_code_e4m3_from_f32(-1e9f), 0xFE);   /* saturating */
    assert_int_equal(tl_code_e4m3_from_f32(NAN), 0x7F);     /* NaN stays NaN */
    assert_int_equal(tl_code_e4m3_from_f32(0x1.8p-9f), 0x02); /* 1.5 steps: tie to even */
    assert_int_equal(tl_code_bf16_from_f32(1.5f), 0x3FC0);
    assert_int_equal(tl_code_bf16_from_f32(f32(0x7FFFFFFFu)), 0x7FC0); /* a NaN the carry would wrap */
    assert_int_equal(tl_code_bf16_from_f32(f32(0x7F7FFFFFu)), 0x7F80); /* max + half an ulp: Inf */
    assert_true(tl_code_bf16_to_f32(0x3FC0) == 1.5f);
    assert_true(tl_code_e2m1_to_f32(0x7) == 6.0f && tl_code_e2m1_to_f32(0x9) == -0.5f);
    assert_true(tl_code_e8m0_to_f32(127) == 1.0f && tl_code_e8m0_to_f32(0) == 0x1p-127f);
    assert_true(isnan(tl_code_e8m0_to_f32(255)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_decodes_as_numerics_does),
        cmocka_unit_test(rounding_boundaries_encode_as_numerics_does),
        cmocka_unit_test(exact_values_keep_their_bf16_code),
        cmocka_unit_test(int4_bytes_match_numerics),
        cmocka_unit_test(e2m1_bytes_match_numerics),
        cmocka_unit_test(e4m3_pairs_match_numerics),
        cmocka_unit_test(kernel_chains_match_numerics),
        cmocka_unit_test(mx_scale_and_pow2_match_numerics),
        cmocka_unit_test(known_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
