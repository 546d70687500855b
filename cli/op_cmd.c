/* `tilelab check|bench|sim|run OP` and `tilelab ops`: the harness that walks an op-table row
 * (core/op.h). It knows nothing about any op: it reads its own options (--format, --input,
 * --output, --device), hands the rest to the row's parse, walks the cases, compares, reports. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/op.h"
#include "../executor/executor.h"
#include "../kernels/devices.h"
#include "cli.h"

#define MAX_FILES 16

/* The harness's options, taken out of argv; what is left goes to the row's parse. */
typedef struct {
    tl_format fmt;
    tl_op_file inputs[MAX_FILES], outputs[MAX_FILES];
    int n_inputs, n_outputs;
    char names[2 * MAX_FILES][64]; /* the files' names (their paths point into argv) */
    const char *device; /* NULL (check: the GPU when there is one; run: cpu), "cpu", "gpu", "emu:gfx942", "emu:gfx950" */
    char **rest;        /* argv for op->parse (rest[0] = the op's name), NULL-terminated */
    int n_rest;
} harness_args;

static void harness_free(harness_args *h) { free(h->rest); }

/* "NAME=FILE" into f (name "" when the value has no '=': run's --output FILE means the first output). */
static int split_file(const char *opt, const char *val, int need_name, char *name, tl_op_file *f)
{
    const char *eq = strchr(val, '=');
    if (!eq && need_name)
        return tl_error(TL_EUSAGE, opt, "'%s' is not NAME=FILE.npy (e.g. --input x=x.npy)", val);
    size_t len = eq ? (size_t)(eq - val) : 0;
    if (len >= 64) return tl_error(TL_EUSAGE, opt, "name '%.*s' is too long", (int)len, val);
    memcpy(name, val, len);
    name[len] = '\0';
    f->name = name;
    f->path = eq ? eq + 1 : val;
    if (!*f->path) return tl_error(TL_EUSAGE, opt, "'%s' names no file", val);
    return 0;
}

/* The value of option argv[*i] (as "--opt VALUE" or "--opt=VALUE"), advancing *i; NULL if argv[*i]
 * is not `opt`. *err is set when the value is missing. */
static const char *option_value(int argc, char **argv, int *i, const char *opt, int *err)
{
    size_t n = strlen(opt);
    if (strncmp(argv[*i], opt, n) != 0) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *err = tl_error(TL_EUSAGE, opt, "needs a value");
        return NULL;
    }
    return argv[++*i];
}

static int harness_parse(int argc, char **argv, harness_args *h)
{
    memset(h, 0, sizeof *h);
    h->fmt = TL_FMT_TABLE;
    h->device = NULL;
    h->rest = calloc((size_t)argc + 1, sizeof *h->rest);
    if (!h->rest) return tl_error(TL_EFAIL, "command", "out of memory");
    h->rest[h->n_rest++] = argv[0];
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *v;
        if ((v = option_value(argc, argv, &i, "--format", &rc))) {
            rc = tl_parse_format(v, &h->fmt);
        } else if ((v = option_value(argc, argv, &i, "--input", &rc))) {
            if (h->n_inputs == MAX_FILES) rc = tl_error(TL_EUSAGE, "--input", "at most %d files", MAX_FILES);
            else rc = split_file("--input", v, 1, h->names[h->n_inputs], &h->inputs[h->n_inputs]), h->n_inputs++;
        } else if ((v = option_value(argc, argv, &i, "--output", &rc))) {
            if (h->n_outputs == MAX_FILES) rc = tl_error(TL_EUSAGE, "--output", "at most %d files", MAX_FILES);
            else rc = split_file("--output", v, 0, h->names[MAX_FILES + h->n_outputs], &h->outputs[h->n_outputs]),
                 h->n_outputs++;
        } else if ((v = option_value(argc, argv, &i, "--device", &rc))) {
            h->device = v;
            if (strcmp(v, "cpu") != 0) rc = tl_device_select(v); /* gpu, emu:gfx942, emu:gfx950 */
        } else if (!rc) {
            h->rest[h->n_rest++] = argv[i];
        }
    }
    if (rc) harness_free(h);
    return rc;
}

