/* `tilelab mfma list|layout`: where each element of an AMD matrix instruction's operands lives
 * (simulator/mfma.h's tables; no GPU involved). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "../core/table.h"
#include "../simulator/mfma.h"

/* =============================================================================================
 * mfma list | layout
 * =========================================================================================== */
static const char MFMA_LIST_USAGE[] =
    "usage: tilelab mfma list --arch gfx942|gfx950 [--format table|csv|json]\n"
    "Every dense matrix (MFMA) instruction of the architecture: its shape MxNxK, blocks, operand\n"
    "formats, and how many registers (VGPRs per lane) each operand takes.\n";

static const char MFMA_LAYOUT_USAGE[] =
    "usage: tilelab mfma layout --arch gfx942|gfx950 --instr NAME --matrix A|B|C|D\n"
    "                           [--format csv|table|json]\n"
    "One row per element of the operand: block,i,j,lane,vgpr,bit_lo,bit_hi. For A, i is the row (M)\n"
    "and j the column (K); for B, i is K and j is N; for C and D, i is M and j is N. vgpr counts from\n"
    "the operand's first register; bit_lo..bit_hi are the bits of that register (0..31 for a full\n"
    "register, 0..15 / 16..31 for packed 16-bit halves, 8-bit slices for FP8/INT8, 4-bit for FP4,\n"
    "6-bit fields for FP6, which may run on into the next register: bit_hi > 31; 0..63 across two\n"
    "registers for FP64). The default format is csv.\n";

static int parse_arch(const char *s, const char *what)
{
    if (!s) return tl_error(TL_EUSAGE, what, "--arch gfx942|gfx950 is required");
    if (strcmp(s, "gfx942") != 0 && strcmp(s, "gfx950") != 0)
        return tl_error(TL_EUSAGE, what, "unknown arch '%s' (one of gfx942, gfx950)", s);
    return 0;
}

static int cmd_mfma_list(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, MFMA_LIST_USAGE)) return 0;
    const char *arch = NULL, *fmt_s = NULL;
    tl_format fmt = TL_FMT_TABLE;
    tl_opt opts[] = {TL_OPT_V("--arch", &arch), TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    int st = tl_opts_parse(argc, argv, opts, "mfma list", NULL, 0, NULL);
    if (st || (fmt_s && (st = tl_parse_format(fmt_s, &fmt))) || (st = parse_arch(arch, "mfma list"))) return st;
    const tl_mfma_instr *list[TL_MFMA_MAX];
    int n = tl_mfma_list(arch, list, TL_MFMA_MAX);
    tl_table *t = tl_table_new("name,m,n,k,blocks,a,b,c,a_vgprs,b_vgprs,c_vgprs,cycles");
    for (int i = 0; i < n; i++) {
        const tl_mfma_instr *in = list[i];
        tl_table_row(t);
        tl_table_str(t, in->name);
        tl_table_int(t, in->m);
        tl_table_int(t, in->n);
        tl_table_int(t, in->k);
        tl_table_int(t, in->blocks);
        tl_table_str(t, in->a_type);
        tl_table_str(t, in->b_type);
        tl_table_str(t, in->c_type);
        tl_table_int(t, tl_mfma_vgprs(in, 'A'));
        tl_table_int(t, tl_mfma_vgprs(in, 'B'));
        tl_table_int(t, tl_mfma_vgprs(in, 'C'));
        tl_table_int(t, tl_mfma_cycles(in, arch));
    }
    char title[96];
    snprintf(title, sizeof title, "dense MFMA instructions of %s (wave of 64 lanes)", arch);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    return 0;
}

static int cmd_mfma_layout(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, MFMA_LAYOUT_USAGE)) return 0;
    const char *arch = NULL, *name = NULL, *matrix = NULL, *fmt_s = NULL;
    tl_format fmt = TL_FMT_CSV;
    tl_opt opts[] = {TL_OPT_V("--arch", &arch), TL_OPT_V("--instr", &name), TL_OPT_V("--matrix", &matrix),
                     TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    int st = tl_opts_parse(argc, argv, opts, "mfma layout", NULL, 0, NULL);
    if (st || (fmt_s && (st = tl_parse_format(fmt_s, &fmt))) || (st = parse_arch(arch, "mfma layout"))) return st;
    if (!name) return tl_error(TL_EUSAGE, "mfma layout", "--instr NAME is required (see tilelab mfma list --arch %s)", arch);
    if (!matrix || strlen(matrix) != 1 || !strchr("ABCDabcd", matrix[0]))
        return tl_error(TL_EUSAGE, "mfma layout", "--matrix A|B|C|D is required");
    const tl_mfma_instr *in = tl_mfma_find(arch, name);
    if (!in)
        return tl_error(TL_EUSAGE, "mfma layout", "unknown instruction '%s' for %s (see tilelab mfma list --arch %s)",
                        name, arch, arch);
    char m = (char)(matrix[0] & ~0x20);
    int rows, cols;
    tl_mfma_dims(in, m, &rows, &cols);
    tl_table *t = tl_table_new("block,i,j,lane,vgpr,bit_lo,bit_hi");
    for (int b = 0; b < tl_mfma_blocks(in, m); b++)
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) {
                tl_mfma_slot s;
                if ((st = tl_mfma_locate_slot(in, m, b, i, j, &s))) {
                    tl_table_free(t);
                    return st;
                }
                tl_table_row(t);
                tl_table_int(t, b);
                tl_table_int(t, i);
                tl_table_int(t, j);
                tl_table_int(t, s.lane);
                tl_table_int(t, s.vgpr);
                tl_table_int(t, s.bit_lo);
                tl_table_int(t, s.bit_hi);
            }
    char title[160];
    snprintf(title, sizeof title, "%s on %s, matrix %c", in->name, arch, m);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    return 0;
}

static const tl_command mfma_table[] = {
    {"list", cmd_mfma_list, "dense MFMA instructions of an architecture", MFMA_LIST_USAGE},
    {"layout", cmd_mfma_layout, "which lane, register and bits hold each operand element", MFMA_LAYOUT_USAGE},
    {NULL, NULL, NULL, NULL},
};

int tl_cmd_mfma(int argc, char **argv) { return tl_dispatch(mfma_table, "mfma", argc, argv); }
