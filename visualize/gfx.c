/* The thin drawing layer: Cairo surfaces chosen by extension, Pango text, axes, legend, footer.
 * See gfx.h for the contracts. */
#include "gfx.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#ifndef TILELAB_VERSION
#define TILELAB_VERSION "dev"
#endif

#define PNG_SCALE 2.0
#define FONT_FAMILY "DejaVu Sans"

typedef enum { SURF_PNG, SURF_SVG, SURF_PDF } surf_kind;

struct tl_gfx {
    cairo_surface_t *surface;
    cairo_t *cr;
    surf_kind kind;
    double w, h;
    tl_atomic out;
};

/* ---- surfaces ---- */

static int kind_from_path(const char *path, surf_kind *kind)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!dot || (slash && dot < slash))
        return tl_error(TL_EUSAGE, path ? path : "output",
                        "no picture extension: use .png, .svg or .pdf");
    if (strcasecmp(dot, ".png") == 0) *kind = SURF_PNG;
    else if (strcasecmp(dot, ".svg") == 0) *kind = SURF_SVG;
    else if (strcasecmp(dot, ".pdf") == 0) *kind = SURF_PDF;
    else
        return tl_error(TL_EUSAGE, path, "unknown picture extension '%s': use .png, .svg or .pdf",
                        dot);
    return TL_OK;
}

/* Cairo's writer for every format: the bytes go to the atomic file's stream (closure), whose write
 * errors tl_atomic_close reports with their reason; a short write fails the surface too. */
static cairo_status_t write_bytes(void *closure, const unsigned char *data, unsigned int length)
{
    return fwrite(data, 1, length, (FILE *)closure) == length ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* The creation date a PDF records (PDF and Cairo 1.16 require one): SOURCE_DATE_EPOCH, whole
 * seconds since 1970-01-01 UTC (the reproducible-builds convention), when it is set and not empty;
 * else 1970-01-01T00:00:00Z, so that a figure's PDF holds the same bytes on every run (PNG and SVG
 * carry no date). TL_EUSAGE for a value that is not such a number (up to the year 9999). Cairo 1.16
 * writes the date it is given without the "D:" prefix: /CreationDate (19700101000000Z). */
static int pdf_create_date(char *iso, size_t n)
{
    const char *env = getenv("SOURCE_DATE_EPOCH");
    long seconds = 0;
    if (env && *env && tl_parse_long(env, 0, 253402300799L, "SOURCE_DATE_EPOCH", &seconds)) return TL_EUSAGE;
    time_t t = (time_t)seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(iso, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return TL_OK;
}

/* SVG and PDF write as they draw (into f); PNG is rendered in memory and written at close. */
static cairo_surface_t *create_surface(surf_kind kind, FILE *f, double w, double h)
{
    switch (kind) {
    case SURF_PNG:
        return cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)ceil(w * PNG_SCALE),
                                          (int)ceil(h * PNG_SCALE));
    case SURF_SVG:
        return cairo_svg_surface_create_for_stream(write_bytes, f, w, h);
    case SURF_PDF:
        return cairo_pdf_surface_create_for_stream(write_bytes, f, w, h);
    }
    return NULL;
}

static _Thread_local int open_status = TL_OK;

/* Pango's and fontconfig's process-wide font caches are left to process exit: nothing tears them
 * down. Pango (1.50) resolves each new font description in detached worker threads
 * (FcFontSetMatch, FcFontSetSort), each holding a reference on fontconfig's configuration until it
 * ends, and a program has no way to wait for them; finalising fontconfig at exit (FcFini) while
 * one of them had not yet run aborted in FcCacheFini (`fcCacheChains[i] == NULL`) after the
 * picture was written.
 *
 * LeakSanitizer then reports fontconfig's heap as leaked although fontconfig's globals still reach
 * it: fontconfig stores the pointers inside its patterns as offsets (FcPattern's elts_offset, its
 * encoded values), which the leak checker cannot follow. So the sanitizer build suppresses the
 * leaks whose allocation stack runs through libfontconfig, and only those: a Pango layout or a
 * Cairo surface this program forgets is still reported (GLib 2.74 slab-allocates GObjects: run
 * with G_SLICE=always-malloc to see those). The sanitizer runtime reads these two hooks at start;
 * LSAN_OPTIONS, when set, overrides the options. */
