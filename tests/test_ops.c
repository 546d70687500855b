/* Walks every row of the op table, as ggml's test-backend-ops walks every op: the row's own small
 * problem checked reference against naive, its outputs typed and sized as they say, its bad
 * arguments refused, its model's totals equal to the work it counts, its sim rows as wide as their
 * header, and its record (dtypes, targets, help) filled in. A new op gets all of this by being a row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* argv for parse: the op's name, then args (NULL-terminated); *argc set. */
static char **make_argv(const tl_op *op, const char *const *args, int *argc)
{
    static char *argv[64];
    int n = 0;
    argv[n++] = (char *)op->name;
    for (int i = 0; args && args[i] && n < 63; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    *argc = n;
    return argv;
}

/* parse, then check_cases as the harness calls it (cli/op_cmd.c): the problem, or a status with
 * *p NULL. */
static int parse_and_check(const tl_op *op, int argc, char **argv, tl_op_mode mode, void **p)
{
    int rc = op->parse(argc, argv, mode, p);
    if (!rc && op->check_cases && (rc = op->check_cases(*p))) {
        op->free_problem(*p);
        *p = NULL;
    }
    return rc;
}

static void *parse_or_fail(const tl_op *op, const char *const *args, tl_op_mode mode)
{
    int argc;
    char **argv = make_argv(op, args, &argc);
    void *p = NULL;
    int rc = parse_and_check(op, argc, argv, mode, &p);
    if (rc) fail_msg("%s: parse of its test_args failed: %s", op->name, tl_last_error());
    assert_non_null(p);
    return p;
}

static size_t shape_count(const tl_op_output *o)
{
    size_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= o->shape[d];
    return n;
}

/* Each output says what it is: a name, a type, a shape whose size is n, data. */
static void check_typed(const tl_op *op, const tl_op_outputs *out)
{
    assert_true(out->n >= 1 && out->n <= TL_OP_MAX_OUTPUTS);
    for (int o = 0; o < out->n; o++) {
        const tl_op_output *x = &out->o[o];
        assert_non_null(x->name);
        assert_true(x->type < TL_NPY_NTYPES);
        assert_non_null(x->data);
        assert_true(x->n > 0);
        if (shape_count(x) != x->n) fail_msg("%s output %s: shape holds %zu, n %zu", op->name, x->name, shape_count(x), x->n);
        if (x->row_len) assert_int_equal(x->n % x->row_len, 0);
    }
}

/* Reference against naive on every case of the row's small problem; the comparisons of the
 * harness: exact for integer outputs, else under the tolerance. */
static void test_reference_matches_naive(void **state)
{
    for (int i = 0; tl_ops[i]; i++) {
        const tl_op *op = tl_ops[i];
        void *p = parse_or_fail(op, op->test_args, TL_OP_CHECK);
        for (int c = 0; c < op->n_cases(p); c++) {
            assert_true(op->naive_cheap(p, c));
            assert_int_equal(op->make_inputs(p, c), 0);
            tl_op_outputs ref, nv;
            assert_int_equal(op->reference(p, &ref), 0);
            check_typed(op, &ref);
            /* the reference's arrays must survive the naive run: copy them */
            float *keep[TL_OP_MAX_OUTPUTS] = {0};
            for (int o = 0; o < ref.n; o++) {
                size_t bytes = ref.o[o].n * tl_npy_type_size(ref.o[o].type);
                keep[o] = malloc(bytes);
                memcpy(keep[o], ref.o[o].data, bytes);
            }
            assert_int_equal(op->naive(p, &nv), 0);
            check_typed(op, &nv);
            assert_int_equal(nv.n, ref.n);
            for (int o = 0; o < ref.n; o++) {
                assert_int_equal(nv.o[o].type, ref.o[o].type);
                assert_int_equal(nv.o[o].n, ref.o[o].n);
                if (ref.o[o].type != TL_NPY_F32 || ref.o[o].exact) {
                    assert_memory_equal(keep[o], nv.o[o].data, ref.o[o].n * tl_npy_type_size(ref.o[o].type));
                } else {
                    tl_tolerance tol;
                    tl_err_metrics m;
                    assert_int_equal(op->tolerance(p, o, &tol), 0);
                    tl_compare(keep[o], nv.o[o].data, ref.o[o].n, &m);
                    if (!tl_check_pass(&m, &tol))
                        fail_msg("%s case %d output %s: rel_rms %g over %g", op->name, c, ref.o[o].name, m.rel_rms,
                                 tol.rel_rms);
                    assert_true(m.rel_rms > 0 || m.max_abs == 0); /* metrics computed */
                }
                free(keep[o]);
            }
        }
        op->free_problem(p);
    }
}

/* Outputs poisoned by a wrong answer must fail: the comparison can fail. */
static void test_comparison_can_fail(void **state)
{
    for (int i = 0; tl_ops[i]; i++) {
        const tl_op *op = tl_ops[i];
        void *p = parse_or_fail(op, op->test_args, TL_OP_CHECK);
        assert_int_equal(op->make_inputs(p, 0), 0);
        tl_op_outputs ref;
        assert_int_equal(op->reference(p, &ref), 0);
        const tl_op_output *x = &ref.o[0];
        if (x->type == TL_NPY_F32 && !x->exact) {
            float *bad = malloc(x->n * sizeof(float));
            memcpy(bad, x->data, x->n * sizeof(float));
            bad[x->n / 2] = NAN;
            tl_tolerance tol;
            tl_err_metrics m;
            assert_int_equal(op->tolerance(p, 0, &tol), 0);
            tl_compare(x->data, bad, x->n, &m);
            assert_false(tl_check_pass(&m, &tol));
            for (size_t k = 0; k < x->n; k++) bad[k] = ((const float *)x->data)[k] * 1.01f;
            tl_compare(x->data, bad, x->n, &m);
            assert_false(tl_check_pass(&m, &tol));
            free(bad);
        }
        op->free_problem(p);
    }
}

static void test_bad_args_refused(void **state)
{
    for (int i = 0; tl_ops[i]; i++) {
        const tl_op *op = tl_ops[i];
        assert_non_null(op->bad_args);
        for (int b = 0; op->bad_args[b]; b++)
            for (int mode = TL_OP_CHECK; mode <= TL_OP_RUN; mode++) {
                if (mode == TL_OP_SIM) continue; /* the model takes shapes the kernel refuses */
                int argc;
                char **argv = make_argv(op, op->bad_args[b], &argc);
                void *p = (void *)1;
                int rc = parse_and_check(op, argc, argv, (tl_op_mode)mode, &p);
                if (rc != TL_EUSAGE)
                    fail_msg("%s: bad args #%d (%s ...) in mode %d gave %d, want usage error", op->name, b,
                             op->bad_args[b][0], mode, rc);
                assert_null(p);
                assert_true(strlen(tl_last_error()) > 0);
                tl_clear_error();
            }
    }
}

/* The model counts what the row counts: the same useful FLOPs (none for a selection), the same
 * data within 2% (MoE's model adds routing metadata and fp8's re-quantization traffic). */
static void test_model_agrees_with_work(void **state)
{
    for (int i = 0; tl_ops[i]; i++) {
        const tl_op *op = tl_ops[i];
        void *p = parse_or_fail(op, op->bench_args, TL_OP_BENCH);
        for (int c = 0; c < op->n_cases(p); c++)
            for (int part = 0; part < op->n_parts(p); part++) {
                tl_op_work w;
                assert_int_equal(op->work(p, c, part, &w), 0);
                assert_true(w.flops >= 0 && w.hbm_bytes > 0 && w.model_us > 0 && w.limiter[0]);
                if (fabs(w.model_flops - w.flops) > 1e-9 * w.flops)
                    fail_msg("%s case %d %s: model FLOPs %.17g, counted %.17g", op->name, c, w.part, w.model_flops,
                             w.flops);
                if (fabs(w.model_hbm_bytes - w.hbm_bytes) > 0.02 * w.hbm_bytes)
                    fail_msg("%s case %d %s: model bytes %.17g, counted %.17g", op->name, c, w.part,
                             w.model_hbm_bytes, w.hbm_bytes);
            }
        op->free_problem(p);
    }
}

static int header_cols(const char *h)
{
    int n = 1;
    for (; *h; h++) n += *h == ',';
    return n;
}

static void test_sim_rows_fill_their_header(void **state)
{
    for (int i = 0; tl_ops[i]; i++) {
        const tl_op *op = tl_ops[i];
        if (!op->sim) continue;
        void *p = parse_or_fail(op, NULL, TL_OP_SIM);
        tl_table *t = tl_table_new(op->sim_header);
        for (int c = 0; c < op->n_cases(p); c++) assert_int_equal(op->sim(p, c, t), 0);
        assert_true(tl_table_rows(t) >= op->n_cases(p));
        assert_int_equal(tl_table_cols(t), header_cols(op->sim_header));
        for (int r = 0; r < tl_table_rows(t); r++)
            for (int col = 0; col < tl_table_cols(t); col++) assert_non_null(tl_table_cell(t, r, col));
        tl_table_free(t);
        op->free_problem(p);
    }
}

/* The record: help for every verb, dtypes, inputs, and a target row for every arch we build. */
static void test_rows_are_complete(void **state)
{
    for (int i = 0; tl_ops[i]; i++) {
        const tl_op *op = tl_ops[i];
        assert_ptr_equal(tl_op_find(op->name), op);
        assert_true(op->summary && op->summary[0] && op->dtypes && op->dtypes[0]);
        assert_true(op->check_usage && op->run_usage && op->bench_usage && op->sim_usage);
        assert_non_null(op->parse);
        assert_non_null(op->reference);
        assert_non_null(op->naive);
        assert_non_null(op->gpu_built);
        static const char *const archs[] = {"sm_90", "gfx942", "gfx950"};
        for (int a = 0; a < 3; a++) {
            int found = 0;
            for (const tl_op_target *x = op->targets; x && x->arch; x++) found |= strcmp(x->arch, archs[a]) == 0;
            if (!found) fail_msg("%s has no target row for %s", op->name, archs[a]);
        }
        for (const tl_op_input *in = op->inputs; in && in->name; in++) assert_true(in->what && in->what[0]);
        for (int j = i + 1; tl_ops[j]; j++) assert_string_not_equal(op->name, tl_ops[j]->name);
    }
    assert_null(tl_op_find("no-such-op"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_matches_naive), cmocka_unit_test(test_comparison_can_fail),
        cmocka_unit_test(test_bad_args_refused),        cmocka_unit_test(test_model_agrees_with_work),
        cmocka_unit_test(test_sim_rows_fill_their_header), cmocka_unit_test(test_rows_are_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
