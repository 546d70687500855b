/* Decode attention: the paged-decode model of seed 000 Table 2, and the decode op (contract/decode.h): reference
 * against naive, the top-k union, all-masked rows, the merge under random shardings, shard ranges and the
 * model's pick. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "contract/decode.h"
#include "core/tl.h"
#include "numerics/softmax.h"
#include "reference/decode.h"
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

/* ---- the decode op: contract, reference, merge, model ---- */

/* One problem: its shape, lengths (owned) and buffers. */
typedef struct {
    tl_decode_shape s;
    int32_t lens[256];
    tl_decode_buffers b;
    float *o, *lse, *o2, *lse2;
    tl_decode_stats st;
} problem;

static void problem_make(problem *p, tl_decode_dist dist, uint64_t seed)
{
    p->s.lens = p->lens;
    assert_int_equal(tl_decode_shape_check(&p->s), 0);
    assert_int_equal(tl_decode_buffers_alloc(&p->s, &p->b), 0);
    assert_int_equal(tl_decode_make(&p->s, dist, seed, &p->b), 0);
    p->o = malloc(tl_decode_o_elems(&p->s) * sizeof(float));
    p->o2 = malloc(tl_decode_o_elems(&p->s) * sizeof(float));
    p->lse = malloc(tl_decode_lse_elems(&p->s) * sizeof(float));
    p->lse2 = malloc(tl_decode_lse_elems(&p->s) * sizeof(float));
    assert_non_null(p->o), assert_non_null(p->o2), assert_non_null(p->lse), assert_non_null(p->lse2);
}

static void problem_free(problem *p)
{
    tl_decode_buffers_free(&p->b);
    free(p->o), free(p->o2), free(p->lse), free(p->lse2);
}

static problem paged(int batch, const int32_t *lens, int kv_heads, int gqa, tl_decode_kv kv)
{
    problem p;
    memset(&p, 0, sizeof p);
    p.s.kind = TL_DECODE_PAGED, p.s.kv = kv, p.s.batch = batch, p.s.kv_heads = kv_heads, p.s.gqa = gqa;
    long most = 1, blocks = 0;
    for (int b = 0; b < batch; b++) {
        p.lens[b] = lens[b];
        most = lens[b] > most ? lens[b] : most;
        blocks += (lens[b] + 15) / 16;
    }
    p.s.max_blocks = (int)((most + 15) / 16);
    p.s.pages = blocks + 3; /* a few pages no request uses */
    return p;
}

static problem dual(int batch, const int32_t *lens, int heads, int mtp, long window, int topk, tl_decode_kv kv)
{
    problem p;
    memset(&p, 0, sizeof p);
    p.s.kind = TL_DECODE_DUAL_SCOPE, p.s.kv = kv, p.s.batch = batch, p.s.heads = heads, p.s.mtp = mtp;
    p.s.window = window, p.s.topk = topk;
    long most = 1;
    for (int b = 0; b < batch; b++) p.lens[b] = lens[b], most = lens[b] > most ? lens[b] : most;
    p.s.max_len = most;
    return p;
}

/* No NaN anywhere; O = 0 and LSE = -inf exactly on the rows without keys, finite elsewhere. */
static void assert_outputs_sane(const problem *p, const float *o, const float *lse)
{
    const int H = tl_decode_heads(&p->s), dv = tl_decode_v_dim(&p->s);
    for (long r = 0; r < tl_decode_rows(&p->s); r++) {
        const long keys = tl_decode_row_keys(&p->s, r, p->b.topk ? p->b.topk + (size_t)r * p->s.topk : NULL);
        for (int h = 0; h < H; h++) {
            const float l = lse[(size_t)r * H + h];
            assert_false(isnan(l));
            if (keys == 0) assert_true(isinf(l) && l < 0);
            else assert_true(isfinite(l));
            for (int d = 0; d < dv; d++) {
                const float v = o[((size_t)r * H + h) * dv + d];
                assert_true(isfinite(v));
                if (keys == 0) assert_true(v == 0.0f);
            }
        }
    }
}

