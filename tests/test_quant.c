/* quant (contract/quant.h): for every scheme, rule, scale layout and option, the reference (numerics'
 * quantizers over rows), the naive scalar loop and the kernels' own arithmetic on the host agree bit
 * for bit on ordinary and adversarial inputs; hand-made groups whose codes and scales are known
 * (all-zero, tiny, huge, NaN, Inf); the round trip; the dispatch record's byte accounting (GLM-5:
 * 12,288 -> 6,408) and its unpack; the model's floor and limiter; the shape checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "contract/quant.h"
#include "core/tl.h"
#include "numerics/rotate.h"
#include "reference/quant.h"
#include "simulator/hw.h"
#include "simulator/quant.h"

typedef struct {
    uint8_t *c[3];
    void *s[3];
    uint16_t *x;
    int32_t *ids;
    float *w;
} bufs;

static void bufs_alloc(const tl_quant_shape *s, bufs *b)
{
    const size_t cb = tl_quant_code_bytes(s), sb = tl_quant_scale_count(s) * tl_quant_scale_size(s) + 16;
    b->x = malloc((size_t)s->rows * s->k * 2);
    b->ids = malloc((size_t)s->rows * s->topk * 4 + 4);
    b->w = malloc((size_t)s->rows * s->topk * 4 + 4);
    for (int i = 0; i < 3; i++) {
        b->c[i] = malloc(cb);
        b->s[i] = malloc(sb);
        memset(b->c[i], 0xA5 + i, cb);
        memset(b->s[i], 0x5A + i, sb);
    }
    assert_non_null(b->x);
}

static void bufs_free(bufs *b)
{
    free(b->x), free(b->ids), free(b->w);
    for (int i = 0; i < 3; i++) free(b->c[i]), free(b->s[i]);
}

/* The three quantizers on x (already in b->x), compared; then the round trip. */
static void three_agree(const tl_quant_shape *s, bufs *b, const char *what)
{
    const int d = s->scheme == TL_QUANT_DISPATCH;
    assert_int_equal(tl_quant_reference(s, b->x, b->ids, b->w, 5, b->c[0], d ? NULL : b->s[0]), 0);
    assert_int_equal(tl_quant_naive(s, b->x, b->ids, b->w, 5, b->c[1], d ? NULL : b->s[1]), 0);
    assert_int_equal(tl_quant_host_kernel(s, b->x, b->ids, b->w, 5, b->c[2], d ? NULL : b->s[2]), 0);
    const size_t cb = tl_quant_code_bytes(s), sb = tl_quant_scale_count(s) * tl_quant_scale_size(s);
    for (int i = 1; i < 3; i++) {
        if (memcmp(b->c[0], b->c[i], cb) != 0)
            fail_msg("%s %ld x %ld: codes of path %d differ from the reference", what, s->rows, s->k, i);
        if (!d && memcmp(b->s[0], b->s[i], sb) != 0)
            fail_msg("%s %ld x %ld: scales of path %d differ from the reference", what, s->rows, s->k, i);
    }
    tl_quant_roundtrip r;
    if (tl_quant_roundtrip_check(s, b->x, b->ids, b->w, 5, b->c[0], d ? NULL : b->s[0], &r) != 0)
        fail_msg("%s %ld x %ld: round trip: %s", what, s->rows, s->k, tl_last_error());
}

static void sweep(tl_quant_shape base, const char *what)
{
    static const long rows[] = {1, 3, 130};
    static const long ks[] = {128, 256, 1152};
    for (int d = 0; d < TL_QDIST_N; d++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
                tl_quant_shape s = base;
                s.rows = rows[i], s.k = ks[j];
                assert_int_equal(tl_quant_shape_check(&s), 0);
                bufs b;
                bufs_alloc(&s, &b);
                assert_int_equal(tl_quant_inputs_make(&s, (tl_quant_dist)d, 11 + i + 7 * j, b.x,
                                                      s.scheme == TL_QUANT_DISPATCH ? b.ids : NULL, b.w), 0);
                three_agree(&s, &b, what);
                bufs_free(&b);
            }
}

static tl_quant_shape shape(tl_quant_scheme_id id)
{
    tl_quant_shape s;
    memset(&s, 0, sizeof s);
    s.scheme = id;
    s.topk = 8;
    s.rows = 1;
    s.k = 128;
    return s;
}

