/* Hardware and model presets: every preset loads, instruction peaks agree with the datasheet,
 * instruction choice per arch, overlays, and malformed or incomplete files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulator/hw.h"
#include "simulator/model.h"

static const char *write_tmp(const char *name, const char *text)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", TL_BINARY_DIR, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_hw_presets_load(void **state)
{
    (void)state;
    const char *const *names = tl_hw_list();
    const char *want[] = {"h100", "h200", "mi300x", "mi355x"};
    for (int i = 0; i < 4; i++) assert_string_equal(names[i], want[i]);
    assert_null(names[4]);
    for (int i = 0; names[i]; i++) {
        tl_hw hw;
        assert_int_equal(tl_hw_load(names[i], &hw), 0);
        assert_string_equal(hw.name, names[i]);
        assert_true(hw.cus > 0 && hw.n_instr > 0 && hw.clock_mhz > 0);
        assert_true(tl_ceiling_value(hw.ceilings.hbm_read_gbps) > 0);
        assert_int_equal(hw.cus % hw.xcds, 0);
    }
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    assert_string_equal(hw.arch, "gfx950");
    assert_int_equal(hw.cus, 256);
    assert_int_equal(hw.xcds, 8);
    assert_int_equal(hw.wave_size, 64);
    assert_true(hw.ceilings.hbm_read_gbps.measured == 6271.2);
    assert_true(tl_ceiling_value(hw.ceilings.hbm_read_gbps) == 6271.2);
    assert_int_equal(tl_hw_load("h200", &hw), 0);
    assert_int_equal(hw.wave_size, 32);
    assert_true(hw.ceilings.bf16_tflops.measured == 795);
    /* sm_90's wgmma loops, apart from the ceilings (the h200's are cuBLAS / torch._scaled_mm GEMMs) */
    assert_true(hw.wgmma_bf16_tflops == 917.0 && hw.wgmma_fp8_tflops == 1717.5);
    /* the H100: the H200's chip with HBM3 (datasheet 3.35 TB/s) and a 50 MB L2 */
    assert_int_equal(tl_hw_load("h100", &hw), 0);
    assert_string_equal(hw.arch, "sm_90");
    assert_int_equal(hw.cus, 132);
    assert_true(hw.ceilings.hbm_read_gbps.datasheet == 3350);
    assert_true(tl_ceiling_value(hw.ceilings.hbm_read_gbps) == 3245.6);
    assert_true(hw.l2_mib_per_xcd == 50);
    assert_true(hw.wgmma_bf16_tflops == 876.2 && hw.wgmma_fp8_tflops == 1660.4);
    assert_int_equal(tl_hw_load("mi355x", &hw), 0); /* no wgmma: absent, 0 */
    assert_true(hw.wgmma_bf16_tflops == 0 && hw.wgmma_fp8_tflops == 0);
}

/* A device's preset from the name its driver reports. */
static void test_hw_for_device(void **state)
{
    (void)state;
    assert_string_equal(tl_hw_for_device("NVIDIA H100 80GB HBM3"), "h100");
    assert_string_equal(tl_hw_for_device("NVIDIA H200"), "h200");
    assert_string_equal(tl_hw_for_device("AMD Instinct MI355X"), "mi355x");
    assert_string_equal(tl_hw_for_device("AMD Instinct MI300X"), "mi300x");
    assert_null(tl_hw_for_device("NVIDIA A100-SXM4-80GB"));
    assert_null(tl_hw_for_device(NULL));
}

/* The fastest instruction of each dtype reproduces the datasheet peak (FACTS.md's rule). */
static void check_peak(const tl_hw *hw, const char *dtype, double datasheet)
{
    tl_instr in;
    assert_int_equal(tl_hw_pick_instr(hw, dtype, dtype, 16, &in), 0);
    double peak = tl_hw_instr_tflops(hw, &in);
    assert_true(fabs(peak - datasheet) / datasheet < 0.002);
}

