/* visualize/prefill_figs.c: causal prefill attention's pictures (visualize/prefill_figs.h). */
#include "prefill_figs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gfx.h"

#define W_PT 1120.0
#define TOP 104.0        /* the panels' top edge */
#define GRID_X 86.0      /* the grid's left edge (room for the query-row labels) */
#define GRID_S 340.0     /* the grid's side */
#define TIME_X 578.0     /* the timeline's left edge (room for the lane labels) */
#define LANES_H 236.0
#define STRIP_H 70.0
#define SAMPLE_CUS 8
#define BINS 500

static tl_rgba computed_colour(void) { return tl_gfx_palette(5); }
static tl_rgba masked_colour(void) { return tl_gfx_palette(1); }
static tl_rgba skipped_colour(void) { return tl_gfx_rgb(0.92, 0.92, 0.92); }
/* A query block's colour: the ramp from the first rows (light) to the last, longest (dark). */
static tl_rgba qblock_colour(long qb, long n) { return tl_gfx_ramp(n > 1 ? 0.92 - 0.87 * (double)qb / (n - 1) : 0.5); }

static void bold_label(tl_gfx *g, double x, double y, const char *t)
{
    tl_text_style s = tl_gfx_style(10);
    s.bold = 1;
    s.va = TL_BOTTOM;
    tl_gfx_text(g, x, y, t, s);
}

/* The left panel: one head's tiles in token units (rows down, keys right). */
static void draw_grid(tl_gfx *g, const tl_prefill_tiles_fig *f)
{
    const tl_prefill_shape *s = f->shape;
    const tl_prefill_model_result *r = f->r;
    const double seq = (double)s->seq, k = GRID_S / seq, bm = r->tile.block_m, bn = r->tile.block_n;
    bold_label(g, GRID_X, TOP - 8, "one head: query blocks x key tiles");
    tl_plot pl;
    tl_plot_init(&pl, GRID_X, TOP, GRID_S, GRID_S, 0, seq, 0, 0, seq, 0);
    pl.y_ticks_off = 1;
    /* skipped everywhere, then the computed staircase (to each block's last tile) in the masked
     * colour, then the whole tiles' staircase over it: polygons, so that no seams show between rows */
    tl_gfx_rect(g, GRID_X, TOP, GRID_S, GRID_S, skipped_colour(), 0, skipped_colour());
    double *px = malloc((size_t)(2 * r->qblocks + 2) * sizeof *px), *py = malloc((size_t)(2 * r->qblocks + 2) * sizeof *py);
    for (int pass = 0; pass < 2 && px && py; pass++) {
        int n = 0;
        px[n] = GRID_X, py[n++] = TOP;
        for (long qb = 0; qb < r->qblocks; qb++) {
            const long tiles = pass == 0 ? f->tiles[qb] : f->tiles[qb] - f->masked[qb];
            const double x = GRID_X + fmin((double)tiles * bn, seq) * k;
            px[n] = x, py[n++] = TOP + qb * bm * k;
            px[n] = x, py[n++] = TOP + fmin((qb + 1) * bm, seq) * k;
        }
        px[n] = GRID_X, py[n++] = TOP + GRID_S;
        tl_gfx_polygon(g, px, py, n, pass == 0 ? masked_colour() : computed_colour());
    }
    free(px), free(py);
    /* tile edges where they are wide enough to see */
    const tl_rgba edge = tl_gfx_rgb(1, 1, 1);
    if (bn * k >= 3)
        for (double x = bn; x < seq; x += bn) tl_gfx_line(g, GRID_X + x * k, TOP, GRID_X + x * k, TOP + GRID_S, 0.4, edge, 0);
    if (bm * k >= 3)
        for (double y = bm; y < seq; y += bm) tl_gfx_line(g, GRID_X, TOP + y * k, GRID_X + GRID_S, TOP + y * k, 0.4, edge, 0);
    if (s->causal) tl_gfx_line(g, GRID_X, TOP, GRID_X + GRID_S, TOP + GRID_S, 0.8, tl_gfx_rgb(0, 0, 0), 3);
    tl_plot_axes(g, &pl, "key position (tokens)", NULL);
    /* the query rows, top down */
    tl_text_style ls = tl_gfx_style(8);
    ls.ha = TL_RIGHT;
    ls.va = TL_MIDDLE;
    for (int i = 0; i <= 4; i++) {
        char t[32];
        const double row = seq * i / 4;
        tl_gfx_fmt(row, t, sizeof t);
        tl_gfx_line(g, GRID_X - 3, TOP + row * k, GRID_X, TOP + row * k, 0.8, tl_gfx_rgb(0, 0, 0), 0);
        tl_gfx_text(g, GRID_X - 5, TOP + row * k, t, ls);
    }
    tl_text_style ys = tl_gfx_style(9);
    ys.ha = TL_CENTER;
    ys.va = TL_MIDDLE;
    ys.angle_deg = 90;
    tl_gfx_text(g, GRID_X - 50, TOP + GRID_S / 2, "query row (tokens)", ys);
    /* the counts, a head's */
    const double heads = s->heads;
    char a[96], b[96], c[96];
    snprintf(a, sizeof a, "computed whole: %.0f tiles a head", (r->tiles_computed - r->tiles_masked) / heads);
    snprintf(b, sizeof b, "computed and masked (the diagonal): %.0f", r->tiles_masked / heads);
    snprintf(c, sizeof c, "skipped (above it): %.0f of %.0f (%.0f%%)", r->tiles_skipped / heads, r->tiles_total / heads,
             r->tiles_total ? 100.0 * r->tiles_skipped / r->tiles_total : 0.0);
    const tl_legend_entry le[] = {
        {a, computed_colour(), TL_KEY_BOX, 0, 0},
        {b, masked_colour(), TL_KEY_BOX, 0, 0},
        {c, skipped_colour(), TL_KEY_BOX, 0, 0},
    };
    tl_gfx_legend(g, GRID_X - 40, TOP + GRID_S + 40, le, 3, 0);
}

