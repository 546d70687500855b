/* The hardware commands: `tilelab hw list|show` and `tilelab models` (the presets as the simulator
 * reads them) and `tilelab bench roofline` (the GPU's measured ceilings, which a preset's overlay
 * reads back: one list of ceilings serves both). */
#include "../kernels/devices.h"
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../core/table.h"
#include "../simulator/hw.h"
#include "../simulator/model.h"
#include "../visualize/csv.h" /* tl_text_file_read */
#include "../kernels/roofline.h" /* plain C types; its functions exist only in GPU builds */

/* The six ceilings a preset and a roofline measurement both hold, in the order every table lists
 * them: the JSON key, its unit, and where it sits in a preset's tl_hw_ceilings and in a
 * tl_roofline_report. */
typedef struct {
    const char *key, *unit;
    size_t in_preset, in_report;
} ceiling_key;

#define CEILING(k, unit) {#k, unit, offsetof(tl_hw_ceilings, k), offsetof(tl_roofline_report, k)}
static const ceiling_key CEILINGS[] = {
    CEILING(hbm_read_gbps, "GB/s"), CEILING(hbm_copy_gbps, "GB/s"),  CEILING(bf16_tflops, "TFLOP/s"),
    CEILING(fp8_tflops, "TFLOP/s"), CEILING(fp6_tflops, "TFLOP/s"), CEILING(fp4_tflops, "TFLOP/s"),
};
#undef CEILING
#define N_CEILINGS (sizeof CEILINGS / sizeof CEILINGS[0])

static tl_ceiling preset_ceiling(const tl_hw *hw, size_t i)
{
    return *(const tl_ceiling *)((const char *)&hw->ceilings + CEILINGS[i].in_preset);
}

static double *report_ceiling(tl_roofline_report *r, size_t i)
{
    return (double *)((char *)r + CEILINGS[i].in_report);
}

static double report_value(const tl_roofline_report *r, size_t i)
{
    return *(const double *)((const char *)r + CEILINGS[i].in_report);
}

/* =============================================================================================
 * hw list | show
 * =========================================================================================== */
static const char HW_USAGE[] =
    "usage: tilelab hw list [--format table|csv|json]\n"
    "       tilelab hw show NAME|FILE[,OVERLAY.json...] [--instructions] [--format table|csv|json]\n"
    "A preset name (mi355x, mi300x, h200, h100), a JSON file of the same shape, or a base followed by\n"
    "overlay files (e.g. h200,bench/results/h200.json) merged over it key by key.\n"
    "hw show prints the preset's fields and its matrix instructions. --format json gives one object\n"
    "of the preset file's shape (a file `hw show` reads back), each ceiling {datasheet, measured,\n"
    "unit} in numbers; --format csv gives the fields as field,value,datasheet,measured,unit rows.\n"
    "--instructions prints only the matrix instructions (name, shape, inputs, cycles, peak TFLOP/s, and\n"
    "a loop's measured TFLOP/s where the preset has one).\n"
    "An unknown, absent or malformed preset is one error line and exit status 2.\n";

/* A preset's scalar fields, in the order of its file: key, unit ("" for none) and type, which must
 * be the member's C type (FIELD_TEXT a char array, FIELD_INT an int, FIELD_REAL a double). */
typedef enum { FIELD_TEXT, FIELD_INT, FIELD_REAL } field_type;
typedef struct {
    const char *key, *unit;
    field_type type;
    size_t offset;
} hw_field;

