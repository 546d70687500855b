/* The MFMA operand-layout figure: A, B and C as grids coloured by lane, laid out as a GEMM
 * (B above C, A left of C) so that A's K columns and B's K rows show the K-depth. See figures.h. */
#include "figures.h"
#include "gfx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../simulator/mfma.h"

#define GAP 26.0

typedef struct {
    char letter;
    int rows, cols; /* blocks stacked along rows */
    double x, y;    /* top-left corner */
} operand;

/* Draws one operand grid; returns TL_EUSAGE if the layout table refuses an element. */
static int draw_operand(tl_gfx *g, const tl_mfma_instr *in, const operand *op, double s)
{
    int show_numbers = s >= 10.5;
    tl_text_style num = tl_gfx_style(s >= 13 ? 6.5 : 5.6);
    num.ha = TL_CENTER;
    num.va = TL_MIDDLE;
    for (int i = 0; i < op->rows; i++)
        for (int j = 0; j < op->cols; j++) {
            int lane, vgpr, block;
            int rc = tl_mfma_locate(in, op->letter, i, j, &block, &lane, &vgpr, NULL, NULL);
            if (rc) return rc;
            tl_rgba c = tl_gfx_ramp(lane / 63.0);
            double x = op->x + j * s, y = op->y + i * s;
            tl_gfx_rect(g, x, y, s, s, c, s >= 4 ? 0.25 : 0, tl_gfx_rgb(1, 1, 1));
            if (show_numbers) {
                char buf[16];
                snprintf(buf, sizeof buf, "%d", lane);
                num.color = tl_gfx_contrast(c);
                tl_gfx_text(g, x + s / 2, y + s / 2, buf, num);
            }
        }
    /* Block boundaries of multi-block instructions. */
    int blocks = tl_mfma_blocks(in, op->letter), per = op->rows / (blocks > 0 ? blocks : 1);
    for (int b = 1; b < blocks; b++)
        tl_gfx_line(g, op->x, op->y + b * per * s, op->x + op->cols * s, op->y + b * per * s, 1.2,
                    tl_gfx_rgb(0, 0, 0), 0);
    tl_gfx_rect(g, op->x, op->y, op->cols * s, op->rows * s, (tl_rgba){0, 0, 0, 0}, 0.9,
                tl_gfx_rgb(0, 0, 0));
    return TL_OK;
}

/* The operand's letter above it and its row count at its left; the full description (size,
 * VGPRs per lane) goes to the text block under the grids (see describe_operand). */
static void label_operand(tl_gfx *g, const operand *op, double s, const char *row_dim, int blocks)
{
    char buf[64];
    tl_text_style st = tl_gfx_style(10);
    st.ha = TL_CENTER;
    st.va = TL_BOTTOM;
    st.bold = 1;
    snprintf(buf, sizeof buf, "%c", op->letter);
    tl_gfx_text(g, op->x + op->cols * s / 2, op->y - 4, buf, st);
    tl_text_style rs = tl_gfx_style(8);
    rs.ha = TL_CENTER;
    rs.va = TL_BOTTOM;
    rs.angle_deg = 90;
    snprintf(buf, sizeof buf, "%s = %d%s", row_dim, op->rows / blocks, blocks > 1 ? " x blocks" : "");
    tl_gfx_text(g, op->x - 3, op->y + op->rows * s / 2, buf, rs);
}

static void describe_operand(tl_gfx *g, const tl_mfma_instr *in, const operand *op,
                             const char *row_dim, const char *col_dim, int blocks, double x,
                             double y)
{
    char buf[200];
    int vg = tl_mfma_vgprs(in, op->letter);
    const char *type = op->letter == 'A' ? in->a_type : op->letter == 'B' ? in->b_type : in->c_type;
    snprintf(buf, sizeof buf, "%c: %d x %d (%s x %s)%s, %s, %d VGPR%s per lane", op->letter,
             op->rows / blocks, op->cols, row_dim, col_dim, blocks > 1 ? " per block" : "", type,
             vg, vg == 1 ? "" : "s");
    tl_gfx_text(g, x, y, buf, tl_gfx_style(9));
}

static void lane_colour_bar(tl_gfx *g, double x, double y, double w)
{
    double cw = w / 64;
    for (int l = 0; l < 64; l++)
        tl_gfx_rect(g, x + l * cw, y, cw + 0.3, 10, tl_gfx_ramp(l / 63.0), 0, tl_gfx_rgb(0, 0, 0));
    tl_gfx_rect(g, x, y, w, 10, (tl_rgba){0, 0, 0, 0}, 0.6, tl_gfx_rgb(0, 0, 0));
    tl_text_style st = tl_gfx_style(8);
    st.ha = TL_CENTER;
    for (int l = 0; l < 64; l += 16) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", l);
        tl_gfx_text(g, x + (l + 0.5) * cw, y + 12, buf, st);
    }
    tl_gfx_text(g, x + 63.5 * cw, y + 12, "63", st);
    st.ha = TL_RIGHT;
    st.va = TL_TOP;
    tl_gfx_text(g, x - 6, y - 1, "lane", st);
}

