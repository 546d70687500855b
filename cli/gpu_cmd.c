/* `tilelab bench roofline` (the GPU's measured ceilings) and `tilelab mfma list|layout` (where each
 * element of an AMD matrix instruction's operands lives). */
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/table.h"
#include "../simulator/hw.h"
#include "../simulator/mfma.h"
#include "../kernels/roofline.h" /* plain C types; its functions exist only in GPU builds */

int tl_cli_gpu_missing(int built, const char **why)
{
    *why = NULL;
    if (!built) {
        *why = "this tilelab was built without a GPU (-DTILELAB_GPU=cuda|hip)";
        return 0;
    }
#ifdef TILELAB_HAVE_GPU
    const int n = tl_gpu_count();
    if (n < 0) return TL_EFAIL;
    if (n == 0) *why = "no GPU found on this machine";
#endif
    return 0;
}

/* =============================================================================================
 * bench roofline
 * =========================================================================================== */
static const char ROOFLINE_USAGE[] =
    "usage: tilelab bench roofline [--hw PRESET] [--save FILE.json] [--points FILE.csv]\n"
    "                              [--quick] [--iters N] [--warmup N] [--hbm-gib X]\n"
    "                              [--format table|csv|json]\n"
    "       tilelab bench roofline --from FILE.json [--hw PRESET] [--save FILE.json] [--format ...]\n"
    "Runs the microbenchmarks of kernels/roofline.hip on the first GPU: a matrix-core loop per data\n"
    "type (mma.sync on NVIDIA, MFMA on gfx942/gfx950; FP6/FP4 on gfx950), a read-only HBM reduction\n"
    "and a copy kernel. Each kernel is checked first (fragment layouts against a host product, the\n"
    "reduction against a closed form, the copy word by word), then timed: 20 warm-up and 200 timed\n"
    "iterations, a 256 MB L2 flush between them (read, then a 20 us busy-wait; saved results from\n"
    "before 2026-11-29 15:00 UTC wrote it), the median; each ceiling is the best of a few launch\n"
    "configurations. Prints each ceiling beside the preset's datasheet and measured values.\n"
    "  --hw PRESET    preset to compare with (default: from the device name: h200, mi300x, mi355x)\n"
    "  --save FILE    write the measured ceilings as an overlay JSON for --hw PRESET,FILE\n"
    "  --points FILE  also write every configuration as CSV (kernel, ceiling, config, best, flops,\n"
    "                 hbm_bytes, time_us, intensity, tflops, gbps, source): `draw roofline --points`\n"
    "  --quick        one configuration per ceiling (for profilers such as ncu)\n"
    "  --iters N, --warmup N   timing iterations (default 200, 20)\n"
    "  --hbm-gib X    read buffer in GiB (default 8; the copy moves X/2 each way)\n"
    "  --from FILE    measure nothing: print (and with --save rewrite) a result saved earlier by\n"
    "                 --save, against --hw (default: the preset of the device it names); no GPU needed\n"
    "Without a GPU (a build without -DTILELAB_GPU, or no device) it says so and exits 1.\n";

static const char *preset_for_device(const char *name)
{
    if (strstr(name, "H200")) return "h200";
    if (strstr(name, "MI355") || strstr(name, "MI350")) return "mi355x";
    if (strstr(name, "MI300") || strstr(name, "MI325")) return "mi300x";
    return NULL;
}

typedef struct {
    const char *key, *unit;
    double measured;
    tl_ceiling preset;
} ceiling_row;

static void add_ceiling(json_t *ceilings, const char *key, double v)
{
    if (v <= 0.0) return;
    json_t *o = json_object();
    json_object_set_new(o, "measured", json_real(round(v * 10.0) / 10.0));
    json_object_set_new(ceilings, key, o);
}

/* Writes the overlay to the temporary file of a (begun by the caller); the caller commits or
 * aborts, so that --save and --points land together or not at all. */
