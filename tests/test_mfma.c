/* simulator/mfma.c: every operand element of every MFMA instruction has its own slot, the slots
 * fill exactly the operand's registers, and the layouts agree with facts from AMD's ISA guides
 * and AMD's published examples. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/tl.h"
#include "simulator/mfma.h"

static const char *const ARCHS[] = {"gfx942", "gfx950"};

/* Marks every bit of every element of one operand in a lanes x (vgprs*32) map: no bit may be
 * claimed twice, and every bit must be claimed (the operand's registers are exactly full). */
static void check_operand_tiles_registers(const tl_mfma_instr *in, char m)
{
    int rows, cols;
    assert_int_equal(tl_mfma_dims(in, m, &rows, &cols), 0);
    int vgprs = tl_mfma_vgprs(in, m);
    assert_true(vgprs >= 1 && vgprs <= 32);
    size_t nbits = (size_t)64 * vgprs * 32;
    unsigned char *map = calloc(nbits, 1);
    assert_non_null(map);
    long claimed = 0;
    for (int b = 0; b < tl_mfma_blocks(in, m); b++)
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) {
                tl_mfma_slot s;
                assert_int_equal(tl_mfma_locate_slot(in, m, b, i, j, &s), 0);
                if (s.lane < 0 || s.lane >= 64 || s.vgpr < 0 || s.bit_lo < 0 || s.bit_lo > 31 ||
                    s.bit_hi < s.bit_lo) {
                    fail_msg("%s %c[%d](%d,%d): lane %d vgpr %d bits %d..%d", in->name, m, b, i, j,
                             s.lane, s.vgpr, s.bit_lo, s.bit_hi);
                }
                int lo = s.vgpr * 32 + s.bit_lo, hi = s.vgpr * 32 + s.bit_hi;
                if (hi >= vgprs * 32)
                    fail_msg("%s %c(%d,%d): bit %d beyond %d registers", in->name, m, i, j, hi, vgprs);
                for (int bit = lo; bit <= hi; bit++) {
                    size_t at = (size_t)s.lane * vgprs * 32 + (size_t)bit;
                    if (map[at])
                        fail_msg("%s %c[%d](%d,%d): lane %d bit %d already taken", in->name, m, b, i,
                                 j, s.lane, bit);
                    map[at] = 1;
                    claimed++;
                }
            }
    if (claimed != (long)nbits)
        fail_msg("%s %c: %ld of %zu register bits hold an element", in->name, m, claimed, nbits);
    free(map);
}

static void every_element_has_its_own_slot(void **state)
{
    (void)state;
    for (int a = 0; a < 2; a++) {
        const tl_mfma_instr *list[TL_MFMA_MAX];
        int n = tl_mfma_list(ARCHS[a], list, TL_MFMA_MAX);
        assert_true(n > 20 && n <= TL_MFMA_MAX);
        for (int k = 0; k < n; k++) {
            const tl_mfma_instr *in = list[k];
            /* M*N*K*blocks multiply-adds: A holds M*K*blocks elements over 64 lanes */
            assert_int_equal((in->m * in->k * in->blocks) % 64, 0);
            check_operand_tiles_registers(in, 'A');
            check_operand_tiles_registers(in, 'B');
            check_operand_tiles_registers(in, 'C');
            check_operand_tiles_registers(in, 'D');
        }
    }
}

static void expect_slot(const char *arch, const char *name, char m, int b, int i, int j, int lane,
                        int vgpr, int lo, int hi)
{
    const tl_mfma_instr *in = tl_mfma_find(arch, name);
    if (!in) fail_msg("%s not found on %s", name, arch);
    tl_mfma_slot s;
    assert_int_equal(tl_mfma_locate_slot(in, m, b, i, j, &s), 0);
    if (s.lane != lane || s.vgpr != vgpr || s.bit_lo != lo || s.bit_hi != hi)
        fail_msg("%s %c[%d](%d,%d): got lane %d vgpr %d bits %d..%d, want lane %d vgpr %d bits %d..%d",
                 name, m, b, i, j, s.lane, s.vgpr, s.bit_lo, s.bit_hi, lane, vgpr, lo, hi);
}

/* CDNA3 ISA: 16x16x16 bf16 A[i][k] is in lane i + 16*(k/4), element k%4 of the register pair. */
static void bf16_16x16x16_matches_the_isa(void **state)
{
    (void)state;
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++) {
            int e = k % 4;
            expect_slot("gfx942", "v_mfma_f32_16x16x16_bf16", 'A', 0, i, k, i + 16 * (k / 4), e / 2,
                        16 * (e % 2), 16 * (e % 2) + 15);
            /* B[k][n] mirrors A with n as the free index */
            expect_slot("gfx942", "v_mfma_f32_16x16x16_bf16", 'B', 0, k, i, i + 16 * (k / 4), e / 2,
                        16 * (e % 2), 16 * (e % 2) + 15);
            /* D[i][n]: lane n + 16*(i/4), register i%4 */
            expect_slot("gfx942", "v_mfma_f32_16x16x16_bf16", 'D', 0, i, k, k + 16 * (i / 4), i % 4, 0, 31);
        }
}

