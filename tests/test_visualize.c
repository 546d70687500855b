/* Tests of visualize/: surfaces (PNG/SVG/PDF, atomic files, bad extensions), axes, number
 * formatting, the three points parsers on the sample files in tests/data/, and every figure. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tl.h"
#include "simulator/hw.h"
#include "simulator/model.h"
#include "simulator/moe.h"
#include "visualize/figures.h"
#include "visualize/gfx.h"
#include "visualize/points.h"

static char out_dir[1024];

static void out_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", out_dir, name);
}

/* Counts files in out_dir whose name contains ".tmp." (left-over temporaries). */
static int tmp_files_left(void)
{
    DIR *d = opendir(out_dir);
    int n = 0;
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Reads the first n bytes of a file into buf; returns how many were read. */
static size_t head(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return got;
}

static int is_png(const char *path)
{
    char b[8];
    return head(path, b, 8) == 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0;
}

static int setup(void **state)
{
    (void)state;
    snprintf(out_dir, sizeof out_dir, "%s/test_visualize_out", TL_BINARY_DIR);
    return tl_mkdirs(out_dir) == 0 ? 0 : -1;
}

/* ---- surfaces ---- */

static void draw_something(tl_gfx *g)
{
    tl_plot pl;
    tl_plot_init(&pl, 60, 30, 200, 120, 0.1, 1000, 1, 1, 100, 0);
    tl_plot_axes(g, &pl, "x (unit)", "y (unit)");
    double xs[3] = {60, 160, 260}, ys[3] = {150, 40, 90};
    tl_gfx_polyline(g, xs, ys, 3, 1.5, tl_gfx_palette(5), 4);
    tl_gfx_marker(g, 160, 40, 2, 8, tl_gfx_palette(6));
    tl_legend_entry le[1] = {{"a line", tl_gfx_palette(5), TL_KEY_LINE, 4, 0}};
    tl_gfx_legend(g, 280, 30, le, 1, 1);
    tl_gfx_footer(g, "simulated on preset test");
}

static void check_surface(const char *name, const char *magic, size_t magic_len, size_t search)
{
    char path[1200];
    out_path(path, sizeof path, name);
    remove(path);
    tl_gfx *g = tl_gfx_open(path, 320, 200);
    assert_non_null(g);
    draw_something(g);
    assert_int_equal(tl_gfx_close(g), 0);
    assert_true(file_size(path) > 100);
    char buf[512] = {0};
    size_t got = head(path, buf, search < sizeof buf - 1 ? search : sizeof buf - 1);
    assert_true(got >= magic_len);
    int found = 0;
    for (size_t i = 0; i + magic_len <= got && !found; i++) found = memcmp(buf + i, magic, magic_len) == 0;
    assert_true(found);
    assert_int_equal(tmp_files_left(), 0);
}

static void test_png_surface(void **state)
{
    (void)state;
    check_surface("s.png", "\x89PNG\r\n\x1a\n", 8, 8);
}

static void test_svg_surface(void **state)
{
    (void)state;
    check_surface("s.svg", "<svg", 4, 300);
}

static void test_pdf_surface(void **state)
{
    (void)state;
    check_surface("s.PDF", "%PDF-", 5, 5); /* the extension is case-insensitive */
}

static void test_bad_extension_writes_nothing(void **state)
{
    (void)state;
    const char *bad[] = {"x.jpg", "x", "x.png.bak", "dir.png/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[1200];
        out_path(path, sizeof path, bad[i]);
        tl_clear_error();
        tl_gfx *g = tl_gfx_open(path, 320, 200);
        assert_null(g);
        assert_int_equal(tl_gfx_open_status(), TL_EUSAGE);
        assert_true(strlen(tl_last_error()) > 0);
        assert_int_equal(file_size(path), -1);
    }
    assert_int_equal(tmp_files_left(), 0);
}

static void test_bad_size_and_folder(void **state)
{
    (void)state;
    char path[1200];
    out_path(path, sizeof path, "size.png");
    assert_null(tl_gfx_open(path, 0, 200));
    assert_int_equal(tl_gfx_open_status(), TL_EUSAGE);
    assert_null(tl_gfx_open(path, NAN, 200));
    assert_null(tl_gfx_open(path, 320, 1e9));
    out_path(path, sizeof path, "no/such/folder/x.png");
    assert_null(tl_gfx_open(path, 320, 200));
    assert_int_equal(tl_gfx_open_status(), TL_EFAIL);
}

static void test_abort_leaves_nothing(void **state)
{
    (void)state;
    const char *names[] = {"ab.png", "ab.svg", "ab.pdf"};
    for (int i = 0; i < 3; i++) {
        char path[1200];
        out_path(path, sizeof path, names[i]);
        remove(path);
        tl_gfx *g = tl_gfx_open(path, 320, 200);
        assert_non_null(g);
        draw_something(g);
        tl_gfx_abort(g);
        assert_int_equal(file_size(path), -1);
    }
    assert_int_equal(tmp_files_left(), 0);
    tl_gfx_abort(NULL);
}

/* ---- axes, numbers, colours ---- */

static void test_axis_map(void **state)
{
    (void)state;
    tl_axis lin = {0, 10, 0, 100, 200};
    assert_float_equal(tl_axis_map(&lin, 5), 150, 1e-9);
    tl_axis lg = {1, 1000, 1, 0, 300};
    assert_float_equal(tl_axis_map(&lg, 10), 100, 1e-9);
    assert_float_equal(tl_axis_map(&lg, 1000), 300, 1e-9);
    assert_true(isinf(tl_axis_map(&lg, 0)));
    tl_plot pl;
    tl_plot_init(&pl, 10, 20, 100, 50, 0.1, 10, 1, 0, 1, 0);
    assert_float_equal(tl_plot_y(&pl, 0), 70, 1e-9); /* y grows upward */
    assert_float_equal(tl_plot_x(&pl, 1), 60, 1e-9);
}

static void test_fmt_and_colours(void **state)
{
    (void)state;
    char b[32];
    tl_gfx_fmt(0.1, b, sizeof b);
    assert_string_equal(b, "0.1");
    tl_gfx_fmt(1000, b, sizeof b);
    assert_string_equal(b, "1000");
    tl_gfx_fmt(10000, b, sizeof b);
    assert_string_equal(b, "10k");
    tl_gfx_fmt(1e7, b, sizeof b);
    assert_string_equal(b, "10M");
    tl_rgba c = tl_gfx_palette(1); /* Okabe-Ito orange (230, 159, 0) */
    assert_float_equal(c.r, 230 / 255.0, 1e-9);
    assert_float_equal(c.g, 159 / 255.0, 1e-9);
    assert_float_equal(tl_gfx_palette(9).r, c.r, 1e-12);
    tl_rgba lo = tl_gfx_ramp(0), hi = tl_gfx_ramp(1), nan = tl_gfx_ramp(NAN);
    assert_true(hi.r + hi.g > lo.r + lo.g + 1.0); /* dark purple to bright yellow */
    assert_float_equal(nan.r, lo.r, 1e-12);
    assert_float_equal(tl_gfx_contrast(hi).r, 0, 1e-12);
    assert_float_equal(tl_gfx_contrast(lo).r, 1, 1e-12);
}

/* ---- points ---- */

static const tl_point *find_point(const tl_points *p, const char *label)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->pts[i].label, label) == 0) return &p->pts[i];
    return NULL;
}

