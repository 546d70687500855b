/* Roofline points from tilelab CSV, ncu --csv and rocprofv3 counter CSV. See points.h. */
#include "points.h"
#include "csv.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_FILE_BYTES ((size_t)64 << 20)
/* A roofline with more kernels than this is unreadable, and the folding below is O(launches x
 * points) after an O(launches^2) worst case in launch_get: both stay bounded (seconds). */
#define MAX_POINTS 4096
#define MAX_LAUNCHES 20000

/* ---- numbers ---- */

/* Copies the number text s[0, len) into buf (cap bytes) without its thousands separators. A comma
 * is one only between groups of three digits in the integer part, as ncu writes its values
 * ("1,234,567", "1,234.5"), the first group not starting with 0; anywhere else ("1,5e12",
 * "12,34", "1,2345", "1.5,0", ",5", "0,001") the text is not a number: returns 0. */
static int drop_thousands(const char *s, size_t len, char *buf, size_t cap)
{
    size_t n = 0;
    int digits = 0;    /* digits of the integer part since its start or its last comma */
    int grouped = 0;   /* a comma seen */
    int in_int = 1;    /* still in the integer part (after an optional sign) */
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == ',') {
            if (!in_int || digits == 0 || digits > 3 || (grouped && digits != 3)) return 0;
            if (!grouped && buf[n - digits] == '0') return 0; /* "0,001" is a decimal comma */
            grouped = 1;
            digits = 0;
            continue;
        }
        if (in_int && isdigit((unsigned char)c)) digits++;
        else if (in_int && !(n == 0 && (c == '+' || c == '-'))) {
            if (grouped && digits != 3) return 0;
            in_int = 0;
        }
        if (n + 1 >= cap) return 0;
        buf[n++] = c;
    }
    if (in_int && grouped && digits != 3) return 0;
    buf[n] = '\0';
    return 1;
}

#define NUM_BAD_COMMA (-2)
/* Parses a non-negative finite number: tl_scan_real's form (decimal only, no blanks, no '+', no
 * hex) once its thousands separators are dropped (see drop_thousands). Returns 1 on success, 0 for
 * "n/a" or empty (missing), NUM_BAD_COMMA for a comma that separates no thousands, -1 when
 * malformed otherwise. */
static int parse_num(const char *s, double *out)
{
    char buf[128];
    if (!*s || strcasecmp(s, "n/a") == 0 || strcmp(s, "(!) n/a") == 0) return 0;
    size_t len = strlen(s);
    if (!drop_thousands(s, len, buf, sizeof buf)) return strchr(s, ',') ? NUM_BAD_COMMA : -1;
    double v;
    if (tl_scan_real(buf, &v) || v < 0) return -1;
    *out = v;
    return 1;
}

/* The end of a malformed-number message for parse_num's result ok: what a comma may do. */
static const char *malformed_why(int ok)
{
    return ok == NUM_BAD_COMMA ? " (a comma may only separate thousands, as in 1,234,567)" : "";
}

