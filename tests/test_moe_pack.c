/* tests/test_moe_pack.c: the fused MoE kernel's packed weight layout (kernels/moe_pack.h), on both
 * lane maps (NVIDIA wave 32, AMD wave 64) and without a GPU: the packing is a permutation of the
 * matrix, every weight load of the GEMM (each lane layout of each dtype) finds the row and k that
 * its activations and scales assume, and the activation runs cover K once each. The dtype table
 * copies kernels/moe.hip's Fmt and Pack, whose static_asserts hold a run to KRUN codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/moe_pack.h"

/* A dtype's weight bits and its lane layouts (kernels/moe.hip, Fmt and Pack: runs of krun values,
 * w_vec 16-byte vectors a lane; the first layout's run is the packed one). */
typedef struct {
    const char *name;
    int bits;
    int n_layouts;
    struct { int krun, w_vec; } lay[2];
    int scaled_per_chunk; /* fp8 and a16w4 scale each chunk's sum by its 128 group */
    int w2_packed;        /* kernels/moe.hip, PACKED: all but bf16's W2 (moe_gemv_down reads rows) */
} dtype_geom;
static const dtype_geom DTYPES[] = {
    {"bf16", 16, 2, {{32, 4}, {16, 2}}, 0, 0}, /* layout 2, then layout 0 (R = 2) */
    {"fp8", 8, 1, {{32, 2}}, 1, 1},
    {"a16w4", 4, 1, {{32, 1}}, 1, 1},          /* mxfp4 has the same geometry */
    {"mxfp8", 8, 1, {{16, 1}}, 0, 1},
};

typedef struct { int hidden, width; } shape;
static const shape SHAPES[] = {
    {7168, 2048}, /* DeepSeek-V3.2, full width */
    {7168, 256},  /* TP 8 */
    {1152, 384}, {896, 2560}, {640, 256},
};

/* The lanes' activation runs of one lane layout (R of its chunks per packed chunk; rows layout:
 * R = 1) cover [0, K) once; a run stays in one 32-value MX block and one 128 group, and the chunks
 * scaled per 128 group have one group for all k-groups. */
static void check_runs(const dtype_geom *dt, int l, int K, int r, const char *what)
{
    const int krun = dt->lay[l].krun, nchunks = K / (4 * krun);
    unsigned char *cover = calloc((size_t)K, 1);
    assert_non_null(cover);
    for (int c = 0; c < nchunks; c++)
        for (int kgrp = 0; kgrp < 4; kgrp++) {
            const int k0 = tl_moe_lane_k(c, kgrp, krun, r);
            assert_true(k0 >= 0 && k0 + krun <= K);
            assert_int_equal(k0 / 32, (k0 + krun - 1) / 32);
            if (dt->scaled_per_chunk) assert_int_equal(k0 / 128, tl_moe_lane_k(c, 0, krun, r) / 128);
            for (int k = k0; k < k0 + krun; k++) cover[k]++;
        }
    for (int k = 0; k < K; k++)
        if (cover[k] != 1) fail_msg("%s, layout %d: k = %d covered %d times", what, l, k, cover[k]);
    free(cover);
}

/* One stage of one dtype, shape and wave: every check above (a stage the kernel reads in rows,
 * bf16's stage 2: its activation runs only). */
