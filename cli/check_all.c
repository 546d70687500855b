/* `tilelab check all`: every op's checks in one command, the way ggml's test-backend-ops checks
 * every op of a backend against the CPU. It walks the op table (core/op.h) and runs `check OP` on
 * each problem of a row's check_all_args (with --quick, on its test_args) through tl_check_op,
 * the function `check OP` itself runs, with check all's --device passed on as that command takes
 * it and one seed for all; it knows no op and no device name. One summary row per problem.
 *
 * Cost: the sum of the problems' checks. Without a GPU about a minute on two cores (each row's
 * check_all_args say what they cost), a few seconds with --quick. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/op.h"
#include "../core/table.h"
#include "../ops/ops.h"
#include "cli.h"

#define CHECK_ALL_MAX_ARGS 64

static const char check_all_usage[] =
    "usage: tilelab check all [--quick] [--device D] [--seed S] [--format table|csv|json]\n"
    "Every op's checks in one command (tilelab ops lists the ops): `tilelab check OP ...` on each of\n"
    "a few problems per op, real shapes (the models' own where the op has them) in every dtype or\n"
    "scheme the op has, and one summary row each: the op, the command that reruns it, the device, the\n"
    "verdict, its cases passed, failed and not run (and why), and its first failed comparison.\n"
    "Without a GPU each check compares the CPU reference with a naive loop on a small problem and on\n"
    "the cases the loop can take (about a minute in all on two cores); the others are not run, named.\n"
    "  --quick     each op's small test problem instead (seconds in all)\n"
    "  --device D  given to every op's check as `tilelab check OP --device D` takes it\n"
    "  --seed S    every problem's seed (default: a fresh one, printed in each row's command)\n"
    "  --format table|csv|json   (csv and json: only the summary on stdout)\n"
    "TILELAB_TEST_FAIL_OP=NAME, for tests of the harness only: NAME's check (here and in `check NAME`)\n"
    "corrupts one element of the first output it compares, so that the comparison fails.\n"
    "Exit status: 0 every check passed, 1 a check failed or stopped, 2 bad input.\n";

typedef struct {
    int quick;
    const char *device; /* NULL: not given (each check's default) */
    uint64_t seed;
    tl_format fmt;
} check_all_opts;

/* argv of one problem: the op's name, args without any --seed, then --seed S and, when given,
 * --device D. seed receives S's digits (argv points into it). */
static int problem_argv(const tl_op *op, const char *const *args, const check_all_opts *o, char *seed,
                        size_t seed_cap, char **argv, int *argc)
{
    int n = 0;
    argv[n++] = (char *)op->name;
    for (int i = 0; args && args[i]; i++) {
        if (strcmp(args[i], "--seed") == 0) {
            i += args[i + 1] != NULL;
            continue;
        }
        if (strncmp(args[i], "--seed=", 7) == 0) continue;
        if (n >= CHECK_ALL_MAX_ARGS - 4)
            return tl_error(TL_EFAIL, "check all", "%s: a problem of more than %d arguments", op->name,
                            CHECK_ALL_MAX_ARGS - 5);
        argv[n++] = (char *)args[i];
    }
    snprintf(seed, seed_cap, "%llu", (unsigned long long)o->seed);
    argv[n++] = "--seed";
    argv[n++] = seed;
    if (o->device) {
        argv[n++] = "--device";
        argv[n++] = (char *)o->device;
    }
    argv[n] = NULL;
    *argc = n;
    return 0;
}

/* "check moe --dtype fp8 ... --seed 7": the command a user types to rerun one problem. */
static void command_line(int argc, char **argv, char *buf, size_t n)
{
    snprintf(buf, n, "check");
    for (int i = 0; i < argc; i++) snprintf(buf + strlen(buf), n - strlen(buf), " %s", argv[i]);
}

/* Totals over the problems, for the last line. */
typedef struct {
    int problems, failed_problems, passed, failed, not_run;
    char failed_ops[256];  /* "prefill, topk" */
    const tl_op *last_failed;
    char device_note[256]; /* the first problem's: why there is no GPU check */
} check_all_totals;

