/* The roofline figure. See figures.h. */
#include "figures.h"

/* A point set's provenance for the footer, with ISO timestamps cut to their date
 * ("measured on NVIDIA H200 2026-11-29T10:18:05Z" -> "... 2026-11-29"), so that sets measured in
 * one session read as one source. */
static void short_source(const char *src, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = src; *p && n + 1 < cap; p++) {
        int iso = p - src >= 10 && p[0] == 'T' && p[-3] == '-' && p[-6] == '-' && p[1] >= '0' && p[1] <= '9';
        if (iso) {
            while (*p && *p != ' ' && *p != ',' && *p != ')' && *p != ';') p++;
            if (!*p) break;
        }
        out[n++] = *p;
    }
    out[n] = '\0';
}
#include "gfx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define FIG_W 760.0
#define FIG_H 520.0

/* ---- label placement: first free spot among candidates, else skipped ---- */

typedef struct {
    double x, y, w, h;
} box;

#define MAX_BOXES 4096
#define MAX_LABELS 1024
typedef struct {
    box b[MAX_BOXES];
    int n;
    box area; /* labels must lie inside */
    box lab[MAX_LABELS]; /* the labels placed so far (also in b), which leader lines must not cross */
    int nlab;
} placer;

static int overlaps(box a, box b)
{
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

static int inside(box a, box area)
{
    return a.x >= area.x && a.y >= area.y && a.x + a.w <= area.x + area.w &&
           a.y + a.h <= area.y + area.h;
}

static int box_free(const placer *pl, box c)
{
    if (!inside(c, pl->area)) return 0;
    for (int i = 0; i < pl->n; i++)
        if (overlaps(c, pl->b[i])) return 0;
    return 1;
}

static void reserve(placer *pl, box b)
{
    if (pl->n < MAX_BOXES) pl->b[pl->n++] = b;
}

/* Reserves a text box placed without place_near (the legend, ceiling, ridge, HBM and band labels):
 * point labels keep off it and their leader lines do not cross it. */
static void reserve_label(placer *pl, box b)
{
    reserve(pl, b);
    if (pl->nlab < MAX_LABELS) pl->lab[pl->nlab++] = b;
}

/* Reserves the neighbourhood of a line segment (small boxes every few points) so that labels keep
 * clear of drawn lines. */
static void reserve_line(placer *pl, double x0, double y0, double x1, double y1)
{
    double len = hypot(x1 - x0, y1 - y0);
    int steps = (int)(len / 4) + 1;
    for (int i = 0; i <= steps && pl->n < MAX_BOXES; i++) {
        double t = (double)i / steps;
        reserve(pl, (box){x0 + t * (x1 - x0) - 1.5, y0 + t * (y1 - y0) - 1.5, 3, 3});
    }
}

#define LEADER_MIN_PT 9.0 /* a label this close to its point gets no leader line */

/* The point where a leader line from the anchor (ax, ay) meets label box b: its nearest edge. */
static void leader_end(box b, double ax, double ay, double *cx, double *cy)
{
    *cx = b.x + (b.x + b.w < ax ? b.w : b.x > ax ? 0 : b.w / 2);
    *cy = b.y + (b.y + b.h < ay ? b.h : b.y > ay ? 0 : b.h / 2);
}

/* 1 when the leader line from (ax, ay) to label box c would run through a label placed earlier. */
static int leader_crosses(const placer *pl, double ax, double ay, box c)
{
    double cx, cy;
    leader_end(c, ax, ay, &cx, &cy);
    double len = hypot(cx - ax, cy - ay);
    if (len <= LEADER_MIN_PT) return 0; /* no leader drawn */
    for (double t = 4 / len; t < 1; t += 2 / len) {
        double px = ax + t * (cx - ax), py = ay + t * (cy - ay);
        for (int i = 0; i < pl->nlab; i++) {
            box b = pl->lab[i];
            if (px > b.x && px < b.x + b.w && py > b.y && py < b.y + b.h) return 1;
        }
    }
    return 0;
}

/* Places a label of size w x h near the anchor (ax, ay): tries spots around it at growing
 * distances (with leader: also refusing spots whose leader line would cross an earlier label).
 * Returns 1 and the box when a free spot was found (and reserves it). */
static int place_near_leader(placer *pl, double ax, double ay, double w, double h, int leader, box *out)
{
    static const double dirs[8][2] = {{1, -1}, {1, 1}, {-1, -1}, {-1, 1},
                                      {1, 0},  {-1, 0}, {0, -1},  {0, 1}};
    for (int ring = 0; ring < 14; ring++) {
        double d = 4 + ring * 8;
        for (int k = 0; k < 8; k++) {
            double dx = dirs[k][0], dy = dirs[k][1];
            box c = {0, 0, w, h};
            c.x = dx > 0 ? ax + d : dx < 0 ? ax - d - w : ax - w / 2;
            c.y = dy > 0 ? ay + d * 0.7 : dy < 0 ? ay - d * 0.7 - h : ay - h / 2;
            if (box_free(pl, c) && !(leader && leader_crosses(pl, ax, ay, c))) {
                reserve_label(pl, c);
                *out = c;
                return 1;
            }
        }
    }
    return 0;
}

static int place_near(placer *pl, double ax, double ay, double w, double h, box *out)
{
    return place_near_leader(pl, ax, ay, w, h, 0, out);
}

/* ---- ceilings ---- */

typedef struct {
    const char *name;
    tl_ceiling c;
    int colour;
} dtype_ceiling;

static int collect_ceilings(const tl_hw *hw, dtype_ceiling *out)
{
    const dtype_ceiling all[4] = {
        {"BF16", hw->ceilings.bf16_tflops, 5},
        {"FP8", hw->ceilings.fp8_tflops, 6},
        {"FP6", hw->ceilings.fp6_tflops, 3},
        {"FP4", hw->ceilings.fp4_tflops, 7},
    };
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (all[i].c.datasheet > 0 || all[i].c.measured > 0) out[n++] = all[i];
    return n;
}

static double max_ceiling(const dtype_ceiling *c, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fmax(c[i].c.datasheet, c[i].c.measured));
    return m;
}

