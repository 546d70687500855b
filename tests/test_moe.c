/* The fused MoE's CPU side (no GPU needed): the reference against the naive loop for every data
 * type, on small shapes, on a realistic width cut down in experts, and on awkward widths; both
 * against a third computation whose activation quantizers are the kernels' per-element arithmetic
 * (contract/quant.h); the MX types' MXFP8 activations (xq, xe) and Q2, special blocks included; the
 * worklist's consumption for every routing; the kernel's shape contract; the tolerance catching a
 * real error; the inputs' determinism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/moe.h"
#include "contract/quant.h"
#include "contract/worklist.h"
#include "numerics/codes.h"
#include "numerics/metrics.h"
#include "numerics/mx.h"
#include "numerics/quant.h"
#include "reference/moe.h"

static const tl_moe_dtype all_dtypes[] = {TL_MOE_BF16, TL_MOE_FP8, TL_MOE_A16W4, TL_MOE_MXFP4, TL_MOE_MXFP8};

/* Makes inputs, runs the reference (worklist with tile_m) and the naive loop; returns the
 * metrics and whether they pass the derived tolerance. */
static int ref_vs_naive(const tl_moe_shape *s, const char *routing, uint64_t seed, int tile_m, tl_err_metrics *m)
{
    tl_routing r;
    assert_int_equal(tl_routing_parse(routing, &r), 0);
    tl_moe_inputs in;
    assert_int_equal(tl_moe_inputs_make(s, &r, seed, &in), 0);
    tl_worklist wl;
    assert_int_equal(tl_worklist_build(in.topk_ids, s->tokens, s->top_k, s->n_experts, tile_m, &wl), 0);
    size_t n = (size_t)s->tokens * s->hidden;
    float *ref = malloc(n * sizeof(float)), *nv = malloc(n * sizeof(float));
    assert_non_null(ref);
    assert_non_null(nv);
    assert_int_equal(tl_moe_reference(&in, &wl, ref, NULL), 0);
    assert_int_equal(tl_moe_naive(&in, nv), 0);
    assert_int_equal(tl_compare(ref, nv, n, m), 0);
    tl_tolerance tol;
    assert_int_equal(tl_moe_tolerance(s, &tol), 0);
    int pass = tl_check_pass(m, &tol);
    if (!pass)
        fprintf(stderr, "dtype %s H %d W %d: rel_rms %g (bound %g), nan %zu\n", tl_moe_dtype_name(s->dtype), s->hidden,
                s->width, m->rel_rms, tol.rel_rms, m->nan_count);
    free(ref);
    free(nv);
    tl_worklist_free(&wl);
    tl_moe_inputs_free(&in);
    return pass;
}

static void test_small_every_dtype(void **state)
{
    (void)state;
    for (int d = 0; d < 5; d++)
        for (int shared = 0; shared <= 1; shared++) {
            tl_moe_shape s = {7, 256, 128, 8, 2, shared, all_dtypes[d]};
            tl_err_metrics m;
            assert_true(ref_vs_naive(&s, "random", 11 + d, 16, &m));
            /* the two paths share only the inputs: they must agree far below the tolerance */
            assert_true(m.rel_rms < 1e-5);
            assert_int_equal(m.nan_count, 0);
        }
}

/* DeepSeek-V3.2's hidden size with the TP8 expert width, experts cut to 16 and top-4. */
static void test_realistic_width(void **state)
{
    (void)state;
    const tl_moe_dtype ds[] = {TL_MOE_BF16, TL_MOE_FP8, TL_MOE_A16W4};
    for (int d = 0; d < 3; d++) {
        tl_moe_shape s = {2, 7168, 256, 16, 4, 0, ds[d]};
        tl_err_metrics m;
        assert_true(ref_vs_naive(&s, "random", 5, 16, &m));
        assert_true(m.rel_rms < 1e-5);
    }
}

/* Widths that do not divide the 128 block (96, 192) and one that does (384): the reference
 * handles partial blocks and groups; the kernel's contract refuses the first two. */
static void test_awkward_widths(void **state)
{
    (void)state;
    const int widths[] = {96, 192, 384};
    for (int w = 0; w < 3; w++)
        for (int d = 0; d < 5; d++) {
            tl_moe_shape s = {3, 160, widths[w], 4, 2, 0, all_dtypes[d]};
            tl_err_metrics m;
            assert_true(ref_vs_naive(&s, "balanced", 3, 16, &m));
            assert_true(m.rel_rms < 1e-5);
            tl_moe_shape k = {3, 7168, widths[w], 256, 8, 0, all_dtypes[d]};
            int rc = tl_moe_kernel_supports(&k);
            assert_int_equal(rc, widths[w] % 128 ? TL_EUSAGE : 0);
            if (rc) assert_non_null(strstr(tl_last_error(), "not a multiple of 128"));
        }
    tl_moe_shape h = {1, 7000, 256, 8, 2, 0, TL_MOE_BF16};
    assert_int_equal(tl_moe_kernel_supports(&h), TL_EUSAGE);
    tl_moe_shape sh = {1, 7168, 256, 8, 2, 1, TL_MOE_BF16};
    assert_int_equal(tl_moe_kernel_supports(&sh), TL_EUSAGE);
}

/* The reference walks the worklist; its result must not depend on the tile height, for every
 * routing (balanced, random, zipf, trace), and a worklist of other inputs is refused. */
