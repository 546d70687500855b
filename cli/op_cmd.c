/* PLACEHOLDER: replaced by the owner of this area. */
#include "cli.h"
int tl_cmd_check(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_cmd_check", "not built yet"); }
int tl_bench_op(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_bench_op", "not built yet"); }
