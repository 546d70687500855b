/* OCP Microscaling (MX v1.0) block quantization: MXFP8 (E4M3FN, E5M2), MXFP6 (E2M3, E3M2),
 * MXFP4 (E2M1). Each block of `block` consecutive values (32 by default; the last block may be
 * shorter) shares one E8M0 scale X = 2^s; element i is stored as encode(x_i / X), RNE, clamped to
 * the element's largest finite value (saturating); its value is decode(code) * X.
 *
 * Scale rules, with amax the block's largest |x| and emax = tl_numfmt_emax_elem(elem):
 *   TL_SCALE_FLOOR  s = floor(log2(amax)) - emax          (the OCP spec; microxcaling). Values in
 *                   the top binade above the element max (e.g. 7 for E2M1) clamp to max.
 *   TL_SCALE_RCEIL  s = ceil(log2(amax / max_elem))        (NVIDIA hardware, Transformer Engine):
 *                   nothing clamps.
 *   TL_SCALE_EVEN   amax's mantissa is first rounded to the element's mantissa width (half up, as
 *                   torchao does), then s = floor(log2(rounded)) - emax: a block whose amax would
 *                   round up past the binade moves to the next scale.
 *   s is clamped to [-127, 127] (codes 0x00..0xFE).
 * Special blocks (documented behaviour, tested):
 *   all zeros (amax = 0): scale code 0x00 (2^-127), elements +-0 (signs kept); decodes to zeros.
 *   any NaN or +-Inf in the block: scale code 0xFF (NaN) and every element code 0; the whole block
 *   decodes to NaN (the spec: a NaN scale makes every element of its block NaN; torchao's choice
 *   for Inf too).
 *
 * Storage: scales one byte per block (E8M0 codes), ceil(n / block) of them.
 *   MXFP4: two codes per byte, element 2i in the LOW nibble of byte i, element 2i+1 in the high
 *          nibble (the OCP convention); an odd n leaves the last high nibble 0; ceil(n/2) bytes.
 *   MXFP6: one code per byte, in the low 6 bits (not bit-packed); n bytes.
 *   MXFP8: one code per byte; n bytes.
 * Bad input (an element format that is not one of the five, block < 1 or > 65536, NULL with
 * n > 0): TL_EUSAGE with a message. Cost: one pass over x, O(n); MXFP4 quantize runs at
 * >= 150 M values/s on one core.
 */
#ifndef TL_NUMERICS_MX_H
#define TL_NUMERICS_MX_H

#include "formats.h"

typedef enum { TL_SCALE_FLOOR, TL_SCALE_RCEIL, TL_SCALE_EVEN } tl_scale_rule;

#define TL_MX_BLOCK 32

/* floor | rceil | even -> rule; TL_EUSAGE for anything else. */
int tl_scale_rule_parse(const char *name, tl_scale_rule *out);
const char *tl_scale_rule_name(tl_scale_rule r);

/* True for the five MX element formats. */
int tl_mx_elem_ok(tl_numfmt elem);
/* Bytes of element codes for n values (FP4 packed: ceil(n/2); others n). */
size_t tl_mx_code_bytes(tl_numfmt elem, size_t n);
/* Number of blocks (= scale bytes): ceil(n / block). */
size_t tl_mx_num_blocks(size_t n, int block);
/* The E8M0 scale code the rule gives a block with this amax (amax >= 0 and finite; NaN or Inf
 * give 0xFF; 0 gives 0x00). */
uint8_t tl_mx_scale_code(tl_numfmt elem, tl_scale_rule rule, float amax);

/* Quantizes x[0..n) into codes (tl_mx_code_bytes) and scales (tl_mx_num_blocks). */
int tl_mx_quantize(tl_numfmt elem, tl_scale_rule rule, int block, const float *x, size_t n,
                   uint8_t *codes, uint8_t *scales);
/* y[i] = decode(code_i) * 2^(scale - 127); NaN for a block whose scale is 0xFF. */
int tl_mx_dequantize(tl_numfmt elem, int block, const uint8_t *codes, const uint8_t *scales,
                     size_t n, float *y);

#endif
