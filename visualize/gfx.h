/* The thin drawing layer every tilelab picture goes through (in the spirit of rrdtool's Cairo
 * layer): one open/close pair that picks the surface from the file name, a handful of drawing
 * calls in points (1/72 inch, origin top left, y down), text through Pango, an Okabe-Ito palette
 * that colour-blind readers can tell apart, a perceptual ramp, axes with linear or log10 scales, a
 * legend and the provenance footer that every figure must carry.
 *
 * Files: tl_gfx_open() chooses PNG, SVG or PDF from the extension (case-insensitive) and draws into
 * a new temporary file beside <path> (core/tl.h's tl_atomic); tl_gfx_close() finishes the surface,
 * checks every write, the flush and the sync, and renames it onto <path>; tl_gfx_abort() removes
 * it. So a failed figure (a full disk, `ulimit -f`) never leaves a partial file and keeps the old.
 * PNG is rendered at 2x (a 720 x 480 pt figure becomes a 1440 x 960 pixel image).
 * Every format is byte-reproducible: the same figure gives the same file on every run. A PDF's
 * creation date is SOURCE_DATE_EPOCH (seconds since 1970, UTC) when set, else 1970-01-01.
 *
 * Drawing calls never fail individually: Cairo latches errors in the context and tl_gfx_close()
 * reports them. Cost: each call is O(points); text layout goes through Pango (about a few
 * microseconds per label). */
#ifndef TL_GFX_H
#define TL_GFX_H

#include "../core/tl.h"

typedef struct tl_gfx tl_gfx;

typedef struct {
    double r, g, b, a; /* 0..1 */
} tl_rgba;

/* ---- surfaces ---- */

/* Opens a figure of width_pt x height_pt points (both in [16, 20000]) at path ending in .png,
 * .svg or .pdf. Returns NULL after tl_error(): TL_EUSAGE for an unknown extension or an absurd
 * size or a malformed SOURCE_DATE_EPOCH for a PDF (nothing is created), TL_EFAIL when the
 * temporary file cannot be created. The page starts white. */
tl_gfx *tl_gfx_open(const char *path, double width_pt, double height_pt);
/* The status (TL_EUSAGE or TL_EFAIL) of this thread's last failed tl_gfx_open. */
int tl_gfx_open_status(void);
/* Finishes the surface, writes and renames the file; frees g. Returns 0, or TL_EFAIL (after
 * tl_error) when Cairo reported an error, in which case no file is left. g may be NULL (returns
 * TL_EFAIL without recording anything new). */
int tl_gfx_close(tl_gfx *g);
/* Drops the figure: removes the temporary file and frees g. NULL is ignored. */
void tl_gfx_abort(tl_gfx *g);
double tl_gfx_width(const tl_gfx *g);
double tl_gfx_height(const tl_gfx *g);

/* ---- colours ---- */
/* Okabe-Ito palette, i taken modulo 8: 0 black, 1 orange, 2 sky blue, 3 bluish green, 4 yellow,
 * 5 blue, 6 vermillion, 7 reddish purple. */
tl_rgba tl_gfx_palette(int i);
/* A perceptual sequential ramp (viridis-like: dark purple -> blue -> green -> yellow), t in [0, 1]
 * (clamped; NaN gives the t = 0 colour). */
tl_rgba tl_gfx_ramp(double t);
tl_rgba tl_gfx_rgb(double r, double g, double b);
tl_rgba tl_gfx_alpha(tl_rgba c, double a);
/* Black or white, whichever reads better on background c. */
tl_rgba tl_gfx_contrast(tl_rgba c);

/* ---- primitives (points; width in points; dash 0 = solid, else dash length in points) ---- */
void tl_gfx_line(tl_gfx *g, double x0, double y0, double x1, double y1, double width, tl_rgba c,
                 double dash);
/* n points; non-finite points break the line into pieces. */
void tl_gfx_polyline(tl_gfx *g, const double *x, const double *y, int n, double width, tl_rgba c,
                     double dash);
/* Fills the rectangle if fill.a > 0, then strokes it if stroke_width > 0. */
void tl_gfx_rect(tl_gfx *g, double x, double y, double w, double h, tl_rgba fill,
                 double stroke_width, tl_rgba stroke);
/* A filled polygon of n points. */
void tl_gfx_polygon(tl_gfx *g, const double *x, const double *y, int n, tl_rgba fill);
/* A marker: kind 0 circle, 1 square, 2 diamond, 3 triangle; size = diameter in points; white edge. */
void tl_gfx_marker(tl_gfx *g, double x, double y, int kind, double size, tl_rgba c);
/* Restricts drawing to a rectangle until tl_gfx_unclip(). */
void tl_gfx_clip(tl_gfx *g, double x, double y, double w, double h);
void tl_gfx_unclip(tl_gfx *g);

