/* PLACEHOLDER: replaced by the owner of this area. */
#include "cli.h"
int tl_bench_roofline(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_bench_roofline", "not built yet"); }
int tl_cmd_mfma(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_cmd_mfma", "not built yet"); }