static int write_overlay(tl_atomic *a, const tl_roofline_report *r, const char *label)
{
    json_t *root = json_object();
    json_object_set_new(root, "device", json_string(r->gpu.name));
    json_object_set_new(root, "arch", json_string(r->gpu.arch));
    json_object_set_new(root, "date", json_string(r->date));
    json_t *clk = json_object();
    json_object_set_new(clk, "sm_mhz", json_integer(r->gpu.clock_mhz));
    json_object_set_new(clk, "mem_mhz", json_integer(r->gpu.mem_clock_mhz));
    json_object_set_new(root, "clocks", clk);
    json_object_set_new(root, "source", json_string("tilelab bench roofline"));
    json_object_set_new(root, "label", json_string(label));
    json_object_set_new(root, "mma", json_string(r->mma_target));
    if (r->memcpy_gbps > 0) json_object_set_new(root, "memcpy_gbps", json_real(round(r->memcpy_gbps * 10.0) / 10.0));
    json_t *c = json_object();
    add_ceiling(c, "hbm_read_gbps", r->hbm_read_gbps);
    add_ceiling(c, "hbm_copy_gbps", r->hbm_copy_gbps);
    add_ceiling(c, "bf16_tflops", r->bf16_tflops);
    add_ceiling(c, "fp8_tflops", r->fp8_tflops);
    add_ceiling(c, "fp6_tflops", r->fp6_tflops);
    add_ceiling(c, "fp4_tflops", r->fp4_tflops);
    json_object_set_new(root, "ceilings", c);
    json_t *pts = json_array();
    for (int i = 0; i < r->npoints; i++) {
        const tl_roofline_point *p = &r->points[i];
        json_t *o = json_object();
        json_object_set_new(o, "ceiling", json_string(p->ceiling));
        json_object_set_new(o, "kernel", json_string(p->kernel));
        json_object_set_new(o, "config", json_string(p->config));
        json_object_set_new(o, "median_ms", json_real(round(p->median_ms * 1e6) / 1e6));
        json_object_set_new(o, "value", json_real(round(p->value * 10.0) / 10.0));
        json_object_set_new(o, "flops", json_real(p->flops));
        json_object_set_new(o, "bytes", json_real(p->bytes));
        json_object_set_new(o, "best", json_boolean(p->best));
        json_array_append_new(pts, o);
    }
    json_object_set_new(root, "configurations", pts);

    int st = json_dump_file(root, a->tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    return st != 0 ? tl_error(TL_EFAIL, a->path, "cannot write the overlay") : TL_OK;
}

/* Writes every configuration as CSV to the temporary file of a; the caller commits or aborts. */
static int write_points(tl_atomic *a, const tl_roofline_report *r, const char *label)
{
    tl_table *t = tl_table_new("kernel,ceiling,config,best,flops,hbm_bytes,time_us,intensity,tflops,gbps,source");
    char source[600];
    snprintf(source, sizeof source, "measured on %s", label);
    for (int i = 0; i < r->npoints; i++) {
        const tl_roofline_point *p = &r->points[i];
        double s = p->median_ms * 1e-3;
        tl_table_row(t);
        tl_table_str(t, p->kernel);
        tl_table_str(t, p->ceiling);
        tl_table_str(t, p->config);
        tl_table_int(t, p->best);
        tl_table_numf(t, "%.6g", p->flops);
        tl_table_numf(t, "%.6g", p->bytes);
        tl_table_numf(t, "%.2f", p->median_ms * 1e3);
        /* the matrix loops move no HBM bytes: their intensity is unbounded, written as 0 */
        tl_table_numf(t, "%.4g", p->bytes > 0 ? p->flops / p->bytes : 0.0);
        tl_table_numf(t, "%.1f", p->flops / s / 1e12);
        tl_table_numf(t, "%.1f", p->bytes / s / 1e9);
        tl_table_str(t, source);
    }
    int st = TL_OK;
    FILE *f = fopen(a->tmp, "w");
    if (!f) {
        st = tl_error(TL_EFAIL, a->path, "cannot open for writing: %s", strerror(errno));
    } else {
        tl_table_print(t, TL_FMT_CSV, NULL, f);
        if (fclose(f) != 0) st = tl_error(TL_EFAIL, a->path, "cannot write");
    }
    tl_table_free(t);
    return st;
}

static void print_ceilings(const tl_roofline_report *r, const tl_hw *hw, const char *label,
                           tl_format fmt)
{
    ceiling_row rows[] = {
        {"hbm_read_gbps", "GB/s", r->hbm_read_gbps, hw->ceilings.hbm_read_gbps},
        {"hbm_copy_gbps", "GB/s", r->hbm_copy_gbps, hw->ceilings.hbm_copy_gbps},
        {"bf16_tflops", "TFLOP/s", r->bf16_tflops, hw->ceilings.bf16_tflops},
        {"fp8_tflops", "TFLOP/s", r->fp8_tflops, hw->ceilings.fp8_tflops},
        {"fp6_tflops", "TFLOP/s", r->fp6_tflops, hw->ceilings.fp6_tflops},
        {"fp4_tflops", "TFLOP/s", r->fp4_tflops, hw->ceilings.fp4_tflops},
        {"memcpy_gbps", "GB/s", r->memcpy_gbps, {0.0, 0.0}}, /* the runtime's copy: a reference */
    };
    tl_table *t = tl_table_new("ceiling,measured,unit,datasheet,pct_of_datasheet,preset_measured,"
                               "pct_of_preset_measured,kernel,config");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (rows[i].measured <= 0.0) continue;
        const tl_roofline_point *best = NULL;
        for (int j = 0; j < r->npoints; j++)
            if (r->points[j].best && strcmp(r->points[j].ceiling, rows[i].key) == 0) best = &r->points[j];
        tl_table_row(t);
        tl_table_str(t, rows[i].key);
        tl_table_numf(t, "%.1f", rows[i].measured);
        tl_table_str(t, rows[i].unit);
        if (rows[i].preset.datasheet > 0) {
            tl_table_numf(t, "%.1f", rows[i].preset.datasheet);
            tl_table_numf(t, "%.1f", 100.0 * rows[i].measured / rows[i].preset.datasheet);
        } else {
            tl_table_str(t, "");
            tl_table_str(t, "");
        }
        if (rows[i].preset.measured > 0) {
            tl_table_numf(t, "%.1f", rows[i].preset.measured);
            tl_table_numf(t, "%.1f", 100.0 * rows[i].measured / rows[i].preset.measured);
        } else {
            tl_table_str(t, "");
            tl_table_str(t, "");
        }
        tl_table_str(t, best ? best->kernel : "");
        tl_table_str(t, best ? best->config : "");
    }
    char title[800];
    snprintf(title, sizeof title, "measured ceilings on %s (matrix loops: %s); preset %s", label,
             r->mma_target, hw->name);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
}

