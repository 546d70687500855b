/* numerics/keys.h: order-preserving integer keys of floating-point scores, for selection by radix
 * (top-k) and for comparisons that must agree bit for bit between the CPU and every GPU.
 *
 * key(a) > key(b) exactly when score a ranks above score b, where the ranking is the one a full
 * sort by value gives, made total:
 *   - +0 and -0 are the same value: they get the same key (the tie rule then decides by index);
 *   - NaN (any payload, either sign) ranks below -inf: its key is 0, the lowest there is;
 *   - +inf and -inf are ordinary values (the highest and the lowest non-NaN keys);
 *   - subnormals order like any other value.
 * The 16-bit formats get 16-bit keys (in the low half of the result), so that a radix pass over
 * bfloat16 or float16 scores touches half the key bits of float32's.
 * Plain C, static inline: host and device (the kernels include it through contract/topk.h).
 * Cost: a few integer operations per score. */
#ifndef TL_NUMERICS_KEYS_H
#define TL_NUMERICS_KEYS_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TL_KEY_FN static inline __host__ __device__
#else
#define TL_KEY_FN static inline
#endif

/* float32 bits -> key in [0, 2^32). */
TL_KEY_FN uint32_t tl_key_f32(uint32_t bits)
{
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu)) return 0u; /* NaN */
    if (bits == 0x80000000u) bits = 0u;                                         /* -0 is +0 */
    return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

/* The sign-magnitude 16-bit pattern h -> key in [0, 2^16), given the format's exponent mask and
 * mantissa mask (NaN: exponent all ones, mantissa nonzero). */
TL_KEY_FN uint32_t tl_key_16(uint32_t h, uint32_t exp_mask, uint32_t man_mask)
{
    h &= 0xFFFFu;
    if ((h & exp_mask) == exp_mask && (h & man_mask)) return 0u; /* NaN */
    if (h == 0x8000u) h = 0u;                                    /* -0 is +0 */
    return (h & 0x8000u) ? (~h & 0xFFFFu) : (h | 0x8000u);
}

/* bfloat16 bits (1-8-7) -> key in [0, 2^16). */
TL_KEY_FN uint32_t tl_key_bf16(uint16_t bits) { return tl_key_16(bits, 0x7F80u, 0x007Fu); }
/* float16 bits (1-5-10) -> key in [0, 2^16). */
TL_KEY_FN uint32_t tl_key_f16(uint16_t bits) { return tl_key_16(bits, 0x7C00u, 0x03FFu); }

#endif
