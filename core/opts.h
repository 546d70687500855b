/* core/opts.h: the table-driven reader of a command's options, which every command and every op
 * row (ops/) shares. */
#ifndef TL_OPTS_H
#define TL_OPTS_H

#include "tl.h"

/* A command lists its options in a table ended by {NULL}; tl_opts_parse walks argv[1..argc-1]:
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

/* True if argv holds -h or --help; then prints usage on stdout. */
int tl_wants_help(int argc, char **argv, const char *usage);

#endif
