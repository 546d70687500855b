/* visualize/decode_figs.c: split-KV decode's picture (visualize/decode_figs.h). */
#include "decode_figs.h"

#include <math.h>
#include <stdio.h>

#include "gfx.h"

#define W_PT 960.0
#define LEFT 120.0       /* room for the lane labels */
#define CONTEXT_W 440.0  /* the positions axis */
#define TIME_X (LEFT + CONTEXT_W + 40.0)
#define TIME_W 170.0
#define TREE_X (TIME_X + TIME_W + 24.0)
#define MIN_BAND_PT 4.0  /* a scope narrower than this (the window of a long context) is drawn this wide */
#define TOP 64.0
#define BAND_H 34.0

/* A shard's colour: its place in the row on the perceptual ramp (0.05-0.9: the ends stay readable). */
static tl_rgba shard_colour(int s, int n) { return tl_gfx_ramp(n > 1 ? 0.05 + 0.85 * s / (n - 1) : 0.4); }

/* The context strip: the scope's band and the selected positions' ticks. */
static void draw_context(tl_gfx *g, const tl_decode_fig *f, const tl_plot *pl)
{
    const double y = pl->y, h = pl->h;
    tl_gfx_rect(g, pl->x, y, pl->w, h, tl_gfx_rgb(0.95, 0.95, 0.95), 0.6, tl_gfx_rgb(0.5, 0.5, 0.5));
    if (f->win_hi > f->win_lo) {
        const double x1 = tl_plot_x(pl, (double)f->win_hi), x0 = fmin(tl_plot_x(pl, (double)f->win_lo), x1 - MIN_BAND_PT);
        tl_gfx_rect(g, x0, y, x1 - x0, h, tl_gfx_alpha(tl_gfx_palette(1), 0.85), 0, tl_gfx_rgb(0, 0, 0));
    }
    for (long i = 0; i < f->n_selected; i++) {
        const double x = tl_plot_x(pl, f->selected[i] + 0.5);
        tl_gfx_line(g, x, y + 3, x, y + h - 3, 0.6, shard_colour(f->selected_shard[i], f->shards), 0);
    }
}

/* Lane s: its window part and its selected positions, its label at the left. */
static void draw_lane(tl_gfx *g, const tl_decode_fig *f, const tl_plot *pl, int s, double y, double lane)
{
    const tl_decode_fig_shard *sh = &f->shard[s];
    const tl_rgba c = shard_colour(s, f->shards);
    tl_gfx_line(g, pl->x, y + lane / 2, pl->x + pl->w, y + lane / 2, 0.4, tl_gfx_rgb(0.8, 0.8, 0.8), 0);
    if (sh->win_hi > sh->win_lo) {
        const double x1 = tl_plot_x(pl, (double)sh->win_hi), x0 = fmin(tl_plot_x(pl, (double)sh->win_lo), x1 - MIN_BAND_PT);
        tl_gfx_rect(g, x0, y + lane * 0.2, x1 - x0, lane * 0.6, tl_gfx_palette(1), 0.8, c);
    }
    for (long i = 0; i < f->n_selected; i++)
        if (f->selected_shard[i] == s) {
            const double x = tl_plot_x(pl, f->selected[i] + 0.5);
            tl_gfx_line(g, x, y + lane * 0.15, x, y + lane * 0.85, 0.7, c, 0);
        }
    char t[64];
    snprintf(t, sizeof t, "shard %d: %ld key%s", s, sh->keys, sh->keys == 1 ? "" : "s");
    tl_text_style ls = tl_gfx_style(lane >= 9 ? 7.5 : 6);
    ls.ha = TL_RIGHT;
    ls.va = TL_MIDDLE;
    if (sh->keys == 0) ls.color = tl_gfx_rgb(0.5, 0.5, 0.5);
    tl_gfx_text(g, pl->x - 6, y + lane / 2, t, ls);
}

/* The merge tree: each non-empty shard's bar end into one node, out to O and LSE. */
static void draw_merge(tl_gfx *g, const tl_decode_fig *f, const tl_plot *tp, double lanes_y, double lane)
{
    const double nx = TREE_X + 40, ny = lanes_y + lane * f->shards / 2;
    for (int s = 0; s < f->shards; s++) {
        if (f->shard[s].keys == 0) continue;
        const double y = lanes_y + (s + 0.5) * lane, x0 = tl_plot_x(tp, f->shard[s].us);
        tl_gfx_line(g, x0, y, TREE_X, y, 0.4, tl_gfx_rgb(0.75, 0.75, 0.75), 2);
        tl_gfx_line(g, TREE_X, y, nx, ny, 0.6, shard_colour(s, f->shards), 0);
    }
    tl_gfx_marker(g, nx, ny, 0, 12, tl_gfx_palette(6));
    tl_gfx_line(g, nx + 6, ny, nx + 24, ny, 1.2, tl_gfx_rgb(0, 0, 0), 0);
    tl_text_style ts = tl_gfx_style(8.5);
    ts.va = TL_MIDDLE;
    tl_gfx_text(g, nx + 27, ny, "O, LSE", ts);
    ts.va = TL_TOP;
    ts.size = 7.5;
    char t[96];
    if (f->shards > 1) snprintf(t, sizeof t, "merge: %.2f us", f->merge_us);
    else snprintf(t, sizeof t, "one shard: no merge");
    tl_gfx_text(g, nx + 10, ny + 12, t, ts);
    snprintf(t, sizeof t, "the call: %.2f us", f->total_us);
    tl_gfx_text(g, nx + 10, ny + 23, t, ts);
}

