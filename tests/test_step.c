/* step (simulator/step.h): the composed step is the sum of the ops' own rows, exactly. For serving
 * points of every MoE model preset the issue names, decode and prefill, on each hardware preset,
 * every call that names a `tilelab sim OP` command is run again through that op's row (the op
 * table: parse in sim mode, then work(), the number `sim OP` prints) and its model time must equal
 * the call's bit for bit; the EP dispatch calls are run again through tl_dispatch_sim; the step's
 * total is then rebuilt from those numbers in call order and must equal tl_step_sim's. Beside it:
 * the seed's own accounting of GLM-5.3's 1-token step (75 MoE layers x 9 experts of FP8 weights:
 * 25.5 GB, about 0.5 ms at 8 GPUs' read ceiling), the dense-GEMM model's bytes and padding, the
 * refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "contract/quant.h"
#include "core/op.h"
#include "core/tl.h"
#include "simulator/gemm.h"
#include "simulator/hw.h"
#include "simulator/model.h"
#include "simulator/quant.h"
#include "simulator/step.h"

typedef struct {
    const char *model, *hw;
    tl_step_phase phase;
    int batch;
    long context;
    int tps, tp, ep;
    tl_moe_dtype experts;
    tl_gemm_dtype dense;
} point;

static int run_step(const point *pt, tl_hw *hw, tl_model *m, tl_step_result *r)
{
    if (tl_hw_load(pt->hw, hw) || tl_model_load(pt->model, m)) return TL_EUSAGE;
    tl_step_problem p = {hw, m, pt->hw, pt->model, pt->phase, pt->batch, &pt->context, 1, pt->tps,
                         pt->tp, pt->ep, 0, pt->experts, pt->dense};
    return tl_step_sim(&p, r);
}

/* The model time the op row gives for cmd ("sim OP ARGS..."), part `part`. */
static double op_row_time(const char *cmd, int part)
{
    char buf[TL_STEP_CMD_LEN];
    snprintf(buf, sizeof buf, "%s", cmd);
    char *argv[64];
    int argc = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t && argc < 63; t = strtok_r(NULL, " ", &save)) argv[argc++] = t;
    argv[argc] = NULL;
    assert_true(argc >= 2);
    assert_string_equal(argv[0], "sim");
    const tl_op *op = tl_op_find(argv[1]);
    assert_non_null(op);
    void *prob = NULL;
    if (op->parse(argc - 1, argv + 1, TL_OP_SIM, &prob) != 0) fail_msg("%s: %s", cmd, tl_last_error());
    assert_int_equal(op->n_cases(prob), 1);
    assert_true(part < op->n_parts(prob));
    tl_op_work w;
    memset(&w, 0, sizeof w);
    if (op->work(prob, 0, part, &w) != 0) fail_msg("%s: %s", cmd, tl_last_error());
    op->free_problem(prob);
    return w.model_us;
}

/* The dispatch's time as `sim dispatch` computes it (the payload named in the call's command). */
static double dispatch_time(const tl_step_call *c, const tl_hw *hw, const tl_model *m, const point *pt, long tokens)
{
    tl_payload_kind kind = strstr(c->cmd, "(payload bf16)") ? TL_PAYLOAD_BF16
                           : strstr(c->cmd, "(payload fp8") ? TL_PAYLOAD_FP8
                           : strstr(c->cmd, "(payload mxfp8") ? TL_PAYLOAD_MXFP8
                                                              : TL_PAYLOAD_MXFP4;
    tl_dispatch_result d;
    assert_int_equal(tl_dispatch_sim(hw, kind, m->hidden, m->top_k, pt->ep, tokens, &d), 0);
    return d.time_us;
}

/* An EP-local MoE call ("sim moe ... (EP-local: n_routed_experts E, num_experts_per_tok K)"): the op
 * row's `sim moe` on a copy of the model's config with those two values, written to a file. */
static double ep_local_moe_time(const tl_step_call *c, const tl_model *m)
{
    const char *tag = strstr(c->cmd, " (EP-local: ");
    assert_non_null(tag);
    int E = 0, k = 0;
    assert_int_equal(sscanf(tag, " (EP-local: n_routed_experts %d, num_experts_per_tok %d)", &E, &k), 2);
    char path[] = "/tmp/tl_step_ep_XXXXXX.json";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "{\"hidden_size\": %d, \"moe_intermediate_size\": %d, \"n_routed_experts\": %d, "
               "\"num_experts_per_tok\": %d, \"num_hidden_layers\": %d}\n", m->hidden, m->moe_width, E, k, m->n_layers);
    fclose(f);
    char cmd[TL_STEP_CMD_LEN], model_arg[96];
    snprintf(cmd, sizeof cmd, "%.*s", (int)(tag - c->cmd), c->cmd);
    snprintf(model_arg, sizeof model_arg, "--model %s ", m->name);
    char *at = strstr(cmd, model_arg);
    assert_non_null(at);
    char fixed[TL_STEP_CMD_LEN];
    snprintf(fixed, sizeof fixed, "%.*s--model %s %s", (int)(at - cmd), cmd, path, at + strlen(model_arg));
    const double us = op_row_time(fixed, c->part);
    remove(path);
    return us;
}