/* The --input names against the row's list: unknown or repeated names are usage errors. */
static int check_input_names(const tl_op *op, const harness_args *h)
{
    if (h->n_inputs && !op->load_inputs) return tl_error(TL_EUSAGE, "--input", "%s takes no input files", op->name);
    for (int i = 0; i < h->n_inputs; i++) {
        int known = 0;
        for (const tl_op_input *in = op->inputs; in && in->name; in++) known |= strcmp(in->name, h->inputs[i].name) == 0;
        if (!known) {
            char names[256] = "";
            for (const tl_op_input *in = op->inputs; in && in->name; in++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", in->name);
            return tl_error(TL_EUSAGE, "--input", "%s has no input '%s' (its inputs: %s)", op->name, h->inputs[i].name,
                            names);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(h->inputs[i].name, h->inputs[j].name) == 0)
                return tl_error(TL_EUSAGE, "--input", "'%s' given twice", h->inputs[i].name);
    }
    return 0;
}

static void op_names(char *names, size_t cap)
{
    names[0] = '\0';
    for (int i = 0; tl_ops[i]; i++)
        snprintf(names + strlen(names), cap - strlen(names), "%s%s", i ? ", " : "", tl_ops[i]->name);
}

static int lookup(const char *group, int argc, char **argv, const tl_op **op)
{
    char names[256];
    op_names(names, sizeof names);
    *op = NULL;
    if (argc < 1 || !argv[0] || argv[0][0] == '-') {
        int help = argc >= 1 && argv[0] && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0);
        if (!help) return tl_error(TL_EUSAGE, group, "which op? (one of %s; tilelab ops)", names);
        printf("usage: tilelab %s OP [options]   (tilelab %s OP --help)\nops: %s\n", group, group, names);
        return 0;
    }
    *op = tl_op_find(argv[0]);
    if (!*op) return tl_error(TL_EUSAGE, group, "unknown op '%s' (one of %s)", argv[0], names);
    return 0;
}

/* ---- comparisons ------------------------------------------------------------------------------ */

static void verdict_cells(tl_table *t, const char *label, const char *what, const char *result, const char *note)
{
    tl_table_row(t);
    tl_table_str(t, label);
    tl_table_str(t, what);
    for (int i = 0; i < 6; i++) tl_table_none(t); /* no error metrics: null in JSON, - in text */
    tl_table_str(t, result);
    tl_table_str(t, note);
}

/* Bit-for-bit comparison (integer outputs and exact ones): the count of differing elements. */
static int compare_exact(tl_table *t, const char *label, const char *what, const tl_op_output *ref,
                         const tl_op_output *out, const char *note)
{
    size_t es = tl_npy_type_size(ref->type), bad = 0, first = 0;
    for (size_t i = 0; i < ref->n; i++)
        if (memcmp((const char *)ref->data + i * es, (const char *)out->data + i * es, es) != 0) {
            if (!bad) first = i;
            bad++;
        }
    char full[700];
    if (bad) snprintf(full, sizeof full, "%zu of %zu elements differ (first: %zu); %s", bad, ref->n, first, note);
    else snprintf(full, sizeof full, "all %zu elements identical; %s", ref->n, note);
    verdict_cells(t, label, what, bad ? "FAIL" : "pass", full);
    return bad == 0;
}

/* A float comparison under the tolerance: the metrics beside it, the verdict. */
static int compare_float(tl_table *t, const char *label, const char *what, const tl_op_output *ref,
                         const tl_op_output *out, const tl_tolerance *tol, const char *note)
{
    tl_err_metrics m;
    memset(&m, 0, sizeof m);
    char full[1000];
    const float *a = ref->data, *b = out->data;
    if (ref->row_len > 0 && ref->n % ref->row_len == 0) {
        tl_compare_rows(a, b, ref->n, ref->row_len, &m);
        /* the worst row's error RMS over the reference's RMS, in units of tol_rel_rms, and the
         * factor it must stay under (numerics/metrics.h row_factor; 0: rows are not bounded) */
        const double worst = tol->rel_rms > 0 ? m.worst_row / tol->rel_rms : 0.0;
        char bound[80];
        if (tol->row_factor > 0) snprintf(bound, sizeof bound, "must be <= %.3g x", tol->row_factor);
        else snprintf(bound, sizeof bound, "no per-row bound");
        snprintf(full, sizeof full, "worst row's rel RMS %.2g x tol_rel_rms (%s); %s", worst, bound, note);
    } else {
        tl_compare(a, b, ref->n, &m);
        snprintf(full, sizeof full, "%s", note);
    }
    int pass = tl_check_pass(&m, tol);
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
    tl_table_str(t, full);
    return pass;
}