static void test_worklist_every_routing(void **state)
{
    (void)state;
    char trace[256];
    snprintf(trace, sizeof trace, "%s/test_moe_trace.csv", TL_BINARY_DIR);
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    /* 9 tokens (the shape's): k = 2 expert ids, then their weights (scaled to sum 1) */
    fprintf(f, "# token's experts and weights\n0,3,1,1\n5,1,0.7,0.3\n\n2,7,2,1\n4 6 1 3\n1 0 .5 .5\n7 2 3 1\n"
               "3 5 1 1\n6 4 .9 .1\n0 7 .25 .75\n");
    fclose(f);
    char trace_spec[300];
    snprintf(trace_spec, sizeof trace_spec, "trace:%s", trace);
    const char *routings[] = {"balanced", "random", "zipf:1.2", trace_spec};
    for (int r = 0; r < 4; r++) {
        tl_moe_shape s = {9, 128, 128, 8, 2, 0, TL_MOE_BF16};
        tl_routing ro;
        assert_int_equal(tl_routing_parse(routings[r], &ro), 0);
        tl_moe_inputs in;
        assert_int_equal(tl_moe_inputs_make(&s, &ro, 77, &in), 0);
        size_t n = (size_t)s.tokens * s.hidden;
        float *o16 = malloc(n * sizeof(float)), *o1 = malloc(n * sizeof(float)), *o64 = malloc(n * sizeof(float));
        tl_worklist w16, w1, w64;
        assert_int_equal(tl_worklist_build(in.topk_ids, s.tokens, s.top_k, s.n_experts, 16, &w16), 0);
        assert_int_equal(tl_worklist_build(in.topk_ids, s.tokens, s.top_k, s.n_experts, 1, &w1), 0);
        assert_int_equal(tl_worklist_build(in.topk_ids, s.tokens, s.top_k, s.n_experts, 64, &w64), 0);
        uint16_t *act = malloc((size_t)w16.n_rows_padded * s.width * sizeof(uint16_t));
        assert_int_equal(tl_moe_reference(&in, &w16, o16, act), 0);
        assert_int_equal(tl_moe_reference(&in, &w1, o1, NULL), 0);
        assert_int_equal(tl_moe_reference(&in, &w64, o64, NULL), 0);
        assert_memory_equal(o16, o1, n * sizeof(float));
        assert_memory_equal(o16, o64, n * sizeof(float));
        /* act rows: real rows nonzero somewhere, padding rows all zero */
        for (int row = 0; row < w16.n_rows_padded; row++) {
            int nz = 0;
            for (int j = 0; j < s.width; j++) nz |= act[(size_t)row * s.width + j] != 0;
            assert_int_equal(nz, w16.sorted_ids[row] != TL_WL_PAD);
        }
        /* a worklist built from other routing is refused */
        int32_t *ids2 = malloc((size_t)s.tokens * s.top_k * sizeof(int32_t));
        for (int i = 0; i < s.tokens * s.top_k; i++) ids2[i] = (in.topk_ids[i] + 1) % s.n_experts;
        tl_worklist bad;
        assert_int_equal(tl_worklist_build(ids2, s.tokens, s.top_k, s.n_experts, 16, &bad), 0);
        assert_int_equal(tl_moe_reference(&in, &bad, o1, NULL), TL_EUSAGE);
        tl_worklist_free(&bad);
        free(ids2);
        free(act);
        free(o16);
        free(o1);
        free(o64);
        tl_worklist_free(&w16);
        tl_worklist_free(&w1);
        tl_worklist_free(&w64);
        tl_moe_inputs_free(&in);
    }
    remove(trace);
}

/* The check can fail: routing one token's slot to a different expert is caught. */
static void test_tolerance_catches_errors(void **state)
{
    (void)state;
    tl_moe_shape s = {4, 256, 128, 8, 2, 0, TL_MOE_FP8};
    tl_routing r;
    assert_int_equal(tl_routing_parse("random", &r), 0);
    tl_moe_inputs in;
    assert_int_equal(tl_moe_inputs_make(&s, &r, 9, &in), 0);
    size_t n = (size_t)s.tokens * s.hidden;
    float *ref = malloc(n * sizeof(float)), *bad = malloc(n * sizeof(float));
    tl_worklist wl;
    assert_int_equal(tl_worklist_build(in.topk_ids, s.tokens, s.top_k, s.n_experts, 16, &wl), 0);
    assert_int_equal(tl_moe_reference(&in, &wl, ref, NULL), 0);
    int32_t e0 = in.topk_ids[0], other = (e0 + 1) % s.n_experts;
    if (other == in.topk_ids[1]) other = (other + 1) % s.n_experts;
    in.topk_ids[0] = other;
    assert_int_equal(tl_moe_naive(&in, bad), 0);
    tl_err_metrics m;
    tl_tolerance tol;
    assert_int_equal(tl_compare(ref, bad, n, &m), 0);
    assert_int_equal(tl_moe_tolerance(&s, &tol), 0);
    assert_false(tl_check_pass(&m, &tol));
    /* and a NaN never passes */
    memcpy(bad, ref, n * sizeof(float));
    bad[n / 2] = NAN;
    assert_int_equal(tl_compare(ref, bad, n, &m), 0);
    assert_false(tl_check_pass(&m, &tol));
    free(ref);
    free(bad);
    tl_worklist_free(&wl);
    tl_moe_inputs_free(&in);
}

/* The bound grows by the size of one rounding flip of an activation as tokens x width shrinks:
 * DeepSeek-V3.2 at TP8 (width 256), bf16 6.04e-4 from the summation model alone, 2 u J / sqrt(M W)
 * with u = 2^-8, J = 7 for one flip (3.47e-3 at M = 1); fp8's E4M3 activations (u = 2^-4, J = 3)
 * 2.36e-2 at M = 1, and the MX types' MXFP8 (E4M3 elements) the same; every row allows at least
 * the whole bound. */
/* The accumulators' models (tl_moe_acc): float32 sums give tl_moe_tolerance's bound exactly; the
 * 13-bit E4M3 accumulator promoted every 128 values adds 128 ulp^2 / 6 per stage to the squared
 * relative model (stage 2 alone: to tl_moe_tolerance_stage2's); bits outside [8, 23] are refused. */
