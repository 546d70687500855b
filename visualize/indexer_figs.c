/* visualize/indexer_figs.c: the indexer's pictures (visualize/indexer_figs.h), drawn from the
 * schedules and pipelines they are given. */
#include "indexer_figs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gfx.h"

#define SAMPLE_CUS 8 /* CUs drawn as lanes per panel */
#define BINS 600     /* samples of the busy-share curve */

/* The CUs drawn: CU 0 of each XCD (the model deals alike to every XCD), or the first ones. */
static int sample_cus(const tl_hw *hw, int *cu)
{
    const int xcds = hw->xcds > 1 ? hw->xcds : 1;
    int n = 0;
    if (xcds > 1)
        for (int x = 0; x < xcds && n < SAMPLE_CUS; x++) cu[n++] = x * (hw->cus / xcds);
    else
        for (int c = 0; c < hw->cus && n < SAMPLE_CUS; c++) cu[n++] = c;
    return n;
}

static tl_rgba cu_colour(int i, int alt)
{
    static const int hue[SAMPLE_CUS] = {5, 1, 3, 7, 2, 6, 4, 0};
    tl_rgba c = tl_gfx_palette(hue[i % SAMPLE_CUS]);
    if (hue[i % SAMPLE_CUS] == 0) c = tl_gfx_rgb(0.35, 0.35, 0.35);
    if (alt) c = tl_gfx_rgb(c.r + (1 - c.r) * 0.45, c.g + (1 - c.g) * 0.45, c.b + (1 - c.b) * 0.45);
    return c;
}

/* The busy share of all wave slots in BINS bins over [0, xmax]: each span adds its BLOCK_Q waves
 * over the part of a bin it covers (a difference array for the whole bins, the two ends apart). */
static void busy_share(const tl_hw *hw, const tl_indexer_tiles_panel *p, double xmax, double *share)
{
    double diff[BINS + 1], edge[BINS];
    memset(diff, 0, sizeof diff);
    memset(edge, 0, sizeof edge);
    const double bw = xmax / BINS, q = p->r->block_q;
    for (long i = 0; i < p->r->blocks; i++) {
        const double a = p->span[i].start_us / bw, e = fmin(p->span[i].end_us / bw, BINS);
        if (e <= a) continue;
        const long ia = (long)a, ie = (long)e;
        if (ia == ie) {
            edge[ia] += q * (e - a);
            continue;
        }
        edge[ia] += q * (ia + 1 - a);
        if (ie < BINS) edge[ie] += q * (e - ie);
        diff[ia + 1] += q;
        diff[ie] -= q;
    }
    const double all = (double)hw->cus * p->r->cu_waves;
    double run = 0;
    for (int b = 0; b < BINS; b++) {
        run += diff[b];
        share[b] = 100.0 * (run + edge[b]) / all;
    }
}