/* Every output of a case against the reference's; the number of failed rows, or -status. */
static int compare_outputs(const tl_op *op, void *problem, tl_table *t, const char *label, const char *what,
                           const tl_op_outputs *ref, const tl_op_outputs *out)
{
    int failed = 0;
    for (int o = 0; o < ref->n; o++) {
        const tl_op_output *r = &ref->o[o], *x = &out->o[o];
        char what_o[96], note[600];
        snprintf(what_o, sizeof what_o, ref->n > 1 ? "%s: %s" : "%s", what, r->name);
        snprintf(note, sizeof note, "%s; %s", r->note, o < out->n ? x->note : "");
        if (o >= out->n || x->n != r->n || x->type != r->type || r->n == 0) {
            verdict_cells(t, label, what_o, "FAIL", "the outputs' sizes or types differ");
            failed++;
            continue;
        }
        int is_float = r->type == TL_NPY_F32 && !r->exact;
        if (!is_float) {
            failed += !compare_exact(t, label, what_o, r, x, note);
            continue;
        }
        tl_tolerance tol; /* per case: it may depend on the case's size */
        int rc = op->tolerance(problem, o, &tol);
        if (rc) return -rc;
        failed += !compare_float(t, label, what_o, r, x, &tol, note);
    }
    return failed;
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

/* Reference against naive (no GPU) or GPU, for every case of one problem. Cases the naive loop
 * cannot take in a few seconds are skipped and named in `skipped`. Returns the number of failed
 * rows, or -status on an error that stops the check (bad input, out of memory). */
static int check_problem(const tl_op *op, void *problem, int use_gpu, tl_table *t, const char *prefix,
                         char *skipped, size_t skipped_cap)
{
    int failed = 0, rc = 0;
    const int n_cases = op->n_cases(problem);
    for (int c = 0; c < n_cases; c++) {
        char label[64], full[96];
        op->case_label(problem, c, label, sizeof label);
        snprintf(full, sizeof full, "%s%s", prefix, label);
        if (!use_gpu && !op->naive_cheap(problem, c)) { /* before making big inputs */
            if (skipped)
                snprintf(skipped + strlen(skipped), skipped_cap - strlen(skipped), "%s%s", skipped[0] ? ", " : "", label);
            continue;
        }
        progress("check", op->name, full, c, n_cases, "making inputs");
        tl_op_outputs ref, out;
        memset(&ref, 0, sizeof ref);
        memset(&out, 0, sizeof out);
        rc = op->make_inputs(problem, c);
        if (!rc) progress("check", op->name, full, c, n_cases, "CPU reference");
        if (!rc) rc = op->reference(problem, &ref);
        if (rc) {
            progress("check", op->name, full, c, n_cases, "");
            return -rc;
        }
        progress("check", op->name, full, c, n_cases, use_gpu ? "GPU kernel" : "naive loop");
        rc = use_gpu ? op->gpu(problem, &out) : op->naive(problem, &out);
        progress("check", op->name, full, c, n_cases, "");
        const char *what = !use_gpu ? "reference vs naive" : strcmp(tl_device_selected(), "emu:gfx942") == 0 ? "emu:gfx942 vs reference"
                                 : strcmp(tl_device_selected(), "emu:gfx950") == 0 ? "emu:gfx950 vs reference"
                                                                                   : "gpu vs reference";
        if (rc == TL_EFAIL) { /* a check inside the launcher failed: report it, go on */
            verdict_cells(t, full, what, "FAIL", tl_last_error());
            tl_clear_error();
            failed++;
            continue;
        }
        if (rc) return -rc;
        int f = compare_outputs(op, problem, t, full, what, &ref, &out);
        if (f < 0) return f;
        failed += f;
    }
    return failed;
}

/* Parses the row's options and checks its cases (bench and sim, which take no files). */
static int parse_cases(const tl_op *op, const harness_args *h, tl_op_mode mode, void **problem)
{
    int rc = op->parse(h->n_rest, h->rest, mode, problem);
    if (!rc && op->check_cases && (rc = op->check_cases(*problem))) {
        op->free_problem(*problem);
        *problem = NULL;
    }
    return rc;
}

/* Parses the row's options, loads the user's files and checks the cases: the problem, or a status. */
static int open_problem(const tl_op *op, const harness_args *h, tl_op_mode mode, void **problem)
{
    int rc = check_input_names(op, h);
    if (!rc) rc = op->parse(h->n_rest, h->rest, mode, problem);
    if (!rc && h->n_inputs) rc = op->load_inputs(*problem, h->inputs, h->n_inputs);
    if (!rc && op->check_cases) rc = op->check_cases(*problem);
    if (rc && *problem) {
        op->free_problem(*problem);
        *problem = NULL;
    }
    return rc;
}

/* Without a GPU: the small problem's cases, then the requested ones the naive loop can take. */
static int check_without_gpu(const tl_op *op, void *problem, tl_table *t, FILE *info, char *skipped, size_t cap)
{
    void *small = NULL;
    int failed = 0, rc = op->small_problem ? op->small_problem(problem, &small) : 0;
    if (rc) return -rc;
    if (small) {
        op->describe(small, info);
        failed = check_problem(op, small, 0, t, "small ", NULL, 0);
        op->free_problem(small);
    }
    if (failed < 0) return failed;
    int f2 = check_problem(op, problem, 0, t, "", skipped, cap);
    return f2 < 0 ? f2 : failed + f2;
}

/* What the CPU executor ran for this check, and how fast (bench/README.md quotes it). */
static void print_executor_stats(FILE *f)
{
    tl_emu_stats st;
    tl_emu_stats_get(&st);
    const double s = st.seconds > 0 ? st.seconds : 1e-9;
    fprintf(f, "executor (%s): %lld launches, %lld work-groups, %lld work-items; %lld wave operations (%lld MFMA), "
               "%lld barriers in %.2f s of launches: %.0f MFMA/s, %.0f wave operations/s\n",
            tl_device_selected() + 4, st.launches, st.groups, st.items, st.wave_ops, st.mfmas, st.barriers, st.seconds,
            (double)st.mfmas / s, (double)st.wave_ops / s);
}

int tl_cmd_check(int argc, char **argv)
{
    const tl_op *op = NULL;
    int rc = lookup("check", argc - 1, argv + 1, &op);
    if (rc || !op) return rc;
    if (tl_wants_help(argc - 1, argv + 1, op->check_usage)) return 0;
    harness_args h;
    if ((rc = harness_parse(argc - 1, argv + 1, &h))) return rc;
    void *problem = NULL;
    const char *no_gpu = NULL;
    if (h.n_outputs) rc = tl_error(TL_EUSAGE, "check", "--output is for `tilelab run`");
    if (!rc) rc = open_problem(op, &h, TL_OP_CHECK, &problem);
    if (!rc && (rc = tl_cli_gpu_missing(op->gpu_built(), &no_gpu))) op->free_problem(problem);
    if (!rc && h.device && strcmp(h.device, "cpu") == 0) no_gpu = "--device cpu";
    if (!rc && h.device && !no_gpu && !op->gpu_built()) no_gpu = "this op has no kernel for that device";
    if (rc) {
        harness_free(&h);
        return rc;
    }
    FILE *info = h.fmt == TL_FMT_TABLE ? stdout : stderr; /* machine-readable output is only that */
    op->describe(problem, info);
    tl_table *t = tl_table_new("case,compared,max_abs,max_rel,rel_rms,nmse,tol_rel_rms,nan,result,notes");
    tl_emu_stats_reset();
    char skipped[1024] = "";
    int failed = !t ? -tl_error(TL_EFAIL, "check", "out of memory") : 0;
    if (!failed && !no_gpu) failed = check_problem(op, problem, 1, t, "", NULL, 0);
    else if (!failed) {
        fprintf(info, "GPU part skipped: %s; checking the CPU reference against the naive loop instead.\n", no_gpu);
        failed = check_without_gpu(op, problem, t, info, skipped, sizeof skipped);
    }
    int status = 0;
    if (failed < 0) status = -failed;
    else {
        char title[128];
        if (no_gpu) snprintf(title, sizeof title, "CPU reference against the naive loop");
        else if (tl_device_is_emu())
            snprintf(title, sizeof title, "%s kernel on the CPU executor against the CPU reference", tl_device_selected() + 4);
        else snprintf(title, sizeof title, "GPU kernel against the CPU reference");
        tl_table_print(t, h.fmt, title, stdout);
        if (no_gpu) fprintf(info, "GPU check: skipped: %s\n", no_gpu);
        if (skipped[0])
            fprintf(info, "not checked: %s (the naive loop would take too long on this CPU; the GPU check covers "
                          "them in a GPU build)\n", skipped);
        if (!no_gpu && tl_device_is_emu()) print_executor_stats(info);
        if (failed) status = tl_error(TL_EFAIL, "check", "%d of %d comparisons failed", failed, tl_table_rows(t));
        else if (tl_table_rows(t) == 0) fprintf(info, "nothing was compared\n");
        else fprintf(info, "all %d comparisons passed%s\n", tl_table_rows(t), skipped[0] ? " (some cases not checked)" : "");
    }
    tl_table_free(t);
    op->free_problem(problem);
    harness_free(&h);
    return status;
}

/* ---- run ------------------------------------------------------------------------------------- */

/* The output file of output o: --output NAME=FILE, or a bare --output FILE for the first. */
static const char *output_path(const harness_args *h, const tl_op_output *o, int index)
{
    for (int i = 0; i < h->n_outputs; i++)
        if ((!h->outputs[i].name[0] && index == 0) || strcmp(h->outputs[i].name, o->name) == 0)
            return h->outputs[i].path;
    return NULL;
}

static int write_outputs(const harness_args *h, const tl_op_outputs *out, FILE *info)
{
    for (int i = 0; i < h->n_outputs; i++) { /* every --output names an output the op makes */
        int found = 0;
        for (int o = 0; o < out->n; o++)
            found |= (!h->outputs[i].name[0] && o == 0) || strcmp(h->outputs[i].name, out->o[o].name) == 0;
        if (!found) return tl_error(TL_EUSAGE, "--output", "no output named '%s'", h->outputs[i].name);
    }
    for (int o = 0; o < out->n; o++) {
        const tl_op_output *x = &out->o[o];
        const char *path = output_path(h, x, o);
        if (!path) continue;
        int rc = tl_npy_write(path, x->type, x->ndim, x->shape, x->data);
        if (rc) return rc;
        fprintf(info, "wrote %s: %s, %zu elements\n", path, x->name, x->n);
    }
    return 0;
}

/* Before anything runs: two --output files that are one file (the second would silently replace the
 * first), an output named twice, or an output that is an --input file (the answer would replace
 * the data it was computed from) are usage errors. One file: tl_same_file (the inode where both
 * exist, else the resolved name). */
static int check_output_aliases(const harness_args *h)
{
    for (int i = 0; i < h->n_outputs; i++) {
        const tl_op_file *a = &h->outputs[i];
        for (int j = 0; j < i; j++) {
            const tl_op_file *b = &h->outputs[j];
            if (strcmp(a->name, b->name) == 0)
                return tl_error(TL_EUSAGE, "--output", "'%s' is given twice", a->name[0] ? a->name : "the first output");
            if (tl_same_file(a->path, b->path))
                return tl_error(TL_EUSAGE, "--output", "%s and %s are one file '%s': each output needs its own",
                                b->name[0] ? b->name : "the first output", a->name[0] ? a->name : "the first output", a->path);
        }
        for (int j = 0; j < h->n_inputs; j++)
            if (tl_same_file(a->path, h->inputs[j].path))
                return tl_error(TL_EUSAGE, "--output", "'%s' is the --input %s: it would replace the data it is computed from",
                                a->path, h->inputs[j].name);
    }
    return 0;
}

int tl_cmd_run(int argc, char **argv)
{
    const tl_op *op = NULL;
    int rc = lookup("run", argc - 1, argv + 1, &op);
    if (rc || !op) return rc;
    if (tl_wants_help(argc - 1, argv + 1, op->run_usage)) return 0;
    harness_args h;
    if ((rc = harness_parse(argc - 1, argv + 1, &h))) return rc;
    for (const tl_op_input *in = op->inputs; !rc && in && in->name; in++) {
        int given = 0;
        for (int i = 0; i < h.n_inputs; i++) given |= strcmp(h.inputs[i].name, in->name) == 0;
        if (in->required && !given)
            rc = tl_error(TL_EUSAGE, "run", "%s needs --input %s=FILE.npy (%s)", op->name, in->name, in->what);
    }
    if (!rc && !h.n_outputs) rc = tl_error(TL_EUSAGE, "run", "needs --output FILE.npy");
    if (!rc) rc = check_output_aliases(&h);
    const int gpu = h.device && strcmp(h.device, "cpu") != 0; /* gpu, or the executor */
    const char *no_gpu = NULL;
    if (!rc && gpu && !(rc = tl_cli_gpu_missing(op->gpu_built(), &no_gpu)) && no_gpu)
        rc = tl_error(TL_EFAIL, "run", "--device %s: %s", h.device, no_gpu);
    void *problem = NULL;
    if (!rc) rc = open_problem(op, &h, TL_OP_RUN, &problem);
    if (rc) {
        harness_free(&h);
        return rc;
    }
    tl_op_outputs out;
    memset(&out, 0, sizeof out);
    rc = op->make_inputs(problem, 0);
    if (!rc) rc = gpu ? op->gpu(problem, &out) : op->reference(problem, &out);
    if (!rc) rc = write_outputs(&h, &out, stderr);
    if (!rc) op->describe(problem, stderr); /* after: a failure is one error line */
    op->free_problem(problem);
    harness_free(&h);
    return rc;
}

/* ---- bench and sim ---------------------------------------------------------------------------- */

int tl_bench_op(int argc, char **argv)
{
    const tl_op *op = tl_op_find(argv[0]);
    if (!op) return tl_error(TL_EUSAGE, "bench", "unknown op '%s'", argv[0]);
    if (tl_wants_help(argc, argv, op->bench_usage)) return 0;
    harness_args h;
    int rc = harness_parse(argc, argv, &h);
    if (rc) return rc;
    void *problem = NULL;
    if (h.n_inputs || h.n_outputs) rc = tl_error(TL_EUSAGE, "bench", "--input and --output are for check and run");
    if (!rc && tl_device_is_emu())
        rc = tl_error(TL_EUSAGE, "bench", "--device %s is the CPU executor, which has no timing (bench needs a GPU)", h.device);
    if (!rc) rc = parse_cases(op, &h, TL_OP_BENCH, &problem);
    const char *no_gpu = NULL;
    if (!rc && ((rc = tl_cli_gpu_missing(op->gpu_built(), &no_gpu)) || no_gpu)) {
        op->free_problem(problem);
        problem = NULL;
        if (!rc) rc = tl_error(TL_EFAIL, "bench", "%s needs a GPU: %s", op->name, no_gpu);
    }
    tl_table *t = NULL;
    if (!rc) {
        op->describe(problem, h.fmt == TL_FMT_TABLE ? stdout : stderr);
        t = tl_table_new(op->bench_header);
        if (!t) rc = tl_error(TL_EFAIL, "bench", "out of memory");
    }
    for (int c = 0; !rc && c < op->n_cases(problem); c++) {
        char label[64];
        op->case_label(problem, c, label, sizeof label);
        progress("bench", op->name, label, c, op->n_cases(problem), "making inputs");
        rc = op->make_inputs(problem, c);
        if (!rc) progress("bench", op->name, label, c, op->n_cases(problem), "timing");
        if (!rc) rc = op->bench(problem, c, t);
        progress("bench", op->name, "", c, op->n_cases(problem), "");
    }
    if (!rc) tl_table_print(t, h.fmt, "measured against the model", stdout);
    tl_table_free(t);
    if (problem) op->free_problem(problem);
    harness_free(&h);
    return rc;
}

int tl_sim_op(int argc, char **argv)
{
    const tl_op *op = tl_op_find(argv[0]);
    if (!op || !op->sim) return tl_error(TL_EUSAGE, "sim", "unknown op '%s'", argv[0]);
    if (tl_wants_help(argc, argv, op->sim_usage)) return 0;
    harness_args h;
    int rc = harness_parse(argc, argv, &h);
    if (rc) return rc;
    void *problem = NULL;
    if (h.n_inputs || h.n_outputs) rc = tl_error(TL_EUSAGE, "sim", "--input and --output are for check and run");
    if (!rc) rc = parse_cases(op, &h, TL_OP_SIM, &problem);
    tl_table *t = NULL;
    if (!rc) {
        op->describe(problem, h.fmt == TL_FMT_TABLE ? stdout : stderr);
        t = tl_table_new(op->sim_header);
        if (!t) rc = tl_error(TL_EFAIL, "sim", "out of memory");
    }
    for (int c = 0; !rc && c < op->n_cases(problem); c++) rc = op->sim(problem, c, t);
    if (!rc) tl_table_print(t, h.fmt, "simulated (the model; see the row's preset above)", stdout);
    tl_table_free(t);
    if (problem) op->free_problem(problem);
    harness_free(&h);
    return rc;
}

/* ---- tilelab ops ----------------------------------------------------------------------------- */

static const char ops_usage[] =
    "usage: tilelab ops [--format table|csv|json]\n"
    "The op table: each op, its dtypes, the verbs and figures it has, and per target where its kernel\n"
    "was compiled and run; this_build says whether this binary holds its GPU code.\n";

static void verbs_of(const tl_op *op, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s", op->reference ? "check run" : "", op->bench ? " bench" : "", op->sim ? " sim" : "",
             op->figures && op->figures[0].name ? " draw" : "");
}