static void test_tolerance_acc(void **state)
{
    (void)state;
    const tl_moe_shape s = {.tokens = 4096, .hidden = 7168, .width = 2048, .n_experts = 256, .top_k = 8, .dtype = TL_MOE_FP8};
    tl_tolerance t, f, w, t2, w2;
    assert_int_equal(tl_moe_tolerance(&s, &t), 0);
    assert_int_equal(tl_moe_tolerance_acc(&s, (tl_moe_acc){TL_MOE_ACC_FP32, TL_MOE_ACC_FP32}, &f), 0);
    assert_true(t.rel_rms == f.rel_rms && t.predicted == f.predicted && t.row_factor == f.row_factor);
    assert_int_equal(tl_moe_tolerance_acc(&s, (tl_moe_acc){13, 13}, &w), 0);
    const double blk = 128.0 * 0x1p-26 / 6.0; /* 128 ulp^2 / 6, ulp = 2^-13 */
    assert_true(w.predicted > t.predicted && w.predicted * w.predicted > t.predicted * t.predicted + 2.0 * blk);
    assert_true(w.rel_rms > 4.0 * sqrt(2.0 * blk));
    assert_int_equal(tl_moe_tolerance_stage2(&s, &t2), 0);
    assert_int_equal(tl_moe_tolerance_stage2_acc(&s, 13, &w2), 0);
    assert_true(fabs(w2.predicted * w2.predicted - t2.predicted * t2.predicted - blk) < 1e-6 * blk);
    assert_true(w2.rel_rms == 16.0 * w2.predicted);
    assert_int_equal(tl_moe_tolerance_acc(&s, (tl_moe_acc){13, 24}, &w), TL_EUSAGE);
    assert_int_equal(tl_moe_tolerance_stage2_acc(&s, 7, &w2), TL_EUSAGE);
    tl_clear_error();
}

static void test_tolerance_flip_term(void **state)
{
    (void)state;
    tl_moe_shape s = {.tokens = 1, .hidden = 7168, .width = 256, .n_experts = 256, .top_k = 8, .dtype = TL_MOE_BF16};
    tl_tolerance t1, t16, t256, f1;
    assert_int_equal(tl_moe_tolerance(&s, &t1), 0);
    s.tokens = 16;
    assert_int_equal(tl_moe_tolerance(&s, &t16), 0);
    s.tokens = 256;
    assert_int_equal(tl_moe_tolerance(&s, &t256), 0);
    s.tokens = 1;
    s.dtype = TL_MOE_FP8;
    assert_int_equal(tl_moe_tolerance(&s, &f1), 0);
    const double base = 4.0 * t1.predicted, flip = 2.0 * 7.0 / 256.0 / 16.0;
    assert_true(fabs(t1.rel_rms - sqrt(base * base + flip * flip)) < 1e-12);
    assert_true(t1.rel_rms > 3.4e-3 && t1.rel_rms < 3.55e-3);
    assert_true(t16.rel_rms > 1.0e-3 && t16.rel_rms < 1.1e-3);
    assert_true(t256.rel_rms > 6.0e-4 && t256.rel_rms < 6.6e-4);
    assert_true(f1.rel_rms > 2.3e-2 && f1.rel_rms < 2.4e-2);
    for (int mx = 0; mx < 2; mx++) { /* the MX types' MXFP8 activations: E4M3 too, the same bound */
        tl_tolerance m1;
        s.dtype = mx ? TL_MOE_MXFP8 : TL_MOE_MXFP4;
        assert_int_equal(tl_moe_tolerance(&s, &m1), 0);
        assert_true(m1.rel_rms == f1.rel_rms && m1.row_factor == f1.row_factor && m1.predicted == f1.predicted);
    }
    const tl_tolerance *all[] = {&t1, &t16, &t256, &f1};
    for (int i = 0; i < 4; i++) {
        assert_true(all[i]->row_factor >= 1.0);
        assert_int_equal(all[i]->check_max_abs, 0);
    }
    /* at any M the row bound is the summation model's 10x plus one flip within the row */
    assert_true(fabs(t256.row_factor * t256.rel_rms - sqrt(100.0 * base * base + flip * flip)) < 1e-12);
}

/* ---- the activation quantizers again, from the kernels' per-element arithmetic (contract/quant.h)
 * rather than numerics' array quantizers the reference calls: what x's codes and Q2 must equal ---- */

/* One row of n values of dtype d's activations: the values stage 1 / stage 2 read (deq), and for
 * the MX types the E4M3FN codes and E8M0 scales (codes, e8m0: may be NULL). fp8: 1 x 128 groups
 * from the row's start, tl_quant_fp8_scale / tl_quant_fp8_code (E4M3FN, float32 scales); mxfp4,
 * mxfp8: blocks of 32, tl_quant_mx_scale / tl_quant_mx_code (E4M3FN, the floor rule); bf16, a16w4:
 * the values as given. */
static void kernel_quant_row(tl_moe_dtype d, const float *v, size_t n, uint8_t *codes, uint8_t *e8m0, float *deq)
{
    const int mx = tl_moe_mx_acts(d);
    if (d != TL_MOE_FP8 && !mx) {
        memcpy(deq, v, n * sizeof(float));
        return;
    }
    const size_t g = mx ? TL_QUANT_MX_BLOCK : TL_QUANT_GROUP;
    for (size_t b0 = 0; b0 < n; b0 += g) {
        const size_t len = n - b0 < g ? n - b0 : g;
        uint32_t m = 0;
        for (size_t i = 0; i < len; i++) {
            const uint32_t a = mx ? tl_quant_abs_bits(v[b0 + i]) : tl_quant_abs_bits_no_nan(v[b0 + i]);
            m = a > m ? a : m;
        }
        if (mx) {
            const uint32_t sc = tl_quant_mx_scale(m, 0, 0);
            if (e8m0) e8m0[b0 / g] = (uint8_t)sc;
            for (size_t i = 0; i < len; i++) {
                const uint32_t c = tl_quant_mx_code(v[b0 + i], sc, 0);
                if (codes) codes[b0 + i] = (uint8_t)c;
                deq[b0 + i] = sc == 0xFFu ? NAN : tl_code_e4m3_to_f32(c) * tl_code_e8m0_to_f32(sc);
            }
        } else {
            const float sc = tl_quant_fp8_scale(tl_code_bits_f32(m), 0, 0);
            for (size_t i = 0; i < len; i++) deq[b0 + i] = tl_code_e4m3_to_f32(tl_quant_fp8_code(v[b0 + i], sc, 0)) * sc;
        }
    }
}