/* Scale of an ncu unit to base units (bytes, microseconds, counts); 0 when unknown. */
static double unit_scale(const char *u, int is_time)
{
    if (is_time) {
        static const struct { const char *u; double s; } t[] = {
            {"ns", 1e-3}, {"nsecond", 1e-3}, {"us", 1}, {"usecond", 1}, {"ms", 1e3},
            {"msecond", 1e3}, {"s", 1e6}, {"second", 1e6},
        };
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            if (strcmp(u, t[i].u) == 0) return t[i].s;
        return 0;
    }
    static const struct { const char *u; double s; } b[] = {
        {"", 1},        {"byte", 1},      {"inst", 1},    {"Kbyte", 1e3},   {"Mbyte", 1e6},
        {"Gbyte", 1e9}, {"Tbyte", 1e12},  {"KiB", 1024.}, {"MiB", 1048576.}, {"GiB", 1073741824.},
        {"Kinst", 1e3}, {"Minst", 1e6},   {"Ginst", 1e9}, {"K", 1e3},       {"M", 1e6},
        {"G", 1e9},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        if (strcmp(u, b[i].u) == 0) return b[i].s;
    return 0;
}

/* ---- launches, folded by kernel name into points ---- */

enum { HAVE_TENSOR = 1, HAVE_SCALAR = 2, HAVE_RW = 4, HAVE_DRAM = 8, HAVE_TIME = 16,
       HAVE_FETCH = 32, HAVE_WRITE = 64, HAVE_RD = 128, HAVE_WR = 256 };

typedef struct {
    char id[48];
    char name[256];
    double flops, bytes_rw, bytes_dram, time_us;
    double tensor_src, tensor_op; /* ncu tensor FLOPs in its two metric families (one is used) */
    double fetch_kb, write_kb, rd, rd32, wr, wr64;
    unsigned have;
} launch;

typedef struct {
    launch *l;
    int n, cap, last;
} launch_set;

static launch *launch_get(launch_set *s, const char *id, const char *name)
{
    if (s->last >= 0 && s->last < s->n && strcmp(s->l[s->last].id, id) == 0) return &s->l[s->last];
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->l[i].id, id) == 0) return &s->l[s->last = i];
    if (s->n >= MAX_LAUNCHES) return NULL;
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 16;
        launch *nl = realloc(s->l, nc * sizeof *nl);
        if (!nl) return NULL;
        s->l = nl;
        s->cap = nc;
    }
    launch *l = &s->l[s->n];
    memset(l, 0, sizeof *l);
    snprintf(l->id, sizeof l->id, "%s", id);
    snprintf(l->name, sizeof l->name, "%s", name);
    for (char *c = l->name; *c; c++) /* a quoted newline would split the one-line errors and labels */
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    s->last = s->n++;
    return l;
}

/* "void foo<128>(float*, int)" -> "foo<128>"; long names are cut with "...". */
static void short_label(const char *name, char *out, size_t n)
{
    if (strncmp(name, "void ", 5) == 0) name += 5;
    size_t len = strcspn(name, "(");
    while (len > 0 && isspace((unsigned char)name[len - 1])) len--;
    if (len == 0) len = strlen(name);
    const size_t maxlen = 40;
    if (len > maxlen && n > maxlen + 4) snprintf(out, n, "%.*s...", (int)maxlen - 3, name);
    else snprintf(out, n, "%.*s", (int)(len < n - 1 ? len : n - 1), name);
}

static int add_point(tl_points *out, const tl_point *pt, const char *file)
{
    if (out->n >= MAX_POINTS)
        return tl_error(TL_EUSAGE, file, "more than %d points (kernels) in one file", MAX_POINTS);
    tl_point *np = realloc(out->pts, (out->n + 1) * sizeof *np);
    if (!np) return tl_error(TL_EFAIL, "points", "out of memory");
    out->pts = np;
    out->pts[out->n++] = *pt;
    return TL_OK;
}

/* Folds launches into one point per kernel name (in order of first appearance). */
static int fold_launches(const launch_set *s, const char *file, tl_points *out, int *unplaced_out)
{
    int unplaced = 0;
    for (int i = 0; i < s->n; i++) {
        const launch *l = &s->l[i];
        if (!(l->have & HAVE_TIME))
            return tl_error(TL_EUSAGE, file, "kernel '%s' has no duration", l->name);
        if (!(l->have & (HAVE_TENSOR | HAVE_SCALAR)))
            return tl_error(TL_EUSAGE, file, "kernel '%s' has no FLOP counter (see tilelab draw roofline --help)", l->name);
        if (!(l->have & (HAVE_RW | HAVE_DRAM | HAVE_FETCH | HAVE_RD)))
            return tl_error(TL_EUSAGE, file, "kernel '%s' has no DRAM byte counter", l->name);
    }
    for (int i = 0; i < s->n; i++) {
        const launch *l = &s->l[i];
        int seen = 0;
        for (int j = 0; j < i; j++)
            if (strcmp(s->l[j].name, l->name) == 0) seen = 1;
        if (seen) continue;
        tl_point pt = {0};
        short_label(l->name, pt.label, sizeof pt.label);
        pt.measured = 1;
        for (int j = i; j < s->n; j++) {
            const launch *m = &s->l[j];
            if (strcmp(m->name, l->name) != 0) continue;
            double bytes;
            if (m->have & HAVE_RW) bytes = m->bytes_rw;
            else if (m->have & HAVE_DRAM) bytes = m->bytes_dram;
            else if (m->have & HAVE_FETCH) bytes = 1024.0 * (m->fetch_kb + m->write_kb);
            else bytes = 32 * m->rd32 + 64 * (m->rd - m->rd32) + 64 * m->wr64 + 32 * (m->wr - m->wr64);
            pt.flops += m->flops + (m->tensor_src > m->tensor_op ? m->tensor_src : m->tensor_op);
            pt.bytes += bytes;
            pt.time_us += m->time_us;
            pt.launches++;
        }
        if (!(pt.time_us > 0)) return tl_error(TL_EUSAGE, file, "kernel '%s' has zero time", l->name);
        if (!(pt.bytes > 0) || !(pt.flops > 0)) { /* no place on a log-log roofline */
            unplaced++;
            continue;
        }
        pt.intensity = pt.flops / pt.bytes;
        pt.tflops = pt.flops / (pt.time_us * 1e6);
        int rc = add_point(out, &pt, file);
        if (rc) return rc;
    }
    *unplaced_out = unplaced;
    if (out->n == 0) return tl_error(TL_EUSAGE, file, "no kernel has both FLOPs and DRAM bytes > 0");
    return TL_OK;
}

