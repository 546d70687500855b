/* contract/decode.h: split-KV decode attention (seed 000: the paged-attention decode of Table 2 and
 * Figure 5; "CSA dual-scope decode", Figure 12 right, Table 4, appendix A3): what the kernels, the
 * reference and the model of `decode` agree on.
 *
 * The function. For each query row r (one decode token of one request) and each query head h:
 *     s_j  = scale * (q[r][h][:] . K_j[:])                 over the row's key set J(r)
 *     O    = sum_j exp(s_j - LSE) V_j[:]                    (float32 [dv])
 *     LSE  = log sum_j exp(s_j)                             (natural log, float32)
 * and for an empty key set (length 0, every key masked): O = 0 and LSE = -inf, never NaN.
 * K_j and V_j are the cache's codes decoded exactly to float (bf16, or E4M3FN OCP: bias 7, max 448,
 * no Inf, 0x7F/0xFF NaN) times their float32 scale; q is bf16, decoded exactly.
 *
 * Two kinds, one split-KV engine:
 *   paged       (paged GQA decode, Table 2) row r = request b; H = kv_heads x gqa query heads, head h
 *               reading KV head h / gqa; dims 128 / 128; J(b) = positions [0, lens[b]) through the
 *               block table: position p of request b lives in page block_table[b][p / 16], slot p % 16.
 *   dual-scope  (CSA / DSA MLA sparse decode) T query tokens per request (multi-token prediction),
 *               row r = (b, t) with r = b T + t; H heads share one latent KV per position; q . k over
 *               576 = 512 + 64 rope dims, V = the first 512 dims of the same latent row. Query t of
 *               request b sees positions < visible(b, t) = max(0, lens[b] - T + t + 1). Its key set is
 *               the union of two scopes:
 *                 window  the last W positions it sees: [max(0, visible - W), visible)
 *                 top-k   topk[b][t][i] for i < k, each counted when 0 <= idx < visible and idx is
 *                         neither in the window nor equal to an earlier entry (lower i) of the same
 *                         list: a position is counted once. -1 means none. Indices < -1 or >= lens[b]
 *                         are refused by tl_decode_inputs_check; kernels and the reference treat any
 *                         index outside [0, visible) as none (they never read out of bounds).
 *
 * Layouts (row-major; bf16 as uint16 bits, FP8 as uint8 E4M3FN codes):
 *   paged       Q [B][H][128] bf16
 *               K, V pools [pages][16][kv_heads][128] bf16 or fp8 (tl_decode_kv)
 *               k_scale, v_scale [pages][16][kv_heads] float32 (fp8 only; NULL for bf16)
 *               block_table [B][max_blocks] int32 (entries past a request's last block: not read)
 *   dual-scope  Q [B][T][H][576] bf16
 *               KV latent [B][max_len][576] bf16 or fp8; k_scale [B][max_len] float32 (fp8 only;
 *               the same scale for the key and the value dims); v, v_scale: NULL
 *               topk [B][T][k] int32 (k = 0: no sparse scope; W = 0: no window)
 *   both        lens [B] int32 (in the shape), O [rows][H][dv] float32, LSE [rows][H] float32, with
 *               rows = tl_decode_rows: B (paged: row b) or B x T (dual-scope: row b x T + t, query
 *               token t of request b). Row-major, dual-scope's [rows] is the same memory as [B][T];
 *               `run decode` writes its .npy files in that shape: O [B][H][dv] and LSE [B][H]
 *               (paged), O [B][T][H][dv] and LSE [B][T][H] (dual-scope), as Q is given.
 *
 * Split-KV. A row's keys are a stream of slots, cut into `shards` contiguous ranges of whole granules
 * (tl_decode_shard_range, the one definition every part uses); shard s of row r runs an online
 * softmax over its slots and writes a partial output o_s [dv] (float32, normalized by its own sum)
 * and lse_s (natural log of its sum of exp(s_j)); a shard with no counted key writes o_s = 0 and
 * lse_s = -inf. The merge (tl_decode_merge, below) combines the shards into the one-pass answer.
 *   paged       slots = positions 0 .. lens[b] - 1; granule = a page (16 positions)
 *   dual-scope  slots = the window's positions (oldest first), then the k top-k entries in list
 *               order (a slot that does not count is skipped); granule TL_DECODE_DS_GRANULE slots
 * With shards = 1 the kernel writes O and LSE directly (one launch); otherwise a second launch
 * merges the partials [rows][H][shards][dv] and [rows][H][shards] (tl_decode_partial_bytes).
 *
 * Work-groups (the model charges the same): paged, one per (request, KV head, shard), serving the
 * gqa query heads of that KV head from one read of its pages; dual-scope, one per (request, query
 * token, block of 32 heads (16 when 32 does not divide H), shard) (the latent rows are read and
 * dequantized once into shared memory / LDS and used by the block's heads; 32 heads x 512 float32
 * accumulators is what a work-group's registers hold). tl_decode_auto_shards picks shards: one when the work-groups fill
 * the GPU, more at small batch.
 * Plain C: host, simulator and device code include it alike (TL_DECODE_FN functions are
 * __host__ __device__ under nvcc and HIP).
 */