/* Readers of a --save result's fields: absent (or null) reads as 0 / ""; a field of another JSON
 * type, or a string with a control character (it would break the one-line titles and the overlay
 * `--hw BASE,FILE` reads), sets *bad to its key (the first such one) and reads as 0 / "". */
static double number_at(json_t *obj, const char *key, const char **bad)
{
    json_t *v = json_object_get(obj, key);
    if (v && !json_is_null(v) && !json_is_number(v) && !*bad) *bad = key;
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void copy_string(char *dst, size_t cap, json_t *obj, const char *key, const char **bad)
{
    json_t *v = json_object_get(obj, key);
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (v && !json_is_null(v) && !json_is_string(v) && !*bad) *bad = key;
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            if (!*bad) *bad = key;
            s = "";
            break;
        }
    snprintf(dst, cap, "%s", s);
}

/* An object field, absent or null reads as NULL; another JSON type sets *bad. */
static json_t *object_at(json_t *obj, const char *key, const char **bad)
{
    json_t *v = json_object_get(obj, key);
    if (v && !json_is_null(v) && !json_is_object(v) && !*bad) *bad = key;
    return json_is_object(v) ? v : NULL;
}

/* Reads a file written by --save back into *r (and its label). TL_EUSAGE for an unreadable or
 * malformed file, one without "ceilings", a field of the wrong JSON type, a control character in a
 * string, a value out of range, or more configurations than a report holds. */