static void fp8_family_three_agree(void **state)
{
    (void)state;
    for (int fnuz = 0; fnuz < 2; fnuz++)
        for (int ue = 0; ue < 2; ue++)
            for (int col = 0; col < 2; col++) {
                tl_quant_shape s = shape(fnuz ? TL_QUANT_FP8_FNUZ : TL_QUANT_FP8);
                s.ue8m0 = ue;
                s.layout = col ? TL_QUANT_SCALES_COL : TL_QUANT_SCALES_ROW;
                sweep(s, fnuz ? "fp8-fnuz" : "fp8");
            }
}

static void mx_three_agree(void **state)
{
    (void)state;
    for (int fp4 = 0; fp4 < 2; fp4++)
        for (int up = 0; up < 2; up++) {
            tl_quant_shape s = shape(fp4 ? TL_QUANT_MXFP4 : TL_QUANT_MXFP8);
            s.round_up = up;
            sweep(s, fp4 ? "mxfp4" : "mxfp8");
        }
}

static void query_three_agree(void **state)
{
    (void)state;
    for (int had = 0; had < 2; had++)
        for (int ue = 0; ue < 2; ue++) {
            tl_quant_shape s = shape(TL_QUANT_FP8_QUERY);
            s.hadamard = had, s.ue8m0 = ue;
            sweep(s, had ? "fp8-query hadamard" : "fp8-query");
        }
}

static void dispatch_three_agree(void **state)
{
    (void)state;
    for (int ue = 0; ue < 2; ue++)
        for (int topk = 1; topk <= 16; topk += 7) {
            tl_quant_shape s = shape(TL_QUANT_DISPATCH);
            s.ue8m0 = ue, s.topk = topk;
            sweep(s, "dispatch");
        }
}

/* ---- hand-made groups ---- */

static uint16_t bf(float v) { return (uint16_t)tl_code_bf16_from_f32(v); }

static void quantize_one(tl_quant_shape *s, const uint16_t *x, uint8_t *codes, void *scales)
{
    bufs b;
    bufs_alloc(s, &b);
    memcpy(b.x, x, (size_t)s->rows * s->k * 2);
    three_agree(s, &b, "hand-made");
    memcpy(codes, b.c[0], tl_quant_code_bytes(s));
    memcpy(scales, b.s[0], tl_quant_scale_count(s) * tl_quant_scale_size(s));
    bufs_free(&b);
}

static void fp8_special_groups(void **state)
{
    (void)state;
    uint16_t x[5 * 128];
    for (int i = 0; i < 5 * 128; i++) x[i] = bf(0.5f + (float)(i % 7) / 8.0f);
    for (int i = 0; i < 128; i++) x[i] = (uint16_t)(i % 2 ? 0x8000u : 0u); /* group 0: zeros, signs mixed */
    for (int i = 128; i < 256; i++) x[i] = bf(1e-6f);                     /* group 1: tiny */
    x[256 + 3] = 0xFFC0u;                                                 /* group 2: a -NaN */
    x[384 + 9] = 0x7F80u;                                                 /* group 3: +Inf */
    x[512 + 1] = 0x7F7Fu;                                                 /* group 4: bf16's largest */
    tl_quant_shape s = shape(TL_QUANT_FP8);
    s.k = 5 * 128;
    uint8_t c[5 * 128];
    float sc[5];
    quantize_one(&s, x, c, sc);
    assert_true(sc[0] == 1e-4f / 448.0f && sc[1] == 1e-4f / 448.0f); /* the clamp: never 0 or NaN */
    assert_int_equal(c[0], 0x00);
    assert_int_equal(c[1], 0x80); /* -0 keeps its sign in E4M3FN */
    assert_int_equal(c[256 + 3], 0xFF); /* NaN of its sign */
    assert_true(sc[2] == tl_code_bf16_to_f32(bf(0.5f + 6.0f / 8.0f)) / 448.0f); /* amax ignores the NaN */
    assert_true(isinf(sc[3]));
    assert_int_equal(c[384 + 9], 0xFF); /* Inf / Inf: x86-64's default NaN, sign set */
    assert_int_equal(c[384 + 10], 0x00); /* finite / Inf = +0 */
    assert_int_equal(c[512 + 1], 0x7E); /* the group's amax encodes to 448 */
    s.ue8m0 = 1;
    quantize_one(&s, x, c, sc);
    assert_true(sc[3] == 1.0f);         /* ue8m0 of an Inf group: 1.0, as glibc's frexpf gives */
    assert_int_equal(c[384 + 9], 0x7E); /* Inf saturates to 448 */
    for (int g = 0; g < 5; g++) {
        int e;
        assert_true(g == 3 || (frexpf(sc[g], &e) == 0.5f)); /* powers of two */
    }
    s.ue8m0 = 0;
    s.scheme = TL_QUANT_FP8_FNUZ;
    quantize_one(&s, x, c, sc);
    assert_int_equal(c[1], 0x00);       /* FNUZ has no -0 */
    assert_int_equal(c[256 + 3], 0x80); /* its only NaN */
    assert_int_equal(c[384 + 9], 0x80);
    assert_int_equal(c[512 + 1], 0x7F); /* 240 */
}