#if defined(__SANITIZE_ADDRESS__)
#define TL_LSAN_HOOKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TL_LSAN_HOOKS 1
#endif
#endif
#ifdef TL_LSAN_HOOKS
const char *__lsan_default_suppressions(void);
const char *__lsan_default_options(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }
/* no "Suppressions used" table on stderr: error output stays one line */
const char *__lsan_default_options(void) { return "print_suppressions=0"; }
#endif

int tl_gfx_open_status(void) { return open_status; }

tl_gfx *tl_gfx_open(const char *path, double width_pt, double height_pt)
{
    surf_kind kind = SURF_PNG;
    open_status = TL_EUSAGE;
    if (kind_from_path(path, &kind)) return NULL;
    if (!(width_pt >= 16 && width_pt <= 20000 && height_pt >= 16 && height_pt <= 20000)) {
        tl_error(TL_EUSAGE, path, "picture size %g x %g pt is out of range [16, 20000]", width_pt,
                 height_pt);
        return NULL;
    }
    char date[32] = "";
    if (kind == SURF_PDF && pdf_create_date(date, sizeof date)) return NULL;
    open_status = TL_EFAIL;
    tl_gfx *g = calloc(1, sizeof *g);
    if (!g) {
        tl_error(TL_EFAIL, path, "out of memory");
        return NULL;
    }
    g->kind = kind;
    g->w = width_pt;
    g->h = height_pt;
    int rc = tl_atomic_begin(&g->out, path); /* creates the file: an unwritable folder fails here */
    FILE *f = rc ? NULL : tl_atomic_file(&g->out);
    if (!rc && !f) {
        rc = tl_write_error(path, "the picture", errno);
        tl_atomic_abort(&g->out);
    }
    if (rc) {
        open_status = rc;
        free(g);
        return NULL;
    }
    g->surface = create_surface(kind, f, width_pt, height_pt);
    if (!g->surface || cairo_surface_status(g->surface) != CAIRO_STATUS_SUCCESS) {
        tl_error(TL_EFAIL, path, "cannot create the drawing surface: %s",
                 g->surface ? cairo_status_to_string(cairo_surface_status(g->surface)) : "?");
        if (g->surface) cairo_surface_destroy(g->surface);
        tl_atomic_abort(&g->out);
        free(g);
        return NULL;
    }
    if (kind == SURF_PDF) cairo_pdf_surface_set_metadata(g->surface, CAIRO_PDF_METADATA_CREATE_DATE, date);
    g->cr = cairo_create(g->surface);
    if (kind == SURF_PNG) cairo_scale(g->cr, PNG_SCALE, PNG_SCALE);
    cairo_set_source_rgb(g->cr, 1, 1, 1);
    cairo_paint(g->cr);
    cairo_set_line_join(g->cr, CAIRO_LINE_JOIN_ROUND);
    open_status = TL_OK;
    return g;
}

static void destroy(tl_gfx *g)
{
    if (g->cr) cairo_destroy(g->cr);
    if (g->surface) cairo_surface_destroy(g->surface);
    free(g);
}

int tl_gfx_close(tl_gfx *g)
{
    if (!g) return TL_EFAIL;
    cairo_status_t st = cairo_status(g->cr);
    if (st == CAIRO_STATUS_SUCCESS && g->kind == SURF_PNG) {
        cairo_surface_flush(g->surface);
        st = cairo_surface_write_to_png_stream(g->surface, write_bytes, tl_atomic_file(&g->out));
    }
    if (st == CAIRO_STATUS_SUCCESS) {
        cairo_destroy(g->cr);
        g->cr = NULL;
        cairo_surface_finish(g->surface); /* SVG and PDF are written here */
        st = cairo_surface_status(g->surface);
    }
    if (st != CAIRO_STATUS_SUCCESS) {
        /* a write error's reason is the one the stream kept (Cairo reports none) */
        if (st == CAIRO_STATUS_WRITE_ERROR) tl_write_error(g->out.path, "the picture", g->out.err);
        else tl_error(TL_EFAIL, g->out.path, "drawing failed: %s", cairo_status_to_string(st));
        tl_atomic_abort(&g->out);
        destroy(g);
        return TL_EFAIL;
    }
    /* the bytes Cairo wrote may still sit in the stream: flushed, synced and closed here, and
     * any failure (a full disk, `ulimit -f`) fails the picture, leaving the old file */
    int rc = tl_atomic_close(&g->out, "the picture");
    if (!rc) rc = tl_atomic_commit(&g->out);
    destroy(g);
    return rc;
}