/* The op's function (contract/moe.h) as straight loops in double, with x's bf16 values quantized
 * and Q2 applied by kernel_quant_row as for act_dtype (in->s.dtype but to try another): shares only the inputs' bf16 codes, weights (decoded one
 * element at a time) and routing with the reference. The summation orders are tl_moe_naive's
 * (K ascending, slots in order, shared experts last), so where the two quantizers agree its output
 * equals tl_moe_naive's bit for bit. */
static void independent_naive(const tl_moe_inputs *in, tl_moe_dtype act_dtype, float *out)
{
    const int H = in->s.hidden, W = in->s.width, k = in->s.top_k;
    float *xv = malloc((size_t)H * sizeof(float)), *x = malloc((size_t)H * sizeof(float));
    float *h = malloc((size_t)2 * W * sizeof(float)), *a = malloc((size_t)W * sizeof(float));
    float *q = malloc((size_t)W * sizeof(float));
    double *o = malloc((size_t)H * sizeof(double));
    assert_true(xv && x && h && a && q && o);
    for (int t = 0; t < in->s.tokens; t++) {
        for (int c = 0; c < H; c++) xv[c] = tl_code_bf16_to_f32(in->x[(size_t)t * H + c]);
        kernel_quant_row(act_dtype, xv, (size_t)H, NULL, NULL, x);
        for (int c = 0; c < H; c++) o[c] = 0;
        for (int sl = 0; sl < k + in->s.n_shared; sl++) {
            const int shared = sl >= k, e = shared ? sl - k : in->topk_ids[(size_t)t * k + sl];
            const tl_moe_weights *w1 = shared ? &in->ws1 : &in->w1, *w2 = shared ? &in->ws2 : &in->w2;
            const double wgt = shared ? 1.0 : in->topk_w[(size_t)t * k + sl];
            for (int j = 0; j < 2 * W; j++) {
                double acc = 0;
                for (int c = 0; c < H; c++) acc += (double)x[c] * tl_moe_weight_at(w1, e, j, c);
                h[j] = (float)acc;
            }
            for (int j = 0; j < W; j++) { /* SwiGLU in float32, then the bf16 buffer's rounding */
                const float v = h[j] / (1.0f + expf(-h[j])) * h[W + j];
                a[j] = tl_code_bf16_to_f32(tl_code_bf16_from_f32(v));
            }
            kernel_quant_row(act_dtype, a, (size_t)W, NULL, NULL, q); /* Q2 */
            for (int c = 0; c < H; c++) {
                double acc = 0;
                for (int j = 0; j < W; j++) acc += (double)q[j] * tl_moe_weight_at(w2, e, c, j);
                o[c] += wgt * acc;
            }
        }
        for (int c = 0; c < H; c++) out[(size_t)t * H + c] = (float)o[c];
    }
    free(xv), free(x), free(h), free(a), free(q), free(o);
}

/* Every dtype (the MX types' MXFP8 activations above all), with partial MX blocks and fp8 groups
 * along both K (hidden 200, width 96) and a shared expert: the independent loop above equals
 * tl_moe_naive bit for bit, and the reference within the tolerance (and far inside it: the sides
 * differ only in float32 against double sums). */
static void test_independent_quantizers(void **state)
{
    (void)state;
    for (int d = 0; d < 5; d++) {
        tl_moe_shape s = {.tokens = 3, .hidden = 200, .width = 96, .n_experts = 4, .top_k = 2, .n_shared = 1,
                          .dtype = all_dtypes[d]};
        tl_routing r;
        assert_int_equal(tl_routing_parse("random", &r), 0);
        tl_moe_inputs in;
        assert_int_equal(tl_moe_inputs_make(&s, &r, 21 + d, &in), 0);
        tl_worklist wl;
        assert_int_equal(tl_worklist_build(in.topk_ids, s.tokens, s.top_k, s.n_experts, 16, &wl), 0);
        const size_t n = (size_t)s.tokens * s.hidden;
        float *ref = malloc(n * sizeof(float)), *nv = malloc(n * sizeof(float)), *ind = malloc(n * sizeof(float));
        assert_true(ref && nv && ind);
        assert_int_equal(tl_moe_reference(&in, &wl, ref, NULL), 0);
        assert_int_equal(tl_moe_naive(&in, nv), 0);
        independent_naive(&in, s.dtype, ind);
        if (memcmp(nv, ind, n * sizeof(float)) != 0) fail_msg("%s: tl_moe_naive differs from the independent loop", tl_moe_dtype_name(s.dtype));
        tl_err_metrics m;
        tl_tolerance tol;
        assert_int_equal(tl_compare(ref, ind, n, &m), 0);
        assert_int_equal(tl_moe_tolerance(&s, &tol), 0);
        if (!tl_check_pass(&m, &tol) || m.rel_rms > 1e-5 || m.nan_count)
            fail_msg("%s: reference against the independent loop: rel_rms %g (bound %g), %zu NaN",
                     tl_moe_dtype_name(s.dtype), m.rel_rms, tol.rel_rms, m.nan_count);
        /* the MX types' quantization is not the identity here: bf16 activations give another output */
        if (tl_moe_mx_acts(s.dtype)) {
            independent_naive(&in, TL_MOE_BF16, nv);
            assert_int_equal(tl_compare(nv, ind, n, &m), 0);
            assert_true(m.rel_rms > 1e-3);
        }
        free(ref), free(nv), free(ind);
        tl_worklist_free(&wl);
        tl_moe_inputs_free(&in);
    }
}

