/* Top-k's numerics and reference: the order-preserving keys on every bfloat16 and float16 pattern
 * and on float32's edge values; the reference against the naive full sort for every score
 * distribution, dtype, length rule and edge case (k > n, n = 1, empty rows, all ties, all NaN);
 * hand-made rows whose answer is known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "contract/topk.h"
#include "core/tl.h"
#include "numerics/formats.h"
#include "reference/topk.h"
#include "simulator/topk.h"

typedef struct {
    uint32_t key;
    double value; /* NaN for NaN */
} keyed;

static int by_key(const void *a, const void *b)
{
    uint32_t x = ((const keyed *)a)->key, y = ((const keyed *)b)->key;
    return x < y ? -1 : x > y;
}

/* Every 16-bit pattern, sorted by key: NaNs first (key 0), then values nondecreasing, equal keys
 * exactly for equal values (-0 and +0 one key), and no two distinct values share a key. */
static void check_all_16bit(tl_numfmt fmt, uint32_t (*key)(uint16_t))
{
    static keyed k[65536];
    for (uint32_t h = 0; h < 65536; h++) {
        k[h].key = key((uint16_t)h);
        k[h].value = tl_decode(fmt, h);
        assert_true(k[h].key <= 0xFFFFu);
        assert_true(isnan(k[h].value) == (k[h].key == 0)); /* NaN exactly when key 0 */
    }
    qsort(k, 65536, sizeof k[0], by_key);
    for (int i = 1; i < 65536; i++) {
        if (isnan(k[i].value)) continue;
        if (isnan(k[i - 1].value)) continue;
        assert_true(k[i - 1].value <= k[i].value);
        assert_true((k[i - 1].key == k[i].key) == (k[i - 1].value == k[i].value));
    }
    assert_int_equal(key(0x8000), key(0x0000)); /* -0 is +0 */
}

static void test_keys_every_bf16(void **state) { check_all_16bit(TL_NF_BF16, tl_key_bf16); }
static void test_keys_every_f16(void **state) { check_all_16bit(TL_NF_FP16, tl_key_f16); }

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static void test_keys_f32_edges(void **state)
{
    const float v[] = {-INFINITY, -FLT_MAX, -1.5f, -FLT_MIN, -1e-45f, 0.0f, 1e-45f, FLT_MIN, 1.0f, 1.0000001f,
                       FLT_MAX, INFINITY};
    const int n = sizeof v / sizeof v[0];
    for (int i = 0; i + 1 < n; i++) assert_true(tl_key_f32(f32_bits(v[i])) < tl_key_f32(f32_bits(v[i + 1])));
    assert_int_equal(tl_key_f32(f32_bits(-0.0f)), tl_key_f32(f32_bits(0.0f)));
    const uint32_t nans[] = {0x7FC00000u, 0x7F800001u, 0xFFC00000u, 0xFFFFFFFFu, 0x7FBFFFFFu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        assert_int_equal(tl_key_f32(nans[i]), 0);
        assert_true(tl_key_f32(f32_bits(-INFINITY)) > 0);
    }
    /* random pairs: key order is value order */
    tl_rng g;
    tl_rng_seed(&g, 99);
    for (int i = 0; i < 200000; i++) {
        uint32_t a = (uint32_t)tl_rng_u64(&g), b = (uint32_t)tl_rng_u64(&g);
        float fa, fb;
        memcpy(&fa, &a, 4);
        memcpy(&fb, &b, 4);
        if (isnan(fa) || isnan(fb)) continue;
        assert_true((fa < fb) == (tl_key_f32(a) < tl_key_f32(b)));
        assert_true((fa == fb) == (tl_key_f32(a) == tl_key_f32(b)));
    }
}

