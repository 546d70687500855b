/* PLACEHOLDER: replaced by the owner of this area. */
#include "cli.h"
int tl_cmd_tour(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_cmd_tour", "not built yet"); }