static void draw_tiles_panel(tl_gfx *g, const tl_hw *hw, const tl_indexer_tiles_panel *p, double x, double y,
                             double w, double lanes_h, double strip_h, double xmax)
{
    const tl_indexer_result *r = p->r;
    int cus[SAMPLE_CUS];
    const int ncu = sample_cus(hw, cus), waves = r->cu_waves, nl = ncu * waves;
    tl_text_style ts = tl_gfx_style(10);
    ts.bold = 1;
    char t[400];
    snprintf(t, sizeof t, "%s, H = %d, BLOCK_Q %d (%s): model %.0f us, limiter %s, %.0f TFLOP/s", p->label,
             p->shape->heads, r->block_q, p->why_q, r->time_us, r->limiter, r->tflops);
    tl_gfx_text(g, x, y - 30, t, ts);
    tl_text_style ss = tl_gfx_style(8.5);
    const double kmib = (double)(p->shape->prefix + p->shape->rows) * (TL_INDEXER_DIM + 4.0) / 1048576.0;
    snprintf(t, sizeof t,
             "%ld blocks of %d row%s, %d a CU at once (%d of %d wave slots); K to %.1f MiB %s the %.0f MiB L2 of an XCD; "
             "the blocks at the model's rates end at %.0f us",
             r->blocks, r->block_q, r->block_q == 1 ? "" : "s", r->resident, r->resident * r->block_q, waves, kmib,
             r->fits_l2 ? "fits" : "overflows", hw->l2_mib_per_xcd, p->end_us);
    tl_gfx_text(g, x, y - 15, t, ss);
    tl_plot pl;
    tl_plot_init(&pl, x, y, w, lanes_h, 0, xmax, 0, 0, nl, 0);
    pl.y_ticks_off = 1;
    tl_gfx_rect(g, x, y, w, lanes_h, tl_gfx_rgb(0.93, 0.93, 0.93), 0, tl_gfx_rgb(0, 0, 0));
    tl_plot_axes(g, &pl, NULL, NULL);
    tl_text_style ys = tl_gfx_style(9);
    ys.ha = TL_CENTER;
    ys.va = TL_MIDDLE;
    ys.angle_deg = 90;
    tl_gfx_text(g, x - 84, y + lanes_h / 2, "wave slots of a CU", ys);
    tl_text_style ls = tl_gfx_style(7.5);
    ls.ha = TL_RIGHT;
    ls.va = TL_MIDDLE;
    const double lane = lanes_h / nl;
    for (int i = 0; i < ncu; i++) {
        /* lanes top-down: CU i's waves 0..waves-1 */
        const double cy = y + (i + 0.5) * waves * lane;
        if (hw->xcds > 1) snprintf(t, sizeof t, "XCD %d, CU %d", i, cus[i]);
        else snprintf(t, sizeof t, "SM %d", cus[i]);
        tl_gfx_text(g, x - 4, cy, t, ls);
    }
    tl_plot_clip(g, &pl);
    int slot_alt[SAMPLE_CUS * 16 + 16];
    memset(slot_alt, 0, sizeof slot_alt);
    for (long b = 0; b < r->blocks; b++) {
        const tl_indexer_span *s = &p->span[b];
        int i = 0;
        while (i < ncu && cus[i] != s->cu) i++;
        if (i == ncu) continue;
        const double y0 = y + (i * waves + s->slot * r->block_q) * lane;
        const double x0 = tl_plot_x(&pl, s->start_us), x1 = tl_plot_x(&pl, s->end_us);
        const int k = i * 16 + (s->slot & 15);
        tl_gfx_rect(g, x0, y0, fmax(x1 - x0, 0.5), r->block_q * lane, cu_colour(i, slot_alt[k]), 0, tl_gfx_rgb(0, 0, 0));
        slot_alt[k] ^= 1;
    }
    for (int i = 1; i < ncu; i++) tl_gfx_line(g, x, y + i * waves * lane, x + w, y + i * waves * lane, 0.8, tl_gfx_rgb(1, 1, 1), 0);
    const double mx = tl_plot_x(&pl, r->time_us);
    tl_gfx_line(g, mx, y, mx, y + lanes_h, 1.4, tl_gfx_rgb(0, 0, 0), 4);
    tl_gfx_unclip(g);
    /* the busy share of every CU's wave slots */
    const double sy = y + lanes_h + 18;
    double share[BINS];
    busy_share(hw, p, xmax, share);
    tl_plot_share_strip(g, x, sy, w, strip_h, xmax, share, BINS, "busy (%)");
}

