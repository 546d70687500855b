/* The indexer's contract, reference, tolerance and model: the reference against the naive loop on
 * awkward shapes (rows and positions not multiples of a tile, a prefix, caller windows of length 0
 * and 1), -inf exactly outside every window, the derived tolerance's value, bad shapes refused,
 * the tiling geometry, and the model's skinny-shape finding on mi355x. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "contract/indexer.h"
#include "core/tl.h"
#include "reference/indexer.h"
#include "simulator/indexer.h"

static tl_indexer_shape shape(long rows, long kv, int heads, long prefix)
{
    tl_indexer_shape s;
    memset(&s, 0, sizeof s);
    s.rows = rows, s.kv = kv, s.heads = heads, s.dim = TL_INDEXER_DIM, s.prefix = prefix;
    return s;
}

/* Reference and naive on s: equal within the float32 tolerance, -inf exactly outside the windows,
 * finite inside. */
static void check_shape(const tl_indexer_shape *s, uint64_t seed)
{
    tl_indexer_inputs in;
    assert_int_equal(tl_indexer_inputs_alloc(s, &in), 0);
    assert_int_equal(tl_indexer_inputs_make(s, seed, &in), 0);
    const char *bad = NULL;
    assert_true(tl_indexer_inputs_valid(s, &in, &bad));
    const size_t n = (size_t)s->rows * s->kv;
    float *ref = malloc(n * sizeof(float)), *nv = malloc(n * sizeof(float));
    assert_int_equal(tl_indexer_reference(s, &in, ref), 0);
    assert_int_equal(tl_indexer_naive(s, &in, nv), 0);
    size_t inside = 0;
    for (long i = 0; i < s->rows; i++) {
        long a, e;
        tl_indexer_window(s, i, &a, &e);
        for (long j = 0; j < s->kv; j++) {
            float r = ref[(size_t)i * s->kv + j], v = nv[(size_t)i * s->kv + j];
            if (j < a || j >= e) {
                assert_true(isinf(r) && r < 0);
                assert_true(isinf(v) && v < 0);
            } else {
                assert_true(isfinite(r) && isfinite(v));
                inside++;
            }
        }
    }
    assert_true((double)inside == tl_indexer_scores(s));
    tl_tolerance t;
    tl_err_metrics m;
    assert_int_equal(tl_indexer_tolerance(s, TL_INDEXER_ACC_FP32, &t), 0);
    assert_int_equal(tl_compare(ref, nv, n, &m), 0);
    assert_true(tl_check_pass(&m, &t));
    free(ref);
    free(nv);
    tl_indexer_inputs_free(&in);
}

static void test_reference_matches_naive(void **state)
{
    check_shape((tl_indexer_shape[]){shape(1, 1, 16, 0)}, 1);
    check_shape((tl_indexer_shape[]){shape(37, 37, 32, 0)}, 2);   /* a square, not a tile multiple */
    check_shape((tl_indexer_shape[]){shape(5, 133, 64, 128)}, 3); /* a prefix */
    check_shape((tl_indexer_shape[]){shape(3, 70, 32, 20)}, 4);   /* prefix < kv - rows: a tail never seen */
}

/* Caller windows, among them empty ones and ones of one position. */
static void test_listed_windows(void **state)
{
    int32_t starts[6] = {0, 5, 7, 0, 64, 65}, ends[6] = {0, 6, 7, 96, 65, 96};
    tl_indexer_shape s = shape(6, 96, 32, 0);
    s.starts = starts, s.ends = ends;
    assert_int_equal(tl_indexer_shape_check(&s), 0);
    assert_true(tl_indexer_scores(&s) == 0 + 1 + 0 + 96 + 1 + 31);
    check_shape(&s, 9);
    ends[2] = 6; /* start > end */
    assert_int_equal(tl_indexer_shape_check(&s), TL_EUSAGE);
    tl_clear_error();
}

static void test_bad_shapes(void **state)
{
    tl_indexer_shape bad[] = {shape(0, 10, 32, 0), shape(4, 10, 24, 0), shape(4, 10, 144, 0), shape(11, 10, 32, 0),
                              shape(4, 10, 32, 7), shape(4, 10, 32, -1), shape(1L << 20, 1L << 22, 32, 0)};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(tl_indexer_shape_check(&bad[i]), TL_EUSAGE);
        assert_true(strlen(tl_last_error()) > 0);
        tl_clear_error();
    }
    tl_indexer_shape s = shape(4, 10, 32, 6);
    s.dim = 96;
    assert_int_equal(tl_indexer_shape_check(&s), TL_EUSAGE);
    s.dim = 128, s.block_q = 3;
    assert_int_equal(tl_indexer_shape_check(&s), TL_EUSAGE);
    tl_clear_error();
}

/* NaN codes and non-finite floats are named. */
static void test_inputs_valid(void **state)
{
    tl_indexer_shape s = shape(2, 4, 16, 2);
    tl_indexer_inputs in;
    assert_int_equal(tl_indexer_inputs_alloc(&s, &in), 0);
    assert_int_equal(tl_indexer_inputs_make(&s, 5, &in), 0);
    const char *bad = NULL;
    assert_true(tl_indexer_inputs_valid(&s, &in, &bad));
    in.k[17] = 0xFF;
    assert_false(tl_indexer_inputs_valid(&s, &in, &bad));
    assert_string_equal(bad, "k");
    in.k[17] = 0;
    in.w[3] = NAN;
    assert_false(tl_indexer_inputs_valid(&s, &in, &bad));
    assert_string_equal(bad, "w");
    tl_indexer_inputs_free(&in);
}

