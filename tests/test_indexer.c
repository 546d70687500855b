/* The indexer's contract, reference, tolerance and model: the reference against the naive loop on
 * awkward shapes (rows and positions not multiples of a tile, a prefix, caller windows of length 0
 * and 1), -inf exactly outside every window, the derived tolerance's value, bad shapes refused,
 * the tiling geometry, and the model's skinny-shape finding on mi355x. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
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
 * Hopper's FP8 accumulator (p = 13): the dot's term is 128 x 2^-26 / 6. A wrong logit of 1e-5
 * relative fails under float32. */
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
    const double e13 = sqrt(128.0 * 0x1p-26 / 6 + (2.0 / 3 + 64.0 / 6 + 2.0 / 3) * u * u);
    assert_true(fabs(fp8.rel_rms - 4 * e13) < 1e-3 * e13);
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

/* Seed 000, Figure 11 (appendix A2): on mi355x, 2048 rows over 64K positions at BLOCK_Q 1 lose to
 * the square of the same positions (the seed: 0.61x at H = 32, 0.67x at H = 64; the model: below
 * 0.8x), and so do 32K positions at H = 32 (0.54x); 2048 x 16K, whose K fits an XCD's L2, runs at
 * 1.46x / 1.37x of 2048 x 64K (the model: above 1.3x). The model misses the seed's H = 64 loss at 32K
 * (0.56x there; the model's share of L2 hits, 0.78 at 32K, keeps it near the square: README's seed
 * table); the instructions' K-depths. */
static void test_model_skinny_on_mi355x(void **state)
{
    for (int H = 32; H <= 64; H *= 2) {
        double sq = model_tflops("mi355x", 65536, 65536, H, 1);
        assert_true(model_tflops("mi355x", 2048, 65536, H, 1) < 0.8 * sq);
        if (H == 32) assert_true(model_tflops("mi355x", 2048, 32768, H, 1) < 0.8 * model_tflops("mi355x", 32768, 32768, H, 1));
        assert_true(model_tflops("mi355x", 2048, 16384, H, 1) > 1.3 * model_tflops("mi355x", 2048, 65536, H, 1)); /* K fits L2 */
    }
    const char *hws[] = {"mi355x", "mi300x", "h200"};
    const int ks[] = {128, 32, 32}; /* h200: wgmma m64nHk32 E4M3 */
    for (int i = 0; i < 3; i++) {
        tl_hw hw;
        assert_int_equal(tl_hw_load(hws[i], &hw), 0);
        tl_indexer_problem p = {&hw, shape(4096, 4096, 64, 0)};
        tl_indexer_result r;
        assert_int_equal(tl_indexer_sim(&p, &r), 0);
        assert_int_equal(r.instr_k, ks[i]);
        assert_int_equal(r.k_steps, 128 / ks[i]);
        assert_true(r.block_q == 1 || r.block_q == 2 || r.block_q == 4 || (i == 2 && r.block_q == 8));
    }
}

/* sm_90a: the model picks, and so the launcher launches (ops/indexer.c asks the model), the BLOCK_Q
 * every row of the shipped kernel's timed run was measured at, and with that pick gives the
 * prediction committed before the run (h200_indexer_sim_run52.csv, time_us as printed): at the 8K
 * squares it had picked BLOCK_Q 4 (474 and 693 us), a configuration never timed. On h100 too. */
static void test_sm90_pick_is_the_timed_block_q(void **state)
{
    (void)state;
    FILE *f = fopen(TL_SOURCE_DIR "/bench/results/h200_indexer_sim_run52.csv", "r");
    assert_non_null(f);
    char line[1024];
    assert_non_null(fgets(line, sizeof line, f)); /* the header */
    tl_hw h200, h100;
    assert_int_equal(tl_hw_load("h200", &h200), 0);
    assert_int_equal(tl_hw_load("h100", &h100), 0);
    int rows_seen = 0;
    while (fgets(line, sizeof line, f)) {
        long rows, kv, prefix;
        int heads, bq;
        double t[8];
        char tile[16], instr[64];
        /* hw,rows,kv,heads,prefix,block_q,tile,instr,k_steps,blocks,resident,fits_l2,kv_bytes,flops,
         * hbm_bytes,mma_us,smem_us,epi_us,kv_us,hbm_us,time_us */
        int n = sscanf(line, "h200,%ld,%ld,%d,%ld,%d,%15[^,],%63[^,],%lf,%lf,%lf,%lf,%lf,%lf,%lf,%*f,%*f,%*f,%*f,%*f,%lf",
                       &rows, &kv, &heads, &prefix, &bq, tile, instr, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], &t[7]);
        assert_int_equal(n, 15);
        tl_indexer_shape s = shape(rows, kv, heads, prefix);
        assert_int_equal(bq, TL_INDEXER_TIMED_BLOCK_Q_SM90);
        assert_int_equal(tl_indexer_best_block_q(&h200, &s), bq);
        assert_int_equal(tl_indexer_best_block_q(&h100, &s), bq);
        tl_indexer_problem p = {&h200, s};
        tl_indexer_result r;
        assert_int_equal(tl_indexer_sim(&p, &r), 0);
        assert_int_equal(r.block_q, bq);
        if (fabs(r.time_us - t[7]) > 0.006)
            fail_msg("%ld x %ld H = %d: the model gives %.2f us at its pick, the prediction %.2f", rows, kv, heads, r.time_us, t[7]);
        rows_seen++;
    }
    fclose(f);
    assert_int_equal(rows_seen, 18);
}