static int load_overlay(const char *path, tl_roofline_report *r, char *label, size_t label_cap)
{
    struct stat st; /* a folder would read as an empty file: "'[' expected near end of file" */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return tl_error(TL_EUSAGE, path, "is a folder, not a file");
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root && err.line < 1) return tl_error(TL_EUSAGE, path, "%s", err.text); /* cannot open */
    if (!root) return tl_error(TL_EUSAGE, path, "line %d, column %d: %s", err.line, err.column, err.text);
    json_t *c = json_object_get(root, "ceilings");
    if (!json_is_object(root) || !json_is_object(c)) {
        json_decref(root);
        return tl_error(TL_EUSAGE, path, "not a roofline result: no \"ceilings\" object");
    }
    memset(r, 0, sizeof *r);
    const char *bad = NULL;
    copy_string(r->gpu.name, sizeof r->gpu.name, root, "device", &bad);
    copy_string(r->gpu.arch, sizeof r->gpu.arch, root, "arch", &bad);
    copy_string(r->date, sizeof r->date, root, "date", &bad);
    copy_string(r->mma_target, sizeof r->mma_target, root, "mma", &bad);
    json_t *clk = object_at(root, "clocks", &bad);
    double sm = number_at(clk, "sm_mhz", &bad), mem = number_at(clk, "mem_mhz", &bad);
    r->memcpy_gbps = number_at(root, "memcpy_gbps", &bad);
    copy_string(label, label_cap, root, "label", &bad);
    if (bad) {
        json_decref(root);
        return tl_error(TL_EUSAGE, path, "field '%s' has the wrong JSON type or a control character", bad);
    }
    if (!(sm >= 0 && sm <= 1e5 && mem >= 0 && mem <= 1e5 && r->memcpy_gbps >= 0 && r->memcpy_gbps < 1e9)) {
        json_decref(root);
        return tl_error(TL_EUSAGE, path, "clocks (MHz) or memcpy_gbps out of range");
    }
    r->gpu.clock_mhz = (int)sm;
    r->gpu.mem_clock_mhz = (int)mem;
    if (!label[0]) snprintf(label, label_cap, "%s, %s", r->gpu.name, r->date);
    struct { const char *key; double *dst; } keys[] = {
        {"hbm_read_gbps", &r->hbm_read_gbps}, {"hbm_copy_gbps", &r->hbm_copy_gbps},
        {"bf16_tflops", &r->bf16_tflops},     {"fp8_tflops", &r->fp8_tflops},
        {"fp6_tflops", &r->fp6_tflops},       {"fp4_tflops", &r->fp4_tflops},
    };
    int any_measured = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        double v = number_at(object_at(c, keys[i].key, &bad), "measured", &bad);
        /* 0 = not measured; as in a preset, a rate below 0.001 is not one (--save would round it to 0) */
        if (bad || !(v == 0.0 || (v >= 1e-3 && v < 1e9))) {
            json_decref(root);
            return tl_error(TL_EUSAGE, path, "ceiling %s has a bad measured value", keys[i].key);
        }
        *keys[i].dst = v;
        any_measured |= v > 0;
    }
    if (!any_measured) {
        json_decref(root);
        return tl_error(TL_EUSAGE, path, "not a roofline result: no ceiling has a measured value");
    }
    json_t *pts = json_object_get(root, "configurations");
    if ((pts && !json_is_null(pts) && !json_is_array(pts)) || json_array_size(pts) > TL_ROOFLINE_MAX_POINTS) {
        json_decref(root);
        return tl_error(TL_EUSAGE, path, "'configurations' must be an array of at most %d", TL_ROOFLINE_MAX_POINTS);
    }
    size_t i;
    json_t *o;
    json_array_foreach(pts, i, o) {
        tl_roofline_point *p = &r->points[r->npoints++];
        copy_string(p->ceiling, sizeof p->ceiling, o, "ceiling", &bad);
        copy_string(p->kernel, sizeof p->kernel, o, "kernel", &bad);
        copy_string(p->config, sizeof p->config, o, "config", &bad);
        p->median_ms = number_at(o, "median_ms", &bad);
        p->value = number_at(o, "value", &bad);
        p->flops = number_at(o, "flops", &bad);
        p->bytes = number_at(o, "bytes", &bad);
        p->best = json_is_true(json_object_get(o, "best"));
        if (bad) {
            json_decref(root);
            return tl_error(TL_EUSAGE, path, "configurations[%zu]: field '%s' has the wrong JSON type or a control "
                            "character", i, bad);
        }
        /* these become times, rates and intensities in the tables and the points CSV */
        if (!(p->median_ms > 0 && p->median_ms < 1e9 && p->value >= 0 && p->value < 1e12 && p->flops >= 0 &&
              p->flops < 1e30 && p->bytes >= 0 && p->bytes < 1e30)) {
            json_decref(root);
            return tl_error(TL_EUSAGE, path, "configurations[%zu]: median_ms must be > 0 and value, flops, "
                            "bytes >= 0", i);
        }
        if (p->best && r->memcpy_gbps == 0.0 && strcmp(p->ceiling, "memcpy_gbps") == 0) r->memcpy_gbps = p->value;
    }
    json_decref(root);
    return 0;
}

