/* numerics/codes.h: the few code <-> float32 conversions that GPU kernels do per element (BF16,
 * E4M3FN, E2M1, E8M0), as bit manipulation that compiles for the host (C17) and for the device
 * (HIP, CUDA). They are the kernels' copy of numerics/formats.h's rules: tests/test_numerics_codes.c checks
 * each against tl_encode / tl_decode on every code and on a sweep of float32 inputs, so a kernel
 * that calls these writes and reads exactly what the reference does.
 *
 * Contracts (x is any float32, NaN and Inf included):
 *   tl_code_bf16_from_f32(x)  = tl_encode(TL_NF_BF16, x, 0): RNE, overflow to Inf, NaN -> 0x7FC0|s
 *   tl_code_e4m3_from_f32(x)  = tl_encode(TL_NF_E4M3FN, x, 1): RNE, saturating at +-448, NaN -> 0x7F|s
 *   tl_code_bf16_from_exact_f32(x) = the same as tl_code_bf16_from_f32 where x is a BF16 value,
 *     Inf or a quiet NaN (which may keep a payload: a NaN code), without the rounding. Exact
 *     inputs: INT4 and E2M1 values times any power of two, E4M3 values times 2^k for k >= -124
 *     (E8M0 codes >= 3; below that the product can fall under BF16's smallest subnormal, 2^-133,
 *     and the shift truncates where RNE would round: one subnormal step)
 *   tl_code_int4x2_bf16_plus128(byte) = the BF16 pair (128 + n_lo, 128 + n_hi); minus
 *     TL_CODE_INT4_BF16_OFFSET each half is tl_int4_dequantize's value with scale 1 and zero 8
 *   tl_code_e4m3x2_bf16_2m120(h) = the BF16 pair of h's two E4M3 values (low byte first) times
 *     2^-120; times TL_CODE_E4M3_BF16_UNSCALE each half is tl_decode(TL_NF_E4M3FN, byte), exactly
 *     (NaN codes: NaN)
 *   tl_code_e2m1x2_bf16_2m126(byte) = the BF16 pair of the byte's two E2M1 values times 2^-126;
 *     times TL_CODE_E2M1_BF16_UNSCALE each half is tl_decode(TL_NF_E2M1, nibble), exactly
 *   tl_code_bf16_to_f32(h), tl_code_e4m3_to_f32(b), tl_code_e2m1_to_f32(c), tl_code_e8m0_to_f32(c):
 *     = tl_decode of the format, exact; bits above the code's width are ignored (E8M0: c < 256).
 *     NaN codes give a quiet NaN (E4M3FN 0x7F/0xFF, E8M0 0xFF).
 * Cost: a handful of integer operations and at most two branches each; no tables, no libm.
 */
#ifndef TL_NUMERICS_CODES_H
#define TL_NUMERICS_CODES_H

#include <stdint.h>

#if defined(__CUDACC__)
#define TL_CODE_FN static __host__ __device__ inline
#elif defined(__HIP__)
#define TL_CODE_FN static __attribute__((host, device)) inline
#else
#define TL_CODE_FN static inline
#endif

