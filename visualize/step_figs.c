/* visualize/step_figs.c: the whole-step picture (visualize/step_figs.h's tl_fig_step). */
#include "step_figs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gfx.h"

/* Each op kind's colour: Okabe-Ito, grey for the eighth. */
static tl_rgba op_colour(int k)
{
    static const int pal[TL_STEP_NOPS] = {5, 2, 7, 6, 4, 3, 1, -1};
    return pal[k] >= 0 ? tl_gfx_palette(pal[k]) : tl_gfx_rgb(0.62, 0.62, 0.62);
}

static int finite_nonneg(double v) { return isfinite(v) && v >= 0; }

static int check_fig(const tl_step_fig *f)
{
    if (f->n_bars < 1 || f->n_bars > TL_STEP_FIG_MAX_BARS)
        return tl_error(TL_EUSAGE, "step figure", "draw 1 to %d bars", TL_STEP_FIG_MAX_BARS);
    if (f->n_curve < 2 || f->n_curve > TL_STEP_FIG_MAX_POINTS || f->n_measured < 0 || f->n_measured > TL_STEP_FIG_MAX_POINTS)
        return tl_error(TL_EUSAGE, "step figure", "the curve needs 2 to %d points", TL_STEP_FIG_MAX_POINTS);
    for (int i = 0; i < f->n_bars; i++) {
        if (!(f->bars[i].total_ms > 0) || !finite_nonneg(f->bars[i].expert_floor_ms) ||
            !finite_nonneg(f->bars[i].fixed_ms) || f->bars[i].fixed_ms > f->bars[i].total_ms * (1 + 1e-9))
            return tl_error(TL_EUSAGE, "step figure", "bar %d has no time", i + 1);
        for (int k = 0; k < TL_STEP_NOPS; k++)
            if (!finite_nonneg(f->bars[i].op_ms[k])) return tl_error(TL_EUSAGE, "step figure", "bar %d: bad time", i + 1);
    }
    for (int i = 0; i < f->n_curve; i++)
        if (!(f->curve_tokens[i] >= 1) || !(f->curve_ms[i] > 0) || !isfinite(f->curve_ms[i]))
            return tl_error(TL_EUSAGE, "step figure", "curve point %d is not a step", i + 1);
    if (f->n_spec == 1 || f->n_spec < 0 || f->n_spec > TL_STEP_FIG_MAX_POINTS)
        return tl_error(TL_EUSAGE, "step figure", "the speculative curve needs 0 or 2 to %d points", TL_STEP_FIG_MAX_POINTS);
    for (int i = 0; i < f->n_spec; i++)
        if (!(f->spec_tokens[i] >= 1) || !(f->spec_ms[i] > 0) || !isfinite(f->spec_ms[i]))
            return tl_error(TL_EUSAGE, "step figure", "speculative point %d is not a step", i + 1);
    for (int i = 0; i < f->n_measured; i++)
        if (!(f->measured_tokens[i] >= 1) || !(f->measured_ms[i] > 0) || !isfinite(f->measured_ms[i]))
            return tl_error(TL_EUSAGE, "step figure", "measured point %d is not a step", i + 1);
    return TL_OK;
}

/* One segment of a bar, labelled inside when it is tall enough. */
static void segment(tl_gfx *g, const tl_plot *pl, double xc, double bw, double from, double ms, int k, const char *lim)
{
    const double y0 = tl_plot_y(pl, from), y1 = tl_plot_y(pl, from + ms);
    const tl_rgba c = op_colour(k);
    tl_gfx_rect(g, xc - bw / 2, y1, bw, y0 - y1, c, 0.6, tl_gfx_rgb(1, 1, 1));
    if (y0 - y1 < 12) return;
    char txt[96];
    snprintf(txt, sizeof txt, "%s %.2f ms%s%s", tl_step_op_name((tl_step_op)k), ms, lim[0] ? ", " : "", lim);
    double tw, th;
    tl_gfx_text_size(g, txt, 8, 0, &tw, &th);
    if (tw + 4 > bw) {
        snprintf(txt, sizeof txt, "%.2f %s", ms, lim);
        tl_gfx_text_size(g, txt, 8, 0, &tw, &th);
        if (tw + 4 > bw) return;
    }
    tl_text_style st = tl_gfx_style(8);
    st.ha = TL_CENTER, st.va = TL_MIDDLE, st.color = tl_gfx_contrast(c);
    tl_gfx_text(g, xc, (y0 + y1) / 2, txt, st);
}

