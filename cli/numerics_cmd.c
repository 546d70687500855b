/* `tilelab numerics convert|table|quantize` (attention-error: attention_cmd.c) and `tilelab bench numerics`. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/table.h"
#include "../numerics/dist.h"
#include "../numerics/formats.h"
#include "../numerics/mx.h"
#include "../numerics/quant.h"

/* ---- convert ---- */

static const char CONVERT_USAGE[] =
    "usage: tilelab numerics convert --to FMT [--saturate | --no-saturate]\n"
    "Reads one number per line on stdin (decimal, C99 hex float such as 0x1.8p-9, inf, -inf, nan),\n"
    "reads it as float32 (correctly rounded), encodes it with round-to-nearest-even and prints\n"
    "  <input as given> 0x<code> <decoded value, %.9g>\n"
    "with two hex digits for formats of 8 bits or fewer and four for bf16 and fp16. Blank lines are\n"
    "skipped. FMT: e4m3fn e5m2 e4m3fnuz e5m2fnuz e2m3 e3m2 e2m1 e8m0 bf16 fp16.\n"
    "--saturate (default): overflow and +-inf go to +-max. --no-saturate: overflow goes to Inf where\n"
    "the format has one, else NaN (FP4/FP6 saturate in both modes). Nothing is printed unless every\n"
    "line parses; a bad line (not a number, not text, over 4095 bytes) is one error and exit status 2.\n";

/* Strips leading and trailing white space in place; returns the start. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    return s;
}

#define CONVERT_LINE_MAX 4095 /* bytes of one input line before its newline: a number, with room to spare */

/* Reads one line of f into buf (cap bytes, NUL-terminated, newline kept). Returns its length, -1 at
 * the end of the input, or -2 when it holds more than cap - 2 bytes before its newline (it stops
 * there: an endless line such as /dev/zero's is refused after cap bytes, not read into memory).
 * NUL bytes are kept. */
static long read_line(FILE *f, char *buf, size_t cap)
{
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        if (c != '\n' && n + 2 >= cap) return -2; /* no room for it and a newline */
        buf[n++] = (char)c;
        if (c == '\n') break;
    }
    buf[n] = '\0';
    return n == 0 ? -1 : (long)n;
}

static int parse_input_number(const char *s, float *out)
{
    char *end;
    float v = strtof(s, &end); /* decimal, hex float, inf, nan; out-of-range decimals give +-inf/0 */
    if (end == s || *end != '\0') return 0;
    *out = v;
    return 1;
}

static int cmd_convert(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, CONVERT_USAGE)) return 0;
    const char *to = NULL;
    int saturate = 1; /* --saturate and --no-saturate are one choice: they share the flag */
    tl_opt opts[] = {TL_OPT_V("--to", &to), TL_OPT_F("--saturate", &saturate, 1),
                     TL_OPT_F("--no-saturate", &saturate, 0), TL_OPT_END};
    if (tl_opts_parse(argc, argv, opts, "numerics convert", NULL, 0, NULL)) return TL_EUSAGE;
    if (!to) return tl_error(TL_EUSAGE, "numerics convert", "--to FMT is required");
    tl_numfmt f;
    int rc = tl_numfmt_parse(to, &f);
    if (rc) return rc;
    int digits = tl_numfmt_bits(f) <= 8 ? 2 : 4;
    char *outbuf = NULL, line[CONVERT_LINE_MAX + 2]; /* the line, its newline and a NUL */
    size_t outlen = 0;
    FILE *out = open_memstream(&outbuf, &outlen);
    if (!out) return tl_error(TL_EFAIL, "numerics convert", "out of memory");
    long lineno = 0, got;
    while ((got = read_line(stdin, line, sizeof line)) >= 0) {
        lineno++;
        if (lineno == 1 && tl_skip_bom(line) != line) memmove(line, line + 3, (size_t)(got -= 3) + 1);
        int binary = memchr(line, '\0', (size_t)got) != NULL;
        for (long j = 0; j < got && !binary; j++) /* control bytes would garble the error line */
            binary = ((unsigned char)line[j] < 0x20 && !strchr("\t\r\n", line[j])) || line[j] == 0x7f;
        if (binary) {
            rc = tl_error(TL_EUSAGE, "numerics convert", "line %ld: not text", lineno);
            break;
        }
        char *s = trim(line);
        if (!*s) continue;
        float x;
        if (!parse_input_number(s, &x)) {
            rc = tl_error(TL_EUSAGE, "numerics convert", "line %ld: '%.60s' is not a number", lineno, s);
            break;
        }
        uint16_t code = tl_encode(f, x, saturate);
        fprintf(out, "%s 0x%0*X %.9g\n", s, digits, (unsigned)code, (double)tl_decode(f, code));
    }
    if (!rc && got == -2)
        rc = tl_error(TL_EUSAGE, "numerics convert", "line %ld: longer than %d bytes", lineno + 1, CONVERT_LINE_MAX);
    if (!rc && ferror(stdin)) /* e.g. standard input a folder: not an empty input */
        rc = tl_error(TL_EUSAGE, "numerics convert", "cannot read standard input: %s", strerror(errno));
    fclose(out);
    if (!rc) fwrite(outbuf, 1, outlen, stdout);
    free(outbuf);
    return rc;
}