/* AMD's examples (ROCm blog, matrix cores on CDNA3/CDNA4): 32x32x2 f32 A[lane%32][lane/32];
 * 32x32 accumulators: c[4q + r] is row 8q + 4(lane/32) + r, column lane%32; 32x32x16 fp8 A: row
 * lane%32, k = 8(lane/32) + e; 32x32x64 f8f6f4 FP8 A: byte 16h + e is k = 32h + 16(lane/32) + e;
 * FP4: k = 32(lane/32) + e, low nibble first. */
static void layouts_match_amd_examples(void **state)
{
    (void)state;
    for (int lane = 0; lane < 64; lane++) {
        expect_slot("gfx942", "v_mfma_f32_32x32x2_f32", 'A', 0, lane % 32, lane / 32, lane, 0, 0, 31);
        for (int q = 0; q < 4; q++)
            for (int r = 0; r < 4; r++)
                expect_slot("gfx942", "v_mfma_f32_32x32x8_bf16", 'C', 0, 8 * q + 4 * (lane / 32) + r,
                            lane % 32, lane, 4 * q + r, 0, 31);
        for (int e = 0; e < 8; e++)
            expect_slot("gfx942", "v_mfma_f32_32x32x16_fp8_fp8", 'A', 0, lane % 32, 8 * (lane / 32) + e,
                        lane, e / 4, 8 * (e % 4), 8 * (e % 4) + 7);
        for (int h = 0; h < 2; h++)
            for (int e = 0; e < 16; e++) {
                int byte = 16 * h + e;
                expect_slot("gfx950", "v_mfma_scale_f32_32x32x64_f8f6f4", 'A', 0, lane % 32,
                            32 * h + 16 * (lane / 32) + e, lane, byte / 4, 8 * (byte % 4), 8 * (byte % 4) + 7);
            }
        for (int e = 0; e < 32; e++)
            expect_slot("gfx950", "v_mfma_f32_32x32x64_f8f6f4_fp4", 'A', 0, lane % 32, 32 * (lane / 32) + e,
                        lane, e / 8, 4 * (e % 8), 4 * (e % 8) + 3);
    }
    /* 16x16x16 f16 B (the same example): B[k][n] with k = 4(lane/16) + e, n = lane%16 */
    for (int lane = 0; lane < 64; lane++)
        for (int e = 0; e < 4; e++)
            expect_slot("gfx942", "v_mfma_f32_16x16x16_f16", 'B', 0, 4 * (lane / 16) + e, lane % 16, lane,
                        e / 2, 16 * (e % 2), 16 * (e % 2) + 15);
    /* FP64 16x16x4 D: lane t, value e is D[t/16 + 4e][t%16] in registers 2e, 2e+1 */
    for (int t = 0; t < 64; t++)
        for (int e = 0; e < 4; e++)
            expect_slot("gfx942", "v_mfma_f64_16x16x4_f64", 'D', 0, t / 16 + 4 * e, t % 16, t, 2 * e, 0, 63);
    /* multi-block: 4x4x4_16b A of block b row i is lane i + 4b; its C is lane j + 4b, vgpr i */
    for (int b = 0; b < 16; b++)
        for (int i = 0; i < 4; i++) {
            expect_slot("gfx942", "v_mfma_f32_4x4x4_16b_f16", 'A', b, i, 3, i + 4 * b, 1, 16, 31);
            expect_slot("gfx942", "v_mfma_f32_4x4x4_16b_f16", 'C', b, i, 2, 2 + 4 * b, i, 0, 31);
        }
    /* 32x32x1_2b: block 1's accumulators follow block 0's 16 registers */
    expect_slot("gfx942", "v_mfma_f32_32x32x1_2b_f32", 'C', 1, 0, 0, 0, 16, 0, 31);
    expect_slot("gfx942", "v_mfma_f32_32x32x1_2b_f32", 'A', 1, 5, 0, 37, 0, 0, 31);
    /* FP6 fields are packed: element 5 of a lane starts at bit 30 of register 0 */
    expect_slot("gfx950", "v_mfma_f32_16x16x128_f8f6f4_fp6", 'A', 0, 0, 5, 0, 0, 30, 35);
}

