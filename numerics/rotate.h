/* Orthogonal rotations for the FP8/FP4 error studies ("incoherent processing").
 *
 * tl_fwht: fast Walsh-Hadamard transform in place, scaled by 1/sqrt(n) so the transform is
 * orthogonal and its own inverse (applying it twice gives the input back, up to rounding).
 * n must be a power of two in [1, 2^30] (else TL_EUSAGE, x untouched). Cost: n log2 n adds.
 *
 * tl_random_orthogonal: an n x n Haar-distributed orthogonal matrix Q (row-major doubles): G with
 * N(0,1) entries from the seed, QR by LAPACKE (dgeqrf + dorgqr), then column j of Q multiplied by
 * sign(R_jj) so that the distribution is Haar and not biased by the QR's sign convention.
 * n in [1, 8192] (else TL_EUSAGE); LAPACK failure: TL_EFAIL. Cost: O(n^3), 2 n^2 doubles of memory.
 *
 * tl_rotate_rows: x is rows x n row-major; each row r becomes r Q (inverse = 0) or r Q^T
 * (inverse = 1), so applying both gives the rows back. Q is n x n row-major. Cost: rows * n^2.
 */
#ifndef TL_NUMERICS_ROTATE_H
#define TL_NUMERICS_ROTATE_H

#include <stddef.h>
#include <stdint.h>

int tl_fwht(float *x, size_t n);
int tl_fwht_double(double *x, size_t n);
/* tl_fwht on each of `rows` rows of length n. */
int tl_fwht_rows(float *x, size_t rows, size_t n);

int tl_random_orthogonal(size_t n, uint64_t seed, double *Q);
int tl_rotate_rows(const double *Q, size_t n, float *x, size_t rows, int inverse);

#endif