static void test_points_ncu(void **state)
{
    (void)state;
    tl_points p;
    assert_int_equal(tl_points_read(TL_SOURCE_DIR "/tests/data/ncu_h200_probe.csv", &p), 0);
    assert_int_equal(p.format, TL_POINTS_NCU);
    assert_int_equal(p.n, 3);
    const tl_point *mma = find_point(&p, "mma_bf16_loop");
    assert_non_null(mma);
    /* tensor-path ops (2112 warps x 4096 mma.sync m16n8k16 x 4096 FLOPs) + 202,752 FADDs */
    assert_float_equal(mma->flops, 35433480192.0 + 202752.0, 0.5);
    assert_float_equal(mma->bytes, 4608, 1e-9);
    assert_float_equal(mma->time_us, 82.944, 1e-9);
    assert_int_equal(mma->measured, 1);
    const tl_point *rd = find_point(&p, "read_sum");
    assert_non_null(rd);
    assert_float_equal(rd->flops, 268435456.0 + 2 * 270336.0, 0.5); /* FADD + 2 x HFMA */
    assert_float_equal(rd->bytes, 1073751040.0 + 2440704.0, 0.5);
    assert_float_equal(rd->time_us, 703.552, 1e-9);
    assert_float_equal(rd->intensity, rd->flops / rd->bytes, 1e-12);
    assert_non_null(strstr(p.source, "Nsight Compute"));
    assert_non_null(strstr(p.source, ", device not named in it")); /* the footer says what is unknown */
    tl_points_free(&p);

    /* the wide form of --page raw: metrics as columns, a units row, Mbyte and usecond units */
    const char *wide =
        "\"ID\",\"Kernel Name\",\"CC\",\"dram__bytes_read.sum\",\"dram__bytes_write.sum\","
        "\"gpu__time_duration.sum\",\"sm__ops_path_tensor_src_fp16.sum\",\"sm__throughput.avg.pct_of_peak_sustained_elapsed\"\n"
        "\"\",\"\",\"\",\"Mbyte\",\"Kbyte\",\"usecond\",\"\",\"%\"\n"
        "\"0\",\"gemm(half*)\",\"9.0\",\"2.5\",\"1,000\",\"10.5\",\"4,000,000,000\",\"80\"\n";
    assert_int_equal(tl_points_parse(wide, "wide.csv", &p), 0);
    assert_int_equal(p.n, 1);
    assert_string_equal(p.pts[0].label, "gemm");
    assert_float_equal(p.pts[0].flops, 4e9, 1e-3);
    assert_float_equal(p.pts[0].bytes, 2.5e6 + 1e6, 1e-6);
    assert_float_equal(p.pts[0].time_us, 10.5, 1e-12);
    tl_points_free(&p);
}

