/* Seeded test distributions (see dist.h). */
#include "dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"

static const char *NAMES[TL_DIST_COUNT] = {"normal", "uniform", "laplace", "outliers"};

int tl_dist_parse(const char *name, tl_dist *out)
{
    for (int i = 0; i < TL_DIST_COUNT; i++)
        if (name && strcmp(name, NAMES[i]) == 0) {
            *out = (tl_dist)i;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--dist", "unknown distribution '%s' (normal, uniform, laplace or outliers)",
                    name ? name : "");
}

const char *tl_dist_name(tl_dist d) { return (unsigned)d < TL_DIST_COUNT ? NAMES[d] : "?"; }

int tl_dist_fill(tl_dist d, uint64_t seed, float *x, size_t n, size_t row_len)
{
    if ((unsigned)d >= TL_DIST_COUNT) return tl_error(TL_EUSAGE, "dist", "unknown distribution");
    if (n && !x) return tl_error(TL_EUSAGE, "dist", "NULL array");
    tl_rng rng;
    tl_rng_seed(&rng, seed);
    switch (d) {
    case TL_DIST_UNIFORM:
        for (size_t i = 0; i < n; i++) x[i] = (float)((2.0 * tl_rng_uniform(&rng) - 1.0) * 1.7320508075688772);
        break;
    case TL_DIST_LAPLACE:
        for (size_t i = 0; i < n; i++) x[i] = (float)tl_rng_laplace(&rng);
        break;
    default:
        for (size_t i = 0; i < n; i++) x[i] = (float)tl_rng_normal(&rng);
        break;
    }
    if (d != TL_DIST_OUTLIERS || n == 0) return TL_OK;
    if (row_len == 0) row_len = 128;
    if (row_len > n) row_len = n;
    size_t count = row_len / 64 > 0 ? row_len / 64 : 1;
    double *factor = calloc(row_len, sizeof *factor);
    if (!factor) return tl_error(TL_EFAIL, "dist", "out of memory");
    for (size_t c = 0; c < count; c++) {
        size_t ch;
        do ch = (size_t)tl_rng_below(&rng, row_len);
        while (factor[ch] != 0);
        factor[ch] = 20.0 + 80.0 * tl_rng_uniform(&rng);
    }
    for (size_t i = 0; i < n; i++) {
        double f = factor[i % row_len];
        if (f != 0) x[i] = (float)(x[i] * f);
    }
    free(factor);
    return TL_OK;
}