#define FIELD(k, type, unit) {#k, unit, type, offsetof(tl_hw, k)}
static const hw_field HW_FIELDS[] = {
    FIELD(name, FIELD_TEXT, ""),
    FIELD(description, FIELD_TEXT, ""),
    FIELD(arch, FIELD_TEXT, ""),
    FIELD(cus, FIELD_INT, ""),
    FIELD(xcds, FIELD_INT, ""),
    FIELD(clock_mhz, FIELD_REAL, "MHz"),
    FIELD(wave_size, FIELD_INT, "lanes"),
    FIELD(matrix_cores_per_cu, FIELD_INT, ""),
    FIELD(vector_lanes_per_cu, FIELD_INT, "lanes"),
    FIELD(lds_kib, FIELD_REAL, "KiB"),
    FIELD(l2_mib_per_xcd, FIELD_REAL, "MiB"),
    FIELD(llc_mib, FIELD_REAL, "MiB"),
    FIELD(hbm_gb, FIELD_REAL, "GB"),
    FIELD(launch_us, FIELD_REAL, "us"),
    FIELD(item_fixed_us, FIELD_REAL, "us"),
    FIELD(hbm_per_cu_gbps, FIELD_REAL, "GB/s"),
    FIELD(l2_per_cu_gbps, FIELD_REAL, "GB/s"),
    FIELD(async_copy_per_cu_gbps, FIELD_REAL, "GB/s"),
    FIELD(hbm_latency_us, FIELD_REAL, "us"),
    FIELD(load_chain_us, FIELD_REAL, "us"),
    FIELD(next_kernel_us, FIELD_REAL, "us"),
    FIELD(flush_dirty_mb, FIELD_REAL, "MB"),
    FIELD(link_gbps, FIELD_REAL, "GB/s"),
    FIELD(link_peer_gbps, FIELD_REAL, "GB/s"),
    FIELD(transcendental_per_cu_clk, FIELD_REAL, "results/clock"),
    FIELD(lds_bytes_per_cu_clk, FIELD_REAL, "B/clock"),
    FIELD(wgmma_bf16_tflops, FIELD_REAL, "TFLOP/s"),
    FIELD(wgmma_fp8_tflops, FIELD_REAL, "TFLOP/s"),
    FIELD(gemm_bf16_tflops, FIELD_REAL, "TFLOP/s"),
    FIELD(gemm_fp8_tflops, FIELD_REAL, "TFLOP/s"),
    FIELD(allreduce_us, FIELD_REAL, "us"),
    FIELD(vgprs_per_simd, FIELD_INT, "registers/lane"),
    FIELD(sgprs_per_simd, FIELD_INT, "registers"),
    FIELD(waves_per_simd, FIELD_INT, "waves"),
    FIELD(device, FIELD_TEXT, ""),
    FIELD(date, FIELD_TEXT, ""),
    FIELD(source, FIELD_TEXT, ""),
};
#undef FIELD

static const char *field_text(const tl_hw *hw, const hw_field *f) { return (const char *)hw + f->offset; }
static int field_int(const tl_hw *hw, const hw_field *f) { return *(const int *)((const char *)hw + f->offset); }
static double field_real(const tl_hw *hw, const hw_field *f)
{
    return *(const double *)((const char *)hw + f->offset);
}

static void ceiling_cells(tl_table *t, tl_ceiling c)
{
    if (c.datasheet > 0) tl_table_num(t, c.datasheet);
    else tl_table_none(t);
    if (c.measured > 0) tl_table_num(t, c.measured);
    else tl_table_none(t);
}

static int hw_list(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, HW_USAGE)) return 0;
    const char *fmt_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "hw list", NULL, 0, NULL) || tl_parse_format(fmt_s, &fmt)) return TL_EUSAGE;
    tl_table *t = tl_table_new("name,arch,cus,xcds,clock_mhz,hbm_gb,hbm_read_gbps,hbm_read_measured_gbps,"
                               "bf16_tflops,bf16_measured_tflops,fp8_tflops,fp8_measured_tflops,fp4_tflops,fp4_measured_tflops");
    for (const char *const *n = tl_hw_list(); *n; n++) {
        tl_hw hw;
        if (tl_hw_load(*n, &hw)) {
            tl_table_free(t);
            return TL_EFAIL; /* an embedded preset that does not load is a build error */
        }
        tl_table_row(t);
        tl_table_str(t, hw.name);
        tl_table_str(t, hw.arch);
        tl_table_int(t, hw.cus);
        tl_table_int(t, hw.xcds);
        tl_table_num(t, hw.clock_mhz);
        tl_table_num(t, hw.hbm_gb);
        ceiling_cells(t, hw.ceilings.hbm_read_gbps);
        ceiling_cells(t, hw.ceilings.bf16_tflops);
        ceiling_cells(t, hw.ceilings.fp8_tflops);
        ceiling_cells(t, hw.ceilings.fp4_tflops);
    }
    tl_table_print(t, fmt, "hardware presets (GB/s, TFLOP/s; datasheet and measured)", stdout);
    tl_table_free(t);
    return 0;
}

/* The fields as rows field,value,datasheet,measured,unit: a scalar in value, a ceiling in
 * datasheet and measured (those it has). Text fields left empty, and the source (long prose,
 * printed below the text form), are left out; `with_source` keeps the source. */