/* --hw given, or the preset of the device the result names ("none" when there is no such). */
static int load_preset(const char *hw_spec, const char *device, tl_hw *hw)
{
    memset(hw, 0, sizeof *hw);
    if (hw_spec) return tl_hw_load(hw_spec, hw);
    const char *p = preset_for_device(device);
    if (p) return tl_hw_load(p, hw);
    snprintf(hw->name, sizeof hw->name, "none");
    return 0;
}

/* Whether paths a and b name one file: the same last component in the same folder (symbolic links
 * in the folders resolved; a folder that does not exist names nothing yet). Checked before anything
 * is measured or printed. */
static int same_output_file(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    if (strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b) != 0) return 0;
    char da[4096], db[4096], ra[PATH_MAX], rb[PATH_MAX];
    snprintf(da, sizeof da, "%.*s", sa ? (int)(sa - a) + 1 : 1, sa ? a : ".");
    snprintf(db, sizeof db, "%.*s", sb ? (int)(sb - b) + 1 : 1, sb ? b : ".");
    return realpath(da, ra) && realpath(db, rb) && strcmp(ra, rb) == 0;
}

static int report(const tl_roofline_report *r, const char *hw_spec, const char *label, tl_format fmt,
                  const char *save, const char *points)
{
    tl_hw hw;
    int st = load_preset(hw_spec, r->gpu.name, &hw);
    if (st) return st;
    print_ceilings(r, &hw, label, fmt);
    /* both files go to temporary names first and are renamed only when both are whole */
    tl_atomic sa, pa;
    if (save && (st = tl_atomic_begin(&sa, save))) return st;
    if (points && (st = tl_atomic_begin(&pa, points))) {
        if (save) tl_atomic_abort(&sa);
        return st;
    }
    if (save) st = write_overlay(&sa, r, label);
    if (!st && points) st = write_points(&pa, r, label);
    if (!st && save) st = tl_atomic_commit(&sa);
    if (!st && points) st = tl_atomic_commit(&pa);
    if (st) {
        if (save) tl_atomic_abort(&sa);
        if (points) tl_atomic_abort(&pa);
    }
    return st;
}

int tl_bench_roofline(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, ROOFLINE_USAGE)) return 0;
    const char *hw_spec = NULL, *save = NULL, *points = NULL, *from = NULL;
    tl_format fmt = TL_FMT_TABLE;
    int quick = 0;
    long iters = 200, warmup = 20;
    double gib = 8.0;
    const char *fmt_s = NULL, *iters_s = NULL, *warmup_s = NULL, *gib_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_spec), TL_OPT_V("--save", &save), TL_OPT_V("--from", &from),
                     TL_OPT_V("--format", &fmt_s), TL_OPT_V("--iters", &iters_s), TL_OPT_V("--warmup", &warmup_s),
                     TL_OPT_V("--hbm-gib", &gib_s), TL_OPT_V("--points", &points), TL_OPT_F("--quick", &quick, 1),
                     TL_OPT_END};
    int st = tl_opts_parse(argc, argv, opts, "bench roofline", NULL, 0, NULL);
    if (st || (fmt_s && (st = tl_parse_format(fmt_s, &fmt))) ||
        (iters_s && (st = tl_parse_long(iters_s, 1, 100000, "--iters", &iters))) ||
        (warmup_s && (st = tl_parse_long(warmup_s, 0, 100000, "--warmup", &warmup))) ||
        (gib_s && (st = tl_parse_double(gib_s, "--hbm-gib", &gib))))
        return st;
    if (save && points && same_output_file(save, points))
        return tl_error(TL_EUSAGE, "bench roofline", "--save and --points name the same file '%s'", points);
    if (from && (quick || iters_s || warmup_s || gib_s)) /* they shape a measurement; --from makes none */
        return tl_error(TL_EUSAGE, "bench roofline", "--quick, --iters, --warmup and --hbm-gib measure: not with --from");
    if (!(gib >= 0.0625 && gib <= 64.0))
        return tl_error(TL_EUSAGE, "bench roofline", "--hbm-gib %g is out of range [0.0625, 64]", gib);
    if (hw_spec) { /* a bad --hw is a usage error before anything runs */
        tl_hw probe;
        if ((st = tl_hw_load(hw_spec, &probe))) return st;
    }
    char label[512];
    if (from) {
        tl_roofline_report *r = calloc(1, sizeof *r);
        if (!r) return tl_error(TL_EFAIL, "bench roofline", "out of memory");
        st = load_overlay(from, r, label, sizeof label);
        if (!st) st = report(r, hw_spec, label, fmt, save, points);
        free(r);
        return st;
    }