/* Every call's time from its own op row, and the total rebuilt from them. */
static void composes(const point *pt)
{
    tl_hw hw;
    tl_model m;
    tl_step_result *r = malloc(sizeof *r);
    assert_non_null(r);
    if (run_step(pt, &hw, &m, r) != 0) fail_msg("%s on %s: %s", pt->model, pt->hw, tl_last_error());
    double total = 0, by_op[TL_STEP_NOPS] = {0};
    int checked = 0;
    for (int i = 0; i < r->n_calls; i++) {
        const tl_step_call *c = &r->calls[i];
        double us = c->time_us;
        if (c->op_row[0]) {
            us = op_row_time(c->cmd, c->part);
            if (us != c->time_us)
                fail_msg("%s on %s, %s: the step charges %.17g us, `%s` gives %.17g", pt->model, pt->hw, c->name,
                         c->time_us, c->cmd, us);
            checked++;
        } else if (c->op == TL_STEP_DISPATCH) {
            long tokens = 0;
            assert_int_equal(sscanf(strstr(c->cmd, "--tokens ") + 9, "%ld", &tokens), 1);
            us = dispatch_time(c, &hw, &m, pt, tokens);
            assert_true(us == c->time_us);
            checked++;
        } else if (c->op == TL_STEP_MOE) {
            us = ep_local_moe_time(c, &m);
            if (us != c->time_us)
                fail_msg("%s on %s, %s: the step charges %.17g us, `sim moe` of the EP-local config %.17g", pt->model,
                         pt->hw, c->name, c->time_us, us);
            checked++;
        } else {
            /* only the step's own terms have no op row to hold them to */
            assert_true(c->op == TL_STEP_GEMM || c->op == TL_STEP_ALLREDUCE);
        }
        total += (double)c->count * us;
        by_op[c->op] += (double)c->count * us;
    }
    assert_true(checked > 0);
    if (total != r->step_us) fail_msg("%s on %s: the calls sum to %.17g us, the step says %.17g", pt->model, pt->hw, total, r->step_us);
    for (int k = 0; k < TL_STEP_NOPS; k++) assert_true(by_op[k] == r->op_us[k]);
    double layers = 0;
    for (int l = 0; l < TL_STEP_NLAYERS; l++) layers += r->layer_us[l];
    assert_true(fabs(layers - r->step_us) <= 1e-9 * r->step_us);
    assert_true(r->fixed_us > 0 && r->fixed_us < r->step_us);
    double fixed = 0;
    for (int k = 0; k < TL_STEP_NOPS; k++) fixed += r->op_fixed_us[k];
    assert_true(fabs(fixed - r->fixed_us) <= 1e-9 * r->fixed_us);
    free(r);
}

static void test_composes_decode(void **state)
{
    (void)state;
    static const point pts[] = {
        {"glm-5", "mi355x", TL_STEP_DECODE, 1, 1024, 1, 8, 1, TL_MOE_FP8, TL_GEMM_FP8},
        {"glm-5", "mi355x", TL_STEP_DECODE, 32, 1024, 1, 8, 1, TL_MOE_FP8, TL_GEMM_FP8},
        {"deepseek-v3.2", "h200", TL_STEP_DECODE, 4, 8192, 2, 8, 1, TL_MOE_FP8, TL_GEMM_FP8},
        {"kimi-k2.6", "mi300x", TL_STEP_DECODE, 8, 4096, 1, 8, 1, TL_MOE_A16W4, TL_GEMM_BF16},
        {"qwen3-30b-a3b", "h100", TL_STEP_DECODE, 16, 2048, 2, 1, 1, TL_MOE_BF16, TL_GEMM_BF16},
        {"mixtral-8x7b", "h200", TL_STEP_DECODE, 8, 4096, 1, 2, 1, TL_MOE_FP8, TL_GEMM_FP8},
        {"gpt-oss-120b", "mi355x", TL_STEP_DECODE, 8, 4096, 1, 4, 1, TL_MOE_MXFP4, TL_GEMM_BF16},
        {"glm-5", "h100", TL_STEP_DECODE, 64, 2048, 1, 1, 8, TL_MOE_FP8, TL_GEMM_FP8}, /* DP attention, EP 8 */
        {"deepseek-v3.2", "mi355x", TL_STEP_DECODE, 16, 4096, 2, 8, 8, TL_MOE_FP8, TL_GEMM_FP8}, /* TP 8 = EP 8 */
        {"mixtral-8x7b", "h200", TL_STEP_DECODE, 8, 4096, 1, 4, 4, TL_MOE_BF16, TL_GEMM_BF16}, /* k 2 over 4 GPUs */
    };
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) composes(&pts[i]);
}

