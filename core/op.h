/* core/op.h: one row of the op table (DESIGN.md "The op table and the op contracts").
 *
 * Every op of the workbench is one tl_op in its own file ops/OP.c, listed once in ops/ops.c.
 * `tilelab check|bench|sim|run|draw OP` and `tilelab ops` walk the row (cli/op_cmd.c), and so does
 * tests/test_ops.c; none of them knows what the op computes. An op keeps everything about one
 * problem in an opaque `void *problem` that its parse() allocates and free_problem() releases; the
 * inputs, reference and kernel outputs of the current case live inside it.
 *
 * The harness's contract (cli/op_cmd.c):
 *   check  parse -> describe -> [load_inputs, when the user gave --input files] -> for every case:
 *          make_inputs; reference; with a GPU: gpu (poisons its outputs first, compares its
 *          structural outputs exactly, e.g. the MoE worklist, and returns its outputs); each output
 *          is compared with the reference's: exactly (integer outputs, or exact = 1) or under
 *          tolerance() (numerics/metrics.h: NaN never passes). Without a GPU: the reference against
 *          naive() on small_problem() and, where naive_cheap() says so, on the requested cases; the
 *          report names every requested case that was not checked. Exit 1 if any comparison fails.
 *   run    parse -> load_inputs (the user's .npy files) -> make_inputs(0) -> reference (--device cpu)
 *          or gpu (--device gpu) -> the outputs to .npy files.
 *   bench  parse -> for every case: make_inputs; bench() appends rows (measured time with
 *          kernels/bench.h's method, bytes, FLOPs, the model's prediction and its error).
 *   sim    parse -> for every case: sim() appends the model's rows; no inputs are made.
 *   draw   the row's figures: each a subcommand of `tilelab draw`.
 * A row's functions return 0 or a tl status after tl_error(), as everywhere. A row has no #ifdef:
 * its GPU side is the table its kernels export (NULL in a build without a GPU; kernels/absent.c).
 */
#ifndef TL_OP_H
#define TL_OP_H

#include <stdio.h>

#include "../numerics/metrics.h"
#include "npy.h"
#include "table.h"
#include "tl.h"

typedef enum { TL_OP_CHECK, TL_OP_BENCH, TL_OP_SIM, TL_OP_RUN } tl_op_mode;

/* One output of a case, owned by the problem (valid until the next make_inputs or free). Its
 * elements are `type` (the .npy types: float32, bfloat16 bits, int32, uint8 codes). */
typedef struct {
    const char *name;         /* "out", "topk_ids": the .npy file's role */
    tl_npy_type type;
    const void *data;
    int ndim;
    size_t shape[4];          /* its shape as written to .npy; n = prod(shape) */
    size_t n;
    size_t row_len;           /* > 0: rows of row_len (a float check also bounds the worst row) */
    int exact;                /* compare bit for bit (always for integer types) */
    char note[256];           /* what else was checked, for the report ("worklist identical, 8 tiles") */
} tl_op_output;

#define TL_OP_MAX_OUTPUTS 4
typedef struct {
    int n;
    tl_op_output o[TL_OP_MAX_OUTPUTS];
} tl_op_outputs;

/* One named input a user may give as a .npy file (`--input NAME=FILE`). */
typedef struct {
    const char *name;  /* "x" */
    const char *what;  /* "activations [tokens][hidden], float32, float16 or bfloat16" */
    int required;      /* 1: `run` and `check --input` need it */
} tl_op_input;

typedef struct {
    const char *name;
    const char *path;
} tl_op_file;

/* The work of one part of a case as the op counts it (bench's rates and read floor use it): the
 * useful FLOPs and the fewest bytes the part must move through device memory (each input read
 * once, each output written once), and the model's prediction of the same part. */
typedef struct {
    char part[32];     /* "stage 1" */
    double flops;      /* useful FLOPs */
    double hbm_bytes;  /* the part's bytes as the op counts them */
    double model_flops, model_hbm_bytes; /* the same as the model counts them */
    double model_us;   /* the model's time */
    char limiter[16];  /* the model's limiter */
} tl_op_work;

/* One figure of an op: `tilelab draw NAME ...` (argv[0] = NAME). */
typedef struct {
    const char *name;
    const char *summary;
    int (*draw)(int argc, char **argv);
} tl_op_figure;

