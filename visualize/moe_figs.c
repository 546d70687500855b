/* The fused-MoE figures: tiles (seed Figure 6 as a still), padding against tokens, timeline (the
 * simulated schedule, and a measured one from a bench trace). They draw the worklists, curves and
 * schedules they are given and run no model. See figures.h. */
#include "csv.h"
#include "figures.h"
#include "gfx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tl_rgba real_colour(void) { return tl_gfx_palette(5); }                     /* blue */
static tl_rgba pad_colour(void) { return tl_gfx_rgb(0.97, 0.75, 0.45); }          /* light orange */

/* ---- moe-tiles ---- */

/* Rows of the tallest expert stack (in rows, a whole number of tiles). */
static int tallest_stack(const tl_worklist *wl)
{
    int best = 0;
    for (int e = 0; e < wl->n_experts; e++) {
        int c = wl->expert_count[e];
        int rows = (c + wl->tile_m - 1) / wl->tile_m * wl->tile_m;
        if (rows > best) best = rows;
    }
    return best;
}

/* Real rows (token-expert pairs) of a worklist. */
static long long real_rows(const tl_worklist *wl)
{
    long long n = 0;
    for (int e = 0; e < wl->n_experts; e++) n += wl->expert_count[e];
    return n;
}

static void draw_tiles_panel(tl_gfx *g, const tl_tiles_panel *panel, double x, double y, double w,
                             double h)
{
    const tl_worklist *wl = panel->wl;
    int E = wl->n_experts;
    int stack = tallest_stack(wl);
    if (stack < wl->tile_m) stack = wl->tile_m;
    tl_plot pl;
    tl_plot_init(&pl, x, y, w, h, 0, E, 0, 0, stack, 0);
    char title[200];
    double pad = (double)wl->n_rows_padded / (double)real_rows(wl);
    tl_text_style ts = tl_gfx_style(10);
    ts.bold = 1;
    ts.ha = TL_CENTER;
    ts.va = TL_BOTTOM;
    tl_gfx_text(g, x + w / 2, y - 18, panel->label, ts);
    snprintf(title, sizeof title, "%d tiles, %d experts active, padding %.2fx", wl->n_tiles,
             wl->active_experts, pad);
    ts = tl_gfx_style(9);
    ts.ha = TL_CENTER;
    ts.va = TL_BOTTOM;
    tl_gfx_text(g, x + w / 2, y - 5, title, ts);

    tl_plot_axes(g, &pl, "expert", "rows (tiles stacked)");
    double col_w = w / E;
    double row_h = h / stack;
    /* Per-expert running height; tiles are listed in expert order. */
    int *height = calloc((size_t)E, sizeof *height);
    if (!height) return;
    tl_rgba sep = tl_gfx_rgb(1, 1, 1);
    for (int t = 0; t < wl->n_tiles; t++) {
        int e = wl->tile_expert[t], real = wl->tile_rows[t];
        double cx = x + e * col_w, base = height[e];
        double gap = col_w > 2.5 ? 0.35 : 0; /* white gap between columns when there is room */
        double y_real0 = tl_plot_y(&pl, base), y_real1 = tl_plot_y(&pl, base + real);
        double y_tile1 = tl_plot_y(&pl, base + wl->tile_m);
        tl_gfx_rect(g, cx + gap, y_real1, col_w - 2 * gap, y_real0 - y_real1, real_colour(), 0, sep);
        if (real < wl->tile_m)
            tl_gfx_rect(g, cx + gap, y_tile1, col_w - 2 * gap, y_real1 - y_tile1, pad_colour(), 0, sep);
        /* Tile boundary: a thin white line on top of each tile when rows are tall enough. */
        if (row_h * wl->tile_m > 3)
            tl_gfx_line(g, cx, y_tile1, cx + col_w, y_tile1, 0.6, sep, 0);
        height[e] += wl->tile_m;
    }
    free(height);
    tl_gfx_rect(g, x, y, w, h, (tl_rgba){0, 0, 0, 0}, 0.8, tl_gfx_rgb(0.2, 0.2, 0.2));
}

/* TL_EUSAGE unless there are 1 to 8 panels, each with a worklist of real rows, all of one expert
 * count and one tile height. */
static int check_panels(const tl_tiles_panel *panels, int npanels)
{
    if (npanels < 1 || npanels > 8) return tl_error(TL_EUSAGE, "moe-tiles", "%d panels; draw 1 to 8", npanels);
    for (int i = 0; i < npanels; i++) {
        const tl_worklist *wl = panels[i].wl;
        if (!wl || !panels[i].label || wl->n_experts < 1 || wl->tile_m < 1 || !wl->expert_count ||
            real_rows(wl) < 1)
            return tl_error(TL_EUSAGE, "moe-tiles", "panel %d has no worklist", i + 1);
        if (wl->n_experts != panels[0].wl->n_experts || wl->tile_m != panels[0].wl->tile_m)
            return tl_error(TL_EUSAGE, "moe-tiles", "panel %d: E = %d, tiles of %d rows; panel 1: E = %d, %d rows",
                            i + 1, wl->n_experts, wl->tile_m, panels[0].wl->n_experts, panels[0].wl->tile_m);
    }
    return TL_OK;
}