/* A NaN in a group is ignored by its amax, a signalling one (bf16 0x7F81, float32 0x7F810000 once
 * widened) as much as a quiet one: 3 x 128 rows of 1.0 with x[0] = 4.0 and x[1] NaN give scale
 * 4 / 448 in row 0 (glibc's fmaxf returns NaN for the signalling one, which dropped the 4.0 before
 * it: 1 / 448), in every fp8 scheme, the three quantizers agreeing; the NaN codes as NaN. */
static void fp8_amax_ignores_every_nan(void **state)
{
    (void)state;
    static const uint16_t nans[] = {0x7F81u, 0xFF81u, 0x7FC1u, 0xFFC0u}; /* sNaN, -sNaN, qNaN, -qNaN */
    static const tl_quant_scheme_id ids[] = {TL_QUANT_FP8, TL_QUANT_FP8_FNUZ, TL_QUANT_FP8_QUERY, TL_QUANT_DISPATCH};
    for (size_t n = 0; n < sizeof nans / sizeof nans[0]; n++)
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
            for (int at = 1; at <= 127; at += 126) { /* the NaN after the 4.0, and last */
                tl_quant_shape s = shape(ids[i]);
                s.rows = 3;
                bufs b;
                bufs_alloc(&s, &b);
                for (int e = 0; e < 3 * 128; e++) b.x[e] = bf(1.0f);
                b.x[0] = bf(4.0f), b.x[at] = nans[n];
                for (int e = 0; e < 3 * s.topk; e++) b.ids[e] = e % 7, b.w[e] = 0.125f;
                three_agree(&s, &b, "a NaN in a group");
                const float max = ids[i] == TL_QUANT_FP8_FNUZ ? 240.0f : 448.0f;
                float sc0;
                if (ids[i] == TL_QUANT_DISPATCH) memcpy(&sc0, b.c[0] + tl_quant_record_layout(128, s.topk).scales, 4);
                else sc0 = ((const float *)b.s[0])[0];
                if (sc0 != 4.0f / max)
                    fail_msg("scheme %d, NaN 0x%04X at %d: scale %g x max, wanted 4", (int)ids[i], nans[n], at, sc0 * max);
                if (ids[i] == TL_QUANT_FP8 || ids[i] == TL_QUANT_DISPATCH) {
                    assert_int_equal(b.c[0][0], 0x7E);                              /* 4.0 at 4/448: 448 */
                    assert_int_equal(b.c[0][at], (nans[n] & 0x8000u ? 0x80 : 0) | 0x7F); /* NaN of its sign */
                    assert_true(((const float *)b.s[0])[1] == 1.0f / 448.0f || ids[i] == TL_QUANT_DISPATCH);
                }
                bufs_free(&b);
            }
}

static void mx_special_blocks(void **state)
{
    (void)state;
    uint16_t x[4 * 32];
    for (int i = 0; i < 128; i++) x[i] = bf(1.0f);
    for (int i = 0; i < 32; i++) x[i] = (uint16_t)(i % 2 ? 0x8000u : 0u); /* block 0: zeros */
    x[32 + 5] = 0x7FC0u;                                                   /* block 1: NaN */
    x[64 + 2] = 0xFF80u;                                                   /* block 2: -Inf */
    x[96] = bf(7.0f); /* block 3: max 7: FLOOR X = 1 and 7 -> 6; round-up X = 2 (FACTS.md) */
    tl_quant_shape s = shape(TL_QUANT_MXFP4);
    s.k = 128;
    uint8_t c[64], sc[4];
    quantize_one(&s, x, c, sc);
    assert_int_equal(sc[0], 0x00);
    assert_int_equal(c[0], 0x80); /* +0 low nibble, -0 high nibble */
    assert_int_equal(sc[1], 0xFF);
    assert_int_equal(sc[2], 0xFF);
    for (int i = 16; i < 48; i++) assert_int_equal(c[i], 0); /* a NaN scale's codes are 0 */
    assert_int_equal(sc[3], 127);
    assert_int_equal(c[48] & 0x0F, 0x7); /* 7 -> 6 */
    s.round_up = 1;
    quantize_one(&s, x, c, sc);
    assert_int_equal(sc[3], 128);
    assert_int_equal(c[48] & 0x0F, 0x6); /* 7 / 2 = 3.5 -> 4 (tie to even) */
}