static void test_peaks_match_datasheet(void **state)
{
    (void)state;
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    check_peak(&hw, "bf16", hw.ceilings.bf16_tflops.datasheet);
    check_peak(&hw, "fp8", hw.ceilings.fp8_tflops.datasheet);
    check_peak(&hw, "fp4", hw.ceilings.fp4_tflops.datasheet);
    check_peak(&hw, "fp6", hw.ceilings.fp6_tflops.datasheet);
    assert_int_equal(tl_hw_load("mi300x", &hw), 0);
    check_peak(&hw, "bf16", 1307.4);
    check_peak(&hw, "fp8", 2614.9);
    assert_int_equal(tl_hw_load("h200", &hw), 0);
    check_peak(&hw, "bf16", 989.4);
    check_peak(&hw, "fp8", 1978.9);
}

static void test_pick_instr(void **state)
{
    (void)state;
    tl_hw hw;
    tl_instr in;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    /* CDNA4 FP8 at tile height 16 uses the f8f6f4 instruction: K-depth 128, not the CDNA3 one */
    assert_int_equal(tl_hw_pick_instr(&hw, "fp8", "fp8", 16, &in), 0);
    assert_string_equal(in.name, "v_mfma_scale_f32_16x16x128_f8f6f4");
    assert_int_equal(in.k, 128);
    assert_int_equal(in.cycles, 32);
    assert_int_equal(tl_hw_pick_instr(&hw, "fp8", "fp8", 32, &in), 0);
    assert_string_equal(in.name, "v_mfma_scale_f32_32x32x64_f8f6f4");
    assert_int_equal(tl_hw_pick_instr(&hw, "bf16", "bf16", 16, &in), 0);
    assert_string_equal(in.name, "v_mfma_f32_16x16x32_bf16");
    assert_int_equal(tl_hw_pick_instr(&hw, "fp8", "fp4", 16, &in), 0); /* mixed: the FP8 rate */
    assert_int_equal(in.cycles, 32);
    assert_int_equal(tl_hw_pick_instr(&hw, "fp4", "fp4", 16, &in), 0);
    assert_int_equal(in.cycles, 16);
    assert_int_equal(tl_hw_pick_instr(&hw, "bf16", "bf16", 8, &in), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "tile height 8"));
    assert_int_equal(tl_hw_pick_instr(&hw, "bf16", "bf16", 24, &in), TL_EUSAGE);
    assert_int_equal(tl_hw_pick_instr(&hw, "int3", "bf16", 16, &in), TL_EUSAGE);
    assert_int_equal(tl_hw_load("mi300x", &hw), 0);
    assert_int_equal(tl_hw_pick_instr(&hw, "fp8", "fp8", 16, &in), 0);
    assert_string_equal(in.name, "v_mfma_f32_16x16x32_fp8_fp8");
    assert_int_equal(tl_hw_pick_instr(&hw, "bf16", "bf16", 64, &in), 0);
    assert_string_equal(in.name, "v_mfma_f32_32x32x8_bf16"); /* same rate: the larger M */
    assert_int_equal(tl_hw_pick_instr(&hw, "fp4", "fp4", 16, &in), TL_EUSAGE); /* gfx942 has no FP4 */
    assert_non_null(strstr(tl_last_error(), "no fp4"));
    assert_int_equal(tl_hw_load("h200", &hw), 0);
    assert_int_equal(tl_hw_pick_instr(&hw, "fp8", "fp8", 16, &in), 0);
    assert_int_equal(in.k, 32);
    assert_int_equal(in.n, 8);
}