int tl_fig_moe_tiles(const char *out, const tl_tiles_panel *panels, int npanels,
                     const tl_tiles_about *about)
{
    int rc = check_panels(panels, npanels);
    if (rc) return rc;
    int E = panels[0].wl->n_experts, tile_m = panels[0].wl->tile_m;
    /* Up to four panels in a row; five to eight in two rows. */
    int nrows = npanels <= 4 ? 1 : 2, ncols = (npanels + nrows - 1) / nrows;
    double panel_w = npanels == 1 ? 620 : 330, panel_h = 290, top = 112, row_gap = 100;
    double W = 60 + ncols * (panel_w + 62), H = top + nrows * panel_h + (nrows - 1) * row_gap + 44 + TL_GFX_FOOTER_PT;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    char title[256], experts[64];
    if (about->n_shared > 0) snprintf(experts, sizeof experts, "E = %d + %d shared", E - about->n_shared, about->n_shared);
    else snprintf(experts, sizeof experts, "E = %d", E);
    snprintf(title, sizeof title, "Fused MoE tiles: %s (%s, top-k = %d), tiles of %d rows, %s routing", about->model,
             experts, about->top_k, tile_m, about->routing);
    tl_text_style ts = tl_gfx_style(13);
    ts.bold = 1;
    tl_gfx_text(g, 16, 10, title, ts);
    tl_legend_entry le[2] = {
        {"real rows (token-expert pairs)", real_colour(), TL_KEY_BOX, 0, 0},
        {"padding rows", pad_colour(), TL_KEY_BOX, 0, 0},
    };
    tl_gfx_legend(g, W - 12, 32, le, 2, 1);
    for (int i = 0; i < npanels; i++) {
        int r = i / ncols, c = i % ncols;
        draw_tiles_panel(g, &panels[i], 70 + c * (panel_w + 62), top + r * (panel_h + row_gap), panel_w, panel_h);
    }
    char foot[400];
    snprintf(foot, sizeof foot,
             "simulated on preset %s: worklist of tl_worklist_build (stage 1, %s routing, seed %llu); "
             "padding = rows computed / (M x %s)",
             about->preset, about->routing, (unsigned long long)about->seed,
             about->n_shared > 0 ? "(k + shared)" : "k");
    tl_gfx_footer(g, foot);
    return tl_gfx_close(g);
}

/* ---- padding ---- */

/* How many of a polyline's points (each segment sampled 8 times) fall inside the box. */
static int polyline_hits(const double *x, const double *y, int n, double bx, double by, double bw,
                         double bh)
{
    int hits = 0;
    for (int i = 0; i + 1 < n; i++)
        for (int j = 0; j < 8; j++) {
            double t = j / 8.0, px = x[i] + t * (x[i + 1] - x[i]), py = y[i] + t * (y[i + 1] - y[i]);
            hits += px >= bx && px <= bx + bw && py >= by && py <= by + bh;
        }
    return hits;
}

/* TL_EUSAGE unless there are 1 to TL_PADDING_MAX_CURVES curves of 1 to TL_PADDING_MAX_POINTS
 * points, each point finite and positive (the axes are logarithmic). */
static int check_curves(const tl_padding_curve *curves, int ncurves)
{
    if (ncurves < 1 || ncurves > TL_PADDING_MAX_CURVES)
        return tl_error(TL_EUSAGE, "padding", "%d curves (experts x topk x tile-m); draw 1 to %d", ncurves,
                        TL_PADDING_MAX_CURVES);
    for (int c = 0; c < ncurves; c++) {
        const tl_padding_curve *cv = &curves[c];
        if (cv->n < 1 || cv->n > TL_PADDING_MAX_POINTS)
            return tl_error(TL_EUSAGE, "padding", "curve %d has %d points; give 1 to %d", c + 1, cv->n,
                            TL_PADDING_MAX_POINTS);
        for (int i = 0; i < cv->n; i++)
            if (!(isfinite(cv->tokens[i]) && cv->tokens[i] >= 1 && isfinite(cv->simulated[i]) &&
                  cv->simulated[i] > 0 && isfinite(cv->closed[i]) && cv->closed[i] > 0))
                return tl_error(TL_EUSAGE, "padding", "curve %d, point %d: M = %g, padding %g and %g cannot "
                                "sit on log axes", c + 1, i + 1, cv->tokens[i], cv->simulated[i], cv->closed[i]);
    }
    return TL_OK;
}

/* A curve's points in the plot's coordinates: xs (tokens), ys (simulated), yc (closed form). */
static void curve_on_plot(const tl_plot *pl, const tl_padding_curve *cv, double *xs, double *ys, double *yc)
{
    for (int i = 0; i < cv->n; i++) {
        xs[i] = tl_plot_x(pl, cv->tokens[i]);
        ys[i] = tl_plot_y(pl, cv->simulated[i]);
        yc[i] = tl_plot_y(pl, cv->closed[i]);
    }
}