/* The committed H200 export names its tensor counters sm__ops_path_tensor_op_hmma_src_*: the
 * mma.sync loops must land on their measured rates, and the FP-free memory kernels be left out. */
static void test_points_ncu_op_hmma_family(void **state)
{
    (void)state;
    tl_points p;
    assert_int_equal(tl_points_read(TL_SOURCE_DIR "/bench/results/2026-11-29_h200_roofline_ncu.csv", &p), 0);
    assert_int_equal(p.n, 2);
    int bf16 = strstr(p.pts[0].label, "bf16") ? 0 : 1;
    assert_non_null(strstr(p.pts[bf16].label, "mma_bf16"));
    /* tensor: 4224 warps x 65536 mma.sync x 4096; plus the 4325376 FADDs the export counts */
    assert_true(p.pts[bf16].flops == 1133871366144.0 + 4325376.0);
    assert_true(fabs(p.pts[bf16].time_us - 1769.792) < 1e-6);
    assert_true(p.pts[bf16].tflops > 600 && p.pts[bf16].tflops < 660); /* 646 measured by bench */
    assert_non_null(strstr(p.source, "2 kernels without FLOPs or bytes left out"));
    tl_points_free(&p);
}

static void test_points_rocprof(void **state)
{
    (void)state;
    tl_points p;
    assert_int_equal(
        tl_points_read(TL_SOURCE_DIR "/tests/data/rocprofv3_mi355x_counter_collection.csv", &p), 0);
    assert_int_equal(p.format, TL_POINTS_ROCPROF);
    assert_int_equal(p.n, 3);
    const tl_point *gemm = find_point(&p, "gemm_fp8_nt<256, 256, 128>");
    assert_non_null(gemm);
    assert_int_equal(gemm->launches, 2);
    assert_float_equal(gemm->flops, 2 * 2147483648.0 * 512, 1);       /* 2 x 2 x 8192^3 */
    assert_float_equal(gemm->bytes, 2 * (131072.0 + 131072.0) * 1024, 1); /* FETCH + WRITE, KiB */
    assert_float_equal(gemm->time_us, 240.0 + 241.0, 1e-6);
    const tl_point *rd = find_point(&p, "hbm_read_reduce");
    assert_non_null(rd);
    assert_float_equal(rd->flops, 64.0 * 16777216, 1);
    assert_float_equal(rd->bytes, (4194304.0 + 1) * 1024, 1);
    assert_float_equal(rd->time_us, 684.9, 1e-6);
    tl_points_free(&p);
}