/* The schedule: every block once, no two blocks on one CU slot at once, durations tiles x one
 * per-tile time; on mi355x the skinny 2048 x 32768 at BLOCK_Q 1 puts 8 blocks on every CU, and a grid of equal blocks filling every slot once ends at the model's body. */
static void test_schedule(void **state)
{
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    tl_indexer_problem p = {&hw, shape(2048, 32768, 32, 30720)};
    p.shape.block_q = 1;
    tl_indexer_result r;
    double end;
    tl_indexer_span *sp = calloc(4096, sizeof *sp);
    assert_int_equal(tl_indexer_schedule(&p, sp, 10, &r, &end), TL_EUSAGE); /* too little room */
    tl_clear_error();
    assert_int_equal(tl_indexer_schedule(&p, sp, 4096, &r, &end), 0);
    assert_int_equal(r.blocks, 2048);
    int per_cu[256] = {0};
    double per_tile = (sp[0].end_us - sp[0].start_us) / sp[0].tiles;
    for (long b = 0; b < r.blocks; b++) {
        assert_int_equal(sp[b].block, b);
        assert_true(sp[b].cu >= 0 && sp[b].cu < 256 && sp[b].slot >= 0 && sp[b].slot < r.cu_slots);
        assert_true(fabs((sp[b].end_us - sp[b].start_us) - sp[b].tiles * per_tile) < 1e-6 * sp[b].end_us);
        assert_true(fabs(sp[b].start_us - r.fixed_us) < 1e-9); /* one generation: all start at once */
        per_cu[sp[b].cu]++;
    }
    for (int c = 0; c < 256; c++) assert_int_equal(per_cu[c], 8);
    /* the kernel's own code: indexer_kernel<32, 1>'s 9472 bytes of LDS let a CU hold 17 blocks of
     * one wave (its VGPRs would allow 24); its 8 blocks a CU are all resident */
    assert_int_equal(r.cu_slots, (int)(hw.lds_kib * 1024 / r.code.k->lds));
    assert_int_equal(r.cu_waves, r.cu_slots);
    assert_int_equal(r.resident, 8);
    /* one generation of blocks: the model's time and the schedule's end agree but for the blocks'
     * unequal windows (the prefix makes them near-equal: within 5%) */
    assert_true(fabs(end - r.time_us) <= 0.05 * r.time_us);
    /* near-equal blocks (a long prefix, rows = the slots: one generation): the schedule ends at the
     * body stretched by the longest block over the mean one */
    tl_indexer_problem e = {&hw, shape(4096, 4096 + 65536, 32, 65536)};
    e.shape.block_q = 1;
    assert_int_equal(tl_indexer_schedule(&e, sp, 4096, &r, &end), 0);
    const double body = fmax(fmax(fmax(r.mma_us, r.smem_us), r.epi_us), fmax(r.kv_us, r.hbm_us));
    double tiles = 0, most = 0;
    for (long b = 0; b < r.blocks; b++) tiles += sp[b].tiles, most = fmax(most, sp[b].tiles);
    assert_true(fabs(end - (r.fixed_us + body * most / (tiles / r.blocks))) < 1e-6 * end);
    assert_true(end - r.fixed_us < 1.07 * body);
    /* slots never overlap: a square over several generations */
    tl_indexer_problem q = {&hw, shape(4096, 4096, 64, 0)};
    assert_int_equal(tl_indexer_schedule(&q, sp, 4096, &r, &end), 0);
    for (long a = 0; a < r.blocks; a++)
        for (long b = a + 1; b < r.blocks; b++)
            if (sp[a].cu == sp[b].cu && sp[a].slot == sp[b].slot)
                assert_true(sp[a].end_us <= sp[b].start_us + 1e-9 || sp[b].end_us <= sp[a].start_us + 1e-9);
    free(sp);
}

/* One block's pipeline: the tiled kernel beats the naive loop; copies alternate buffers; a tile's
 * products start after its copy has landed; bad input refused. */
static void test_pipeline(void **state)
{
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    tl_indexer_problem p = {&hw, shape(1, 128, 32, 0)};
    tl_indexer_step st[512];
    int n;
    tl_indexer_pipe c;
    assert_int_equal(tl_indexer_pipeline(&p, 128, st, 512, &n, &c), 0);
    assert_int_equal(c.tiles, 4);
    assert_int_equal(n, 2 * 32 + 1 + 3 * 4);
    assert_true(c.tiled_us > 0 && c.naive_us > 10 * c.tiled_us);
    double land[4] = {0};
    for (int i = 0; i < n; i++) {
        assert_true(st[i].end_us > st[i].start_us);
        if (st[i].kind == TL_IDX_LOAD) assert_int_equal(st[i].buffer, st[i].index % 2), land[st[i].index] = st[i].end_us;
        if (st[i].kind == TL_IDX_MMA) assert_true(st[i].start_us >= land[st[i].index] - 1e-12);
    }
    assert_int_equal(tl_indexer_pipeline(&p, 128, st, 10, &n, &c), TL_EUSAGE);
    tl_clear_error();
    assert_int_equal(tl_indexer_pipeline(&p, 0, st, 512, &n, &c), TL_EUSAGE);
    tl_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_matches_naive), cmocka_unit_test(test_listed_windows),
        cmocka_unit_test(test_bad_shapes),              cmocka_unit_test(test_inputs_valid),
        cmocka_unit_test(test_tolerance),               cmocka_unit_test(test_geometry),
        cmocka_unit_test(test_model_skinny_on_mi355x),  cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_pipeline),                cmocka_unit_test(test_sm90_pick_is_the_timed_block_q),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