/* Appends "; N kernels without FLOPs or bytes left out" to the footer's provenance. */
static void note_unplaced(tl_points *out, int unplaced)
{
    size_t l = strlen(out->source);
    if (unplaced)
        snprintf(out->source + l, sizeof out->source - l, "; %d kernel%s without FLOPs or bytes left out",
                 unplaced, unplaced > 1 ? "s" : "");
}

/* ---- Nsight Compute ---- */

/* 1 for sm__ops_path_tensor_src_<T>.sum, 2 for the same count named
 * sm__ops_path_tensor_op_hmma_src_<T>.sum (Nsight Compute 2025 lists both families; an export may
 * hold either or both, so the larger family total is used, never their sum); 0 otherwise. */
static int ncu_tensor_metric(const char *m)
{
    static const char *ok[] = {
        "bf16_dst_fp32", "fp16", "fp16_dst_fp16", "fp16_dst_fp32", "tf32_dst_fp32", "fp8", "fp64",
        "int8",
    };
    char want[96];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(want, sizeof want, "sm__ops_path_tensor_src_%s.sum", ok[i]);
        if (strcmp(m, want) == 0) return 1;
        snprintf(want, sizeof want, "sm__ops_path_tensor_op_hmma_src_%s.sum", ok[i]);
        if (strcmp(m, want) == 0) return 2;
    }
    return 0;
}

/* FLOPs per CUDA-core instruction for sass_thread_inst_executed_op_* metrics; 0 when not one. */
static double ncu_scalar_flops(const char *m)
{
    const char *p = strstr(m, "__sass_thread_inst_executed_op_");
    if (!p || (strncmp(m, "sm__", 4) != 0 && strncmp(m, "smsp__", 6) != 0)) return 0;
    p += strlen("__sass_thread_inst_executed_op_");
    if (*p != 'f' && *p != 'h' && *p != 'd') return 0;
    p++;
    if (strcmp(p, "add_pred_on.sum") == 0 || strcmp(p, "mul_pred_on.sum") == 0) return 1;
    if (strcmp(p, "fma_pred_on.sum") == 0) return 2;
    return 0;
}

/* Adds one ncu metric value to its launch. Metrics tilelab does not read are ignored; "n/a"
 * values (a metric the GPU lacks) are skipped. */