/* The CUs drawn: CU 0 of each XCD (the schedule deals alike to every XCD), or the first SMs. */
static int sample_cus(const tl_hw *hw, int *cu)
{
    const int xcds = hw->xcds > 1 ? hw->xcds : 1;
    int n = 0;
    for (int i = 0; i < SAMPLE_CUS && n < hw->cus; i++) cu[n++] = xcds > 1 ? (i % xcds) * (hw->cus / xcds) + i / xcds : i;
    return n;
}

/* The share of all block slots busy in each of BINS bins over [0, xmax] (%). */
static void busy_share(const tl_hw *hw, const tl_prefill_tiles_fig *f, double xmax, double *share)
{
    const double bw = xmax / BINS;
    for (int b = 0; b < BINS; b++) share[b] = 0;
    for (long i = 0; i < f->r->blocks; i++) {
        const double a = f->span[i].start_us / bw, e = fmin(f->span[i].end_us / bw, BINS);
        for (long b = (long)a; b < e && b < BINS; b++) share[b] += fmin(e, b + 1.0) - fmax(a, (double)b);
    }
    const double slots = (double)hw->cus * f->r->resident;
    for (int b = 0; b < BINS; b++) share[b] *= 100.0 / slots;
}

/* The key above the timeline: the ramp of query blocks and the two lines. */
static void draw_time_key(tl_gfx *g, double x, double y)
{
    tl_text_style ks = tl_gfx_style(8);
    ks.va = TL_MIDDLE;
    x += tl_gfx_text(g, x, y, "a block by its query block: first rows", ks) + 4;
    for (int i = 0; i < 40; i++) tl_gfx_rect(g, x + i * 1.5, y - 4, 1.6, 8, qblock_colour(i, 40), 0, tl_gfx_rgb(0, 0, 0));
    x += 64;
    x += tl_gfx_text(g, x, y, "last (longest)", ks) + 12;
    tl_gfx_line(g, x, y, x + 18, y, 1.4, tl_gfx_rgb(0, 0, 0), 4);
    x += 22;
    x += tl_gfx_text(g, x, y, "model's end", ks) + 12;
    tl_gfx_line(g, x, y, x + 18, y, 1.4, tl_gfx_palette(6), 1.5);
    tl_gfx_text(g, x + 22, y, "end without the tail", ks);
}

