/* `tilelab draw ...`: the pictures that belong to no op (roofline, mfma); the ops' own figures are
 * their rows' (ops/OP_figs.c). Each parses its options and hands its data to visualize/. */
#include "cli.h"
#include "../ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../simulator/hw.h"
#include "../simulator/model.h"
#include "../visualize/figures.h"
#include "../visualize/points.h"

#define MAX_POINT_FILES 8
/* Where a point can sit on a roofline: FLOP/byte and TFLOP/s. Wide on purpose: a compute loop whose
 * operands stay in L2 reads almost no DRAM (the committed ncu export has 8.4e7 FLOP/B); what is
 * refused is an axis of hundreds of decades (1e300 FLOPs over 1e-300 bytes) or no number at all. */
#define POINT_MIN_INTENSITY 1e-9
#define POINT_MAX_INTENSITY 1e15
#define POINT_MIN_TFLOPS 1e-12
#define POINT_MAX_TFLOPS 1e9

/* ---- roofline ---- */

static const char roofline_usage[] =
    "usage: tilelab draw roofline [--hw mi355x] [--points FILE.csv ...] [--band LO:HI]\n"
    "                             [--measured-on \"DEVICE, DATE\"] -o FILE\n"
    "  Log-log roofline of a hardware preset: x = arithmetic intensity (FLOP/byte), y = TFLOP/s;\n"
    "  datasheet ceilings dashed, measured ceilings solid, per data type; the HBM read slope;\n"
    "  ridge points labelled. --points (repeatable, up to 8) places kernels from:\n"
    "    tilelab CSV   (flops,hbm_bytes,time_us or intensity,tflops; name/kernel/tokens label;\n"
    "                   a source column or '# measured ...' / '# simulated ...' comment line)\n"
    "    ncu --csv     (details or --page raw form; FLOPs = sm__ops_path_tensor_src_*.sum + CUDA-core\n"
    "                   sm__sass_thread_inst_executed_op_{f,h,d}{add,mul,fma}_pred_on.sum (fma x2);\n"
    "                   bytes = dram__bytes_read.sum + dram__bytes_write.sum; gpu__time_duration.sum)\n"
    "    rocprofv3     (counter_collection.csv; FLOPs = 512 x SQ_INSTS_VALU_MFMA_MOPS_* + VALU\n"
    "                   add/mul x64, fma x128; bytes = FETCH_SIZE + WRITE_SIZE (KiB) or TCC_EA0\n"
    "                   requests; time = End_Timestamp - Start_Timestamp)\n"
    "  --band LO:HI shades an intensity band (e.g. 26:137, the seed's MoE range).\n"
    "  --measured-on names the device and date of profiler exports (ncu, rocprofv3), which do not\n"
    "  carry them, for the footer.\n"
    "  --hw takes a preset name, a JSON path, or BASE,OVERLAY.json (measured ceilings).\n";

static int parse_band(const char *s, tl_band *b)
{
    const char *colon = strchr(s, ':');
    if (!colon) return tl_error(TL_EUSAGE, "--band", "expected LO:HI, got '%s'", s);
    char lo[64], hi[64];
    size_t l = (size_t)(colon - s);
    if (l == 0 || l >= sizeof lo || strlen(colon + 1) >= sizeof hi)
        return tl_error(TL_EUSAGE, "--band", "expected LO:HI, got '%s'", s);
    memcpy(lo, s, l);
    lo[l] = '\0';
    strcpy(hi, colon + 1);
    if (tl_parse_double(lo, "--band LO", &b->lo) || tl_parse_double(hi, "--band HI", &b->hi))
        return TL_EUSAGE;
    if (!(b->lo >= POINT_MIN_INTENSITY && b->hi > b->lo && b->hi < 1e12))
        return tl_error(TL_EUSAGE, "--band", "needs %g <= LO < HI < 1e12, got '%s'", POINT_MIN_INTENSITY, s);
    b->on = 1;
    return TL_OK;
}

/* TL_EUSAGE when a point of p lies off any sensible roofline (e.g. 1e300 FLOPs over 1e-300 bytes:
 * an infinite intensity empties the axes). */
