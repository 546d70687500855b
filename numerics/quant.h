/* Quantization schemes by name, for `tilelab numerics quantize`, the tour and error studies.
 *
 *   mxfp4 mxfp6_e2m3 mxfp6_e3m2 mxfp8_e4m3 mxfp8_e5m2   MX blocks of 32 (mx.h), scale rule given
 *   fp8_e4m3_tensor   one float32 scale for the whole array: amax / 448, E4M3FN (amax clamped 1e-4)
 *   fp8_block128      DeepSeek-V3 1x128 activation groups, float32 scales, E4M3FN (blockfp8.h)
 *   int4_g128_sym     INT4 groups of 128, symmetric (int4.h)
 *   int4_g128_asym    INT4 groups of 128, with zero point
 * Groups/blocks run over consecutive elements of x. The scale rule only matters for the MX schemes.
 *
 * tl_quant_roundtrip: y = dequantize(quantize(x)) -- the value a kernel would see. x and y may be the
 * same array. n >= 1. Allocates O(n) bytes of scratch (freed before return); TL_EFAIL if that fails.
 *
 * tl_quant_study: the error of a scheme on x with an optional rotation. x is viewed as rows of
 * row_len (n must be a multiple of row_len when rotating; hadamard needs a power of two, random a row_len of at most 2048);
 * each row is rotated (Walsh-Hadamard, or a Haar-random orthogonal Q from `rot_seed`), quantized
 * round trip, rotated back, and compared with x. The error is thus reported in the ORIGINAL
 * (un-rotated) domain, which is what a dot product with an equally rotated partner sees; for an
 * orthogonal rotation the relative RMS (and SQNR, NMSE) are the same in both domains, max_abs is not.
 * Cost: the rotation (n log row_len, or n row_len for random, plus row_len^3 once) plus O(n).
 */
#ifndef TL_NUMERICS_QUANT_H
#define TL_NUMERICS_QUANT_H

#include "metrics.h"
#include "mx.h"

typedef enum {
    TL_QS_MXFP4,
    TL_QS_MXFP6_E2M3,
    TL_QS_MXFP6_E3M2,
    TL_QS_MXFP8_E4M3,
    TL_QS_MXFP8_E5M2,
    TL_QS_FP8_E4M3_TENSOR,
    TL_QS_FP8_BLOCK128,
    TL_QS_INT4_G128_SYM,
    TL_QS_INT4_G128_ASYM,
    TL_QS_COUNT
} tl_quant_scheme;

typedef enum { TL_ROT_NONE, TL_ROT_HADAMARD, TL_ROT_RANDOM, TL_ROT_COUNT } tl_rotation;

int tl_quant_scheme_parse(const char *name, tl_quant_scheme *out);
const char *tl_quant_scheme_name(tl_quant_scheme s);
/* Storage cost in bits per value, scales included (e.g. mxfp4 4.25, fp8_block128 8.25). */
double tl_quant_scheme_bits(tl_quant_scheme s);

int tl_rotation_parse(const char *name, tl_rotation *out);
const char *tl_rotation_name(tl_rotation r);

int tl_quant_roundtrip(tl_quant_scheme s, tl_scale_rule rule, const float *x, size_t n, float *y);

int tl_quant_study(tl_quant_scheme s, tl_scale_rule rule, tl_rotation rot, size_t row_len,
                   uint64_t rot_seed, const float *x, size_t n, tl_err_metrics *m);

#endif
