/* Paged split-KV decode attention (one query token per sequence), as AITER's pa_fwd_asm runs it:
 * each (sequence, KV head) streams its K and V pages once and serves all gqa query heads of that
 * KV head from them; the sequence is split into chunks (split-KV) so that the grid fills the GPU,
 * and a small reduce combines the partial results.
 *
 * FLOPs = 4 * B * kvH * gqa * L * D (Q.K^T and P.V, 2 FLOPs per multiply-add).
 * HBM bytes = K and V: 2 * B * kvH * L * D * e, with e = 2 (bf16) or 1 (fp8) bytes per element,
 *   plus for fp8 one fp32 scale per (token, KV head) for K and one for V (8 B per token and head),
 *   plus Q (bf16) read and O (bf16) written, the block table (4 B per 16-token block) and the
 *   split-KV partials (fp32 O and two fp32 statistics per split, head) written and read back.
 * So intensity ~ 2 * gqa / e, seed 000 Table 2: 1.0, 7.8, 16.0, 31.0.
 * Time = max(bytes / BW_eff, FLOPs / matrix rate) + launch_us (twice when a reduce kernel runs), with
 * BW_eff = measured HBM read ceiling (datasheet if none) reduced for grids smaller than the GPU by
 * the same rule as the MoE model (moe.h). Ignored: softmax exp cost, page-table gathers' latency,
 * sequences of unequal length, L2 hits.
 */
#ifndef TL_SIM_DECODE_H
#define TL_SIM_DECODE_H

#include "../contract/decode.h"
#include "hw.h"

typedef struct {
    const tl_hw *hw;
    int kv_fp8;     /* 0: bf16 KV cache, 1: fp8 KV cache with per-token-head fp32 scales */
    int gqa;        /* query heads per KV head, >= 1 */
    int batch;      /* sequences, >= 1 */
    int seq;        /* KV length L of every sequence, >= 1 */
    int kv_heads;   /* >= 1 */
    int head_dim;   /* D, default 128 */
    int block;      /* page size in tokens, default 16 */
    int splits;     /* KV chunks per (sequence, head); 0 = choose so the grid fills the GPU */
} tl_decode_problem;

typedef struct {
    double flops, kv_bytes, other_bytes, hbm_bytes, intensity;
    double memory_us, compute_us, fixed_us, time_us;
    double bw_gbps;       /* effective bandwidth used */
    int splits;
    long long work_items; /* batch * kv_heads * splits */
    const char *limiter;  /* "hbm", "matrix" or "fixed" */
} tl_decode_result;

/* TL_EUSAGE on NULL hw or a value out of range (each >= 1; head_dim <= 1024; batch*heads*seq
 * product overflow), and on a KV cache (kv_bytes) larger than the preset's HBM (hbm_gb, when it
 * gives one): the message says both sizes. Cost: O(1). */
int tl_decode_sim(const tl_decode_problem *p, tl_decode_result *r);