static void test_overlay(void **state)
{
    (void)state;
    const char *path = write_tmp("test_presets_overlay.json",
                                 "{\"device\": \"NVIDIA H200 (test)\", \"date\": \"2026-11-29\", \"source\": \"test\",\n"
                                 " \"wgmma_bf16_tflops\": 900.5,\n"
                                 " \"ceilings\": {\"hbm_read_gbps\": {\"measured\": 4512.5}, \"fp8_tflops\": {\"measured\": 1500}}}\n");
    char spec[1200];
    snprintf(spec, sizeof spec, "h200,%s", path);
    tl_hw hw;
    assert_int_equal(tl_hw_load(spec, &hw), 0);
    assert_true(hw.ceilings.hbm_read_gbps.measured == 4512.5);
    assert_true(hw.ceilings.hbm_read_gbps.datasheet == 4800); /* kept from the base */
    assert_true(hw.ceilings.fp8_tflops.measured == 1500);
    assert_true(hw.ceilings.bf16_tflops.measured == 795);
    assert_true(hw.wgmma_bf16_tflops == 900.5 && hw.wgmma_fp8_tflops == 1717.5); /* fp8's kept */
    assert_string_equal(hw.device, "NVIDIA H200 (test)");
    assert_string_equal(hw.date, "2026-11-29");
    assert_int_equal(hw.cus, 132);
    remove(path);
    assert_int_equal(tl_hw_load(spec, &hw), TL_EUSAGE); /* overlay gone */
}

static void test_hw_errors(void **state)
{
    (void)state;
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi999", &hw), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "mi355x")); /* lists the known presets */
    assert_int_equal(tl_hw_load("", &hw), TL_EUSAGE);
    assert_int_equal(tl_hw_load("/nonexistent/x.json", &hw), TL_EUSAGE);
    const char *path = write_tmp("test_presets_bad.json", "{\n  \"name\": \"x\",\n  \"cus\": 12,,\n}\n");
    assert_int_equal(tl_hw_load(path, &hw), TL_EUSAGE);
    char want[1200];
    snprintf(want, sizeof want, "%s:3:", path); /* file, line and column */
    assert_non_null(strstr(tl_last_error(), want));
    path = write_tmp("test_presets_missing.json", "{\"name\": \"x\", \"arch\": \"gfx950\"}\n");
    assert_int_equal(tl_hw_load(path, &hw), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "'cus'"));
    path = write_tmp("test_presets_neg.json", "{\"name\": \"x\", \"arch\": \"gfx950\", \"cus\": -4}\n");
    assert_int_equal(tl_hw_load(path, &hw), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "'cus'"));
    path = write_tmp("test_presets_array.json", "[1, 2]\n");
    assert_int_equal(tl_hw_load(path, &hw), TL_EUSAGE);
    remove(path);
    path = write_tmp("test_presets_typo.json", "{\"ceilings\": {\"bf16_tflopz\": {\"measured\": 700}}}\n");
    char spec[1200];
    snprintf(spec, sizeof spec, "h200,%s", path);
    assert_int_equal(tl_hw_load(spec, &hw), TL_EUSAGE); /* a typo is named, not ignored */
    assert_non_null(strstr(tl_last_error(), "test_presets_typo.json: unknown key 'ceilings.bf16_tflopz'"));
    remove(path);
}

static void test_models(void **state)
{
    (void)state;
    const char *const *names = tl_model_list();
    const char *want[] = {"deepseek-v2-lite", "deepseek-v3.2", "glm-5", "gpt-oss-120b", "kimi-k2.6", "mistral-7b",
                          "mixtral-8x7b", "qwen3-30b-a3b", "qwen3-8b", "zaya1-e24", "zaya1"};
    const int n_want = (int)(sizeof want / sizeof want[0]);
    for (int i = 0; i < n_want; i++) {
        assert_non_null(names[i]);
        assert_string_equal(names[i], want[i]);
        tl_model m;
        assert_int_equal(tl_model_load(names[i], &m), 0);
        assert_string_equal(m.name, names[i]);
    }
    assert_null(names[n_want]);
    tl_model m;
    int E, k, w;
    assert_int_equal(tl_model_load("deepseek-v3.2", &m), 0);
    assert_int_equal(m.hidden, 7168);
    assert_int_equal(m.n_experts, 256);
    assert_int_equal(m.top_k, 8);
    assert_int_equal(m.moe_width, 2048);
    assert_int_equal(m.index_n_heads, 64);
    assert_int_equal(m.index_topk, 2048);
    assert_int_equal(tl_model_load("glm-5", &m), 0);
    assert_int_equal(m.hidden, 6144);
    assert_int_equal(m.moe_layers, 75);
    assert_int_equal(m.index_n_heads, 32);
    assert_int_equal(tl_model_load("kimi-k2.6", &m), 0);
    assert_int_equal(m.n_experts, 384);
    assert_int_equal(tl_model_load("zaya1", &m), 0); /* num_experts / moe_router_topk aliases */
    assert_int_equal(m.n_experts, 16);
    assert_int_equal(m.top_k, 1);
    assert_int_equal(tl_model_load("zaya1-e24", &m), 0); /* seed 000 Figure 10's ZAYA1 shape */
    assert_int_equal(m.n_experts, 24);
    assert_int_equal(m.top_k, 1);
    assert_int_equal(tl_model_load("mistral-7b", &m), 0);
    tl_model_moe_shape(&m, &E, &k, &w);
    assert_int_equal(E, 1);
    assert_int_equal(k, 1);
    assert_int_equal(w, 14336);
}