/* The reference against the naive loop: both in double, one float32 store each. */
static void assert_ref_matches_naive(problem *p)
{
    tl_decode_inputs in = tl_decode_buffers_view(&p->b);
    assert_int_equal(tl_decode_reference(&p->s, &in, p->o, p->lse, &p->st), 0);
    assert_int_equal(tl_decode_naive(&p->s, &in, p->o2, p->lse2), 0);
    assert_outputs_sane(p, p->o, p->lse);
    assert_outputs_sane(p, p->o2, p->lse2);
    tl_softmax_tol_spec spec = {tl_decode_qk_dim(&p->s), p->st.max_keys, 1, 0, p->st.s_rms, 1.0, p->st.lse_max, 0};
    tl_tolerance to, tl;
    assert_int_equal(tl_softmax_tolerance(&spec, &to, &tl), 0);
    tl_err_metrics m;
    assert_int_equal(tl_compare(p->o, p->o2, tl_decode_o_elems(&p->s), &m), 0);
    assert_true(m.nan_count == 0 && m.rel_rms <= to.rel_rms);
    assert_int_equal(tl_compare(p->lse, p->lse2, tl_decode_lse_elems(&p->s), &m), 0);
    assert_true(m.nan_count == 0 && m.max_abs <= 4 * 0x1p-24 * (p->st.lse_max + 1));
}

static void test_paged_reference_vs_naive(void **state)
{
    (void)state;
    static const int32_t lens[] = {0, 1, 16, 17, 100, 333};
    static const int gqas[] = {1, 4, 8, 16};
    for (int g = 0; g < 4; g++)
        for (int kv = 0; kv < 2; kv++) {
            problem p = paged(6, lens, g == 3 ? 1 : 2, gqas[g], (tl_decode_kv)kv);
            problem_make(&p, g == 1 ? TL_DECODE_DIST_PEAKED : TL_DECODE_DIST_NORMAL, 11 + g);
            assert_ref_matches_naive(&p);
            problem_free(&p);
        }
}

static void test_dual_reference_vs_naive(void **state)
{
    (void)state;
    /* lengths 0 and 1, shorter than the window (the window longer than the sequence), MTP */
    static const int32_t lens[] = {0, 1, 3, 90, 700};
    for (int mtp = 1; mtp <= 3; mtp += 2)
        for (int dist = 0; dist < TL_DECODE_NDISTS; dist++) {
            problem p = dual(5, lens, 16, mtp, 128, 96, dist == 1 ? TL_DECODE_KV_BF16 : TL_DECODE_KV_FP8);
            problem_make(&p, (tl_decode_dist)dist, 5 + dist);
            assert_ref_matches_naive(&p);
            problem_free(&p);
        }
    /* no window, only top-k; no top-k, only the window */
    problem p = dual(5, lens, 32, 2, 0, 64, TL_DECODE_KV_FP8);
    problem_make(&p, TL_DECODE_DIST_EDGES, 3);
    assert_ref_matches_naive(&p);
    problem_free(&p);
    p = dual(5, lens, 16, 1, 1000, 0, TL_DECODE_KV_BF16);
    problem_make(&p, TL_DECODE_DIST_NORMAL, 4);
    assert_ref_matches_naive(&p);
    problem_free(&p);
}