/* Where an op's kernel was compiled and run, per target (the record `tilelab ops` prints). */
typedef struct {
    const char *arch;      /* "sm_90", "gfx942", "gfx950" */
    const char *compiled;  /* "nvcc 13.0, every test run" */
    const char *run;       /* "NVIDIA H200, 2026-11-29" or "never" */
    const char *executed;  /* AMD targets: what ran on the CPU executor (`check OP --device emu:ARCH`)
                              and how it went; NULL where the executor does not apply (NVIDIA) */
} tl_op_target;

typedef struct tl_op {
    const char *name;        /* "moe" */
    const char *summary;     /* one line */
    const char *dtypes;      /* "bf16,fp8,a16w4,mxfp4,mxfp8" */
    const tl_op_target *targets; /* ends with {NULL} */
    const char *check_usage, *bench_usage, *sim_usage, *run_usage; /* full help of each verb */
    const tl_op_input *inputs; /* ends with {NULL}: what --input takes */

    /* argv[0] is the op's name; the harness has removed its own options (--input, --output,
     * --device, --format). Allocates *problem; TL_EUSAGE with a message on bad input. */
    int (*parse)(int argc, char **argv, tl_op_mode mode, void **problem);
    void (*free_problem)(void *problem);
    /* The user's tensors, by name (the harness checked the names against `inputs`): they replace
     * the random inputs and fix the problem to one case whose shape they give. TL_EUSAGE naming
     * the file when a shape, type or value (NaN, an out-of-range index) is wrong. */
    int (*load_inputs)(void *problem, const tl_op_file *files, int n);
    /* Checks every case once its shape is final: the harness calls it after parse and, when the
     * user gave files, after load_inputs (whose tensors replace the command line's shape, so an
     * option bounded by the shape, e.g. the indexer's --prefix, is checked against theirs).
     * TL_EUSAGE with a message. NULL: parse checked the cases itself. */
    int (*check_cases)(void *problem);
    /* A paragraph for people: shape, formats, routing, the seed (always printed). */
    void (*describe)(const void *problem, FILE *f);
    /* Cases of one problem (e.g. the token counts of --tokens). */
    int (*n_cases)(const void *problem);
    /* Case c's short name ("M=16"), without making anything. */
    void (*case_label)(const void *problem, int c, char *label, size_t n);
    /* Makes case c's inputs (seeded, random, never zeros; or the loaded files). */
    int (*make_inputs)(void *problem, int c);
    /* The CPU reference on the current inputs. */
    int (*reference)(void *problem, tl_op_outputs *out);
    /* An independent loop on the current inputs. */
    int (*naive)(void *problem, tl_op_outputs *out);
    /* 1 when naive() on case c of this problem fits in a few seconds. */
    int (*naive_cheap)(const void *problem, int c);
    /* A cut-down copy of the problem (same formats and options) for the no-GPU check. */
    int (*small_problem)(const void *problem, void **small);
    /* 1 when this build can run the kernel (its exported table is not NULL). */
    int (*gpu_built)(void);
    /* The kernel on the current inputs. Exact structural checks that fail return TL_EFAIL with the
     * message naming what differs. */
    int (*gpu)(void *problem, tl_op_outputs *out);
    /* The tolerance of float output o against the reference (derived from formats and K), asked
     * per case after make_inputs: it may depend on the case's size. */
    int (*tolerance)(const void *problem, int o, tl_tolerance *t);
    /* Parts of a case (MoE: its two stages) and each one's work and prediction (no inputs made). */
    int (*n_parts)(const void *problem);
    int (*work)(void *problem, int c, int part, tl_op_work *w);
    /* sim: appends case c's rows (sim_header's columns). */
    int (*sim)(void *problem, int c, tl_table *t);
    const char *sim_header;
    /* bench: appends case c's timing rows (bench_header's columns). */
    int (*bench)(void *problem, int c, tl_table *t);
    const char *bench_header;
    const tl_op_figure *figures; /* ends with {NULL} */
    /* For tests/test_ops.c: arguments of a small problem (argv without the op's name, ending with
     * NULL) and argument lists that parse() must refuse with TL_EUSAGE (each ends with NULL; the
     * list of lists ends with NULL). */
    const char *const *test_args;
    const char *const *const *bad_args;
    /* Arguments of the real shapes whose modelled work the test compares with the counted work
     * (no inputs are made), ending with NULL. */
    const char *const *bench_args;
} tl_op;

/* The table (ops/ops.c), NULL-terminated. */
extern const tl_op *const tl_ops[];
/* The row named `name`, or NULL. */
const tl_op *tl_op_find(const char *name);

#endif
