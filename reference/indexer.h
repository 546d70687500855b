/* reference/indexer.h: the CPU reference of the DSA lightning indexer (contract/indexer.h), an
 * independent naive loop that checks it, the seeded inputs, and the tolerance a kernel's logits
 * are held to.
 *
 * Numerics of the op and the tolerance (derived from the formats, not fitted):
 *   - A product of two E4M3 values has at most 4 x 4 = 8 significant bits and magnitude within
 *     [2^-18, 448^2]: exact in float32 (and in bfloat16 x bfloat16 products, as a matrix core
 *     forms them from E4M3 values decoded to bf16, which hold them exactly).
 *   - The dot product sums D = 128 such products. An accumulator that keeps p mantissa bits and
 *     truncates (NVIDIA's tensor cores align and truncate within an instruction: Fasi et al., 2021;
 *     round-to-nearest would only quarter the term) makes a relative error uniform in [0, 2^-p)
 *     per addition, RMS 2^-p / sqrt(3). With random signs the j-th partial sum has RMS sqrt(j) sigma,
 *     so the errors of the D additions add to 2^-2p sigma^2 D^2 / 6 against the dot's variance
 *     D sigma^2: relative RMS^2 = D 2^-2p / 6.
 *       float32 accumulator (mma.sync bf16 on sm_90, MFMA on gfx942/gfx950): p = 23.
 *       Hopper's FP8 tensor-core (wgmma / mma e4m3) accumulator keeps about 22 mantissa bits: p = 22,
 *       twice the RMS. (DeepSeek-V3's report measured "around 14 bits" on the H800 for its FP8
 *       GEMM; a kernel on that path would need p = 13 here and promotion to float32 in between.)
 *   - relu is 1-Lipschitz: it passes an error on and never grows it. The scale and the weight
 *     are one float32 rounding each (u = 2^-24, RMS u / sqrt(3)); the head sum over H terms in
 *     float32 adds H u^2 / 6 (the same sequential model, round to nearest).
 *   - Relative to the logit: the logit is sum_h w_h relu(s dot_h), its error sum_h w_h e_h; with
 *     weights of random sign both the value and the error add in quadrature over the heads, and
 *     relu halves both (the error survives only where dot > 0), so the dot's relative error
 *     carries over to the logit unchanged.
 *   - The reference's own error: the dot products exact (integers, below), the rest in double,
 *     one float32 rounding of the stored logit (u^2 / 3).
 *   So e^2 = D 2^-2p / 6 + 2 u^2 / 3 + H u^2 / 6 + u^2 / 3 + u^2 / 3 (the kernel's float32 store
 *   and the reference's), and the check allows rel_rms <= 4 e (numerics/metrics.h's safety) and
 *   max_abs as metrics.h derives it. D = 128, H = 64, p = 23: e = 9.9 u, bound 2.4e-6 relative RMS.
 *   The model assumes weights of both signs (as DeepSeek-V3.2's are); a user's all-positive
 *   weights only raise the logit's RMS, so the bound stays an upper estimate.
 */
#ifndef TL_REFERENCE_INDEXER_H
#define TL_REFERENCE_INDEXER_H

#include <stdint.h>

#include "../contract/indexer.h"
#include "../numerics/metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint8_t *q;       /* [rows][H][D] E4M3FN codes */
    uint8_t *k;       /* [kv][D] E4M3FN codes */
    float *k_scale;   /* [kv] */
    float *w;         /* [rows][H] */
} tl_indexer_inputs;

/* Allocates the four arrays for shape s (zeroed). TL_EFAIL when out of memory (nothing left
 * allocated). Free with tl_indexer_inputs_free. */
int tl_indexer_inputs_alloc(const tl_indexer_shape *s, tl_indexer_inputs *in);
void tl_indexer_inputs_free(tl_indexer_inputs *in);

/* Fills allocated inputs as DeepSeek-V3.2's indexer sees them, seeded and deterministic whatever
 * the thread count: each K row is N(0, 1) with one outlier channel of 8 sigma, quantized to E4M3
 * with its own scale k_scale = amax / 448; each Q row of a head likewise with its scale q_s,
 * folded into the weight: w = N(0, 1) q_s / sqrt(H D) (weights of both signs). Never all zeros.
 * Cost: O(rows H D + kv D), OpenMP. */
int tl_indexer_inputs_make(const tl_indexer_shape *s, uint64_t seed, tl_indexer_inputs *in);

/* 1 when the inputs are inside the contract: no NaN code in Q or K, finite k_scale and w.
 * Otherwise 0 and *what names the first bad array ("q", "k", "kscale", "w"). Cost: one pass. */
int tl_indexer_inputs_valid(const tl_indexer_shape *s, const tl_indexer_inputs *in, const char **what);

/* The reference: OpenMP over blocks of 8 rows; each dot product exact (E4M3 values are integer
 * multiples of 2^-9, so a product is an integer times 2^-18 below 2^36 and D = 128 of them sum
 * to an integer below 2^43, which a double holds exactly whatever the order: OpenBLAS's DGEMM of
 * the integers, a 1024-position chunk of K against the block's H x 8 queries, one thread each),
 * times k_scale, relu, weight and head sum (in head order) in double, stored as float32; -inf
 * outside the window. logits [rows][kv]. TL_EUSAGE for a bad shape, TL_EFAIL when out of memory.
 * Cost: rows x the block's union window x H x D double multiply-adds (DGEMM: about 10 s for a
 * causal 4096 square at H = 64 on two cores here); 4 MB a thread of dot products. */
int tl_indexer_reference(const tl_indexer_shape *s, const tl_indexer_inputs *in, float *logits);

/* The naive loop: the formula as written, every value through numerics/formats.h's tl_decode,
 * every sum in double, one thread. Same output. Cost: rows x kv x H x D decodes: for checking the
 * reference on small shapes only. */
int tl_indexer_naive(const tl_indexer_shape *s, const tl_indexer_inputs *in, float *logits);

/* Accumulators of the derivation above: mantissa bits kept (truncating). */
#define TL_INDEXER_ACC_FP32 23
#define TL_INDEXER_ACC_HOPPER_FP8 13 /* Hopper's E4M3 wgmma accumulator ("FP22": 13 mantissa bits) */
/* The tolerance of logits computed with an accumulator of acc_bits mantissa bits (derivation
 * above) for D = s->dim and H = s->heads. TL_EUSAGE for acc_bits outside [8, 52]. */
int tl_indexer_tolerance(const tl_indexer_shape *s, int acc_bits, tl_tolerance *t);

#ifdef __cplusplus
}
#endif

#endif
