/* Walsh-Hadamard transforms and Haar-random orthogonal matrices (see rotate.h). */
#include "rotate.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>

#include "../core/tl.h"

static int pow2_ok(size_t n) { return n >= 1 && n <= ((size_t)1 << 30) && (n & (n - 1)) == 0; }

int tl_fwht(float *x, size_t n)
{
    if (!pow2_ok(n)) return tl_error(TL_EUSAGE, "hadamard", "size %zu is not a power of two in [1, 2^30]", n);
    if (!x) return tl_error(TL_EUSAGE, "hadamard", "NULL array");
    for (size_t h = 1; h < n; h *= 2)
        for (size_t i = 0; i < n; i += 2 * h)
            for (size_t j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    float s = (float)(1.0 / sqrt((double)n));
    for (size_t i = 0; i < n; i++) x[i] *= s;
    return TL_OK;
}

int tl_fwht_double(double *x, size_t n)
{
    if (!pow2_ok(n)) return tl_error(TL_EUSAGE, "hadamard", "size %zu is not a power of two in [1, 2^30]", n);
    if (!x) return tl_error(TL_EUSAGE, "hadamard", "NULL array");
    for (size_t h = 1; h < n; h *= 2)
        for (size_t i = 0; i < n; i += 2 * h)
            for (size_t j = i; j < i + h; j++) {
                double a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    double s = 1.0 / sqrt((double)n);
    for (size_t i = 0; i < n; i++) x[i] *= s;
    return TL_OK;
}

int tl_fwht_rows(float *x, size_t rows, size_t n)
{
    if (!pow2_ok(n)) return tl_error(TL_EUSAGE, "hadamard", "row length %zu is not a power of two", n);
    for (size_t r = 0; r < rows; r++) tl_fwht(x + r * n, n);
    return TL_OK;
}

int tl_random_orthogonal(size_t n, uint64_t seed, double *Q)
{
    if (n < 1 || n > 8192) return tl_error(TL_EUSAGE, "random rotation", "size %zu is not in [1, 8192]", n);
    if (!Q) return tl_error(TL_EUSAGE, "random rotation", "NULL matrix");
    double *tau = malloc(n * sizeof *tau), *sign = malloc(n * sizeof *sign);
    if (!tau || !sign) {
        free(tau), free(sign);
        return tl_error(TL_EFAIL, "random rotation", "out of memory");
    }
    tl_rng rng;
    tl_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * n; i++) Q[i] = tl_rng_normal(&rng);
    lapack_int ln = (lapack_int)n;
    lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, ln, ln, Q, ln, tau);
    if (info == 0) {
        for (size_t j = 0; j < n; j++) sign[j] = Q[j * n + j] < 0 ? -1.0 : 1.0;
        info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, ln, ln, ln, Q, ln, tau);
    }
    if (info == 0)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) Q[i * n + j] *= sign[j];
    free(tau);
    free(sign);
    if (info != 0) return tl_error(TL_EFAIL, "random rotation", "LAPACK QR failed (info %d)", (int)info);
    return TL_OK;
}

int tl_rotate_rows(const double *Q, size_t n, float *x, size_t rows, int inverse)
{
    if (!Q || !x || n < 1) return tl_error(TL_EUSAGE, "rotate", "NULL matrix or empty rows");
    double *acc = malloc(n * sizeof *acc);
    if (!acc) return tl_error(TL_EFAIL, "rotate", "out of memory");
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        for (size_t j = 0; j < n; j++) acc[j] = 0;
        if (!inverse) { /* y_j = sum_i x_i Q[i][j] */
            for (size_t i = 0; i < n; i++) {
                double xi = row[i];
                const double *q = Q + i * n;
                for (size_t j = 0; j < n; j++) acc[j] += xi * q[j];
            }
        } else { /* y_j = sum_i x_i Q[j][i] */
            for (size_t j = 0; j < n; j++) {
                const double *q = Q + j * n;
                double s = 0;
                for (size_t i = 0; i < n; i++) s += row[i] * q[i];
                acc[j] = s;
            }
        }
        for (size_t j = 0; j < n; j++) row[j] = (float)acc[j];
    }
    free(acc);
    return TL_OK;
}