static int ncu_value(launch_set *s, const char *id, const char *kname, const char *metric,
                     const char *unit, const char *val, int line, const char *file)
{
    double scalar = ncu_scalar_flops(metric);
    int tensor = ncu_tensor_metric(metric);
    int is_time = strcmp(metric, "gpu__time_duration.sum") == 0;
    int is_rd = strcmp(metric, "dram__bytes_read.sum") == 0;
    int is_wr = strcmp(metric, "dram__bytes_write.sum") == 0;
    int is_dram = strcmp(metric, "dram__bytes.sum") == 0;
    if (!scalar && !tensor && !is_time && !is_rd && !is_wr && !is_dram) return TL_OK;
    double v;
    int ok = parse_num(val, &v);
    if (ok < 0) return tl_error(TL_EUSAGE, file, "line %d: malformed value '%s' for %s%s", line, val, metric, malformed_why(ok));
    if (ok == 0) return TL_OK;
    double scale = unit_scale(unit, is_time);
    if (scale == 0) return tl_error(TL_EUSAGE, file, "line %d: unknown unit '%s' for %s", line, unit, metric);
    v *= scale;
    launch *l = launch_get(s, id, kname);
    if (!l && s->n >= MAX_LAUNCHES)
        return tl_error(TL_EUSAGE, file, "more than %d kernel launches (profile fewer)", MAX_LAUNCHES);
    if (!l) return tl_error(TL_EFAIL, file, "out of memory");
    if (tensor == 1) l->tensor_src += v, l->have |= HAVE_TENSOR;
    else if (tensor == 2) l->tensor_op += v, l->have |= HAVE_TENSOR;
    else if (scalar) l->flops += v * scalar, l->have |= HAVE_SCALAR;
    else if (is_time) l->time_us += v, l->have |= HAVE_TIME;
    else if (is_dram) l->bytes_dram += v, l->have |= HAVE_DRAM;
    else l->bytes_rw += v, l->have |= HAVE_RW;
    return TL_OK;
}

/* Long form (--page details, the default): one row per (launch, metric). Wide form (--page raw):
 * one row per launch, metrics as columns, and a units row (empty ID) under the header. */
static int parse_ncu(const char **pp, int *line, const tl_csv_row *h, const char *file, int wide,
                     tl_points *out)
{
    int c_id = tl_csv_col(h, "ID"), c_name = tl_csv_col(h, "Kernel Name"),
        c_metric = tl_csv_col(h, "Metric Name"), c_unit = tl_csv_col(h, "Metric Unit"),
        c_val = tl_csv_col(h, "Metric Value"), c_cc = tl_csv_col(h, "CC");
    launch_set s = {NULL, 0, 0, -1};
    tl_csv_row r = {0}, units = {0};
    int rc = TL_OK, got, have_units = 0;
    char cc[16] = "";
    while (rc == TL_OK && (got = tl_csv_next(pp, &r, line)) == 1) {
        if (tl_csv_blank(&r) || strncmp(tl_csv_field(&r, 0), "==", 2) == 0) continue;
        if (r.n < h->n) {
            rc = tl_error(TL_EUSAGE, file, "line %d: %d fields, the header has %d", r.line, r.n, h->n);
            break;
        }
        if (c_cc >= 0 && !cc[0]) snprintf(cc, sizeof cc, "%s", tl_csv_field(&r, c_cc));
        if (!wide) {
            rc = ncu_value(&s, tl_csv_field(&r, c_id), tl_csv_field(&r, c_name), tl_csv_field(&r, c_metric), tl_csv_field(&r, c_unit),
                           tl_csv_field(&r, c_val), r.line, file);
            continue;
        }
        if (!have_units && tl_csv_field(&r, c_id)[0] == '\0') { /* the units row */
            units = r;
            memset(&r, 0, sizeof r);
            have_units = 1;
            cc[0] = '\0';
            continue;
        }
        for (int j = 0; j < h->n && rc == TL_OK; j++)
            rc = ncu_value(&s, tl_csv_field(&r, c_id), tl_csv_field(&r, c_name), tl_csv_field(h, j), have_units ? tl_csv_field(&units, j) : "",
                           tl_csv_field(&r, j), r.line, file);
    }
    if (rc == TL_OK && got < 0) rc = tl_csv_fail(file, &r, got);
    if (rc == TL_OK && s.n == 0) rc = tl_error(TL_EUSAGE, file, "no kernel with the metrics tilelab reads (gpu__time_duration.sum, dram__bytes_*.sum, FLOP counters)");
    int unplaced = 0;
    if (rc == TL_OK) rc = fold_launches(&s, file, out, &unplaced);
    if (rc == TL_OK) {
        snprintf(out->source, sizeof out->source, "measured with Nsight Compute%s%s", cc[0] ? " on compute capability " : "", cc);
        note_unplaced(out, unplaced);
    }
    free(s.l);
    tl_csv_free(&r);
    tl_csv_free(&units);
    return rc;
}

/* ---- rocprofv3 ---- */

/* Counter name without a "_sum" suffix, into buf. */
static void strip_sum(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s", name);
    size_t l = strlen(buf);
    if (l > 4 && strcmp(buf + l - 4, "_sum") == 0) buf[l - 4] = '\0';
}

