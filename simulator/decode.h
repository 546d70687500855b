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

#endif