/* ---- the dispatch record ---- */

static void dispatch_bytes_account_for_the_seed(void **state)
{
    (void)state;
    const tl_quant_record r = tl_quant_record_layout(6144, 8); /* GLM-5 */
    assert_int_equal(r.codes, 0);
    assert_int_equal(r.scales, 6144);
    assert_int_equal(r.ids, 6144 + 192);
    assert_int_equal(r.weights - r.ids, 32);
    assert_int_equal(r.source - r.weights, 32);
    assert_int_equal(r.pad - r.source, 8);
    assert_int_equal(r.bytes, 6408);
    const tl_payload_bytes b = tl_payload_of(TL_PAYLOAD_BF16, 6144, 8), f = tl_payload_of(TL_PAYLOAD_FP8, 6144, 8);
    assert_true(b.total == 12288 && b.values == 12288 && b.scales == 0 && b.routing == 0);
    assert_true(f.values == 6144 && f.scales == 192 && f.routing == 72 && f.total == 6408);
    assert_true(tl_payload_of(TL_PAYLOAD_MXFP4, 6144, 8).total == 3072 + 192 + 72);
    assert_int_equal(tl_quant_record_layout(1152, 8).bytes % 8, 0); /* 128 x 9: padded */
    assert_int_equal(tl_quant_record_layout(1152, 8).bytes - tl_quant_record_layout(1152, 8).pad, 4);
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    tl_dispatch_result d1, d2;
    assert_int_equal(tl_dispatch_sim(&hw, TL_PAYLOAD_FP8, 6144, 8, 8, 1000, &d1), 0);
    assert_int_equal(tl_dispatch_sim(&hw, TL_PAYLOAD_FP8, 6144, 8, 8, 2000, &d2), 0);
    assert_true(d1.per_token.total == 6408 && fabs(d2.time_us - 2 * d1.time_us) < 1e-9);
    assert_true(d1.sent_bytes == 6408.0 * 1000 * 7);
    assert_true(fabs(d1.time_us - 6408.0 * 1000 / (76.8 * 1e3)) < 1e-6); /* a peer's link of the full mesh */
    hw.link_gbps = 0;
    assert_int_equal(tl_dispatch_sim(&hw, TL_PAYLOAD_FP8, 6144, 8, 8, 1, &d1), TL_EUSAGE);
    tl_clear_error();
}

static void dispatch_unpacks_to_its_fields(void **state)
{
    (void)state;
    tl_quant_shape s = shape(TL_QUANT_DISPATCH);
    s.rows = 4, s.k = 6144;
    bufs b;
    bufs_alloc(&s, &b);
    assert_int_equal(tl_quant_inputs_make(&s, TL_QDIST_NORMAL, 3, b.x, b.ids, b.w), 0);
    assert_int_equal(tl_quant_reference(&s, b.x, b.ids, b.w, 6, b.c[0], NULL), 0);
    uint8_t *codes = malloc(4 * 6144);
    float sc[4 * 48], w[32];
    int32_t ids[32], row[4], rank[4];
    assert_int_equal(tl_quant_unpack(&s, b.c[0], codes, sc, ids, w, row, rank), 0);
    assert_memory_equal(ids, b.ids, sizeof ids);
    assert_memory_equal(w, b.w, sizeof w);
    for (int r = 0; r < 4; r++) assert_true(row[r] == r && rank[r] == 6);
    tl_quant_shape f = s;
    f.scheme = TL_QUANT_FP8;
    uint8_t *fc = malloc(4 * 6144);
    float fs[4 * 48];
    assert_int_equal(tl_quant_reference(&f, b.x, NULL, NULL, 0, fc, fs), 0);
    assert_memory_equal(codes, fc, 4 * 6144); /* the record's codes and scales are fp8's */
    assert_memory_equal(sc, fs, sizeof sc);
    free(codes);
    free(fc);
    bufs_free(&b);
}

