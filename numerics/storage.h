/* How a block-scaled tensor is stored: the exact bytes of its codes and its scales.
 *
 * A tl_storage names the element format (a tl_numfmt, or INT4), the scale's width and the block of
 * elements that share one scale: block_rows x block_cols of a row-major [rows][cols] array (cols
 * contiguous). Codes of 4 bits are packed two per byte along a row; each row starts on a byte.
 * Blocks at the edges may be partial: they still take one scale each.
 *
 * An op contract (contract/OP.h) names its operands' storages with the TL_STORAGE_* values below;
 * where one is a quantization scheme of quant.h, tl_storage_bits equals tl_quant_scheme_bits.
 * Pure functions, no allocation; plain data. */
#ifndef TL_NUMERICS_STORAGE_H
#define TL_NUMERICS_STORAGE_H

#include <stddef.h>

#include "formats.h"
#include "quant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;           /* the scheme's name ("mxfp4"), or the element format's ("bf16") */
    tl_quant_scheme scheme;     /* the same storage as a quant.h scheme; TL_QS_COUNT where none is */
    tl_numfmt elem;             /* the element format; TL_NF_COUNT for INT4 (symmetric, q in [-8, 7]) */
    int elem_bits;              /* 16, 8 or 4 */
    int scale_bits;             /* 0 (no scale), 8 (E8M0) or 32 (float32) */
    int block_rows, block_cols; /* elements that share one scale (1 x 1 when scale_bits is 0) */
} tl_storage;

/* BF16 as is; DeepSeek-V3 block FP8 weights (E4M3FN, one float32 per 128 x 128) and activations
 * (1 x 128 groups, numerics' fp8_block128); INT4 with a float32 scale per 1 x 128 (int4_g128_sym);
 * OCP MXFP4 and MXFP8 (E2M1 / E4M3FN, one E8M0 per 1 x 32). */
extern const tl_storage TL_STORAGE_BF16, TL_STORAGE_FP8_BLOCK128X128, TL_STORAGE_FP8_BLOCK128,
    TL_STORAGE_INT4_G128, TL_STORAGE_MXFP4, TL_STORAGE_MXFP8_E4M3;

/* Bits per element, scales included, for whole blocks: elem_bits + scale_bits / block elements
 * (mxfp4 4.25, fp8 128 x 128 8 + 1/512). */
double tl_storage_bits(const tl_storage *s);
/* Exact sizes of a [rows][cols] array: its code bytes (rows x ceil(cols x elem_bits / 8)), its
 * scale count (ceil(rows / block_rows) x ceil(cols / block_cols); 0 without scales) and both
 * together in bytes. 0 for rows or cols < 1. */
size_t tl_storage_code_bytes(const tl_storage *s, size_t rows, size_t cols);
size_t tl_storage_scale_count(const tl_storage *s, size_t rows, size_t cols);
size_t tl_storage_bytes(const tl_storage *s, size_t rows, size_t cols);

#ifdef __cplusplus
}
#endif

#endif