static tl_table *hw_field_table(const tl_hw *hw, int with_source)
{
    tl_table *t = tl_table_new("field,value,datasheet,measured,unit");
    for (size_t i = 0; i < sizeof HW_FIELDS / sizeof HW_FIELDS[0]; i++) {
        const hw_field *f = &HW_FIELDS[i];
        if (f->type == FIELD_TEXT && (!field_text(hw, f)[0] || (!with_source && strcmp(f->key, "source") == 0)))
            continue;
        tl_table_row(t);
        tl_table_str(t, f->key);
        if (f->type == FIELD_TEXT) tl_table_str(t, field_text(hw, f));
        else if (f->type == FIELD_INT) tl_table_int(t, field_int(hw, f));
        else tl_table_numf(t, "%.10g", field_real(hw, f));
        tl_table_none(t);
        tl_table_none(t);
        tl_table_str(t, f->unit);
    }
    for (size_t i = 0; i < N_CEILINGS; i++) {
        tl_ceiling c = preset_ceiling(hw, i);
        if (c.datasheet <= 0 && c.measured <= 0) continue;
        tl_table_row(t);
        tl_table_str(t, CEILINGS[i].key);
        tl_table_none(t);
        if (c.datasheet > 0) tl_table_numf(t, "%.10g", c.datasheet);
        else tl_table_none(t);
        if (c.measured > 0) tl_table_numf(t, "%.10g", c.measured);
        else tl_table_none(t);
        tl_table_str(t, CEILINGS[i].unit);
    }
    return t;
}

static tl_table *hw_instruction_table(const tl_hw *hw)
{
    tl_table *t = tl_table_new("name,m,n,k,a,b,cycles,peak_tflops,measured_tflops");
    for (int i = 0; i < hw->n_instr; i++) {
        const tl_instr *x = &hw->instr[i];
        tl_table_row(t);
        tl_table_str(t, x->name);
        tl_table_int(t, x->m);
        tl_table_int(t, x->n);
        tl_table_int(t, x->k);
        tl_table_str(t, x->a);
        tl_table_str(t, x->b);
        tl_table_int(t, x->cycles);
        tl_table_numf(t, "%.1f", tl_hw_instr_tflops(hw, x));
        if (x->measured_tflops > 0) tl_table_numf(t, "%.1f", x->measured_tflops);
        else tl_table_none(t);
    }
    return t;
}

/* The preset as one JSON object of its file's shape: the scalar fields as numbers (text fields
 * left empty are left out), "ceilings" with {datasheet, measured, unit} (values it lacks left out),
 * "matrix_instructions" the table `instructions` (whose reference it takes). */
static json_t *hw_json(const tl_hw *hw, json_t *instructions)
{
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof HW_FIELDS / sizeof HW_FIELDS[0]; i++) {
        const hw_field *f = &HW_FIELDS[i];
        if (f->type == FIELD_TEXT && field_text(hw, f)[0]) json_object_set_new(o, f->key, json_string(field_text(hw, f)));
        else if (f->type == FIELD_INT) json_object_set_new(o, f->key, json_integer(field_int(hw, f)));
        else if (f->type == FIELD_REAL) json_object_set_new(o, f->key, json_real(field_real(hw, f)));
    }
    json_t *ceilings = json_object();
    for (size_t i = 0; i < N_CEILINGS; i++) {
        tl_ceiling c = preset_ceiling(hw, i);
        if (c.datasheet <= 0 && c.measured <= 0) continue;
        json_t *v = json_object();
        if (c.datasheet > 0) json_object_set_new(v, "datasheet", json_real(c.datasheet));
        if (c.measured > 0) json_object_set_new(v, "measured", json_real(c.measured));
        json_object_set_new(v, "unit", json_string(CEILINGS[i].unit));
        json_object_set_new(ceilings, CEILINGS[i].key, v);
    }
    json_object_set_new(o, "ceilings", ceilings);
    json_object_set_new(o, "matrix_instructions", instructions);
    return o;
}

static const char INSTRUCTIONS_TITLE[] = "matrix instructions (peak = 2mnk x matrix cores x CUs x clock / cycles)";