static double rocprof_flops_per_count(const char *c)
{
    if (strncmp(c, "SQ_INSTS_VALU_MFMA_MOPS_", 24) == 0) return 512;
    static const char *vec[] = {"SQ_INSTS_VALU_ADD_F16", "SQ_INSTS_VALU_ADD_F32", "SQ_INSTS_VALU_ADD_F64",
                                "SQ_INSTS_VALU_MUL_F16", "SQ_INSTS_VALU_MUL_F32", "SQ_INSTS_VALU_MUL_F64"};
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++)
        if (strcmp(c, vec[i]) == 0) return 64;
    if (strcmp(c, "SQ_INSTS_VALU_FMA_F16") == 0 || strcmp(c, "SQ_INSTS_VALU_FMA_F32") == 0 ||
        strcmp(c, "SQ_INSTS_VALU_FMA_F64") == 0)
        return 128;
    return 0;
}

static int parse_rocprof(const char **pp, int *line, const tl_csv_row *h, const char *file,
                         tl_points *out)
{
    int c_disp = tl_csv_col(h, "Dispatch_Id"), c_name = tl_csv_col(h, "Kernel_Name"),
        c_cn = tl_csv_col(h, "Counter_Name"), c_cv = tl_csv_col(h, "Counter_Value"),
        c_t0 = tl_csv_col(h, "Start_Timestamp"), c_t1 = tl_csv_col(h, "End_Timestamp"),
        c_agent = tl_csv_col(h, "Agent_Id");
    if (c_t0 < 0 || c_t1 < 0)
        return tl_error(TL_EUSAGE, file, "rocprofv3 counter file without Start_Timestamp/End_Timestamp (collect with a kernel trace)");
    launch_set s = {NULL, 0, 0, -1};
    tl_csv_row r = {0};
    int rc = TL_OK, got;
    while ((got = tl_csv_next(pp, &r, line)) == 1) {
        if (tl_csv_blank(&r)) continue;
        if (r.n < h->n) {
            rc = tl_error(TL_EUSAGE, file, "line %d: %d fields, the header has %d", r.line, r.n, h->n);
            break;
        }
        char id[48], cname[96];
        snprintf(id, sizeof id, "%.20s/%.20s", tl_csv_field(&r, c_agent), tl_csv_field(&r, c_disp));
        strip_sum(tl_csv_field(&r, c_cn), cname, sizeof cname);
        double v, t0, t1;
        int ok = parse_num(tl_csv_field(&r, c_cv), &v);
        if (ok <= 0) {
            rc = tl_error(TL_EUSAGE, file, "line %d: malformed counter value '%s'%s", r.line, tl_csv_field(&r, c_cv),
                          malformed_why(ok));
            break;
        }
        if (parse_num(tl_csv_field(&r, c_t0), &t0) <= 0 || parse_num(tl_csv_field(&r, c_t1), &t1) <= 0 || t1 < t0) {
            rc = tl_error(TL_EUSAGE, file, "line %d: malformed timestamps '%s', '%s'", r.line,
                          tl_csv_field(&r, c_t0), tl_csv_field(&r, c_t1));
            break;
        }
        launch *l = launch_get(&s, id, tl_csv_field(&r, c_name));
        if (!l) {
            rc = s.n >= MAX_LAUNCHES
                     ? tl_error(TL_EUSAGE, file, "more than %d kernel dispatches (profile fewer)", MAX_LAUNCHES)
                     : tl_error(TL_EFAIL, file, "out of memory");
            break;
        }
        l->time_us = (t1 - t0) * 1e-3; /* the same dispatch repeats its timestamps on every row */
        l->have |= HAVE_TIME;
        double fpc = rocprof_flops_per_count(cname);
        if (fpc > 0) l->flops += fpc * v, l->have |= HAVE_SCALAR;
        else if (strcmp(cname, "FETCH_SIZE") == 0) l->fetch_kb += v, l->have |= HAVE_FETCH;
        else if (strcmp(cname, "WRITE_SIZE") == 0) l->write_kb += v, l->have |= HAVE_WRITE;
        else if (strcmp(cname, "TCC_EA0_RDREQ") == 0) l->rd += v, l->have |= HAVE_RD;
        else if (strcmp(cname, "TCC_EA0_RDREQ_32B") == 0) l->rd32 += v;
        else if (strcmp(cname, "TCC_EA0_WRREQ") == 0) l->wr += v, l->have |= HAVE_WR;
        else if (strcmp(cname, "TCC_EA0_WRREQ_64B") == 0) l->wr64 += v;
    }
    if (rc == TL_OK && got < 0) rc = tl_csv_fail(file, &r, got);
    if (rc == TL_OK && s.n == 0) rc = tl_error(TL_EUSAGE, file, "no dispatch rows");
    for (int i = 0; rc == TL_OK && i < s.n; i++) {
        launch *l = &s.l[i];
        /* FETCH_SIZE alone still counts (a read-only kernel); requests need both directions. */
        if ((l->have & HAVE_RD) && !(l->have & HAVE_WR)) l->have &= ~HAVE_RD;
        if (l->rd32 > l->rd || l->wr64 > l->wr)
            rc = tl_error(TL_EUSAGE, file, "kernel '%s': sized requests exceed all requests", l->name);
    }
    int unplaced = 0;
    if (rc == TL_OK) rc = fold_launches(&s, file, out, &unplaced);
    if (rc == TL_OK) {
        snprintf(out->source, sizeof out->source, "measured with rocprofv3");
        note_unplaced(out, unplaced);
    }
    free(s.l);
    tl_csv_free(&r);
    return rc;
}

