/* tests/test_amd_code.c: the AMD kernels' costs read from their assembly (simulator/amd_code.h), and
 * the MI355X model moving with the code: a fixture of one kernel's gfx950 assembly
 * (tests/data/amd/indexer_h32_q1_gfx950.s, indexer_kernel<32, 1>) read, then edited (more VGPRs,
 * more VALU instructions in its hot loop) and modelled again; and the build's own table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tl.h"
#include "simulator/amd_code.h"
#include "simulator/indexer.h"
#include "simulator/prefill.h"

#define KERNEL "_Z14indexer_kernelILi32ELi1EEv7IdxArgs"

static char *fixture(void)
{
    FILE *f = fopen(TL_SOURCE_DIR "/tests/data/amd/indexer_h32_q1_gfx950.s", "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *copy = malloc(n + 1 + 65536);
    assert_non_null(copy);
    memcpy(copy, buf, n + 1);
    return copy;
}

static tl_amd_kernel parse_one(const char *text)
{
    tl_amd_kernel k[4];
    int n = -1;
    assert_int_equal(tl_amd_code_parse(text, "gfx950", "kernels/indexer.hip", k, 4, &n), 0);
    assert_int_equal(n, 1);
    return k[0];
}

/* the 16K square at H = 32, BLOCK_Q 1, with the kernel table kt (one entry) */
static tl_indexer_result model_with(const tl_amd_kernel *kt)
{
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    tl_amd_code_use(kt, 1);
    tl_indexer_problem p;
    memset(&p, 0, sizeof p);
    p.hw = &hw;
    p.shape.rows = p.shape.kv = 16384;
    p.shape.heads = 32;
    p.shape.dim = 128;
    p.shape.block_q = 1;
    tl_indexer_result r;
    assert_int_equal(tl_indexer_sim(&p, &r), 0);
    tl_amd_code_use(NULL, 0);
    assert_non_null(r.code.k); /* the fixture's kernel decided */
    return r;
}

/* The fixture as read: metadata, and its hot loop (one 16-position fragment: 2 scaled MFMAs). */
static void test_parse_fixture(void **state)
{
    char *text = fixture();
    tl_amd_kernel k = parse_one(text);
    assert_string_equal(k.name, KERNEL);
    assert_int_equal(k.vgpr, 78);
    assert_int_equal(k.agpr, 0);
    assert_int_equal(k.sgpr, 51);
    assert_int_equal(k.lds, 9472);
    assert_int_equal(k.scratch, 0);
    assert_int_equal(k.wg_max, 64);
    assert_true(k.loop.found);
    assert_int_equal(k.loop.n_mfma, 1);
    assert_string_equal(k.loop.mfma[0].name, "v_mfma_scale_f32_16x16x128_f8f6f4");
    assert_string_equal(k.loop.mfma[0].format, "fp8");
    assert_int_equal(k.loop.mfma[0].count, 2);
    assert_true(k.loop.valu > 20 && k.loop.valu < 200);
    assert_true(k.loop.lds > 0 && k.loop.lds_read_bytes > 0);
    assert_true(k.loop.instrs >= k.loop.valu + k.loop.salu + k.loop.lds + 2);
    /* the loop's text for llvm-mca: its instructions, no branch */
    char *body = tl_amd_code_loop_text(text, "gfx950", KERNEL);
    assert_non_null(body);
    int lines = 0;
    for (const char *p = body; (p = strchr(p, '\n')); p++) lines++;
    assert_int_equal(lines, k.loop.instrs - k.loop.branch);
    assert_null(strstr(body, "s_cbranch"));
    free(body);
    free(text);
}

/* Replaces the value after `key` on its line (the YAML's ".vgpr_count:") by v. */
static void set_yaml(char *text, const char *key, int v)
{
    char *p = strstr(text, key);
    assert_non_null(p);
    p += strlen(key);
    char *e = strchr(p, '\n');
    char tail[1 << 16];
    snprintf(tail, sizeof tail, "%s", e);
    sprintf(p, "     %d%s", v, tail);
}

/* More VGPRs: fewer waves a SIMD, so the loop's own issue (one instruction a cadence) shows through
 * and the prediction slows; the fixture's own count reads back as the build's does. */
static void test_registers_move_the_model(void **state)
{
    char *text = fixture();
    tl_amd_kernel k0 = parse_one(text);
    tl_indexer_result r0 = model_with(&k0);
    set_yaml(text, "    .vgpr_count:", 400);
    tl_amd_kernel k1 = parse_one(text);
    assert_int_equal(k1.vgpr, 400);
    tl_indexer_result r1 = model_with(&k1);
    assert_int_equal(r1.code.waves_by_vgpr, 1); /* 512 / 400: one wave a SIMD */
    assert_true(r0.code.waves_by_vgpr == 6 && r1.code.waves_per_simd < r0.code.waves_per_simd);
    assert_string_equal(r1.code.bound, "issue");
    assert_true(r1.time_us > 1.5 * r0.time_us);
    free(text);
}

