/* INT4 group quantization along K (see int4.h). */
#include "int4.h"

#include <math.h>

#include "../core/tl.h"
#include "codes.h"

size_t tl_int4_row_bytes(size_t k) { return k / 2 + k % 2; }
size_t tl_int4_groups(size_t k, int group) { return group < 1 ? 0 : k / (size_t)group + (k % (size_t)group != 0); }

static int check(int group, const void *a, const void *b, const void *c, size_t rows, size_t k)
{
    if (group < 2 || group > 4096) return tl_error(TL_EUSAGE, "int4", "group %d is not in [2, 4096] (use 32, 64 or 128)", group);
    if (rows && k && (!a || !b || !c)) return tl_error(TL_EUSAGE, "int4", "NULL buffer");
    return TL_OK;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Round to nearest even integer, clamped into [lo, hi] before the conversion (so no overflow);
 * NaN gives `nan_value`. */
static int rne_clamped(float v, int lo, int hi, int nan_value)
{
    if (isnan(v)) return nan_value;
    float r = rintf(v);
    if (r < (float)lo) return lo;
    if (r > (float)hi) return hi;
    return (int)r;
}

static void put_nibble(uint8_t *row, size_t i, int u)
{
    if (i % 2 == 0) row[i / 2] = (uint8_t)u; /* low nibble first; clears the high one */
    else row[i / 2] = (uint8_t)(row[i / 2] | (u << 4));
}

int tl_int4_quantize(int asym, int group, const float *w, size_t rows, size_t k, uint8_t *packed,
                     float *scales, uint8_t *zeros)
{
    int rc = check(group, w, packed, scales, rows, k);
    if (rc) return rc;
    if (asym && rows && k && !zeros) return tl_error(TL_EUSAGE, "int4", "asymmetric needs a zeros buffer");
    size_t g = (size_t)group, ng = tl_int4_groups(k, group), rb = tl_int4_row_bytes(k);
    for (size_t r = 0; r < rows; r++) {
        const float *x = w + r * k;
        uint8_t *row = packed + r * rb;
        for (size_t j = 0; j < ng; j++) {
            size_t k0 = j * g, len = k - k0 < g ? k - k0 : g;
            float lo = 0, hi = 0; /* NaN (quiet or signalling) skipped */
            for (size_t i = k0; i < k0 + len; i++) lo = tl_code_min_no_nan(lo, x[i]), hi = tl_code_max_no_nan(hi, x[i]);
            float scale;
            int z;
            if (asym) {
                scale = (hi - lo) / 15.0f;
                if (!(scale > 0) || !isfinite(scale)) scale = scale > 0 ? 3.4028234663852886e38f / 15 : 1.0f;
                z = rne_clamped(-lo / scale, 0, 15, 0);
            } else {
                float amax = fmaxf(hi, -lo);
                scale = amax > 0 ? amax / 7.0f : 1.0f;
                z = 8;
            }
            scales[r * ng + j] = scale;
            if (zeros) zeros[r * ng + j] = (uint8_t)z;
            for (size_t i = k0; i < k0 + len; i++) {
                int u = asym ? clampi(rne_clamped(x[i] / scale, -15, 15, 0) + z, 0, 15)
                             : rne_clamped(x[i] / scale, -8, 7, 0) + 8;
                put_nibble(row, i, u);
            }
        }
    }
    return TL_OK;
}

int tl_int4_dequantize(int group, const uint8_t *packed, const float *scales, const uint8_t *zeros,
                       size_t rows, size_t k, float *y)
{
    int rc = check(group, packed, scales, y, rows, k);
    if (rc) return rc;
    size_t g = (size_t)group, ng = tl_int4_groups(k, group), rb = tl_int4_row_bytes(k);
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *row = packed + r * rb;
        for (size_t i = 0; i < k; i++) {
            int u = (row[i / 2] >> ((i & 1) * 4)) & 0xF;
            size_t j = r * ng + i / g;
            int z = zeros ? zeros[j] : 8;
            y[r * k + i] = (float)(u - z) * scales[j];
        }
    }
    return TL_OK;
}