static void test_points_tilelab(void **state)
{
    (void)state;
    tl_points p;
    assert_int_equal(tl_points_read(TL_SOURCE_DIR "/tests/data/points_h200_torch.csv", &p), 0);
    assert_int_equal(p.format, TL_POINTS_TILELAB);
    assert_int_equal(p.n, 3);
    const tl_point *bf = find_point(&p, "bf16 matmul 8192^3");
    assert_non_null(bf);
    assert_int_equal(bf->measured, 1);
    assert_float_equal(bf->tflops, 1099511627776.0 / 1383.0e6, 1e-6);
    assert_string_equal(p.source, "measured on NVIDIA H200, 2026-11-29");
    tl_points_free(&p);

    /* simulator output: tokens + stage label, simulated on the hw column's preset */
    const char *sim = "stage,hw,tokens,flops_useful,hbm_bytes,intensity,time_us,limiter\n"
                      "1,mi355x,64,3.0e10,7.5e9,4.0,1204.0,hbm\n";
    assert_int_equal(tl_points_parse(sim, "sim.csv", &p), 0);
    assert_int_equal(p.n, 1);
    assert_string_equal(p.pts[0].label, "M=64 s1");
    assert_int_equal(p.pts[0].measured, 0);
    assert_string_equal(p.source, "simulated on preset mi355x");
    tl_points_free(&p);

    const char *by_rate = "# simulated on preset h200\nname,intensity,tflops\nk,12.5,40\n";
    assert_int_equal(tl_points_parse(by_rate, "r.csv", &p), 0);
    assert_float_equal(p.pts[0].intensity, 12.5, 1e-12);
    assert_int_equal(p.pts[0].measured, 0);
    tl_points_free(&p);
}

static void test_points_malformed(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "a,b,c\n1,2,3\n",                                       /* unknown header */
        "name,flops,hbm_bytes,time_us\nk,1.2.3,5,6\n",          /* malformed number */
        "name,flops,hbm_bytes,time_us\nk,-1,5,6\n",             /* negative */
        "name,flops,hbm_bytes,time_us\nk,1,5,0\n",              /* zero time */
        "name,flops,hbm_bytes,time_us\nk,1,5\n",                /* short row */
        "name,flops,hbm_bytes,time_us\n\"k,1,5,6\n",           /* unterminated quote */
        "name,flops,hbm_bytes,time_us\n",                       /* no rows */
        "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
        "\"0\",\"k\",\"gpu__time_duration.sum\",\"fortnight\",\"3\"\n", /* unknown unit */
        "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
        "\"0\",\"k\",\"gpu__time_duration.sum\",\"ns\",\"3\"\n",         /* no FLOPs, no bytes */
        "\"Correlation_Id\",\"Dispatch_Id\",\"Kernel_Name\",\"Counter_Name\",\"Counter_Value\","
        "\"Start_Timestamp\",\"End_Timestamp\"\n1,1,\"k\",\"FETCH_SIZE\",12,200,100\n", /* t1 < t0 */
        "\"Kind\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\"K\",\"k\",1,2\n", /* trace only */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tl_points p;
        tl_clear_error();
        int rc = tl_points_parse(bad[i], "bad.csv", &p);
        if (rc != TL_EUSAGE) fprintf(stderr, "case %zu: rc %d\n", i, rc);
        assert_int_equal(rc, TL_EUSAGE);
        assert_non_null(strstr(tl_last_error(), "bad.csv"));
        assert_null(p.pts);
        assert_int_equal(p.n, 0);
    }
    tl_points p;
    assert_int_equal(tl_points_read(TL_SOURCE_DIR "/tests/data/no_such_file.csv", &p), TL_EUSAGE);
}

/* A kernel column names what ran, not which point: sim moe's CSV (kernel moe_gemm on every row) is
 * labelled by kernel, stage and M; a name or label column stays the point's own label. */
static void test_points_kernel_labels(void **state)
{
    (void)state;
    tl_points p;
    const char *sim = "stage,tokens,flops_useful,hbm_bytes,time_us,limiter,kernel\n"
                      "1,1,100,1000,10,hbm,moe_gemm\n2,1,100,1000,10,hbm,moe_gemm\n1,64,6400,2000,20,hbm,moe_gemm\n";
    assert_int_equal(tl_points_parse(sim, "sim.csv", &p), 0);
    assert_int_equal(p.n, 3);
    assert_string_equal(p.pts[0].label, "moe_gemm s1 M=1");
    assert_string_equal(p.pts[1].label, "moe_gemm s2 M=1");
    assert_string_equal(p.pts[2].label, "moe_gemm s1 M=64");
    tl_points_free(&p);
    const char *named = "name,kernel,tokens,flops,hbm_bytes,time_us\nmine,moe_gemm,4,100,1000,10\n";
    assert_int_equal(tl_points_parse(named, "named.csv", &p), 0);
    assert_string_equal(p.pts[0].label, "mine");
    tl_points_free(&p);
}

