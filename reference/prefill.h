/* reference/prefill.h: the CPU reference of causal prefill attention (contract/prefill.h): the
 * reference on the kernel's inputs (bf16 bits or FP8 codes x block scales, decoded exactly), the
 * reference on unquantized float32 inputs (what the error study compares against), an independent
 * naive loop, seeded inputs, and the FP8/BF16 error study with an optional Q/K rotation.
 *
 * Numerics: inputs decoded exactly into double; scores, exps, sums and the PV accumulation in
 * double; one float32 rounding of each O and LSE element. O is returned as float32 [seq][H][dv]
 * (the kernel stores bf16: a check rounds this O to bf16 or allows for it).
 * Cost: seq^2 / 2 x H x (dqk + dv) multiply-adds (causal), OpenMP over (head, block of 64 query
 * rows), plus 8 bytes x (|Q| + |K| + |V|) of memory for the decoded inputs.
 */
#ifndef TL_REFERENCE_PREFILL_H
#define TL_REFERENCE_PREFILL_H

#include <stdint.h>

#include "../contract/prefill.h"
#include "../numerics/metrics.h"
#include "../numerics/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Seeded inputs (tl_prefill_make), float32, never all zero:
 *   normal       Q, K, V ~ N(0, 1)
 *   outliers     as normal, then in each KV head max(1, dqk / 32) K channels (chosen from the seed,
 *                the same for every token, as in real KV caches) are multiplied by a factor drawn
 *                uniformly from [10, 100]
 *   qk-outliers  as outliers, and the same channels of the query heads reading that KV head are
 *                multiplied by their own factors from [10, 100]: the "massive values" RoPE models
 *                carry in the same low-frequency dims of Q and K, not V (Jin et al., ICML 2025,
 *                arXiv 2502.01563). A rotation of Q and K pays here: a score's quantization error
 *                grows with sum_d q_d^2 k_d^2, which channels large in both Q and K dominate, and a
 *                rotation spreads them over all dqk channels (about dqk / outlier channels less);
 *                with K's outliers alone that sum, and the error, do not change. */
typedef enum {
    TL_PREFILL_DIST_NORMAL,
    TL_PREFILL_DIST_OUTLIERS,
    TL_PREFILL_DIST_QK_OUTLIERS,
    TL_PREFILL_NDISTS
} tl_prefill_dist;
int tl_prefill_dist_parse(const char *s, tl_prefill_dist *out);
const char *tl_prefill_dist_name(tl_prefill_dist d);

/* Fills q, k, v (tl_prefill_{q,k,v}_elems of a checked shape). Same (shape, dist, seed), same data. */
void tl_prefill_make(const tl_prefill_shape *s, tl_prefill_dist d, uint64_t seed, float *q, float *k, float *v);

/* The kernel's inputs (layouts: contract/prefill.h; the shape's dtype says which). */
typedef struct {
    const void *q, *k, *v;                     /* uint16 bf16 bits or uint8 E4M3FN codes */
    const float *q_scale, *k_scale, *v_scale;  /* fp8 only: [heads][nblk] */
} tl_prefill_inputs;

/* The reference on the kernel's inputs: o [seq][H][dv], lse [H][seq] (float32, both written in
 * full). TL_EUSAGE for a bad shape or a missing pointer; TL_EFAIL out of memory. */
int tl_prefill_reference(const tl_prefill_shape *s, const tl_prefill_inputs *in, float *o, float *lse);
/* The same on the query rows of the ranges [lo[r], hi[r]) (r < nr; within [0, seq)) only: o and lse
 * are the full arrays, the other rows are not written. Cost: the rows' keys x H x (dqk + dv)
 * multiply-adds (a causal row i has i + 1 keys), plus decoding all of Q, K, V. */
int tl_prefill_reference_rows(const tl_prefill_shape *s, const tl_prefill_inputs *in, int nr, const long *lo,
                              const long *hi, float *o, float *lse);
/* The same on unquantized float32 inputs (no rounding of Q, K, V). */
int tl_prefill_reference_f32(const tl_prefill_shape *s, const float *q, const float *k, const float *v, float *o,
                             float *lse);
/* The engine of both: exact double inputs, online softmax over key blocks of 128 (as the kernel). */
int tl_prefill_reference_f64(const tl_prefill_shape *s, const double *q, const double *k, const double *v, float *o,
                             float *lse);
/* The engine with P rounded by the FP8 kernel's rule (contract/prefill.h: encode(P x 448) relative to
 * the running max of each 128-key block, as a kernel with 128-key tiles has it) before the PV
 * product when round_p is 1; the row sum keeps the unrounded P. round_p 0: tl_prefill_reference_f64. */
int tl_prefill_reference_f64_p(const tl_prefill_shape *s, const double *q, const double *k, const double *v,
                               int round_p, float *o, float *lse);
/* Naive loop for tests: one thread, every score of a row, then its max, sum and output (two passes),
 * on double inputs. Same contract as above. Cost as above, single-threaded. */
int tl_prefill_naive(const tl_prefill_shape *s, const double *q, const double *k, const double *v, float *o,
                     float *lse);

/* Rotates the q.k dim of x [rows][dqk] (rows = seq x heads) by one orthogonal matrix R, the same for
 * every row: hadamard, R = block-diagonal Walsh-Hadamard over the binary pieces of dqk (192 = 128 +
 * 64; each piece scaled to be orthogonal); random, R = tl_random_orthogonal(dqk, seed). Rotating Q and
 * K by the same R leaves every q.k unchanged (R R^T = I). none: nothing. TL_EUSAGE/TL_EFAIL as
 * numerics/rotate.h. Cost: rows x dqk log dqk (hadamard), rows x dqk^2 + dqk^3 (random). */
int tl_prefill_rotate(tl_rotation rot, uint64_t seed, float *x, size_t rows, int dqk);

/* The error study. One row per (format, rotation): format "bf16" (Q, K, V rounded to bf16), "fp8"
 * (E4M3FN, per-128-row-block-per-head scales) or "fp8+p8" (the same, and P rounded by the FP8 kernel's
 * rule: tl_prefill_reference_f64_p); rotation none, then (when rot != none) rot, applied to Q and K
 * before quantizing. Each row's metrics compare the reference's float32 O on the
 * quantized inputs with the reference on the unquantized float32 inputs (the bf16 rounding of the
 * stored O, 2^-9 / sqrt 3 ~ 1.1e-3 relative RMS, is left out of both). */
typedef struct {
    const char *format;   /* "bf16" | "fp8" */
    tl_rotation rot;
    tl_err_metrics m;
} tl_prefill_err_row;
#define TL_PREFILL_STUDY_FORMATS 3
#define TL_PREFILL_STUDY_MAX_ROWS (2 * TL_PREFILL_STUDY_FORMATS)
/* Fills rows[0 .. *nrows) (3 rows for rot none, 6 otherwise): bf16, fp8, fp8+p8 without rotation,
 * then the same with rot. q, k, v are unquantized float32 and not modified. TL_EUSAGE for a bad shape or
 * non-finite inputs, TL_EFAIL out of memory. Cost: 4 (or 7) references. */
int tl_prefill_error_study(const tl_prefill_shape *s, const float *q, const float *k, const float *v,
                           tl_rotation rot, uint64_t seed, tl_prefill_err_row *rows, int *nrows);

#ifdef __cplusplus
}
#endif

#endif