int tl_fig_padding(const char *out, const char *preset, const tl_padding_curve *curves, int ncurves)
{
    int rc = check_curves(curves, ncurves);
    if (rc) return rc;
    double max_tokens = 1, ymax = 1;
    for (int c = 0; c < ncurves; c++)
        for (int i = 0; i < curves[c].n; i++) {
            max_tokens = fmax(max_tokens, curves[c].tokens[i]);
            ymax = fmax(ymax, fmax(curves[c].simulated[i], curves[c].closed[i]));
        }
    const double W = 760, H = 500;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    static const int colours[7] = {5, 6, 3, 1, 7, 2, 0};
    tl_legend_entry le[14];
    int nle = 0;
    for (int c = 0; c < ncurves; c++)
        le[nle++] = (tl_legend_entry){curves[c].label, tl_gfx_palette(colours[c % 7]), TL_KEY_MARKER, 0, c / 7};
    le[nle++] = (tl_legend_entry){"simulated worklist (wide, markers)", tl_gfx_alpha(tl_gfx_rgb(0.3, 0.3, 0.3), 0.55), TL_KEY_LINE, 0, 0};
    le[nle++] = (tl_legend_entry){"closed form max(1, min(tile E / (M k), tile))", tl_gfx_rgb(0.1, 0.1, 0.1), TL_KEY_LINE, 3.5, 0};
    double lw, lh;
    tl_gfx_legend_size(g, le, nle, &lw, &lh);

    /* The legend goes to the corner of the plot (top right, bottom left, bottom right) that hides
     * no curve, top right first; when every corner would hide one, the plot narrows and the legend
     * stands to its right. */
    tl_plot pl;
    double xmax = pow(10, ceil(log10(max_tokens))), pw = W - 70 - 24, ph = H - 40 - 46 - TL_GFX_FOOTER_PT;
    tl_plot_init(&pl, 70, 40, pw, ph, 1, xmax, 1, 0.8, ymax * 1.6, 1);
    double xs[TL_PADDING_MAX_POINTS], ys[TL_PADDING_MAX_POINTS], yc[TL_PADDING_MAX_POINTS], lx = 0, ly = 0;
    int free_corner = 0;
    for (int k = 0; k < 3 && !free_corner; k++) {
        lx = k == 1 ? pl.x + 8 : pl.x + pl.w - 8 - lw;
        ly = k == 0 ? pl.y + 8 : pl.y + pl.h - 8 - lh;
        int hits = 0;
        for (int c = 0; c < ncurves; c++) {
            int n = curves[c].n;
            curve_on_plot(&pl, &curves[c], xs, ys, yc);
            hits += polyline_hits(xs, ys, n, lx - 4, ly - 4, lw + 8, lh + 8) +
                    polyline_hits(xs, yc, n, lx - 4, ly - 4, lw + 8, lh + 8);
        }
        free_corner = hits == 0;
    }
    if (!free_corner) {
        tl_plot_init(&pl, 70, 40, pw - lw - 12, ph, 1, xmax, 1, 0.8, ymax * 1.6, 1);
        lx = pl.x + pl.w + 12;
        ly = pl.y;
    }

    tl_text_style ts = tl_gfx_style(13);
    ts.bold = 1;
    tl_gfx_text(g, pl.x, 12, "MoE tile padding against batch size (balanced routing)", ts);
    tl_plot_axes(g, &pl, "tokens in the batch M (log scale)", "padding factor (rows computed / real rows)");
    tl_plot_clip(g, &pl);
    for (int c = 0; c < ncurves; c++) {
        tl_rgba col = tl_gfx_palette(colours[c % 7]);
        int n = curves[c].n;
        curve_on_plot(&pl, &curves[c], xs, ys, yc);
        /* Simulated: a wide translucent band with markers; the closed form dashed on top, so both
         * stay visible where they agree. */
        tl_gfx_polyline(g, xs, ys, n, 3.2, tl_gfx_alpha(col, 0.55), 0);
        for (int i = 0; i < n; i++) tl_gfx_marker(g, xs[i], ys[i], c / 7, 5.5, col);
        tl_gfx_polyline(g, xs, yc, n, 1.1, tl_gfx_rgb(0.1, 0.1, 0.1), 3.5);
    }
    tl_gfx_unclip(g);
    tl_gfx_legend(g, lx, ly, le, nle, 0);
    char foot[300];
    snprintf(foot, sizeof foot,
             "simulated on preset %s: tl_route (balanced) + tl_worklist_build at each M; padding does not depend on the hardware",
             preset);
    tl_gfx_footer(g, foot);
    return tl_gfx_close(g);
}

/* ---- timeline ---- */

