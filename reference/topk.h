/* reference/topk.h: the CPU reference of exact top-k selection (contract/topk.h), an independent
 * naive loop that checks it, and the seeded score distributions the checks draw from. */
#ifndef TL_REFERENCE_TOPK_H
#define TL_REFERENCE_TOPK_H

#include <stdint.h>

#include "../contract/topk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Score distributions, each adversarial in its own way:
 *   normal        N(0, 1): distinct values, the common case
 *   ties          values from 64 levels: every threshold falls in a run of equal scores
 *   few-distinct  values from 3 levels: most of a row ties at the threshold
 *   nan           normal with 1 in 8 NaN (both signs, random payloads) and -0 / +0
 *   inf           normal with 1 in 16 +inf and 1 in 16 -inf
 *   sorted        ascending along the row (the best at the end)
 *   reversed      descending along the row (the best at the start) */
typedef enum {
    TL_TOPK_DIST_NORMAL, TL_TOPK_DIST_TIES, TL_TOPK_DIST_FEW, TL_TOPK_DIST_NAN, TL_TOPK_DIST_INF,
    TL_TOPK_DIST_SORTED, TL_TOPK_DIST_REVERSED, TL_TOPK_NDISTS
} tl_topk_dist;
int tl_topk_dist_parse(const char *s, tl_topk_dist *out);
const char *tl_topk_dist_name(tl_topk_dist d);

/* Fills scores [B][n] in s->dtype (float32, or bf16 / f16 bits rounded to nearest even) from dist
 * and seed; deterministic whatever the thread count. Positions past a row's length are filled too
 * (with +inf: a kernel that reads them picks them, and the check sees it). Cost: O(B n), OpenMP. */
int tl_topk_scores_make(const tl_topk_shape *s, tl_topk_dist dist, uint64_t seed, void *scores);

/* The reference: per row (OpenMP over rows), the ranks (contract/topk.h) of its valid positions,
 * a quickselect of the k highest, then the contract's output order. idx [B][k] int32 (-1 past
 * count), count [B] int32. TL_EUSAGE for a bad shape, TL_EFAIL on allocation failure. Cost:
 * O(n) expected per row plus O(k log k); memory 8 bytes per position per thread. */
int tl_topk_reference(const tl_topk_shape *s, const void *scores, int32_t *idx, int32_t *count);

/* The naive loop: every row's ranks fully sorted (qsort), the first k taken. Same outputs. Cost:
 * O(n log n) per row, single-threaded: for checking the reference on small and medium rows. */
int tl_topk_naive(const tl_topk_shape *s, const void *scores, int32_t *idx, int32_t *count);

#ifdef __cplusplus
}
#endif

#endif
