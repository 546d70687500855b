/* The tilelab command: every subcommand is a function with main()'s signature that returns an
 * exit status (0, TL_EFAIL = 1, TL_EUSAGE = 2) after recording an error with tl_error().
 * argv[0] is the subcommand's own name (e.g. "convert" for `tilelab numerics convert`).
 *
 * Files: main.c (top-level table, help, bench and draw dispatch), tour.c, and one file per area: numerics_cmd.c, attention_cmd.c, sim_cmd.c, draw_cmd.c, gpu_cmd.c, op_cmd.c. */
#ifndef TL_CLI_H
#define TL_CLI_H

#include "../core/opts.h"
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
/* The same, where the group's subcommands are also the ops of the op table (core/op.h): an op's
 * name runs op_fn (argv[0] = the op), and help and errors list the ops beside the table. */
int tl_dispatch_ops(const tl_command *table, const char *group, tl_cmd_fn op_fn, int argc, char **argv);



/* top-level commands */
int tl_cmd_tour(int argc, char **argv);
int tl_cmd_numerics(int argc, char **argv);  /* convert | table | quantize | attention-error */
int tl_cmd_attention_error(int argc, char **argv); /* cli/attention_cmd.c */
extern const char TL_ATTENTION_ERROR_USAGE[];
int tl_cmd_hw(int argc, char **argv);        /* list | show NAME */
int tl_cmd_models(int argc, char **argv);
int tl_cmd_sim(int argc, char **argv);       /* moe | paged-decode */
int tl_cmd_mfma(int argc, char **argv);      /* list | layout */
int tl_cmd_check(int argc, char **argv);     /* walks the op table */
int tl_cmd_run(int argc, char **argv);       /* an op on the user's .npy files */
int tl_cmd_ops(int argc, char **argv);       /* lists the op table */
int tl_cmd_bench(int argc, char **argv);     /* dispatches to the tl_bench_* below */
int tl_cmd_draw(int argc, char **argv);      /* dispatches to the tl_draw_* below */

/* benchmarks: `tilelab bench NAME ...` */
int tl_bench_numerics(int argc, char **argv);
int tl_bench_sim(int argc, char **argv);
int tl_bench_roofline(int argc, char **argv);
int tl_bench_op(int argc, char **argv); /* ops of the op table, e.g. `bench moe` (argv[0] = op) */
int tl_sim_op(int argc, char **argv);   /* ops of the op table, e.g. `sim moe` (argv[0] = op) */

/* Whether GPU code (`built`: present in this build) can run here (cli/gpu_cmd.c). 0 with *why
 * NULL: it can. 0 with *why saying why not: a build without the GPU layer, or a GPU build on a
 * machine whose driver reports no GPU (check then falls back to the CPU comparisons and the benches
 * stop with exit 1, as in a build without a GPU). TL_EFAIL (recorded) when the driver fails
 * otherwise: a GPU it cannot use is an error, never a skip. Cost: one driver query. */
int tl_cli_gpu_missing(int built, const char **why);

/* pictures: `tilelab draw NAME ...` */
int tl_draw_roofline(int argc, char **argv);
int tl_draw_mfma(int argc, char **argv);
/* a whole model step (cli/step_cmd.c) */
int tl_sim_step(int argc, char **argv);
int tl_draw_step(int argc, char **argv);

#endif