/* ---- text (Pango, "DejaVu Sans"; markup is not interpreted) ---- */
typedef enum { TL_LEFT, TL_CENTER, TL_RIGHT } tl_halign;
typedef enum { TL_TOP, TL_MIDDLE, TL_BOTTOM } tl_valign;
typedef struct {
    double size;       /* points */
    int bold;
    tl_halign ha;
    tl_valign va;
    double angle_deg;  /* counter-clockwise rotation about the anchor (90 for y-axis labels) */
    tl_rgba color;
} tl_text_style;
/* A default style: 9 pt, left, top, black, no rotation. */
tl_text_style tl_gfx_style(double size);
/* Draws text anchored at (x, y); returns its unrotated width in points. */
double tl_gfx_text(tl_gfx *g, double x, double y, const char *text, tl_text_style st);
/* Measures text (unrotated) in points. */
void tl_gfx_text_size(tl_gfx *g, const char *text, double size, int bold, double *w, double *h);

/* ---- axes ---- */
typedef struct {
    double lo, hi;   /* data range (lo < hi; both > 0 on a log axis) */
    int log10;       /* 1: log10 scale */
    double p0, p1;   /* the points lo and hi map to (p1 < p0 for an upward y axis) */
} tl_axis;
/* Maps a data value to points (log axis: values <= 0 map to -inf, callers clip). */
double tl_axis_map(const tl_axis *a, double v);
/* A plot area with its axes: frame at (x, y, w, h), ticks and tick labels on both axes (log axes
 * label the decades 1, 10, 100 ... with minor ticks at 2..9; linear axes pick 1/2/5 steps), light
 * grid lines, axis titles (the y title rotated 90 degrees). Titles should carry units,
 * e.g. "arithmetic intensity (FLOP/byte)". */
typedef struct {
    double x, y, w, h;
    tl_axis xa, ya;
    int y_ticks_off; /* 1: no y ticks, labels or grid (the caller labels the rows itself) */
    int x_ticks_off; /* 1: no x ticks, labels or grid (the caller labels categories itself) */
} tl_plot;
/* Sets up pl->xa / pl->ya from the ranges and the frame. */
void tl_plot_init(tl_plot *pl, double x, double y, double w, double h, double xlo, double xhi,
                  int xlog, double ylo, double yhi, int ylog);
void tl_plot_axes(tl_gfx *g, const tl_plot *pl, const char *xtitle, const char *ytitle);
double tl_plot_x(const tl_plot *pl, double v);
double tl_plot_y(const tl_plot *pl, double v);
/* Clips further drawing to the plot frame. */
void tl_plot_clip(tl_gfx *g, const tl_plot *pl);
/* A share-over-time strip under a timeline: a plot at (x, y, w, h), x from 0 to xmax titled "time
 * from the launch (us)", y from 0 to 100 titled ytitle (a share in %), and share[0 .. n) at the
 * centres of n equal bins of [0, xmax] as one line. */
void tl_plot_share_strip(tl_gfx *g, double x, double y, double w, double h, double xmax, const double *share, int n,
                         const char *ytitle);

/* ---- legend ---- */
typedef enum { TL_KEY_LINE, TL_KEY_BOX, TL_KEY_MARKER } tl_key_kind;
typedef struct {
    const char *label;
    tl_rgba color;
    tl_key_kind kind;
    double dash;    /* lines: 0 solid */
    int marker;     /* markers: kind for tl_gfx_marker */
} tl_legend_entry;
/* The size in points of the box tl_gfx_legend draws for these entries (0 x 0 when n <= 0), for
 * placing it before it is drawn. */
void tl_gfx_legend_size(tl_gfx *g, const tl_legend_entry *e, int n, double *w, double *h);
/* Draws a boxed legend whose top-left corner is at (x, y) (or top-right when right_align);
 * returns its height in points. */
double tl_gfx_legend(tl_gfx *g, double x, double y, const tl_legend_entry *e, int n,
                     int right_align);

/* ---- provenance ---- */
/* Footer line at the bottom of the figure: `provenance` on the left (e.g. "simulated on preset
 * mi355x" or "measured on NVIDIA H200, 2026-11-29") and "tilelab <version>" on the right.
 * Every figure must call it once. Reserve TL_GFX_FOOTER_PT at the bottom for it; a provenance too
 * long for one line wraps onto two lines of 7 pt, and then the rule above it sits about 4 pt
 * higher (leave that much free under the x-axis title). */
#define TL_GFX_FOOTER_PT 18.0
void tl_gfx_footer(tl_gfx *g, const char *provenance);
/* A figure's heading: the title in 13 pt bold at (16, 10) and a subtitle in 9 pt at (16, 30);
 * leave the top 50 pt free for it. */
void tl_gfx_heading(tl_gfx *g, const char *title, const char *subtitle);

/* Formats a number compactly for tick and point labels ("0.5", "26", "1.2k", "2.5e-03"). */
void tl_gfx_fmt(double v, char *buf, size_t n);

#endif