/* The derivation's numbers: D = 128, H = 64, float32 (p = 23): e^2 = (128 x 4 / 6 + 2/3 + 64/6 + 2/3) u^2;
 * Hopper's FP8 accumulator (p = 22) doubles the dot's term's RMS. A wrong logit of 1e-5 relative fails. */
static void test_tolerance(void **state)
{
    tl_indexer_shape s = shape(8, 8, 64, 0);
    tl_tolerance f32, fp8;
    assert_int_equal(tl_indexer_tolerance(&s, TL_INDEXER_ACC_FP32, &f32), 0);
    assert_int_equal(tl_indexer_tolerance(&s, TL_INDEXER_ACC_HOPPER_FP8, &fp8), 0);
    const double u = 0x1p-24, e = u * sqrt(128.0 * 4 / 6 + 2.0 / 3 + 64.0 / 6 + 2.0 / 3);
    assert_true(fabs(f32.predicted - e) < 1e-3 * e);
    assert_true(fabs(f32.rel_rms - 4 * e) < 1e-3 * e);
    assert_true(f32.rel_rms < 3e-6 && f32.rel_rms > 2e-6);
    assert_true(fp8.rel_rms > 1.9 * f32.rel_rms && fp8.rel_rms < 2 * f32.rel_rms);
    float ref[4] = {1, -2, 3, -INFINITY}, out[4] = {1, -2, 3.00003f, -INFINITY};
    tl_err_metrics m;
    tl_compare(ref, out, 4, &m);
    assert_false(tl_check_pass(&m, &f32));
    out[2] = 3;
    tl_compare(ref, out, 4, &m);
    assert_true(tl_check_pass(&m, &f32));
    out[3] = 0; /* a position outside the window written */
    tl_compare(ref, out, 4, &m);
    assert_false(tl_check_pass(&m, &f32));
    assert_int_equal(tl_indexer_tolerance(&s, 4, &f32), TL_EUSAGE);
    tl_clear_error();
}

/* Blocks, union windows and tiles: the causal square of 100 rows in blocks of 4 over tiles of 32. */
static void test_geometry(void **state)
{
    tl_indexer_shape s = shape(100, 100, 32, 0);
    assert_int_equal(tl_indexer_blocks(&s, 4), 25);
    long a, e;
    tl_indexer_block_window(&s, 4, 0, &a, &e);
    assert_int_equal(a, 0);
    assert_int_equal(e, 4);
    tl_indexer_block_window(&s, 4, 24, &a, &e);
    assert_int_equal(e, 100);
    assert_int_equal(tl_indexer_block_tiles(&s, 4, 24, 32), 4);
    double computed = tl_indexer_computed_scores(&s, 4, 32), scores = tl_indexer_scores(&s);
    assert_true(scores == 100.0 * 101 / 2);
    assert_true(computed >= scores);
    double by_hand = 0;
    for (long b = 0; b < 25; b++) by_hand += 4.0 * 32 * tl_indexer_block_tiles(&s, 4, b, 32);
    assert_true(computed == by_hand);
    assert_true(tl_indexer_flops(&s) == 2.0 * 128 * 32 * scores);
}

static double model_tflops(const char *hw_name, long rows, long kv, int heads, int bq)
{
    tl_hw hw;
    assert_int_equal(tl_hw_load(hw_name, &hw), 0);
    tl_indexer_problem p = {&hw, shape(rows, kv, heads, kv - rows)};
    p.shape.block_q = bq;
    tl_indexer_result r;
    assert_int_equal(tl_indexer_sim(&p, &r), 0);
    assert_true(r.time_us > 0 && r.limiter && r.k_steps >= 1);
    assert_true(fabs(r.flops - tl_indexer_flops(&p.shape)) < 1e-9 * r.flops);
    return r.tflops;
}

/* Seed 000, Figure 11: on mi355x, 2048 rows over 32K-64K positions at BLOCK_Q 1 lose to the squares
 * (below 0.8x of the square of the same positions); 2048 x 16K, whose K fits an XCD's L2, runs over twice as fast as
 * 2048 x 64K; the instructions' K-depths. */
static void test_model_skinny_on_mi355x(void **state)
{
    for (int H = 32; H <= 64; H *= 2) {
        double sq = model_tflops("mi355x", 65536, 65536, H, 1);
        assert_true(model_tflops("mi355x", 2048, 65536, H, 1) < 0.8 * sq);
        assert_true(model_tflops("mi355x", 2048, 32768, H, 1) < 0.8 * model_tflops("mi355x", 32768, 32768, H, 1));
        assert_true(model_tflops("mi355x", 2048, 16384, H, 1) > 2 * model_tflops("mi355x", 2048, 65536, H, 1)); /* K fits L2 */
    }
    const char *hws[] = {"mi355x", "mi300x", "h200"};
    const int ks[] = {128, 32, 16};
    for (int i = 0; i < 3; i++) {
        tl_hw hw;
        assert_int_equal(tl_hw_load(hws[i], &hw), 0);
        tl_indexer_problem p = {&hw, shape(4096, 4096, 64, 0)};
        tl_indexer_result r;
        assert_int_equal(tl_indexer_sim(&p, &r), 0);
        assert_int_equal(r.instr_k, ks[i]);
        assert_int_equal(r.k_steps, 128 / ks[i]);
        assert_true(r.block_q == 1 || r.block_q == 2 || r.block_q == 4);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_matches_naive), cmocka_unit_test(test_listed_windows),
        cmocka_unit_test(test_bad_shapes),              cmocka_unit_test(test_inputs_valid),
        cmocka_unit_test(test_tolerance),               cmocka_unit_test(test_geometry),
        cmocka_unit_test(test_model_skinny_on_mi355x),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