static void check_stage(const dtype_geom *dt, const shape *sh, int stage, int wave)
{
    const int K = stage == 1 ? sh->hidden : sh->width, rows = stage == 1 ? 2 * sh->width : sh->hidden;
    const int n_out = sh->width, run_bytes = dt->lay[0].w_vec * 16;
    const size_t row_bytes = (size_t)K * dt->bits / 8, total = (size_t)rows * row_bytes, n16 = total / 16;
    char what[96];
    snprintf(what, sizeof what, "%s stage %d, hidden %d width %d, wave %d", dt->name, stage, sh->hidden, sh->width, wave);
    if (stage == 2 && !dt->w2_packed) {
        for (int l = 0; l < dt->n_layouts; l++) check_runs(dt, l, K, 1, what);
        return;
    }

    /* the packing writes every 16-byte vector once, from a distinct source vector */
    unsigned char *seen = calloc(n16, 1);
    assert_non_null(seen);
    size_t dup = 0, out = 0;
    for (size_t d = 0; d < n16; d++) {
        const size_t s = tl_moe_pack_source(16 * d, stage, row_bytes, run_bytes, n_out, wave);
        if (s % 16 || s >= total) out++;
        else if (seen[s / 16]++) dup++;
    }
    if (dup || out) fail_msg("%s: %zu sources read twice, %zu outside the matrix", what, dup, out);
    free(seen);

    /* every load of every lane layout reads the packed byte whose source is row wn[f] at k lane_k */
    const int fc = tl_moe_frag_cols(wave), nf = TL_MOE_NCOLS / fc;
    size_t wrong = 0, loads = 0;
    for (int l = 0; l < dt->n_layouts; l++) {
        const int krun = dt->lay[l].krun, w_vec = dt->lay[l].w_vec, r = run_bytes / (16 * w_vec), nchunks = K / (4 * krun);
        for (size_t g = 0; g < (size_t)rows / TL_MOE_NCOLS; g++)
            for (int c = 0; c < nchunks; c++)
                for (int lane = 0; lane < wave; lane++) {
                    const int kgrp = tl_moe_lane_kgrp(wave, lane), col = tl_moe_lane_col(wave, lane);
                    const size_t k0 = (size_t)tl_moe_lane_k(c, kgrp, krun, r);
                    for (int f = 0; f < nf; f++)
                        for (int v = 0; v < w_vec; v++, loads++) {
                            const size_t dst = g * TL_MOE_NCOLS * row_bytes + 16 * (size_t)lane +
                                               tl_moe_packed_vec(c, f, v, w_vec, r, run_bytes, wave);
                            const size_t want = tl_moe_group_row(stage, g, f, col, n_out, wave) * row_bytes +
                                                k0 * dt->bits / 8 + 16 * (size_t)v;
                            wrong += tl_moe_pack_source(dst, stage, row_bytes, run_bytes, n_out, wave) != want;
                        }
                }
        if (wrong) fail_msg("%s, layout %d: %zu of %zu loads read another row or k", what, l, wrong, loads);
        check_runs(dt, l, K, r, what);
    }
}

static void test_pack_is_read_back(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; d++)
        for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
            for (int stage = 1; stage <= 2; stage++)
                for (int wave = 32; wave <= 64; wave += 32) check_stage(&DTYPES[d], &SHAPES[s], stage, wave);
}

/* The group rows by hand: NVIDIA's item 3 of stage 1 (width 2048) holds gate rows 48..63 in
 * fragments 0-1 and up rows 2096..2111 in fragments 2-3; AMD's in fragments 0 and 1; stage 2's
 * group 5 is rows 160..191. The lane maps: NVIDIA lane 13 is column 3, k-group 1; AMD lane 37 is
 * column 5, k-group 2. */
static void test_group_rows_and_lanes(void **state)
{
    (void)state;
    assert_int_equal(tl_moe_group_row(1, 3, 0, 0, 2048, 32), 48);
    assert_int_equal(tl_moe_group_row(1, 3, 1, 7, 2048, 32), 63);
    assert_int_equal(tl_moe_group_row(1, 3, 2, 0, 2048, 32), 2096);
    assert_int_equal(tl_moe_group_row(1, 3, 3, 7, 2048, 32), 2111);
    assert_int_equal(tl_moe_group_row(1, 3, 0, 15, 2048, 64), 63);
    assert_int_equal(tl_moe_group_row(1, 3, 1, 0, 2048, 64), 2096);
    assert_int_equal(tl_moe_group_row(2, 5, 0, 0, 7168, 32), 160);
    assert_int_equal(tl_moe_group_row(2, 5, 3, 7, 7168, 32), 191);
    assert_int_equal(tl_moe_group_row(2, 5, 1, 15, 7168, 64), 191);
    assert_int_equal(tl_moe_lane_col(32, 13), 3);
    assert_int_equal(tl_moe_lane_kgrp(32, 13), 1);
    assert_int_equal(tl_moe_lane_col(64, 37), 5);
    assert_int_equal(tl_moe_lane_kgrp(64, 37), 2);
    /* bf16 on NVIDIA: the first 512 packed bytes are fragment 0's first vector: lanes 0-3 hold row
     * 0's k 0..7, 32..39, 64..71, 96..103, lane 4 row 1's k 0..7 */
    const size_t rb = 7168 * 2;
    assert_int_equal(tl_moe_pack_source(0, 1, rb, 64, 2048, 32), 0);
    assert_int_equal(tl_moe_pack_source(16, 1, rb, 64, 2048, 32), 64);
    assert_int_equal(tl_moe_pack_source(64, 1, rb, 64, 2048, 32), rb);
    assert_int_equal(tl_moe_pack_source(512, 1, rb, 64, 2048, 32), 16); /* vector 1 of lane 0: k 8..15 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_is_read_back),
        cmocka_unit_test(test_group_rows_and_lanes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