#ifndef TL_CONTRACT_DECODE_H
#define TL_CONTRACT_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "../numerics/codes.h"

#if defined(__CUDACC__)
#define TL_DECODE_FN static __host__ __device__ inline
#define tl_decode_expf_ expf
#define tl_decode_logf_ logf
#elif defined(__HIP__)
#define TL_DECODE_FN static __attribute__((host, device)) inline
#define tl_decode_expf_ __builtin_expf
#define tl_decode_logf_ __builtin_logf
#else
#include <math.h>
#define TL_DECODE_FN static inline
#define tl_decode_expf_ expf
#define tl_decode_logf_ logf
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TL_DECODE_PAGED, TL_DECODE_DUAL_SCOPE, TL_DECODE_NKINDS } tl_decode_kind;
typedef enum { TL_DECODE_KV_BF16, TL_DECODE_KV_FP8, TL_DECODE_NKV } tl_decode_kv;

#define TL_DECODE_PAGE 16                /* positions per page of the paged cache (the block size) */
#define TL_DECODE_PAGED_DIM 128          /* paged: q.k and value dims */
#define TL_DECODE_MLA_QK_DIM 576         /* dual-scope: q.k over 512 latent + 64 rope dims */
#define TL_DECODE_MLA_V_DIM 512          /* dual-scope: values are the first 512 dims of the latent row */
#define TL_DECODE_DS_GRANULE 32          /* dual-scope slots per shard granule (a KV tile) */
#define TL_DECODE_MAX_BATCH 1024
#define TL_DECODE_MAX_LEN (1L << 20)     /* positions of one request: 1M */
#define TL_DECODE_MAX_KV_HEADS 16
#define TL_DECODE_MAX_GQA 16
#define TL_DECODE_MAX_HEADS 128          /* dual-scope H: 16..128, a multiple of 16 */
#define TL_DECODE_MAX_MTP 4              /* dual-scope T */
#define TL_DECODE_MAX_TOPK 4096          /* dual-scope k (512 DeepSeek-V4 CSA, 2048 DeepSeek-V3.2) */
#define TL_DECODE_MAX_WINDOW (1L << 20)
#define TL_DECODE_MAX_SHARDS 256
#define TL_DECODE_MAX_POOL_ELEMS (1LL << 32) /* paged: pages x 16 x kv_heads x 128 elements of each pool */
#define TL_DECODE_MAX_LATENT_ELEMS (1LL << 33) /* dual-scope: B x max_len x 576 */

typedef struct {
    tl_decode_kind kind;
    tl_decode_kv kv;       /* the cache's element format */
    int batch;             /* B: 1..TL_DECODE_MAX_BATCH */
    const int32_t *lens;   /* [B] positions of each request in the cache (0 allowed); required */
    float scale;           /* softmax scale; 0: 1 / sqrt(q.k dim) (1/sqrt(128), 1/sqrt(576)) */
    /* paged */
    int kv_heads;          /* 1..16 */
    int gqa;               /* query heads per KV head, 1..16 */
    int max_blocks;        /* block table row length: at least ceil(max lens / 16) */
    long pages;            /* pages in each pool, >= 1 */
    /* dual-scope */
    int heads;             /* H: 16..128, a multiple of 16 (128 DeepSeek-V3.2, 64, 16) */
    int mtp;               /* T query tokens per request, 1..4 */
    long max_len;          /* the latent cache's positions per request (its stride): >= max lens */
    long window;           /* W >= 0 (128 by default; 0: no window scope) */
    int topk;              /* k, 0..TL_DECODE_MAX_TOPK (0: no sparse scope) */
} tl_decode_shape;

