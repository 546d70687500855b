/* Seeded test data for quantization studies.
 *
 *   normal    N(0, 1)
 *   uniform   U(-sqrt 3, sqrt 3)   (unit variance)
 *   laplace   Laplace with unit variance (heavier tails)
 *   outliers  N(0, 1), then the data is viewed as rows of `row_len` channels and a few channels
 *             (max(1, row_len / 64), chosen from the seed) are multiplied by a factor drawn
 *             uniformly from [20, 100] -- the outlier channels of LLM activations that FP8
 *             attention studies (FlashAttention-3, seed 003) rotate away.
 * The same (dist, seed, n, row_len) always gives the same numbers. row_len only matters for
 * outliers (1..n; 0 means 128). Bad name: TL_EUSAGE. Cost: O(n).
 */
#ifndef TL_NUMERICS_DIST_H
#define TL_NUMERICS_DIST_H

#include <stddef.h>
#include <stdint.h>

typedef enum { TL_DIST_NORMAL, TL_DIST_UNIFORM, TL_DIST_LAPLACE, TL_DIST_OUTLIERS, TL_DIST_COUNT } tl_dist;

int tl_dist_parse(const char *name, tl_dist *out);
const char *tl_dist_name(tl_dist d);
int tl_dist_fill(tl_dist d, uint64_t seed, float *x, size_t n, size_t row_len);

#endif