static int hw_show(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, HW_USAGE)) return 0;
    const char *fmt_s = NULL, *pos[1];
    int npos = 0, only_instructions = 0;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_F("--instructions", &only_instructions, 1), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "hw show", pos, 1, &npos) || tl_parse_format(fmt_s, &fmt)) return TL_EUSAGE;
    if (npos != 1) return tl_error(TL_EUSAGE, "hw show", "needs one NAME or FILE (tilelab hw list)");
    tl_hw hw;
    if (tl_hw_load(pos[0], &hw)) return TL_EUSAGE;
    tl_table *in = hw_instruction_table(&hw);
    if (only_instructions) {
        tl_table_print(in, fmt, INSTRUCTIONS_TITLE, stdout);
    } else if (fmt == TL_FMT_JSON) {
        json_t *o = hw_json(&hw, tl_table_to_json(in));
        tl_json_print(o, stdout);
        json_decref(o);
    } else {
        tl_table *fields = hw_field_table(&hw, fmt != TL_FMT_TABLE);
        tl_table_print(fields, fmt, hw.name, stdout);
        tl_table_free(fields);
        if (fmt == TL_FMT_TABLE) {
            if (hw.source[0]) printf("source: %s\n", hw.source);
            fputs("\n", stdout);
            tl_table_print(in, fmt, INSTRUCTIONS_TITLE, stdout);
        }
    }
    tl_table_free(in);
    return 0;
}

static const tl_command hw_table[] = {
    {"list", hw_list, "the hardware presets", HW_USAGE},
    {"show", hw_show, "one preset or file with its matrix instructions", HW_USAGE},
    {NULL, NULL, NULL, NULL},
};

int tl_cmd_hw(int argc, char **argv) { return tl_dispatch(hw_table, "hw", argc, argv); }

/* =============================================================================================
 * models
 * =========================================================================================== */
static const char MODELS_USAGE[] =
    "usage: tilelab models [NAME|CONFIG.json ...] [--format table|csv|json]\n"
    "Lists the model presets, or the given presets / config.json files, as the simulator models them:\n"
    "experts, top_k, expert_width and shared are what `sim moe` uses (its header prints the same ffn\n"
    "line). shared counts shared experts of the routed width (Qwen1.5-MoE's one of width 5632 = 4 x\n"
    "1408 is 4); shared_width is the config's width of one shared expert. A dense model runs as one\n"
    "expert of width intermediate_size that every token uses (experts 1, top_k 1). not_modelled: the\n"
    "config keys the simulator does not use (a count in the table; every name with --format csv|json).\n";

/* One row of `models`: the model as tl_model_moe_shape / tl_model_describe give it to sim moe. */
static int models_row(tl_table *t, const char *spec, tl_format fmt)
{
    tl_model m;
    if (tl_model_load(spec, &m)) return TL_EUSAGE;
    int E, k, width;
    tl_model_moe_shape(&m, &E, &k, &width);
    char ffn[160], count[32], *unused = NULL;
    tl_model_describe(&m, -1, ffn, sizeof ffn);
    if (fmt != TL_FMT_TABLE && tl_model_unused_all(spec, &unused)) return TL_EUSAGE;
    tl_table_row(t);
    tl_table_str(t, m.name);
    tl_table_int(t, m.hidden);
    tl_table_int(t, E);
    tl_table_int(t, k);
    tl_table_int(t, width);
    tl_table_int(t, tl_model_shared_experts(&m));
    tl_table_int(t, m.n_layers);
    tl_table_int(t, m.moe_layers);
    tl_table_int(t, m.dense_width);
    tl_table_int(t, m.shared_width);
    tl_table_str(t, ffn);
    tl_table_int(t, m.n_heads);
    tl_table_int(t, m.n_kv_heads);
    tl_table_int(t, m.index_n_heads);
    tl_table_int(t, m.index_head_dim);
    tl_table_int(t, m.index_topk);
    if (m.quant_method[0]) tl_table_str(t, m.quant_method);
    else tl_table_none(t);
    snprintf(count, sizeof count, "%d keys", tl_model_unused(&m, NULL, 0)); /* the names are long: csv and json give them */
    tl_table_str(t, fmt == TL_FMT_TABLE ? count : unused);
    if (fmt == TL_FMT_TABLE || !m.source[0]) tl_table_none(t);
    else tl_table_str(t, m.source);
    free(unused);
    return 0;
}