/* Commas in numbers: thousands separators (what ncu writes) read as such, any other comma refused
 * with the line and the column. */
static void test_points_thousands(void **state)
{
    (void)state;
    tl_points p;
    const char *grouped = "name,flops,hbm_bytes,time_us\nk,\"1,234,567\",\"2,000.5\",\"10\"\n";
    assert_int_equal(tl_points_parse(grouped, "g.csv", &p), 0);
    assert_float_equal(p.pts[0].flops, 1234567, 0);
    assert_float_equal(p.pts[0].bytes, 2000.5, 0);
    tl_points_free(&p);
    const char *bad[] = {"1,5e12", "12,34", "1,2345", "1.5,0", ",5", "5,", "1,,234", "0,001", "123,456,7890"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[160];
        snprintf(text, sizeof text, "name,flops,hbm_bytes,time_us\nk,\"%s\",2000,10\n", bad[i]);
        tl_clear_error();
        int rc = tl_points_parse(text, "c.csv", &p);
        if (rc != TL_EUSAGE) fprintf(stderr, "'%s': rc %d\n", bad[i], rc);
        assert_int_equal(rc, TL_EUSAGE);
        assert_non_null(strstr(tl_last_error(), "line 2"));
        assert_non_null(strstr(tl_last_error(), "column flops"));
        assert_non_null(strstr(tl_last_error(), "thousands"));
    }
    /* the one number rule (core/tl.h tl_scan_real): no blanks, no '+', no hex, also around separators */
    const char *unruly[] = {" 10", "10 ", "+10", "0x10", "1,234 ", "+1,234", "inf", "nan"};
    for (size_t i = 0; i < sizeof unruly / sizeof unruly[0]; i++) {
        char text[160];
        snprintf(text, sizeof text, "name,flops,hbm_bytes,time_us\nk,\"%s\",2000,10\n", unruly[i]);
        tl_clear_error();
        assert_int_equal(tl_points_parse(text, "c.csv", &p), TL_EUSAGE);
        assert_non_null(strstr(tl_last_error(), "line 2: malformed number"));
    }
    const char *ncu = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
                      "\"0\",\"k\",\"gpu__time_duration.sum\",\"ns\",\"1,5\"\n";
    assert_int_equal(tl_points_parse(ncu, "n.csv", &p), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "line 2: malformed value '1,5' for gpu__time_duration.sum"));
    /* the committed ncu export writes its counts with separators ("1,073,751,040") */
    assert_int_equal(tl_points_read(TL_SOURCE_DIR "/tests/data/ncu_h200_probe.csv", &p), 0);
    assert_true(p.n > 0);
    for (int i = 0; i < p.n; i++) assert_true(p.pts[i].bytes >= 1e3 && p.pts[i].flops >= 1e3);
    tl_points_free(&p);
}

/* ---- figures ---- */

static void test_fig_roofline(void **state)
{
    (void)state;
    tl_hw hw;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    tl_points sets[2];
    assert_int_equal(
        tl_points_read(TL_SOURCE_DIR "/tests/data/rocprofv3_mi355x_counter_collection.csv", &sets[0]), 0);
    assert_int_equal(tl_points_read(TL_SOURCE_DIR "/tests/data/points_h200_torch.csv", &sets[1]), 0);
    char path[1200];
    out_path(path, sizeof path, "roofline.png");
    tl_band band = {1, 26, 137};
    assert_int_equal(tl_fig_roofline(path, &hw, sets, 2, band), 0);
    assert_true(is_png(path));
    /* a bad band fails before anything is written */
    out_path(path, sizeof path, "roofline_bad.png");
    tl_band inverted = {1, 137, 26};
    assert_int_equal(tl_fig_roofline(path, &hw, sets, 2, inverted), TL_EUSAGE);
    assert_int_equal(file_size(path), -1);
    tl_points_free(&sets[0]);
    tl_points_free(&sets[1]);
}