void tl_gfx_abort(tl_gfx *g)
{
    if (!g) return;
    if (g->cr) cairo_destroy(g->cr);
    g->cr = NULL;
    if (g->surface) {
        cairo_surface_finish(g->surface);
        cairo_surface_destroy(g->surface);
        g->surface = NULL;
    }
    tl_atomic_abort(&g->out);
    free(g);
}

double tl_gfx_width(const tl_gfx *g) { return g->w; }
double tl_gfx_height(const tl_gfx *g) { return g->h; }

/* ---- colours ---- */

tl_rgba tl_gfx_rgb(double r, double g, double b) { return (tl_rgba){r, g, b, 1.0}; }

tl_rgba tl_gfx_alpha(tl_rgba c, double a)
{
    c.a = a;
    return c;
}

tl_rgba tl_gfx_palette(int i)
{
    static const unsigned char okabe_ito[8][3] = {
        {0, 0, 0},     {230, 159, 0},  {86, 180, 233}, {0, 158, 115},
        {240, 228, 66}, {0, 114, 178}, {213, 94, 0},   {204, 121, 167},
    };
    int k = ((i % 8) + 8) % 8;
    return tl_gfx_rgb(okabe_ito[k][0] / 255.0, okabe_ito[k][1] / 255.0, okabe_ito[k][2] / 255.0);
}

tl_rgba tl_gfx_ramp(double t)
{
    /* Control points sampled from the viridis colour map; linear interpolation between them. */
    static const double stops[9][3] = {
        {0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530},
        {0.207, 0.372, 0.553}, {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551},
        {0.135, 0.659, 0.518}, {0.478, 0.821, 0.318}, {0.993, 0.906, 0.144},
    };
    if (!(t > 0)) t = 0;
    if (t > 1) t = 1;
    double s = t * 8.0;
    int i = (int)s;
    if (i >= 8) i = 7;
    double f = s - i;
    return tl_gfx_rgb(stops[i][0] + f * (stops[i + 1][0] - stops[i][0]),
                      stops[i][1] + f * (stops[i + 1][1] - stops[i][1]),
                      stops[i][2] + f * (stops[i + 1][2] - stops[i][2]));
}

tl_rgba tl_gfx_contrast(tl_rgba c)
{
    double lum = 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
    return lum > 0.5 ? tl_gfx_rgb(0, 0, 0) : tl_gfx_rgb(1, 1, 1);
}

/* ---- primitives ---- */

static void set_source(cairo_t *cr, tl_rgba c) { cairo_set_source_rgba(cr, c.r, c.g, c.b, c.a); }

static void set_stroke(cairo_t *cr, double width, tl_rgba c, double dash)
{
    set_source(cr, c);
    cairo_set_line_width(cr, width);
    if (dash > 0) {
        double d[2] = {dash, dash * 0.6};
        cairo_set_dash(cr, d, 2, 0);
    } else {
        cairo_set_dash(cr, NULL, 0, 0);
    }
}

void tl_gfx_line(tl_gfx *g, double x0, double y0, double x1, double y1, double width, tl_rgba c,
                 double dash)
{
    if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1)) return;
    set_stroke(g->cr, width, c, dash);
    cairo_new_path(g->cr);
    cairo_move_to(g->cr, x0, y0);
    cairo_line_to(g->cr, x1, y1);
    cairo_stroke(g->cr);
}

void tl_gfx_polyline(tl_gfx *g, const double *x, const double *y, int n, double width, tl_rgba c,
                     double dash)
{
    set_stroke(g->cr, width, c, dash);
    cairo_new_path(g->cr);
    int pen_down = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            pen_down = 0;
            continue;
        }
        if (pen_down) cairo_line_to(g->cr, x[i], y[i]);
        else cairo_move_to(g->cr, x[i], y[i]);
        pen_down = 1;
    }
    cairo_stroke(g->cr);
}