/* Rounds v to bf16 values in place. */
static void to_bf16(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) v[i] = tl_code_bf16_to_f32(tl_code_bf16_from_f32(v[i]));
}

/* The MX types' token arrays: xq and xe are tl_mx_quantize's codes and scales (E4M3FN, floor rule,
 * blocks of 32 from each row's start) of x's bf16 values, and the kernels' arithmetic's; xs is
 * NULL (and xe for the other types, xq for bf16 and a16w4). From random tokens (hidden 1000: a
 * short last block a row) and from a caller's floats that bf16 does not hold, with an all-zero
 * block (signed zeros), one of subnormal floats and one near float32's largest value. */
static void test_mx_token_codes(void **state)
{
    (void)state;
    const int M = 5, H = 1000, nb = (H + 31) / 32;
    float *user = malloc((size_t)M * H * sizeof(float)), *v = malloc((size_t)H * sizeof(float));
    float *deq = malloc((size_t)H * sizeof(float));
    uint8_t *c = malloc((size_t)H), *sc = malloc((size_t)nb), *kc = malloc((size_t)H), *ks = malloc((size_t)nb);
    int32_t ids[5 * 2];
    float w[5 * 2];
    assert_true(user && v && deq && c && sc && kc && ks);
    tl_rng g;
    tl_rng_seed(&g, 4242);
    for (int i = 0; i < M * H; i++) user[i] = (float)(3.0 * tl_rng_normal(&g)) * 1.001f;
    for (int i = 0; i < 32; i++) user[64 + i] = i % 3 ? 0.0f : -0.0f;   /* row 0, block 2: zeros */
    for (int i = 0; i < 32; i++) user[H + 32 + i] = (float)(i + 1) * 1e-41f; /* row 1, block 1: subnormal */
    user[2 * H + 995] = 3.0e38f;                                          /* row 2, the short block */
    for (int t = 0; t < M; t++) ids[2 * t] = t % 4, ids[2 * t + 1] = (t + 1) % 4, w[2 * t] = w[2 * t + 1] = 0.5f;
    for (int d = 0; d < 5; d++) {
        tl_moe_shape s = {.tokens = M, .hidden = H, .width = 64, .n_experts = 4, .top_k = 2, .dtype = all_dtypes[d]};
        for (int from_user = 0; from_user < 2; from_user++) {
            tl_moe_inputs in;
            memset(&in, 0, sizeof in);
            tl_routing r;
            assert_int_equal(tl_routing_parse("random", &r), 0);
            if (from_user) assert_int_equal(tl_moe_tokens_set(&in, &s, user, ids, w), 0);
            else assert_int_equal(tl_moe_tokens_make(&in, &s, &r, 99 + d), 0);
            const int mx = tl_moe_mx_acts(s.dtype);
            assert_true((in.xq != NULL) == (mx || s.dtype == TL_MOE_FP8));
            assert_true((in.xs != NULL) == (s.dtype == TL_MOE_FP8));
            assert_true((in.xe != NULL) == mx);
            for (int t = 0; mx && t < M; t++) {
                for (int i = 0; i < H; i++) v[i] = tl_code_bf16_to_f32(in.x[(size_t)t * H + i]);
                if (from_user) { /* x holds the caller's values rounded to bf16 */
                    memcpy(deq, user + (size_t)t * H, (size_t)H * sizeof(float));
                    to_bf16(deq, (size_t)H);
                    assert_memory_equal(deq, v, (size_t)H * sizeof(float));
                }
                assert_int_equal(tl_mx_quantize(TL_NF_E4M3FN, TL_SCALE_FLOOR, 32, v, (size_t)H, c, sc), 0);
                kernel_quant_row(s.dtype, v, (size_t)H, kc, ks, deq);
                if (memcmp(c, in.xq + (size_t)t * H, (size_t)H) || memcmp(sc, in.xe + (size_t)t * nb, (size_t)nb))
                    fail_msg("%s row %d: xq/xe differ from tl_mx_quantize's", tl_moe_dtype_name(s.dtype), t);
                if (memcmp(c, kc, (size_t)H) || memcmp(sc, ks, (size_t)nb))
                    fail_msg("%s row %d: tl_mx_quantize differs from the kernels' arithmetic", tl_moe_dtype_name(s.dtype), t);
            }
            if (mx && from_user) {
                assert_int_equal(in.xe[2], 0x00); /* the zero block: scale 2^-127, codes +-0 */
                for (int i = 0; i < 32; i++) assert_int_equal(in.xq[64 + i], i % 3 ? 0x00 : 0x80);
                assert_int_equal(in.xe[nb + 1], 0x00); /* bf16 subnormals: amax under 2^-126 */
                assert_int_equal(in.xe[2 * nb + nb - 1], 127 + 127 - 8); /* 3e38 ~ 2^127.8: X = 2^119 */
            }
            tl_moe_inputs_free(&in);
        }
    }
    free(user), free(v), free(deq), free(c), free(sc), free(kc), free(ks);
}

/* Q2 (tl_moe_q2_row) on a row of 170 bf16 values, blocks of 32 and a short sixth of 10: an
 * all-zero block (signed zeros), one holding NaN, one +Inf, one -Inf, an ordinary block whose
 * largest value saturates (1.9375 = 496 x 2^-8: the floor rule's X = 2^-8, 496 > 448), and the
 * short block. The MX types: each block as the kernels' arithmetic gives it: zeros keep their
 * signs, a NaN or Inf block is NaN throughout and leaves the others alone, 1.9375 -> 1.75. fp8: its
 * 1 x 128 groups' arithmetic (NaN and Inf there too); bf16 and a16w4: the values as they are. */