/* ---- table ---- */

static const char TABLE_USAGE[] =
    "usage: tilelab numerics table FMT [--format table|csv|json]\n"
    "Prints every code of FMT with its value and class (zero, subnormal, normal, max, inf, nan).\n";

static int cmd_table(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, TABLE_USAGE)) return 0;
    const char *name = NULL, *fmt_s = NULL;
    tl_format fmt = TL_FMT_TABLE;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    int npos = 0;
    if (tl_opts_parse(argc, argv, opts, "numerics table", &name, 1, &npos)) return TL_EUSAGE;
    if (fmt_s && tl_parse_format(fmt_s, &fmt)) return TL_EUSAGE;
    if (!name) return tl_error(TL_EUSAGE, "numerics table", "which format? (tilelab numerics table FMT)");
    tl_numfmt f;
    int rc = tl_numfmt_parse(name, &f);
    if (rc) return rc;
    tl_table *t = tl_table_new("code,hex,value,class");
    if (!t) return tl_error(TL_EFAIL, "numerics table", "out of memory");
    int digits = tl_numfmt_bits(f) <= 8 ? 2 : 4;
    for (uint32_t c = 0; c < tl_numfmt_code_count(f); c++) {
        char hex[16];
        snprintf(hex, sizeof hex, "0x%0*X", digits, (unsigned)c);
        tl_table_row(t);
        tl_table_int(t, c);
        tl_table_str(t, hex);
        tl_table_numf(t, "%.9g", tl_decode(f, (uint16_t)c));
        tl_table_str(t, tl_numclass_name(tl_classify(f, (uint16_t)c)));
    }
    char title[160];
    snprintf(title, sizeof title, "%s: %d bits, bias %d, max %.9g, min normal %.9g, min subnormal %.9g",
             tl_numfmt_name(f), tl_numfmt_bits(f), tl_numfmt_bias(f), tl_numfmt_max(f),
             tl_numfmt_min_normal(f), tl_numfmt_min_subnormal(f));
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    return 0;
}

/* ---- quantize ---- */

static const char QUANTIZE_USAGE[] =
    "usage: tilelab numerics quantize --scheme S [--scale-rule floor|rceil|even]\n"
    "         [--dist normal|uniform|laplace|outliers] [--n N] [--seed S] [--rotate none|hadamard|random]\n"
    "         [--row R] [--format table|csv|json]\n"
    "Quantizes N seeded values (default 1048576) with scheme S and decodes them back; prints the error\n"
    "metrics and the seed (give it back with --seed to repeat a run).\n"
    "S: mxfp4 mxfp6_e2m3 mxfp6_e3m2 mxfp8_e4m3 mxfp8_e5m2 fp8_e4m3_tensor fp8_block128 int4_g128_sym\n"
    "   int4_g128_asym, or all. The scale rule matters for the MX schemes only (default floor).\n"
    "--rotate rotates each row of R values (default 128, at most 8192; hadamard needs a power of two,\n"
    "random at most 2048, and at most 2^36 multiply-adds: 2 x N x R per scheme) before\n"
    "quantizing and rotates back after; errors are measured in the original domain (for these\n"
    "orthogonal rotations rel_rms, sqnr and nmse equal those of the rotated domain; max_abs does not).\n"
    "outliers: N(0,1) with R/64 channels of each row scaled by 20-100x.\n";