void tl_gfx_rect(tl_gfx *g, double x, double y, double w, double h, tl_rgba fill,
                 double stroke_width, tl_rgba stroke)
{
    cairo_new_path(g->cr);
    cairo_rectangle(g->cr, x, y, w, h);
    if (fill.a > 0) {
        set_source(g->cr, fill);
        if (stroke_width > 0) cairo_fill_preserve(g->cr);
        else cairo_fill(g->cr);
    }
    if (stroke_width > 0) {
        set_stroke(g->cr, stroke_width, stroke, 0);
        cairo_stroke(g->cr);
    }
    cairo_new_path(g->cr);
}

void tl_gfx_polygon(tl_gfx *g, const double *x, const double *y, int n, tl_rgba fill)
{
    if (n < 3) return;
    cairo_new_path(g->cr);
    cairo_move_to(g->cr, x[0], y[0]);
    for (int i = 1; i < n; i++) cairo_line_to(g->cr, x[i], y[i]);
    cairo_close_path(g->cr);
    set_source(g->cr, fill);
    cairo_fill(g->cr);
}

void tl_gfx_marker(tl_gfx *g, double x, double y, int kind, double size, tl_rgba c)
{
    double r = size / 2;
    cairo_t *cr = g->cr;
    cairo_new_path(cr);
    switch (kind) {
    case 1:
        cairo_rectangle(cr, x - r * 0.9, y - r * 0.9, 1.8 * r, 1.8 * r);
        break;
    case 2:
        cairo_move_to(cr, x, y - r * 1.2);
        cairo_line_to(cr, x + r, y);
        cairo_line_to(cr, x, y + r * 1.2);
        cairo_line_to(cr, x - r, y);
        cairo_close_path(cr);
        break;
    case 3:
        cairo_move_to(cr, x, y - r * 1.15);
        cairo_line_to(cr, x + r * 1.05, y + r * 0.75);
        cairo_line_to(cr, x - r * 1.05, y + r * 0.75);
        cairo_close_path(cr);
        break;
    default:
        cairo_arc(cr, x, y, r, 0, 2 * M_PI);
        break;
    }
    set_source(cr, c);
    cairo_fill_preserve(cr);
    set_stroke(cr, 0.8, tl_gfx_rgb(1, 1, 1), 0);
    cairo_stroke(cr);
}

void tl_gfx_clip(tl_gfx *g, double x, double y, double w, double h)
{
    cairo_save(g->cr);
    cairo_rectangle(g->cr, x, y, w, h);
    cairo_clip(g->cr);
}

void tl_gfx_unclip(tl_gfx *g) { cairo_restore(g->cr); }

/* ---- text ---- */

tl_text_style tl_gfx_style(double size)
{
    tl_text_style st = {size, 0, TL_LEFT, TL_TOP, 0, {0, 0, 0, 1}};
    return st;
}

static PangoLayout *make_layout(tl_gfx *g, const char *text, double size, int bold)
{
    PangoLayout *lay = pango_cairo_create_layout(g->cr);
    PangoFontDescription *fd = pango_font_description_new();
    pango_font_description_set_family(fd, FONT_FAMILY);
    pango_font_description_set_absolute_size(fd, size * PANGO_SCALE);
    if (bold) pango_font_description_set_weight(fd, PANGO_WEIGHT_BOLD);
    pango_layout_set_font_description(lay, fd);
    pango_font_description_free(fd);
    pango_layout_set_text(lay, text ? text : "", -1);
    return lay;
}

static void layout_size(PangoLayout *lay, double *w, double *h)
{
    PangoRectangle ink, logical;
    pango_layout_get_extents(lay, &ink, &logical);
    *w = logical.width / (double)PANGO_SCALE;
    *h = logical.height / (double)PANGO_SCALE;
}

void tl_gfx_text_size(tl_gfx *g, const char *text, double size, int bold, double *w, double *h)
{
    PangoLayout *lay = make_layout(g, text, size, bold);
    layout_size(lay, w, h);
    g_object_unref(lay);
}

