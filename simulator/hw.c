/* Hardware presets: loading (with overlays), instruction choice, derived peaks. */
#include "hw.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "presets.h"

#define MAX_SPEC_ITEMS 8

static const char *const known_dtypes[] = {"bf16", "f16", "fp8", "fp6", "fp4", "f32", "f64", NULL};

static int known_dtype(const char *s)
{
    for (const char *const *d = known_dtypes; *d; d++)
        if (strcmp(*d, s) == 0) return 1;
    return 0;
}

static int read_ceiling(json_t *ceil, const char *key, const char *label, tl_ceiling *c)
{
    json_t *o = json_object_get(ceil, key);
    if (!o) return 0;
    if (!json_is_object(o))
        return tl_error(TL_EUSAGE, label, "ceilings.%s must be an object with datasheet/measured", key);
    char what[1200]; /* the label (a path, up to 1100) and the field */
    snprintf(what, sizeof what, "%s: ceilings.%s", label, key);
    if (tl_json_get_num(o, "datasheet", what, 0, 0, 1e9, &c->datasheet)) return TL_EUSAGE;
    if (tl_json_get_num(o, "measured", what, 0, 0, 1e9, &c->measured)) return TL_EUSAGE;
    /* 0 means absent; a tiny rate (1e-300) would turn times into 1e62 us and rooflines into noise */
    if ((c->datasheet > 0 && c->datasheet < 1e-3) || (c->measured > 0 && c->measured < 1e-3))
        return tl_error(TL_EUSAGE, what, "a rate must be 0 (absent) or at least 0.001");
    return 0;
}

static int read_instructions(json_t *arr, const char *label, tl_hw *hw)
{
    if (!json_is_array(arr)) return tl_error(TL_EUSAGE, label, "field 'matrix_instructions' must be an array");
    if (json_array_size(arr) > TL_HW_MAX_INSTR)
        return tl_error(TL_EUSAGE, label, "more than %d matrix instructions", TL_HW_MAX_INSTR);
    hw->n_instr = 0;
    size_t i;
    json_t *it;
    json_array_foreach(arr, i, it) {
        char what[1200]; /* the label (a path, up to 1100) and the field */
        snprintf(what, sizeof what, "%s: matrix_instructions[%zu]", label, i);
        if (!json_is_object(it)) return tl_error(TL_EUSAGE, what, "must be an object");
        tl_instr *in = &hw->instr[hw->n_instr];
        memset(in, 0, sizeof *in);
        if (tl_json_get_str(it, "name", what, 1, in->name, sizeof in->name) ||
            tl_json_get_int(it, "m", what, 1, 1, 256, &in->m) ||
            tl_json_get_int(it, "n", what, 1, 1, 256, &in->n) ||
            tl_json_get_int(it, "k", what, 1, 1, 1024, &in->k) ||
            tl_json_get_str(it, "a", what, 1, in->a, sizeof in->a) ||
            tl_json_get_str(it, "b", what, 1, in->b, sizeof in->b) ||
            tl_json_get_int(it, "cycles", what, 1, 1, 4096, &in->cycles) ||
            tl_json_get_num(it, "measured_tflops", what, 0, 0, 1e9, &in->measured_tflops))
            return TL_EUSAGE;
        if (in->measured_tflops > 0 && in->measured_tflops < 1e-3)
            return tl_error(TL_EUSAGE, what, "measured_tflops must be 0 (absent) or at least 0.001");
        if (!known_dtype(in->a) || !known_dtype(in->b))
            return tl_error(TL_EUSAGE, what, "unknown input dtype '%s' x '%s' (bf16, f16, fp8, fp6, fp4, f32, f64)",
                            in->a, in->b);
        hw->n_instr++;
    }
    return 0;
}

typedef enum { FIELD_STR, FIELD_INT, FIELD_NUM } field_kind;

/* One scalar field of a preset: its key, type, whether a base preset must have it, its range, and
 * where it goes in tl_hw. */
typedef struct {
    const char *key;
    field_kind kind;
    int required;
    double lo, hi;
    size_t offset, size; /* size: of a text field's buffer */
} hw_field;