/* The union rule by hand: window positions and repeats counted once, -1 and unseen ones never. */
static void test_topk_union(void **state)
{
    (void)state;
    /* visible 20, window [12, 20) */
    const int32_t list[] = {3, -1, 15, 3, 19, 7, 25, 12, 7, 0};
    const int want[] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 1};
    for (int i = 0; i < 10; i++) assert_int_equal(tl_decode_topk_counts(list, i, 12, 20), want[i]);
    int32_t lens[1] = {20};
    tl_decode_shape s = {.kind = TL_DECODE_DUAL_SCOPE, .kv = TL_DECODE_KV_FP8, .batch = 1, .lens = lens, .heads = 16,
                         .mtp = 1, .max_len = 20, .window = 8, .topk = 10};
    assert_int_equal(tl_decode_row_keys(&s, 0, list), 8 + 3);
    /* an all-masked row: no window, every entry -1 */
    const int32_t none[] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    s.window = 0;
    assert_int_equal(tl_decode_row_keys(&s, 0, none), 0);
    /* out-of-range indices are refused at the door */
    problem p = dual(1, lens, 16, 1, 8, 10, TL_DECODE_KV_FP8);
    problem_make(&p, TL_DECODE_DIST_NORMAL, 1);
    tl_decode_inputs in = tl_decode_buffers_view(&p.b);
    p.b.topk[4] = 20;
    assert_int_equal(tl_decode_inputs_check(&p.s, &in), TL_EUSAGE);
    p.b.topk[4] = -2;
    assert_int_equal(tl_decode_inputs_check(&p.s, &in), TL_EUSAGE);
    tl_clear_error();
    problem_free(&p);
}

/* An all-masked row through every path: O = 0, LSE = -inf, no NaN. */
static void test_all_masked(void **state)
{
    (void)state;
    const int32_t lens[] = {50, 0};
    problem p = dual(2, lens, 16, 1, 0, 32, TL_DECODE_KV_FP8);
    problem_make(&p, TL_DECODE_DIST_NORMAL, 2);
    for (int i = 0; i < 32; i++) p.b.topk[i] = -1; /* request 0: nothing selected, no window */
    tl_decode_inputs in = tl_decode_buffers_view(&p.b);
    assert_int_equal(tl_decode_reference(&p.s, &in, p.o, p.lse, NULL), 0);
    assert_outputs_sane(&p, p.o, p.lse);
    for (int sh = 1; sh <= 64; sh *= 4) {
        assert_int_equal(tl_decode_reference_sharded(&p.s, &in, sh, p.o2, p.lse2, NULL), 0);
        assert_outputs_sane(&p, p.o2, p.lse2);
    }
    problem_free(&p);
}

/* The merge itself: -inf shards contribute nothing, all -inf gives 0 / -inf, one shard is itself. */
static void test_merge_edges(void **state)
{
    (void)state;
    const float ninf = -INFINITY;
    float lse[4] = {ninf, ninf, ninf, ninf}, o[4 * 2] = {0}, out[2], l;
    tl_decode_merge(4, lse, 1, o, 2, 2, out, &l);
    assert_true(out[0] == 0 && out[1] == 0 && isinf(l) && l < 0);
    lse[2] = 1.5f, o[4] = 3, o[5] = -2;
    tl_decode_merge(4, lse, 1, o, 2, 2, out, &l);
    assert_true(out[0] == 3 && out[1] == -2 && l == 1.5f);
    tl_decode_merge(1, lse + 2, 1, o + 4, 2, 2, out, &l);
    assert_true(out[0] == 3 && out[1] == -2 && l == 1.5f);
    /* two equal shards: the mean, lse + log 2 */
    float lse2[2] = {0.25f, 0.25f}, o2[4] = {1, 2, 3, 4};
    tl_decode_merge(2, lse2, 1, o2, 2, 2, out, &l);
    assert_true(fabsf(out[0] - 2) < 1e-6f && fabsf(out[1] - 3) < 1e-6f && fabsf(l - (0.25f + logf(2))) < 1e-6f);
    /* far apart: the small one vanishes without underflow trouble */
    float lse3[2] = {-1e30f, 80.0f};
    tl_decode_merge(2, lse3, 1, o2, 2, 2, out, &l);
    assert_true(out[0] == 3 && out[1] == 4 && l == 80.0f);
}

/* The sharded reference (the contract's shards, float32 partials and merge) against the one-pass
 * reference for random shardings 1..64, empty and fully masked shards included. */
