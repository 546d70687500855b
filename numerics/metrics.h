/* Error metrics between a reference and an output, and the tolerance a check compares them with.
 *
 * Metrics (double precision sums over the n elements; d = out - ref):
 *   max_abs   max |d|
 *   max_rel   max |d| / max(|ref|, 1e-3 * ref_rms)  (the floor keeps near-zero refs from blowing up)
 *   rel_rms   sqrt(sum d^2 / sum ref^2)             (0 when both are 0; Inf when only ref is 0)
 *   nmse      rel_rms^2
 *   sqnr_db   10 log10(sum ref^2 / sum d^2), capped at 999 dB when d is exactly 0
 *   cosine    sum ref*out / sqrt(sum ref^2 * sum out^2)  (1 when both are all zero)
 *   ref_rms   sqrt(sum ref^2 / n)
 *   nan_count elements where out is NaN, or out is +-Inf while ref is finite. These are left out of
 *             the sums above and make every check fail. (ref NaN with out NaN is not counted: the
 *             input said NaN. A NaN ref with a non-NaN out is counted: the NaN was lost; so is an out that
 *             differs from a +-Inf ref.)
 *
 * Tolerance model (tl_tolerance_make). The check compares y = sum_{k<K} a_k b_k computed by a kernel
 * with a reference. Every RNE rounding to a format of unit roundoff u = 2^-(mbits+1) adds a relative
 * error of RMS at most u/sqrt(3) (uniform within half an ulp). With random signs these add in
 * quadrature, so the predicted relative RMS error of y is
 *   e^2 = [ref_same_inputs ? 0 : (u_a^2 + u_b^2) / 3]     inputs rounded only on the kernel side
 *       + K u_acc^2 / 6                                   sequential accumulation: the j-th partial
 *                                                         sum has RMS sqrt(j) sigma, so the rounding
 *                                                         errors sum to u^2 sigma^2 K^2 / 6 against a
 *                                                         result variance K sigma^2: grows as sqrt(K) u
 *       + K u_ref^2 / 6                                   the reference's own float32 accumulation
 *       + u_out^2 / 3                                     output stored in a narrower format
 * and the bounds are rel_rms <= safety * e (safety 4 unless given; e is floored at 2^-24) and
 * max_abs <= rel_rms bound * ref_rms * (1 + sqrt(2 ln n)) (the largest of n Gaussian errors is about
 * sqrt(2 ln n) RMS). Format kinds are tl_numfmt values or TL_TOL_FP32 (u = 2^-24).
 * Blocked or tree accumulation only lowers the K term, so the model is an upper estimate for it.
 */
#ifndef TL_NUMERICS_METRICS_H
#define TL_NUMERICS_METRICS_H

#include <stddef.h>

#include "formats.h"

typedef struct {
    double max_abs, max_rel, rel_rms, sqnr_db, nmse, cosine;
    size_t n, nan_count;
    double ref_rms;
    double worst_row; /* tl_compare_rows: max over rows of the row's error RMS / ref_rms; else -1 */
} tl_err_metrics;

/* Fills m. ref/out must not be NULL; n >= 1 (else TL_EUSAGE). Returns 0. Cost: one pass. */
int tl_compare(const float *ref, const float *out, size_t n, tl_err_metrics *m);
/* tl_compare, and worst_row over the rows of row_len elements (n a multiple of row_len >= 1, else
 * TL_EUSAGE; rows with a non-finite element count as NaN already). A wrong row (a token combined
 * with a wrong slot) hides in the whole array's rel_rms when there are many rows; not in this. */
int tl_compare_rows(const float *ref, const float *out, size_t n, size_t row_len, tl_err_metrics *m);

#define TL_TOL_FP32 (-1) /* format kind: IEEE float32 */

typedef struct {
    int a_fmt;           /* tl_numfmt of input a as the kernel reads it, or TL_TOL_FP32 */
    int b_fmt;           /* same for b */
    int acc_fmt;         /* accumulation: TL_TOL_FP32 (matrix cores), TL_NF_FP16, TL_NF_BF16 */
    int out_fmt;         /* output storage: TL_TOL_FP32, TL_NF_BF16, TL_NF_FP16, ... */
    long k;              /* reduction length K >= 1 */
    int ref_same_inputs; /* 1: the reference reads the same quantized a and b (the usual check) */
    double safety;       /* allowed multiple of the predicted RMS; <= 0 means 4 */
} tl_tol_spec;

typedef struct {
    double rel_rms;   /* bound on rel_rms */
    double predicted; /* the model's e, before the safety factor */
    int check_max_abs; /* 1: also bound max_abs as described above */
    double row_factor; /* > 0: also worst_row <= row_factor * rel_rms (when it was computed) */
} tl_tolerance;

/* Unit roundoff of a format kind (TL_TOL_FP32 -> 2^-24); -1 for an unknown kind. */
double tl_tol_unit_roundoff(int kind);
/* The model above. Bad spec (unknown kind, k < 1): TL_EUSAGE. */
int tl_tolerance_make(const tl_tol_spec *s, tl_tolerance *t);
/* The bound on the relative RMS error (safety * e), or -1 for a bad spec. */
double tl_tolerance_rel_rms(const tl_tol_spec *s);
/* 1 when m passes t: n > 0, nan_count == 0, rel_rms <= t->rel_rms and (if t->check_max_abs)
 * max_abs <= t->rel_rms * ref_rms * (1 + sqrt(2 ln max(n, 2))) and (if t->row_factor > 0 and
 * m->worst_row >= 0) worst_row <= t->row_factor * t->rel_rms. 0 otherwise. */
int tl_check_pass(const tl_err_metrics *m, const tl_tolerance *t);

#endif
