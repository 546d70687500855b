/* visualize/topk_figs.c: the top-k split picture (seed 000's Figure 8), drawn from the schedules
 * it is given (simulator/topk.h's tl_topk_schedule). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "../core/tl.h"

#include "csv.h"
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

int tl_fig_topk_split(const char *out, const tl_topk_panel *panels, int npanels, const char *title, const char *about,
                      const char *footer)
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
    tl_gfx_heading(g, title, about);
    const tl_legend_entry le[] = {
        {"load the chunk", tl_gfx_rgb(0.75, 0.75, 0.75), TL_KEY_BOX, 0, 0},
        {"histogram pass (radix digit)", tl_gfx_palette(5), TL_KEY_BOX, 0, 0},
        {"next pass", tl_gfx_palette(2), TL_KEY_BOX, 0, 0},
        {"row barrier, select", tl_gfx_rgb(0.45, 0.45, 0.45), TL_KEY_BOX, 0, 0},
        {"counts, row barrier", tl_gfx_palette(3), TL_KEY_BOX, 0, 0},
        {"placement", tl_gfx_palette(4), TL_KEY_BOX, 0, 0},
        {"end (last block: sort, reset)", tl_gfx_palette(1), TL_KEY_BOX, 0, 0},
    };
    double lw, lh;
    tl_gfx_legend_size(g, le, 7, &lw, &lh);
    const double px = 70, pw = W - px - lw - 40;
    for (int i = 0; i < npanels; i++) draw_panel(g, &panels[i], px, top + i * (panel_h + gap), pw, panel_h, xmax);
    tl_gfx_legend(g, W - 16, top, le, 7, 1);
    tl_gfx_footer(g, footer);
    return tl_gfx_close(g);
}

/* ---- a measured trace (`bench topk --trace`) ---- */
static int add_seg(tl_topk_segment *seg, int cap, int *n, int block, tl_topk_phase ph, int pass, double t0, double t1)
{
    if (*n >= cap) return 0;
    seg[(*n)++] = (tl_topk_segment){block, ph, pass, t0, t1 > t0 ? t1 : t0};
    return 1;
}

/* The block's phases from its points (the TL_TOPK_TRACE_* order of the file's columns). */
static void block_segments(const double *t, int passes, int block, tl_topk_segment *seg, int cap, int *n)
{
    add_seg(seg, cap, n, block, TL_TOPK_PHASE_LOAD, 0, t[TL_TOPK_TRACE_ENTRY], t[TL_TOPK_TRACE_LOADED]);
    double prev = t[TL_TOPK_TRACE_LOADED];
    for (int p = 0; p < passes; p++) {
        const double h = t[TL_TOPK_TRACE_HIST0 + 2 * p], sel = t[TL_TOPK_TRACE_SELECT0 + 2 * p];
        add_seg(seg, cap, n, block, TL_TOPK_PHASE_HIST, p, prev, h);
        add_seg(seg, cap, n, block, TL_TOPK_PHASE_SELECT, p, h, sel);
        prev = sel;
    }
    if (passes > 0) add_seg(seg, cap, n, block, TL_TOPK_PHASE_COUNT, 0, prev, t[TL_TOPK_TRACE_COUNTED]);
    add_seg(seg, cap, n, block, TL_TOPK_PHASE_GATHER, 0, passes > 0 ? t[TL_TOPK_TRACE_COUNTED] : prev,
            t[TL_TOPK_TRACE_PLACED]);
    add_seg(seg, cap, n, block, TL_TOPK_PHASE_SORT, 0, t[TL_TOPK_TRACE_PLACED], t[TL_TOPK_TRACE_END]);
}

