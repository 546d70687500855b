/* `tilelab check OP` and `tilelab bench OP`: the harness that walks an op-table row (core/op.h).
 * It knows nothing about any op: parse, describe, cases, compare under the tolerance, report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/op.h"
#include "cli.h"

static int find_format(int argc, char **argv, tl_format *fmt)
{
    *fmt = TL_FMT_TABLE;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--format=", 9) == 0) return tl_parse_format(argv[i] + 9, fmt); /* as opts.c reads it */
        if (strcmp(argv[i], "--format") == 0) {
            if (i + 1 >= argc) return tl_error(TL_EUSAGE, "--format", "needs a value (table, csv or json)");
            return tl_parse_format(argv[i + 1], fmt);
        }
    }
    return 0;
}

static void op_list(FILE *f)
{
    fprintf(f, "ops:");
    for (int i = 0; tl_ops[i]; i++) fprintf(f, " %s", tl_ops[i]->name);
    fprintf(f, "\n");
}

static int lookup(const char *group, int argc, char **argv, const tl_op **op)
{
    if (argc < 1 || !argv[0] || argv[0][0] == '-') {
        printf("usage: tilelab %s OP [options]   (tilelab %s OP --help)\n", group, group);
        op_list(stdout);
        return argc >= 1 && argv[0] && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)
                   ? 0 : tl_error(TL_EUSAGE, group, "which op? (one of the ops listed above)");
    }
    *op = tl_op_find(argv[0]);
    if (!*op) {
        char names[256] = "";
        for (int i = 0; tl_ops[i]; i++) {
            if (names[0]) strncat(names, ", ", sizeof names - strlen(names) - 1);
            strncat(names, tl_ops[i]->name, sizeof names - strlen(names) - 1);
        }
        return tl_error(TL_EUSAGE, group, "unknown op '%s' (one of %s)", argv[0], names);
    }
    return 0;
}

/* One comparison row: label, what was compared, the metrics beside the tolerance, the verdict. */
static int compare_row(tl_table *t, const char *label, const char *what, const tl_op_output *ref,
                       const tl_op_output *out, const tl_tolerance *tol, const char *note)
{
    tl_err_metrics m;
    memset(&m, 0, sizeof m);
    int pass = 0;
    if (ref->n != out->n || ref->n == 0) {
        tl_table_row(t);
        tl_table_str(t, label);
        tl_table_str(t, what);
        for (int i = 0; i < 6; i++) tl_table_str(t, "-");
        tl_table_str(t, "FAIL");
        tl_table_str(t, "output sizes differ");
        return 0;
    }
    char full_note[700];
    if (ref->row_len > 0 && ref->row_len == out->row_len && ref->n % ref->row_len == 0) {
        tl_compare_rows(ref->data, out->data, ref->n, ref->row_len, &m);
        snprintf(full_note, sizeof full_note, "worst row %.2g x tol (bound %.3g); %s",
                 tol->rel_rms > 0 ? m.worst_row / tol->rel_rms : 0.0, tol->row_factor, note ? note : "");
        note = full_note;
    } else {
        tl_compare(ref->data, out->data, ref->n, &m);
    }
    pass = tl_check_pass(&m, tol);
    tl_table_row(t);
    tl_table_str(t, label);
    tl_table_str(t, what);
    tl_table_numf(t, "%.3g", m.max_abs);
    tl_table_numf(t, "%.3g", m.max_rel);
    tl_table_numf(t, "%.3g", m.rel_rms);
    tl_table_numf(t, "%.3g", m.nmse);
    tl_table_numf(t, "%.3g", tol->rel_rms);
    tl_table_int(t, (long long)m.nan_count);
    tl_table_str(t, pass ? "pass" : "FAIL");
    tl_table_str(t, note ? note : "");
    return pass;
}

static void fail_row(tl_table *t, const char *label, const char *what, const char *why)
{
    tl_table_row(t);
    tl_table_str(t, label);
    tl_table_str(t, what);
    for (int i = 0; i < 6; i++) tl_table_str(t, "-");
    tl_table_str(t, "FAIL");
    tl_table_str(t, why);
}

/* "check moe: M=256 (3 of 3): reference" on one line of a terminal's stderr while a case runs
 * (large cases take minutes); nothing when stderr is not a terminal (pipes, logs, tests). An
 * empty step clears the line. */
static void progress(const char *cmd, const char *op, const char *label, int c, int n, const char *step)
{
    if (!isatty(fileno(stderr))) return;
    if (!step[0]) fprintf(stderr, "\r\033[K");
    else fprintf(stderr, "\r\033[K%s %s: %s (%d of %d): %s", cmd, op, label, c + 1, n, step);
    fflush(stderr);
}

/* Reference against naive (no GPU) or GPU, for every case of one problem. Returns the number of
 * failed rows, or -status on an error that stops the check (bad input, out of memory). */