/* Runs reference and naive on the same scores and requires identical outputs. */
static void check_shape(const tl_topk_shape *s, tl_topk_dist dist, uint64_t seed)
{
    size_t n = (size_t)s->batch * (size_t)s->n, kk = (size_t)s->batch * (size_t)s->k;
    void *scores = malloc(n * tl_topk_score_bytes(s->dtype));
    int32_t *i1 = malloc(kk * sizeof(int32_t)), *i2 = malloc(kk * sizeof(int32_t));
    int32_t *c1 = malloc((size_t)s->batch * sizeof(int32_t)), *c2 = malloc((size_t)s->batch * sizeof(int32_t));
    assert_int_equal(tl_topk_scores_make(s, dist, seed, scores), 0);
    memset(i1, 0x55, kk * sizeof(int32_t));
    memset(i2, 0x66, kk * sizeof(int32_t));
    assert_int_equal(tl_topk_reference(s, scores, i1, c1), 0);
    assert_int_equal(tl_topk_naive(s, scores, i2, c2), 0);
    for (int b = 0; b < s->batch; b++) {
        long len = tl_topk_row_len(s, b);
        assert_int_equal(c1[b], len < s->k ? len : s->k);
        for (int j = 0; j < s->k; j++) {
            int32_t x = i1[(size_t)b * s->k + j];
            if (j < c1[b]) assert_true(x >= 0 && x < len);
            else assert_int_equal(x, -1);
        }
    }
    if (memcmp(i1, i2, kk * sizeof(int32_t)) || memcmp(c1, c2, (size_t)s->batch * sizeof(int32_t)))
        fail_msg("reference and naive differ: B %d n %ld k %d causal %d sorted %d dtype %s dist %s", s->batch, s->n,
                 s->k, s->causal, s->sorted, tl_topk_dtype_name(s->dtype), tl_topk_dist_name(dist));
    free(scores);
    free(i1);
    free(i2);
    free(c1);
    free(c2);
}

static void test_reference_matches_naive(void **state)
{
    static const long ns[] = {1, 7, 512, 4096};
    static const int ks[] = {1, 8, 512, 2048};
    for (int d = 0; d < TL_TOPK_NDISTS; d++) {
        for (int t = 0; t < TL_TOPK_NDTYPES; t++)
            for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
                    tl_topk_shape s = {5, ns[a], ks[c], (int)(a + c) % 2, NULL, (int)c % 2, (tl_topk_dtype)t};
                    check_shape(&s, (tl_topk_dist)d, 1000 + (uint64_t)(d * 31 + t * 7 + a * 3 + c));
                }
        /* a long row, once per distribution: the quickselect's recursion on 64K positions */
        tl_topk_shape s = {2, 65536, 2048, 0, NULL, d % 2, d % 2 ? TL_TOPK_BF16 : TL_TOPK_F32};
        check_shape(&s, (tl_topk_dist)d, 77 + (uint64_t)d);
    }
}

static void test_lengths_list_and_empty_rows(void **state)
{
    int32_t lens[6] = {0, 1, 100, 4096, 4095, 0};
    tl_topk_shape s = {6, 4096, 512, 0, lens, 1, TL_TOPK_F32};
    for (int d = 0; d < TL_TOPK_NDISTS; d++) check_shape(&s, (tl_topk_dist)d, 7 + (uint64_t)d);
    int32_t bad[1] = {4097};
    tl_topk_shape b = {1, 4096, 8, 0, bad, 0, TL_TOPK_F32};
    assert_int_equal(tl_topk_shape_check(&b), TL_EUSAGE);
}