/* The random rotation's work is 2 x n x row multiply-adds per scheme (a row times Q, then times
 * Q^T): bounded so that a run takes a minute or two on one core, not hours (2^28 values of rows of
 * 2048 would be 1.1e12). Hadamard (n log row) and no rotation stay within the --n cap's cost. */
#define RANDOM_ROTATION_MAX_MADDS 68719476736.0 /* 2^36 */

static int check_rotation_work(tl_rotation rot, long n, long row, int schemes)
{
    double madds = 2.0 * (double)n * (double)row * schemes;
    if (rot != TL_ROT_RANDOM || madds <= RANDOM_ROTATION_MAX_MADDS) return TL_OK;
    return tl_error(TL_EUSAGE, "--rotate random", "2 x %ld values x row %ld x %d scheme%s = %.3g multiply-adds, more "
                    "than the %.3g (2^36) allowed: give a smaller --n or --row", n, row, schemes,
                    schemes > 1 ? "s" : "", madds, RANDOM_ROTATION_MAX_MADDS);
}

static int cmd_quantize(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, QUANTIZE_USAGE)) return 0;
    const char *scheme = NULL;
    tl_scale_rule rule = TL_SCALE_FLOOR;
    tl_dist dist = TL_DIST_NORMAL;
    tl_rotation rot = TL_ROT_NONE;
    tl_format fmt = TL_FMT_TABLE;
    long n = 1L << 20, row = 128, seedv = -1;
    const char *rule_s = NULL, *dist_s = NULL, *rot_s = NULL, *fmt_s = NULL, *n_s = NULL, *row_s = NULL,
               *seed_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--scheme", &scheme), TL_OPT_V("--scale-rule", &rule_s), TL_OPT_V("--dist", &dist_s),
                     TL_OPT_V("--rotate", &rot_s), TL_OPT_V("--format", &fmt_s), TL_OPT_V("--n", &n_s),
                     TL_OPT_V("--row", &row_s), TL_OPT_V("--seed", &seed_s), TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "numerics quantize", NULL, 0, NULL);
    if (rc || (rule_s && (rc = tl_scale_rule_parse(rule_s, &rule))) ||
        (dist_s && (rc = tl_dist_parse(dist_s, &dist))) ||
        (rot_s && (rc = tl_rotation_parse(rot_s, &rot))) || (fmt_s && (rc = tl_parse_format(fmt_s, &fmt))) ||
        (n_s && (rc = tl_parse_long(n_s, 1, 1L << 28, "--n", &n))) ||
        (row_s && (rc = tl_parse_long(row_s, 1, 8192, "--row", &row))) ||
        (seed_s && (rc = tl_parse_long(seed_s, 0, 0x7FFFFFFFFFFFFFFFL, "--seed", &seedv))))
        return rc;
    if (!scheme) return tl_error(TL_EUSAGE, "numerics quantize", "--scheme S is required");
    tl_quant_scheme only = TL_QS_COUNT;
    if (strcmp(scheme, "all") != 0 && (rc = tl_quant_scheme_parse(scheme, &only))) return rc;
    if (rot != TL_ROT_NONE && n % row != 0)
        return tl_error(TL_EUSAGE, "--n", "%ld is not a multiple of the row length %ld", n, row);
    if (rot == TL_ROT_HADAMARD && (row & (row - 1)) != 0)
        return tl_error(TL_EUSAGE, "--row", "hadamard needs a power of two, not %ld", row);
    if ((rc = check_rotation_work(rot, n, row, only == TL_QS_COUNT ? TL_QS_COUNT : 1))) return rc;
    uint64_t seed = seedv >= 0 ? (uint64_t)seedv : tl_fresh_seed();
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) return tl_error(TL_EFAIL, "numerics quantize", "out of memory for %ld values", n);
    rc = tl_dist_fill(dist, seed, x, (size_t)n, (size_t)row);
    tl_table *t = rc ? NULL : tl_table_new("scheme,bits,scale_rule,dist,rotate,n,seed,max_abs,max_rel,"
                                           "rel_rms,sqnr_db,nmse,cosine,nan_count");
    if (!rc && !t) rc = tl_error(TL_EFAIL, "numerics quantize", "out of memory");
    for (int s = 0; s < TL_QS_COUNT && !rc; s++) {
        if (only != TL_QS_COUNT && s != (int)only) continue;
        tl_err_metrics m;
        rc = tl_quant_study((tl_quant_scheme)s, rule, rot, (size_t)row, seed ^ 0x5eedULL, x, (size_t)n, &m);
        if (rc) break;
        tl_table_row(t);
        tl_table_str(t, tl_quant_scheme_name((tl_quant_scheme)s));
        tl_table_num(t, tl_quant_scheme_bits((tl_quant_scheme)s));
        tl_table_str(t, tl_scale_rule_name(rule));
        tl_table_str(t, tl_dist_name(dist));
        tl_table_str(t, tl_rotation_name(rot));
        tl_table_int(t, n);
        tl_table_int(t, (long long)seed);
        tl_table_numf(t, "%.4g", m.max_abs);
        tl_table_numf(t, "%.4g", m.max_rel);
        tl_table_numf(t, "%.5f", m.rel_rms);
        tl_table_numf(t, "%.2f", m.sqnr_db);
        tl_table_numf(t, "%.4e", m.nmse);
        tl_table_numf(t, "%.6f", m.cosine);
        tl_table_int(t, (long long)m.nan_count);
    }
    if (!rc) {
        char title[200];
        snprintf(title, sizeof title, "quantization round trip: %ld %s values, seed %llu, rotate %s (row %ld)",
                 n, tl_dist_name(dist), (unsigned long long)seed, tl_rotation_name(rot), row);
        tl_table_print(t, fmt, title, stdout);
    }
    tl_table_free(t);
    free(x);
    return rc;
}