static void draw_bars(tl_gfx *g, const tl_step_fig *f, double x, double y, double w, double h)
{
    double ymax = 0;
    for (int i = 0; i < f->n_bars; i++) ymax = fmax(ymax, f->bars[i].total_ms);
    tl_plot pl;
    tl_plot_init(&pl, x, y, w, h, 0, f->n_bars, 0, 0, ymax * 1.12, 0);
    pl.x_ticks_off = 1;
    tl_plot_axes(g, &pl, "serving point (tokens a step)", "step time, one GPU (ms)");
    const double slot = w / f->n_bars, bw = fmin(slot * 0.62, 190);
    for (int i = 0; i < f->n_bars; i++) {
        const tl_step_bar *b = &f->bars[i];
        const double xc = tl_plot_x(&pl, i + 0.5);
        double from = 0;
        for (int k = 0; k < TL_STEP_NOPS; k++) {
            if (b->op_ms[k] <= 0) continue;
            segment(g, &pl, xc, bw, from, b->op_ms[k], k, b->limiter[k]);
            from += b->op_ms[k];
        }
        char txt[64];
        snprintf(txt, sizeof txt, "%.2f ms", b->total_ms);
        tl_text_style st = tl_gfx_style(10);
        st.ha = TL_CENTER, st.va = TL_BOTTOM, st.bold = 1;
        tl_gfx_text(g, xc, tl_plot_y(&pl, b->total_ms) - 3, txt, st);
        st = tl_gfx_style(10);
        st.ha = TL_CENTER, st.va = TL_TOP;
        tl_gfx_text(g, xc, y + h + 4, b->label, st);
        if (b->fixed_ms > 0) { /* the bracket: launch and fixed terms, whatever the kind */
            const double xb = xc - bw / 2 - 8, yt = tl_plot_y(&pl, b->fixed_ms), yb = tl_plot_y(&pl, 0);
            const tl_rgba k = tl_gfx_rgb(0.3, 0.3, 0.3);
            tl_gfx_line(g, xb, yb, xb, yt, 1.2, k, 0);
            tl_gfx_line(g, xb, yt, xb + 5, yt, 1.2, k, 0);
            snprintf(txt, sizeof txt, "launch + fixed %.1f ms", b->fixed_ms);
            double tw, th;
            tl_gfx_text_size(g, txt, 8, 0, &tw, &th);
            if (tw + 4 > yb - yt) snprintf(txt, sizeof txt, "%.1f ms", b->fixed_ms);
            tl_gfx_text_size(g, txt, 8, 0, &tw, &th);
            tl_text_style sb = tl_gfx_style(8);
            sb.ha = TL_CENTER, sb.va = TL_BOTTOM, sb.angle_deg = 90, sb.color = k;
            if (tw + 4 <= yb - yt) tl_gfx_text(g, xb - 3, (yt + yb) / 2, txt, sb); /* else the bracket alone */
        }
        if (b->expert_floor_ms > 0) {
            const double yf = tl_plot_y(&pl, b->expert_floor_ms);
            tl_gfx_line(g, xc - bw / 2 - 6, yf, xc + bw / 2 + 6, yf, 1.4, tl_gfx_rgb(0, 0, 0), 3);
        }
    }
}