int tl_fig_indexer_tiles(const char *out, const tl_hw *hw, const tl_indexer_tiles_panel *p, int np, const char *about)
{
    if (np < 1 || np > 3) return tl_error(TL_EUSAGE, "indexer-tiles", "draw 1 to 3 panels");
    double xmax = 0;
    for (int i = 0; i < np; i++) {
        if (!p[i].r || !p[i].span || p[i].r->blocks < 1) return tl_error(TL_EUSAGE, "indexer-tiles", "a panel has no schedule");
        if (p[i].r->cu_waves > 32) return tl_error(TL_EUSAGE, "indexer-tiles", "more than 32 waves a CU (the most a CDNA CU holds)");
        xmax = fmax(xmax, fmax(p[i].end_us, p[i].r->time_us));
    }
    xmax *= 1.03;
    const double W = 1040, lanes_h = 140, strip_h = 60, head = 40, gap = 48, top = 58;
    const double panel = head + lanes_h + 18 + strip_h + gap;
    const double H = top + np * panel + 4 + TL_GFX_FOOTER_PT;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    tl_gfx_heading(g, "Indexer: the query blocks over the CUs' wave slots in time, a causal square against a skinny shape",
                   about);
    const tl_legend_entry le[] = {
        {"a block: its rows' waves", cu_colour(0, 0), TL_KEY_BOX, 0, 0},
        {"the next block there", cu_colour(0, 1), TL_KEY_BOX, 0, 0},
        {"idle wave slot", tl_gfx_rgb(0.93, 0.93, 0.93), TL_KEY_BOX, 0, 0},
        {"the model's time", tl_gfx_rgb(0, 0, 0), TL_KEY_LINE, 4, 0},
        {"busy wave slots, all CUs", tl_gfx_palette(5), TL_KEY_LINE, 0, 0},
    };
    double lw, lh;
    tl_gfx_legend_size(g, le, 5, &lw, &lh);
    const double px = 96, pw = W - px - lw - 36;
    for (int i = 0; i < np; i++) draw_tiles_panel(g, hw, &p[i], px, top + head + i * panel, pw, lanes_h, strip_h, xmax);
    tl_gfx_legend(g, W - 12, top + head, le, 5, 1);
    char foot[300];
    snprintf(foot, sizeof foot,
             "simulated on preset %s: the model's blocks (simulator/indexer.h, tl_indexer_schedule), each block at the "
             "model's per-tile rate; lanes: CU 0 of each XCD",
             hw->name);
    if (hw->xcds <= 1)
        snprintf(foot, sizeof foot,
                 "simulated on preset %s: the model's blocks (simulator/indexer.h, tl_indexer_schedule), each block at "
                 "the model's per-tile rate; lanes: the first %d SMs",
                 hw->name, SAMPLE_CUS);
    tl_gfx_footer(g, foot);
    return tl_gfx_close(g);
}

/* ---- Figure 7 ---- */

static tl_rgba step_colour(const tl_indexer_step *s)
{
    switch (s->kind) {
    case TL_IDX_Q: return tl_gfx_palette(7);
    case TL_IDX_LOAD: return s->index % 2 ? tl_gfx_palette(2) : tl_gfx_palette(5);
    case TL_IDX_MMA: return tl_gfx_palette(1);
    case TL_IDX_EPI: return tl_gfx_palette(3);
    case TL_IDX_NAIVE_LOAD: return tl_gfx_rgb(0.6, 0.6, 0.6);
    default: return tl_gfx_palette(6);
    }
}

/* The lane of a step: naive 0 memory, 1 ALU; tiled 0 Q, 1 buffer 0, 2 buffer 1, 3 matrix, 4 epilogue. */
static int step_lane(const tl_indexer_step *s)
{
    switch (s->kind) {
    case TL_IDX_Q: return 0;
    case TL_IDX_LOAD: return 1 + s->buffer;
    case TL_IDX_MMA: return 3;
    case TL_IDX_EPI: return 4;
    case TL_IDX_NAIVE_LOAD: return 0;
    default: return 1;
    }
}

