/* kernels/mma_shapes.h is the one table of matrix-instruction shapes: its macros agree with its
 * table, and the hardware presets (the "matrix_instructions" of the hw presets) and the MFMA layout
 * table (simulator/mfma.c) agree with it for every instruction they share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/tl.h"
#include "kernels/mma_shapes.h"
#include "simulator/hw.h"
#include "simulator/mfma.h"

static void expect_shape(const char *name, int m, int n, int k)
{
    const tl_mma_shape *s = tl_mma_shape_find(name);
    if (!s) fail_msg("%s is not in mma_shapes.h", name);
    if (s->m != m || s->n != n || s->k != k)
        fail_msg("%s: table %dx%dx%d, macros %dx%dx%d", name, s->m, s->n, s->k, m, n, k);
}

static void macros_agree_with_the_table(void **state)
{
    (void)state;
    expect_shape("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", TL_MMA_SM80_BF16_M, TL_MMA_SM80_BF16_N,
                 TL_MMA_SM80_BF16_K);
    expect_shape("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", TL_MMA_SM89_FP8_M, TL_MMA_SM89_FP8_N,
                 TL_MMA_SM89_FP8_K);
    expect_shape("v_mfma_f32_16x16x16_bf16", TL_MMA_GFX942_BF16_M, TL_MMA_GFX942_BF16_N, TL_MMA_GFX942_BF16_K);
    expect_shape("v_mfma_f32_16x16x32_fp8_fp8", TL_MMA_GFX942_FP8_M, TL_MMA_GFX942_FP8_N, TL_MMA_GFX942_FP8_K);
    expect_shape("v_mfma_f32_16x16x32_bf16", TL_MMA_GFX950_BF16_M, TL_MMA_GFX950_BF16_N, TL_MMA_GFX950_BF16_K);
    expect_shape("v_mfma_scale_f32_16x16x128_f8f6f4", TL_MMA_GFX950_FP8_M, TL_MMA_GFX950_FP8_N,
                 TL_MMA_GFX950_FP8_K);
    expect_shape("v_mfma_scale_f32_32x32x64_f8f6f4", TL_MMA_GFX950_FP8_32_M, TL_MMA_GFX950_FP8_32_N,
                 TL_MMA_GFX950_FP8_32_K);
    expect_shape("generic.16x16x16.bf16", TL_MMA_GENERIC_BF16_M, TL_MMA_GENERIC_BF16_N, TL_MMA_GENERIC_BF16_K);
    expect_shape("generic.16x16x32.e4m3", TL_MMA_GENERIC_FP8_M, TL_MMA_GENERIC_FP8_N, TL_MMA_GENERIC_FP8_K);
    assert_null(tl_mma_shape_find("v_mfma_f32_16x16x16"));
    /* every operand divides evenly over the lanes that execute it */
    for (int i = 0; i < TL_MMA_SHAPE_COUNT; i++) {
        const tl_mma_shape *s = &tl_mma_shapes[i];
        assert_int_equal((s->m * s->k) % s->lanes, 0);
        assert_int_equal((s->n * s->k) % s->lanes, 0);
        assert_int_equal((s->m * s->n) % s->lanes, 0);
        /* an MFMA's name spells its shape */
        if (strncmp(s->name, "v_mfma", 6) == 0) {
            char want[32];
            snprintf(want, sizeof want, "_%dx%dx%d_", s->m, s->n, s->k);
            if (!strstr(s->name, want)) fail_msg("%s does not spell %s", s->name, want);
        }
    }
}

/* Finds the MFMA table's entry for a preset instruction: the f8f6f4 forms are listed per format. */
static const tl_mfma_instr *mfma_entry(const char *arch, const tl_instr *in)
{
    if (strstr(in->name, "f8f6f4")) {
        char name[96];
        snprintf(name, sizeof name, "%s_%s", in->name, in->a);
        return tl_mfma_find(arch, name);
    }
    return tl_mfma_find(arch, in->name);
}

static void presets_agree(void **state)
{
    (void)state;
    const char *presets[] = {"h100", "h200", "mi300x", "mi355x"};
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        tl_hw hw;
        if (tl_hw_load(presets[p], &hw)) fail_msg("preset %s: %s", presets[p], tl_last_error());
        int shared_shapes = 0, shared_mfma = 0;
        for (int i = 0; i < hw.n_instr; i++) {
            const tl_instr *in = &hw.instr[i];
            const tl_mma_shape *s = tl_mma_shape_find(in->name);
            if (s && strcmp(s->a, in->a) == 0) {
                if (s->m != in->m || s->n != in->n || s->k != in->k)
                    fail_msg("%s %s: preset %dx%dx%d, mma_shapes.h %dx%dx%d", presets[p], in->name,
                             in->m, in->n, in->k, s->m, s->n, s->k);
                shared_shapes++;
            }
            if (strncmp(hw.arch, "gfx", 3) != 0) continue;
            const tl_mfma_instr *mf = mfma_entry(hw.arch, in);
            if (!mf) fail_msg("%s: %s (%s) is not in simulator/mfma.c for %s", presets[p], in->name, in->a, hw.arch);
            if (mf->m != in->m || mf->n != in->n || mf->k != in->k || mf->blocks != 1)
                fail_msg("%s %s: preset %dx%dx%d, mfma table %dx%dx%d", presets[p], in->name, in->m,
                         in->n, in->k, mf->m, mf->n, mf->k);
            if (tl_mfma_cycles(mf, hw.arch) != in->cycles)
                fail_msg("%s %s (%s): preset %d cycles, mfma table %d", presets[p], in->name, in->a,
                         in->cycles, tl_mfma_cycles(mf, hw.arch));
            shared_mfma++;
        }
        /* each preset must share the instructions mma.h uses on its arch */
        if (shared_shapes < 2)
            fail_msg("preset %s shares %d instructions with mma_shapes.h, expected the bf16 and fp8 ones",
                     presets[p], shared_shapes);
        if (strncmp(hw.arch, "gfx", 3) == 0) assert_true(shared_mfma >= 4);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(macros_agree_with_the_table),
        cmocka_unit_test(presets_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