static void draw_curve(tl_gfx *g, const tl_step_fig *f, double x, double y, double w, double h)
{
    double lo = f->curve_tokens[0], hi = f->curve_tokens[f->n_curve - 1], ymax = 0;
    for (int i = 0; i < f->n_curve; i++) ymax = fmax(ymax, f->curve_ms[i]);
    for (int i = 0; i < f->n_measured; i++) {
        lo = fmin(lo, f->measured_tokens[i]), hi = fmax(hi, f->measured_tokens[i]);
        ymax = fmax(ymax, f->measured_ms[i]);
    }
    for (int i = 0; i < f->n_spec; i++) {
        lo = fmin(lo, f->spec_tokens[i]), hi = fmax(hi, f->spec_tokens[i]);
        ymax = fmax(ymax, f->spec_ms[i]);
    }
    tl_plot pl;
    tl_plot_init(&pl, x, y, w, h, lo / 1.5, hi * 1.5, 1, 0, ymax * 1.15, 0);
    tl_plot_axes(g, &pl, "tokens a step (requests x tokens a request)", "step time (ms)");
    double px[TL_STEP_FIG_MAX_POINTS], py[TL_STEP_FIG_MAX_POINTS];
    for (int i = 0; i < f->n_curve; i++) px[i] = tl_plot_x(&pl, f->curve_tokens[i]), py[i] = tl_plot_y(&pl, f->curve_ms[i]);
    const tl_rgba sim = tl_gfx_palette(5), meas = tl_gfx_palette(6);
    tl_gfx_polyline(g, px, py, f->n_curve, 1.8, sim, 0);
    for (int i = 0; i < f->n_curve; i++) tl_gfx_marker(g, px[i], py[i], 0, 6, sim);
    const tl_rgba spec = tl_gfx_palette(3);
    for (int i = 0; i < f->n_spec; i++) px[i] = tl_plot_x(&pl, f->spec_tokens[i]), py[i] = tl_plot_y(&pl, f->spec_ms[i]);
    if (f->n_spec > 1) tl_gfx_polyline(g, px, py, f->n_spec, 1.8, spec, 5);
    for (int i = 0; i < f->n_spec; i++) tl_gfx_marker(g, px[i], py[i], 1, 6, spec);
    for (int i = 0; i < f->n_measured; i++) {
        const double mx = tl_plot_x(&pl, f->measured_tokens[i]), my = tl_plot_y(&pl, f->measured_ms[i]);
        tl_gfx_marker(g, mx, my, 2, 10, meas);
        char txt[48];
        snprintf(txt, sizeof txt, "%.1f ms", f->measured_ms[i]);
        tl_text_style st = tl_gfx_style(9);
        st.ha = TL_RIGHT, st.va = TL_MIDDLE, st.color = meas;
        tl_gfx_text(g, mx - 8, my, txt, st);
    }
    tl_legend_entry le[3];
    int n = 0;
    le[n++] = (tl_legend_entry){f->curve_label[0] ? f->curve_label : "simulated", sim, TL_KEY_LINE, 0, 0};
    if (f->n_spec > 1) le[n++] = (tl_legend_entry){f->spec_label, spec, TL_KEY_LINE, 5, 0};
    if (f->n_measured > 0) le[n++] = (tl_legend_entry){f->measured_label, meas, TL_KEY_MARKER, 0, 2};
    tl_gfx_legend(g, x + 8, y + 8, le, n, 0);
}

int tl_fig_step(const char *out, const tl_step_fig *f)
{
    int rc = check_fig(f);
    if (rc) return rc;
    const double W = 1180, H = 600, top = 84, bottom = 76 + TL_GFX_FOOTER_PT;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    tl_gfx_heading(g, f->title, f->subtitle);
    const double ph = H - top - bottom;
    draw_bars(g, f, 70, top, 420, ph);
    /* the key of the kinds present, between the panels */
    tl_legend_entry le[TL_STEP_NOPS + 1];
    int n = 0;
    for (int k = 0; k < TL_STEP_NOPS; k++) {
        int any = 0;
        for (int i = 0; i < f->n_bars; i++) any |= f->bars[i].op_ms[k] > 0;
        if (any) le[n++] = (tl_legend_entry){tl_step_op_name((tl_step_op)k), op_colour(k), TL_KEY_BOX, 0, 0};
    }
    le[n++] = (tl_legend_entry){"expert weights at the GPUs' HBM ceiling", tl_gfx_rgb(0, 0, 0), TL_KEY_LINE, 3, 0};
    tl_gfx_legend(g, 508, top, le, n, 0);
    draw_curve(g, f, 790, top, 360, ph);
    tl_gfx_footer(g, f->footer);
    return tl_gfx_close(g);
}