static void draw_pipe_panel(tl_gfx *g, const tl_indexer_step *st, int n, int naive, const char *title,
                            const char *const *lanes, int nl, double x, double y, double w, double xmax)
{
    const double lane_h = 24, h = nl * lane_h;
    tl_text_style ts = tl_gfx_style(10);
    ts.bold = 1;
    tl_gfx_text(g, x - 150, y - 18, title, ts);
    tl_plot pl;
    tl_plot_init(&pl, x, y, w, h, 0, xmax, 0, 0, nl, 0);
    pl.y_ticks_off = 1;
    tl_plot_axes(g, &pl, "time from the block's start (us)", NULL);
    tl_text_style ls = tl_gfx_style(8.5);
    ls.ha = TL_RIGHT;
    ls.va = TL_MIDDLE;
    for (int i = 0; i < nl; i++) tl_gfx_text(g, x - 5, y + (i + 0.5) * lane_h, lanes[i], ls);
    tl_plot_clip(g, &pl);
    tl_text_style bs = tl_gfx_style(7);
    bs.ha = TL_CENTER;
    bs.va = TL_MIDDLE;
    /* the naive bars are labelled all or none: when the widest head number fits every bar */
    int label_naive = 0;
    for (int i = 0; naive && i < n; i++)
        if (st[i].naive && st[i].kind == TL_IDX_NAIVE_FMA) {
            char wide[16];
            double tw, th;
            snprintf(wide, sizeof wide, "h%d", st[i].index);
            tl_gfx_text_size(g, wide, 7, 0, &tw, &th);
            label_naive = tw + 4 < tl_plot_x(&pl, st[i].end_us) - tl_plot_x(&pl, st[i].start_us);
        }
    for (int i = 0; i < n; i++) {
        if (st[i].naive != naive) continue;
        const double x0 = tl_plot_x(&pl, st[i].start_us), x1 = tl_plot_x(&pl, st[i].end_us);
        const double y0 = y + step_lane(&st[i]) * lane_h + 3;
        const tl_rgba c = step_colour(&st[i]);
        tl_gfx_rect(g, x0, y0, fmax(x1 - x0, 0.5), lane_h - 6, c, 0.6, tl_gfx_rgb(1, 1, 1));
        char lab[16];
        if (st[i].kind == TL_IDX_LOAD || st[i].kind == TL_IDX_MMA || st[i].kind == TL_IDX_EPI)
            snprintf(lab, sizeof lab, "%d", st[i].index);
        else if (st[i].kind == TL_IDX_Q) snprintf(lab, sizeof lab, "Q, w");
        else if (label_naive && st[i].kind == TL_IDX_NAIVE_FMA) snprintf(lab, sizeof lab, "h%d", st[i].index);
        else lab[0] = 0;
        double tw, th;
        tl_gfx_text_size(g, lab, 7, 0, &tw, &th);
        if (lab[0] && tw + 4 < x1 - x0) {
            bs.color = tl_gfx_contrast(c);
            tl_gfx_text(g, (x0 + x1) / 2, y0 + (lane_h - 6) / 2, lab, bs);
        }
    }
    tl_gfx_unclip(g);
}

int tl_fig_indexer_pipeline(const char *out, const tl_indexer_step *st, int n, const tl_indexer_pipe *c,
                            const char *about, const char *preset)
{
    if (n < 1 || !st || !c) return tl_error(TL_EUSAGE, "indexer-pipeline", "no steps");
    const double W = 1000, top = 74, px = 180, pw = W - px - 30;
    const double H = top + 22 + 2 * 24 + 64 + 22 + 5 * 24 + 48 + TL_GFX_FOOTER_PT + 6;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    tl_gfx_heading(g, "Indexer, one block: the naive per-score loop against register-resident queries and double-buffered KV tiles",
                   about);
    char t[300];
    snprintf(t, sizeof t, "the tiled kernel is %.0fx faster here (%.2f us against %.1f us)",
             c->naive_us / c->tiled_us, c->tiled_us, c->naive_us);
    tl_gfx_text(g, 16, 45, t, tl_gfx_style(9));
    static const char *const nl[] = {"memory: q[h], k re-read", "vector ALU: multiply-adds"};
    static const char *const tl_[] = {"Q, w -> registers", "HBM/L2 -> LDS buffer 0", "HBM/L2 -> LDS buffer 1",
                                      "matrix cores (MFMA/MMA)", "vector ALU: epilogue"};
    snprintf(t, sizeof t, "naive: one score a lane (%d wave%s), per head: re-read, then %d multiply-adds: %.1f us",
             c->waves, c->waves == 1 ? "" : "s", TL_INDEXER_DIM, c->naive_us);
    const double y1 = top + 22;
    draw_pipe_panel(g, st, n, 1, t, nl, 2, px, y1, pw, c->naive_us * 1.02);
    snprintf(t, sizeof t, "tiled: %d tiles of %d positions, two LDS buffers in turn: %.2f us", c->tiles, c->tile,
             c->tiled_us);
    const double y2 = y1 + 2 * 24 + 64 + 22;
    draw_pipe_panel(g, st, n, 0, t, tl_, 5, px, y2, pw, c->tiled_us * 1.02);
    char foot[300];
    snprintf(foot, sizeof foot,
             "simulated on preset %s: one block alone on a CU at the model's rates (simulator/indexer.h, "
             "tl_indexer_pipeline); the two panels have their own time axes",
             preset);
    tl_gfx_footer(g, foot);
    return tl_gfx_close(g);
}