static void assert_shardings(problem *p, uint64_t seed)
{
    tl_decode_inputs in = tl_decode_buffers_view(&p->b);
    assert_int_equal(tl_decode_reference(&p->s, &in, p->o, p->lse, &p->st), 0);
    double s2 = 0, n = 0;
    for (size_t i = 0; i < tl_decode_lse_elems(&p->s); i++)
        if (isfinite(p->lse[i])) s2 += (double)p->lse[i] * p->lse[i], n++;
    tl_rng r;
    tl_rng_seed(&r, seed);
    for (int t = 0; t < 12; t++) {
        const int shards = t == 0 ? 1 : t == 1 ? 64 : 1 + (int)tl_rng_below(&r, 64);
        tl_decode_stats ss;
        assert_int_equal(tl_decode_reference_sharded(&p->s, &in, shards, p->o2, p->lse2, &ss), 0);
        assert_outputs_sane(p, p->o2, p->lse2);
        tl_softmax_tol_spec spec = {tl_decode_qk_dim(&p->s), p->st.max_keys, shards, 0, p->st.s_rms,
                                    n > 0 ? sqrt(s2 / n) : 0, fmax(ss.lse_max, p->st.lse_max), 0};
        tl_tolerance to, tl;
        assert_int_equal(tl_softmax_tolerance(&spec, &to, &tl), 0);
        tl_err_metrics m;
        tl_compare(p->o, p->o2, tl_decode_o_elems(&p->s), &m);
        if (!tl_check_pass(&m, &to)) fail_msg("%d shards: O rel RMS %.3g over the bound %.3g", shards, m.rel_rms, to.rel_rms);
        tl_compare(p->lse, p->lse2, tl_decode_lse_elems(&p->s), &m);
        if (!tl_check_pass(&m, &tl)) fail_msg("%d shards: LSE rel RMS %.3g over the bound %.3g", shards, m.rel_rms, tl.rel_rms);
    }
}

static void test_merge_random_shardings(void **state)
{
    (void)state;
    static const int32_t plens[] = {0, 1, 15, 40, 257, 1000, 3};
    problem p = paged(7, plens, 2, 4, TL_DECODE_KV_FP8);
    problem_make(&p, TL_DECODE_DIST_PEAKED, 21);
    assert_shardings(&p, 1);
    problem_free(&p);
    static const int32_t dlens[] = {0, 1, 200, 900};
    p = dual(4, dlens, 16, 2, 128, 160, TL_DECODE_KV_FP8);
    problem_make(&p, TL_DECODE_DIST_EDGES, 22); /* -1, window repeats: shards that count nothing */
    assert_shardings(&p, 2);
    problem_free(&p);
}

/* Shard ranges: every slot in exactly one shard, whole granules, empty shards at the end. */
static void test_shard_ranges(void **state)
{
    (void)state;
    for (long n = 0; n < 300; n += 7)
        for (int shards = 1; shards <= 64; shards++) {
            long next = 0;
            for (int s = 0; s < shards; s++) {
                long lo, hi;
                tl_decode_shard_range(n, shards, 16, s, &lo, &hi);
                assert_true(lo == next && hi >= lo && hi <= n);
                if (hi < n) assert_true((hi - lo) % 16 == 0);
                next = hi;
            }
            assert_true(next == n);
        }
}