static int check_point_ranges(const tl_points *p, const char *path)
{
    for (int i = 0; i < p->n; i++) {
        const tl_point *q = &p->pts[i];
        if (q->intensity >= POINT_MIN_INTENSITY && q->intensity <= POINT_MAX_INTENSITY &&
            q->tflops >= POINT_MIN_TFLOPS && q->tflops <= POINT_MAX_TFLOPS)
            continue;
        /* (tl_report_error prints a control character in the label as '?') */
        return tl_error(TL_EUSAGE, path, "point %d ('%.63s'): %g FLOP/B at %g TFLOP/s is off the roofline "
                        "([%g, %g] FLOP/B, [%g, %g] TFLOP/s)", i + 1, q->label, q->intensity, q->tflops,
                        POINT_MIN_INTENSITY, POINT_MAX_INTENSITY, POINT_MIN_TFLOPS, POINT_MAX_TFLOPS);
    }
    return TL_OK;
}

static void name_simulated_source(tl_points *p, const char *path)
{
    if (strcmp(p->source, "simulated") != 0 && strcmp(p->source, "source not stated") != 0) return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%.40s (%.200s)", p->source, base); /* source: one of the two above */
    strcpy(p->source, tmp);
}

int tl_draw_roofline(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, roofline_usage)) return 0;
    const char *hw_s = "mi355x", *points[MAX_POINT_FILES], *band_s = NULL, *out = NULL, *measured_on = NULL;
    int npoints = 0;
    tl_opt opts[] = {TL_OPT_V("--hw", &hw_s), TL_OPT_L("--points", points, MAX_POINT_FILES, &npoints),
                     TL_OPT_V("--band", &band_s), TL_OPT_V("-o", &out), TL_OPT_V("--measured-on", &measured_on),
                     TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw roofline", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "roofline"))) return rc;
    for (int i = 0; i < npoints; i++)
        if ((rc = tl_ops_output_not_input(out, points[i], "--points"))) return rc;
    tl_band band = {0};
    if (band_s && (rc = parse_band(band_s, &band))) return rc;
    tl_hw hw;
    if ((rc = tl_hw_load(hw_s, &hw))) return rc;
    tl_points sets[MAX_POINT_FILES];
    int nsets = 0;
    for (int i = 0; i < npoints; i++) {
        if ((rc = tl_points_read(points[i], &sets[nsets]))) break;
        if ((rc = check_point_ranges(&sets[nsets], points[i]))) {
            tl_points_free(&sets[nsets]);
            break;
        }
        name_simulated_source(&sets[nsets], points[i]);
        if (measured_on && sets[nsets].format != TL_POINTS_TILELAB) {
            /* keep the reader's note on kernels it could not place ("; 2 kernels without ...") */
            const char *note = strstr(sets[nsets].source, "; ");
            char kept[128];
            snprintf(kept, sizeof kept, "%s", note ? note : "");
            char *file_day = strstr(kept, ", file of "); /* --measured-on dates it already */
            if (file_day) *file_day = '\0';
            snprintf(sets[nsets].source, sizeof sets[nsets].source, "measured on %.120s (%s)%.60s",
                     measured_on, tl_points_format_name(sets[nsets].format), kept);
        }
        nsets++;
    }
    if (rc == TL_OK) rc = tl_fig_roofline(out, &hw, sets, nsets, band);
    for (int i = 0; i < nsets; i++) tl_points_free(&sets[i]);
    return rc;
}

/* ---- moe-tiles ---- */

/* ---- mfma ---- */

static const char mfma_usage[] =
    "usage: tilelab draw mfma [--arch gfx950|gfx942] --instr NAME -o FILE\n"
    "  The A (M x K), B (K x N) and C (M x N) operands of one MFMA instruction as grids coloured\n"
    "  by the lane that holds each element, lane numbers in the cells; `tilelab mfma list` names\n"
    "  the instructions.\n";

int tl_draw_mfma(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, mfma_usage)) return 0;
    const char *arch = "gfx950", *instr = NULL, *out = NULL;
    tl_opt opts[] = {TL_OPT_V("--arch", &arch), TL_OPT_V("--instr", &instr), TL_OPT_V("-o", &out), TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw mfma", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "mfma"))) return rc;
    if (!instr) return tl_error(TL_EUSAGE, "mfma", "missing --instr NAME (see tilelab mfma list)");
    return tl_fig_mfma(out, arch, instr);
}