double tl_gfx_text(tl_gfx *g, double x, double y, const char *text, tl_text_style st)
{
    PangoLayout *lay = make_layout(g, text, st.size, st.bold);
    double w, h;
    layout_size(lay, &w, &h);
    double dx = st.ha == TL_LEFT ? 0 : st.ha == TL_CENTER ? -w / 2 : -w;
    double dy = st.va == TL_TOP ? 0 : st.va == TL_MIDDLE ? -h / 2 : -h;
    cairo_save(g->cr);
    cairo_translate(g->cr, x, y);
    if (st.angle_deg != 0) cairo_rotate(g->cr, -st.angle_deg * M_PI / 180.0);
    cairo_move_to(g->cr, dx, dy);
    set_source(g->cr, st.color);
    pango_cairo_update_layout(g->cr, lay);
    pango_cairo_show_layout(g->cr, lay);
    cairo_new_path(g->cr); /* the path is not part of the saved state: leave no current point */
    cairo_restore(g->cr);
    g_object_unref(lay);
    return w;
}

/* ---- numbers ---- */

void tl_gfx_fmt(double v, char *buf, size_t n)
{
    double a = fabs(v);
    if (!isfinite(v)) snprintf(buf, n, "%g", v);
    else if (a == 0) snprintf(buf, n, "0");
    else if (a >= 1e12) snprintf(buf, n, "%.2g", v);
    else if (a >= 1e9) snprintf(buf, n, "%.3gG", v / 1e9);
    else if (a >= 1e6) snprintf(buf, n, "%.3gM", v / 1e6);
    else if (a >= 1e4) snprintf(buf, n, "%.3gk", v / 1e3);
    else if (a < 1e-3) snprintf(buf, n, "%.1e", v);
    else snprintf(buf, n, "%.4g", v);
}

/* ---- axes ---- */