#define STR(key, req) {#key, FIELD_STR, req, 0, 0, offsetof(tl_hw, key), sizeof(((tl_hw *)0)->key)}
#define INT(key, req, lo, hi) {#key, FIELD_INT, req, lo, hi, offsetof(tl_hw, key), 0}
#define NUM(key, req, lo, hi) {#key, FIELD_NUM, req, lo, hi, offsetof(tl_hw, key), 0}
static const hw_field hw_fields[] = {
    STR(name, 1), STR(description, 0), STR(arch, 1), INT(cus, 1, 1, 100000), INT(xcds, 0, 1, 64),
    NUM(clock_mhz, 1, 1, 1e5), INT(wave_size, 1, 1, 1024), INT(matrix_cores_per_cu, 1, 1, 64),
    INT(vector_lanes_per_cu, 0, 1, 100000), NUM(lds_kib, 1, 0, 1e6), NUM(l2_mib_per_xcd, 1, 0, 1e6),
    NUM(llc_mib, 0, 0, 1e6), NUM(hbm_gb, 1, 0, 1e6), NUM(launch_us, 1, 0, 1e6), NUM(item_fixed_us, 1, 0, 1e6),
    NUM(hbm_per_cu_gbps, 1, 1e-3, 1e7), NUM(l2_per_cu_gbps, 0, 1e-3, 1e7), NUM(async_copy_per_cu_gbps, 0, 0, 1e7),
    NUM(hbm_latency_us, 0, 0, 1e3),
    NUM(load_chain_us, 0, 0, 1e3), NUM(next_kernel_us, 0, 0, 1e6), NUM(flush_dirty_mb, 0, 0, 1e6),
    NUM(link_gbps, 0, 0, 1e6), NUM(link_peer_gbps, 0, 0, 1e6), NUM(transcendental_per_cu_clk, 0, 0, 1e5),
    NUM(lds_bytes_per_cu_clk, 0, 0, 1e6), NUM(wgmma_bf16_tflops, 0, 0, 1e9), NUM(wgmma_fp8_tflops, 0, 0, 1e9),
    NUM(gemm_bf16_tflops, 0, 0, 1e9), NUM(gemm_fp8_tflops, 0, 0, 1e9), NUM(allreduce_us, 0, 0, 1e6),
    INT(vgprs_per_simd, 0, 1, 1 << 20), INT(sgprs_per_simd, 0, 1, 1 << 20), INT(waves_per_simd, 0, 1, 64),
    STR(device, 0), STR(date, 0), STR(source, 0),
};
#undef STR
#undef INT
#undef NUM
#define N_HW_FIELDS (sizeof hw_fields / sizeof hw_fields[0])

/* Keys a preset or overlay may carry that the model does not read: a note beside a value, and what
 * `tilelab bench roofline --save` records about its run (so that its result file is an overlay). */
static const char *const recorded_keys[] = {"clock_note", "clocks", "label", "mma", "memcpy_gbps",
                                            "configurations", "link_note", "async_copy_note", "rates_note", "step_note",
                                            "registers_note",
                                            NULL};
static const char *const ceiling_keys[] = {"hbm_read_gbps", "hbm_copy_gbps", "bf16_tflops", "fp8_tflops",
                                           "fp6_tflops", "fp4_tflops", NULL};
static const char *const ceiling_value_keys[] = {"datasheet", "measured", "unit", NULL};
/* peak_tflops: derived, not read (`hw show --format json` writes it, so that its output loads back) */
static const char *const instr_keys[] = {"name", "m", "n", "k", "a", "b", "cycles", "peak_tflops", "measured_tflops",
                                         NULL};

static int listed(const char *key, const char *const *keys)
{
    for (; *keys; keys++)
        if (strcmp(key, *keys) == 0) return 1;
    return 0;
}

static int is_top_key(const char *key)
{
    for (size_t i = 0; i < N_HW_FIELDS; i++)
        if (strcmp(key, hw_fields[i].key) == 0) return 1;
    return listed(key, recorded_keys) || strcmp(key, "ceilings") == 0 || strcmp(key, "matrix_instructions") == 0;
}

static int unknown_key(const char *label, const char *where, const char *key)
{
    return tl_error(TL_EUSAGE, label, "unknown key '%s%s' (not one a hardware preset has: a typo?)", where, key);
}

/* Refuses a key this loader does not know, in one file (a preset or an overlay): at the top level,
 * under "ceilings" (and in each ceiling), and in each matrix instruction. A typo would otherwise
 * change nothing without a word. Types and ranges are checked later, on the merged preset. */
static int check_keys(json_t *root, const char *label)
{
    const char *key, *inner;
    json_t *v, *w;
    json_object_foreach(root, key, v)
    {
        if (!is_top_key(key)) return unknown_key(label, "", key);
    }
    json_object_foreach(json_object_get(root, "ceilings"), key, v)
    {
        char where[64];
        snprintf(where, sizeof where, "ceilings.%.40s.", key);
        if (!listed(key, ceiling_keys)) return unknown_key(label, "ceilings.", key);
        json_object_foreach(v, inner, w)
        {
            if (!listed(inner, ceiling_value_keys)) return unknown_key(label, where, inner);
        }
    }
    size_t i;
    json_array_foreach(json_object_get(root, "matrix_instructions"), i, v)
    {
        char where[64];
        snprintf(where, sizeof where, "matrix_instructions[%zu].", i);
        json_object_foreach(v, key, w)
        {
            if (!listed(key, instr_keys)) return unknown_key(label, where, key);
        }
    }
    return 0;
}

