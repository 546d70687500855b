/* contract/quant.h: fused activation quantization and the MoE dispatch record (issue 20; seed 002's
 * fused FP8 quantization and its 12,288 -> 6,408 bytes a token; seed 000's 1x128 FP8 activations
 * and MXFP4 weights): what the kernels (kernels/quant.hip), the reference (reference/quant.c: the
 * quantizers of numerics/ over rows) and the model (simulator/quant.c) of `quant` agree on.
 *
 * Input: x, rows x K bfloat16 (as uint16 bits), row-major. Every scheme's codes and scales are
 * numerics' quantizer's, bit for bit:
 *
 *   fp8        numerics/blockfp8.h's activation groups: 1 x 128 consecutive values of a row, one
 *   fp8-fnuz   float32 scale each = max(amax, 1e-4) / 448 (E4M3FN) or / 240 (E4M3FNUZ, gfx942),
 *              with ue8m0 rounded up to a power of two; codes = encode(x / scale), RNE, saturating.
 *              Codes [rows][K] one byte each; scales [rows][K/128] (layout row) or [K/128][rows]
 *              (layout col: a group's scales for every row together, what a GEMM that walks K
 *              reads).
 *   mxfp8      numerics/mx.h, blocks of 32 along a row, E4M3FN elements, one E8M0 scale byte each
 *   mxfp4      (floor rule = OCP's, or round-up = RCEIL); codes [rows][K] (mxfp8) or [rows][K/2]
 *              (mxfp4: element 2i in the low nibble of byte i); scales [rows][K/32].
 *   fp8-query  attention's query (seed 002's fused FP8 query quantization) as the FP8 prefill reads
 *              it: x is [tokens][heads][128], one float32 scale per 128-token block per head =
 *              numerics/blockfp8.h's 128 x 128 weight tiles of the [tokens][heads x 128] matrix;
 *              scales [ceil(rows/128)][heads]. With hadamard, each head's 128-vector is first
 *              rotated by numerics/rotate.h's tl_fwht, as attention's "incoherent processing" does
 *              to Q and K: the Sylvester-ordered Walsh-Hadamard matrix (natural order, no bit
 *              reversal or sequency sort) in 7 butterfly stages of strides h = 1, 2, 4, 8, 16, 32,
 *              64, in that order; at stride h every pair (j, j + h) with j mod 2h < h becomes
 *              (x[j] + x[j+h], x[j] - x[j+h]) in float32; after the last stage every value is
 *              multiplied by (float)(1/sqrt(128)) once. The kernel keeps this order (float adds do
 *              not reassociate: another order would change bits).
 *   dispatch   the MoE dispatch record (below): fp8's codes and scales of the token's hidden state
 *              (E4M3FN, layout row) plus its routing, one contiguous record a token.
 *
 * Special values, as numerics gives them (tested; the kernels write the same):
 *   fp8 family: amax ignores NaN (sNaN too); an all-zero or tiny group gets scale 1e-4 / max (never NaN,
 *     never 0); a NaN element encodes to the NaN code of its sign (E4M3FN 0x7F | sign, FNUZ 0x80);
 *     a group holding +-Inf has scale +Inf, its finite elements encode to +-0 and its infinities to
 *     NaN: the quantizer divides Inf / Inf, whose default NaN has its sign set on x86-64 (code 0xFF;
 *     FNUZ 0x80) -- the kernels write exactly that. With ue8m0 an Inf group's scale is 1.0 (glibc's
 *     frexpf gives Inf exponent 0) and its infinities saturate to +-448 (FNUZ +-240).
 *   mx: an all-zero block has scale code 0x00 and zero codes (signs kept); a block holding NaN or
 *     Inf has scale 0xFF (NaN) and every element code 0.
 *   fp8-query with hadamard: a head vector holding NaN or Inf spreads NaN over its 128 values; the
 *     sign of a NaN made by an add differs between CPUs and GPUs, so every NaN code of a rotated
 *     query is written as 0x7F (FNUZ 0x80) by the reference and the kernel alike.
 *
 * The dispatch record (one a token, stride tl_quant_record_bytes, every field little-endian):
 *   [0, K)                   FP8 E4M3FN codes of the hidden state
 *   [K, K + K/32)            K/128 float32 scales (1 x 128 groups)
 *   then 4 topk bytes        the routed experts' ids, int32
 *   then 4 topk bytes        their router weights, float32
 *   then 8 bytes             where the token comes from: its row on the source rank (int32: the
 *                            row r of x that the record was made from) and the source rank (int32,
 *                            the caller's: `run quant --src-rank R`, default 0; check and bench
 *                            write 3, so that a field left unwritten cannot pass), which the combine
 *                            sends the output back to
 *   then 0 or 4 bytes        zero padding to a multiple of 8 (K = 128 x an odd number)
 * GLM-5 (hidden 6144, top-8): 6,144 + 192 + 32 + 32 + 8 = 6,408 bytes, the seed's figure; BF16 is
 * 2 x 6,144 = 12,288 (the seed's baseline moves the hidden state only: the router ran after the
 * gather). The seed gives the two totals, not the layout: the 72 bytes of routing above are this
 * contract's reading (8 ids + 8 weights + the token's return address), which is what they add to.
 */