static void test_composes_prefill(void **state)
{
    (void)state;
    static const point pts[] = {
        {"glm-5", "mi355x", TL_STEP_PREFILL, 1, 2048, 1, 8, 1, TL_MOE_FP8, TL_GEMM_FP8},
        {"deepseek-v3.2", "h100", TL_STEP_PREFILL, 2, 1024, 1, 8, 1, TL_MOE_BF16, TL_GEMM_BF16},
        {"mixtral-8x7b", "mi300x", TL_STEP_PREFILL, 1, 4096, 1, 8, 1, TL_MOE_FP8, TL_GEMM_FP8},
        {"qwen3-30b-a3b", "h200", TL_STEP_PREFILL, 4, 1024, 1, 1, 1, TL_MOE_BF16, TL_GEMM_BF16},
    };
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) composes(&pts[i]);
}

/* Seed 000: "each GLM-5.3 MoE layer uses 9 of its 257 experts ... over its 75 MoE layers these
 * experts take 25.5 GB in FP8, which the node's 8 GPUs read in about 0.5 ms at the measured HBM
 * bandwidth". The walk's own count of a 1-token step's expert reads must give that. */
static void test_seed_expert_reads(void **state)
{
    (void)state;
    const point pt = {"glm-5", "mi355x", TL_STEP_DECODE, 1, 1024, 1, 8, 1, TL_MOE_FP8, TL_GEMM_FP8};
    tl_hw hw;
    tl_model m;
    tl_step_result *r = malloc(sizeof *r);
    assert_int_equal(run_step(&pt, &hw, &m, r), 0);
    assert_int_equal(r->layers[TL_STEP_LAYER_MOE], 75);
    assert_int_equal(r->layers[TL_STEP_LAYER_DENSE], 3);
    const double seed = 75.0 * 9 * 3 * 6144 * 2048; /* bytes, FP8 codes */
    assert_true(fabs(r->expert_bytes - 25.5e9) < 0.05e9);
    assert_true(r->expert_bytes >= seed && r->expert_bytes < seed * 1.001); /* + the block scales */
    assert_true(fabs(r->expert_floor_us - 508) < 5);
    assert_int_equal(r->tokens, 1);
    free(r);
}

/* The dense GEMM: bytes exactly as gemm.h counts them, padding, split-K, the limiter. */
static void test_gemm(void **state)
{
    (void)state;
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    tl_gemm_problem p = {&hw, 1, 6144, 2048, 1, TL_GEMM_FP8};
    tl_gemm_result g;
    assert_int_equal(tl_gemm_sim(&p, &g), 0);
    assert_true(g.weight_bytes == 6144.0 * 2048 * (1 + 4.0 / 16384));
    assert_true(g.act_bytes == 2048 * (1 + 4.0 / 128) && g.out_bytes == 6144 * 2.0);
    assert_int_equal(g.tile_m, 16);
    assert_true(g.flops_issued == 2.0 * 16 * 6144 * 2048); /* one row padded to the instruction's 16 */
    assert_true(g.split > 1 && g.kernels == 2);           /* 96 tiles leave 160 CUs idle */
    assert_string_equal(g.limiter, "fixed");
    p.m = 8192, p.n = 8192, p.k = 8192; /* a large GEMM runs at the peer's rate: seed Figure 5's 66% */
    assert_int_equal(tl_gemm_sim(&p, &g), 0);
    assert_string_equal(g.limiter, "matrix");
    assert_int_equal(g.split, 1);
    assert_true(g.flops_useful / (g.time_us * 1e6) > 0.9 * 3257.9 && g.flops_useful / (g.time_us * 1e6) <= 3257.9);
    p.batch = 0;
    assert_int_equal(tl_gemm_sim(&p, &g), TL_EUSAGE);
    tl_clear_error();
}

static void expect_refused(point pt, const char *why)
{
    tl_hw hw;
    tl_model m;
    tl_step_result *r = malloc(sizeof *r);
    int rc = run_step(&pt, &hw, &m, r);
    if (rc != TL_EUSAGE) fail_msg("%s: exit %d, wanted a refusal", why, rc);
    assert_non_null(strstr(tl_last_error(), why));
    tl_clear_error();
    free(r);
}

static void test_refusals(void **state)
{
    (void)state;
    const point ok = {"glm-5", "mi355x", TL_STEP_DECODE, 1, 1024, 1, 8, 1, TL_MOE_FP8, TL_GEMM_FP8};
    point p = ok;
    p.tp = 3;
    expect_refused(p, "does not divide");
    p = ok, p.tps = 5;
    expect_refused(p, "at most 4 query tokens");
    p = ok, p.ep = 4;
    expect_refused(p, "tp = 1");
    p = ok, p.batch = 0;
    expect_refused(p, "outside");
    p = ok, p.phase = TL_STEP_PREFILL, p.tps = 2;
    expect_refused(p, "whole context");
    p = ok, p.model = "mistral-7b", p.ep = 8, p.tp = 8;
    expect_refused(p, "no experts");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_composes_decode), cmocka_unit_test(test_composes_prefill),
        cmocka_unit_test(test_seed_expert_reads), cmocka_unit_test(test_gemm), cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