static void test_q2_special_blocks(void **state)
{
    (void)state;
    enum { W = 170 };
    float v[W], got[W], want[W];
    uint16_t code[W];
    tl_rng g;
    tl_rng_seed(&g, 7);
    for (int i = 0; i < W; i++) v[i] = (float)tl_rng_normal(&g);
    for (int i = 0; i < 32; i++) v[i] = i % 2 ? -0.0f : 0.0f;
    v[32 + 7] = NAN;
    v[64 + 31] = INFINITY;
    v[96] = -INFINITY;
    for (int i = 128; i < 160; i++) v[i] = fminf(fmaxf(v[i], -1.5f), 1.5f);
    v[128 + 3] = 1.9375f;
    to_bf16(v, W);
    for (int i = 0; i < W; i++) code[i] = (uint16_t)tl_code_bf16_from_f32(v[i]);
    for (int d = 0; d < 5; d++) {
        const tl_moe_dtype dt = all_dtypes[d];
        for (int i = 0; i < W; i++) got[i] = 12345.0f;
        assert_int_equal(tl_moe_q2_row(dt, W, code, got), 0);
        kernel_quant_row(dt, v, W, NULL, NULL, want);
        for (int i = 0; i < W; i++) {
            const int same = isnan(want[i]) ? isnan(got[i]) : memcmp(&want[i], &got[i], sizeof(float)) == 0;
            if (!same) fail_msg("%s: Q2 value %d is %a, want %a", tl_moe_dtype_name(dt), i, (double)got[i], (double)want[i]);
        }
        if (!tl_moe_mx_acts(dt)) continue;
        for (int i = 0; i < 32; i++) assert_true(got[i] == 0.0f && !!signbit(got[i]) == i % 2);
        for (int i = 32; i < 128; i++) assert_true(isnan(got[i]));
        assert_true(got[128 + 3] == 1.75f);
        for (int i = 128; i < W; i++) assert_true(isfinite(got[i]));
    }
    assert_int_equal(tl_moe_q2_row(TL_MOE_MXFP8, 0, code, got), TL_EUSAGE);
}

/* Random-routing inputs of shape s (seeded) and their worklist of 16-row tiles. */
static void make_case(const tl_moe_shape *s, uint64_t seed, tl_moe_inputs *in, tl_worklist *wl)
{
    tl_routing r;
    assert_int_equal(tl_routing_parse("random", &r), 0);
    assert_int_equal(tl_moe_inputs_make(s, &r, seed, in), 0);
    assert_int_equal(tl_worklist_build(in->topk_ids, s->tokens, s->top_k, s->n_experts, 16, wl), 0);
}

/* Stage 2 from given activations: fed the reference's own stage-1 output it reproduces the
 * reference bit for bit (every dtype); one changed activation moves its token's row. */
static void test_reference_from_act(void **state)
{
    (void)state;
    for (int d = 0; d < 5; d++) {
        tl_moe_shape s = {.tokens = 5, .hidden = 256, .width = 128, .n_experts = 6, .top_k = 2, .dtype = all_dtypes[d]};
        tl_moe_inputs in;
        tl_worklist wl;
        make_case(&s, 11, &in, &wl);
        size_t n = (size_t)s.tokens * s.hidden, na = (size_t)wl.n_rows_padded * s.width;
        float *ref = malloc(n * sizeof(float)), *again = malloc(n * sizeof(float));
        uint16_t *act = malloc(na * sizeof(uint16_t));
        assert_non_null(ref);
        assert_non_null(again);
        assert_non_null(act);
        assert_int_equal(tl_moe_reference(&in, &wl, ref, act), 0);
        assert_int_equal(tl_moe_reference_from_act(&in, &wl, act, again), 0);
        assert_memory_equal(ref, again, n * sizeof(float));
        size_t row = 0; /* the first real row of the worklist */
        while (wl.sorted_ids[row] == TL_WL_PAD) row++;
        act[row * s.width + 3] ^= 0x4000; /* a large change of one activation */
        assert_int_equal(tl_moe_reference_from_act(&in, &wl, act, again), 0);
        size_t token = (size_t)wl.sorted_ids[row] / s.top_k;
        assert_memory_not_equal(ref + token * s.hidden, again + token * s.hidden, s.hidden * sizeof(float));
        free(ref);
        free(again);
        free(act);
        tl_worklist_free(&wl);
        tl_moe_inputs_free(&in);
    }
}

/* Stage 1's comparison: equal passes; one value one bf16 step apart passes (counted); three steps
 * on a large value fails; a nonzero padding value fails; more than 1 in 20 one step apart fails. */