static int read_field(json_t *root, const char *label, const hw_field *f, tl_hw *hw)
{
    char *at = (char *)hw + f->offset;
    switch (f->kind) {
    case FIELD_STR: return tl_json_get_str(root, f->key, label, f->required, at, f->size);
    case FIELD_INT: return tl_json_get_int(root, f->key, label, f->required, (long)f->lo, (long)f->hi, (int *)at);
    default: return tl_json_get_num(root, f->key, label, f->required, f->lo, f->hi, (double *)at);
    }
}

static int hw_from_json(json_t *root, const char *label, tl_hw *hw)
{
    memset(hw, 0, sizeof *hw);
    hw->xcds = 1;
    for (size_t i = 0; i < N_HW_FIELDS; i++)
        if (read_field(root, label, &hw_fields[i], hw)) return TL_EUSAGE;
    if (hw->l2_per_cu_gbps <= 0) hw->l2_per_cu_gbps = hw->hbm_per_cu_gbps;
    if (hw->load_chain_us <= 0) hw->load_chain_us = hw->hbm_latency_us;
    if (hw->next_kernel_us <= 0) hw->next_kernel_us = hw->launch_us;
    if (hw->vector_lanes_per_cu <= 0) hw->vector_lanes_per_cu = hw->wave_size * hw->matrix_cores_per_cu;
    if (hw->link_peer_gbps <= 0) hw->link_peer_gbps = hw->link_gbps;
    if (hw->flush_dirty_mb <= 0) hw->flush_dirty_mb = hw->l2_mib_per_xcd * hw->xcds * 1.048576;
    if (hw->cus % hw->xcds != 0)
        return tl_error(TL_EUSAGE, label, "cus = %d is not a multiple of xcds = %d", hw->cus, hw->xcds);
    json_t *ceil = json_object_get(root, "ceilings");
    if (!ceil) return tl_error(TL_EUSAGE, label, "missing field 'ceilings'");
    if (!json_is_object(ceil)) return tl_error(TL_EUSAGE, label, "field 'ceilings' must be an object");
    tl_hw_ceilings *c = &hw->ceilings;
    if (read_ceiling(ceil, "hbm_read_gbps", label, &c->hbm_read_gbps) ||
        read_ceiling(ceil, "hbm_copy_gbps", label, &c->hbm_copy_gbps) ||
        read_ceiling(ceil, "bf16_tflops", label, &c->bf16_tflops) ||
        read_ceiling(ceil, "fp8_tflops", label, &c->fp8_tflops) ||
        read_ceiling(ceil, "fp6_tflops", label, &c->fp6_tflops) ||
        read_ceiling(ceil, "fp4_tflops", label, &c->fp4_tflops))
        return TL_EUSAGE;
    if (tl_ceiling_value(c->hbm_read_gbps) <= 0)
        return tl_error(TL_EUSAGE, label, "ceilings.hbm_read_gbps needs a datasheet or measured value");
    json_t *arr = json_object_get(root, "matrix_instructions");
    if (!arr) return tl_error(TL_EUSAGE, label, "missing field 'matrix_instructions'");
    if (read_instructions(arr, label, hw)) return TL_EUSAGE;
    if (hw->n_instr == 0) return tl_error(TL_EUSAGE, label, "'matrix_instructions' is empty");
    return 0;
}

int tl_hw_load(const char *spec, tl_hw *out)
{
    memset(out, 0, sizeof *out);
    if (!spec || !spec[0]) return tl_error(TL_EUSAGE, "--hw", "empty hardware name");
    char buf[4096];
    if (strlen(spec) >= sizeof buf) return tl_error(TL_EUSAGE, "--hw", "spec too long");
    memcpy(buf, spec, strlen(spec) + 1);
    json_t *base = NULL;
    char label[1100] = "", first_label[1100] = "";
    int n = 0;
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save), n++) {
        if (n >= MAX_SPEC_ITEMS) {
            json_decref(base);
            return tl_error(TL_EUSAGE, "--hw", "at most %d overlay files", MAX_SPEC_ITEMS - 1);
        }
        json_t *j;
        if (tl_preset_read("hw", item, "--hw", &j, label, sizeof label) || check_keys(j, label)) {
            json_decref(j);
            json_decref(base);
            return TL_EUSAGE;
        }
        if (!base) {
            base = j;
            snprintf(first_label, sizeof first_label, "%s", label);
        } else {
            json_object_update_recursive(base, j);
            json_decref(j);
        }
    }
    if (!base) return tl_error(TL_EUSAGE, "--hw", "empty hardware name");
    /* after a merge, a bad field may come from any file of the chain: name the chain */
    int rc = hw_from_json(base, n > 1 ? spec : first_label, out);
    json_decref(base);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