static void register_counts_match_the_isa(void **state)
{
    (void)state;
    struct { const char *arch, *name; int a, c; } want[] = {
        {"gfx942", "v_mfma_f32_32x32x8_bf16", 2, 16},        {"gfx942", "v_mfma_f32_32x32x1_2b_f32", 1, 32},
        {"gfx942", "v_mfma_f32_4x4x4_16b_f16", 2, 4},        {"gfx942", "v_mfma_f64_16x16x4_f64", 2, 8},
        {"gfx942", "v_mfma_f32_16x16x32_fp8_fp8", 2, 4},     {"gfx942", "v_mfma_f32_16x16x8_xf32", 2, 4},
        {"gfx942", "v_mfma_i32_16x16x32_i8", 2, 4},          {"gfx950", "v_mfma_f32_16x16x32_bf16", 4, 4},
        {"gfx950", "v_mfma_f32_32x32x16_f16", 4, 16},        {"gfx950", "v_mfma_i32_16x16x64_i8", 4, 4},
        {"gfx950", "v_mfma_f32_16x16x128_f8f6f4", 8, 4},     {"gfx950", "v_mfma_f32_16x16x128_f8f6f4_fp6", 6, 4},
        {"gfx950", "v_mfma_f32_16x16x128_f8f6f4_fp4", 4, 4}, {"gfx950", "v_mfma_f32_32x32x64_f8f6f4", 8, 16},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tl_mfma_instr *in = tl_mfma_find(want[i].arch, want[i].name);
        if (!in) fail_msg("%s missing on %s", want[i].name, want[i].arch);
        if (tl_mfma_vgprs(in, 'A') != want[i].a || tl_mfma_vgprs(in, 'B') != want[i].a ||
            tl_mfma_vgprs(in, 'C') != want[i].c)
            fail_msg("%s: A %d C %d registers, want %d and %d", in->name, tl_mfma_vgprs(in, 'A'),
                     tl_mfma_vgprs(in, 'C'), want[i].a, want[i].c);
    }
}

static void names_and_bad_input(void **state)
{
    (void)state;
    const tl_mfma_instr *a = tl_mfma_find("gfx942", "V_MFMA_F32_16X16X16BF16_1K");
    assert_non_null(a);
    assert_string_equal(a->name, "v_mfma_f32_16x16x16_bf16");
    assert_null(tl_mfma_find("gfx942", "v_mfma_f32_16x16x32_bf16")); /* CDNA4 only */
    assert_null(tl_mfma_find("gfx950", "v_mfma_f32_16x16x8_xf32"));  /* gone on CDNA4 */
    assert_null(tl_mfma_find("gfx90a", "v_mfma_f32_16x16x16_bf16"));
    assert_null(tl_mfma_find("gfx942", "v_mfma_nonsense"));
    assert_int_equal(tl_mfma_list("gfx1100", NULL, 0), 0);
    const tl_mfma_instr *s = tl_mfma_find("gfx950", "v_mfma_scale_f32_16x16x128_f8f6f4");
    assert_non_null(s);
    assert_string_equal(s->a_type, "fp8");
    assert_int_equal(tl_mfma_cycles(s, "gfx950"), 32);
    assert_int_equal(tl_mfma_cycles(tl_mfma_find("gfx950", "v_mfma_f32_16x16x128_f8f6f4_fp4"), "gfx950"), 16);

    tl_mfma_slot slot;
    assert_int_equal(tl_mfma_locate_slot(a, 'E', 0, 0, 0, &slot), TL_EUSAGE);
    assert_int_equal(tl_mfma_locate_slot(a, 'A', 1, 0, 0, &slot), TL_EUSAGE);
    assert_int_equal(tl_mfma_locate_slot(a, 'A', 0, 16, 0, &slot), TL_EUSAGE);
    assert_int_equal(tl_mfma_locate_slot(a, 'A', 0, 0, -1, &slot), TL_EUSAGE);
    assert_true(strlen(tl_last_error()) > 0);

    /* the stacked-blocks form agrees with the per-block form */
    const tl_mfma_instr *mb = tl_mfma_find("gfx942", "v_mfma_f32_16x16x4_4b_f16");
    assert_non_null(mb);
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 16; j++) {
            int blk, lane, vgpr, lo, hi;
            assert_int_equal(tl_mfma_locate(mb, 'C', i, j, &blk, &lane, &vgpr, &lo, &hi), 0);
            assert_int_equal(tl_mfma_locate_slot(mb, 'C', i / 16, i % 16, j, &slot), 0);
            assert_int_equal(blk, i / 16);
            assert_int_equal(lane, slot.lane);
            assert_int_equal(vgpr, slot.vgpr);
        }
    assert_int_equal(tl_mfma_locate(mb, 'C', 64, 0, NULL, NULL, NULL, NULL, NULL), TL_EUSAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_element_has_its_own_slot),
        cmocka_unit_test(bf16_16x16x16_matches_the_isa),
        cmocka_unit_test(layouts_match_amd_examples),
        cmocka_unit_test(register_counts_match_the_isa),
        cmocka_unit_test(names_and_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