static void add_row(tl_table *t, const tl_op *op, const char *cmd, int rc, const tl_check_summary *s,
                    check_all_totals *tot)
{
    const int stopped = rc && s->failed_comparisons == 0; /* an error, not a verdict */
    tl_table_row(t);
    tl_table_str(t, op->name);
    tl_table_str(t, cmd);
    tl_table_str(t, s->device[0] ? s->device : "none (stopped before)");
    tl_table_str(t, rc ? "FAIL" : "pass");
    tl_table_int(t, s->passed + s->failed + s->not_run);
    tl_table_int(t, s->passed);
    tl_table_int(t, s->failed);
    tl_table_int(t, s->not_run);
    if (s->not_run) {
        tl_table_str(t, s->not_run_labels);
        tl_table_str(t, "too big for the naive loop (a GPU build checks them)");
    } else {
        tl_table_none(t);
        tl_table_none(t);
    }
    if (stopped) {
        char why[1100];
        snprintf(why, sizeof why, "stopped: %s", tl_last_error());
        tl_table_str(t, why);
    } else if (s->first_failure[0]) {
        tl_table_str(t, s->first_failure);
    } else {
        tl_table_none(t);
    }
    if (!tot->problems) snprintf(tot->device_note, sizeof tot->device_note, "%s", s->device_note);
    tot->problems++;
    tot->passed += s->passed, tot->failed += s->failed, tot->not_run += s->not_run;
    if (rc) {
        tot->failed_problems++;
        size_t used = strlen(tot->failed_ops);
        if (tot->last_failed != op) /* an op's problems come one after another */
            snprintf(tot->failed_ops + used, sizeof tot->failed_ops - used, "%s%s", used ? ", " : "", op->name);
        tot->last_failed = op;
    }
}

/* One problem: its check, then its summary row. A usage error (bad --device, a row's arguments
 * its parse refuses) stops check all: it is returned; any other outcome is the row's. */
static int check_one(tl_table *t, const tl_op *op, const char *const *args, const check_all_opts *o,
                     check_all_totals *tot)
{
    char *argv[CHECK_ALL_MAX_ARGS + 1], seed[32], cmd[2048];
    int argc = 0, rc = problem_argv(op, args, o, seed, sizeof seed, argv, &argc);
    if (rc) return rc;
    command_line(argc, argv, cmd, sizeof cmd);
    tl_clear_error();
    tl_check_summary s;
    rc = tl_check_op(op, argc, argv, 1, &s);
    if (rc == TL_EUSAGE) return rc;
    add_row(t, op, cmd, rc, &s, tot);
    tl_clear_error();
    return 0;
}

static int parse_opts(int argc, char **argv, check_all_opts *o)
{
    const char *fmt = NULL, *seed = NULL;
    memset(o, 0, sizeof *o);
    tl_opt opts[] = {TL_OPT_F("--quick", &o->quick, 1), TL_OPT_V("--device", &o->device), TL_OPT_V("--seed", &seed),
                     TL_OPT_V("--format", &fmt), TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "check all", NULL, 0, NULL);
    if (!rc && fmt) rc = tl_parse_format(fmt, &o->fmt);
    if (!rc) {
        if (seed) rc = tl_ops_parse_seed(seed, &o->seed);
        else o->seed = tl_fresh_seed();
    }
    return rc;
}

/* The device of the rows, when they share one (the title names it). */
static const char *common_device(const tl_table *t)
{
    const char *d = tl_table_rows(t) ? tl_table_cell(t, 0, 2) : "";
    for (int r = 1; r < tl_table_rows(t); r++)
        if (strcmp(tl_table_cell(t, r, 2), d) != 0) return "several devices (the device column)";
    return d;
}

int tl_cmd_check_all(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, check_all_usage)) return 0;
    check_all_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc;
    tl_table *t = tl_table_new("op,check,device,result,cases,passed,failed,not_run,not_run_cases,why_not_run,"
                               "first_failure");
    if (!t) return tl_error(TL_EFAIL, "check all", "out of memory");
    check_all_totals tot;
    memset(&tot, 0, sizeof tot);
    for (int i = 0; !rc && tl_ops[i]; i++) {
        const tl_op *op = tl_ops[i];
        if (o.quick || !op->check_all_args) {
            rc = check_one(t, op, o.quick ? op->test_args : NULL, &o, &tot);
            continue;
        }
        for (int p = 0; !rc && op->check_all_args[p]; p++) rc = check_one(t, op, op->check_all_args[p], &o, &tot);
    }
    if (rc) {
        tl_table_free(t);
        return rc;
    }
    FILE *info = o.fmt == TL_FMT_TABLE ? stdout : stderr; /* csv and json: only the table on stdout */
    char title[1024];
    snprintf(title, sizeof title, "check all%s: %d problems, seed %llu, on %s%s%s%s", o.quick ? " --quick" : "",
             tot.problems, (unsigned long long)o.seed, common_device(t), tot.device_note[0] ? " (" : "",
             tot.device_note, tot.device_note[0] ? ")" : "");
    tl_table_print(t, o.fmt, title, stdout);
    if (tot.not_run)
        fprintf(info, "not run: %d cases too big for the naive loop on this CPU (a GPU build checks them against "
                      "the kernel)\n", tot.not_run);
    if (tot.failed_problems)
        rc = tl_error(TL_EFAIL, "check all", "%d of %d problems failed (%s); rerun one with the command in its row",
                      tot.failed_problems, tot.problems, tot.failed_ops);
    else
        fprintf(info, "all %d problems passed: %d cases passed, %d not run\n", tot.problems, tot.passed, tot.not_run);
    tl_table_free(t);
    return rc;
}
