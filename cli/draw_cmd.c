/* PLACEHOLDER: replaced by the owner of this area. */
#include "cli.h"
int tl_draw_moe_tiles(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_draw_moe_tiles", "not built yet"); }
int tl_draw_padding(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_draw_padding", "not built yet"); }
int tl_draw_timeline(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_draw_timeline", "not built yet"); }
int tl_draw_roofline(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_draw_roofline", "not built yet"); }
int tl_draw_mfma(int argc, char **argv) { (void)argc; (void)argv; return tl_error(TL_EFAIL, "tl_draw_mfma", "not built yet"); }