#ifndef TILELAB_HAVE_GPU
    (void)quick, (void)iters, (void)warmup, (void)gib;
    return tl_error(TL_EFAIL, "bench roofline",
                    "no GPU: this tilelab was built without one (configure with -DTILELAB_GPU=cuda or hip)");
#else
    const char *no_gpu = NULL;
    if ((st = tl_cli_gpu_missing(1, &no_gpu))) return st;
    if (no_gpu) return tl_error(TL_EFAIL, "bench roofline", "%s", no_gpu);
    tl_roofline_opts o;
    tl_roofline_default_opts(&o);
    o.iters = (int)iters;
    o.warmup = (int)warmup;
    o.hbm_gib = gib;
    o.quick = quick;
    tl_roofline_report *r = calloc(1, sizeof *r);
    if (!r) return tl_error(TL_EFAIL, "bench roofline", "out of memory");
    st = tl_roofline_run(0, &o, r);
    if (!st) {
        tl_bench_label(&r->gpu, label, sizeof label);
        st = report(r, hw_spec, label, fmt, save, points);
    }
    free(r);
    return st;
#endif
}

/* =============================================================================================
 * mfma list | layout
 * =========================================================================================== */
static const char MFMA_LIST_USAGE[] =
    "usage: tilelab mfma list --arch gfx942|gfx950 [--format table|csv|json]\n"
    "Every dense matrix (MFMA) instruction of the architecture: its shape MxNxK, blocks, operand\n"
    "formats, and how many registers (VGPRs per lane) each operand takes.\n";

static const char MFMA_LAYOUT_USAGE[] =
    "usage: tilelab mfma layout --arch gfx942|gfx950 --instr NAME --matrix A|B|C|D\n"
    "                           [--format csv|table|json]\n"
    "One row per element of the operand: block,i,j,lane,vgpr,bit_lo,bit_hi. For A, i is the row (M)\n"
    "and j the column (K); for B, i is K and j is N; for C and D, i is M and j is N. vgpr counts from\n"
    "the operand's first register; bit_lo..bit_hi are the bits of that register (0..31 for a full\n"
    "register, 0..15 / 16..31 for packed 16-bit halves, 8-bit slices for FP8/INT8, 4-bit for FP4,\n"
    "6-bit fields for FP6, which may run on into the next register: bit_hi > 31; 0..63 across two\n"
    "registers for FP64). The default format is csv.\n";

static int parse_arch(const char *s, const char *what)
{
    if (!s) return tl_error(TL_EUSAGE, what, "--arch gfx942|gfx950 is required");
    if (strcmp(s, "gfx942") != 0 && strcmp(s, "gfx950") != 0)
        return tl_error(TL_EUSAGE, what, "unknown arch '%s' (one of gfx942, gfx950)", s);
    return 0;
}

