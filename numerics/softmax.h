/* numerics/softmax.h: how far a split-KV attention decode (an online softmax in float32, shards
 * merged by their log-sum-exps; contract/decode.h) may be from a one-pass reference in double, on
 * the same decoded inputs. Derived from the formats and the row length, not fitted.
 *
 * Notation: u = 2^-24 (float32 round to nearest), RMS of one rounding u / sqrt(3); scores
 * s_j = scale (q . k_j), softmax weights w_j = exp(s_j - LSE), O = sum_j w_j v_j, n keys a row.
 *
 * The output O. An absolute error d_j in score s_j (or a relative error d_j in its exp) changes O
 * by sum_j w_j d_j (v_j - O); with errors and values of random sign its RMS is rms(d) sigma_v
 * sqrt(sum w_j^2), and |O| is about sigma_v sqrt(sum w_j^2) itself: so the score error, in
 * natural-log units, is O's relative error. The terms:
 *   dot     q . k over D dims (bf16 x bf16 or bf16 x decoded-FP8 products, exact in float32),
 *           accumulated in float32 by the matrix cores, which truncate (p = 23 mantissa bits kept,
 *           RMS 2^-p / sqrt(3) per addition; reference/indexer.h): relative D 2^-2p / 6 of the
 *           dot, so absolute s_rms^2 D 2^-2p / 6 with s_rms the RMS of the scores;
 *   scale   the softmax scale and the FP8 per-token scale: two float32 roundings of s: s_rms^2 2u^2/3;
 *   exp     exp(s_j - m) in float32, RMS e_exp (2u: the approximate exp2 of the GPUs, 2^-22.5 at
 *           worst, and the subtraction);
 *   rescale every rescaling of the running sums by exp(m_old - m_new) multiplies the accumulator
 *           and the denominator by the same rounded factor; the keys added before and after it
 *           are weighed differently by at most u / sqrt(3) each time, at most once a tile of 16
 *           keys: (n / 16) u^2 / 3;
 *   sum     the P V accumulation over n keys in float32, u^2 n / 6 (the sequential model of
 *           numerics/metrics.h; blocked sums only lower it);
 *   merge   the shards' partial outputs stored in float32 (u^2 / 3), their lse_i stored in float32
 *           (an absolute error |lse| u / sqrt(3), i.e. relative on the shard's weight: lse_max^2
 *           u^2 / 3), the weight's exp and division (2 u^2), the sum over `shards` (shards u^2 / 6);
 *   store   O stored in float32, by the kernel and by the reference: 2 u^2 / 3.
 *   P.V     (pv_bits > 0) each weight, times the FP8 value scale, enters the P.V matrix product
 *           carried in pv_bits of mantissa (bf16 hi + bf16 lo: the lo term's rounding, at most
 *           2^-16 of the product): a relative error of each term w_j v_j, RMS 2^-pv_bits / sqrt(3),
 *           which is O's relative error at worst (a row of one key: O = v x scale): 2^-2pv / 3.
 * The bound: rel_rms <= 4 e (numerics/metrics.h's safety) and max_abs as metrics.h derives it.
 *
 * The LSE. An absolute error: the score terms (dot, scale) as above; the denominator's sum of n
 * positive terms (relative RMS u sqrt(n) / 3: partial sums grow linearly) and its log (u); the
 * rescalings ((n / 16) u^2 / 3); lse_max u / sqrt(3) for every float32 store of an lse (the
 * shards', the merged one, the reference's); the merge's log S (u). Over the array the check
 * compares relative RMS, so the bound divides by the reference's LSE RMS (lse_rms); the LSEs are
 * of one magnitude (a few nats), so metrics.h's max_abs bound holds for them too.
 *
 * The same model with only the merge and store terms bounds the sharded reference (double
 * shards, float32 partials, the contract's float32 merge) against the one-pass reference.
 */
#ifndef TL_NUMERICS_SOFTMAX_H
#define TL_NUMERICS_SOFTMAX_H

#include "metrics.h"

typedef struct {
    int qk_dim;        /* D of the dot products */
    long keys;         /* n: the most keys one row has (>= 1; 0 is taken as 1) */
    int shards;        /* shards merged (1: no merge) */
    int acc_bits;      /* mantissa bits the dot's accumulator keeps (23: float32 matrix cores);
                          0: the dot, scale, exp, rescale and sum terms are left out (a reference
                          in double with float32 partials: only the merge and the stores) */
    double s_rms;      /* RMS of the scaled scores over the counted keys (the reference measures it) */
    double lse_rms;    /* RMS of the reference's finite LSEs */
    double lse_max;    /* largest |LSE| of a shard or a row */
    int pv_bits;       /* mantissa bits the weights (x value scale) keep into P.V: 16 for bf16 hi + lo
                          (kernels/decode.h); 0: exact (float32 or better, no term) */
} tl_softmax_tol_spec;
#define TL_SOFTMAX_PV_BF16X2 16

#define TL_SOFTMAX_ACC_FP32 23
/* The tolerances of O (relative RMS over the whole array) and of LSE. TL_EUSAGE for a bad spec
 * (qk_dim < 1, shards < 1, acc_bits outside {0} U [8, 52], a negative or non-finite RMS). The
 * predicted e of each is in t->predicted. Cost: O(1). */
int tl_softmax_tolerance(const tl_softmax_tol_spec *s, tl_tolerance *o, tl_tolerance *lse);

#endif
