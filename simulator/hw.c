/* Hardware presets: loading (with overlays), instruction choice, derived peaks. */
#include "hw.h"

#include <jansson.h>
#include <math.h>
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
            tl_json_get_int(it, "cycles", what, 1, 1, 4096, &in->cycles))
            return TL_EUSAGE;
        if (!known_dtype(in->a) || !known_dtype(in->b))
            return tl_error(TL_EUSAGE, what, "unknown input dtype '%s' x '%s' (bf16, f16, fp8, fp6, fp4, f32, f64)",
                            in->a, in->b);
        hw->n_instr++;
    }
    return 0;
}

static int hw_from_json(json_t *root, const char *label, tl_hw *hw)
{
    memset(hw, 0, sizeof *hw);
    hw->xcds = 1;
    if (tl_json_get_str(root, "name", label, 1, hw->name, sizeof hw->name) ||
        tl_json_get_str(root, "description", label, 0, hw->description, sizeof hw->description) ||
        tl_json_get_str(root, "arch", label, 1, hw->arch, sizeof hw->arch) ||
        tl_json_get_int(root, "cus", label, 1, 1, 100000, &hw->cus) ||
        tl_json_get_int(root, "xcds", label, 0, 1, 64, &hw->xcds) ||
        tl_json_get_num(root, "clock_mhz", label, 1, 1, 1e5, &hw->clock_mhz) ||
        tl_json_get_int(root, "wave_size", label, 1, 1, 1024, &hw->wave_size) ||
        tl_json_get_int(root, "matrix_cores_per_cu", label, 1, 1, 64, &hw->matrix_cores_per_cu) ||
        tl_json_get_int(root, "vector_lanes_per_cu", label, 0, 1, 100000, &hw->vector_lanes_per_cu) ||
        tl_json_get_num(root, "lds_kib", label, 1, 0, 1e6, &hw->lds_kib) ||
        tl_json_get_num(root, "l2_mib_per_xcd", label, 1, 0, 1e6, &hw->l2_mib_per_xcd) ||
        tl_json_get_num(root, "llc_mib", label, 0, 0, 1e6, &hw->llc_mib) ||
        tl_json_get_num(root, "hbm_gb", label, 1, 0, 1e6, &hw->hbm_gb) ||
        tl_json_get_num(root, "launch_us", label, 1, 0, 1e6, &hw->launch_us) ||
        tl_json_get_num(root, "item_fixed_us", label, 1, 0, 1e6, &hw->item_fixed_us) ||
        tl_json_get_num(root, "hbm_per_cu_gbps", label, 1, 1e-3, 1e7, &hw->hbm_per_cu_gbps) ||
        tl_json_get_num(root, "l2_per_cu_gbps", label, 0, 1e-3, 1e7, &hw->l2_per_cu_gbps) ||
        tl_json_get_num(root, "hbm_latency_us", label, 0, 0, 1e3, &hw->hbm_latency_us) ||
        tl_json_get_num(root, "load_chain_us", label, 0, 0, 1e3, &hw->load_chain_us) ||
        tl_json_get_num(root, "next_kernel_us", label, 0, 0, 1e6, &hw->next_kernel_us) ||
        tl_json_get_num(root, "flush_dirty_mb", label, 0, 0, 1e6, &hw->flush_dirty_mb) ||
        tl_json_get_str(root, "device", label, 0, hw->device, sizeof hw->device) ||
        tl_json_get_str(root, "date", label, 0, hw->date, sizeof hw->date) ||
        tl_json_get_str(root, "source", label, 0, hw->source, sizeof hw->source))
        return TL_EUSAGE;
    if (hw->l2_per_cu_gbps <= 0) hw->l2_per_cu_gbps = hw->hbm_per_cu_gbps;
    if (hw->load_chain_us <= 0) hw->load_chain_us = hw->hbm_latency_us;
    if (hw->next_kernel_us <= 0) hw->next_kernel_us = hw->launch_us;
    if (hw->vector_lanes_per_cu <= 0) hw->vector_lanes_per_cu = hw->wave_size * hw->matrix_cores_per_cu;
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
        if (tl_preset_read("hw", item, "--hw", &j, label, sizeof label)) {
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
    int rc = hw_from_json(base, n > 1 ? label : first_label, out);
    json_decref(base);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

const char *const *tl_hw_list(void) { return tl_preset_names("hw"); }

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
