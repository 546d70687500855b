/* DeepSeek-V3 style block-scaled FP8.
 *
 * Activations: each row of a rows x cols row-major matrix is cut into groups of `group` (128)
 * consecutive columns; weights: the matrix is cut into block x block (128 x 128) tiles. Each group /
 * tile has one float32 scale:
 *   amax  = max(|x| over the group, 1e-4)            (the clamp keeps all-zero groups finite)
 *   scale = amax / max_fmt                           (448 for E4M3FN, 240 for E4M3FNUZ)
 *   ue8m0: scale = 2^ceil(log2(scale))               (rounded UP to a power of two, so nothing clamps)
 *   code  = encode(x / scale) (RNE, saturating);  value = decode(code) * scale.
 * The last group of a row (cols % group != 0) and the last row/column of tiles are partial: they
 * are handled like full ones over the elements that exist.
 * NaN inputs: amax ignores NaN, quiet or signalling (tl_code_max_no_nan), the element encodes to
 * the FP8 NaN code and decodes to NaN.
 *
 * Layouts (all row-major):
 *   activation codes rows x cols (one byte each); scales rows x ceil(cols / group).
 *   weight codes rows x cols; scales ceil(rows / block) x ceil(cols / block).
 * fmt must be TL_NF_E4M3FN or TL_NF_E4M3FNUZ; group/block in [1, 65536]; otherwise TL_EUSAGE.
 * Cost: two passes over the data, O(rows * cols).
 */
#ifndef TL_NUMERICS_BLOCKFP8_H
#define TL_NUMERICS_BLOCKFP8_H

#include "formats.h"

#define TL_BFP8_GROUP 128
#define TL_BFP8_AMAX_MIN 1e-4f /* the amax clamp (keeps all-zero groups finite) */

/* The scale of one group with this amax (clamp, divide, optional power-of-two round-up). */
float tl_bfp8_scale(tl_numfmt fmt, float amax, int ue8m0);

int tl_bfp8_quantize_act(tl_numfmt fmt, int ue8m0, int group, const float *x, size_t rows,
                         size_t cols, uint8_t *codes, float *scales);
int tl_bfp8_dequantize_act(tl_numfmt fmt, int group, const uint8_t *codes, const float *scales,
                           size_t rows, size_t cols, float *y);

int tl_bfp8_quantize_weight(tl_numfmt fmt, int ue8m0, int block, const float *w, size_t rows,
                            size_t cols, uint8_t *codes, float *scales);
int tl_bfp8_dequantize_weight(tl_numfmt fmt, int block, const uint8_t *codes, const float *scales,
                              size_t rows, size_t cols, float *y);

#endif