/* The inputs of one call (layouts above); none may alias an output. */
typedef struct {
    const uint16_t *q;        /* bf16 bits */
    const void *k, *v;        /* paged: the K and V pools; dual-scope: k = the latent cache, v = NULL.
                                 uint16 bf16 bits or uint8 E4M3FN codes (shape's kv) */
    const float *k_scale, *v_scale; /* fp8 only (dual-scope: k_scale only); finite */
    const int32_t *block_table;     /* paged */
    const int32_t *topk;            /* dual-scope, when k > 0 */
} tl_decode_inputs;

/* "paged" | "dual-scope"; "bf16" | "fp8". TL_EUSAGE with a message otherwise. */
int tl_decode_kind_parse(const char *s, tl_decode_kind *out);
const char *tl_decode_kind_name(tl_decode_kind k);
int tl_decode_kv_parse(const char *s, tl_decode_kv *out);
const char *tl_decode_kv_name(tl_decode_kv k);

/* Checks a shape: the ranges above, lens given and each within [0, max_blocks x 16] (paged) or
 * [0, max_len] (dual-scope), the pools and the latent cache within their element limits.
 * TL_EUSAGE with a message naming the bad value. Cost: O(B). */
int tl_decode_shape_check(const tl_decode_shape *s);
/* Checks the inputs' values against a checked shape: every block-table entry a request uses in
 * [0, pages); every top-k index -1 or in [0, lens[b]); scales finite; the pointers the kind needs
 * given. TL_EUSAGE naming the first bad element. Cost: one pass over the table, indices and scales. */
int tl_decode_inputs_check(const tl_decode_shape *s, const tl_decode_inputs *in);

/* ---- sizes ---- */
/* Query rows: B (paged) or B x T (dual-scope). */
static inline long tl_decode_rows(const tl_decode_shape *s)
{
    return s->kind == TL_DECODE_PAGED ? (long)s->batch : (long)s->batch * s->mtp;
}
/* Query heads of a row: kv_heads x gqa, or H. */
static inline int tl_decode_heads(const tl_decode_shape *s)
{
    return s->kind == TL_DECODE_PAGED ? s->kv_heads * s->gqa : s->heads;
}
static inline int tl_decode_qk_dim(const tl_decode_shape *s)
{
    return s->kind == TL_DECODE_PAGED ? TL_DECODE_PAGED_DIM : TL_DECODE_MLA_QK_DIM;
}
static inline int tl_decode_v_dim(const tl_decode_shape *s)
{
    return s->kind == TL_DECODE_PAGED ? TL_DECODE_PAGED_DIM : TL_DECODE_MLA_V_DIM;
}
/* The softmax scale in use: s->scale, or 1 / sqrt(q.k dim) (float32) when it is 0. The launcher
 * passes this value to the kernels. */