int tl_fig_decode_shards(const char *out, const tl_decode_fig *f)
{
    if (f->shards < 1 || f->shards > TL_DECODE_FIG_MAX_SHARDS)
        return tl_error(TL_EUSAGE, "decode-shards", "%d shards: the picture draws 1 to %d lanes", f->shards,
                        TL_DECODE_FIG_MAX_SHARDS);
    if (f->context < 1) return tl_error(TL_EUSAGE, "decode-shards", "an empty context: nothing to draw");
    const double lane = f->shards <= 24 ? 14.0 : f->shards <= 40 ? 10.0 : 8.0;
    const double lanes_y = TOP + BAND_H + 58, lanes_h = lane * f->shards;
    const double H = lanes_y + lanes_h + 44 + TL_GFX_FOOTER_PT + 8;
    tl_gfx *g = tl_gfx_open(out, W_PT, H);
    if (!g) return tl_gfx_open_status();
    tl_gfx_heading(g, f->title, f->subtitle);
    tl_plot cp;
    tl_plot_init(&cp, LEFT, TOP + 8, CONTEXT_W, BAND_H, 0, (double)f->context, 0, 0, 1, 0);
    cp.y_ticks_off = 1;
    draw_context(g, f, &cp);
    tl_plot_axes(g, &cp, NULL, NULL);
    tl_text_style ls = tl_gfx_style(8);
    ls.ha = TL_RIGHT;
    ls.va = TL_MIDDLE;
    tl_gfx_text(g, LEFT - 6, TOP + 8 + BAND_H / 2, "the context", ls);
    tl_text_style ks = tl_gfx_style(8);
    ks.va = TL_TOP;
    char t[200];
    if (f->n_selected)
        snprintf(t, sizeof t, "orange band: %s (at least %.0f pt wide);  ticks: %ld selected position%s outside it, "
                 "coloured by shard", f->scope_name, MIN_BAND_PT, f->n_selected, f->n_selected == 1 ? "" : "s");
    else
        snprintf(t, sizeof t, "orange band: %s", f->scope_name);
    tl_gfx_text(g, LEFT, TOP + 8 + BAND_H + 18, t, ks);
    /* the lanes share the context's axis */
    tl_plot lp;
    tl_plot_init(&lp, LEFT, lanes_y, CONTEXT_W, lanes_h, 0, (double)f->context, 0, 0, 1, 0);
    lp.y_ticks_off = 1;
    for (int s = 0; s < f->shards; s++) draw_lane(g, f, &lp, s, lanes_y + s * lane, lane);
    tl_plot_axes(g, &lp, "position in the context (tokens)", NULL);
    /* each shard's simulated time */
    double most = 0;
    for (int s = 0; s < f->shards; s++) most = fmax(most, f->shard[s].us);
    tl_plot tp;
    tl_plot_init(&tp, TIME_X, lanes_y, TIME_W, lanes_h, 0, most > 0 ? most * 1.1 : 1, 0, 0, 1, 0);
    tp.y_ticks_off = 1;
    for (int s = 0; s < f->shards; s++) {
        const double x1 = tl_plot_x(&tp, f->shard[s].us);
        tl_gfx_rect(g, TIME_X, lanes_y + s * lane + lane * 0.15, x1 - TIME_X, lane * 0.7, shard_colour(s, f->shards), 0,
                    tl_gfx_rgb(0, 0, 0));
    }
    tl_plot_axes(g, &tp, "work-group time (us)", NULL);
    tl_text_style hs = tl_gfx_style(8.5);
    hs.bold = 1;
    hs.va = TL_BOTTOM;
    tl_gfx_text(g, LEFT, lanes_y - 6, "the shards: their keys over the context", hs);
    tl_gfx_text(g, TIME_X, lanes_y - 6, "each shard's time", hs);
    tl_gfx_text(g, TREE_X, lanes_y - 6, "the merge", hs);
    draw_merge(g, f, &tp, lanes_y, lane);
    tl_gfx_footer(g, f->footer);
    return tl_gfx_close(g);
}