/* The stage-1 problem the MoE figures' data comes from in these tests. */
static tl_moe_problem moe_problem(const tl_hw *hw, const tl_model *model, int tokens, int tp)
{
    tl_moe_problem p = {0};
    p.hw = hw;
    p.model = model;
    p.dtype = TL_MOE_FP8;
    p.tokens = tokens;
    p.stage = 1;
    assert_int_equal(tl_routing_parse("balanced", &p.routing), 0);
    p.seed = 1;
    p.tile_m = 16;
    p.tp = tp;
    return p;
}

static void test_fig_moe_tiles(void **state)
{
    (void)state;
    tl_hw hw;
    tl_model model;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    assert_int_equal(tl_model_load("deepseek-v3.2", &model), 0);
    int tokens[3] = {1, 32, 512};
    tl_worklist wl[3];
    tl_tiles_panel panels[3];
    const char *labels[3] = {"M = 1 token", "M = 32 tokens", "M = 512 tokens"};
    for (int i = 0; i < 3; i++) {
        tl_moe_problem p = moe_problem(&hw, &model, tokens[i], 1);
        assert_int_equal(tl_moe_worklist(&p, &wl[i]), 0);
        panels[i] = (tl_tiles_panel){&wl[i], labels[i]};
    }
    tl_tiles_about about = {model.name, 8, 0, "balanced", 1, hw.name};
    char path[1200];
    out_path(path, sizeof path, "tiles.svg");
    assert_int_equal(tl_fig_moe_tiles(path, panels, 3, &about), 0);
    assert_true(file_size(path) > 1000);
    /* no panel, or panels of different tiles: refused before any file */
    out_path(path, sizeof path, "tiles_bad.png");
    assert_int_equal(tl_fig_moe_tiles(path, panels, 0, &about), TL_EUSAGE);
    tl_worklist other;
    tl_moe_problem p = moe_problem(&hw, &model, 32, 1);
    p.tile_m = 32;
    assert_int_equal(tl_moe_worklist(&p, &other), 0);
    tl_tiles_panel mixed[2] = {panels[0], {&other, "M = 32 tokens"}};
    assert_int_equal(tl_fig_moe_tiles(path, mixed, 2, &about), TL_EUSAGE);
    assert_int_equal(file_size(path), -1);
    tl_worklist_free(&other);
    for (int i = 0; i < 3; i++) tl_worklist_free(&wl[i]);
}

static void test_fig_padding(void **state)
{
    (void)state;
    tl_padding_curve curves[2] = {{.label = "E = 256, k = 8, tile 16 rows", .n = 4},
                                  {.label = "E = 384, k = 8, tile 16 rows", .n = 4}};
    const double tokens[4] = {1, 32, 512, 8192};
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 4; i++) {
            double E = c ? 384 : 256;
            curves[c].tokens[i] = tokens[i];
            curves[c].closed[i] = fmax(1, fmin(16 * E / (tokens[i] * 8), 16));
            curves[c].simulated[i] = curves[c].closed[i] * 1.05;
        }
    char path[1200];
    out_path(path, sizeof path, "padding.png");
    assert_int_equal(tl_fig_padding(path, "mi355x", curves, 2), 0);
    assert_true(is_png(path));
    out_path(path, sizeof path, "padding_bad.png");
    curves[1].simulated[2] = 0; /* off a log axis */
    assert_int_equal(tl_fig_padding(path, "mi355x", curves, 2), TL_EUSAGE);
    curves[1].simulated[2] = NAN;
    assert_int_equal(tl_fig_padding(path, "mi355x", curves, 2), TL_EUSAGE);
    assert_int_equal(tl_fig_padding(path, "mi355x", curves, 0), TL_EUSAGE);
    assert_int_equal(tl_fig_padding(path, "mi355x", curves, TL_PADDING_MAX_CURVES + 1), TL_EUSAGE);
    assert_int_equal(file_size(path), -1);
}

static void test_fig_timeline(void **state)
{
    (void)state;
    tl_hw hw;
    tl_model model;
    assert_int_equal(tl_hw_load("mi355x", &hw), 0);
    assert_int_equal(tl_model_load("deepseek-v3.2", &model), 0);
    tl_moe_problem p = moe_problem(&hw, &model, 64, 1);
    p.want_schedule = 1;
    tl_moe_result r;
    assert_int_equal(tl_moe_sim(&p, &r), 0);
    char path[1200];
    out_path(path, sizeof path, "timeline.png");
    assert_int_equal(tl_fig_timeline(path, &p, &r), 0);
    assert_true(is_png(path));
    /* a result without its schedule is refused; nothing is written */
    tl_moe_item *items = r.items;
    r.items = NULL;
    out_path(path, sizeof path, "timeline_bad.png");
    assert_int_equal(tl_fig_timeline(path, &p, &r), TL_EUSAGE);
    r.items = items;
    p.model = NULL;
    assert_int_equal(tl_fig_timeline(path, &p, &r), TL_EUSAGE);
    assert_int_equal(file_size(path), -1);
    assert_int_equal(tmp_files_left(), 0);
    tl_moe_result_free(&r);
}

