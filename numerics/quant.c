/* Quantization schemes by name and the rotation study (see quant.h). */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "blockfp8.h"
#include "codes.h"
#include "int4.h"
#include "rotate.h"

static const struct {
    const char *name;
    double bits;
} SCHEMES[TL_QS_COUNT] = {
    [TL_QS_MXFP4] = {"mxfp4", 4.25},
    [TL_QS_MXFP6_E2M3] = {"mxfp6_e2m3", 6.25},
    [TL_QS_MXFP6_E3M2] = {"mxfp6_e3m2", 6.25},
    [TL_QS_MXFP8_E4M3] = {"mxfp8_e4m3", 8.25},
    [TL_QS_MXFP8_E5M2] = {"mxfp8_e5m2", 8.25},
    [TL_QS_FP8_E4M3_TENSOR] = {"fp8_e4m3_tensor", 8.0},
    [TL_QS_FP8_BLOCK128] = {"fp8_block128", 8.25},
    [TL_QS_INT4_G128_SYM] = {"int4_g128_sym", 4.25},
    [TL_QS_INT4_G128_ASYM] = {"int4_g128_asym", 4.3125},
};

static const char *ROTS[TL_ROT_COUNT] = {"none", "hadamard", "random"};

int tl_quant_scheme_parse(const char *name, tl_quant_scheme *out)
{
    for (int i = 0; i < TL_QS_COUNT; i++)
        if (name && strcmp(name, SCHEMES[i].name) == 0) {
            *out = (tl_quant_scheme)i;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--scheme",
                    "unknown scheme '%s' (one of mxfp4 mxfp6_e2m3 mxfp6_e3m2 mxfp8_e4m3 mxfp8_e5m2 "
                    "fp8_e4m3_tensor fp8_block128 int4_g128_sym int4_g128_asym)", name ? name : "");
}

const char *tl_quant_scheme_name(tl_quant_scheme s) { return (unsigned)s < TL_QS_COUNT ? SCHEMES[s].name : "?"; }
double tl_quant_scheme_bits(tl_quant_scheme s) { return (unsigned)s < TL_QS_COUNT ? SCHEMES[s].bits : 0; }