static int check_problem(const tl_op *op, void *problem, int use_gpu, tl_table *t, const char *prefix)
{
    int failed = 0, rc = 0;
    const int n_cases = op->n_cases(problem);
    for (int c = 0; c < n_cases; c++) {
        char label[64], full[96];
        if (!use_gpu && !op->naive_cheap(problem, c)) continue; /* before making big inputs */
        progress("check", op->name, "next case", c, n_cases, "making inputs");
        rc = op->make_inputs(problem, c, label, sizeof label);
        snprintf(full, sizeof full, "%s%s", prefix, rc ? "" : label);
        tl_op_output ref, out;
        memset(&ref, 0, sizeof ref);
        memset(&out, 0, sizeof out);
        if (!rc) progress("check", op->name, full, c, n_cases, "CPU reference");
        if (!rc) rc = op->reference(problem, &ref);
        if (rc) {
            progress("check", op->name, full, c, n_cases, "");
            return -rc;
        }
        progress("check", op->name, full, c, n_cases, use_gpu ? "GPU kernel" : "naive loop");
        rc = use_gpu ? op->gpu(problem, &out) : op->naive(problem, &out);
        progress("check", op->name, full, c, n_cases, "");
        const char *what = use_gpu ? "gpu vs reference" : "reference vs naive";
        if (rc == TL_EFAIL) { /* a check inside the launcher failed: report it, go on */
            fail_row(t, full, what, tl_last_error());
            tl_clear_error();
            failed++;
            continue;
        }
        if (rc) return -rc;
        tl_tolerance tol; /* per case: it may depend on the case's size */
        if ((rc = op->tolerance(problem, &tol))) return -rc;
        char note[600];
        snprintf(note, sizeof note, "%s; %s", ref.note, out.note);
        if (!compare_row(t, full, what, &ref, &out, &tol, note)) failed++;
    }
    return failed;
}

int tl_cmd_check(int argc, char **argv)
{
    const tl_op *op = NULL;
    int rc = lookup("check", argc - 1, argv + 1, &op);
    if (rc || !op) return rc;
    if (tl_wants_help(argc - 1, argv + 1, op->check_usage)) return 0;
    tl_format fmt;
    if ((rc = find_format(argc - 1, argv + 1, &fmt))) return rc;
    void *problem = NULL;
    if ((rc = op->parse(argc - 1, argv + 1, TL_OP_CHECK, &problem))) return rc;
    const char *no_gpu = NULL;
    if ((rc = tl_cli_gpu_missing(op->gpu != NULL, &no_gpu))) {
        op->free_problem(problem);
        return rc;
    }
    FILE *info = fmt == TL_FMT_TABLE ? stdout : stderr;
    op->describe(problem, info);
    tl_table *t = tl_table_new("case,compared,max_abs,max_rel,rel_rms,nmse,tol_rel_rms,nan,result,notes");
    if (!t) {
        op->free_problem(problem);
        return tl_error(TL_EFAIL, "check", "out of memory");
    }
    int failed = 0, status = 0;
    if (!no_gpu) {
        failed = check_problem(op, problem, 1, t, "");
    } else {
        fprintf(info, "GPU part skipped: %s; checking the CPU reference against the naive loop instead.\n", no_gpu);
        void *small = NULL;
        if (op->small_problem && (rc = op->small_problem(problem, &small)) == 0) {
            op->describe(small, info);
            failed = check_problem(op, small, 0, t, "small ");
            op->free_problem(small);
        } else if (rc) {
            failed = -rc;
        }
        if (failed >= 0) {
            int f2 = check_problem(op, problem, 0, t, "");
            failed = f2 < 0 ? f2 : failed + f2;
        }
    }
    if (failed < 0) status = -failed;
    else {
        tl_table_print(t, fmt, no_gpu ? "CPU reference against the naive loop" : "GPU kernel against the CPU reference",
                       stdout);
        if (no_gpu) printf("GPU check: skipped: %s\n", no_gpu);
        if (tl_table_rows(t) == 0) printf("note: no case was cheap enough for the naive loop\n");
        if (failed) status = tl_error(TL_EFAIL, "check", "%d of %d comparisons failed", failed, tl_table_rows(t));
        else printf("all %d comparisons passed\n", tl_table_rows(t));
    }
    tl_table_free(t);
    op->free_problem(problem);
    return status;
}

int tl_bench_op(int argc, char **argv)
{
    const tl_op *op = tl_op_find(argv[0]);
    if (!op) return tl_error(TL_EUSAGE, "bench", "unknown op '%s'", argv[0]);
    if (tl_wants_help(argc, argv, op->bench_usage)) return 0;
    tl_format fmt;
    int rc = find_format(argc, argv, &fmt);
    if (rc) return rc;
    void *problem = NULL;
    if ((rc = op->parse(argc, argv, TL_OP_BENCH, &problem))) return rc;
    const char *no_gpu = NULL;
    if ((rc = tl_cli_gpu_missing(op->bench != NULL, &no_gpu)) || no_gpu) {
        op->free_problem(problem);
        return rc ? rc : tl_error(TL_EFAIL, "bench", "%s needs a GPU: %s", op->name, no_gpu);
    }
    op->describe(problem, fmt == TL_FMT_TABLE ? stdout : stderr);
    tl_table *t = tl_table_new(op->bench_header);
    if (!t) rc = tl_error(TL_EFAIL, "bench", "out of memory");
    for (int c = 0; !rc && c < op->n_cases(problem); c++) {
        char label[64];
        progress("bench", op->name, "next case", c, op->n_cases(problem), "making inputs");
        rc = op->make_inputs(problem, c, label, sizeof label);
        if (!rc) progress("bench", op->name, label, c, op->n_cases(problem), "timing");
        if (!rc) rc = op->bench(problem, c, t);
        progress("bench", op->name, "", c, op->n_cases(problem), "");
    }
    if (!rc) tl_table_print(t, fmt, "measured against the model", stdout);
    tl_table_free(t);
    op->free_problem(problem);
    return rc;
}