int tl_cmd_models(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, MODELS_USAGE)) return 0;
    const char *fmt_s = NULL, *pos[32];
    int npos = 0;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    if (tl_opts_parse(argc, argv, opts, "models", pos, 32, &npos) || tl_parse_format(fmt_s, &fmt)) return TL_EUSAGE;
    const char *const *names = tl_model_list();
    if (npos == 0)
        for (; names[npos] && npos < 32; npos++) pos[npos] = names[npos];
    tl_table *t = tl_table_new("name,hidden,experts,top_k,expert_width,shared,layers,moe_layers,dense_width,"
                               "shared_width,ffn,heads,kv_heads,index_heads,index_head_dim,index_topk,quant_method,"
                               "not_modelled,source");
    for (int i = 0; i < npos; i++)
        if (models_row(t, pos[i], fmt)) {
            tl_table_free(t);
            return TL_EUSAGE;
        }
    tl_table_print(t, fmt, "models (as sim moe models them; config.json fields otherwise, 0 = absent; not_modelled: "
                           "the config keys the simulator does not use, named with --format csv|json)", stdout);
    tl_table_free(t);
    return 0;
}

int tl_cli_gpu_missing(int built, const char **why)
{
    *why = NULL;
    if (!built) {
        *why = "this tilelab was built without a GPU (-DTILELAB_GPU=cuda|hip)";
        return 0;
    }
    if (tl_device_is_emu()) return 0; /* the CPU executor is always there */
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
    "  --hw PRESET    preset to compare with (default: from the device name: h100, h200, mi300x, mi355x)\n"
    "  --save FILE    write the measured ceilings (and an sm_90a build's wgmma loop rates, the\n"
    "                 prefill model's matrix rate) as an overlay JSON for --hw PRESET,FILE\n"
    "  --points FILE  also write every configuration as CSV (kernel, ceiling, config, best, flops,\n"
    "                 hbm_bytes, time_us, intensity, tflops, gbps, source): `draw roofline --points`\n"
    "  --quick        one configuration per ceiling (for profilers such as ncu)\n"
    "  --iters N, --warmup N   timing iterations (default 200, 20)\n"
    "  --hbm-gib X    read buffer in GiB (default 8; the copy moves X/2 each way)\n"
    "  --from FILE    measure nothing: print (and with --save rewrite) a result saved earlier by\n"
    "                 --save, against --hw (default: the preset of the device it names); no GPU needed\n"
    "Without a GPU (a build without -DTILELAB_GPU, or no device) it says so and exits 1.\n";

static void add_ceiling(json_t *ceilings, const char *key, double v)
{
    if (v <= 0.0) return;
    json_t *o = json_object();
    json_object_set_new(o, "measured", json_real(round(v * 10.0) / 10.0));
    json_object_set_new(ceilings, key, o);
}

/* The best value among the configurations of one kernel (0 when none ran). */
static double best_of_kernel(const tl_roofline_report *r, const char *kernel)
{
    double best = 0.0;
    for (int i = 0; i < r->npoints; i++)
        if (strcmp(r->points[i].kernel, kernel) == 0 && r->points[i].value > best) best = r->points[i].value;
    return best;
}

/* The preset fields a result sets beside its ceilings: the wgmma loops' rates (sm_90a builds), which
 * the prefill model reads as wgmma_bf16_tflops / wgmma_fp8_tflops (simulator/hw.h), so that an
 * overlay of a fresh run updates them with the ceilings. */
static void add_wgmma_rates(json_t *root, const tl_roofline_report *r)
{
    static const char *const keys[2][2] = {{"wgmma_bf16_tflops", "tl_roofline_wgmma_bf16"},
                                           {"wgmma_fp8_tflops", "tl_roofline_wgmma_fp8"}};
    for (int i = 0; i < 2; i++) {
        const double v = best_of_kernel(r, keys[i][1]);
        if (v > 0.0) json_object_set_new(root, keys[i][0], json_real(round(v * 10.0) / 10.0));
    }
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
    for (size_t i = 0; i < N_CEILINGS; i++) add_ceiling(c, CEILINGS[i].key, report_value(r, i));
    json_object_set_new(root, "ceilings", c);
    add_wgmma_rates(root, r);
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

    FILE *f = tl_atomic_file(a);
    const int e = errno;
    if (f) json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!f) return tl_write_error(a->path, "the overlay", e);
    return tl_atomic_close(a, "the overlay");
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
    FILE *f = tl_atomic_file(a);
    int st = f ? TL_OK : tl_write_error(a->path, "the points", errno);
    if (f) tl_table_print(t, TL_FMT_CSV, NULL, f);
    tl_table_free(t);
    return st ? st : tl_atomic_close(a, "the points"); /* every write's error, the flush's, the sync's */
}