static void test_compare_act(void **state)
{
    (void)state;
    tl_moe_shape s = {.tokens = 3, .hidden = 512, .width = 64, .n_experts = 4, .top_k = 2, .dtype = TL_MOE_BF16};
    tl_moe_inputs in;
    tl_worklist wl;
    make_case(&s, 5, &in, &wl);
    size_t n = (size_t)s.tokens * s.hidden, na = (size_t)wl.n_rows_padded * s.width;
    float *out = malloc(n * sizeof(float));
    uint16_t *ref = malloc(na * sizeof(uint16_t)), *got = malloc(na * sizeof(uint16_t));
    assert_non_null(out);
    assert_non_null(ref);
    assert_non_null(got);
    assert_int_equal(tl_moe_reference(&in, &wl, out, ref), 0);
    size_t real = 0, pad = 0, big = 0;
    while (wl.sorted_ids[real] == TL_WL_PAD) real++;
    while (wl.sorted_ids[pad] != TL_WL_PAD) pad++;
    for (size_t c = 1; c < (size_t)s.width; c++) /* the largest value of the real row */
        if ((ref[real * s.width + c] & 0x7FFF) > (ref[real * s.width + big] & 0x7FFF)) big = c;
    tl_moe_act_diff d;
    memcpy(got, ref, na * sizeof(uint16_t));
    assert_int_equal(tl_moe_compare_act(&s, &wl, ref, got, &d), 0);
    assert_true(d.pass);
    assert_int_equal(d.one_step, 0);
    assert_int_equal(d.compared, (size_t)s.tokens * s.top_k * s.width);
    got[real * s.width + big] += 1; /* one code further from zero: one step */
    assert_int_equal(tl_moe_compare_act(&s, &wl, ref, got, &d), 0);
    assert_true(d.pass);
    assert_int_equal(d.one_step, 1);
    const uint16_t keep_ref = ref[real * s.width + big], keep_got = got[real * s.width + big];
    ref[real * s.width + big] = 0x3F80; /* 1.0 against the code two below it: two steps, not one */
    got[real * s.width + big] = 0x3F7E;
    assert_int_equal(tl_moe_compare_act(&s, &wl, ref, got, &d), 0);
    assert_false(d.pass);
    assert_int_equal(d.far, 1);
    ref[real * s.width + big] = keep_ref, got[real * s.width + big] = keep_got;
    got[real * s.width + big] += 2; /* three steps */
    assert_int_equal(tl_moe_compare_act(&s, &wl, ref, got, &d), 0);
    assert_false(d.pass);
    assert_int_equal(d.far, 1);
    assert_int_equal(d.worst_row, real);
    assert_int_equal(d.worst_col, big);
    memcpy(got, ref, na * sizeof(uint16_t));
    got[pad * s.width] = 0x3F80; /* 1.0 in a padding row */
    assert_int_equal(tl_moe_compare_act(&s, &wl, ref, got, &d), 0);
    assert_false(d.pass);
    assert_int_equal(d.padding_bad, 1);
    memcpy(got, ref, na * sizeof(uint16_t));
    for (size_t c = 0; c < (size_t)s.width / 8; c++) /* 1 in 8 of one row's values, one step each */
        if (got[real * s.width + c * 8] & 0x7FFF) got[real * s.width + c * 8] += 1;
    for (size_t i = 0; i < na; i += 8) /* and 1 in 8 everywhere else */
        if (wl.sorted_ids[i / s.width] != TL_WL_PAD && (got[i] & 0x7FFF) && got[i] == ref[i]) got[i] += 1;
    assert_int_equal(tl_moe_compare_act(&s, &wl, ref, got, &d), 0);
    assert_int_equal(d.far, 0);
    assert_false(d.pass);
    assert_true(d.one_step_max == 0.05);
    /* summed in the E4M3 wgmma's 13-bit accumulator (promoted every 128 values): its model allows
     * more values one step apart (4 x e1 / 2u, over 1 in 8 at K = 512) and a wider tau, and the same
     * three steps on a large value still fail */
    assert_int_equal(tl_moe_compare_act_acc(&s, &wl, ref, got, 13, &d), 0);
    assert_true(d.pass);
    assert_true(d.one_step_max > 0.125 && d.one_step_max < 1.0);
    const double tau13 = d.tau;
    assert_int_equal(tl_moe_compare_act(&s, &wl, ref, got, &d), 0);
    assert_true(tau13 > 10.0 * d.tau);
    memcpy(got, ref, na * sizeof(uint16_t));
    got[real * s.width + big] += 3;
    assert_int_equal(tl_moe_compare_act_acc(&s, &wl, ref, got, 13, &d), 0);
    assert_false(d.pass);
    assert_int_equal(d.far, 1);
    assert_int_equal(tl_moe_compare_act_acc(&s, &wl, ref, got, 7, &d), TL_EUSAGE);
    assert_int_equal(tl_moe_compare_act_acc(&s, &wl, ref, got, 24, &d), TL_EUSAGE);
    tl_clear_error();
    free(out);
    free(ref);
    free(got);
    tl_worklist_free(&wl);
    tl_moe_inputs_free(&in);
}

/* Same seed, same bytes; another seed, other bytes; never all zero. */
static void test_inputs_seeded(void **state)
{
    (void)state;
    for (int d = 0; d < 5; d++) {
        tl_moe_weights a, b, c;
        assert_int_equal(tl_moe_weights_make(all_dtypes[d], 3, 256, 384, 42, &a), 0);
        assert_int_equal(tl_moe_weights_make(all_dtypes[d], 3, 256, 384, 42, &b), 0);
        assert_int_equal(tl_moe_weights_make(all_dtypes[d], 3, 256, 384, 43, &c), 0);
        /* the bytes per element the simulator and the bench figures use are the stored ones */
        double stored = (double)a.mat_code_bytes + (a.scales ? 4.0 : a.e8m0 ? 1.0 : 0.0) * (double)a.mat_scales;
        assert_true(stored == tl_moe_weight_bytes_per_elem(all_dtypes[d]) * 256 * 384);
        size_t bytes = a.mat_code_bytes * 3;
        assert_memory_equal(a.codes, b.codes, bytes);
        assert_memory_not_equal(a.codes, c.codes, bytes);
        size_t zeros = 0;
        for (size_t i = 0; i < bytes; i++) zeros += a.codes[i] == 0;
        assert_true(zeros < bytes / 4);
        float *y = malloc((size_t)256 * 384 * sizeof(float));
        assert_int_equal(tl_moe_weights_dequant(&a, 2, y), 0);
        double ss = 0;
        for (size_t i = 0; i < (size_t)256 * 384; i++) {
            assert_true(isfinite(y[i]));
            ss += (double)y[i] * y[i];
        }
        double rms = sqrt(ss / (256.0 * 384)), want = 1.0 / sqrt(384.0);
        assert_true(rms > 0.3 * want && rms < 3.0 * want);
        /* the per-element decoder agrees with the bulk one */
        for (int i = 0; i < 1000; i++) {
            int row = (i * 37) % 256, col = (i * 101) % 384;
            assert_true(tl_moe_weight_at(&a, 2, row, col) == y[(size_t)row * 384 + col]);
        }
        free(y);
        tl_moe_weights_free(&a);
        tl_moe_weights_free(&b);
        tl_moe_weights_free(&c);
    }
}

