/* ops/decode_figs.c: the decode row's figures (placeholder until the picture lands). */
#include "ops.h"

const tl_op_figure tl_decode_figures[] = {{NULL, NULL, NULL}};