float tl_decode_scale(const tl_decode_shape *s);
/* Bytes of one cache element. */
static inline int tl_decode_kv_bytes_per_elem(const tl_decode_shape *s) { return s->kv == TL_DECODE_KV_FP8 ? 1 : 2; }
/* Elements of each array (layouts above). */
static inline size_t tl_decode_q_elems(const tl_decode_shape *s)
{
    return (size_t)tl_decode_rows(s) * tl_decode_heads(s) * tl_decode_qk_dim(s);
}
static inline size_t tl_decode_o_elems(const tl_decode_shape *s)
{
    return (size_t)tl_decode_rows(s) * tl_decode_heads(s) * tl_decode_v_dim(s);
}
static inline size_t tl_decode_lse_elems(const tl_decode_shape *s) { return (size_t)tl_decode_rows(s) * tl_decode_heads(s); }
/* Paged: each pool's elements; dual-scope: the latent cache's. */
static inline size_t tl_decode_cache_elems(const tl_decode_shape *s)
{
    if (s->kind == TL_DECODE_PAGED) return (size_t)s->pages * TL_DECODE_PAGE * s->kv_heads * TL_DECODE_PAGED_DIM;
    return (size_t)s->batch * s->max_len * TL_DECODE_MLA_QK_DIM;
}
/* Scales of each scale array (fp8): pages x 16 x kv_heads, or B x max_len. */
static inline size_t tl_decode_scale_elems(const tl_decode_shape *s)
{
    if (s->kind == TL_DECODE_PAGED) return (size_t)s->pages * TL_DECODE_PAGE * s->kv_heads;
    return (size_t)s->batch * s->max_len;
}
static inline size_t tl_decode_table_elems(const tl_decode_shape *s) { return (size_t)s->batch * s->max_blocks; }
static inline size_t tl_decode_topk_elems(const tl_decode_shape *s) { return (size_t)tl_decode_rows(s) * s->topk; }

/* ---- the key set of a row ---- */
/* Dual-scope: positions query t of request b sees. */
TL_DECODE_FN long tl_decode_visible(long len, int mtp, int t)
{
    const long v = len - mtp + t + 1;
    return v > 0 ? v : 0;
}
/* Dual-scope: the window [*lo, *hi) of a query that sees `visible` positions. */
TL_DECODE_FN void tl_decode_window(long visible, long window, long *lo, long *hi)
{
    *hi = visible;
    *lo = visible > window ? visible - window : 0;
}
/* Dual-scope: whether top-k entry i of a list counts (the definition of the union; O(i)): its index
 * lies in [0, visible), outside the window [wlo, visible), and no earlier entry holds it. An
 * implementation may find the same entries faster (a sort); it must count exactly these. */
TL_DECODE_FN int tl_decode_topk_counts(const int32_t *list, int i, long wlo, long visible)
{
    const long p = list[i];
    if (p < 0 || p >= visible || p >= wlo) return 0;
    for (int j = 0; j < i; j++)
        if (list[j] == list[i]) return 0;
    return 1;
}
/* Slots of a row's stream: lens[b] (paged); the window's positions + k (dual-scope; a top-k slot
 * that does not count is skipped by everyone). */
TL_DECODE_FN long tl_decode_row_slots_of(tl_decode_kind kind, long len, int mtp, int t, long window, int topk)
{
    if (kind == TL_DECODE_PAGED) return len;
    long lo, hi;
    tl_decode_window(tl_decode_visible(len, mtp, t), window, &lo, &hi);
    return hi - lo + topk;
}
static inline long tl_decode_row_slots(const tl_decode_shape *s, long r)
{
    if (s->kind == TL_DECODE_PAGED) return s->lens[r];
    return tl_decode_row_slots_of(s->kind, s->lens[r / s->mtp], s->mtp, (int)(r % s->mtp), s->window, s->topk);
}
/* Slots per shard granule: a page (paged) or TL_DECODE_DS_GRANULE (dual-scope). */
TL_DECODE_FN int tl_decode_granule(tl_decode_kind kind)
{
    return kind == TL_DECODE_PAGED ? TL_DECODE_PAGE : TL_DECODE_DS_GRANULE;
}

/* ---- split-KV ---- */
/* Shard s (0 <= s < shards) of a row of n slots: [*lo, *hi). The row's granules (ceil(n / granule))
 * are dealt in contiguous runs of ceil(granules / shards); the last shards may be empty (*lo ==
 * *hi), and every slot belongs to exactly one shard. O(1). */
TL_DECODE_FN void tl_decode_shard_range(long n, int shards, int granule, int s, long *lo, long *hi)
{
    const long granules = (n + granule - 1) / granule;
    const long per = (granules + shards - 1) / shards;
    long a = (long)s * per * granule, e = a + per * granule;
    *lo = a < n ? a : n;
    *hi = e < n ? e : n;
}