/* Draws one roof: compute ceiling tflops with memory slope bw (GB/s), from the ridge rightwards. */
static void draw_ceiling(tl_gfx *g, placer *lp, const tl_plot *pl, double tflops, double bw_gbps,
                         tl_rgba col, double dash)
{
    double ridge = tflops / (bw_gbps / 1000.0);
    double x0 = fmax(ridge, pl->xa.lo);
    tl_gfx_line(g, tl_plot_x(pl, x0), tl_plot_y(pl, tflops), tl_plot_x(pl, pl->xa.hi),
                tl_plot_y(pl, tflops), 1.6, col, dash);
    reserve_line(lp, tl_plot_x(pl, x0), tl_plot_y(pl, tflops), tl_plot_x(pl, pl->xa.hi),
                 tl_plot_y(pl, tflops));
}

static void draw_slope(tl_gfx *g, placer *lp, const tl_plot *pl, double bw_gbps,
                       double top_tflops, tl_rgba col, double dash)
{
    double tbs = bw_gbps / 1000.0;
    double x0 = pl->xa.lo, x1 = fmin(top_tflops / tbs, pl->xa.hi);
    double y0 = x0 * tbs;
    if (y0 < pl->ya.lo) { /* start where the slope enters the plot */
        x0 = pl->ya.lo / tbs;
        y0 = pl->ya.lo;
    }
    tl_gfx_line(g, tl_plot_x(pl, x0), tl_plot_y(pl, y0), tl_plot_x(pl, x1),
                tl_plot_y(pl, x1 * tbs), 1.6, col, dash);
    reserve_line(lp, tl_plot_x(pl, x0), tl_plot_y(pl, y0), tl_plot_x(pl, x1), tl_plot_y(pl, x1 * tbs));
}

