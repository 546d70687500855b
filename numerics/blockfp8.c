/* DeepSeek-V3 block-scaled FP8 (see blockfp8.h). */
#include "blockfp8.h"

#include <math.h>
#include <stdlib.h>

#include "../core/tl.h"
#include "codes.h"

static int check(tl_numfmt fmt, int group, const void *a, const void *b, const void *c, size_t rows,
                 size_t cols)
{
    if (fmt != TL_NF_E4M3FN && fmt != TL_NF_E4M3FNUZ)
        return tl_error(TL_EUSAGE, "block fp8", "format %s is not e4m3fn or e4m3fnuz", tl_numfmt_name(fmt));
    if (group < 1 || group > 65536)
        return tl_error(TL_EUSAGE, "block fp8", "group %d is not in [1, 65536]", group);
    if (rows && cols && (!a || !b || !c)) return tl_error(TL_EUSAGE, "block fp8", "NULL buffer");
    return TL_OK;
}

float tl_bfp8_scale(tl_numfmt fmt, float amax, int ue8m0)
{
    float a = amax > TL_BFP8_AMAX_MIN ? amax : TL_BFP8_AMAX_MIN; /* a NaN amax (any kind) is the clamp */
    float s = a / (float)tl_numfmt_max(fmt);
    if (ue8m0) {
        int e;
        float fr = frexpf(s, &e); /* s = fr * 2^e, fr in [0.5, 1) */
        s = ldexpf(1.0f, fr == 0.5f ? e - 1 : e);
    }
    return s;
}

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

/* Quantizes x[0..len) with scale s into codes (saturating RNE of x / s). */
static void quantize_run(tl_numfmt fmt, float s, const float *x, size_t len, uint8_t *codes)
{
    float tmp[256];
    for (size_t i0 = 0; i0 < len; i0 += 256) {
        size_t m = len - i0 < 256 ? len - i0 : 256;
        for (size_t i = 0; i < m; i++) tmp[i] = x[i0 + i] / s;
        tl_encode_array8(fmt, tmp, m, 1, codes + i0);
    }
}

/* max |x| over the run, NaN (quiet or signalling) ignored: 0 for a run of NaN. */
static float amax_of(const float *x, size_t len)
{
    float a = 0;
    for (size_t i = 0; i < len; i++) a = tl_code_max_no_nan(a, fabsf(x[i]));
    return a;
}

int tl_bfp8_quantize_act(tl_numfmt fmt, int ue8m0, int group, const float *x, size_t rows,
                         size_t cols, uint8_t *codes, float *scales)
{
    int rc = check(fmt, group, x, codes, scales, rows, cols);
    if (rc) return rc;
    size_t g = (size_t)group, ng = ceil_div(cols, g);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < ng; j++) {
            size_t c0 = j * g, len = cols - c0 < g ? cols - c0 : g;
            const float *xr = x + r * cols + c0;
            float s = tl_bfp8_scale(fmt, amax_of(xr, len), ue8m0);
            scales[r * ng + j] = s;
            quantize_run(fmt, s, xr, len, codes + r * cols + c0);
        }
    return TL_OK;
}

/* y = code value x its block's scale, blocks of rb rows x cb columns (scales row-major by block). */
static void dequantize_blocks(tl_numfmt fmt, size_t rb, size_t cb, const uint8_t *codes,
                              const float *scales, size_t rows, size_t cols, float *y)
{
    const float *t = tl_decode_table8(fmt);
    size_t nbc = ceil_div(cols, cb);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            y[r * cols + c] = t[codes[r * cols + c]] * scales[(r / rb) * nbc + c / cb];
}

int tl_bfp8_dequantize_act(tl_numfmt fmt, int group, const uint8_t *codes, const float *scales,
                           size_t rows, size_t cols, float *y)
{
    int rc = check(fmt, group, codes, scales, y, rows, cols);
    if (!rc) dequantize_blocks(fmt, 1, (size_t)group, codes, scales, rows, cols, y);
    return rc;
}

int tl_bfp8_quantize_weight(tl_numfmt fmt, int ue8m0, int block, const float *w, size_t rows,
                            size_t cols, uint8_t *codes, float *scales)
{
    int rc = check(fmt, block, w, codes, scales, rows, cols);
    if (rc) return rc;
    size_t b = (size_t)block, nbr = ceil_div(rows, b), nbc = ceil_div(cols, b);
    for (size_t bi = 0; bi < nbr; bi++)
        for (size_t bj = 0; bj < nbc; bj++) {
            size_t r0 = bi * b, c0 = bj * b;
            size_t nr = rows - r0 < b ? rows - r0 : b, nc = cols - c0 < b ? cols - c0 : b;
            float a = 0;
            for (size_t r = r0; r < r0 + nr; r++) a = tl_code_max_no_nan(a, amax_of(w + r * cols + c0, nc));
            float s = tl_bfp8_scale(fmt, a, ue8m0);
            scales[bi * nbc + bj] = s;
            for (size_t r = r0; r < r0 + nr; r++)
                quantize_run(fmt, s, w + r * cols + c0, nc, codes + r * cols + c0);
        }
    return TL_OK;
}

int tl_bfp8_dequantize_weight(tl_numfmt fmt, int block, const uint8_t *codes, const float *scales,
                              size_t rows, size_t cols, float *y)
{
    int rc = check(fmt, block, codes, scales, y, rows, cols);
    if (!rc) dequantize_blocks(fmt, (size_t)block, (size_t)block, codes, scales, rows, cols, y);
    return rc;
}