static const tl_command numerics_table[] = {
    {"convert", cmd_convert, "float32 on stdin -> codes and decoded values", CONVERT_USAGE},
    {"table", cmd_table, "every code of a format with its value and class", TABLE_USAGE},
    {"quantize", cmd_quantize, "error of a quantization scheme on seeded data", QUANTIZE_USAGE},
    {"attention-error", tl_cmd_attention_error, "error of FP8/BF16 causal prefill attention, with rotation",
     TL_ATTENTION_ERROR_USAGE},
    {NULL, NULL, NULL, NULL},
};

int tl_cmd_numerics(int argc, char **argv) { return tl_dispatch(numerics_table, "numerics", argc, argv); }

/* ---- bench numerics ---- */

static const char BENCH_USAGE[] =
    "usage: tilelab bench numerics [--n N] [--runs R] [--format table|csv|json]\n"
    "Throughput on one core (values/s, median of R runs, default 31, each over the same N values,\n"
    "default 262144): FP8 E4M3FN encode (saturating), FP8 decode (table), MXFP4 quantize (FLOOR,\n"
    "blocks of 32), plus E5M2 and BF16 encode and MXFP8 quantize for comparison. The default N keeps\n"
    "input and output in the L2 cache, so it measures the codec; a large N (e.g. 16777216) measures\n"
    "the memory system instead. Inputs are N(0,1), seed 1. Timing: clock_gettime(CLOCK_MONOTONIC).\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef enum { B_ENC_E4M3, B_ENC_E5M2, B_ENC_BF16, B_DEC_E4M3, B_MXFP4, B_MXFP8 } bench_kind;

static void run_once(bench_kind k, const float *x, size_t n, uint8_t *c8, uint16_t *c16, float *y,
                     uint8_t *scales)
{
    switch (k) {
    case B_ENC_E4M3: tl_encode_array8(TL_NF_E4M3FN, x, n, 1, c8); break;
    case B_ENC_E5M2: tl_encode_array8(TL_NF_E5M2, x, n, 1, c8); break;
    case B_ENC_BF16: tl_encode_array16(TL_NF_BF16, x, n, 1, c16); break;
    case B_DEC_E4M3: tl_decode_array8(TL_NF_E4M3FN, c8, n, y); break;
    case B_MXFP4: tl_mx_quantize(TL_NF_E2M1, TL_SCALE_FLOOR, 32, x, n, c8, scales); break;
    case B_MXFP8: tl_mx_quantize(TL_NF_E4M3FN, TL_SCALE_FLOOR, 32, x, n, c8, scales); break;
    }
}