#ifndef TL_CONTRACT_QUANT_H
#define TL_CONTRACT_QUANT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "../numerics/blockfp8.h"
#include "../numerics/codes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TL_QUANT_FP8,
    TL_QUANT_FP8_FNUZ,
    TL_QUANT_MXFP8,
    TL_QUANT_MXFP4,
    TL_QUANT_FP8_QUERY,
    TL_QUANT_DISPATCH,
    TL_QUANT_NSCHEMES
} tl_quant_scheme_id;

typedef enum { TL_QUANT_SCALES_ROW, TL_QUANT_SCALES_COL } tl_quant_layout;

#define TL_QUANT_GROUP 128        /* fp8 family: values a scale covers along a row */
#define TL_QUANT_MX_BLOCK 32      /* mx: values an E8M0 scale covers */
#define TL_QUANT_HEAD_DIM 128     /* fp8-query: values of one head */
#define TL_QUANT_QUERY_ROWS 128   /* fp8-query: tokens one scale covers */
#define TL_QUANT_MAX_ROWS (1L << 24)
#define TL_QUANT_MAX_K (1L << 17)
#define TL_QUANT_MAX_ELEMS (1LL << 32) /* rows x K: 8 GiB of bf16 input */
#define TL_QUANT_MAX_TOPK 16

typedef struct {
    tl_quant_scheme_id scheme;
    long rows;             /* tokens, 1..TL_QUANT_MAX_ROWS */
    long k;                /* values a row: a multiple of 128 (fp8 family, query: heads x 128) or 32 (mx) */
    int ue8m0;             /* fp8 family: power-of-two scales */
    int round_up;          /* mx: 0 the floor rule (OCP), 1 round-up (RCEIL) */
    tl_quant_layout layout; /* fp8, fp8-fnuz: scale layout (others: row) */
    int hadamard;          /* fp8-query: rotate each head first */
    int topk;              /* dispatch: routed experts a token, 1..TL_QUANT_MAX_TOPK (GLM-5: 8) */
} tl_quant_shape;

/* "fp8" "fp8-fnuz" "mxfp8" "mxfp4" "fp8-query" "dispatch" <-> scheme; TL_EUSAGE naming the list. */
int tl_quant_scheme_id_parse(const char *s, tl_quant_scheme_id *out);
const char *tl_quant_scheme_id_name(tl_quant_scheme_id s);
/* TL_EUSAGE with a one-line message for a shape the kernels do not take (sizes out of range, K not
 * a multiple of the group, an option of another scheme). */
int tl_quant_shape_check(const tl_quant_shape *s);

/* True for the schemes with FP8 1 x 128 groups (fp8, fp8-fnuz, dispatch) and for the MX ones. */
int tl_quant_is_group128(tl_quant_scheme_id s);
int tl_quant_is_mx(tl_quant_scheme_id s);
/* The element format of the codes (E4M3FN, E4M3FNUZ or E2M1). */
tl_numfmt tl_quant_elem(const tl_quant_shape *s);

/* Sizes, in elements and bytes (all rows). Codes: bytes; scales: float32 (fp8 family, query) or
 * E8M0 bytes (mx). The dispatch scheme's outputs are its records. */