/* Known answers: ties go to the lower index; NaN below -inf; -0 equals +0; a short row fills -1. */
static void test_known_answers(void **state)
{
    const float row[8] = {1.0f, NAN, 3.0f, -INFINITY, 3.0f, -0.0f, 0.0f, INFINITY};
    int32_t idx[8], count[1];
    tl_topk_shape s = {1, 8, 5, 0, NULL, 1, TL_TOPK_F32};
    assert_int_equal(tl_topk_reference(&s, row, idx, count), 0);
    const int32_t want[5] = {7, 2, 4, 0, 5}; /* inf, 3 (first), 3, 1, -0 before +0 by index */
    assert_memory_equal(idx, want, sizeof want);
    s.k = 8;
    assert_int_equal(tl_topk_reference(&s, row, idx, count), 0);
    assert_int_equal(idx[6], 3); /* -inf */
    assert_int_equal(idx[7], 1); /* NaN last */
    s.sorted = 0;
    s.k = 3;
    assert_int_equal(tl_topk_reference(&s, row, idx, count), 0);
    const int32_t set[3] = {2, 4, 7}; /* ascending index order */
    assert_memory_equal(idx, set, sizeof set);
    /* all ties: the first k indices */
    float same[1000];
    for (int i = 0; i < 1000; i++) same[i] = 2.5f;
    int32_t top[10];
    tl_topk_shape t = {1, 1000, 10, 0, NULL, 1, TL_TOPK_F32};
    assert_int_equal(tl_topk_reference(&t, same, top, count), 0);
    for (int j = 0; j < 10; j++) assert_int_equal(top[j], j);
    /* all NaN: still the first k, by index */
    for (int i = 0; i < 1000; i++) same[i] = NAN;
    assert_int_equal(tl_topk_reference(&t, same, top, count), 0);
    for (int j = 0; j < 10; j++) assert_int_equal(top[j], j);
    /* k > n: every position, then -1 */
    tl_topk_shape u = {1, 8, 12, 0, NULL, 0, TL_TOPK_F32};
    int32_t all[12];
    assert_int_equal(tl_topk_reference(&u, row, all, count), 0);
    assert_int_equal(count[0], 8);
    for (int j = 0; j < 8; j++) assert_int_equal(all[j], j);
    for (int j = 8; j < 12; j++) assert_int_equal(all[j], -1);
}

