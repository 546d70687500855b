/* core/op.h: one row of the op table (DESIGN.md "The op table").
 *
 * Every op of the workbench (fused MoE first; indexer, top-k, decode, prefill, quantize later) is
 * one tl_op in cli/ops.c. `tilelab check OP` and `tilelab bench OP` walk the row; they never know
 * what the op computes. An op keeps everything about one problem in an opaque `void *problem` that
 * its own parse() allocates and free_problem() releases; inputs, reference and GPU outputs of the
 * current case live inside it (the harness never frees them).
 *
 * The harness's contract (cli/op_cmd.c):
 *   check  parse -> describe -> for every case: make_inputs; reference; if gpu != NULL: gpu, which
 *          poisons its outputs (NaN) first, compares its structural outputs exactly (e.g. the MoE
 *          worklist) and returns its float output; the harness compares that with the reference
 *          under tolerance() (numerics/metrics.h: NaN never passes) and prints one row per case.
 *          Without a GPU (gpu == NULL) the reference is compared with naive() on small_problem()
 *          and, where naive_cheap() says so, on the requested case too; the report says that the
 *          GPU part was skipped. Exit 1 if any comparison fails.
 *   bench  parse -> for every case: make_inputs; bench() appends rows (measured time with
 *          kernels/bench.h's method, bytes, FLOPs, the model's prediction and its error).
 * A row's functions return 0 or a tl status after tl_error(), as everywhere.
 */
#ifndef TL_OP_H
#define TL_OP_H

#include <stdio.h>

#include "../numerics/metrics.h"
#include "table.h"
#include "tl.h"

typedef enum { TL_OP_CHECK, TL_OP_BENCH } tl_op_mode;

/* One output of a case, owned by the problem (valid until the next make_inputs or free). */
typedef struct {
    const float *data;
    size_t n;
    size_t row_len; /* > 0: data is rows of row_len (the check also bounds the worst row) */
    char note[256]; /* what else was checked, for the report ("worklist identical, 8 tiles") */
} tl_op_output;

typedef struct tl_op {
    const char *name;        /* "moe" */
    const char *summary;     /* one line */
    const char *check_usage; /* full help of `tilelab check NAME` */
    const char *bench_usage; /* full help of `tilelab bench NAME` */

    /* argv[0] is the op's name. Allocates *problem; TL_EUSAGE with a message on bad input. */
    int (*parse)(int argc, char **argv, tl_op_mode mode, void **problem);
    void (*free_problem)(void *problem);
    /* A paragraph for people: shape, formats, routing, the seed (always printed). */
    void (*describe)(const void *problem, FILE *f);
    /* Cases of one problem (e.g. the token counts of --tokens). */
    int (*n_cases)(const void *problem);
    /* Makes case c's inputs (seeded, random, never zeros); label gets a short name ("M=16"). */
    int (*make_inputs)(void *problem, int c, char *label, size_t label_len);
    /* The CPU reference on the current inputs. */
    int (*reference)(void *problem, tl_op_output *out);
    /* An independent loop on the current inputs; NULL when the op has none. */
    int (*naive)(void *problem, tl_op_output *out);
    /* 1 when naive() on case c of this problem fits in a few seconds. */
    int (*naive_cheap)(const void *problem, int c);
    /* A cut-down copy of the problem (same formats and options) for the no-GPU check. */
    int (*small_problem)(const void *problem, void **small);
    /* The GPU launcher on the current inputs; NULL when built without a GPU. Exact structural
     * checks that fail return TL_EFAIL with the message naming what differs. */
    int (*gpu)(void *problem, tl_op_output *out);
    /* The tolerance of the output against the reference (derived from formats and K), asked once
     * per case after make_inputs: it may depend on the case's size. */
    int (*tolerance)(const void *problem, tl_tolerance *t);
    /* Appends case c's timing rows to t (created with bench_header); NULL without a GPU. */
    int (*bench)(void *problem, int c, tl_table *t);
    const char *bench_header; /* the CSV header of bench rows */
} tl_op;

/* The table (cli/ops.c), NULL-terminated. */
extern const tl_op *const tl_ops[];
/* The row named `name`, or NULL. */
const tl_op *tl_op_find(const char *name);

#endif