static void test_model_errors(void **state)
{
    (void)state;
    tl_model m;
    assert_int_equal(tl_model_load("gpt-9", &m), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "deepseek-v3.2"));
    const char *path = write_tmp("test_presets_cfg.json",
                                 "{\"hidden_size\": 4096, \"num_hidden_layers\": 4, \"n_routed_experts\": 8,\n"
                                 " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 96}\n");
    assert_int_equal(tl_model_load(path, &m), 0); /* a user's config.json */
    assert_string_equal(m.name, "test_presets_cfg");
    assert_int_equal(m.moe_width, 96);
    path = write_tmp("test_presets_cfg.json", "{\"num_hidden_layers\": 4}\n");
    assert_int_equal(tl_model_load(path, &m), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "'hidden_size'"));
    path = write_tmp("test_presets_cfg.json",
                     "{\"hidden_size\": 64, \"num_hidden_layers\": 4, \"n_routed_experts\": 4, \"num_experts_per_tok\": 5, "
                     "\"moe_intermediate_size\": 32}\n");
    assert_int_equal(tl_model_load(path, &m), TL_EUSAGE); /* k > E */
    path = write_tmp("test_presets_cfg.json",
                     "{\"hidden_size\": 64, \"num_hidden_layers\": 4, \"n_routed_experts\": 4, \"num_experts_per_tok\": 0, "
                     "\"moe_intermediate_size\": 32}\n");
    assert_int_equal(tl_model_load(path, &m), TL_EUSAGE); /* k = 0 */
    path = write_tmp("test_presets_cfg.json", "{\"hidden_size\": 64, \"num_hidden_layers\": 4, \"n_routed_experts\": 0}\n");
    assert_int_equal(tl_model_load(path, &m), TL_EUSAGE); /* E = 0 and no dense width */
    assert_non_null(strstr(tl_last_error(), "intermediate_size"));
    path = write_tmp("test_presets_cfg.json", "{\"hidden_size\": 64,\n \"num_hidden_layers\": \"four\"}\n");
    assert_int_equal(tl_model_load(path, &m), TL_EUSAGE);
    path = write_tmp("test_presets_cfg.json", "{\"hidden_size\": 64\n \"num_hidden_layers\": 4}\n");
    assert_int_equal(tl_model_load(path, &m), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "test_presets_cfg.json:2:"));
    remove(path);
}

static void load_fixture(const char *name, tl_model *m)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/configs/%s.json", TL_SOURCE_DIR, name);
    assert_int_equal(tl_model_load(path, m), 0);
}