/* ---- tilelab CSV ---- */

static int first_col(const tl_csv_row *h, const char *const *names)
{
    for (; *names; names++) {
        int c = tl_csv_col(h, *names);
        if (c >= 0) return c;
    }
    return -1;
}

static int provenance_of(const char *s)
{
    if (strcasestr(s, "measured")) return 1;
    if (strcasestr(s, "simulated")) return 0;
    return -1;
}

static int parse_tilelab(const char **pp, int *line, const tl_csv_row *h, const char *file,
                         const char *comment, tl_points *out)
{
    static const char *const flops_n[] = {"flops", "flops_useful", NULL};
    static const char *const bytes_n[] = {"hbm_bytes", "bytes", "dram_bytes", NULL};
    static const char *const time_n[] = {"time_us", NULL};
    static const char *const label_n[] = {"name", "kernel", "label", "op", NULL};
    int c_f = first_col(h, flops_n), c_b = first_col(h, bytes_n), c_t = first_col(h, time_n);
    int c_i = tl_csv_col(h, "intensity"), c_tf = tl_csv_col(h, "tflops");
    int c_l = first_col(h, label_n), c_tok = tl_csv_col(h, "tokens"), c_st = tl_csv_col(h, "stage");
    /* a "kernel" or "op" column names what ran, not which point: sim moe's rows all say moe_gemm, so
     * the stage and M (tokens) are added to it; a "name" or "label" column is the point's own label */
    const int c_l_names_kernel = c_l >= 0 && (c_l == tl_csv_col(h, "kernel") || c_l == tl_csv_col(h, "op")) &&
                                 tl_csv_col(h, "name") < 0 && tl_csv_col(h, "label") < 0;
    int c_src = tl_csv_col(h, "source"), c_lim = tl_csv_col(h, "limiter"), c_hw = tl_csv_col(h, "hw");
    char hw_name[64] = "";
    int by_counts = c_f >= 0 && c_b >= 0 && c_t >= 0;
    if (!by_counts && !(c_i >= 0 && c_tf >= 0))
        return tl_error(TL_EUSAGE, file, "header needs flops,hbm_bytes,time_us or intensity,tflops "
                                         "(or is an ncu --csv / rocprofv3 counter export)");
    int def_measured = comment ? provenance_of(comment) : -1;
    if (def_measured < 0 && c_lim >= 0) def_measured = 0;
    tl_csv_row r = {0};
    int rc = TL_OK, got, unplaced = 0;
    char first_src[200] = "";
    while ((got = tl_csv_next(pp, &r, line)) == 1) {
        if (tl_csv_blank(&r) || tl_csv_field(&r, 0)[0] == '#') continue;
        if (r.n < h->n) {
            rc = tl_error(TL_EUSAGE, file, "line %d: %d fields, the header has %d", r.line, r.n, h->n);
            break;
        }
        tl_point pt = {0};
        pt.launches = 1;
        double v[3];
        int cols[3] = {by_counts ? c_f : c_i, by_counts ? c_b : c_tf, by_counts ? c_t : c_tf};
        for (int k = 0; k < 3; k++) {
            int ok = parse_num(tl_csv_field(&r, cols[k]), &v[k]);
            if (ok <= 0) {
                rc = tl_error(TL_EUSAGE, file, "line %d: malformed number '%s' in column %s%s", r.line,
                              tl_csv_field(&r, cols[k]), tl_csv_field(h, cols[k]), malformed_why(ok));
                break;
            }
        }
        if (rc) break;
        if (by_counts) {
            pt.flops = v[0];
            pt.bytes = v[1];
            pt.time_us = v[2];
            if (!(pt.time_us > 0)) {
                rc = tl_error(TL_EUSAGE, file, "line %d: time must be > 0", r.line);
                break;
            }
            /* a kernel without FLOPs or without HBM bytes (bench roofline's matrix loops and HBM
             * kernels) has no place on a log-log roofline: left out, and said so in the footer */
            if (!(pt.bytes > 0) || !(pt.flops > 0)) {
                unplaced++;
                continue;
            }
            pt.intensity = pt.flops / pt.bytes;
            pt.tflops = pt.flops / (pt.time_us * 1e6);
        } else {
            pt.intensity = v[0];
            pt.tflops = v[1];
            if (!(pt.intensity > 0) || !(pt.tflops > 0)) {
                rc = tl_error(TL_EUSAGE, file, "line %d: intensity and tflops must be > 0", r.line);
                break;
            }
        }
        if (c_l >= 0 && !c_l_names_kernel) snprintf(pt.label, sizeof pt.label, "%s", tl_csv_field(&r, c_l));
        else if (c_l >= 0 && (c_tok >= 0 || c_st >= 0)) /* a kernel's several launches: which one */
            snprintf(pt.label, sizeof pt.label, "%s%s%s%s%s", tl_csv_field(&r, c_l), c_st >= 0 ? " s" : "",
                     c_st >= 0 ? tl_csv_field(&r, c_st) : "", c_tok >= 0 ? " M=" : "", c_tok >= 0 ? tl_csv_field(&r, c_tok) : "");
        else if (c_l >= 0) snprintf(pt.label, sizeof pt.label, "%s", tl_csv_field(&r, c_l));
        else if (c_tok >= 0 && c_st >= 0) snprintf(pt.label, sizeof pt.label, "M=%s s%s", tl_csv_field(&r, c_tok), tl_csv_field(&r, c_st));
        else if (c_tok >= 0) snprintf(pt.label, sizeof pt.label, "M=%s", tl_csv_field(&r, c_tok));
        else snprintf(pt.label, sizeof pt.label, "#%d", out->n + 1);
        pt.measured = def_measured;
        if (c_src >= 0 && tl_csv_field(&r, c_src)[0]) {
            int m = provenance_of(tl_csv_field(&r, c_src));
            if (m >= 0) pt.measured = m;
            if (!first_src[0]) snprintf(first_src, sizeof first_src, "%s", tl_csv_field(&r, c_src));
        }
        if (c_hw >= 0 && !hw_name[0]) snprintf(hw_name, sizeof hw_name, "%s", tl_csv_field(&r, c_hw));
        if ((rc = add_point(out, &pt, file))) break;
    }
    if (rc == TL_OK && got < 0) rc = tl_csv_fail(file, &r, got);
    if (rc == TL_OK && out->n == 0)
        rc = tl_error(TL_EUSAGE, file, unplaced ? "no row has both flops and bytes > 0" : "no data rows");
    if (rc == TL_OK) {
        if (first_src[0]) snprintf(out->source, sizeof out->source, "%s", first_src);
        else if (comment && provenance_of(comment) >= 0) snprintf(out->source, sizeof out->source, "%s", comment);
        else if (def_measured == 0 && hw_name[0])
            snprintf(out->source, sizeof out->source, "simulated on preset %s", hw_name);
        else if (def_measured == 0) snprintf(out->source, sizeof out->source, "simulated");
        else snprintf(out->source, sizeof out->source, "source not stated");
        size_t l = strlen(out->source);
        if (unplaced)
            snprintf(out->source + l, sizeof out->source - l, "; %d row%s without FLOPs or bytes left out",
                     unplaced, unplaced > 1 ? "s" : "");
    }
    tl_csv_free(&r);
    return rc;
}

