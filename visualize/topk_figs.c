/* visualize/topk_figs.c: the top-k split picture (seed 000's Figure 8), drawn from the schedules
 * it is given (simulator/topk.h's tl_topk_schedule). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "gfx.h"

static tl_rgba phase_colour(tl_topk_phase ph, int pass)
{
    switch (ph) {
    case TL_TOPK_PHASE_LOAD: return tl_gfx_rgb(0.75, 0.75, 0.75);
    case TL_TOPK_PHASE_HIST: return pass % 2 ? tl_gfx_palette(2) : tl_gfx_palette(5); /* blues, alternating */
    case TL_TOPK_PHASE_SELECT: return tl_gfx_rgb(0.45, 0.45, 0.45);
    case TL_TOPK_PHASE_COUNT: return tl_gfx_palette(3);
    case TL_TOPK_PHASE_GATHER: return tl_gfx_palette(4);
    default: return tl_gfx_palette(1);
    }
}

static double panel_end(const tl_topk_panel *p)
{
    double end = 0;
    for (int i = 0; i < p->n; i++) end = fmax(end, p->seg[i].end_us);
    return end;
}

static void draw_panel(tl_gfx *g, const tl_topk_panel *p, double x, double y, double w, double h, double xmax)
{
    tl_plot pl;
    const int rows = p->split < TL_TOPK_MAX_DRAWN_BLOCKS ? p->split : TL_TOPK_MAX_DRAWN_BLOCKS;
    tl_plot_init(&pl, x, y, w, h, 0, xmax, 0, 0, rows, 0);
    pl.y_ticks_off = 1;
    tl_plot_axes(g, &pl, "time (us)", "blocks of the row");
    tl_text_style ts = tl_gfx_style(10);
    ts.bold = 1;
    char title[200];
    if (rows < p->split)
        snprintf(title, sizeof title, "%s: %d blocks (%d drawn), %.1f us", p->label, p->split, rows, panel_end(p));
    else
        snprintf(title, sizeof title, "%s: %d block%s, %.1f us", p->label, p->split, p->split == 1 ? "" : "s",
                 panel_end(p));
    tl_gfx_text(g, x, y - 16, title, ts);
    tl_text_style ls = tl_gfx_style(8);
    ls.ha = TL_RIGHT;
    ls.va = TL_MIDDLE;
    char lab[32];
    snprintf(lab, sizeof lab, "%d", rows - 1);
    if (rows > 1) tl_gfx_text(g, x - 4, tl_plot_y(&pl, rows - 0.5), lab, ls);
    tl_gfx_text(g, x - 4, tl_plot_y(&pl, 0.5), "0", ls);
    tl_plot_clip(g, &pl);
    const double row_h = h / rows, gap = row_h > 4 ? 0.15 * row_h : 0;
    for (int i = 0; i < p->n; i++) {
        const tl_topk_segment *s = &p->seg[i];
        double x0 = tl_plot_x(&pl, s->start_us), x1 = tl_plot_x(&pl, s->end_us);
        double y0 = tl_plot_y(&pl, s->block + 1) + gap / 2;
        tl_gfx_rect(g, x0, y0, fmax(x1 - x0, 0.6), row_h - gap, phase_colour(s->phase, s->pass), 0, tl_gfx_rgb(0, 0, 0));
    }
    tl_gfx_unclip(g);
}

int tl_fig_topk_split(const char *out, const tl_topk_panel *panels, int npanels, const char *about, const char *preset)
{
    if (npanels < 1 || npanels > 4) return tl_error(TL_EUSAGE, "topk-split", "draw 1 to 4 panels");
    double xmax = 0;
    for (int i = 0; i < npanels; i++) {
        if (panels[i].n < 1 || panels[i].split < 1) return tl_error(TL_EUSAGE, "topk-split", "a panel has no schedule");
        xmax = fmax(xmax, panel_end(&panels[i]));
    }
    xmax *= 1.02;
    const double W = 900, panel_h = 170, top = 62, gap = 64;
    const double H = top + npanels * panel_h + (npanels - 1) * gap + 52 + TL_GFX_FOOTER_PT;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    tl_text_style ts = tl_gfx_style(13);
    ts.bold = 1;
    tl_gfx_text(g, 16, 10, "Top-k: one row over the fewest blocks that hold it against the row split over many", ts);
    tl_text_style ss = tl_gfx_style(9);
    tl_gfx_text(g, 16, 30, about, ss);
    const tl_legend_entry le[] = {
        {"load the chunk", tl_gfx_rgb(0.75, 0.75, 0.75), TL_KEY_BOX, 0, 0},
        {"histogram pass (radix digit)", tl_gfx_palette(5), TL_KEY_BOX, 0, 0},
        {"next pass", tl_gfx_palette(2), TL_KEY_BOX, 0, 0},
        {"row barrier, select", tl_gfx_rgb(0.45, 0.45, 0.45), TL_KEY_BOX, 0, 0},
        {"counts, row barrier", tl_gfx_palette(3), TL_KEY_BOX, 0, 0},
        {"placement", tl_gfx_palette(4), TL_KEY_BOX, 0, 0},
        {"sort (last block)", tl_gfx_palette(1), TL_KEY_BOX, 0, 0},
    };
    double lw, lh;
    tl_gfx_legend_size(g, le, 7, &lw, &lh);
    const double px = 70, pw = W - px - lw - 40;
    for (int i = 0; i < npanels; i++) draw_panel(g, &panels[i], px, top + i * (panel_h + gap), pw, panel_h, xmax);
    tl_gfx_legend(g, W - 16, top, le, 7, 1);
    char foot[300];
    snprintf(foot, sizeof foot, "simulated on preset %s: the model's schedule of one row's blocks (simulator/topk.h), "
             "from the launch", preset);
    tl_gfx_footer(g, foot);
    return tl_gfx_close(g);
}