/* The kernels' division (tl_quant_div_by: one reciprocal a group, FMA corrections) against x / s:
 * every bf16 x under a sampled set of group scales (every 97th bf16 amax, both scale rules). */
static void division_by_the_reciprocal_is_exact(void **state)
{
    (void)state;
    long checked = 0;
    for (uint32_t ah = 1; ah < 0x7F80u; ah += 97)
        for (int ue8m0 = 0; ue8m0 < 2; ue8m0++) {
            const float amax = tl_code_bf16_to_f32(ah), s = tl_quant_fp8_scale(amax, 0, ue8m0), r = 1.0f / s;
            for (uint32_t xh = 0; xh < 0x10000u; xh++) {
                const float x = tl_code_bf16_to_f32(xh);
                if (!(fabsf(x) <= amax)) continue;
                const float want = x / s, got = tl_quant_div_by(x, s, r);
                if (fabsf(x) >= 0x1p-100f && fabsf(want) >= 0x1p-100f && memcmp(&want, &got, sizeof got) != 0)
                    fail_msg("%a / %a: %a, want %a", (double)x, (double)s, (double)got, (double)want);
                if (tl_code_e4m3_from_f32(got) != tl_code_e4m3_from_f32(want))
                    fail_msg("%a / %a: code 0x%02X, want 0x%02X", (double)x, (double)s, tl_code_e4m3_from_f32(got),
                             tl_code_e4m3_from_f32(want));
                checked++;
            }
        }
    assert_true(checked > 5000000);
}

/* ---- the model ---- */

static void model_floor_and_limiter(void **state)
{
    (void)state;
    static const char *const presets[] = {"h100", "h200", "mi300x", "mi355x"};
    for (int p = 0; p < 4; p++) {
        tl_hw hw;
        assert_int_equal(tl_hw_load(presets[p], &hw), 0);
        tl_quant_shape s = shape(TL_QUANT_FP8);
        s.rows = 1, s.k = 7168;
        tl_quant_result r;
        assert_int_equal(tl_quant_sim(&hw, &s, &r), 0);
        assert_true(r.read_bytes == 2.0 * 7168 && r.write_bytes == 7168 + 4.0 * 56);
        const double lat = hw.hbm_latency_us > 0 ? hw.hbm_latency_us : 1.0; /* the model's default round trip */
        assert_true(r.latency_us == lat && r.floor_us == hw.launch_us + lat);
        assert_true(r.time_us >= r.floor_us && r.time_us < r.floor_us * 1.05); /* one token: the floor */
        assert_string_equal(r.limiter, "launch");
        s.rows = 16384, s.k = 4096;
        assert_int_equal(tl_quant_sim(&hw, &s, &r), 0);
        const double copy = tl_ceiling_value(hw.ceilings.hbm_copy_gbps);
        const int pair_cvt = strcmp(hw.arch, "sm_90") == 0; /* E4M3FN by one instruction a pair */
        assert_true(r.ops == 16384.0 * 4096 * (pair_cvt ? TL_QUANT_OPS_E4M3_HW : TL_QUANT_OPS_E4M3_SW));
        const double by_hbm = lat + r.bytes / (copy * 1e3);
        assert_true(fabs(r.time_us - (hw.launch_us + fmax(by_hbm, r.vector_us))) < 1e-6);
        assert_string_equal(r.limiter, by_hbm >= r.vector_us ? "hbm" : "vector");
        if (pair_cvt) assert_string_equal(r.limiter, "hbm"); /* the H200 converts faster than it streams */
        s.scheme = TL_QUANT_MXFP4; /* half the code bytes, a byte a 32 */
        assert_int_equal(tl_quant_sim(&hw, &s, &r), 0);
        assert_true(r.write_bytes == 16384.0 * 4096 / 2 + 16384.0 * 4096 / 32);
    }
}

