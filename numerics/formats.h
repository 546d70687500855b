/* Small floating-point formats: FP8 (OCP and FNUZ), FP6, FP4, the E8M0 scale, BF16 and FP16.
 *
 * A value of a format is held as its code: the bit pattern in the low tl_numfmt_bits() bits of a
 * uint16_t (sign in the top bit of those, where the format has one).
 *
 * Encoding float32 -> code rounds to nearest, ties to even (RNE), in one of two modes:
 *   saturate = 1  ("satfinite", as CUDA's __NV_SATFINITE): a finite value that rounds beyond the
 *                 largest finite value, and +-Inf, become +-max.
 *   saturate = 0  a value that rounds beyond max becomes Inf where the format has Inf (E5M2, BF16,
 *                 FP16), else NaN (E4M3FN: 0x7F/0xFF by sign; FNUZ: 0x80); +-Inf likewise.
 * Rounding happens first, so E4M3FN 464 (= max + half an ulp) ties down to 448 in both modes and
 * 465 overflows. FP4 and FP6 have neither Inf nor NaN and saturate in both modes.
 * NaN input: a NaN code of that sign (E4M3FN 0x7F|s, E5M2 0x7E|s, FNUZ 0x80, BF16 0x7FC0|s,
 * FP16 0x7E00|s, E8M0 0xFF); FP4/FP6 have no NaN and give +0 (code 0) -- callers that must keep
 * NaN visible use MX blocks, whose scale carries it.
 * FNUZ formats have no -0: anything that rounds to zero is code 0x00.
 * E8M0 (unsigned powers of two 2^-127..2^127, 0xFF = NaN) rounds to the nearest power of two in
 * value (ties, at 1.5 * 2^k, to the even code); +-0 and tiny values give 0x00 (2^-127, the nearest
 * value: E8M0 has no zero); negative values and NaN give 0xFF; overflow as above (no Inf: NaN).
 * Decoding code -> float32 is exact for every code of every format (all values fit in float32).
 *
 * Cost: tl_encode / tl_decode are a few dozen instructions. The array versions are the fast paths
 * (encode by branch-free bit manipulation, vectorized, with an AVX2 clone picked at load time on
 * x86-64; decode through 256-entry tables, 65536 for FP16, a shift for BF16; no loop over codes):
 * about 1 G values/s encode and 2 G values/s decode on one core with data in cache
 * (`tilelab bench numerics`). The decode tables are built on first use (thread-safe).
 */
#ifndef TL_NUMERICS_FORMATS_H
#define TL_NUMERICS_FORMATS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TL_NF_E4M3FN,   /* OCP FP8, bias 7, max 448, NaN 0x7F/0xFF, no Inf */
    TL_NF_E5M2,     /* OCP FP8, bias 15, max 57344, IEEE-like Inf/NaN */
    TL_NF_E4M3FNUZ, /* gfx942 FP8, bias 8, max 240, NaN 0x80 only, no -0 */
    TL_NF_E5M2FNUZ, /* gfx942 FP8, bias 16, max 57344, NaN 0x80 only, no -0 */
    TL_NF_E2M3,     /* FP6, bias 1, max 7.5 */
    TL_NF_E3M2,     /* FP6, bias 3, max 28 */
    TL_NF_E2M1,     /* FP4, bias 1, max 6 */
    TL_NF_E8M0,     /* MX scale, 2^(code-127), 0xFF NaN */
    TL_NF_BF16,
    TL_NF_FP16,
    TL_NF_COUNT
} tl_numfmt;

/* Classes of codes, as `tilelab numerics table` prints them. "max" is the largest finite
 * magnitude (either sign). */
typedef enum { TL_NC_ZERO, TL_NC_SUBNORMAL, TL_NC_NORMAL, TL_NC_MAX, TL_NC_INF, TL_NC_NAN } tl_numclass;

/* Name -> format: e4m3fn e5m2 e4m3fnuz e5m2fnuz e2m3 e3m2 e2m1 e8m0 bf16 fp16 (exact, lower case).
 * Unknown name: TL_EUSAGE with a message listing the names. */
int tl_numfmt_parse(const char *name, tl_numfmt *out);
/* Format -> its name above ("?" for an out-of-range value). */
const char *tl_numfmt_name(tl_numfmt f);
/* Width of a code in bits (4, 6, 8 or 16). */
int tl_numfmt_bits(tl_numfmt f);
/* Exponent and mantissa field widths, and the exponent bias. */
int tl_numfmt_ebits(tl_numfmt f);
int tl_numfmt_mbits(tl_numfmt f);
int tl_numfmt_bias(tl_numfmt f);
/* Number of codes, 1 << bits. */
uint32_t tl_numfmt_code_count(tl_numfmt f);
/* Largest finite value, smallest normal and smallest subnormal (E8M0: 2^127, 2^-127, 0). */
double tl_numfmt_max(tl_numfmt f);
double tl_numfmt_min_normal(tl_numfmt f);
double tl_numfmt_min_subnormal(tl_numfmt f);
/* floor(log2(max)): the largest element exponent used by the MX scale rule (E4M3 8, E5M2 15,
 * E2M1 2, E2M3 2, E3M2 4). */
int tl_numfmt_emax_elem(tl_numfmt f);
/* Unit roundoff of RNE in the normal range, 2^-(mbits+1) (E8M0: 0.5 in log terms; returns 1/3,
 * the worst relative error of rounding to a power of two). */
double tl_numfmt_unit_roundoff(tl_numfmt f);
int tl_numfmt_has_inf(tl_numfmt f);
int tl_numfmt_has_nan(tl_numfmt f);

/* float32 -> code, RNE; saturate as described at the top. */
uint16_t tl_encode(tl_numfmt f, float x, int saturate);
/* code -> float32, exact. Bits above tl_numfmt_bits() are ignored. */
float tl_decode(tl_numfmt f, uint16_t code);
/* Class of a code. */
tl_numclass tl_classify(tl_numfmt f, uint16_t code);
const char *tl_numclass_name(tl_numclass c);

/* Array versions: out[i] = tl_encode(f, x[i], saturate), bit-identical to the scalar function.
 * tl_encode_array8 needs a format of at most 8 bits (returns TL_EUSAGE otherwise); FP4/FP6 codes
 * are stored one per byte here (see mx.h for packed FP4). tl_encode_array16 takes any format.
 * Returns 0. */
int tl_encode_array8(tl_numfmt f, const float *x, size_t n, int saturate, uint8_t *out);
int tl_encode_array16(tl_numfmt f, const float *x, size_t n, int saturate, uint16_t *out);
/* out[i] = tl_decode(f, codes[i]). tl_decode_array8 needs a format of at most 8 bits. */
int tl_decode_array8(tl_numfmt f, const uint8_t *codes, size_t n, float *out);
int tl_decode_array16(tl_numfmt f, const uint16_t *codes, size_t n, float *out);
/* The 256-entry decode table of an at-most-8-bit format (entries past code_count repeat the
 * pattern of the low bits), or NULL for BF16/FP16. Owned by the library; valid forever. */
const float *tl_decode_table8(tl_numfmt f);

#endif