/* ---- the model of `decode` (contract/decode.h's split-KV engine, both kinds) ----
 * What it charges, per launch:
 *   shard launch  tl_decode_groups(s, shards) work-groups (tl_decode_groups_per_cu a CU make
 *                 one wave: 2 paged, 1 dual-scope); bytes: the
 *                 contract's (tl_decode_bytes: each cache position read once, the union of the
 *                 scopes), minus O and LSE when shards > 1, plus the partials written when the
 *                 caches (L2 and the last level) cannot hold them until the merge; the matrix
 *                 work: 2 (qk + dv) FLOPs per (key, head), the group's heads padded to the 16 rows
 *                 of a matrix tile (paged gqa < 16 wastes the rest), at the bf16 rate (Q is bf16: an
 *                 FP8 cache is decoded to bf16 first) of the CUs that hold a group; the dequant
 *                 work: 2 vector operations (decode, scale) per FP8 element read; the softmax:
 *                 4 vector operations per (key, head). Its body is the larger of
 *                   throughput  max(bytes / bandwidth, matrix + dequant + softmax) where the
 *                               bandwidth is the HBM read ceiling, or active CUs x one
 *                               CU's streaming rate when that is less, and
 *                   the busiest CU  paged: the first loads' latency (the index: block table,
 *                               then the keys), then ceil(groups / CUs) groups as long as the
 *                               longest, each its reads at one CU's streaming rate
 *                               (hbm_per_cu_gbps: the sm_90a kernel copies pages by tensor
 *                               copies, both formats) overlapped with its work at one CU's
 *                               share of the rates, then its partial (or rows of O) written at
 *                               one CU's L2 rate; dual-scope: ceil(groups / CUs) times the
 *                               longest shard's timeline (simulator/decode.c, DS_*: a prologue,
 *                               the first tile's repeat compares, one HBM round trip for its
 *                               rows, one tile's work, a tile period for each further tile, the
 *                               O and LSE stores; constants fitted to the kernel's measured phase
 *                               traces, each named there).
 *   merge launch  (shards > 1) reads the partials and writes O and LSE: the busiest SM's blocks
 *                 (256 threads, dv / 4 a row-head) at the merge's per-SM rate (DS_MERGE_GBPS,
 *                 fitted to a measured trace), or the whole at the HBM ceiling when the partials do
 *                 not fit the caches (l2_mib_per_xcd x xcds plus the last-level cache), whichever
 *                 is longer.
 *   fixed         launch_us for the first launch, next_kernel_us for the merge.
 * Ignored: L2 hits of the cache (a window shared by MTP queries is counted once already), bank
 * conflicts, the block table's gather misses beyond one dependent load, unequal CU clocks. */
typedef struct {
    int shards;              /* given, or tl_decode_auto_shards(s, hw->cus) */
    long groups;             /* work-groups of the shard launch */
    double waves;            /* groups / (CUs x tl_decode_groups_per_cu) */
    int group_heads;         /* query heads a work-group serves */
    double flops, mma_flops; /* the counted work; the matrix cores' (heads padded to 16) */
    double kv_bytes;         /* cache bytes read (with scales and block table) */
    double hbm_bytes;        /* everything the shard launch moves through HBM */
    double partial_bytes;    /* written by the shards, read by the merge */
    double dequant_ops, softmax_ops;
    double bw_gbps;          /* the shard launch's bandwidth */
    double hbm_us, mma_us, dequant_us, softmax_us;
    double group_us;         /* the busiest CU's groups (the "latency" limiter) */
    double body_us, merge_us, fixed_us, time_us;
    double tbps;             /* the contract's bytes / time */
    long longest_keys;       /* the longest row's counted keys */
    const char *limiter;     /* "hbm", "matrix", "dequant", "latency" (the longest group), "merge", "fixed" */
} tl_decode_model_result;

/* The model above for shape s (checked: tl_decode_shape_check) on hw; topk: the lists (dual-scope,
 * may be NULL: the contract's estimate of the union); shards 0 picks. TL_EUSAGE for a bad shape,
 * shards outside [0, TL_DECODE_MAX_SHARDS] or a cache larger than the preset's HBM. Cost: O(B),
 * or a sort per request with topk. */
int tl_decode_model(const tl_hw *hw, const tl_decode_shape *s, const int32_t *topk, int shards, tl_decode_model_result *r);
/* One work-group's time in the model: `keys` counted keys (its shard of a row) of shape s. Paged:
 * the first loads' latency + max(its reads at one CU's streaming rate, its work at one CU's share
 * of the rates) + its output's write at one CU's L2 rate (the busiest CU's term above, for one
 * group). Dual-scope: the group timeline of simulator/decode.c (prologue, tiles, stores) for
 * `keys` slots with no repeat compares. shards: unused. */
double tl_decode_model_group_us(const tl_hw *hw, const tl_decode_shape *s, long keys, int shards);

#endif