int tl_fig_timeline_xcd(const tl_hw *hw, int cu)
{
    int xcds = hw->xcds > 0 ? hw->xcds : 1;
    return cu / (hw->cus / xcds);
}

int tl_fig_timeline(const char *out, const tl_moe_problem *p, const tl_moe_result *r)
{
    if (!p || !p->hw || !p->model || !r)
        return tl_error(TL_EUSAGE, "timeline", "no problem or no result to draw");
    if (!r->items || r->work_items < 1)
        return tl_error(TL_EUSAGE, "timeline", "the result holds no schedule (simulate with want_schedule)");
    const tl_hw *hw = p->hw;
    int rc = TL_OK;
    int ncu = hw->cus, nx = hw->xcds > 0 ? hw->xcds : 1;
    /* Rows: CU numbers in order, so each XCD's CUs are one run of rows (tl_fig_timeline_xcd). */
    double *wave_t0 = malloc((size_t)(r->waves + 1) * sizeof *wave_t0);
    int *wave_n = calloc((size_t)(r->waves + 1), sizeof *wave_n);
    if (!wave_t0 || !wave_n) {
        free(wave_t0), free(wave_n);
        return tl_error(TL_EFAIL, "timeline", "out of memory");
    }
    double tmax = 0;
    for (int w = 0; w <= r->waves; w++) wave_t0[w] = INFINITY;
    for (long long i = 0; i < r->work_items; i++) {
        const tl_moe_item *it = &r->items[i];
        tmax = fmax(tmax, it->end_us);
        if (it->wave >= 0 && it->wave <= r->waves) {
            wave_t0[it->wave] = fmin(wave_t0[it->wave], it->start_us);
            wave_n[it->wave]++;
        }
    }
    tmax = fmax(tmax, r->time_us);

    const double W = 900, H = 660;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) rc = tl_gfx_open_status();
    if (g) {
        tl_plot pl;
        tl_plot_init(&pl, 96, 74, W - 96 - 24, H - 74 - 46 - TL_GFX_FOOTER_PT, 0, tmax * 1.02, 0,
                     0, ncu, 0);
        pl.y_ticks_off = 1;
        const char *units = strncmp(hw->arch, "sm_", 3) == 0 ? "SMs" : "CUs";
        char title[300], tps[24] = "";
        if (p->tp > 1) snprintf(tps, sizeof tps, ", TP %d", p->tp);
        snprintf(title, sizeof title, "MoE stage %d timeline (%s): %s%s, %s, M = %d on %s", p->stage,
                 p->kernel ? p->kernel : "generic kernel", p->model->name, tps, tl_moe_dtype_name(p->dtype), p->tokens,
                 hw->name);
        tl_text_style ts = tl_gfx_style(13);
        ts.bold = 1;
        tl_gfx_text(g, pl.x, 8, title, ts);
        snprintf(title, sizeof title,
                 "%lld work items (%d tiles of %d rows x %d n-blocks of %d) in %d wave%s of %d %s; %.1f us, limiter: %s",
                 r->work_items, r->tiles, r->tile_m, r->n_blocks, r->tile_n, r->waves, r->waves == 1 ? "" : "s", ncu,
                 units, r->time_us, r->limiter ? r->limiter : "?");
        tl_text_style st = tl_gfx_style(9.5);
        tl_gfx_text(g, pl.x, 27, title, st);

        /* Axes without y tick labels (CUs are labelled per XCD instead). */
        tl_plot_axes(g, &pl, "time (us)", NULL);
        tl_gfx_rect(g, pl.x, pl.y, pl.w, pl.h, tl_gfx_rgb(1, 1, 1), 0, tl_gfx_rgb(0, 0, 0));
        double row_h = pl.h / ncu;
        int tail = r->waves - 1;
        int tail_partial = tail >= 0 && wave_n[tail] < ncu;
        for (long long i = 0; i < r->work_items; i++) {
            const tl_moe_item *it = &r->items[i];
            if (it->cu < 0 || it->cu >= ncu) continue;
            double x0 = tl_plot_x(&pl, it->start_us), x1 = tl_plot_x(&pl, it->end_us);
            double y = pl.y + it->cu * row_h;
            tl_rgba c = (tail_partial && it->wave == tail) ? tl_gfx_palette(6)
                        : (it->wave % 2 == 0)               ? tl_gfx_palette(5)
                                                            : tl_gfx_palette(2);
            double gap = row_h > 4 ? 0.25 : 0;
            tl_gfx_rect(g, x0, y + gap, fmax(x1 - x0 - 0.3, 0.4), row_h - 2 * gap, c, 0, c);
        }
        /* XCD bands. */
        tl_text_style xs = tl_gfx_style(8.5);
        xs.ha = TL_RIGHT;
        xs.va = TL_MIDDLE;
        int start = 0;
        for (int i = 1; i <= ncu; i++) {
            int xcd = tl_fig_timeline_xcd(hw, start);
            if (i < ncu && tl_fig_timeline_xcd(hw, i) == xcd) continue;
            double y0 = pl.y + start * row_h, y1 = pl.y + i * row_h;
            char lab[48];
            snprintf(lab, sizeof lab, "XCD %d (%d CUs)", xcd, i - start);
            if (nx > 1) tl_gfx_text(g, pl.x - 6, (y0 + y1) / 2, lab, xs);
            if (i < ncu) tl_gfx_line(g, pl.x, y1, pl.x + pl.w, y1, 0.6, tl_gfx_rgb(0.35, 0.35, 0.35), 0);
            start = i;
        }
        if (nx <= 1) {
            char lab[48];
            snprintf(lab, sizeof lab, "%d %s (rows)", ncu, units);
            xs.angle_deg = 90;
            xs.ha = TL_CENTER;
            xs.va = TL_BOTTOM;
            tl_gfx_text(g, pl.x - 8, pl.y + pl.h / 2, lab, xs);
        }
        /* Wave boundaries, labelled at the top (thinned out when there are many waves). The last
         * wave is always labelled, right-aligned to the figure's edge if it would run off it; a
         * thinned label that would run into it is left out. */
        int every = r->waves <= 16 ? 1 : (r->waves + 15) / 16;
        tl_text_style wl = tl_gfx_style(8);
        wl.ha = TL_LEFT;
        wl.va = TL_BOTTOM;
        wl.color = tl_gfx_rgb(0.2, 0.2, 0.2);
        double last_x = INFINITY;
        if (tail >= 0 && isfinite(wave_t0[tail])) {
            char lab[32];
            snprintf(lab, sizeof lab, tail_partial ? "tail %d" : "w%d", tail);
            double lw, lh;
            tl_gfx_text_size(g, lab, 8, 0, &lw, &lh);
            last_x = fmin(tl_plot_x(&pl, wave_t0[tail]) + 2, W - 4 - lw);
            tl_gfx_text(g, last_x, pl.y - 2, lab, wl);
        }
        for (int w = 0; w < r->waves; w++) {
            if (!isfinite(wave_t0[w])) continue;
            double x = tl_plot_x(&pl, wave_t0[w]);
            tl_gfx_line(g, x, pl.y - 4, x, pl.y + pl.h, 0.7, tl_gfx_rgb(0.1, 0.1, 0.1), 3);
            if (w % every != 0 || w == tail) continue;
            char lab[32];
            snprintf(lab, sizeof lab, "w%d", w);
            double lw, lh;
            tl_gfx_text_size(g, lab, 8, 0, &lw, &lh);
            if (x + 2 + lw + 4 <= last_x) tl_gfx_text(g, x + 2, pl.y - 2, lab, wl);
        }
        /* Only the kinds of wave the picture holds. */
        tl_legend_entry le[3];
        int nle = 0;
        int full_waves = r->waves - (tail_partial ? 1 : 0);
        if (full_waves >= 1)
            le[nle++] = (tl_legend_entry){"even waves", tl_gfx_palette(5), TL_KEY_BOX, 0, 0};
        if (full_waves >= 2)
            le[nle++] = (tl_legend_entry){"odd waves", tl_gfx_palette(2), TL_KEY_BOX, 0, 0};
        if (tail_partial)
            le[nle++] = (tl_legend_entry){"tail wave (partly filled)", tl_gfx_palette(6), TL_KEY_BOX, 0, 0};
        tl_gfx_legend(g, W - 12, 4, le, nle, 1);
        char foot[1600], routing[1100];
        tl_routing_describe(&p->routing, routing, sizeof routing);
        snprintf(foot, sizeof foot,
                 "simulated on preset %s: tl_moe_sim schedule of %s%s, %s routing, seed %llu (items dealt "
                 "round robin over %s; launch %.1f us included in the total)",
                 hw->name, p->kernel ? "tilelab's " : "the generic kernel", p->kernel ? p->kernel : "", routing,
                 (unsigned long long)p->seed, nx > 1 ? "XCDs" : units, hw->launch_us);
        tl_gfx_footer(g, foot);
        rc = tl_gfx_close(g);
    }
    free(wave_t0);
    free(wave_n);
    return rc;
}