static void test_bad_shapes(void **state)
{
    const tl_topk_shape bad[] = {
        {0, 10, 1, 0, NULL, 0, TL_TOPK_F32},          {1, 0, 1, 0, NULL, 0, TL_TOPK_F32},
        {1, 10, 0, 0, NULL, 0, TL_TOPK_F32},          {1, 10, TL_TOPK_MAX_K + 1, 0, NULL, 0, TL_TOPK_F32},
        {1, TL_TOPK_MAX_N + 1, 8, 0, NULL, 0, TL_TOPK_F32}, {65536, TL_TOPK_MAX_N, 8, 0, NULL, 0, TL_TOPK_F32},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(tl_topk_shape_check(&bad[i]), TL_EUSAGE);
    tl_topk_dtype d;
    assert_int_equal(tl_topk_dtype_parse("fp32", &d), TL_EUSAGE);
    tl_topk_dist x;
    assert_int_equal(tl_topk_dist_parse("uniform", &x), TL_EUSAGE);
}

/* The schedule the split picture draws adds up to the model's life of a block, phase after phase,
 * and the model refuses splits the kernel cannot run. */
static void test_schedule_sums_to_the_model(void **state)
{
    static const char *const presets[] = {"h200", "mi355x", "mi300x"};
    static tl_topk_segment seg[TL_TOPK_MAX_SEGMENTS];
    for (int h = 0; h < 3; h++) {
        tl_hw hw;
        assert_int_equal(tl_hw_load(presets[h], &hw), 0);
        for (int split = 0; split <= 256; split = split ? split * 2 : 128) { /* 0: the model's pick */
            tl_topk_problem p = {&hw, {2, 1 << 20, 512, 0, NULL, 0, split % 256 ? TL_TOPK_BF16 : TL_TOPK_F32}, split, TL_TOPK_RESIDENT};
            tl_topk_result r;
            int n;
            assert_int_equal(tl_topk_schedule(&p, seg, &n, &r), 0);
            double end = 0, prev_start = 0;
            int hist = 0, drawn = r.split < TL_TOPK_MAX_DRAWN_BLOCKS ? r.split : TL_TOPK_MAX_DRAWN_BLOCKS;
            for (int i = 0; i < n; i++) {
                assert_true(seg[i].end_us >= seg[i].start_us && seg[i].start_us >= prev_start);
                assert_true(seg[i].block >= 0 && seg[i].block < drawn);
                prev_start = seg[i].start_us;
                end = fmax(end, seg[i].end_us);
                hist += seg[i].phase == TL_TOPK_PHASE_HIST;
            }
            assert_int_equal(hist, r.passes * drawn);
            assert_true(fabs(end - (r.launch_us + r.block_us)) <= 1e-9 * r.time_us);
            assert_true(r.launch_us + r.block_us <= r.time_us * (1 + 1e-12));
        }
        /* a 1M row does not fit one block's shared memory; 4096 blocks exceed TL_TOPK_MAX_SPLIT */
        tl_topk_problem one = {&hw, {1, 1 << 20, 512, 0, NULL, 0, TL_TOPK_F32}, 1, TL_TOPK_RESIDENT};
        tl_topk_result r;
        assert_int_equal(tl_topk_sim(&one, &r), TL_EUSAGE);
        assert_true(tl_topk_fewest_split(&hw, &one.shape) > 1);
        assert_int_equal(tl_topk_fewest_split(&hw, &(tl_topk_shape){1, 4096, 512, 0, NULL, 0, TL_TOPK_F32}), 1);
    }
}

/* The stream path as the model charges it: every split runs (no row barriers), the buffer fits the
 * shared memory for every k, and the plan it picks is the faster path: resident for one long row
 * (its barriers are few), stream for a batch whose rows' blocks exceed what the GPU holds at once
 * (as the H200 splits bench shows: bench/results/h200_topk_splits_run46.csv). */
static void test_stream_path_and_the_plan(void **state)
{
    tl_hw hw;
    assert_int_equal(tl_hw_load("h200", &hw), 0);
    for (int k = 1; k <= TL_TOPK_MAX_K; k *= 2) {
        assert_true(tl_topk_stream_cap(k) >= 2 * k);
        assert_true(tl_topk_stream_smem(k) <= 227 * 1024 / 2); /* two blocks an SM */
    }
    for (int split = 1; split <= TL_TOPK_MAX_SPLIT; split *= 4) {
        tl_topk_problem p = {&hw, {32, 1 << 20, 2048, 0, NULL, 0, TL_TOPK_F32}, split, TL_TOPK_STREAM};
        tl_topk_result r;
        assert_int_equal(tl_topk_sim(&p, &r), 0);
        assert_int_equal(r.path, TL_TOPK_STREAM);
        assert_true(r.time_us > r.read_us && r.blocks == 32LL * split);
    }
    tl_topk_plan plan;
    assert_int_equal(tl_topk_best_plan(&hw, &(tl_topk_shape){1, 1 << 20, 512, 0, NULL, 0, TL_TOPK_F32}, &plan), 0);
    assert_int_equal(plan.path, TL_TOPK_RESIDENT);
    assert_int_equal(tl_topk_best_plan(&hw, &(tl_topk_shape){32, 1 << 20, 512, 0, NULL, 0, TL_TOPK_F32}, &plan), 0);
    assert_int_equal(plan.path, TL_TOPK_STREAM);
    assert_int_equal(plan.split, 8);
    assert_int_equal(tl_topk_best_plan(&hw, &(tl_topk_shape){4096, 65536, 2048, 1, NULL, 0, TL_TOPK_F32}, &plan), 0);
    assert_int_equal(plan.path, TL_TOPK_STREAM);
    assert_int_equal(plan.split, 1);
    tl_topk_path path;
    assert_int_equal(tl_topk_path_parse("stream", &path), 0);
    assert_int_equal(path, TL_TOPK_STREAM);
    assert_int_equal(tl_topk_path_parse("streams", &path), TL_EUSAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_every_bf16),          cmocka_unit_test(test_keys_every_f16),
        cmocka_unit_test(test_keys_f32_edges),           cmocka_unit_test(test_reference_matches_naive),
        cmocka_unit_test(test_lengths_list_and_empty_rows), cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_bad_shapes),               cmocka_unit_test(test_schedule_sums_to_the_model),
        cmocka_unit_test(test_stream_path_and_the_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
