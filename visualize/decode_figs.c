/* visualize/decode_figs.c: split-KV decode's picture (visualize/decode_figs.h). */
#include "decode_figs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "csv.h"
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

/* ---- a measured run (`bench decode --trace`) ---- */

int tl_decode_trace_read(const char *path, int batch, int topk, tl_decode_trace_case *tc, tl_decode_trace_rec *rec,
                         int cap, int *n)
{
    static const char *const cols[] = {"kind", "kv", "batch", "heads", "window", "topk", "shards", "launch",
                                       "row", "hblock", "shard", "run_end_us", "source"};
    enum { C_KIND, C_KV, C_BATCH, C_HEADS, C_WINDOW, C_TOPK, C_SHARDS, C_LAUNCH, C_ROW, C_HBLOCK, C_SHARD, C_END,
           C_SOURCE, C_N_COLS };
    static const char *const tnames[TL_DECODE_TRACE_FIG_POINTS] = {"entry_us", "ready_us", "landed_us", "tiles_us",
                                                                   "end_us"};
    *n = 0;
    memset(tc, 0, sizeof *tc);
    char *text = NULL;
    int rc = tl_text_file_read(path, "trace", 64u << 20, &text);
    if (rc) return rc;
    const char *pp = text;
    tl_csv_row h = {0}, r = {0};
    int line = 1, got = tl_csv_next(&pp, &h, &line), col[C_N_COLS], tcol[TL_DECODE_TRACE_FIG_POINTS];
    if (got < 0) rc = tl_csv_fail(path, &h, got);
    else if (got == 0) rc = tl_error(TL_EUSAGE, path, "empty: not a bench decode --trace file");
    if (!rc) rc = tl_csv_cols(path, &h, cols, C_N_COLS, col, "bench decode --trace");
    if (!rc) rc = tl_csv_cols(path, &h, tnames, TL_DECODE_TRACE_FIG_POINTS, tcol, "bench decode --trace");
    int first = 1;
    while (!rc && (got = tl_csv_next(&pp, &r, &line)) != 0) {
        if (got < 0) {
            rc = tl_csv_fail(path, &r, got);
            break;
        }
        if (tl_csv_blank(&r)) continue;
        double v[C_N_COLS], t[TL_DECODE_TRACE_FIG_POINTS];
        for (int i = C_BATCH; !rc && i <= C_END; i++) {
            if (i == C_LAUNCH) continue;
            const double lo = i == C_ROW || i == C_HBLOCK || i == C_SHARD ? -1 : 0;
            if (tl_parse_double(tl_csv_field(&r, col[i]), cols[i], &v[i]) || !isfinite(v[i]) || v[i] < lo ||
                v[i] > 1e9) {
                tl_clear_error();
                rc = tl_error(TL_EUSAGE, path, "line %d: %s '%s' is not a number in range", r.line, cols[i],
                              tl_csv_field(&r, col[i]));
            }
        }
        for (int i = 0; !rc && i < TL_DECODE_TRACE_FIG_POINTS; i++)
            if (tl_parse_double(tl_csv_field(&r, tcol[i]), tnames[i], &t[i]) || !isfinite(t[i]) || fabs(t[i]) > 1e9) {
                tl_clear_error();
                rc = tl_error(TL_EUSAGE, path, "line %d: %s '%s' is not a number", r.line, tnames[i],
                              tl_csv_field(&r, tcol[i]));
            }
        const char *launch = tl_csv_field(&r, col[C_LAUNCH]);
        const int merge = strcmp(launch, "merge") == 0;
        if (!rc && !merge && strcmp(launch, "shard") != 0)
            rc = tl_error(TL_EUSAGE, path, "line %d: launch '%s': want shard or merge", r.line, launch);
        if (rc) break;
        if ((batch >= 0 && (int)v[C_BATCH] != batch) || (topk >= 0 && (int)v[C_TOPK] != topk)) {
            if (!first) break; /* past the case drawn */
            continue;
        }
        if (first) { /* the file's first matching case is the one drawn */
            snprintf(tc->kind, sizeof tc->kind, "%s", tl_csv_field(&r, col[C_KIND]));
            snprintf(tc->kv, sizeof tc->kv, "%s", tl_csv_field(&r, col[C_KV]));
            snprintf(tc->source, sizeof tc->source, "%s", tl_csv_field(&r, col[C_SOURCE]));
            tc->batch = (int)v[C_BATCH], tc->heads = (int)v[C_HEADS], tc->topk = (int)v[C_TOPK];
            tc->shards = (int)v[C_SHARDS], tc->window = (long)v[C_WINDOW], tc->run_end_us = v[C_END];
            first = 0;
        }
        if ((int)v[C_BATCH] != tc->batch || (int)v[C_TOPK] != tc->topk || (int)v[C_SHARDS] != tc->shards ||
            (int)v[C_HEADS] != tc->heads || (long)v[C_WINDOW] != tc->window || v[C_END] != tc->run_end_us)
            break; /* the next case */
        if (*n >= cap) {
            rc = tl_error(TL_EUSAGE, path, "line %d: more than %d blocks in one case", r.line, cap);
            break;
        }
        tl_decode_trace_rec *e = &rec[(*n)++];
        e->merge = merge, e->row = (long)v[C_ROW], e->hblock = (int)v[C_HBLOCK], e->shard = (int)v[C_SHARD];
        for (int i = 0; i < TL_DECODE_TRACE_FIG_POINTS; i++) e->t[i] = t[i];
    }
    if (!rc && first)
        rc = batch >= 0 || topk >= 0 ? tl_error(TL_EUSAGE, path, "no case of batch %d and k %d (-1: any)", batch, topk)
                                     : tl_error(TL_EUSAGE, path, "no data rows");
    tl_csv_free(&h);
    tl_csv_free(&r);
    free(text);
    return rc;
}