static void bad_shapes_are_usage_errors(void **state)
{
    (void)state;
    tl_quant_shape s = shape(TL_QUANT_FP8);
    const struct {
        long rows, k;
        tl_quant_scheme_id id;
        int ue8m0, up, col, had, topk;
    } bad[] = {
        {0, 128, TL_QUANT_FP8, 0, 0, 0, 0, 8},   {-1, 128, TL_QUANT_FP8, 0, 0, 0, 0, 8},
        {1, 100, TL_QUANT_FP8, 0, 0, 0, 0, 8},   {1, 48, TL_QUANT_MXFP4, 0, 0, 0, 0, 8},
        {1, 1L << 20, TL_QUANT_FP8, 0, 0, 0, 0, 8}, {1L << 24, 1L << 17, TL_QUANT_FP8, 0, 0, 0, 0, 8},
        {1, 128, TL_QUANT_MXFP8, 1, 0, 0, 0, 8}, {1, 128, TL_QUANT_FP8, 0, 1, 0, 0, 8},
        {1, 128, TL_QUANT_MXFP4, 0, 0, 1, 0, 8}, {1, 128, TL_QUANT_FP8, 0, 0, 0, 1, 8},
        {1, 128, TL_QUANT_DISPATCH, 0, 0, 0, 0, 0}, {1, 128, TL_QUANT_DISPATCH, 0, 0, 0, 0, 17},
        {1, 128, TL_QUANT_DISPATCH, 0, 0, 1, 0, 8}, {1, 128, (tl_quant_scheme_id)99, 0, 0, 0, 0, 8},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s.rows = bad[i].rows, s.k = bad[i].k, s.scheme = bad[i].id, s.ue8m0 = bad[i].ue8m0, s.round_up = bad[i].up;
        s.layout = bad[i].col ? TL_QUANT_SCALES_COL : TL_QUANT_SCALES_ROW, s.hadamard = bad[i].had, s.topk = bad[i].topk;
        if (tl_quant_shape_check(&s) != TL_EUSAGE) fail_msg("bad shape %zu passed the check", i);
        assert_true(strchr(tl_last_error(), '\n') == NULL); /* one line */
        tl_clear_error();
    }
    tl_quant_scheme_id id;
    assert_int_equal(tl_quant_scheme_id_parse("fp7", &id), TL_EUSAGE);
    tl_clear_error();
    assert_int_equal(tl_quant_scheme_id_parse("fp8-query", &id), 0);
    assert_int_equal(id, TL_QUANT_FP8_QUERY);
}

/* contract/quant.h's Hadamard: the Sylvester matrix in natural order (entry (i, j) = (-1)^popcount(i & j)),
 * butterflies of strides 1, 2, .., 64 in that order, then one multiply by (float)(1/sqrt(128)). On small
 * integers every butterfly sum is exact, so the order of rows shows alone: tl_fwht's row i is H's row i;
 * on random values the stated stage order is reproduced bit for bit. */
static void hadamard_order_is_the_contracts(void **state)
{
    (void)state;
    float x[128], y[128], z[128];
    for (int i = 0; i < 128; i++) x[i] = (float)((i * 37) % 11 - 5);
    memcpy(y, x, sizeof x);
    assert_int_equal(tl_fwht(y, 128), 0);
    const float s = (float)(1.0 / sqrt(128.0));
    for (int i = 0; i < 128; i++) {
        float acc = 0;
        for (int j = 0; j < 128; j++) acc += __builtin_popcount((unsigned)(i & j)) % 2 ? -x[j] : x[j];
        assert_true(y[i] == acc * s);
    }
    tl_rng r;
    tl_rng_seed(&r, 5);
    for (int i = 0; i < 128; i++) x[i] = (float)tl_rng_normal(&r);
    memcpy(y, x, sizeof x);
    memcpy(z, x, sizeof x);
    assert_int_equal(tl_fwht(y, 128), 0);
    for (int h = 1; h < 128; h *= 2) /* the contract's words, spelled out */
        for (int j = 0; j < 128; j++)
            if (j % (2 * h) < h) {
                const float a = z[j], b = z[j + h];
                z[j] = a + b, z[j + h] = a - b;
            }
    for (int i = 0; i < 128; i++) assert_true(y[i] == z[i] * s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hadamard_order_is_the_contracts),
        cmocka_unit_test(fp8_family_three_agree),
        cmocka_unit_test(mx_three_agree),
        cmocka_unit_test(query_three_agree),
        cmocka_unit_test(dispatch_three_agree),
        cmocka_unit_test(fp8_special_groups),
        cmocka_unit_test(fp8_amax_ignores_every_nan),
        cmocka_unit_test(mx_special_blocks),
        cmocka_unit_test(dispatch_bytes_account_for_the_seed),
        cmocka_unit_test(dispatch_unpacks_to_its_fields),
        cmocka_unit_test(division_by_the_reciprocal_is_exact),
        cmocka_unit_test(model_floor_and_limiter),
        cmocka_unit_test(bad_shapes_are_usage_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