size_t tl_quant_code_bytes(const tl_quant_shape *s);
size_t tl_quant_scale_count(const tl_quant_shape *s);
size_t tl_quant_scale_size(const tl_quant_shape *s); /* bytes of one scale: 4 or 1 */
/* The fewest bytes the kernel moves: every input read once (x; dispatch also its ids and weights),
 * every output written once (codes and scales, or the records). */
double tl_quant_read_bytes(const tl_quant_shape *s);
double tl_quant_write_bytes(const tl_quant_shape *s);

/* ---- the dispatch record ---- */
typedef struct {
    size_t codes, scales, ids, weights, source, pad, bytes; /* offsets; bytes = the stride */
} tl_quant_record;
tl_quant_record tl_quant_record_layout(long k, int topk);

/* Bytes a token carries over the fabric, by what it is sent as (sim dispatch, draw dispatch-bytes):
 * values, scales, routing (ids, weights, return address, padding). */
typedef enum { TL_PAYLOAD_BF16, TL_PAYLOAD_FP8, TL_PAYLOAD_MXFP8, TL_PAYLOAD_MXFP4, TL_PAYLOAD_N } tl_payload_kind;
typedef struct {
    double values, scales, routing, total;
} tl_payload_bytes;
/* BF16: 2 H bytes of values and nothing else (the router runs after the gather); FP8: H + H/32 +
 * the routing record (= the dispatch record's stride); MXFP8: H + H/32 + routing; MXFP4: H/2 + H/32
 * + routing. H a multiple of 128. */
tl_payload_bytes tl_payload_of(tl_payload_kind kind, long hidden, int topk);
const char *tl_payload_name(tl_payload_kind kind);

/* The factor tl_fwht multiplies by after its butterflies for a 128-vector: (float)(1/sqrt(128)). */
float tl_quant_hadamard_scale(void);

/* ---- the per-group arithmetic the kernels do, host and device (tests run it on the host) ---- */
#if defined(__CUDACC__)
#define TL_QUANT_FN static __host__ __device__ inline
#elif defined(__HIP__)
#define TL_QUANT_FN static __attribute__((host, device)) inline
#else
#define TL_QUANT_FN static inline
#endif

#define TL_QUANT_E4M3_EMAX 8
#define TL_QUANT_E4M3_MAX_MANT 0x600000u /* 448 = 1.75 x 2^8 */
#define TL_QUANT_E2M1_EMAX 2
#define TL_QUANT_E2M1_MAX_MANT 0x400000u /* 6 = 1.5 x 2^2 */

/* |x|'s bits when x is not NaN (quiet or signalling), else 0: the largest over a group is its amax
 * as tl_code_max_no_nan finds it. */
TL_QUANT_FN uint32_t tl_quant_abs_bits_no_nan(float x)
{
    const uint32_t a = tl_code_f32_bits(x) & 0x7FFFFFFFu;
    return a > 0x7F800000u ? 0u : a;
}
/* |x|'s bits, NaN included (NaN sorts above Inf): the MX block's test for a NaN or Inf. */
TL_QUANT_FN uint32_t tl_quant_abs_bits(float x) { return tl_code_f32_bits(x) & 0x7FFFFFFFu; }

/* A 1 x 128 group's (or a query tile's) scale from its amax (>= 0, not NaN; Inf allowed):
 * = tl_bfp8_scale(fnuz ? E4M3FNUZ : E4M3FN, amax, ue8m0). */
TL_QUANT_FN float tl_quant_fp8_scale(float amax, int fnuz, int ue8m0)
{
    const float a = amax > TL_BFP8_AMAX_MIN ? amax : TL_BFP8_AMAX_MIN;
    const float s = a / (fnuz ? 240.0f : 448.0f);
    return ue8m0 ? tl_code_pow2_ceil(s) : s;
}