int tl_fig_mfma(const char *out, const char *arch, const char *instr)
{
    if (strcmp(arch, "gfx942") != 0 && strcmp(arch, "gfx950") != 0)
        return tl_error(TL_EUSAGE, "--arch", "unknown arch '%s': use gfx942 or gfx950", arch);
    const tl_mfma_instr *in = tl_mfma_find(arch, instr);
    if (!in)
        return tl_error(TL_EUSAGE, instr, "no such MFMA instruction on %s (see tilelab mfma list --arch %s)",
                        arch, arch);
    int blocks = tl_mfma_blocks(in, 'A');
    if (blocks < 1) blocks = 1;
    operand A = {'A', blocks * in->m, in->k, 0, 0};
    operand B = {'B', blocks * in->k, in->n, 0, 0};
    operand C = {'C', blocks * in->m, in->n, 0, 0};
    /* Cell size: fit the GEMM layout into about 900 x 640 points, cells 2 to 16 points. */
    double budget_h = blocks > 1 ? 900.0 : 640.0;
    double s = fmin((900.0 - 90 - GAP) / (A.cols + C.cols), (budget_h - 40 - GAP) / (B.rows + A.rows));
    s = fmax(2.0, fmin(16.0, s));
    double left = 60, top = 78;
    double W = fmax(left + (A.cols + C.cols) * s + GAP + 30, 700);
    double H = top + (B.rows + A.rows) * s + GAP + 140 + TL_GFX_FOOTER_PT;
    A.x = left;
    A.y = top + B.rows * s + GAP;
    B.x = left + A.cols * s + GAP;
    B.y = top;
    C.x = B.x;
    C.y = A.y;

    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    char buf[300];
    snprintf(buf, sizeof buf, "%s on %s", in->name, arch);
    tl_text_style ts = tl_gfx_style(13);
    ts.bold = 1;
    tl_gfx_text(g, 14, 10, buf, ts);
    int cyc = tl_mfma_cycles(in, arch);
    snprintf(buf, sizeof buf,
             "D (%d x %d) = A (%d x %d) x B (%d x %d) + C%s; A/B %s x %s, C/D %s; K-depth %d; %d cycles",
             in->m, in->n, in->m, in->k, in->k, in->n, blocks > 1 ? ", per block" : "", in->a_type,
             in->b_type, in->c_type, in->k, cyc);
    if (blocks > 1) {
        size_t l = strlen(buf);
        snprintf(buf + l, sizeof buf - l, "; %d blocks (black lines)", blocks);
    }
    tl_text_style sub = tl_gfx_style(9.5);
    tl_gfx_text(g, 14, 30, buf, sub);

    int rc = draw_operand(g, in, &A, s);
    if (rc == TL_OK) rc = draw_operand(g, in, &B, s);
    if (rc == TL_OK) rc = draw_operand(g, in, &C, s);
    if (rc) {
        tl_gfx_abort(g);
        return rc;
    }
    label_operand(g, &B, s, "K", blocks);
    label_operand(g, &A, s, "M", blocks);
    label_operand(g, &C, s, "M", blocks);
    /* The K-depth: a bracket under A spanning its K columns. */
    double ky = A.y + A.rows * s + 6;
    tl_rgba ink = tl_gfx_rgb(0.15, 0.15, 0.15);
    tl_gfx_line(g, A.x, ky, A.x + A.cols * s, ky, 1, ink, 0);
    tl_gfx_line(g, A.x, ky - 3, A.x, ky + 3, 1, ink, 0);
    tl_gfx_line(g, A.x + A.cols * s, ky - 3, A.x + A.cols * s, ky + 3, 1, ink, 0);
    tl_text_style ks = tl_gfx_style(9);
    ks.ha = TL_CENTER;
    /* N: the width of B and C, under C (A's bracket holds K; the K label drops its explanation
     * when A is too narrow for it to stay clear of the N label). */
    char nbuf[32];
    snprintf(nbuf, sizeof nbuf, "N = %d", in->n);
    double nw, nh, kw, kh;
    tl_gfx_text_size(g, nbuf, 9, 0, &nw, &nh);
    double nx = C.x + C.cols * s / 2;
    snprintf(buf, sizeof buf, "K = %d (one instruction's reduction depth)", in->k);
    tl_gfx_text_size(g, buf, 9, 0, &kw, &kh);
    double kx = fmax(A.x + A.cols * s / 2, 8 + kw / 2);
    if (kx + kw / 2 + 6 > nx - nw / 2) {
        snprintf(buf, sizeof buf, "K = %d", in->k);
        tl_gfx_text_size(g, buf, 9, 0, &kw, &kh);
        kx = fmax(A.x + A.cols * s / 2, 8 + kw / 2);
    }
    tl_gfx_text(g, kx, ky + 4, buf, ks);
    tl_gfx_text(g, nx, ky + 4, nbuf, ks);

    double dy = ky + 22;
    describe_operand(g, in, &A, "M", "K", blocks, 60, dy);
    describe_operand(g, in, &B, "K", "N", blocks, 60, dy + 13);
    describe_operand(g, in, &C, "M", "N", blocks, 60, dy + 26);
    double bar_y = H - TL_GFX_FOOTER_PT - 40;
    lane_colour_bar(g, 60, bar_y, fmin(W - 120, 420));
    tl_text_style ns = tl_gfx_style(8.5);
    ns.color = tl_gfx_rgb(0.25, 0.25, 0.25);
    snprintf(buf, sizeof buf, "cell colour (and number, when it fits) = the lane holding the element; 64 lanes per wave");
    tl_gfx_text(g, 60, bar_y - 16, buf, ns);

    snprintf(buf, sizeof buf,
             "layout table for %s (tilelab mfma layout; AMD %s ISA guide rules), not measured", arch,
             strcmp(arch, "gfx950") == 0 ? "CDNA4" : "CDNA3");
    tl_gfx_footer(g, buf);
    return tl_gfx_close(g);
}