/* The merge of n shards' (o_i, lse_i) into the one-pass answer, in float32:
 *   m = max lse_i; if m = -inf (every shard empty or masked): out = 0, lse = -inf;
 *   else w_i = exp(lse_i - m) (0 for an empty shard, 1 for the largest), S = sum w_i,
 *        out = sum w_i o_i / S, lse = m + log S.
 * Never NaN for finite o_i and lse_i in [-inf, +inf) (S >= 1). With n = 1 it returns o and lse as
 * they are. lse_i of shard i: lse[i * lse_stride]; its output: o[i * o_stride + d] for d < dv.
 * Two steps, so that a device thread that owns a few d computes the weights' sum once:
 * tl_decode_merge_stats, then tl_decode_merge_weight for each shard. Cost: n exps, one log, n dv FMAs. */
TL_DECODE_FN float tl_decode_neg_inf(void) { return tl_code_bits_f32(0xFF800000u); }
TL_DECODE_FN void tl_decode_merge_stats(int n, const float *lse, long lse_stride, float *m, float *sum)
{
    float mx = tl_decode_neg_inf();
    for (int i = 0; i < n; i++)
        if (lse[i * lse_stride] > mx) mx = lse[i * lse_stride];
    float s = 0;
    if (mx != tl_decode_neg_inf())
        for (int i = 0; i < n; i++) s += tl_decode_expf_(lse[i * lse_stride] - mx);
    *m = mx;
    *sum = s;
}
/* w_i / S for shard i's lse (0 when every shard is empty: m = -inf). */
TL_DECODE_FN float tl_decode_merge_weight(float lse_i, float m, float sum)
{
    if (m == tl_decode_neg_inf() || lse_i == tl_decode_neg_inf()) return 0.0f;
    return tl_decode_expf_(lse_i - m) / sum;
}
/* The merged LSE: m + log S, or -inf. */
TL_DECODE_FN float tl_decode_merge_lse(float m, float sum)
{
    return m == tl_decode_neg_inf() ? m : m + tl_decode_logf_(sum);
}
/* The whole merge of one (row, head): out[dv], *lse_out. */
TL_DECODE_FN void tl_decode_merge(int n, const float *lse, long lse_stride, const float *o, long o_stride, int dv,
                                  float *out, float *lse_out)
{
    float m, sum;
    tl_decode_merge_stats(n, lse, lse_stride, &m, &sum);
    for (int d = 0; d < dv; d++) out[d] = 0.0f;
    for (int i = 0; i < n; i++) {
        const float w = tl_decode_merge_weight(lse[i * lse_stride], m, sum);
        if (w == 0.0f) continue;
        for (int d = 0; d < dv; d++) out[d] += w * o[i * o_stride + d];
    }
    *lse_out = tl_decode_merge_lse(m, sum);
}

/* Work-groups of a row's shard: one per KV head (paged) or per block of query heads (dual-scope:
 * blocks of TL_DECODE_DS_HEAD_BLOCK heads when 32 divides H, else of 16; each block's group reads
 * and decodes the shard's latent rows once for its heads, the later blocks mostly from L2). */
#define TL_DECODE_DS_HEAD_BLOCK 32
static inline int tl_decode_ds_block_heads(int heads) { return heads % TL_DECODE_DS_HEAD_BLOCK ? 16 : TL_DECODE_DS_HEAD_BLOCK; }
static inline int tl_decode_head_blocks(const tl_decode_shape *s)
{
    if (s->kind == TL_DECODE_PAGED) return s->kv_heads;
    return s->heads / tl_decode_ds_block_heads(s->heads);
}
/* Work-groups one CU holds at once: 2 paged (128 threads, <= 255 registers each), 1 dual-scope
 * (about 100 KB of shared memory, 256 threads of ~240 registers). The shard pick and the model's
 * waves count with it. */
static inline int tl_decode_groups_per_cu(tl_decode_kind kind) { return kind == TL_DECODE_PAGED ? 2 : 1; }
/* Work-groups of one shard launch: rows x tl_decode_head_blocks x shards. */
static inline long tl_decode_groups(const tl_decode_shape *s, int shards)
{
    return tl_decode_rows(s) * tl_decode_head_blocks(s) * (long)shards;
}
/* Query heads one work-group serves: gqa (paged) or a head block, 32 or 16 (dual-scope). */
static inline int tl_decode_group_heads(const tl_decode_shape *s)
{
    return s->kind == TL_DECODE_PAGED ? s->gqa : tl_decode_ds_block_heads(s->heads);
}
/* Bytes of the partials for `shards` (0 when shards = 1: the kernel writes O and LSE directly):
 * rows x H x shards x (dv + 1) float32. */