static int cmd_mfma_list(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, MFMA_LIST_USAGE)) return 0;
    const char *arch = NULL, *fmt_s = NULL;
    tl_format fmt = TL_FMT_TABLE;
    tl_opt opts[] = {TL_OPT_V("--arch", &arch), TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    int st = tl_opts_parse(argc, argv, opts, "mfma list", NULL, 0, NULL);
    if (st || (fmt_s && (st = tl_parse_format(fmt_s, &fmt))) || (st = parse_arch(arch, "mfma list"))) return st;
    const tl_mfma_instr *list[TL_MFMA_MAX];
    int n = tl_mfma_list(arch, list, TL_MFMA_MAX);
    tl_table *t = tl_table_new("name,m,n,k,blocks,a,b,c,a_vgprs,b_vgprs,c_vgprs,cycles");
    for (int i = 0; i < n; i++) {
        const tl_mfma_instr *in = list[i];
        tl_table_row(t);
        tl_table_str(t, in->name);
        tl_table_int(t, in->m);
        tl_table_int(t, in->n);
        tl_table_int(t, in->k);
        tl_table_int(t, in->blocks);
        tl_table_str(t, in->a_type);
        tl_table_str(t, in->b_type);
        tl_table_str(t, in->c_type);
        tl_table_int(t, tl_mfma_vgprs(in, 'A'));
        tl_table_int(t, tl_mfma_vgprs(in, 'B'));
        tl_table_int(t, tl_mfma_vgprs(in, 'C'));
        tl_table_int(t, tl_mfma_cycles(in, arch));
    }
    char title[96];
    snprintf(title, sizeof title, "dense MFMA instructions of %s (wave of 64 lanes)", arch);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    return 0;
}

static int cmd_mfma_layout(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, MFMA_LAYOUT_USAGE)) return 0;
    const char *arch = NULL, *name = NULL, *matrix = NULL, *fmt_s = NULL;
    tl_format fmt = TL_FMT_CSV;
    tl_opt opts[] = {TL_OPT_V("--arch", &arch), TL_OPT_V("--instr", &name), TL_OPT_V("--matrix", &matrix),
                     TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    int st = tl_opts_parse(argc, argv, opts, "mfma layout", NULL, 0, NULL);
    if (st || (fmt_s && (st = tl_parse_format(fmt_s, &fmt))) || (st = parse_arch(arch, "mfma layout"))) return st;
    if (!name) return tl_error(TL_EUSAGE, "mfma layout", "--instr NAME is required (see tilelab mfma list --arch %s)", arch);
    if (!matrix || strlen(matrix) != 1 || !strchr("ABCDabcd", matrix[0]))
        return tl_error(TL_EUSAGE, "mfma layout", "--matrix A|B|C|D is required");
    const tl_mfma_instr *in = tl_mfma_find(arch, name);
    if (!in)
        return tl_error(TL_EUSAGE, "mfma layout", "unknown instruction '%s' for %s (see tilelab mfma list --arch %s)",
                        name, arch, arch);
    char m = (char)(matrix[0] & ~0x20);
    int rows, cols;
    tl_mfma_dims(in, m, &rows, &cols);
    tl_table *t = tl_table_new("block,i,j,lane,vgpr,bit_lo,bit_hi");
    for (int b = 0; b < tl_mfma_blocks(in, m); b++)
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) {
                tl_mfma_slot s;
                if ((st = tl_mfma_locate_slot(in, m, b, i, j, &s))) {
                    tl_table_free(t);
                    return st;
                }
                tl_table_row(t);
                tl_table_int(t, b);
                tl_table_int(t, i);
                tl_table_int(t, j);
                tl_table_int(t, s.lane);
                tl_table_int(t, s.vgpr);
                tl_table_int(t, s.bit_lo);
                tl_table_int(t, s.bit_hi);
            }
    char title[160];
    snprintf(title, sizeof title, "%s on %s, matrix %c", in->name, arch, m);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    return 0;
}

static const tl_command mfma_table[] = {
    {"list", cmd_mfma_list, "dense MFMA instructions of an architecture", MFMA_LIST_USAGE},
    {"layout", cmd_mfma_layout, "which lane, register and bits hold each operand element", MFMA_LAYOUT_USAGE},
    {NULL, NULL, NULL, NULL},
};

int tl_cmd_mfma(int argc, char **argv) { return tl_dispatch(mfma_table, "mfma", argc, argv); }
