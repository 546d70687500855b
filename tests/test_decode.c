/* Paged decode attention model: seed 000 Table 2's four configurations and their FLOP/byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "simulator/decode.h"

static tl_decode_result run(const tl_hw *hw, int fp8, int B, int L, int H, int G)
{
    tl_decode_problem p = {.hw = hw, .kv_fp8 = fp8, .gqa = G, .batch = B, .seq = L, .kv_heads = H, .head_dim = 128, .block = 16};
    tl_decode_result r;
    assert_int_equal(tl_decode_sim(&p, &r), 0);
    return r;
}

/* Seed 000 Table 2 (AITER pa_fwd_asm on MI355X, head dim 128, block 16). */
static void test_seed_table2(void **state)
{
    (void)state;
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    struct { int fp8, B, L, H, G; double intensity, tflops; } rows[] = {
        {0, 32, 16384, 16, 1, 1.0, 6.0},   /* best KV read bandwidth, BF16 */
        {1, 32, 65536, 8, 4, 7.8, 43.2},   /* best KV read bandwidth, FP8 */
        {0, 128, 16384, 4, 16, 16.0, 93.6}, /* best throughput, BF16 */
        {1, 32, 65536, 8, 16, 31.0, 172.4}, /* best throughput, FP8 */
    };
    for (int i = 0; i < 4; i++) {
        tl_decode_result r = run(&hw, rows[i].fp8, rows[i].B, rows[i].L, rows[i].H, rows[i].G);
        assert_true(fabs(r.intensity - rows[i].intensity) / rows[i].intensity < 0.05);
        assert_true(r.flops == 4.0 * rows[i].B * rows[i].H * rows[i].G * (double)rows[i].L * 128);
        assert_string_equal(r.limiter, "hbm");
        /* the kernel reached 89-96% of the read ceiling; the model assumes all of it */
        double tflops = r.flops / (r.time_us * 1e6);
        assert_true(tflops >= rows[i].tflops && tflops < rows[i].tflops * 1.15);
    }
}

static void test_bytes(void **state)
{
    (void)state;
    tl_hw hw;
    assert_int_equal(tl_hw_load("h200", &hw), 0);
    tl_decode_result b = run(&hw, 0, 8, 4096, 8, 8), f = run(&hw, 1, 8, 4096, 8, 8);
    assert_true(b.kv_bytes == 2.0 * 8 * 8 * 4096 * 128 * 2);
    assert_true(f.kv_bytes == 2.0 * 8 * 8 * 4096 * 128 + 8.0 * 8 * 8 * 4096); /* + fp32 K and V scales */
    assert_true(b.hbm_bytes > b.kv_bytes);
    /* one sequence, one head: the split-KV fills the GPU */
    tl_decode_result s = run(&hw, 0, 1, 65536, 1, 1);
    assert_true(s.splits > 1);
    assert_true(s.work_items >= hw.cus);
}

static void test_bad_input(void **state)
{
    (void)state;
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi300x", &hw), 0);
    tl_decode_problem p = {.hw = &hw, .gqa = 1, .batch = 1, .seq = 1, .kv_heads = 1};
    tl_decode_result r;
    assert_int_equal(tl_decode_sim(&p, &r), 0);
    p.gqa = 0;
    assert_int_equal(tl_decode_sim(&p, &r), TL_EUSAGE);
    p.gqa = 1;
    p.seq = 0;
    assert_int_equal(tl_decode_sim(&p, &r), TL_EUSAGE);
    p.seq = 1;
    p.batch = -3;
    assert_int_equal(tl_decode_sim(&p, &r), TL_EUSAGE);
    p.batch = 1;
    p.head_dim = 5000;
    assert_int_equal(tl_decode_sim(&p, &r), TL_EUSAGE);
    p.head_dim = 128;
    p.hw = NULL;
    assert_int_equal(tl_decode_sim(&p, &r), TL_EUSAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_table2),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