static inline double tl_decode_partial_bytes(const tl_decode_shape *s, int shards)
{
    if (shards <= 1) return 0;
    return 4.0 * tl_decode_rows(s) * tl_decode_heads(s) * (double)shards * (tl_decode_v_dim(s) + 1);
}

/* The fewest granules a shard of an automatic split holds: paged 4 pages (64 positions: a shard's
 * fixed cost and its share of the merge stay small against its reads); dual-scope 1 (32 slots:
 * its work is the H heads' dot products, which more shards spread over more compute units). */
TL_DECODE_FN int tl_decode_min_shard_granules(tl_decode_kind kind) { return kind == TL_DECODE_PAGED ? 4 : 1; }
/* The shard count the model picks, which the launcher uses for run(g, 0) with the device's compute
 * units: 1 when one launch's work-groups (tl_decode_groups(s, 1)) fill one wave (compute_units x
 * tl_decode_groups_per_cu); otherwise floor(wave / groups) (one full wave, never a second partial
 * one), no more than the longest row's granules / tl_decode_min_shard_granules and at most
 * TL_DECODE_MAX_SHARDS, then lowered to the fewest shards that deal the longest row's granules in
 * runs of the same length (none of its shards empty). At least 1. Cost: O(B). */
int tl_decode_auto_shards(const tl_decode_shape *s, int compute_units);

/* Counted keys of row r (the size of its key set; topk: that row's list, dual-scope only, may be
 * NULL when k = 0). Cost: O(k^2) for dual-scope (the definition), O(1) paged. */
long tl_decode_row_keys(const tl_decode_shape *s, long r, const int32_t *topk);
/* The work counted: 2 (qk + dv) FLOPs per (counted key, head): sum over rows of keys x H x 2 (qk + dv).
 * topk as tl_decode_row_keys (NULL: the top-k entries are taken to be all counted, distinct and
 * outside the window: the model's estimate). */
double tl_decode_flops(const tl_decode_shape *s, const int32_t *topk);
/* The fewest bytes the op must move: each cache position a request uses read once (the union of
 * its queries' key sets: a position in both scopes, or in two queries' sets, is read once), with
 * its scales (fp8) and its block-table entry (paged), Q and the top-k lists read once, O and LSE
 * written once. topk as above (NULL: the estimate, with the window and the selected positions
 * taken to be disjoint). Cost: O(B) paged; dual-scope with topk, a sort of each request's positions. */
double tl_decode_bytes(const tl_decode_shape *s, const int32_t *topk);

/* The points of a dual-scope work-group's life that `bench decode --trace` records (kernels/decode.h,
 * tl_decode_gpu_trace), in order: the group starts; its statistics and top-k list are in shared
 * memory and its first tile's positions settled (READY; the tile's loads were issued before the
 * settling); its first tile's rows have landed and
 * are decoded into shared memory (LANDED); its last tile is done (TILES); its o and lse are written
 * (END). A merge block records ENTRY, READY = LANDED = TILES when the shard grid has finished (its
 * wait returned), END when its rows are written. */
enum {
    TL_DECODE_TRACE_ENTRY,
    TL_DECODE_TRACE_READY,
    TL_DECODE_TRACE_LANDED,
    TL_DECODE_TRACE_TILES,
    TL_DECODE_TRACE_END,
    TL_DECODE_TRACE_POINTS
};
/* The columns of `bench decode --trace` (one line a block; launch "shard" or "merge"; row, hblock and
 * shard -1 on merge lines; the times are the points' in order, then the run's end). */
#define TL_DECODE_TRACE_HEADER                                                                                  \
    "kind,kv,batch,heads,window,topk,shards,launch,block,row,hblock,shard,sm,entry_us,ready_us,landed_us,tiles_us," \
    "end_us,run_end_us,source"

#ifdef __cplusplus
}
#endif

#endif