int tl_cmd_ops(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, ops_usage)) return 0;
    const char *fmt_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt = TL_FMT_TABLE;
    int rc = tl_opts_parse(argc, argv, opts, "ops", NULL, 0, NULL);
    if (!rc && fmt_s) rc = tl_parse_format(fmt_s, &fmt);
    if (rc) return rc;
    tl_table *t = tl_table_new("op,dtypes,verbs,figures,inputs,arch,compiled,executed,run,this_build");
    if (!t) return tl_error(TL_EFAIL, "ops", "out of memory");
    for (int i = 0; tl_ops[i]; i++) {
        const tl_op *op = tl_ops[i];
        char verbs[64], figs[256] = "", ins[256] = "";
        verbs_of(op, verbs, sizeof verbs);
        for (const tl_op_figure *f = op->figures; f && f->name; f++)
            snprintf(figs + strlen(figs), sizeof figs - strlen(figs), "%s%s", figs[0] ? " " : "", f->name);
        for (const tl_op_input *in = op->inputs; in && in->name; in++)
            snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "%s%s", ins[0] ? " " : "", in->name);
        for (const tl_op_target *x = op->targets; x && x->arch; x++) {
            tl_table_row(t);
            tl_table_str(t, op->name);
            tl_table_str(t, op->dtypes);
            tl_table_str(t, verbs);
            tl_table_str(t, figs);
            tl_table_str(t, ins);
            tl_table_str(t, x->arch);
            tl_table_str(t, x->compiled);
            if (x->executed) tl_table_str(t, x->executed);
            else tl_table_none(t);
            tl_table_str(t, x->run);
            tl_table_str(t, op->gpu_built() ? "gpu kernels" : "cpu only");
        }
    }
    tl_table_print(t, fmt, "the op table", stdout);
    tl_table_free(t);
    return 0;
}