/* The timeline groups its rows by the model's numbering of CUs: on MI355X (8 x 32) and MI300X
 * (8 x 38) every XCD holds cus / xcds rows, and every work item of a schedule that leaves most CUs
 * idle (M = 1, TP 8, stage 1) sits in the XCD the model gave it. */
static void test_timeline_xcd_rows(void **state)
{
    (void)state;
    const char *presets[3] = {"mi355x", "mi300x", "h200"};
    tl_model model;
    assert_int_equal(tl_model_load("deepseek-v3.2", &model), 0);
    for (int h = 0; h < 3; h++) {
        tl_hw hw;
        assert_int_equal(tl_hw_load(presets[h], &hw), 0);
        int per_xcd[64] = {0};
        for (int cu = 0; cu < hw.cus; cu++) {
            int x = tl_fig_timeline_xcd(&hw, cu);
            assert_true(x >= 0 && x < hw.xcds);
            if (cu > 0) assert_true(x >= tl_fig_timeline_xcd(&hw, cu - 1)); /* one run of rows each */
            per_xcd[x]++;
        }
        for (int x = 0; x < hw.xcds; x++) assert_int_equal(per_xcd[x], hw.cus / hw.xcds);
        if (h == 0) assert_int_equal(per_xcd[0], 32);
        if (h == 1) assert_int_equal(per_xcd[0], 38);
        tl_moe_problem p = moe_problem(&hw, &model, 1, 8);
        p.want_schedule = 1;
        tl_moe_result r;
        assert_int_equal(tl_moe_sim(&p, &r), 0);
        assert_true(r.work_items < hw.cus); /* idle CUs: the case the figure once grouped wrongly */
        for (long long i = 0; i < r.work_items; i++)
            assert_int_equal(r.items[i].xcd, tl_fig_timeline_xcd(&hw, r.items[i].cu));
        tl_moe_result_free(&r);
    }
}

static void test_fig_mfma(void **state)
{
    (void)state;
    char path[1200];
    out_path(path, sizeof path, "mfma.pdf");
    assert_int_equal(tl_fig_mfma(path, "gfx950", "v_mfma_f32_16x16x32_bf16"), 0);
    char b[5];
    assert_int_equal(head(path, b, 5), 5);
    assert_memory_equal(b, "%PDF-", 5);
    out_path(path, sizeof path, "mfma_bad.png");
    assert_int_equal(tl_fig_mfma(path, "gfx942", "v_mfma_f32_16x16x128_f8f6f4"), TL_EUSAGE);
    assert_int_equal(tl_fig_mfma(path, "gfx1100", "v_mfma_f32_16x16x16_bf16"), TL_EUSAGE);
    assert_int_equal(file_size(path), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_surface),
        cmocka_unit_test(test_svg_surface),
        cmocka_unit_test(test_pdf_surface),
        cmocka_unit_test(test_bad_extension_writes_nothing),
        cmocka_unit_test(test_bad_size_and_folder),
        cmocka_unit_test(test_abort_leaves_nothing),
        cmocka_unit_test(test_axis_map),
        cmocka_unit_test(test_fmt_and_colours),
        cmocka_unit_test(test_points_ncu),
        cmocka_unit_test(test_points_ncu_op_hmma_family),
        cmocka_unit_test(test_points_rocprof),
        cmocka_unit_test(test_points_tilelab),
        cmocka_unit_test(test_points_malformed),
        cmocka_unit_test(test_points_thousands),
        cmocka_unit_test(test_points_kernel_labels),
        cmocka_unit_test(test_fig_roofline),
        cmocka_unit_test(test_fig_moe_tiles),
        cmocka_unit_test(test_fig_padding),
        cmocka_unit_test(test_fig_timeline),
        cmocka_unit_test(test_timeline_xcd_rows),
        cmocka_unit_test(test_fig_mfma),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