/* x / s rounded to nearest even, from r = 1 / s (itself rounded to nearest): q0 = x r, then two
 * residual corrections q += (x - s q) r, each residual exact by one FMA. The first brings q within
 * one ulp of x / s, the second rounds it correctly (Markstein's theorem, which needs r correctly
 * rounded and no underflow: for |x| or |x / s| < 2^-100 the residual may fall under float32's normal range
 * and the result differ by an ulp, far under any FP8 code's step); s > 0, so the quotient has x's
 * sign. Six operations a value where a group
 * shares one division for r;
 * tests/test_quant.c compares it with x / s on every bf16 value under sampled scales. */
TL_QUANT_FN float tl_quant_div_by(float x, float s, float r)
{
    float q = x * r;
    q = fmaf(fmaf(-s, q, x), r, q);
    return copysignf(fmaf(fmaf(-s, q, x), r, q), x); /* x = -0: the residuals' +0 would drop the sign */
}

/* An element's code under its group's scale: = encode(x / scale) as the quantizer computes it on
 * the host, with NaN made explicit where the devices' NaN rules differ from x86-64's (see above). */
TL_QUANT_FN uint32_t tl_quant_fp8_code(float x, float scale, int fnuz)
{
    const uint32_t u = tl_code_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return fnuz ? 0x80u : ((u >> 24) & 0x80u) | 0x7Fu;
    if ((u & 0x7FFFFFFFu) == 0x7F800000u && tl_code_f32_bits(scale) == 0x7F800000u) return fnuz ? 0x80u : 0xFFu;
    const float q = x / scale;
    return fnuz ? tl_code_e4m3fnuz_from_f32(q) : tl_code_e4m3_from_f32(q);
}
/* The rotated query's code: NaN codes as one (0x7F; FNUZ 0x80 already). */
TL_QUANT_FN uint32_t tl_quant_fp8_code_canon_nan(float x, float scale, int fnuz)
{
    const uint32_t c = tl_quant_fp8_code(x, scale, fnuz);
    return !fnuz && (c & 0x7Fu) == 0x7Fu ? 0x7Fu : c;
}

/* An MX block's scale code from the largest |x| bits over the block (NaN included): 0xFF for NaN
 * or Inf; else the rule's (numerics/mx.h). */
TL_QUANT_FN uint32_t tl_quant_mx_scale(uint32_t max_abs_bits, int fp4, int round_up)
{
    return tl_code_e8m0_mx_scale(max_abs_bits, fp4 ? TL_QUANT_E2M1_EMAX : TL_QUANT_E4M3_EMAX,
                                 fp4 ? TL_QUANT_E2M1_MAX_MANT : TL_QUANT_E4M3_MAX_MANT, round_up);
}
/* An MX element's code (E4M3FN, or E2M1 in the low nibble) under scale code sc: 0 when sc = 0xFF,
 * else encode(x x 2^(127 - sc)). */
TL_QUANT_FN uint32_t tl_quant_mx_code(float x, uint32_t sc, int fp4)
{
    if (sc == 0xFFu) return 0u;
    const float q = x * tl_code_e8m0_inverse(sc);
    return fp4 ? tl_code_e2m1_from_f32(q) : tl_code_e4m3_from_f32(q);
}

/* The kernels' geometry (the model reads it): a tile is TL_QUANT_THREADS threads x TL_QUANT_VECS
 * x 8 bf16 values (16-byte loads); a block converts one tile while the loads of its next are in
 * flight, over tiles b, b + grid, ... (grid: the blocks the GPU holds at once, at most the tiles).
 * A 1 x 128 group is 16 lanes, an MX block 4 lanes; their largest |x| is a shuffle butterfly (4 or
 * 2 steps). fp8-query: one block of TL_QUANT_QUERY_THREADS per 128-token block per head, each
 * thread 4 rows x 8 values; the Hadamard stages 1, 2, 4 inside a thread and 8 .. 64 across lanes
 * by shuffles; the tile's amax through shared memory. dispatch:
 * fp8's kernel writing into the records (8-byte stores: a record's stride is a multiple of 8). */
#define TL_QUANT_THREADS 256
#define TL_QUANT_VECS 2
#define TL_QUANT_QUERY_THREADS 512
#define TL_QUANT_VALUES_PER_THREAD 8

/* Tiles of one launch (fp8-query: its blocks); the kernels and the model agree on them. */
long tl_quant_blocks(const tl_quant_shape *s);

#ifdef __cplusplus
}
#endif

#endif