/* The model's shard pick: fills the GPU at small batch, one at large, never an empty shard. */
static void test_shard_pick(void **state)
{
    (void)state;
    tl_hw hw;
    assert_int_equal(tl_hw_load("h200", &hw), 0);
    int32_t lens[256];
    for (int b = 0; b < 256; b++) lens[b] = 16384;
    problem p = paged(1, lens, 16, 1, TL_DECODE_KV_BF16);
    p.s.lens = p.lens;
    const int one = tl_decode_auto_shards(&p.s, hw.cus);
    assert_true(one > 1 && tl_decode_groups(&p.s, one) <= 2 * hw.cus && tl_decode_groups(&p.s, one) > hw.cus); /* 2 a CU */
    problem big = paged(256, lens, 8, 8, TL_DECODE_KV_BF16);
    big.s.lens = big.lens;
    assert_int_equal(tl_decode_auto_shards(&big.s, hw.cus), 1);
    /* short rows: no more shards than granules allow, none of them empty */
    lens[0] = 100;
    problem shortp = paged(1, lens, 1, 1, TL_DECODE_KV_BF16);
    shortp.s.lens = shortp.lens;
    const int k = tl_decode_auto_shards(&shortp.s, hw.cus);
    long lo, hi;
    tl_decode_shard_range(100, k, 16, k - 1, &lo, &hi);
    assert_true(k >= 1 && hi > lo);
    /* dual-scope at batch 1: many shards; the model uses the pick and its groups */
    lens[0] = 65536;
    problem d = dual(1, lens, 128, 1, 128, 2048, TL_DECODE_KV_FP8);
    d.s.lens = d.lens;
    tl_decode_model_result r;
    assert_int_equal(tl_decode_model(&hw, &d.s, NULL, 0, &r), 0);
    assert_int_equal(r.shards, tl_decode_auto_shards(&d.s, hw.cus));
    assert_true(r.shards > 8 && r.groups == (long)r.shards * 4 && r.group_heads == 32);
    assert_true(r.groups <= hw.cus); /* one dual-scope group a CU: one wave */
    d.s.heads = 48; /* 32 does not divide H: blocks of 16 */
    assert_int_equal(tl_decode_head_blocks(&d.s), 3);
    assert_int_equal(tl_decode_group_heads(&d.s), 16);
    d.s.heads = 128;
    assert_true(r.merge_us > 0 && r.time_us > r.fixed_us);
    /* the bytes count the window and the selection once: a list all in the window reads W rows */
    int32_t *list = malloc(2048 * sizeof *list);
    for (int i = 0; i < 2048; i++) list[i] = 65536 - 1 - (i % 128);
    const double bytes = tl_decode_bytes(&d.s, list);
    const double io = 2.0 * tl_decode_q_elems(&d.s) + 4.0 * tl_decode_o_elems(&d.s) + 4.0 * tl_decode_lse_elems(&d.s) +
                      4.0 * 2048;
    assert_true(fabs(bytes - io - 128.0 * (576 + 4)) < 1e-6);
    free(list);
    /* shards given beyond the contract are refused */
    assert_int_equal(tl_decode_model(&hw, &d.s, NULL, TL_DECODE_MAX_SHARDS + 1, &r), TL_EUSAGE);
    tl_clear_error();
}

static void test_shape_refusals(void **state)
{
    (void)state;
    int32_t lens[2] = {10, 20};
    problem p = paged(2, lens, 8, 8, TL_DECODE_KV_BF16);
    p.s.lens = p.lens;
    assert_int_equal(tl_decode_shape_check(&p.s), 0);
    p.s.gqa = 17;
    assert_int_equal(tl_decode_shape_check(&p.s), TL_EUSAGE);
    p.s.gqa = 8, p.lens[1] = 5000; /* past max_blocks x 16 */
    assert_int_equal(tl_decode_shape_check(&p.s), TL_EUSAGE);
    p.lens[1] = -1;
    assert_int_equal(tl_decode_shape_check(&p.s), TL_EUSAGE);
    p.lens[1] = 20, p.s.pages = 1L << 40;
    assert_int_equal(tl_decode_shape_check(&p.s), TL_EUSAGE);
    problem d = dual(2, lens, 24, 1, 128, 512, TL_DECODE_KV_FP8);
    d.s.lens = d.lens;
    assert_int_equal(tl_decode_shape_check(&d.s), TL_EUSAGE); /* H = 24 */
    d.s.heads = 128, d.s.mtp = 5;
    assert_int_equal(tl_decode_shape_check(&d.s), TL_EUSAGE);
    d.s.mtp = 1, d.s.scale = NAN;
    assert_int_equal(tl_decode_shape_check(&d.s), TL_EUSAGE);
    tl_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_table2),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_paged_reference_vs_naive),
        cmocka_unit_test(test_dual_reference_vs_naive),
        cmocka_unit_test(test_topk_union),
        cmocka_unit_test(test_all_masked),
        cmocka_unit_test(test_merge_edges),
        cmocka_unit_test(test_merge_random_shardings),
        cmocka_unit_test(test_shard_ranges),
        cmocka_unit_test(test_shard_pick),
        cmocka_unit_test(test_shape_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
