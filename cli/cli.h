/* The tilelab command: every subcommand is a function with main()'s signature that returns an
 * exit status (0, TL_EFAIL = 1, TL_EUSAGE = 2) after recording an error with tl_error().
 * argv[0] is the subcommand's own name (e.g. "convert" for `tilelab numerics convert`).
 *
 * Files: main.c (top-level table, help, bench and draw dispatch), opts.c (the option reader),
 * tour.c, and one file per area: numerics_cmd.c, sim_cmd.c, draw_cmd.c, gpu_cmd.c, op_cmd.c. */
#ifndef TL_CLI_H
#define TL_CLI_H

#include "../core/tl.h"

typedef int (*tl_cmd_fn)(int argc, char **argv);

typedef struct {
    const char *name;
    tl_cmd_fn fn;
    const char *summary; /* one line */
    const char *usage;   /* full help text, printed by `tilelab help NAME` and `NAME --help` */
} tl_command;

/* Finds name in a NULL-terminated table and runs it; prints the table's names on an unknown one. */
int tl_dispatch(const tl_command *table, const char *group, int argc, char **argv);
/* True if argv holds -h or --help; then prints usage on stdout. */
int tl_wants_help(int argc, char **argv, const char *usage);

/* ---- options: one table-driven reader of a command's arguments ----
 * A command lists its options in a table ended by {NULL}; tl_opts_parse walks argv[1..argc-1]:
 *   TL_OPT_VALUE  "--name VALUE" or "--name=VALUE": *value = VALUE (left alone when absent, so it
 *                 may hold a default). The word after the name is the value even if it starts with '-'.
 *   TL_OPT_FLAG   "--name": *flag = set. Several flags may share one int (--saturate / --no-saturate):
 *                 they are one choice, and giving two of them is an error like giving one twice.
 *   TL_OPT_LIST   "--name VALUE", repeatable: list[(*count)++] = VALUE, at most cap values.
 * An argument that starts with '-' (other than "-" alone) is an option; any other is positional and
 * goes to pos (at most pos_cap; *npos = how many, npos may be NULL when pos_cap is 0).
 * Usage errors (TL_EUSAGE, one tl_error line whose <what> is cmd, e.g. "sim moe"):
 *   unknown option '--x' (see tilelab CMD --help) | option '--x' needs a value (at the end of argv)
 *   option '--x' has an empty value | option '--x' takes no value (a flag given "=...")
 *   option '--x' given twice (not for lists) | options '--a' and '--b' exclude each other
 *   at most N --x options | unexpected argument 'ARG'
 * Stored values point into argv. Cost: O(argc x options). At most 32 options per table. */
typedef enum { TL_OPT_VALUE, TL_OPT_FLAG, TL_OPT_LIST } tl_opt_kind;

typedef struct {
    const char *name;   /* as typed, dashes included: "--hw", "-o"; NULL ends the table */
    tl_opt_kind kind;
    const char **value; /* VALUE: where the value goes; LIST: an array of cap entries */
    int *flag;          /* FLAG: set to .set when given; LIST: the number of values stored */
    int set;            /* FLAG: the value stored; LIST: cap, the capacity of the array */
} tl_opt;

/* Shorthands for table rows. */
#define TL_OPT_V(name, ptr) {(name), TL_OPT_VALUE, (ptr), NULL, 0}
#define TL_OPT_F(name, ptr, val) {(name), TL_OPT_FLAG, NULL, (ptr), (val)}
#define TL_OPT_L(name, arr, cap, countp) {(name), TL_OPT_LIST, (arr), (countp), (cap)}
#define TL_OPT_END {NULL, TL_OPT_VALUE, NULL, NULL, 0}

int tl_opts_parse(int argc, char **argv, const tl_opt *opts, const char *cmd, const char **pos, int pos_cap,
                  int *npos);

/* Routed rows (tokens x k) one simulated worklist may hold, and all of one command's worklists
 * together (`sim moe`, `draw moe-tiles`, `draw timeline`): about 1 s per 2^24 rows on one core
 * (zipf routing: 4 s at a mild S, up to ~18 s at a steep one such as zipf:100, measured in the
 * release build), ~12 bytes of memory each. */
#define TL_CLI_MAX_EDGES (1L << 24)
#define TL_CLI_MAX_EDGES_TOTAL (1L << 25)
/* Adds the worklist of `tokens` tokens x k routed rows, simulated `passes` times (stages), to
 * *total. TL_EUSAGE (recorded, naming --tokens) when one worklist exceeds TL_CLI_MAX_EDGES or
 * *total exceeds TL_CLI_MAX_EDGES_TOTAL (opts.c). */
int tl_cli_add_routed_rows(long tokens, int k, int passes, long long *total);

/* top-level commands */
int tl_cmd_tour(int argc, char **argv);
int tl_cmd_numerics(int argc, char **argv);  /* convert | table | quantize */
int tl_cmd_hw(int argc, char **argv);        /* list | show NAME */
int tl_cmd_models(int argc, char **argv);
int tl_cmd_sim(int argc, char **argv);       /* moe | paged-decode */
int tl_cmd_mfma(int argc, char **argv);      /* list | layout */
int tl_cmd_check(int argc, char **argv);     /* walks the op table */
int tl_cmd_bench(int argc, char **argv);     /* dispatches to the tl_bench_* below */
int tl_cmd_draw(int argc, char **argv);      /* dispatches to the tl_draw_* below */

/* benchmarks: `tilelab bench NAME ...` */
int tl_bench_numerics(int argc, char **argv);
int tl_bench_sim(int argc, char **argv);
int tl_bench_roofline(int argc, char **argv);
int tl_bench_op(int argc, char **argv); /* ops of the op table, e.g. `bench moe` (argv[0] = op) */

/* Whether GPU code (`built`: present in this build) can run here (cli/gpu_cmd.c). 0 with *why
 * NULL: it can. 0 with *why saying why not: a build without the GPU layer, or a GPU build on a
 * machine whose driver reports no GPU (check then falls back to the CPU comparisons and the benches
 * stop with exit 1, as in a build without a GPU). TL_EFAIL (recorded) when the driver fails
 * otherwise: a GPU it cannot use is an error, never a skip. Cost: one driver query. */
int tl_cli_gpu_missing(int built, const char **why);

/* pictures: `tilelab draw NAME ...` */
int tl_draw_moe_tiles(int argc, char **argv);
int tl_draw_padding(int argc, char **argv);
int tl_draw_timeline(int argc, char **argv);
int tl_draw_roofline(int argc, char **argv);
int tl_draw_mfma(int argc, char **argv);

#endif