/* ---- ranges ---- */

static void data_ranges(const tl_hw *hw, const tl_points *sets, int nsets, tl_band band,
                        double top, double *xlo, double *xhi, double *ylo, double *yhi)
{
    double bw = fmax(hw->ceilings.hbm_read_gbps.datasheet, hw->ceilings.hbm_read_gbps.measured);
    *xlo = 0.1;
    *xhi = 1e4;
    *yhi = top * 2.5;
    *ylo = fmin(1.0, 0.1 * bw / 1000.0);
    for (int s = 0; s < nsets; s++)
        for (int i = 0; i < sets[s].n; i++) {
            const tl_point *p = &sets[s].pts[i];
            *xlo = fmin(*xlo, p->intensity / 2);
            *xhi = fmax(*xhi, p->intensity * 3);
            *ylo = fmin(*ylo, p->tflops / 2);
            *yhi = fmax(*yhi, p->tflops * 3);
        }
    if (band.on) {
        *xlo = fmin(*xlo, band.lo / 2);
        *xhi = fmax(*xhi, band.hi * 2);
    }
    /* Snap to whole decades so the ticks read cleanly. */
    *xlo = pow(10, floor(log10(*xlo)));
    *xhi = pow(10, ceil(log10(*xhi)));
    *ylo = pow(10, floor(log10(*ylo)));
    *yhi = pow(10, ceil(log10(*yhi)));
}

static tl_rgba point_colour(int measured)
{
    return measured > 0 ? tl_gfx_palette(1) : measured == 0 ? tl_gfx_palette(2)
                                                              : tl_gfx_rgb(0.55, 0.55, 0.55);
}

/* ---- the figure ---- */