/* ---- entry points ---- */

int tl_points_parse(const char *text, const char *name, tl_points *out)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    int line = 1, got, rc = TL_OK;
    tl_csv_row h = {0};
    char comment[200] = "";
    /* The header is the first row that is not a comment, a profiler message or program output. */
    for (;;) {
        got = tl_csv_next(&p, &h, &line);
        if (got <= 0) break;
        const char *f0 = tl_csv_field(&h, 0);
        if (f0[0] == '#') {
            if (!comment[0] && provenance_of(f0) >= 0) {
                const char *c = f0 + 1;
                while (*c == ' ' || *c == '#') c++;
                snprintf(comment, sizeof comment, "%s", c);
            }
            continue;
        }
        if (tl_csv_blank(&h) || strncmp(f0, "==", 2) == 0) continue;
        if (h.n >= 2) break;
        /* ncu mixes the program's own stdout into its report: skip short non-CSV lines. */
    }
    if (got < 0) rc = tl_csv_fail(name, &h, got);
    else if (got == 0) rc = tl_error(TL_EUSAGE, name, "no header row");
    else if (tl_csv_col(&h, "Kernel Name") >= 0 && tl_csv_col(&h, "Metric Name") >= 0 &&
             tl_csv_col(&h, "Metric Value") >= 0 && tl_csv_col(&h, "ID") >= 0) {
        out->format = TL_POINTS_NCU;
        rc = parse_ncu(&p, &line, &h, name, 0, out);
    } else if (tl_csv_col(&h, "Kernel_Name") >= 0 && tl_csv_col(&h, "Counter_Name") >= 0 &&
               tl_csv_col(&h, "Counter_Value") >= 0 && tl_csv_col(&h, "Dispatch_Id") >= 0) {
        out->format = TL_POINTS_ROCPROF;
        rc = parse_rocprof(&p, &line, &h, name, out);
    } else if (tl_csv_col(&h, "Kernel_Name") >= 0 && tl_csv_col(&h, "Start_Timestamp") >= 0) {
        rc = tl_error(TL_EUSAGE, name, "a rocprofv3 kernel trace without counters: collect with "
                                       "--pmc (FLOP and byte counters) and pass the counter_collection.csv");
    } else if (tl_csv_col(&h, "Kernel Name") >= 0 && tl_csv_col(&h, "ID") >= 0) {
        out->format = TL_POINTS_NCU;
        rc = parse_ncu(&p, &line, &h, name, 1, out);
    } else {
        out->format = TL_POINTS_TILELAB;
        rc = parse_tilelab(&p, &line, &h, name, comment[0] ? comment : NULL, out);
    }
    tl_csv_free(&h);
    if (rc) tl_points_free(out);
    else {
        const char *base = name ? strrchr(name, '/') : NULL;
        snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : name ? name : "");
    }
    return rc;
}