TL_CODE_FN float tl_code_bits_f32(uint32_t u)
{
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}
TL_CODE_FN uint32_t tl_code_f32_bits(float f)
{
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- maxima that ignore NaN ------------------------------------------------------------------
 * tl_code_max_no_nan(a, b): the larger of a and b, an operand that is NaN ignored (NaN only when
 * both are); tl_code_min_no_nan the smaller. This is fmaxf's rule for a quiet NaN, kept for a
 * signalling one too: glibc's fmaxf (2.36) and LLVM's maxnum return NaN for a signalling NaN,
 * and a NaN amax is a clamp, not the group's largest value. Every amax over data that may hold
 * NaN (user inputs, a bf16 bit pattern such as 0x7F81 widened exactly) goes through these. Two
 * compares and a select; no libm. */
TL_CODE_FN float tl_code_max_no_nan(float a, float b) { return b > a || a != a ? b : a; }
TL_CODE_FN float tl_code_min_no_nan(float a, float b) { return b < a || a != a ? b : a; }

/* ---- BF16: the top half of a float32 ---------------------------------------------------------- */
TL_CODE_FN float tl_code_bf16_to_f32(uint32_t h) { return tl_code_bits_f32(h << 16); }
TL_CODE_FN uint32_t tl_code_bf16_from_f32(float x)
{
    const uint32_t u = tl_code_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return ((u >> 16) & 0x8000u) | 0x7FC0u; /* NaN */
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16; /* RNE; the carry makes max + half an ulp Inf */
}

/* The code of a float32 that BF16 holds exactly (see the contract above): its top half, no rounding
 * needed; a quiet NaN stays NaN and Inf stays Inf. For other values it truncates (use
 * tl_code_bf16_from_f32). One shift. */
TL_CODE_FN uint32_t tl_code_bf16_from_exact_f32(float x) { return tl_code_f32_bits(x) >> 16; }

/* ---- E4M3FN (OCP FP8): bias 7, max 448, 0x7F/0xFF NaN, no Inf --------------------------------- */
TL_CODE_FN float tl_code_e4m3_to_f32(uint32_t b)
{
    const uint32_t s = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
    if ((b & 0x7Fu) == 0x7Fu) return tl_code_bits_f32(s | 0x7FC00000u);
    if (e) return tl_code_bits_f32(s | ((e + 120u) << 23) | (m << 20)); /* rebias 7 -> 127 */
    return tl_code_bits_f32(s | (m ? tl_code_f32_bits((float)m * (1.0f / 512.0f)) : 0u)); /* m x 2^-9 */
}
TL_CODE_FN uint32_t tl_code_e4m3_from_f32(float x)
{
    const uint32_t sign = (tl_code_f32_bits(x) >> 24) & 0x80u, u = tl_code_f32_bits(x) & 0x7FFFFFFFu;
    if (u > 0x7F800000u) return sign | 0x7Fu;      /* NaN */
    if (u >= 0x43E00000u) return sign | 0x7Eu;     /* |x| >= 448 (Inf too): saturate */
    if (u < 0x3C800000u) { /* |x| < 2^-6: steps of 2^-9, rounded in integers (no float mode matters) */
        const uint32_t ex = u >> 23, sig = ex ? (u & 0x7FFFFFu) | 0x800000u : u;
        const uint32_t sh = 141u - (ex ? ex : 1u); /* |x| x 512 = sig x 2^-sh, sh >= 21 */
        if (sh >= 32u) return sign;                /* under a quarter step */
        const uint32_t q = sig >> sh, rem = sig & ((1u << sh) - 1u), half = 1u << (sh - 1u);
        return sign | (q + (rem > half || (rem == half && (q & 1u)))); /* 8 steps = 0x08 = 2^-6 */
    }
    const uint32_t r = u + 0x7FFFFu + ((u >> 20) & 1u); /* RNE to 3 mantissa bits */
    const uint32_t e = (r >> 23) - 120u, m = (r >> 20) & 7u;
    if (e > 15u || (e == 15u && m == 7u)) return sign | 0x7Eu; /* rounded past 448 */
    return sign | (e << 3) | m;
}

/* Two E4M3 codes (bits 0-7 and 8-15 of h) as a BF16 pair whose values are theirs times 2^-120:
 * the code's 7 magnitude bits go to BF16's exponent and top 3 mantissa bits, where BF16 subnormals
 * continue E4M3's; NaN codes (0x7F, 0xFF) become BF16 NaN. Multiplying each half by
 * TL_CODE_E4M3_BF16_UNSCALE (BF16 2^120) gives the values exactly. A few integer operations. */
#define TL_CODE_E4M3_BF16_UNSCALE 0x7B80u
TL_CODE_FN uint32_t tl_code_e4m3x2_bf16_2m120(uint32_t h)
{
    const uint32_t bits = ((h & 0x7Fu) << 4) | ((h & 0x80u) << 8) | ((h & 0x7F00u) << 12) | ((h & 0x8000u) << 16);
    const uint32_t nan = ((h & 0x7F7Fu) + 0x0101u) & 0x8080u; /* bit 7 / 15: that byte is 0x7F or 0xFF */
    return bits | ((nan & 0x80u) ? 0x7FC0u : 0u) | ((nan & 0x8000u) ? 0x7FC00000u : 0u);
}

/* ---- E4M3FNUZ (gfx942 FP8): bias 8, max 240, 0x80 the only NaN, no Inf, no -0 ----------------- */
/* = tl_encode(TL_NF_E4M3FNUZ, x, 1): RNE, saturating at +-240 (Inf too), NaN -> 0x80, anything that
 * rounds to zero -> 0x00. A FNUZ code's value is half the E4M3FN value of the same bits (0x7F: 240),
 * so this rounds 2x as E4M3FN does, with 480 (0x7F) as the largest magnitude instead of a NaN. */
TL_CODE_FN uint32_t tl_code_e4m3fnuz_from_f32(float x)
{
    const uint32_t sign = (tl_code_f32_bits(x) >> 24) & 0x80u, u = tl_code_f32_bits(x) & 0x7FFFFFFFu;
    if (u > 0x7F800000u) return 0x80u;         /* NaN */
    if (u >= 0x43700000u) return sign | 0x7Fu; /* |x| >= 240 (Inf too): saturate */
    const uint32_t v = u < 0x00800000u ? u << 1 : u + 0x00800000u; /* |2x|, exact */
    uint32_t mag;
    if (v < 0x3C800000u) { /* |2x| < 2^-6: steps of 2^-9 as in tl_code_e4m3_from_f32 */
        const uint32_t ex = v >> 23, sig = ex ? (v & 0x7FFFFFu) | 0x800000u : v;
        const uint32_t sh = 141u - (ex ? ex : 1u);
        if (sh >= 32u) return 0u;
        const uint32_t q = sig >> sh, rem = sig & ((1u << sh) - 1u), half = 1u << (sh - 1u);
        mag = q + (rem > half || (rem == half && (q & 1u)));
    } else {
        const uint32_t r = v + 0x7FFFFu + ((v >> 20) & 1u);
        const uint32_t e = (r >> 23) - 120u, m = (r >> 20) & 7u;
        mag = e > 15u ? 0x7Fu : (e << 3) | m; /* 2x rounded past 480 */
    }
    return mag ? sign | mag : 0u; /* no -0 */
}

/* ---- E2M1 (FP4): bias 1, max 6, no Inf or NaN -------------------------------------------------- */
TL_CODE_FN float tl_code_e2m1_to_f32(uint32_t c)
{
    const uint32_t s = (c & 8u) << 28, e = (c >> 1) & 3u, m = c & 1u;
    if (e == 0) return tl_code_bits_f32(s | (m ? 0x3F000000u : 0u)); /* 0 or 0.5 */
    return tl_code_bits_f32(s | ((e + 126u) << 23) | (m << 22));
}

/* = tl_encode(TL_NF_E2M1, x, 1): RNE onto 0, 0.5, 1, 1.5, 2, 3, 4, 6 (ties to the even code),
 * saturating at +-6 (Inf too), the sign kept (-0 is 0x8); NaN -> 0 (FP4 has no NaN: MX blocks carry
 * it in their scale). The grid's step is 0.5 below 2, 1 below 4 and 2 above, so the magnitude code
 * is rint(|x| / step) plus the codes under the step's range (0, 2, 4), at most 7; rint by the float
 * add of 1.5 x 2^23 (exact ties-to-even for 0 <= t <= 8). About ten operations, no branch but NaN. */
TL_CODE_FN uint32_t tl_code_e2m1_from_f32(float x)
{
    const uint32_t sign = (tl_code_f32_bits(x) >> 28) & 8u;
    const float a = tl_code_bits_f32(tl_code_f32_bits(x) & 0x7FFFFFFFu);
    if (!(a == a)) return 0u;
    const float per_step = a < 2.0f ? 2.0f : a < 4.0f ? 1.0f : 0.5f;
    const uint32_t below = a < 2.0f ? 0u : a < 4.0f ? 2u : 4u;
    const float t = (a < 16.0f ? a : 16.0f) * per_step;
    const uint32_t m = tl_code_f32_bits(t + 12582912.0f) - 0x4B400000u + below;
    return sign | (m < 7u ? m : 7u);
}

/* ---- BF16 pairs (two values in one 32-bit word, the first in the low half) --------------------- */
#define TL_CODE_BF16X2_ONE 0x3F803F80u    /* (1, 1) */
#define TL_CODE_BF16X2_MINUS0 0x80008000u /* (-0, -0): the addend that leaves a product as it is */
TL_CODE_FN uint32_t tl_code_bf16x2_splat(uint32_t h) { return (h & 0xFFFFu) * 0x10001u; }

/* ---- INT4 (numerics/int4.h, symmetric): a nibble n holds n - 8, two per byte, low nibble first --- */
#define TL_CODE_INT4_ZERO 8u
/* A byte's two nibbles as the BF16 pair (128 + low, 128 + high), low nibble in the low half: taking
 * TL_CODE_INT4_BF16_OFFSET (BF16 136 = 128 + the zero point) from each half gives the two values,
 * exactly (one packed BF16 FMA on NVIDIA). A few integer operations. */
#define TL_CODE_INT4_BF16_OFFSET 0x4308u
#define TL_CODE_INT4_BF16X2_MINUS_OFFSET 0xC308C308u /* (-136, -136): the addend of that FMA */
TL_CODE_FN uint32_t tl_code_int4x2_bf16_plus128(uint32_t byte)
{
    return (byte & 0x0Fu) | ((byte & 0xF0u) << 12) | 0x43004300u;
}

/* A byte's two E2M1 codes (low nibble first) as a BF16 pair whose values are theirs times 2^-126:
 * the code's 3 magnitude bits go to BF16's exponent and top mantissa bit, where BF16 subnormals
 * continue E2M1's (0.5 lands on 2^-127). Multiplying each half by TL_CODE_E2M1_BF16_UNSCALE (BF16
 * 2^126) gives the values exactly. A few integer operations. */
#define TL_CODE_E2M1_BF16_UNSCALE 0x7E80u
TL_CODE_FN uint32_t tl_code_e2m1x2_bf16_2m126(uint32_t byte)
{
    return ((byte & 0x07u) << 6) | ((byte & 0x08u) << 12) | ((byte & 0x70u) << 18) | ((byte & 0x80u) << 24);
}

/* ---- E8M0 (MX scale): 2^(c - 127), 0xFF NaN ---------------------------------------------------- */
TL_CODE_FN float tl_code_e8m0_to_f32(uint32_t c)
{
    if (c == 255u) return tl_code_bits_f32(0x7FC00000u);
    return tl_code_bits_f32(c ? c << 23 : 0x00400000u); /* code 0 is 2^-127, a subnormal */
}

/* The E8M0 scale code an OCP MX block gets (= tl_mx_scale_code(elem, FLOOR or RCEIL, amax) of
 * numerics/mx.h) from amax_bits, the float32 bits of its largest |x| (any finite value >= 0; NaN or
 * Inf bits give 0xFF). emax: the element's largest exponent (E4M3 8, E2M1 2); max_mant: the 23
 * mantissa bits of its largest value (E4M3 448 = 1.75 x 2^8: 0x600000; E2M1 6 = 1.5 x 2^2:
 * 0x400000). FLOOR: s = floor(log2 amax) - emax; round-up (RCEIL): s = ceil(log2(amax / max)), one
 * more than FLOOR's exactly when amax's mantissa exceeds max's. s clamped to [-127, 127]; amax 0 or
 * subnormal: 0x00. A few integer operations. */
TL_CODE_FN uint32_t tl_code_e8m0_mx_scale(uint32_t amax_bits, int emax, uint32_t max_mant, int round_up)
{
    if (amax_bits >= 0x7F800000u) return 0xFFu;
    const int biased = (int)(amax_bits >> 23);
    if (biased == 0) return 0u;
    int s = biased - 127 - emax + (round_up && (amax_bits & 0x7FFFFFu) > max_mant);
    s = s < -127 ? -127 : s > 127 ? 127 : s;
    return (uint32_t)(s + 127);
}
/* 1 / 2^(c - 127) for an E8M0 code c in [0, 254], exactly (2^127 .. 2^-127; code 254 is 2^-127, a
 * float32 subnormal): the factor an MX block's values are multiplied by before encoding. */
TL_CODE_FN float tl_code_e8m0_inverse(uint32_t c)
{
    const int e = 127 - (int)c; /* in [-127, 127] */
    return tl_code_bits_f32(e >= -126 ? (uint32_t)(e + 127) << 23 : 0x00400000u);
}

/* s rounded up to a power of two (= numerics/blockfp8.h's ue8m0 step, frexpf/ldexpf, for any s > 0
 * that is normal; +Inf gives 1.0f, as glibc's frexpf (exponent 0) makes the host's). */
TL_CODE_FN float tl_code_pow2_ceil(float s)
{
    const uint32_t u = tl_code_f32_bits(s);
    if (u >= 0x7F800000u) return 1.0f;
    return tl_code_bits_f32((u & 0x7FFFFFu) ? ((u >> 23) + 1u) << 23 : u);
}

#endif