const char *const *tl_hw_list(void) { return tl_preset_names("hw"); }

const char *tl_hw_for_device(const char *name)
{
    if (!name) return NULL;
    if (strstr(name, "H200")) return "h200";
    if (strstr(name, "H100")) return "h100";
    if (strstr(name, "MI355") || strstr(name, "MI350")) return "mi355x";
    if (strstr(name, "MI300") || strstr(name, "MI325")) return "mi300x";
    return NULL;
}

double tl_ceiling_value(tl_ceiling c)
{
    if (c.measured > 0) return c.measured;
    return c.datasheet > 0 ? c.datasheet : 0;
}

double tl_hw_instr_tflops(const tl_hw *hw, const tl_instr *in)
{
    double flop_per_instr = 2.0 * in->m * in->n * in->k;
    return flop_per_instr * hw->matrix_cores_per_cu * hw->cus * hw->clock_mhz * 1e6 / in->cycles / 1e12;
}

/* Rank of a dtype's width, for mixed f8f6f4 pairs: the slower (wider) input decides the rate. */
static int width_rank(const char *d)
{
    if (strcmp(d, "fp4") == 0) return 0;
    if (strcmp(d, "fp6") == 0) return 1;
    if (strcmp(d, "fp8") == 0) return 2;
    return -1;
}

int tl_hw_has_dtype(const tl_hw *hw, const char *dtype)
{
    for (int i = 0; i < hw->n_instr; i++)
        if (strcmp(hw->instr[i].a, dtype) == 0 || strcmp(hw->instr[i].b, dtype) == 0) return 1;
    return 0;
}

int tl_hw_pick_instr(const tl_hw *hw, const char *a_dtype, const char *b_dtype, int tile_m,
                     tl_instr *out)
{
    if (!a_dtype || !b_dtype || !known_dtype(a_dtype) || !known_dtype(b_dtype))
        return tl_error(TL_EUSAGE, "instruction", "unknown dtype '%s' x '%s'", a_dtype ? a_dtype : "(null)",
                        b_dtype ? b_dtype : "(null)");
    const char *a = a_dtype, *b = b_dtype;
    int ra = width_rank(a), rb = width_rank(b);
    if (ra >= 0 && rb >= 0 && ra != rb) a = b = ra > rb ? a_dtype : b_dtype; /* mixed f8f6f4 */
    const tl_instr *best = NULL;
    double best_rate = 0;
    int ms_list[8], n_ms = 0, any = 0;
    for (int i = 0; i < hw->n_instr; i++) {
        const tl_instr *in = &hw->instr[i];
        if (strcmp(in->a, a) != 0 || strcmp(in->b, b) != 0) continue;
        int seen = 0;
        for (int j = 0; j < n_ms; j++) seen |= ms_list[j] == in->m;
        if (!seen && n_ms < 8) ms_list[n_ms++] = in->m;
        any = 1;
        if (tile_m < 1 || tile_m % in->m != 0) continue;
        double rate = 2.0 * in->m * in->n * in->k / in->cycles;
        if (!best || rate > best_rate * (1 + 1e-12) ||
            (fabs(rate - best_rate) <= best_rate * 1e-12 &&
             (in->m > best->m || (in->m == best->m && in->k < best->k)))) {
            best = in;
            best_rate = rate;
        }
    }
    if (!any) return tl_error(TL_EUSAGE, "instruction", "%s (%s) has no %s x %s matrix instruction", hw->name, hw->arch, a_dtype, b_dtype);
    if (!best) {
        char ms[96] = "";
        for (int j = 0; j < n_ms; j++)
            snprintf(ms + strlen(ms), sizeof ms - strlen(ms), "%s%d", j ? ", " : "", ms_list[j]);
        return tl_error(TL_EUSAGE, "--tile-m",
                        "tile height %d is not a multiple of any %s x %s instruction's M on %s (%s)", tile_m,
                        a_dtype, b_dtype, hw->arch, ms);
    }
    *out = *best;
    return 0;
}
