/* reference/decode.h: the CPU reference of split-KV decode attention (contract/decode.h): the
 * one-pass reference, the sharded reference (the contract's shards and merge, as a kernel runs
 * them), an independent naive loop, and the seeded inputs. The tolerance a kernel is held to:
 * numerics/softmax.h.
 *
 * Numerics: every cache element and query value decoded exactly (bf16, or E4M3FN times its float32
 * scale: exact in double); scores, exps and sums in double; one float32 rounding of each stored
 * O and LSE.
 */
#ifndef TL_REFERENCE_DECODE_H
#define TL_REFERENCE_DECODE_H

#include <stdint.h>

#include "../contract/decode.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the inputs are drawn (tl_decode_make):
 *   normal    q, K, V ~ N(0, 1) (scores about N(0, 1) after the 1/sqrt(D) scale); top-k lists of
 *             distinct random positions the query sees (all of them, shuffled, then -1 when it sees
 *             fewer than k), which fall in the window as often as chance has it
 *   peaked    q x 3: scores about N(0, 9), a softmax dominated by a few keys
 *   outliers  one K channel in 32 (and of the latent's) x 20: the outlier channels FP8 studies rotate
 *   edges     normal values; top-k lists full of edge cases: -1, window positions, repeats */
typedef enum { TL_DECODE_DIST_NORMAL, TL_DECODE_DIST_PEAKED, TL_DECODE_DIST_OUTLIERS, TL_DECODE_DIST_EDGES,
               TL_DECODE_NDISTS } tl_decode_dist;
int tl_decode_dist_parse(const char *s, tl_decode_dist *out);
const char *tl_decode_dist_name(tl_decode_dist d);

/* The arrays of one call, owned (layouts: contract/decode.h). */
typedef struct {
    uint16_t *q;
    void *k, *v;                 /* v NULL for dual-scope */
    float *k_scale, *v_scale;    /* fp8 only */
    int32_t *block_table;        /* paged */
    int32_t *topk;               /* dual-scope with k > 0 */
} tl_decode_buffers;

/* Allocates the arrays shape s needs (zeroed). TL_EUSAGE for a bad shape; TL_EFAIL out of memory
 * (nothing left allocated). Free with tl_decode_buffers_free. */
int tl_decode_buffers_alloc(const tl_decode_shape *s, tl_decode_buffers *b);
void tl_decode_buffers_free(tl_decode_buffers *b);
/* The buffers as the contract's inputs (a view). */
tl_decode_inputs tl_decode_buffers_view(const tl_decode_buffers *b);

/* Fills allocated buffers, seeded and deterministic whatever the thread count: the block table a
 * random permutation of the pages over the requests' blocks (-1 past a request's last block);
 * values by `dist`; an fp8 cache is the bf16 cache of the same seed quantized per (position, KV
 * head) (paged) or per position (dual-scope) with scale amax / 448, so that the two compare.
 * Never all zeros. Cost: O(cache + Q + top-k), OpenMP. */
int tl_decode_make(const tl_decode_shape *s, tl_decode_dist dist, uint64_t seed, tl_decode_buffers *b);

/* Only the top-k lists of tl_decode_make (dual-scope, k > 0; the same lists for the same seed):
 * topk [rows][k]. For pictures of long contexts whose cache is not needed. */
void tl_decode_make_topk(const tl_decode_shape *s, tl_decode_dist dist, uint64_t seed, int32_t *topk);

/* What the reference saw, for the tolerance (numerics/softmax.h). */
typedef struct {
    double s_rms;     /* RMS of the scaled scores over every counted (key, head) */
    double lse_max;   /* largest |LSE| (of a row, or of a shard in the sharded reference) */
    long max_keys;    /* the most keys one row counts */
} tl_decode_stats;

/* The one-pass reference: OpenMP over (request, KV head) (paged: each position's K and V decoded
 * once for the gqa heads) or over query rows (dual-scope: the row's counted positions decoded once
 * in chunks for all H heads); an online softmax in double per head. o [rows][H][dv], lse [rows][H];
 * stats may be NULL. TL_EUSAGE for a bad shape or inputs (tl_decode_inputs_check), TL_EFAIL out of
 * memory. Cost: sum of keys x H x (qk + dv) double multiply-adds. */
int tl_decode_reference(const tl_decode_shape *s, const tl_decode_inputs *in, float *o, float *lse,
                        tl_decode_stats *stats);

/* The sharded reference: each row's slots cut by tl_decode_shard_range into `shards`
 * (1..TL_DECODE_MAX_SHARDS), each shard an online softmax in double over its slots (the top-k
 * entries counted by the contract's definition, tl_decode_topk_counts), its partial stored in
 * float32 (o = 0, lse = -inf when it counts no key), then merged by tl_decode_merge in float32,
 * as a kernel does. stats->lse_max is the largest |lse| of a shard. Cost: the reference's, plus
 * O(k^2) per dual-scope row for the definition. */
int tl_decode_reference_sharded(const tl_decode_shape *s, const tl_decode_inputs *in, int shards, float *o, float *lse,
                                tl_decode_stats *stats);

/* The naive loop: per (row, head) the full score row over every position the row may see (the
 * paged positions through the block table; the dual-scope positions below `visible`, -inf where
 * the position is in neither scope: a mask built from the lists, whatever their order and
 * repeats), every value through numerics/formats.h's tl_decode, then max, exp, sum in double.
 * One thread. Cost: positions x H x (qk + dv) decodes: small shapes only. */
int tl_decode_naive(const tl_decode_shape *s, const tl_decode_inputs *in, float *o, float *lse);

#ifdef __cplusplus
}
#endif

#endif