int tl_rotation_parse(const char *name, tl_rotation *out)
{
    for (int i = 0; i < TL_ROT_COUNT; i++)
        if (name && strcmp(name, ROTS[i]) == 0) {
            *out = (tl_rotation)i;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--rotate", "unknown rotation '%s' (none, hadamard or random)", name ? name : "");
}

const char *tl_rotation_name(tl_rotation r) { return (unsigned)r < TL_ROT_COUNT ? ROTS[r] : "?"; }

static tl_numfmt mx_elem(tl_quant_scheme s)
{
    switch (s) {
    case TL_QS_MXFP4: return TL_NF_E2M1;
    case TL_QS_MXFP6_E2M3: return TL_NF_E2M3;
    case TL_QS_MXFP6_E3M2: return TL_NF_E3M2;
    case TL_QS_MXFP8_E4M3: return TL_NF_E4M3FN;
    case TL_QS_MXFP8_E5M2: return TL_NF_E5M2;
    default: return TL_NF_COUNT;
    }
}

static int roundtrip_mx(tl_numfmt elem, tl_scale_rule rule, const float *x, size_t n, float *y)
{
    uint8_t *codes = malloc(tl_mx_code_bytes(elem, n));
    uint8_t *scales = malloc(tl_mx_num_blocks(n, TL_MX_BLOCK));
    int rc = TL_OK;
    if (!codes || !scales) rc = tl_error(TL_EFAIL, "quantize", "out of memory");
    if (!rc) rc = tl_mx_quantize(elem, rule, TL_MX_BLOCK, x, n, codes, scales);
    if (!rc) rc = tl_mx_dequantize(elem, TL_MX_BLOCK, codes, scales, n, y);
    free(codes);
    free(scales);
    return rc;
}

static int roundtrip_fp8_tensor(const float *x, size_t n, float *y)
{
    float amax = 0;
    for (size_t i = 0; i < n; i++) amax = tl_code_max_no_nan(amax, fabsf(x[i]));
    float s = tl_bfp8_scale(TL_NF_E4M3FN, amax, 0);
    const float *t = tl_decode_table8(TL_NF_E4M3FN);
    float tmp[256];
    uint8_t c[256];
    for (size_t i0 = 0; i0 < n; i0 += 256) {
        size_t m = n - i0 < 256 ? n - i0 : 256;
        for (size_t i = 0; i < m; i++) tmp[i] = x[i0 + i] / s;
        tl_encode_array8(TL_NF_E4M3FN, tmp, m, 1, c);
        for (size_t i = 0; i < m; i++) y[i0 + i] = t[c[i]] * s;
    }
    return TL_OK;
}

static int roundtrip_block128(const float *x, size_t n, float *y)
{
    size_t ng = n / TL_BFP8_GROUP + (n % TL_BFP8_GROUP != 0);
    uint8_t *codes = malloc(n);
    float *scales = malloc(ng * sizeof *scales);
    int rc = TL_OK;
    if (!codes || !scales) rc = tl_error(TL_EFAIL, "quantize", "out of memory");
    /* one row of n values: its groups are the consecutive 128-runs */
    if (!rc) rc = tl_bfp8_quantize_act(TL_NF_E4M3FN, 0, TL_BFP8_GROUP, x, 1, n, codes, scales);
    if (!rc) rc = tl_bfp8_dequantize_act(TL_NF_E4M3FN, TL_BFP8_GROUP, codes, scales, 1, n, y);
    free(codes);
    free(scales);
    return rc;
}

static int roundtrip_int4(int asym, const float *x, size_t n, float *y)
{
    size_t ng = tl_int4_groups(n, 128);
    uint8_t *packed = malloc(tl_int4_row_bytes(n));
    float *scales = malloc(ng * sizeof *scales);
    uint8_t *zeros = malloc(ng);
    int rc = TL_OK;
    if (!packed || !scales || !zeros) rc = tl_error(TL_EFAIL, "quantize", "out of memory");
    if (!rc) rc = tl_int4_quantize(asym, 128, x, 1, n, packed, scales, zeros);
    if (!rc) rc = tl_int4_dequantize(128, packed, scales, zeros, 1, n, y);
    free(packed);
    free(scales);
    free(zeros);
    return rc;
}

int tl_quant_roundtrip(tl_quant_scheme s, tl_scale_rule rule, const float *x, size_t n, float *y)
{
    if ((unsigned)s >= TL_QS_COUNT) return tl_error(TL_EUSAGE, "quantize", "unknown scheme");
    if ((unsigned)rule > TL_SCALE_EVEN) return tl_error(TL_EUSAGE, "quantize", "unknown scale rule");
    if (n == 0 || !x || !y) return tl_error(TL_EUSAGE, "quantize", "empty or NULL array");
    /* the helpers read x and write y in separate passes per block, except the ones below; copy
     * when they alias so that every scheme allows x == y */
    float *copy = NULL;
    if (x == y) {
        copy = malloc(n * sizeof *copy);
        if (!copy) return tl_error(TL_EFAIL, "quantize", "out of memory");
        memcpy(copy, x, n * sizeof *copy);
        x = copy;
    }
    int rc;
    switch (s) {
    case TL_QS_FP8_E4M3_TENSOR: rc = roundtrip_fp8_tensor(x, n, y); break;
    case TL_QS_FP8_BLOCK128: rc = roundtrip_block128(x, n, y); break;
    case TL_QS_INT4_G128_SYM: rc = roundtrip_int4(0, x, n, y); break;
    case TL_QS_INT4_G128_ASYM: rc = roundtrip_int4(1, x, n, y); break;
    default: rc = roundtrip_mx(mx_elem(s), rule, x, n, y); break;
    }
    free(copy);
    return rc;
}

int tl_quant_study(tl_quant_scheme s, tl_scale_rule rule, tl_rotation rot, size_t row_len,
                   uint64_t rot_seed, const float *x, size_t n, tl_err_metrics *m)
{
    if ((unsigned)rot >= TL_ROT_COUNT) return tl_error(TL_EUSAGE, "--rotate", "unknown rotation");
    if (n == 0 || !x || !m) return tl_error(TL_EUSAGE, "quantize", "empty or NULL array");
    if (rot != TL_ROT_NONE) {
        if (row_len < 1 || n % row_len != 0)
            return tl_error(TL_EUSAGE, "--rotate", "n = %zu is not a multiple of the row length %zu", n, row_len);
        if (rot == TL_ROT_HADAMARD && (row_len & (row_len - 1)) != 0)
            return tl_error(TL_EUSAGE, "--rotate", "hadamard needs a power-of-two row length, not %zu", row_len);
        /* the n x n QR costs O(n^3): about 2 s at 2048 on one core, 16 s at 4096, minutes at 8192 */
        if (rot == TL_ROT_RANDOM && row_len > 2048)
            return tl_error(TL_EUSAGE, "--rotate", "random rotation rows are at most 2048, not %zu", row_len);
    }
    float *y = malloc(n * sizeof *y);
    double *Q = NULL;
    if (!y) return tl_error(TL_EFAIL, "quantize", "out of memory");
    memcpy(y, x, n * sizeof *y);
    size_t rows = rot == TL_ROT_NONE ? 0 : n / row_len;
    int rc = TL_OK;
    if (rot == TL_ROT_HADAMARD) rc = tl_fwht_rows(y, rows, row_len);
    if (rot == TL_ROT_RANDOM) {
        Q = malloc(row_len * row_len * sizeof *Q);
        if (!Q) rc = tl_error(TL_EFAIL, "quantize", "out of memory");
        if (!rc) rc = tl_random_orthogonal(row_len, rot_seed, Q);
        if (!rc) rc = tl_rotate_rows(Q, row_len, y, rows, 0);
    }
    if (!rc) rc = tl_quant_roundtrip(s, rule, y, n, y);
    if (!rc && rot == TL_ROT_HADAMARD) rc = tl_fwht_rows(y, rows, row_len); /* its own inverse */
    if (!rc && rot == TL_ROT_RANDOM) rc = tl_rotate_rows(Q, row_len, y, rows, 1);
    if (!rc) rc = tl_compare(x, y, n, m);
    free(Q);
    free(y);
    return rc;
}