int tl_fig_roofline(const char *out, const tl_hw *hw, const tl_points *sets, int nsets,
                    tl_band band)
{
    dtype_ceiling dc[4];
    int ndc = collect_ceilings(hw, dc);
    tl_ceiling bwc = hw->ceilings.hbm_read_gbps;
    if (ndc == 0 || !(bwc.datasheet > 0 || bwc.measured > 0))
        return tl_error(TL_EUSAGE, hw->name, "the preset has no compute or HBM read ceiling to draw");
    if (band.on && !(band.lo > 0 && band.hi > band.lo))
        return tl_error(TL_EUSAGE, "--band", "needs 0 < LO < HI");
    double top = max_ceiling(dc, ndc);
    double xlo, xhi, ylo, yhi;
    data_ranges(hw, sets, nsets, band, top, &xlo, &xhi, &ylo, &yhi);

    tl_gfx *g = tl_gfx_open(out, FIG_W, FIG_H);
    if (!g) return tl_gfx_open_status();
    tl_plot pl;
    tl_plot_init(&pl, 70, 40, FIG_W - 70 - 24, FIG_H - 40 - 46 - TL_GFX_FOOTER_PT, xlo, xhi, 1,
                 ylo, yhi, 1);

    char title[200];
    snprintf(title, sizeof title, "Roofline: %s (%s, %d %s, %.0f MHz)", hw->name, hw->arch,
             hw->cus, strncmp(hw->arch, "sm_", 3) == 0 ? "SMs" : "CUs", hw->clock_mhz);
    tl_text_style ts = tl_gfx_style(13);
    ts.bold = 1;
    tl_gfx_text(g, pl.x, 12, title, ts);

    if (band.on) {
        double bx0 = tl_plot_x(&pl, band.lo), bx1 = tl_plot_x(&pl, band.hi);
        tl_gfx_rect(g, bx0, pl.y, bx1 - bx0, pl.h, tl_gfx_alpha(tl_gfx_palette(4), 0.22), 0,
                    tl_gfx_palette(4));
    }
    tl_plot_axes(g, &pl, "arithmetic intensity (FLOP/byte)", "throughput (TFLOP/s)");

    placer lp = {.n = 0, .area = {pl.x + 2, pl.y + 2, pl.w - 4, pl.h - 4}};

    /* Legend first (top left of the plot, under the memory slope), so labels avoid it. */
    tl_legend_entry le[16];
    int nle = 0;
    int any_measured_ceiling = bwc.measured > 0;
    for (int i = 0; i < ndc; i++) any_measured_ceiling |= dc[i].c.measured > 0;
    le[nle++] = (tl_legend_entry){"datasheet", tl_gfx_rgb(0.3, 0.3, 0.3), TL_KEY_LINE, 5, 0};
    if (any_measured_ceiling)
        le[nle++] = (tl_legend_entry){"measured", tl_gfx_rgb(0.3, 0.3, 0.3), TL_KEY_LINE, 0, 0};
    le[nle++] = (tl_legend_entry){bwc.datasheet > 0 && bwc.measured > 0 ? "HBM read (datasheet / measured)"
                                                                        : "HBM read",
                                  tl_gfx_palette(0), TL_KEY_LINE, bwc.measured > 0 ? 0 : 5, 0};
    for (int i = 0; i < ndc; i++)
        le[nle++] = (tl_legend_entry){dc[i].name, tl_gfx_palette(dc[i].colour), TL_KEY_LINE, 0, 0};
    /* Point keys: each set is drawn with its own marker (s % 4) in the colour of its provenance,
     * so the key is per set and per provenance, naming the file when there are several sets. */
    static const char *const kinds[3] = {"kernel (source not stated)", "simulated kernel", "measured kernel"};
    char keys[32][128];
    int nkeys = 0;
    for (int s = 0; s < nsets; s++)
        for (int m = -1; m <= 1; m++) {
            int has = 0;
            for (int i = 0; i < sets[s].n && !has; i++) has = sets[s].pts[i].measured == m;
            if (!has || nkeys >= 32 || nle >= 16) continue;
            if (nsets > 1) snprintf(keys[nkeys], sizeof keys[nkeys], "%s: %.60s", kinds[m + 1], sets[s].name);
            else snprintf(keys[nkeys], sizeof keys[nkeys], "%s", kinds[m + 1]);
            le[nle++] = (tl_legend_entry){keys[nkeys++], point_colour(m), TL_KEY_MARKER, 0, s % 4};
        }
    /* The legend's box, right-aligned at lx, is reserved for label placement. */
    double bw, bh;
    tl_gfx_legend_size(g, le, nle, &bw, &bh);
    double lx = pl.x + pl.w - 8, ly = pl.y + pl.h - 8 - bh;
    tl_gfx_legend(g, lx, ly, le, nle, 1);
    if (nle > 0) reserve_label(&lp, (box){lx - bw, ly, bw, bh});

    tl_plot_clip(g, &pl);
    /* Memory slopes up to the highest ceiling. */
    if (bwc.datasheet > 0) draw_slope(g, &lp, &pl, bwc.datasheet, top, tl_gfx_palette(0), 5);
    if (bwc.measured > 0) draw_slope(g, &lp, &pl, bwc.measured, top, tl_gfx_palette(0), 0);
    for (int i = 0; i < ndc; i++) {
        tl_rgba col = tl_gfx_palette(dc[i].colour);
        if (dc[i].c.datasheet > 0)
            draw_ceiling(g, &lp, &pl, dc[i].c.datasheet, bwc.datasheet > 0 ? bwc.datasheet : bwc.measured,
                         col, 5);
        if (dc[i].c.measured > 0)
            draw_ceiling(g, &lp, &pl, dc[i].c.measured, bwc.measured > 0 ? bwc.measured : bwc.datasheet,
                         col, 0);
    }
    tl_gfx_unclip(g);

    /* Kernel markers before any label, so that no label covers a kernel. */
    /* Measured kernels go on top (second pass), so a simulated point at the same spot does not
     * hide them. */
    int skipped = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < nsets; s++)
            for (int i = 0; i < sets[s].n; i++) {
                const tl_point *p = &sets[s].pts[i];
                if ((p->measured > 0) != (pass == 1)) continue;
                double px = tl_plot_x(&pl, p->intensity), py = tl_plot_y(&pl, p->tflops);
                tl_gfx_marker(g, px, py, s % 4, 8, point_colour(p->measured));
                reserve(&lp, (box){px - 4, py - 4, 8, 8});
            }

    /* Ridge markers, then the ceiling and ridge labels. */
    tl_text_style ls = tl_gfx_style(8);
    char buf[160];
    for (int i = 0; i < ndc; i++) {
        tl_rgba col = tl_gfx_palette(dc[i].colour);
        double ds_ridge = 0, me_ridge = 0;
        if (dc[i].c.datasheet > 0 && bwc.datasheet > 0) ds_ridge = dc[i].c.datasheet / (bwc.datasheet / 1000);
        if (dc[i].c.measured > 0 && bwc.measured > 0) me_ridge = dc[i].c.measured / (bwc.measured / 1000);
        if (ds_ridge > 0) {
            double rx = tl_plot_x(&pl, ds_ridge), ry = tl_plot_y(&pl, dc[i].c.datasheet);
            tl_gfx_marker(g, rx, ry, 0, 6, col);
            reserve(&lp, (box){rx - 3, ry - 3, 6, 6});
        }
        if (me_ridge > 0) {
            double rx = tl_plot_x(&pl, me_ridge), ry = tl_plot_y(&pl, dc[i].c.measured);
            tl_gfx_marker(g, rx, ry, 1, 6, col);
            reserve(&lp, (box){rx - 3, ry - 3, 6, 6});
        }
        /* Ceiling label at the right end, above the higher line. */
        char dsv[32] = "", mev[32] = "";
        if (dc[i].c.datasheet > 0) snprintf(dsv, sizeof dsv, "%.0f datasheet", dc[i].c.datasheet);
        if (dc[i].c.measured > 0) snprintf(mev, sizeof mev, "%.0f measured", dc[i].c.measured);
        snprintf(buf, sizeof buf, "%s: %s%s%s TFLOP/s", dc[i].name, dsv, dsv[0] && mev[0] ? ", " : "", mev);
        double w, h;
        tl_gfx_text_size(g, buf, 8, 0, &w, &h);
        double hi = fmax(dc[i].c.datasheet, dc[i].c.measured);
        box b;
        double ax = pl.x + pl.w - 6 - w, ay = tl_plot_y(&pl, hi) - 2 - h;
        box want = {ax, ay, w, h};
        if (box_free(&lp, want)) {
            reserve_label(&lp, want);
            b = want;
        } else if (!place_near(&lp, pl.x + pl.w - 6 - w / 2, tl_plot_y(&pl, hi), w, h, &b)) {
            continue;
        }
        ls.color = col;
        tl_gfx_text(g, b.x, b.y, buf, ls);
        /* Ridge label: below the ridge point(s). */
        if (ds_ridge > 0 || me_ridge > 0) {
            if (ds_ridge > 0 && me_ridge > 0)
                snprintf(buf, sizeof buf, "ridge %.0f / %.0f FLOP/B", ds_ridge, me_ridge);
            else
                snprintf(buf, sizeof buf, "ridge %.0f FLOP/B", ds_ridge > 0 ? ds_ridge : me_ridge);
            tl_gfx_text_size(g, buf, 8, 0, &w, &h);
            double r = me_ridge > 0 ? me_ridge : ds_ridge;
            double rv = me_ridge > 0 ? dc[i].c.measured : dc[i].c.datasheet;
            box rb = {tl_plot_x(&pl, r) + 4, tl_plot_y(&pl, rv) + 3, w, h};
            if (box_free(&lp, rb)) {
                reserve_label(&lp, rb);
                tl_gfx_text(g, rb.x, rb.y, buf, ls);
            } else if (place_near(&lp, tl_plot_x(&pl, r), tl_plot_y(&pl, rv), w, h, &rb)) {
                tl_gfx_text(g, rb.x, rb.y, buf, ls);
            }
        }
    }
    /* HBM slope label along the slope (rotated), near its lower left. */
    {
        double bw = bwc.measured > 0 ? bwc.measured : bwc.datasheet;
        if (bwc.datasheet > 0 && bwc.measured > 0)
            snprintf(buf, sizeof buf, "HBM read %.0f / %.0f GB/s", bwc.datasheet, bwc.measured);
        else
            snprintf(buf, sizeof buf, "HBM read %.0f GB/s", bw);
        /* Candidates slide up the slope, first under the measured (solid) line, then above the
         * datasheet (dashed) one; a candidate must end left of the lowest ridge and keep clear of
         * kernel markers. The first clear one wins; else the lowest spot under the line. */
        double lw, lh;
        tl_gfx_text_size(g, buf, 8, 0, &lw, &lh);
        double ux0 = pl.w / log10(xhi / xlo), uy0 = pl.h / log10(yhi / ylo);
        double len = hypot(ux0, uy0), ux = ux0 / len, uy = -uy0 / len;
        double ang = atan2(uy0, ux0) * 180 / M_PI, rad = ang * M_PI / 180;
        double ridge_x = pl.x + pl.w;
        for (int i = 0; i < ndc; i++) {
            double lo_bw = bwc.datasheet > 0 ? bwc.datasheet : bwc.measured;
            double c = fmin(dc[i].c.datasheet > 0 ? dc[i].c.datasheet : 1e30,
                            dc[i].c.measured > 0 ? dc[i].c.measured : 1e30);
            ridge_x = fmin(ridge_x, tl_plot_x(&pl, c / (lo_bw / 1000)));
        }
        double best_x = NAN, best_y = NAN;
        int best_side = 0;
        for (int side = 0; side < 2 && isnan(best_x); side++) {
            double sbw = side == 0 ? bw : (bwc.datasheet > 0 ? bwc.datasheet : bw);
            for (int step = 0; step < 40; step++) {
                double xa = xlo * 1.3 * pow(1.25, step), ya = xa * sbw / 1000;
                if (ya < ylo * 1.3) continue;
                double sx0 = tl_plot_x(&pl, xa), sy0 = tl_plot_y(&pl, ya);
                if (sx0 + lw * ux + 6 > ridge_x) break;
                int clear = 1;
                for (int s = 0; s < nsets && clear; s++)
                    for (int i = 0; i < sets[s].n && clear; i++) {
                        double px = tl_plot_x(&pl, sets[s].pts[i].intensity) - sx0;
                        double py = tl_plot_y(&pl, sets[s].pts[i].tflops) - sy0;
                        double along = px * ux + py * uy, across = -px * uy + py * ux;
                        double a0 = side == 0 ? -8 : -(lh + 10), a1 = side == 0 ? lh + 10 : 8;
                        if (along > -8 && along < lw + 8 && across > a0 && across < a1) clear = 0;
                    }
                if (clear) {
                    best_x = sx0;
                    best_y = sy0;
                    best_side = side;
                    break;
                }
            }
        }
        if (isnan(best_x)) {
            double xa = xlo * 1.3, ya = fmax(xa * bw / 1000, ylo * 1.3);
            best_x = tl_plot_x(&pl, ya / (bw / 1000));
            best_y = tl_plot_y(&pl, ya);
        }
        tl_text_style ss = tl_gfx_style(8);
        ss.angle_deg = ang;
        double off = best_side == 0 ? 2 : -2; /* perpendicular offset away from the line */
        ss.va = best_side == 0 ? TL_TOP : TL_BOTTOM;
        double px = best_x + off * sin(rad), py = best_y + off * cos(rad);
        tl_gfx_text(g, px, py, buf, ss);
        /* Reserve the rotated label itself (squares of its height along its middle line), not its
         * axis-aligned bounding box, which would keep point labels off a large empty area. */
        double side = best_side == 0 ? 1 : -1;
        double mx = px + side * lh / 2 * sin(rad), my = py + side * lh / 2 * cos(rad);
        for (double t = 0; t <= lw; t += lh / 2)
            reserve_label(&lp, (box){mx + t * cos(rad) - lh / 2 - 1, my - t * sin(rad) - lh / 2 - 1, lh + 2, lh + 2});
    }
    if (band.on) {
        snprintf(buf, sizeof buf, "%.3g to %.3g FLOP/B", band.lo, band.hi);
        double w, h;
        tl_gfx_text_size(g, buf, 8, 0, &w, &h);
        double cx = (tl_plot_x(&pl, band.lo) + tl_plot_x(&pl, band.hi)) / 2;
        box b = {cx - w / 2, pl.y + pl.h - h - 4, w, h};
        if (!box_free(&lp, b)) b.y = pl.y + 4; /* the bottom is taken (e.g. by the legend): the top */
        if (box_free(&lp, b)) {
            reserve_label(&lp, b);
            tl_text_style bs = tl_gfx_style(8);
            bs.color = tl_gfx_rgb(0.45, 0.38, 0);
            tl_gfx_text(g, b.x, b.y, buf, bs);
        }
    }

    /* Point labels last, so that they go where ceilings, ridges and markers left room. */
    tl_text_style ps = tl_gfx_style(8);
    ps.color = tl_gfx_rgb(0.1, 0.1, 0.1);
    for (int s = 0; s < nsets; s++)
        for (int i = 0; i < sets[s].n; i++) {
            const tl_point *p = &sets[s].pts[i];
            double px = tl_plot_x(&pl, p->intensity), py = tl_plot_y(&pl, p->tflops);
            double w, h;
            tl_gfx_text_size(g, p->label, 8, 0, &w, &h);
            box b;
            if (!place_near_leader(&lp, px, py, w, h, 1, &b)) {
                skipped++;
                continue;
            }
            double cx, cy;
            leader_end(b, px, py, &cx, &cy);
            if (hypot(cx - px, cy - py) > LEADER_MIN_PT) {
                tl_gfx_line(g, px, py, cx, cy, 0.4, tl_gfx_rgb(0.5, 0.5, 0.5), 0);
                /* later labels keep off this leader (its ends stay free: they touch the marker
                 * and this label) */
                double len = hypot(cx - px, cy - py), ux = (cx - px) / len, uy = (cy - py) / len;
                reserve_line(&lp, px + 6 * ux, py + 6 * uy, cx - 2 * ux, cy - 2 * uy);
            }
            tl_gfx_text(g, b.x, b.y, p->label, ps);
        }

    /* Footer: ceilings' origin, then the points' provenance, each source once. */
    char foot[900];
    int n = snprintf(foot, sizeof foot, "ceilings: preset %s (datasheet dashed, measured solid%s%s%s%.10s)",
                     hw->name, hw->device[0] ? "; measured on " : "", hw->device,
                     hw->date[0] ? ", " : "", hw->date); /* date only: the day is what a reader needs */
    char seen[16][256];
    int nseen = 0;
    for (int s = 0; s < nsets && nseen < 16 && n > 0 && (size_t)n < sizeof foot; s++) {
        char src[256];
        short_source(sets[s].source, src, sizeof src);
        int dup = 0;
        for (int j = 0; j < nseen; j++) dup |= strcmp(seen[j], src) == 0;
        if (dup) continue;
        snprintf(seen[nseen++], sizeof seen[0], "%s", src);
        n += snprintf(foot + n, sizeof foot - n, "%s%s", nseen == 1 ? "; points: " : " | ", src);
    }
    if (skipped && n > 0 && (size_t)n < sizeof foot)
        snprintf(foot + n, sizeof foot - n, "; %d label%s left out (no room)", skipped, skipped > 1 ? "s" : "");
    tl_gfx_footer(g, foot);
    return tl_gfx_close(g);
}