/* A reference value and the measured one as a percentage of it; two empty cells when the
 * reference is not known. */
static void reference_cells(tl_table *t, double reference, double measured)
{
    if (reference > 0) {
        tl_table_numf(t, "%.1f", reference);
        tl_table_numf(t, "%.1f", 100.0 * measured / reference);
    } else {
        tl_table_none(t);
        tl_table_none(t);
    }
}

/* One row of the ceilings table: the measured value beside the preset's, and the configuration
 * that reached it. */
static void ceiling_row(tl_table *t, const tl_roofline_report *r, const char *key, const char *unit,
                        double measured, tl_ceiling preset)
{
    const tl_roofline_point *best = NULL;
    for (int j = 0; j < r->npoints; j++)
        if (r->points[j].best && strcmp(r->points[j].ceiling, key) == 0) best = &r->points[j];
    tl_table_row(t);
    tl_table_str(t, key);
    tl_table_numf(t, "%.1f", measured);
    tl_table_str(t, unit);
    reference_cells(t, preset.datasheet, measured);
    reference_cells(t, preset.measured, measured);
    if (best) tl_table_str(t, best->kernel), tl_table_str(t, best->config);
    else tl_table_none(t), tl_table_none(t);
}

static void print_ceilings(const tl_roofline_report *r, const tl_hw *hw, const char *label,
                           tl_format fmt)
{
    tl_table *t = tl_table_new("ceiling,measured,unit,datasheet,pct_of_datasheet,preset_measured,"
                               "pct_of_preset_measured,kernel,config");
    for (size_t i = 0; i < N_CEILINGS; i++)
        if (report_value(r, i) > 0)
            ceiling_row(t, r, CEILINGS[i].key, CEILINGS[i].unit, report_value(r, i), preset_ceiling(hw, i));
    if (r->memcpy_gbps > 0) /* the runtime's copy: a reference, not a ceiling of the preset */
        ceiling_row(t, r, "memcpy_gbps", "GB/s", r->memcpy_gbps, (tl_ceiling){0.0, 0.0});
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

/* A --save result is a few KiB: a --from file larger than this is refused before it is read. */
#define RESULT_MAX_BYTES ((size_t)16 << 20)

/* Reads a file written by --save back into *r (and its label). TL_EUSAGE for an unreadable file,
 * one that is not regular (a named pipe is refused, never waited on), larger than RESULT_MAX_BYTES
 * or malformed, one without "ceilings", a field of the wrong JSON type, a control character in a
 * string, a value out of range, or more configurations than a report holds. A leading UTF-8
 * byte-order mark is skipped. */
static int load_overlay(const char *path, tl_roofline_report *r, char *label, size_t label_cap)
{
    char *text;
    int rc = tl_text_file_read(path, "the roofline result", RESULT_MAX_BYTES, &text);
    if (rc) return rc;
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    free(text);
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
    int any_measured = 0;
    for (size_t i = 0; i < N_CEILINGS; i++) {
        double v = number_at(object_at(c, CEILINGS[i].key, &bad), "measured", &bad);
        /* 0 = not measured; as in a preset, a rate below 0.001 is not one (--save would round it to 0) */
        if (bad || !(v == 0.0 || (v >= 1e-3 && v < 1e9))) {
            json_decref(root);
            return tl_error(TL_EUSAGE, path, "ceiling %s has a bad measured value", CEILINGS[i].key);
        }
        *report_ceiling(r, i) = v;
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
    const char *p = tl_hw_for_device(device);
    if (p) return tl_hw_load(p, hw);
    snprintf(hw->name, sizeof hw->name, "none");
    return 0;
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
    /* checked before anything is measured or printed: two outputs, or an output and --from, that
     * are one file (core/tl.h's tl_same_file: the inode, or the resolved name) */
    if (save && points && tl_same_file(save, points))
        return tl_error(TL_EUSAGE, "bench roofline", "--save and --points name the same file '%s'", points);
    if (from && save && tl_same_file(from, save))
        return tl_error(TL_EUSAGE, "bench roofline", "--save '%s' is the --from file: it would replace the result it reads", save);
    if (from && points && tl_same_file(from, points))
        return tl_error(TL_EUSAGE, "bench roofline", "--points '%s' is the --from file: it would replace the result it reads", points);
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