/* The median of the differences t[b] - t[a] over the records of one launch (merge 0 or 1); NAN when none. */
static double phase_median(const tl_decode_trace_rec *rec, int n, int merge, int a, int b)
{
    double *d = malloc(sizeof *d * (size_t)(n > 0 ? n : 1));
    int m = 0;
    if (!d) return NAN;
    for (int i = 0; i < n; i++)
        if (rec[i].merge == merge) d[m++] = rec[i].t[b] - rec[i].t[a];
    double med = NAN;
    if (m) {
        qsort(d, (size_t)m, sizeof *d, tl_cmp_double);
        med = m % 2 ? d[m / 2] : 0.5 * (d[m / 2 - 1] + d[m / 2]);
    }
    free(d);
    return med;
}

static const char *const phase_name[4] = {"start to list and first positions ready", "the first tile landed and stored",
                                          "the tiles (QK, softmax, PV)", "O and LSE written"};

int tl_fig_decode_trace(const char *out, const char *footer, const tl_decode_trace_case *tc, const tl_decode_trace_rec *rec,
                        int n)
{
    int lane_of[TL_DECODE_FIG_MAX_SHARDS], lanes = 0, merges = 0, groups = 0;
    double t_end = tc->run_end_us, m_entry = INFINITY, m_ready = INFINITY, m_end = 0;
    for (int i = 0; i < n; i++) {
        const tl_decode_trace_rec *e = &rec[i];
        if (e->merge) {
            merges++;
            m_entry = fmin(m_entry, e->t[0]), m_ready = fmin(m_ready, e->t[1]), m_end = fmax(m_end, e->t[4]);
        } else {
            groups++;
            if (e->row == 0 && e->hblock == 0 && lanes < TL_DECODE_FIG_MAX_SHARDS) lane_of[lanes++] = i;
        }
        t_end = fmax(t_end, e->t[4]);
    }
    if (lanes == 0) return tl_error(TL_EUSAGE, "decode-shards", "the trace holds no shard group of row 0, head block 0");
    const double lane = lanes <= 24 ? 14.0 : lanes <= 40 ? 10.0 : 8.0;
    const double plot_y = TOP + 30, plot_h = lane * (lanes + (merges ? 1.5 : 0));
    const double H = plot_y + plot_h + 44 + 16 * 6 + TL_GFX_FOOTER_PT + 8;
    tl_gfx *g = tl_gfx_open(out, W_PT, H);
    if (!g) return tl_gfx_open_status();
    char title[200], sub[400], t[300];
    snprintf(title, sizeof title, "Dual-scope decode, measured: where each shard's time goes (batch %d, %d shard%s)",
             tc->batch, tc->shards, tc->shards == 1 ? "" : "s");
    snprintf(sub, sizeof sub, "%s latent KV, H = %d, window %ld, top-%d; %d shard groups and %d merge blocks traced; "
             "one run after the L2 flush (direct launches); lanes: row 0, head block 0", tc->kv, tc->heads, tc->window,
             tc->topk, groups, merges);
    tl_gfx_heading(g, title, sub);
    tl_plot pl;
    tl_plot_init(&pl, LEFT, plot_y, W_PT - LEFT - 40, plot_h, 0, t_end * 1.04, 0, 0, 1, 0);
    pl.y_ticks_off = 1;
    tl_text_style ls = tl_gfx_style(lane >= 9 ? 7.5 : 6);
    ls.ha = TL_RIGHT;
    ls.va = TL_MIDDLE;
    for (int k = 0; k < lanes; k++) {
        const tl_decode_trace_rec *e = &rec[lane_of[k]];
        const double y = plot_y + k * lane;
        tl_gfx_line(g, pl.x, y + lane / 2, tl_plot_x(&pl, e->t[0]), y + lane / 2, 0.4, tl_gfx_rgb(0.8, 0.8, 0.8), 2);
        for (int p = 0; p < 4; p++) {
            const double x0 = tl_plot_x(&pl, e->t[p]), x1 = tl_plot_x(&pl, e->t[p + 1]);
            if (x1 > x0) tl_gfx_rect(g, x0, y + lane * 0.15, x1 - x0, lane * 0.7, tl_gfx_palette(p), 0, tl_gfx_rgb(0, 0, 0));
        }
        snprintf(t, sizeof t, "shard %d", e->shard);
        tl_gfx_text(g, pl.x - 6, y + lane / 2, t, ls);
    }
    if (merges) {
        const double y = plot_y + (lanes + 0.25) * lane;
        tl_gfx_line(g, tl_plot_x(&pl, m_entry), y + lane / 2, tl_plot_x(&pl, m_ready), y + lane / 2, 0.8,
                    tl_gfx_rgb(0.55, 0.55, 0.55), 2);
        tl_gfx_rect(g, tl_plot_x(&pl, m_ready), y + lane * 0.15, tl_plot_x(&pl, m_end) - tl_plot_x(&pl, m_ready),
                    lane * 0.7, tl_gfx_palette(4), 0, tl_gfx_rgb(0, 0, 0));
        snprintf(t, sizeof t, "merge (%d blocks)", merges);
        tl_gfx_text(g, pl.x - 6, y + lane / 2, t, ls);
    }
    const double xe = tl_plot_x(&pl, tc->run_end_us);
    tl_gfx_line(g, xe, plot_y, xe, plot_y + plot_h, 1.0, tl_gfx_rgb(0, 0, 0), 3);
    tl_text_style es = tl_gfx_style(7.5);
    es.ha = TL_RIGHT;
    es.va = TL_BOTTOM;
    snprintf(t, sizeof t, "the run's end (+ one launch): %.2f us", tc->run_end_us);
    tl_gfx_text(g, xe - 3, plot_y - 2, t, es);
    tl_plot_axes(g, &pl, "time from the run's start (us; entries by the device clock, ~1 us steps; phases by the SM clock)",
                 NULL);
    /* the key and the medians */
    tl_legend_entry key[5];
    int nk = 0;
    for (int p = 0; p < 4; p++) key[nk++] = (tl_legend_entry){phase_name[p], tl_gfx_palette(p), TL_KEY_BOX, 0, 0};
    if (merges) key[nk++] = (tl_legend_entry){"merge blocks: after their wait (dashed: waiting)", tl_gfx_palette(4), TL_KEY_BOX, 0, 0};
    const double ky = plot_y + plot_h + 40;
    tl_gfx_legend(g, LEFT, ky, key, nk, 0);
    tl_text_style ms = tl_gfx_style(8);
    ms.va = TL_TOP;
    double y = ky;
    snprintf(t, sizeof t, "medians over the %d shard groups:", groups);
    tl_gfx_text(g, LEFT + 420, y, t, ms), y += 13;
    for (int p = 0; p < 4; p++) {
        snprintf(t, sizeof t, "%s: %.2f us", phase_name[p], phase_median(rec, n, 0, p, p + 1));
        tl_gfx_text(g, LEFT + 430, y, t, ms), y += 12;
    }
    if (merges) {
        snprintf(t, sizeof t, "merge blocks (%d): wait ends %.2f us after entry, rows %.2f us", merges,
                 phase_median(rec, n, 1, 0, 1), phase_median(rec, n, 1, 1, 4));
        tl_gfx_text(g, LEFT + 430, y, t, ms);
    }
    tl_gfx_footer(g, footer);
    return tl_gfx_close(g);
}