static void test_bad_shapes(void **state)
{
    (void)state;
    tl_moe_shape s = {0, 128, 128, 8, 2, 0, TL_MOE_BF16};
    assert_int_equal(tl_moe_shape_check(&s), TL_EUSAGE);
    s.tokens = 1;
    s.top_k = 9;
    assert_int_equal(tl_moe_shape_check(&s), TL_EUSAGE);
    s.top_k = 2;
    s.width = -5;
    assert_int_equal(tl_moe_shape_check(&s), TL_EUSAGE);
    s.width = 128;
    s.dtype = (tl_moe_dtype)17;
    assert_int_equal(tl_moe_shape_check(&s), TL_EUSAGE);
    s.dtype = TL_MOE_BF16;
    assert_int_equal(tl_moe_shape_check(&s), 0);
    assert_true(tl_moe_act_bytes_per_elem(TL_MOE_FP8) == 1.0 + 4.0 / 128); /* E4M3 + fp32 per 128 */
    assert_true(tl_moe_act_bytes_per_elem(TL_MOE_MXFP4) == 1.0 + 1.0 / 32); /* MXFP8: E4M3 + E8M0 per 32 */
    assert_true(tl_moe_act_bytes_per_elem(TL_MOE_MXFP8) == 1.0 + 1.0 / 32);
    assert_true(tl_moe_act_bytes_per_elem(TL_MOE_BF16) == 2.0 && tl_moe_act_bytes_per_elem(TL_MOE_A16W4) == 2.0);
    assert_true(tl_moe_act_bytes_per_elem((tl_moe_dtype)17) == 0 && tl_moe_weight_bytes_per_elem((tl_moe_dtype)17) == 0);
    assert_int_equal(tl_moe_max_tiles(1, 8, 256), 8);
    assert_int_equal(tl_moe_max_tiles(256, 8, 256), 128 + 256);
}

/* The contract's storages: bits per element agree with numerics' quantization schemes where the
 * storage is one, and the exact sizes with the arrays tl_moe_weights_make stores, on sizes that
 * leave partial blocks (rows 200, cols 96 + 1). */
static void test_contract_storage(void **state)
{
    (void)state;
    for (int d = 0; d < 5; d++) {
        const tl_storage *ws = tl_moe_weight_storage(all_dtypes[d]), *as = tl_moe_act_storage(all_dtypes[d]);
        if (ws->scheme != TL_QS_COUNT) assert_true(tl_storage_bits(ws) == tl_quant_scheme_bits(ws->scheme));
        if (as->scheme != TL_QS_COUNT) assert_true(tl_storage_bits(as) == tl_quant_scheme_bits(as->scheme));
        assert_true(tl_moe_weight_bytes_per_elem(all_dtypes[d]) == tl_storage_bits(ws) / 8);
        tl_moe_weights w;
        assert_int_equal(tl_moe_weights_make(all_dtypes[d], 1, 200, 97, 5, &w), 0);
        size_t stored = w.mat_code_bytes + (w.scales ? 4 : w.e8m0 ? 1 : 0) * w.mat_scales;
        assert_int_equal(tl_moe_weight_matrix_bytes(all_dtypes[d], 200, 97), stored);
        tl_moe_weights_free(&w);
    }
    assert_int_equal(tl_moe_act_bytes(TL_MOE_FP8, 3, 129), 3 * (129 + 2 * 4)); /* two groups a row */
    assert_int_equal(tl_moe_act_bytes(TL_MOE_A16W4, 3, 129), 3 * 129 * 2);
    assert_int_equal(tl_moe_act_bytes(TL_MOE_MXFP4, 3, 129), 3 * (129 + 5)); /* five E8M0 a row */
    assert_int_equal(tl_moe_act_bytes(TL_MOE_MXFP8, 3, 129), 3 * (129 + 5));
    assert_int_equal(tl_moe_weight_matrix_bytes(TL_MOE_FP8, 4096, 7168), 4096ull * 7168 + 32 * 56 * 4);
    assert_true(tl_moe_act_format(TL_MOE_FP8) == TL_NF_E4M3FN && tl_moe_act_format(TL_MOE_MXFP8) == TL_NF_E4M3FN &&
                tl_moe_act_format(TL_MOE_MXFP4) == TL_NF_E4M3FN);
    assert_true(tl_moe_act_format(TL_MOE_BF16) == TL_NF_BF16 && tl_moe_act_format(TL_MOE_A16W4) == TL_NF_BF16);
    assert_true(tl_moe_mx_acts(TL_MOE_MXFP4) && tl_moe_mx_acts(TL_MOE_MXFP8) && !tl_moe_mx_acts(TL_MOE_FP8) &&
                !tl_moe_mx_acts(TL_MOE_BF16) && !tl_moe_mx_acts(TL_MOE_A16W4));
    assert_int_equal(tl_moe_weight_matrix_bytes((tl_moe_dtype)17, 4, 4), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_every_dtype),      cmocka_unit_test(test_realistic_width),
        cmocka_unit_test(test_awkward_widths),         cmocka_unit_test(test_worklist_every_routing),
        cmocka_unit_test(test_tolerance_catches_errors), cmocka_unit_test(test_tolerance_flip_term),
        cmocka_unit_test(test_reference_from_act),     cmocka_unit_test(test_compare_act),
        cmocka_unit_test(test_inputs_seeded),          cmocka_unit_test(test_tolerance_acc),
        cmocka_unit_test(test_bad_shapes),             cmocka_unit_test(test_contract_storage),
        cmocka_unit_test(test_independent_quantizers), cmocka_unit_test(test_mx_token_codes),
        cmocka_unit_test(test_q2_special_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