int tl_points_read(const char *path, tl_points *out)
{
    memset(out, 0, sizeof *out);
    char *buf = NULL;
    int rc = tl_text_file_read(path, "the points file", MAX_FILE_BYTES, &buf);
    if (rc) return rc;
    rc = tl_points_parse(buf, path, out);
    free(buf);
    if (rc == TL_OK && out->format != TL_POINTS_TILELAB) {
        /* Profiler exports carry no date and no device name: the file's modification day stands
         * in for the date, and the footer says that the device is not named. */
        struct stat st;
        char day[16] = "unknown date";
        if (stat(path, &st) == 0) {
            struct tm tm;
            gmtime_r(&st.st_mtime, &tm);
            strftime(day, sizeof day, "%Y-%m-%d", &tm);
        }
        size_t l = strlen(out->source);
        snprintf(out->source + l, sizeof out->source - l, ", file of %s, device not named in it", day);
    }
    return rc;
}

void tl_points_free(tl_points *p)
{
    free(p->pts);
    memset(p, 0, sizeof *p);
}

const char *tl_points_format_name(tl_points_format f)
{
    switch (f) {
    case TL_POINTS_TILELAB: return "tilelab csv";
    case TL_POINTS_NCU: return "ncu --csv";
    case TL_POINTS_ROCPROF: return "rocprofv3 counters";
    }
    return "?";
}