int tl_topk_trace_read(const char *path, long want_n, int row, tl_topk_trace_case *tc, tl_topk_segment *seg, int cap,
                       int *n)
{
    static const char *const cols[] = {"dtype", "batch", "n", "k", "split", "row", "chunk", "passes", "run_end_us",
                                       "source"};
    enum { C_DTYPE, C_BATCH, C_N, C_K, C_SPLIT, C_ROW, C_CHUNK, C_PASSES, C_END, C_SOURCE, C_N_COLS };
    *n = 0;
    memset(tc, 0, sizeof *tc);
    char *text = NULL;
    int rc = tl_text_file_read(path, "trace", 64u << 20, &text);
    if (rc) return rc;
    const char *pp = text;
    tl_csv_row h = {0}, r = {0};
    int line = 1, got = tl_csv_next(&pp, &h, &line), col[C_N_COLS], tcol[TL_TOPK_TRACE_POINTS];
    static const char *const tnames[TL_TOPK_TRACE_POINTS] = {"entry_us", "loaded_us", "hist0_us", "select0_us",
                                                              "hist1_us", "select1_us", "hist2_us", "select2_us",
                                                              "counted_us", "placed_us", "end_us"};
    if (got < 0) rc = tl_csv_fail(path, &h, got);
    else if (got == 0) rc = tl_error(TL_EUSAGE, path, "empty: not a bench topk --trace file");
    if (!rc) rc = tl_csv_cols(path, &h, cols, C_N_COLS, col, "bench topk --trace");
    if (!rc) rc = tl_csv_cols(path, &h, tnames, TL_TOPK_TRACE_POINTS, tcol, "bench topk --trace");
    int first = 1, blocks = 0;
    while (!rc && (got = tl_csv_next(&pp, &r, &line)) != 0) {
        if (got < 0) {
            rc = tl_csv_fail(path, &r, got);
            break;
        }
        if (tl_csv_blank(&r)) continue;
        double v[C_N_COLS], t[TL_TOPK_TRACE_POINTS];
        for (int i = C_BATCH; !rc && i <= C_END; i++)
            if (tl_parse_double(tl_csv_field(&r, col[i]), cols[i], &v[i]) || !isfinite(v[i]) || v[i] < 0) {
                tl_clear_error();
                rc = tl_error(TL_EUSAGE, path, "line %d: %s '%s' is not a number >= 0", r.line, cols[i],
                              tl_csv_field(&r, col[i]));
            }
        for (int i = 0; !rc && i < TL_TOPK_TRACE_POINTS; i++)
            if (tl_parse_double(tl_csv_field(&r, tcol[i]), tnames[i], &t[i]) || !isfinite(t[i])) {
                tl_clear_error();
                rc = tl_error(TL_EUSAGE, path, "line %d: %s '%s' is not a number", r.line, tnames[i],
                              tl_csv_field(&r, tcol[i]));
            }
        if (rc) break;
        if (want_n > 0 && (long)v[C_N] != want_n) continue;
        if (first) { /* the file's first case (of n = want_n) is the one drawn */
            snprintf(tc->dtype, sizeof tc->dtype, "%s", tl_csv_field(&r, col[C_DTYPE]));
            snprintf(tc->source, sizeof tc->source, "%s", tl_csv_field(&r, col[C_SOURCE]));
            tc->batch = (int)v[C_BATCH], tc->n = (long)v[C_N], tc->k = (int)v[C_K], tc->split = (int)v[C_SPLIT];
            tc->run_end_us = v[C_END];
            first = 0;
            if (tc->split < 1 || row >= tc->batch) {
                rc = tl_error(TL_EUSAGE, path, "--row %d: the first case has %d rows (split %d)", row, tc->batch,
                              tc->split);
                break;
            }
        }
        if ((int)v[C_BATCH] != tc->batch || (long)v[C_N] != tc->n || (int)v[C_K] != tc->k || (int)v[C_SPLIT] != tc->split)
            break; /* the next case */
        if ((int)v[C_ROW] != row || (int)v[C_CHUNK] >= TL_TOPK_MAX_DRAWN_BLOCKS) continue;
        const int passes = (int)v[C_PASSES] > TL_TOPK_PASSES_32 ? TL_TOPK_PASSES_32 : (int)v[C_PASSES];
        block_segments(t, passes, (int)v[C_CHUNK], seg, cap, n);
        blocks++;
    }
    if (!rc && first) rc = want_n > 0 ? tl_error(TL_EUSAGE, path, "no case of n = %ld", want_n)
                                      : tl_error(TL_EUSAGE, path, "no data rows");
    if (!rc && blocks == 0) rc = tl_error(TL_EUSAGE, path, "no block of row %d", row);
    tl_csv_free(&h);
    tl_csv_free(&r);
    free(text);
    return rc;
}
