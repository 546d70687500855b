/* visualize/quant_figs.c: the MoE dispatch payload's bytes a token, stacked by field
 * (visualize/figures.h's tl_fig_dispatch_bytes). */
#include <math.h>
#include <stdio.h>

#include "figures.h"
#include "gfx.h"

/* One stacked segment of a bar, labelled inside when it is wide enough. */
static double segment(tl_gfx *g, const tl_plot *pl, double from, double bytes, double yc, double bh, tl_rgba c)
{
    if (bytes <= 0) return from;
    const double x0 = tl_plot_x(pl, from), x1 = tl_plot_x(pl, from + bytes);
    tl_gfx_rect(g, x0, yc - bh / 2, x1 - x0, bh, c, 0.6, tl_gfx_rgb(1, 1, 1));
    char txt[32];
    snprintf(txt, sizeof txt, "%.0f", bytes);
    double tw, th;
    tl_gfx_text_size(g, txt, 9, 0, &tw, &th);
    if (tw + 6 < x1 - x0) {
        tl_text_style st = tl_gfx_style(9);
        st.ha = TL_CENTER, st.va = TL_MIDDLE, st.color = tl_gfx_contrast(c);
        tl_gfx_text(g, (x0 + x1) / 2, yc, txt, st);
    }
    return from + bytes;
}

int tl_fig_dispatch_bytes(const char *out, const tl_payload_bar *bars, int n, const char *title, const char *about,
                          const char *footer)
{
    if (n < 1 || n > 8) return tl_error(TL_EUSAGE, "dispatch-bytes", "draw 1 to 8 bars");
    double xmax = 0;
    for (int i = 0; i < n; i++) {
        if (!(bars[i].values >= 0 && bars[i].scales >= 0 && bars[i].routing >= 0))
            return tl_error(TL_EUSAGE, "dispatch-bytes", "bar %d has a negative or NaN size", i + 1);
        xmax = fmax(xmax, bars[i].values + bars[i].scales + bars[i].routing);
    }
    if (!(xmax > 0)) return tl_error(TL_EUSAGE, "dispatch-bytes", "every bar is empty");
    const double W = 860, row_h = 46, top = 128, left = 110, right = 250;
    const double H = top + n * row_h + 60 + TL_GFX_FOOTER_PT;
    tl_gfx *g = tl_gfx_open(out, W, H);
    if (!g) return tl_gfx_open_status();
    tl_gfx_heading(g, title, about);
    tl_plot pl;
    tl_plot_init(&pl, left, top, W - left - right, n * row_h, 0, xmax * 1.02, 0, 0, n, 0);
    pl.y_ticks_off = 1;
    tl_plot_axes(g, &pl, "bytes a token crosses the fabric (B)", NULL);
    const tl_rgba cv = tl_gfx_palette(5), cs = tl_gfx_palette(1), cr = tl_gfx_palette(3);
    for (int i = 0; i < n; i++) {
        const double yc = tl_plot_y(&pl, n - i - 0.5), bh = row_h * 0.62;
        double x = segment(g, &pl, 0, bars[i].values, yc, bh, cv);
        x = segment(g, &pl, x, bars[i].scales, yc, bh, cs);
        x = segment(g, &pl, x, bars[i].routing, yc, bh, cr);
        tl_text_style st = tl_gfx_style(11);
        st.ha = TL_RIGHT, st.va = TL_MIDDLE, st.bold = 1;
        tl_gfx_text(g, left - 8, yc, bars[i].label, st);
        char total[128];
        const double first = bars[0].values + bars[0].scales + bars[0].routing;
        if (bars[i].scales + bars[i].routing > 0)
            snprintf(total, sizeof total, "%.0f B = %.0f + %.0f + %.0f (%.0f%%)", x, bars[i].values, bars[i].scales,
                     bars[i].routing, 100.0 * x / first);
        else snprintf(total, sizeof total, "%.0f B", x);
        st = tl_gfx_style(10);
        st.ha = TL_LEFT, st.va = TL_MIDDLE;
        tl_gfx_text(g, tl_plot_x(&pl, x) + 6, yc, total, st);
    }
    const tl_legend_entry le[3] = {{"values (codes)", cv, TL_KEY_BOX, 0, 0},
                                   {"scales", cs, TL_KEY_BOX, 0, 0},
                                   {"routing (ids, weights, source)", cr, TL_KEY_BOX, 0, 0}};
    tl_gfx_legend(g, W - 16, 58, le, 3, 1);
    tl_gfx_footer(g, footer);
    return tl_gfx_close(g);
}