static void cpu_name(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) snprintf(buf, cap, "%s", trim(p + 1));
            break;
        }
    fclose(f);
}

int tl_bench_numerics(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, BENCH_USAGE)) return 0;
    long n = 1L << 18, runs = 31;
    tl_format fmt = TL_FMT_TABLE;
    const char *n_s = NULL, *runs_s = NULL, *fmt_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--n", &n_s), TL_OPT_V("--runs", &runs_s), TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "bench numerics", NULL, 0, NULL);
    if (rc || (n_s && (rc = tl_parse_long(n_s, 1024, 1L << 28, "--n", &n))) ||
        (runs_s && (rc = tl_parse_long(runs_s, 1, 1000, "--runs", &runs))) ||
        (fmt_s && (rc = tl_parse_format(fmt_s, &fmt))))
        return rc;
    size_t N = (size_t)n;
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *c8 = malloc(N), *scales = malloc(N / 32 + 1);
    uint16_t *c16 = malloc(N * sizeof *c16);
    double *times = malloc((size_t)runs * sizeof *times);
    tl_table *t = tl_table_new("kernel,n,runs,median_s,values_per_s,target_values_per_s,meets_target");
    if (!x || !y || !c8 || !scales || !c16 || !times || !t) rc = tl_error(TL_EFAIL, "bench numerics", "out of memory");
    static const struct {
        bench_kind k;
        const char *name;
        double target;
    } B[] = {
        {B_ENC_E4M3, "encode fp8 e4m3fn", 300e6}, {B_DEC_E4M3, "decode fp8 e4m3fn", 1e9},
        {B_MXFP4, "mx-quantize mxfp4", 150e6},    {B_ENC_E5M2, "encode fp8 e5m2", 0},
        {B_ENC_BF16, "encode bf16", 0},           {B_MXFP8, "mx-quantize mxfp8 e4m3", 0},
    };
    if (!rc) {
        tl_dist_fill(TL_DIST_NORMAL, 1, x, N, 128);
        tl_encode_array8(TL_NF_E4M3FN, x, N, 1, c8); /* codes for the decode run */
        tl_decode_table8(TL_NF_E4M3FN);              /* build the tables outside the timing */
        for (size_t b = 0; b < sizeof B / sizeof B[0]; b++) {
            run_once(B[b].k, x, N, c8, c16, y, scales); /* warm-up: page faults, caches */
            if (B[b].k == B_MXFP4 || B[b].k == B_MXFP8) tl_encode_array8(TL_NF_E4M3FN, x, N, 1, c8);
            for (long r = 0; r < runs; r++) {
                double t0 = now_s();
                run_once(B[b].k, x, N, c8, c16, y, scales);
                times[r] = now_s() - t0;
            }
            if (B[b].k == B_MXFP4 || B[b].k == B_MXFP8) tl_encode_array8(TL_NF_E4M3FN, x, N, 1, c8);
            qsort(times, (size_t)runs, sizeof *times, tl_cmp_double);
            double med = times[runs / 2], rate = (double)N / med;
            tl_table_row(t);
            tl_table_str(t, B[b].name);
            tl_table_int(t, n);
            tl_table_int(t, runs);
            tl_table_numf(t, "%.6f", med);
            tl_table_numf(t, "%.4g", rate);
            if (B[b].target > 0) {
                tl_table_numf(t, "%.3g", B[b].target);
                tl_table_str(t, rate >= B[b].target ? "yes" : "NO");
            } else { /* no target set: the kernel is there for comparison */
                tl_table_none(t);
                tl_table_none(t);
            }
        }
        char cpu[256], title[400];
        cpu_name(cpu, sizeof cpu);
        snprintf(title, sizeof title, "numerics throughput, one core, %s", cpu);
        tl_table_print(t, fmt, title, stdout);
    }
    tl_table_free(t);
    free(x), free(y), free(c8), free(scales), free(c16), free(times);
    return rc;
}