/* The right panel: the sample CUs' block slots in time, and the busy share of all of them. */
static void draw_timeline(tl_gfx *g, const tl_hw *hw, const tl_prefill_tiles_fig *f)
{
    const tl_prefill_model_result *r = f->r;
    const double w = W_PT - TIME_X - 20;
    double end = 0;
    for (long i = 0; i < r->blocks; i++) end = fmax(end, f->span[i].end_us);
    const double xmax = fmax(end, r->time_us) * 1.03;
    char t[200];
    snprintf(t, sizeof t, "the blocks over the CUs in time, longest first (%ld blocks, %d a CU at once, %.1f waves)",
             r->blocks, r->resident, r->waves);
    bold_label(g, TIME_X, TOP - 22, t);
    draw_time_key(g, TIME_X, TOP - 10);
    int cus[SAMPLE_CUS];
    const int ncu = sample_cus(hw, cus), res = r->resident, nl = ncu * res;
    const double lane = LANES_H / nl;
    tl_plot pl;
    tl_plot_init(&pl, TIME_X, TOP, w, LANES_H, 0, xmax, 0, 0, nl, 0);
    pl.y_ticks_off = 1;
    tl_gfx_rect(g, TIME_X, TOP, w, LANES_H, tl_gfx_rgb(0.95, 0.95, 0.95), 0, tl_gfx_rgb(0, 0, 0));
    tl_plot_clip(g, &pl);
    for (long i = 0; i < r->blocks; i++) {
        const tl_prefill_span *sp = &f->span[i];
        int c = 0;
        while (c < ncu && cus[c] != sp->cu) c++;
        if (c == ncu) continue;
        const double x0 = tl_plot_x(&pl, sp->start_us), x1 = tl_plot_x(&pl, sp->end_us);
        const double y0 = TOP + (c * res + sp->slot) * lane;
        const tl_rgba col = qblock_colour(sp->qblock, r->qblocks);
        tl_gfx_rect(g, x0, y0 + 0.5, fmax(x1 - x0, 0.5), lane - 1.0, col, x1 - x0 >= 4 ? 0.5 : 0, tl_gfx_rgb(1, 1, 1));
    }
    for (int c = 1; c < ncu; c++) tl_gfx_line(g, TIME_X, TOP + c * res * lane, TIME_X + w, TOP + c * res * lane, 1.0, tl_gfx_rgb(1, 1, 1), 0);
    const double xm = tl_plot_x(&pl, r->time_us), xb = tl_plot_x(&pl, r->fixed_us + r->body_us);
    tl_gfx_line(g, xb, TOP, xb, TOP + LANES_H, 1.4, tl_gfx_palette(6), 1.5);
    tl_gfx_line(g, xm, TOP, xm, TOP + LANES_H, 1.4, tl_gfx_rgb(0, 0, 0), 4);
    tl_gfx_unclip(g);
    tl_plot_axes(g, &pl, NULL, NULL);
    tl_text_style ls = tl_gfx_style(7.5);
    ls.ha = TL_RIGHT;
    ls.va = TL_MIDDLE;
    for (int c = 0; c < ncu; c++) {
        if (hw->xcds > 1) snprintf(t, sizeof t, "XCD %d, CU %d", cus[c] / (hw->cus / hw->xcds), cus[c]);
        else snprintf(t, sizeof t, "SM %d", cus[c]);
        tl_gfx_text(g, TIME_X - 4, TOP + (c + 0.5) * res * lane, t, ls);
    }
    /* the busy share of every block slot */
    double share[BINS];
    busy_share(hw, f, xmax, share);
    tl_plot_share_strip(g, TIME_X, TOP + LANES_H + 34, w, STRIP_H, xmax, share, BINS, "busy slots (%)");
}