/* ---- measured timeline (bench moe --trace) ---- */

#define TRACE_MAX_BLOCKS 1000000
#define TRACE_MAX_BYTES ((size_t)256 << 20)
/* Bars narrower than TRACE_MERGE_PT that start within TRACE_MERGE_PT of the bar before them in
 * their slot are drawn as one bar; a picture of more than TRACE_MAX_BARS bars after that (each
 * about 200 bytes of SVG or PDF) is refused. */
#define TRACE_MERGE_PT 1.0
#define TRACE_MAX_BARS 50000
#define TRACE_SVG_BYTES_PER_BAR 200

typedef struct {
    int sm, lane, order; /* order: the block's place in its slot (0 = first) */
    double t0, t1;
} trace_blk;

typedef struct {
    trace_blk *b;
    int n, cap;
    double stage_end; /* the end of the stage's last kernel, or NAN */
    char dtype[16], source[200];
    int tokens;
} trace_case;

static int by_sm_then_start(const void *a, const void *b)
{
    const trace_blk *x = a, *y = b;
    if (x->sm != y->sm) return x->sm - y->sm;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

/* Reads the rows of (tokens, stage) from the trace text; tokens 0: the first case's. */
static int trace_read(const char *path, const char *text, int tokens, int stage, trace_case *tc)
{
    tl_csv_row h = {0}, r = {0};
    const char *p = text;
    int line = 1, rc = 0, got = tl_csv_next(&p, &h, &line);
    if (got != 1) {
        rc = got < 0 ? tl_csv_fail(path, &h, got) : tl_error(TL_EUSAGE, path, "empty trace file");
        tl_csv_free(&h);
        return rc;
    }
    static const char *const need[] = {"tokens", "stage", "dtype", "block", "sm", "start_us", "end_us"};
    int col[7];
    rc = tl_csv_cols(path, &h, need, 7, col, "`tilelab bench moe --trace`");
    const int c_src = tl_csv_col(&h, "source");
    tc->stage_end = NAN;
    while (!rc && (got = tl_csv_next(&p, &r, &line)) == 1) {
        if (tl_csv_blank(&r)) continue;
        double v[7];
        for (int i = 0; i < 7 && !rc; i++)
            if (i != 2 && tl_parse_double(tl_csv_field(&r, col[i]), need[i], &v[i])) /* its message, with the line */
                rc = tl_error(TL_EUSAGE, path, "line %d: '%s' is not a number (column %s)", r.line,
                              tl_csv_field(&r, col[i]), need[i]);
        if (rc) break;
        /* whole numbers in range before any conversion: tokens, stage, block, SM */
        if (!(v[0] >= 1 && v[0] <= 1048576 && v[0] == floor(v[0]) && (v[1] == 1 || v[1] == 2) && v[3] >= -1 &&
              v[3] < 1e9 && v[3] == floor(v[3]) && v[4] >= -1 && v[4] < 65536 && v[4] == floor(v[4]))) {
            rc = tl_error(TL_EUSAGE, path, "line %d: tokens %g, stage %g, block %g, SM %g are not a trace row's",
                          r.line, v[0], v[1], v[3], v[4]);
            break;
        }
        if (!(v[5] > -1e6 && v[5] <= v[6] && v[6] < 1e9)) {
            rc = tl_error(TL_EUSAGE, path, "line %d: start %g, end %g are not times of one run (us)", r.line, v[5],
                          v[6]);
            break;
        }
        if (!tokens) tokens = (int)v[0];
        if ((int)v[0] != tokens || (int)v[1] != stage) continue;
        tc->tokens = tokens;
        snprintf(tc->dtype, sizeof tc->dtype, "%s", tl_csv_field(&r, col[2]));
        if (c_src >= 0 && !tc->source[0]) snprintf(tc->source, sizeof tc->source, "%s", tl_csv_field(&r, c_src));
        if (v[3] < 0) { /* the stage's row: when its last kernel had ended */
            tc->stage_end = v[6];
            continue;
        }
        if (v[4] < 0)
            rc = tl_error(TL_EUSAGE, path, "line %d: a block on SM %g", r.line, v[4]);
        else if (tc->n >= TRACE_MAX_BLOCKS)
            rc = tl_error(TL_EUSAGE, path, "more than %d blocks in one case", TRACE_MAX_BLOCKS);
        else if (tc->n == tc->cap) {
            int nc = tc->cap ? 2 * tc->cap : 1024;
            trace_blk *nb = realloc(tc->b, (size_t)nc * sizeof *nb);
            if (!nb) rc = tl_error(TL_EFAIL, path, "out of memory");
            else tc->b = nb, tc->cap = nc;
        }
        if (!rc) tc->b[tc->n++] = (trace_blk){(int)v[4], 0, 0, v[5], v[6]};
    }
    if (!rc && got < 0) rc = tl_csv_fail(path, &r, got);
    if (!rc && !tc->n)
        rc = tokens ? tl_error(TL_EUSAGE, path, "no blocks of stage %d at M = %d", stage, tokens)
                    : tl_error(TL_EUSAGE, path, "no blocks: the trace has no data rows");
    tl_csv_free(&h);
    tl_csv_free(&r);
    return rc;
}

/* Slots: on each SM, a block takes the first slot free at its start (blocks sorted by SM, start).
 * Returns the most slots any SM needed; *n_sm the SMs with a block (rows), sm_row[i] the row of
 * block i. */
static int trace_slots(trace_case *tc, int *n_sm, int *sm_row)
{
    qsort(tc->b, (size_t)tc->n, sizeof *tc->b, by_sm_then_start);
    double slot_end[64];
    int slot_n[64], max_slots = 1, rows = 0;
    for (int i = 0, s_slots = 0; i < tc->n; i++) {
        if (i == 0 || tc->b[i].sm != tc->b[i - 1].sm) { /* a new SM */
            s_slots = 0;
            rows++;
        }
        int l = 0;
        while (l < s_slots && slot_end[l] > tc->b[i].t0 + 1e-3) l++;
        if (l == s_slots) {
            if (s_slots == 64) l = 63; /* more than 64 at once: overlap in the last slot */
            else slot_n[s_slots++] = 0;
        }
        slot_end[l] = tc->b[i].t1;
        tc->b[i].lane = l;
        tc->b[i].order = slot_n[l]++;
        sm_row[i] = rows - 1;
        if (s_slots > max_slots) max_slots = s_slots;
    }
    *n_sm = rows;
    return max_slots;
}

/* A bar of the timeline: blocks of one slot that follow one another, x in points. */
typedef struct {
    double x0, x1, y;
    int blocks, order; /* order: the first block's place in its slot */
} trace_bar;

enum { BAR_SINGLE = 1, BAR_MERGED = 2 };

/* Notes the kind of a finished bar in *kinds and draws it when g is not NULL. */
static void finish_bar(tl_gfx *g, const trace_bar *bar, double lane_h, int *kinds)
{
    *kinds |= bar->blocks > 1 ? BAR_MERGED : BAR_SINGLE;
    if (!g) return;
    tl_rgba c = bar->blocks > 1 ? tl_gfx_palette(0) : bar->order % 2 ? tl_gfx_palette(2) : tl_gfx_palette(5);
    tl_gfx_rect(g, bar->x0, bar->y, fmax(bar->x1 - bar->x0 - 0.3, 0.4), fmax(lane_h - 0.15, 0.3), c, 0, c);
}

/* Walks the blocks (sorted by SM, then start) slot by slot, merging the ones too narrow to tell
 * apart (TRACE_MERGE_PT), and draws the bars on g when g is not NULL. Returns the number of bars;
 * *kinds: BAR_SINGLE when a bar holds one block, | BAR_MERGED when one holds more. Cost: O(blocks). */
static long trace_bars(const trace_case *tc, const int *sm_row, const tl_plot *pl, int n_sm, int slots,
                       tl_gfx *g, int *kinds)
{
    const double row_h = pl->h / n_sm, lane_h = row_h / slots;
    trace_bar open[64] = {{0}}; /* the bar still growing in each slot of the current SM */
    long bars = 0;
    *kinds = 0;
    for (int i = 0; i < tc->n; i++) {
        const trace_blk *b = &tc->b[i];
        if (i > 0 && b->sm != b[-1].sm) /* a new SM: the last one's bars are done */
            for (int l = 0; l < slots; l++) {
                if (open[l].blocks) finish_bar(g, &open[l], lane_h, kinds);
                open[l].blocks = 0;
            }
        trace_bar next = {tl_plot_x(pl, b->t0), tl_plot_x(pl, b->t1), pl->y + sm_row[i] * row_h + b->lane * lane_h,
                          1, b->order};
        trace_bar *o = &open[b->lane];
        int narrow = o->x1 - o->x0 < TRACE_MERGE_PT || next.x1 - next.x0 < TRACE_MERGE_PT;
        if (o->blocks && narrow && next.x0 - o->x1 < TRACE_MERGE_PT) {
            o->x1 = fmax(o->x1, next.x1);
            o->blocks++;
            continue;
        }
        if (o->blocks) finish_bar(g, o, lane_h, kinds);
        *o = next;
        bars++;
    }
    for (int l = 0; l < slots; l++)
        if (open[l].blocks) finish_bar(g, &open[l], lane_h, kinds);
    return bars;
}

int tl_fig_trace(const char *out, const char *trace_csv, int tokens, int stage)
{
    char *text = NULL;
    int rc = tl_text_file_read(trace_csv, "the trace", TRACE_MAX_BYTES, &text);
    if (rc) return rc;
    trace_case tc;
    memset(&tc, 0, sizeof tc);
    rc = trace_read(trace_csv, text, tokens, stage, &tc);
    free(text);
    int *sm_row = rc ? NULL : malloc((size_t)tc.n * sizeof *sm_row);
    double *dur = rc ? NULL : malloc((size_t)tc.n * sizeof *dur);
    if (!rc && (!sm_row || !dur)) rc = tl_error(TL_EFAIL, "trace", "out of memory");
    tl_gfx *g = NULL;
    if (!rc) {
        int n_sm = 0, slots = trace_slots(&tc, &n_sm, sm_row);
        double first = INFINITY, last_start = -INFINITY, last_end = -INFINITY;
        for (int i = 0; i < tc.n; i++) {
            first = fmin(first, tc.b[i].t0);
            last_start = fmax(last_start, tc.b[i].t0);
            last_end = fmax(last_end, tc.b[i].t1);
            dur[i] = tc.b[i].t1 - tc.b[i].t0;
        }
        qsort(dur, (size_t)tc.n, sizeof *dur, tl_cmp_double);
        double tmin = fmin(0.0, first), tmax = fmax(last_end, isfinite(tc.stage_end) ? tc.stage_end : 0.0) * 1.02;
        if (!(tmax > tmin)) tmax = tmin + 1.0; /* every time 0: still an axis */
        const double W = 900, H = 660;
        tl_plot pl;
        tl_plot_init(&pl, 96, 74, W - 96 - 24, H - 74 - 46 - TL_GFX_FOOTER_PT, tmin, tmax, 0, 0, n_sm, 0);
        pl.y_ticks_off = 1;
        int kinds = 0;
        long bars = trace_bars(&tc, sm_row, &pl, n_sm, slots, NULL, &kinds);
        if (bars > TRACE_MAX_BARS)
            rc = tl_error(TL_EUSAGE, trace_csv,
                          "%d blocks of stage %d at M = %d make %ld bars, even with bars under %g pt merged "
                          "(about %ld MB of SVG): at most %d; trace fewer blocks",
                          tc.n, stage, tc.tokens, bars, TRACE_MERGE_PT, bars * TRACE_SVG_BYTES_PER_BAR >> 20,
                          TRACE_MAX_BARS);
        if (!rc) g = tl_gfx_open(out, W, H);
        if (!rc && !g) rc = tl_gfx_open_status();
        if (g) {
            char t[320];
            snprintf(t, sizeof t, "Measured MoE stage %d timeline: %s, M = %d", stage, tc.dtype, tc.tokens);
            tl_text_style ts = tl_gfx_style(13);
            ts.bold = 1;
            tl_gfx_text(g, pl.x, 8, t, ts);
            snprintf(t, sizeof t, "%d GEMM blocks on %d SMs, up to %d at once; block time %.1f / %.1f / %.1f us "
                     "(min / median / max)", tc.n, n_sm, slots, dur[0], dur[tc.n / 2], dur[tc.n - 1]);
            tl_gfx_text(g, pl.x, 27, t, tl_gfx_style(9.5));
            tl_plot_axes(g, &pl, "time from the moment the stage could start (us)", NULL);
            tl_gfx_rect(g, pl.x, pl.y, pl.w, pl.h, tl_gfx_rgb(1, 1, 1), 0, tl_gfx_rgb(0, 0, 0));
            trace_bars(&tc, sm_row, &pl, n_sm, slots, g, &kinds);
            tl_text_style xs = tl_gfx_style(8.5);
            xs.angle_deg = 90;
            xs.ha = TL_CENTER;
            xs.va = TL_BOTTOM;
            snprintf(t, sizeof t, "%d SMs (rows), %d block slot%s each", n_sm, slots, slots == 1 ? "" : "s");
            tl_gfx_text(g, pl.x - 8, pl.y + pl.h / 2, t, xs);
            /* marks: the last start, the last block's end, the stage's end */
            struct { double at; const char *what; } mk[3] = {
                {last_start, "last start"}, {last_end, "last block ends"}, {tc.stage_end, "stage ends"}};
            tl_text_style ml = tl_gfx_style(8);
            ml.ha = TL_RIGHT;
            ml.va = TL_BOTTOM;
            ml.color = tl_gfx_rgb(0.2, 0.2, 0.2);
            for (int m = 0; m < 3; m++) {
                if (!isfinite(mk[m].at)) continue;
                double x = tl_plot_x(&pl, mk[m].at);
                /* later marks label higher, so that no label crosses an earlier mark's line */
                tl_gfx_line(g, x, pl.y - 4 - 11 * m, x, pl.y + pl.h, 0.7, tl_gfx_rgb(0.1, 0.1, 0.1), 3);
                snprintf(t, sizeof t, "%s %.1f us", mk[m].what, mk[m].at);
                tl_gfx_text(g, x - 2, pl.y - 2 - 11 * m, t, ml);
            }
            tl_legend_entry le[3] = {
                {"a slot's 1st, 3rd, ... block", tl_gfx_palette(5), TL_KEY_BOX, 0, 0},
                {"its 2nd, 4th, ... block", tl_gfx_palette(2), TL_KEY_BOX, 0, 0},
            };
            int repeats = 0; /* a slot that ran more than one block: the second shade is used */
            for (int i = 0; i < tc.n && !repeats; i++) repeats = tc.b[i].order > 0;
            if (!repeats) le[0].label = "a GEMM block (one per slot)";
            int keys = kinds & BAR_SINGLE ? (repeats ? 2 : 1) : 0;
            if (kinds & BAR_MERGED)
                le[keys++] = (tl_legend_entry){"blocks too short to draw apart", tl_gfx_palette(0), TL_KEY_BOX, 0, 0};
            tl_gfx_legend(g, W - 12, 4, le, keys, 1);
            snprintf(t, sizeof t, "measured: %s (tilelab bench moe --trace: one run, clock of the device)",
                     tc.source[0] ? tc.source : trace_csv);
            tl_gfx_footer(g, t);
            rc = tl_gfx_close(g);
        }
    }
    free(tc.b);
    free(sm_row);
    free(dur);
    return rc;
}