/* Every VALU instruction of the hot loop twice: its VALU clocks double, the prediction moves with it. */
static void test_loop_moves_the_model(void **state)
{
    char *text = fixture();
    tl_amd_kernel k0 = parse_one(text);
    tl_indexer_result r0 = model_with(&k0);
    /* the lines of the loop's VALU instructions, each doubled in a copy of the text */
    size_t len = strlen(text);
    char *out = malloc(2 * len + 1), *o = out;
    assert_non_null(out);
    int line = 0;
    for (char *p = text; *p; line++) {
        char *nl = strchr(p, '\n');
        size_t w = nl ? (size_t)(nl - p) + 1 : strlen(p);
        memcpy(o, p, w), o += w;
        const char *s = p;
        while (*s == '\t' || *s == ' ') s++;
        if (line + 1 >= k0.loop.first_line && line + 1 <= k0.loop.last_line && s[0] == 'v' && s[1] == '_' &&
            strncmp(s, "v_mfma", 6) != 0)
            memcpy(o, p, w), o += w;
        p += w;
    }
    *o = '\0';
    tl_amd_kernel k1 = parse_one(out);
    assert_int_equal(k1.loop.valu, 2 * k0.loop.valu);
    tl_indexer_result r1 = model_with(&k1);
    assert_string_equal(r0.code.bound, "valu");
    assert_true(fabs(r1.code.valu_cycles - 2 * r0.code.valu_cycles) < 1e-9);
    assert_true(r1.code_us > 1.9 * r0.code_us && r1.time_us > 1.5 * r0.time_us);
    free(out);
    free(text);
}

/* Bad input: no metadata; a kernel entry without a name. */
static void test_bad_assembly(void **state)
{
    tl_amd_kernel k[2];
    int n;
    assert_int_equal(tl_amd_code_parse("\ts_endpgm\n", "gfx950", "x", k, 2, &n), TL_EUSAGE);
    tl_clear_error();
    assert_int_equal(tl_amd_code_parse("amdhsa.kernels:\n  - .vgpr_count: 3\n.end_amdgpu_metadata\n", "gfx950", "x", k, 2, &n),
                     TL_EUSAGE);
    tl_clear_error();
    tl_hw hw;
    assert_int_equal(tl_hw_load("h200", &hw), 0);
    tl_amd_loop_cost c;
    assert_int_equal(tl_amd_loop_cost_of(&hw, KERNEL, 1, 0, 0, &c), TL_EUSAGE); /* no register fields */
    tl_clear_error();
}

/* The build's table: the kernels the models read are there for both arches, nothing spills, the
 * loops hold the instructions the kernels are written for; on mi355x the FP8 prefill (its own code)
 * is predicted at 1.8x its BF16 or better at 16K (mistral-7b). */
static void test_build_table(void **state)
{
    const tl_amd_kernel *k = tl_amd_code_find("gfx950", "_Z9pf_kernelILi2ELi128ELi128ELi64ELi128ELi4ELb1EEv6PfArgs");
    assert_non_null(k);
    assert_int_equal(k->scratch, 0);
    assert_true(k->loop.found && k->loop.n_mfma == 1 && k->loop.mfma[0].count == 16);
    assert_true(k->loop.mca_cycles > 0);
    assert_non_null(tl_amd_code_find("gfx942", KERNEL));
    assert_non_null(tl_amd_code_find("gfx950", KERNEL));
    for (int i = 0; i < tl_amd_code_count; i++) assert_int_equal(tl_amd_code_table[i].scratch, 0);
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    tl_prefill_shape s;
    memset(&s, 0, sizeof s);
    s.seq = 16384, s.heads = 32, s.kv_heads = 8, s.dqk = 128, s.dv = 128, s.causal = 1;
    tl_prefill_model_result bf, f8;
    s.dtype = TL_PREFILL_BF16;
    assert_int_equal(tl_prefill_model(&hw, &s, &bf), 0);
    s.dtype = TL_PREFILL_FP8;
    assert_int_equal(tl_prefill_model(&hw, &s, &f8), 0);
    assert_non_null(bf.code.k);
    assert_non_null(f8.code.k);
    assert_true(f8.tflops >= 1.8 * bf.tflops);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_fixture),
        cmocka_unit_test(test_registers_move_the_model),
        cmocka_unit_test(test_loop_moves_the_model),
        cmocka_unit_test(test_bad_assembly),
        cmocka_unit_test(test_build_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