int tl_fig_prefill_tiles(const char *out, const tl_hw *hw, const tl_prefill_tiles_fig *f)
{
    if (!f || !f->r || !f->span || !f->shape || !f->tiles || !f->masked || f->r->blocks < 1)
        return tl_error(TL_EUSAGE, "prefill-tiles", "no schedule to draw");
    if (f->r->resident > 16) return tl_error(TL_EUSAGE, "prefill-tiles", "more than 16 blocks a CU");
    const double H = TOP + GRID_S + 118 + TL_GFX_FOOTER_PT;
    tl_gfx *g = tl_gfx_open(out, W_PT, H);
    if (!g) return tl_gfx_open_status();
    tl_gfx_heading(g, f->title, f->subtitle);
    draw_grid(g, f);
    draw_timeline(g, hw, f);
    tl_gfx_footer(g, f->footer);
    return tl_gfx_close(g);
}

/* ---- the error study as a chart ---- */

int tl_fig_prefill_error(const char *out, const char *const *bars, int nbars, const tl_prefill_err_group *gr,
                         int ngroups, const char *title, const char *subtitle, const char *footer)
{
    if (nbars < 1 || nbars > TL_PREFILL_FIG_MAX_BARS || ngroups < 1 || ngroups > TL_PREFILL_FIG_MAX_GROUPS)
        return tl_error(TL_EUSAGE, "prefill-error", "%d bars in %d groups: 1..%d bars, 1..%d groups", nbars, ngroups,
                        TL_PREFILL_FIG_MAX_BARS, TL_PREFILL_FIG_MAX_GROUPS);
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < ngroups; i++)
        for (int b = 0; b < nbars; b++) {
            const double v = gr[i].rel_rms[b];
            if (!(v > 0 && isfinite(v)))
                return tl_error(TL_EUSAGE, "prefill-error", "%s, %s: relative RMS %g is not finite and positive",
                                gr[i].label, bars[b], v);
            lo = fmin(lo, v), hi = fmax(hi, v);
        }
    const double ylo = pow(10, floor(log10(lo))), yhi = pow(10, ceil(log10(hi) + 0.15));
    const double W = 900, x0 = 80, y0 = 76, pw = W - x0 - 250, ph = 300;
    const double H = y0 + ph + 40 + TL_GFX_FOOTER_PT;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    tl_gfx_heading(g, title, subtitle);
    tl_plot pl;
    tl_plot_init(&pl, x0, y0, pw, ph, 0, ngroups, 0, ylo, yhi, 1);
    pl.x_ticks_off = 1;
    tl_plot_axes(g, &pl, NULL, "relative RMS error of O");
    const double gw = pw / ngroups, bw = gw * 0.8 / nbars;
    tl_text_style vs = tl_gfx_style(7);
    vs.ha = TL_CENTER;
    vs.va = TL_BOTTOM;
    tl_text_style gs = tl_gfx_style(9.5);
    gs.ha = TL_CENTER;
    gs.va = TL_TOP;
    gs.bold = 1;
    for (int i = 0; i < ngroups; i++) {
        const double gx = x0 + i * gw + gw * 0.1;
        for (int b = 0; b < nbars; b++) {
            const double v = gr[i].rel_rms[b], top = tl_plot_y(&pl, v), bottom = y0 + ph;
            const double bx = gx + b * bw;
            tl_gfx_rect(g, bx + 1, top, bw - 2, bottom - top, tl_gfx_palette(b + 1), 0, tl_gfx_rgb(0, 0, 0));
            char t[32];
            snprintf(t, sizeof t, "%.1e", v);
            tl_gfx_text(g, bx + bw / 2, top - 2, t, vs);
        }
        tl_gfx_text(g, x0 + (i + 0.5) * gw, y0 + ph + 8, gr[i].label, gs);
    }
    tl_legend_entry le[TL_PREFILL_FIG_MAX_BARS];
    for (int b = 0; b < nbars; b++) le[b] = (tl_legend_entry){bars[b], tl_gfx_palette(b + 1), TL_KEY_BOX, 0, 0};
    tl_gfx_legend(g, x0 + pw + 14, y0, le, nbars, 0);
    tl_gfx_footer(g, footer);
    return tl_gfx_close(g);
}