double tl_axis_map(const tl_axis *a, double v)
{
    double t;
    if (a->log10) {
        if (!(v > 0)) return -INFINITY;
        t = (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    } else {
        t = (v - a->lo) / (a->hi - a->lo);
    }
    return a->p0 + t * (a->p1 - a->p0);
}

void tl_plot_init(tl_plot *pl, double x, double y, double w, double h, double xlo, double xhi,
                  int xlog, double ylo, double yhi, int ylog)
{
    pl->x = x;
    pl->y = y;
    pl->w = w;
    pl->h = h;
    pl->xa = (tl_axis){xlo, xhi, xlog, x, x + w};
    pl->ya = (tl_axis){ylo, yhi, ylog, y + h, y};
    pl->y_ticks_off = 0;
    pl->x_ticks_off = 0;
}

double tl_plot_x(const tl_plot *pl, double v) { return tl_axis_map(&pl->xa, v); }
double tl_plot_y(const tl_plot *pl, double v) { return tl_axis_map(&pl->ya, v); }
void tl_plot_clip(tl_gfx *g, const tl_plot *pl) { tl_gfx_clip(g, pl->x, pl->y, pl->w, pl->h); }

void tl_plot_share_strip(tl_gfx *g, double x, double y, double w, double h, double xmax, const double *share, int n,
                         const char *ytitle)
{
    tl_plot sp;
    tl_plot_init(&sp, x, y, w, h, 0, xmax, 0, 0, 100, 0);
    tl_plot_axes(g, &sp, "time from the launch (us)", ytitle);
    double *bx = malloc((size_t)(n > 0 ? n : 1) * sizeof *bx), *by = malloc((size_t)(n > 0 ? n : 1) * sizeof *by);
    if (bx && by && n > 0) {
        for (int b = 0; b < n; b++) bx[b] = tl_plot_x(&sp, (b + 0.5) * xmax / n), by[b] = tl_plot_y(&sp, share[b]);
        tl_plot_clip(g, &sp);
        tl_gfx_polyline(g, bx, by, n, 1.5, tl_gfx_palette(5), 0);
        tl_gfx_unclip(g);
    }
    free(bx), free(by);
}

/* Step of about (hi - lo) / 6 rounded to 1, 2 or 5 times a power of ten. */
static double nice_step(double span)
{
    double raw = span / 6.0;
    double p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

typedef void (*tick_fn)(tl_gfx *g, const tl_plot *pl, double v, int major, int xaxis);

static void draw_tick(tl_gfx *g, const tl_plot *pl, double v, int major, int xaxis)
{
    tl_rgba grid = tl_gfx_rgb(0.88, 0.88, 0.88);
    tl_rgba ink = tl_gfx_rgb(0.2, 0.2, 0.2);
    double len = major ? 4 : 2;
    char buf[32];
    tl_text_style st = tl_gfx_style(8.5);
    st.color = ink;
    if (xaxis) {
        double px = tl_plot_x(pl, v);
        if (px < pl->x - 0.01 || px > pl->x + pl->w + 0.01) return;
        if (major) tl_gfx_line(g, px, pl->y, px, pl->y + pl->h, 0.5, grid, 0);
        tl_gfx_line(g, px, pl->y + pl->h, px, pl->y + pl->h + len, 0.7, ink, 0);
        if (major) {
            tl_gfx_fmt(v, buf, sizeof buf);
            st.ha = TL_CENTER;
            tl_gfx_text(g, px, pl->y + pl->h + 5, buf, st);
        }
    } else {
        double py = tl_plot_y(pl, v);
        if (py < pl->y - 0.01 || py > pl->y + pl->h + 0.01) return;
        if (major) tl_gfx_line(g, pl->x, py, pl->x + pl->w, py, 0.5, grid, 0);
        tl_gfx_line(g, pl->x - len, py, pl->x, py, 0.7, ink, 0);
        if (major) {
            tl_gfx_fmt(v, buf, sizeof buf);
            st.ha = TL_RIGHT;
            st.va = TL_MIDDLE;
            tl_gfx_text(g, pl->x - 6, py, buf, st);
        }
    }
}

static void axis_ticks(tl_gfx *g, const tl_plot *pl, const tl_axis *a, int xaxis)
{
    if (a->log10) {
        int d0 = (int)floor(log10(a->lo) + 1e-9), d1 = (int)ceil(log10(a->hi) - 1e-9);
        int decades = d1 - d0;
        /* Many decades: label every other one so labels never collide. */
        int every = decades > 12 ? 2 : 1;
        for (int d = d0; d <= d1; d++) {
            double base = pow(10, d);
            if (base >= a->lo * (1 - 1e-9) && base <= a->hi * (1 + 1e-9))
                draw_tick(g, pl, base, (d - d0) % every == 0, xaxis);
            for (int m = 2; m <= 9; m++) {
                double v = m * base;
                if (v < a->lo || v > a->hi) continue;
                /* Narrow ranges (up to three decades) also label 2 and 5. */
                int label = decades <= 3 && (m == 2 || m == 5);
                draw_tick(g, pl, v, label, xaxis);
            }
        }
    } else {
        double step = nice_step(a->hi - a->lo);
        double first = ceil(a->lo / step - 1e-9) * step;
        for (int i = 0; i < 64; i++) {
            double v = first + i * step;
            if (v > a->hi + step * 1e-9) break;
            if (fabs(v) < step * 1e-9) v = 0;
            draw_tick(g, pl, v, 1, xaxis);
        }
    }
}

void tl_plot_axes(tl_gfx *g, const tl_plot *pl, const char *xtitle, const char *ytitle)
{
    if (!pl->x_ticks_off) axis_ticks(g, pl, &pl->xa, 1);
    if (!pl->y_ticks_off) axis_ticks(g, pl, &pl->ya, 0);
    tl_gfx_rect(g, pl->x, pl->y, pl->w, pl->h, (tl_rgba){0, 0, 0, 0}, 0.8,
                tl_gfx_rgb(0.2, 0.2, 0.2));
    tl_text_style st = tl_gfx_style(10);
    if (xtitle) {
        st.ha = TL_CENTER;
        tl_gfx_text(g, pl->x + pl->w / 2, pl->y + pl->h + 19, xtitle, st);
    }
    if (ytitle) {
        /* Leave room for the widest tick label on the left. */
        st.ha = TL_CENTER;
        st.va = TL_BOTTOM;
        st.angle_deg = 90;
        tl_gfx_text(g, pl->x - 38, pl->y + pl->h / 2, ytitle, st);
    }
}

/* ---- legend ---- */

#define LEGEND_PT 8.5   /* label size */
#define LEGEND_ROW 13.0 /* row height */
#define LEGEND_KEY 22.0 /* key width; 4 more before the label */
#define LEGEND_PAD 5.0  /* inside the box */

void tl_gfx_legend_size(tl_gfx *g, const tl_legend_entry *e, int n, double *w, double *h)
{
    *w = *h = 0;
    if (n <= 0) return;
    double wmax = 0;
    for (int i = 0; i < n; i++) {
        double tw, th;
        tl_gfx_text_size(g, e[i].label, LEGEND_PT, 0, &tw, &th);
        if (tw > wmax) wmax = tw;
    }
    *w = LEGEND_PAD * 2 + LEGEND_KEY + 4 + wmax;
    *h = LEGEND_PAD * 2 + LEGEND_ROW * n;
}

double tl_gfx_legend(tl_gfx *g, double x, double y, const tl_legend_entry *e, int n,
                     int right_align)
{
    if (n <= 0) return 0;
    const double size = LEGEND_PT, row = LEGEND_ROW, key = LEGEND_KEY, pad = LEGEND_PAD;
    double bw, bh;
    tl_gfx_legend_size(g, e, n, &bw, &bh);
    if (right_align) x -= bw;
    tl_gfx_rect(g, x, y, bw, bh, tl_gfx_alpha(tl_gfx_rgb(1, 1, 1), 0.88), 0.6,
                tl_gfx_rgb(0.6, 0.6, 0.6));
    tl_text_style st = tl_gfx_style(size);
    st.va = TL_MIDDLE;
    for (int i = 0; i < n; i++) {
        double cy = y + pad + row * i + row / 2, kx = x + pad;
        switch (e[i].kind) {
        case TL_KEY_LINE:
            tl_gfx_line(g, kx, cy, kx + key, cy, 1.8, e[i].color, e[i].dash);
            break;
        case TL_KEY_BOX:
            tl_gfx_rect(g, kx + 4, cy - 4.5, key - 8, 9, e[i].color, 0.5, tl_gfx_rgb(0.3, 0.3, 0.3));
            break;
        case TL_KEY_MARKER:
            tl_gfx_marker(g, kx + key / 2, cy, e[i].marker, 7, e[i].color);
            break;
        }
        tl_gfx_text(g, kx + key + 4, cy, e[i].label, st);
    }
    return bh;
}

/* ---- footer ---- */

void tl_gfx_footer(tl_gfx *g, const char *provenance)
{
    tl_rgba grey = tl_gfx_rgb(0.35, 0.35, 0.35);
    tl_text_style st = tl_gfx_style(8);
    st.color = grey;
    st.va = TL_MIDDLE;
    st.ha = TL_RIGHT;
    double vw = tl_gfx_text(g, g->w - 10, g->h - TL_GFX_FOOTER_PT / 2, "tilelab " TILELAB_VERSION, st);
    /* The provenance stays on one line of 8 pt beside the version when it fits; longer ones wrap
     * onto two lines of 7 pt (the rule above moves up a little), cut with "..." beyond. */
    const char *text = provenance && *provenance ? provenance : "provenance unknown";
    double room = g->w - 20 - vw - 14, size = 8, w, h;
    tl_gfx_text_size(g, text, size, 0, &w, &h);
    /* (a shrunken font is not proportionally narrower: anything wider than the room wraps) */
    int two_lines = w > room;
    if (two_lines) size = 7;
    PangoLayout *lay = make_layout(g, text, size, 0);
    pango_layout_set_width(lay, (int)(room * PANGO_SCALE));
    if (two_lines) {
        pango_layout_set_wrap(lay, PANGO_WRAP_WORD_CHAR);
        pango_layout_set_height(lay, -2);
    }
    pango_layout_set_ellipsize(lay, PANGO_ELLIPSIZE_END);
    layout_size(lay, &w, &h);
    double y = two_lines ? g->h - 2 - h : g->h - TL_GFX_FOOTER_PT / 2 - h / 2;
    double rule = fmin(g->h - TL_GFX_FOOTER_PT, y - 3);
    tl_gfx_line(g, 8, rule, g->w - 8, rule, 0.4, tl_gfx_rgb(0.75, 0.75, 0.75), 0);
    cairo_save(g->cr);
    cairo_move_to(g->cr, 10, y);
    set_source(g->cr, grey);
    pango_cairo_update_layout(g->cr, lay);
    pango_cairo_show_layout(g->cr, lay);
    cairo_new_path(g->cr);
    cairo_restore(g->cr);
    g_object_unref(lay);
}

void tl_gfx_heading(tl_gfx *g, const char *title, const char *subtitle)
{
    tl_text_style ts = tl_gfx_style(13);
    ts.bold = 1;
    tl_gfx_text(g, 16, 10, title, ts);
    tl_gfx_text(g, 16, 30, subtitle, tl_gfx_style(9));
}
