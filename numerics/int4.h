/* INT4 weight quantization in groups along K (W4A16: Kimi-K2 style a16w4).
 *
 * A rows x k row-major matrix (k = reduction dimension, contiguous); each row is cut into groups of
 * `group` consecutive elements (32, 64 or 128; the last group of a row may be partial). Per group:
 *   symmetric:   scale = amax / 7 (1 when amax = 0), q = clamp(rne(x / scale), -8, 7),
 *                stored as the unsigned nibble u = q + 8 with zero point z = 8.
 *   asymmetric:  lo = min(min x, 0), hi = max(max x, 0) (so 0 is exact, as GPTQ does),
 *                scale = (hi - lo) / 15 (1 when hi = lo = 0), z = clamp(rne(-lo / scale), 0, 15),
 *                u = clamp(rne(x / scale) + z, 0, 15).
 *   value = (u - z) * scale in both cases, so one dequantizer serves both.
 * Storage: packed two per byte along k, element 2i in the LOW nibble of byte i, 2i+1 in the high
 * nibble; each row takes ceil(k/2) bytes (an odd k leaves the last high nibble 0). scales: float32,
 * rows x ceil(k/group); zeros: one byte per group (value 0..15; 8 for symmetric), same shape.
 * zeros may be NULL for symmetric quantization (then z = 8 is implied on dequantize too).
 * Bad input (group not 32/64/128 -- other values in [2, 4096] are accepted too but these are the
 * supported ones -- or NULL buffers): TL_EUSAGE. NaN inputs become u = z (0) with the group's scale
 * computed over the rest; callers that must see NaN check inputs first.
 * Cost: two passes, O(rows * k).
 */
#ifndef TL_NUMERICS_INT4_H
#define TL_NUMERICS_INT4_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of packed codes per row. */
size_t tl_int4_row_bytes(size_t k);
/* Groups per row, ceil(k / group). */
size_t tl_int4_groups(size_t k, int group);

int tl_int4_quantize(int asym, int group, const float *w, size_t rows, size_t k, uint8_t *packed,
                     float *scales, uint8_t *zeros);
int tl_int4_dequantize(int group, const uint8_t *packed, const float *scales, const uint8_t *zeros,
                       size_t rows, size_t k, float *y);

#endif
