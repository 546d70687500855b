/* PLACEHOLDER: replaced by the owner of this area. */
#include "cli.h"
int tl_cmd_hw(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_cmd_hw", "not built yet"); }
int tl_cmd_models(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_cmd_models", "not built yet"); }
int tl_cmd_sim(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_cmd_sim", "not built yet"); }
int tl_bench_sim(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_bench_sim", "not built yet"); }