/* Real configs of other families, their shared experts and the layers that are MoE. */
static void test_model_families(void **state)
{
    (void)state;
    tl_model m;
    load_fixture("qwen1.5-moe-a2.7b", &m); /* one shared expert of 5632 = 4 routed experts of 1408 */
    assert_int_equal(m.n_shared, 1);
    assert_int_equal(m.shared_width, 5632);
    assert_int_equal(tl_model_shared_experts(&m), 4);
    load_fixture("llama-4-scout", &m); /* text_config; one implicit shared expert of the expert width */
    assert_int_equal(m.hidden, 5120);
    assert_int_equal(m.moe_width, 8192);
    assert_int_equal(m.dense_width, 16384);
    assert_int_equal(m.moe_layers, 48);
    assert_int_equal(tl_model_shared_experts(&m), 1);
    assert_null(strstr(m.unused, "text_config"));
    assert_non_null(strstr(m.unused, "vision_config"));
    load_fixture("mixtral-8x7b", &m);
    assert_int_equal(m.moe_width, 14336);
    assert_int_equal(m.dense_width, 0);
    assert_int_equal(tl_model_shared_experts(&m), 0);
    load_fixture("gpt-oss-20b", &m);
    assert_int_equal(m.top_k, 4);
    assert_null(strstr(m.unused, "experts_per_token"));
    assert_int_equal(tl_model_load("deepseek-v2-lite", &m), 0); /* n_shared_experts count as they are */
    assert_int_equal(m.shared_width, 1408);
    assert_int_equal(tl_model_shared_experts(&m), 2);
    assert_int_equal(m.moe_layers, 26);
    const char *path = write_tmp("test_presets_layers.json",
                                 "{\"hidden_size\": 64, \"num_hidden_layers\": 58, \"num_experts\": 8,\n"
                                 " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, \"decoder_sparse_step\": 2,\n"
                                 " \"mlp_only_layers\": [1, 2]}\n");
    assert_int_equal(tl_model_load(path, &m), 0);
    assert_int_equal(m.moe_layers, 28); /* layers 3, 5, ..., 57: 29 by the step, less layer 1 */
    path = write_tmp("test_presets_layers.json",
                     "{\"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_experts\": 8,\n"
                     " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, \"moe_layers\": [-1]}\n");
    assert_int_equal(tl_model_load(path, &m), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "moe_layers[0] is not a layer index in [0, 4)"));
    remove(path);
}

/* A config's keys the model does not use are named; quantization_config's method is recorded. */
static void test_model_unused(void **state)
{
    (void)state;
    const char *path = write_tmp("test_presets_quant.json",
                                 "{\"hidden_size\": 256, \"num_hidden_layers\": 2, \"n_routed_experts\": 8,\n"
                                 " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 128, \"vocab_size\": 9,\n"
                                 " \"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\"},\n"
                                 " \"rope_theta\": 10000}\n");
    tl_model m;
    assert_int_equal(tl_model_load(path, &m), 0);
    assert_string_equal(m.quant_method, "fp8");
    assert_int_equal(m.n_unused, 2);
    assert_string_equal(m.unused, "vocab_size, rope_theta");
    char buf[256];
    assert_int_equal(tl_model_unused(&m, buf, sizeof buf), 3);
    assert_string_equal(buf, "quantization_config (quant_method fp8: not modelled, choose --dtype), vocab_size, rope_theta");
    char small[24];
    tl_model_unused(&m, small, sizeof small);
    assert_string_equal(small, "...");
    assert_int_equal(tl_model_load("deepseek-v3.2", &m), 0);
    assert_int_equal(tl_model_unused(&m, buf, sizeof buf), m.n_unused);
    assert_non_null(strstr(buf, "vocab_size"));
    assert_null(strstr(buf, "hidden_size"));
    assert_int_equal(tl_model_load("zaya1", &m), 0); /* its aliases num_experts and moe_router_topk are read */
    assert_null(strstr(m.unused, "num_experts"));
    assert_null(strstr(m.unused, "moe_router_topk"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hw_presets_load),
        cmocka_unit_test(test_hw_for_device), cmocka_unit_test(test_peaks_match_datasheet),
        cmocka_unit_test(test_pick_instr),      cmocka_unit_test(test_overlay),
        cmocka_unit_test(test_hw_errors),       cmocka_unit_test(test_models),
        cmocka_unit_test(test_model_errors),    cmocka_unit_test(test_model_unused),
        cmocka_unit_test(test_model_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
