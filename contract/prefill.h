/* contract/prefill.h: causal prefill attention forward (seed 003, the ZYFA FP8 attention note): what
 * the kernels (kernels/prefill.hip), the reference (reference/prefill.c) and the model
 * (simulator/prefill.c) of `prefill` agree on.
 *
 * The function. For query row i (0 <= i < seq) of query head h, reading KV head g = h / (H / Hkv):
 *     s_j  = scale * (Q[i][h][:] . K[j][g][:])          j in J(i) = [0, i] (causal) or [0, seq)
 *     LSE  = log sum_{j in J(i)} exp(s_j)                (natural log, float32)
 *     O    = sum_{j in J(i)} exp(s_j - LSE) V[j][g][:]   ([dv]; see "who computes what" for its type)
 * Queries and keys are the same tokens (no cache prefix), so J(i) is never empty.
 *
 * Who computes what.
 *   The reference (reference/prefill.c, tl_prefill_reference) computes the function above on the
 *   quantized inputs and nothing else: Q, K, V decoded (bf16, or fp8 codes x scales) and widened to
 *   double; scores, softmax and P.V in double (online over 128-key blocks); P never rounded; O and
 *   LSE rounded once, to float32. `run prefill --device cpu` writes that O: float32 [seq][H][dv].
 *   The kernel (kernels/prefill.hip) computes the same function with three roundings more: its Q.K
 *   accumulator (float32; 13 mantissa bits in Hopper's E4M3 wgmma), P = exp(s - m) rounded before
 *   P.V (to bf16 in the BF16 kernel; to E4M3 by the FP8 rule below in the FP8 kernel), and O stored
 *   bf16 (RNE). `run prefill --device gpu` writes that bf16 O widened to float32 (exactly).
 *   The tolerance covers the gap (ops/prefill.c tolerances()): numerics/softmax.h's bound
 *   (tl_softmax_tolerance) with acc_bits = the kernel's accumulator and pv_bits = P's mantissa bits
 *   into P.V (8 for bf16, 4 for E4M3: unit roundoffs 2^-8, 2^-4), plus O's bf16 store (relative RMS
 *   2^-8 / sqrt 3) in quadrature. O is judged by its relative RMS (a max_abs bound, one magnitude
 *   for all, does not fit O, whose magnitude falls along the causal rows), LSE by its own bound;
 *   NaN never passes. tl_prefill_reference_f64_p applies the FP8 P rule to the reference alone, to
 *   measure that term by itself (numerics attention-error); the check does not use it.
 *
 * Shapes. H query heads on Hkv KV heads (H a multiple of Hkv: GQA); q.k dim dqk, value dim dv:
 *   mistral-7b        H 32, Hkv 8,  dqk 128, dv 128  (Mistral-7B-v0.1 config.json: 32 / 8 heads, 4096 / 32)
 *   qwen3-8b          H 32, Hkv 8,  dqk 128, dv 128  (Qwen3-8B config.json: 32 / 8 heads, head_dim 128)
 *   deepseek-v2-lite  H 16, Hkv 16, dqk 192, dv 128  (DeepSeek-V2-Lite config.json: 16 heads, MLA
 *                     expanded for prefill: qk_nope_head_dim 128 + qk_rope_head_dim 64, v_head_dim 128)
 * (the same numbers as the presets/models files; the contract does not read the simulator's loader).
 *
 * Layouts (row-major; bf16 as uint16 bits, FP8 as uint8 E4M3FN codes: bias 7, max 448, no Inf):
 *   Q [seq][H][dqk], K [seq][Hkv][dqk], V [seq][Hkv][dv]     bf16, or fp8 codes
 *   q_scale [H][nblk], k_scale [Hkv][nblk], v_scale [Hkv][nblk] float32 (fp8 only), nblk =
 *       ceil(seq / 128): one scale per block of 128 rows (tokens) per head, covering the block's
 *       rows x the head's dim; value = decode(code) x scale, exact in double.
 *   O [seq][H][dv]: bf16 from the kernel, float32 from the reference; LSE [H][seq] float32.
 * FP8 quantization of one block (tl_prefill_quantize_fp8, the one definition): amax over the block's
 * elements, scale = tl_bfp8_scale(E4M3FN, amax, 0) = max(amax, 1e-4) / 448, code = RNE saturating
 * encode of x / scale (numerics/blockfp8.h's rule, over a 128 x dim block).
 *
 * P in the FP8 kernel (the kernel's rule; the reference does not apply it): the probabilities P = exp(s - m), m the running row max, lie
 * in [0, 1]; they are quantized to E4M3FN with the fixed scale 1/448: code = encode(P x 448) (RNE,
 * saturating; tl_prefill_p_code), and the PV product is divided by 448 in float32 (tl_prefill_p_value). No per-block amax for P (m makes
 * its max 1 already), smallest nonzero P kept 2^-9 / 448 ~ 4.4e-6. The BF16 kernel rounds P to bf16.
 * This rounding is part of the kernel's error budget (above), not of the function.
 *
 * Plain C: host and device code include it alike.
 */
#ifndef TL_CONTRACT_PREFILL_H
#define TL_CONTRACT_PREFILL_H

#include <stddef.h>
#include <stdint.h>

#include "../numerics/codes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TL_PREFILL_BF16, TL_PREFILL_FP8, TL_PREFILL_NDTYPES } tl_prefill_dtype;

#define TL_PREFILL_BLOCK 128             /* rows (tokens) per FP8 scale block */
#define TL_PREFILL_P_MULT 448.0f        /* FP8 kernel: P stored as encode(P x 448), read as code / 448 */
#define TL_PREFILL_MAX_SEQ (1L << 20)    /* 1M tokens */
#define TL_PREFILL_MAX_HEADS 256
#define TL_PREFILL_MAX_DIM 512           /* dqk, dv */
#define TL_PREFILL_MAX_ELEMS (1LL << 34) /* elements of Q, K, V or O */

typedef struct {
    int heads;      /* H: 1..256, a multiple of kv_heads */
    int kv_heads;   /* Hkv: 1..H */
    int dqk, dv;    /* 1..512 */
    long seq;       /* 1..1M */
    int causal;     /* 1: J(i) = [0, i]; 0: every key */
    float scale;    /* softmax scale; 0: 1 / sqrt(dqk) */
    tl_prefill_dtype dtype;
} tl_prefill_shape;

/* "bf16" | "fp8"; TL_EUSAGE with a message otherwise. */
int tl_prefill_dtype_parse(const char *s, tl_prefill_dtype *out);
const char *tl_prefill_dtype_name(tl_prefill_dtype d);

/* Fills heads, kv_heads, dqk, dv from a preset name (mistral-7b, qwen3-8b, deepseek-v2-lite) or
 * "HxD" (H heads on H KV heads, dqk = dv = D), "HxKVxD" (GQA) or "HxKVxDQKxDV" (dqk and dv apart: MLA); seq, causal (1), scale (0) and
 * dtype (bf16) are set to defaults. TL_EUSAGE naming the text for anything else (the numbers are
 * checked by tl_prefill_shape_check, after seq is set). */
int tl_prefill_shape_parse(const char *text, tl_prefill_shape *out);
/* The preset names, NULL-terminated. */
const char *const *tl_prefill_presets(void);

/* The ranges above, H % Hkv == 0, every array within TL_PREFILL_MAX_ELEMS. TL_EUSAGE with one line
 * naming the bad value. O(1). */
int tl_prefill_shape_check(const tl_prefill_shape *s);

/* The softmax scale in use: s->scale, or 1 / sqrt(dqk) when it is 0. */
float tl_prefill_scale(const tl_prefill_shape *s);
/* Scale blocks per head: ceil(seq / 128). */
static inline long tl_prefill_nblk(long seq) { return (seq + TL_PREFILL_BLOCK - 1) / TL_PREFILL_BLOCK; }
static inline size_t tl_prefill_q_elems(const tl_prefill_shape *s) { return (size_t)s->seq * s->heads * s->dqk; }
static inline size_t tl_prefill_k_elems(const tl_prefill_shape *s) { return (size_t)s->seq * s->kv_heads * s->dqk; }
static inline size_t tl_prefill_v_elems(const tl_prefill_shape *s) { return (size_t)s->seq * s->kv_heads * s->dv; }
static inline size_t tl_prefill_o_elems(const tl_prefill_shape *s) { return (size_t)s->seq * s->heads * s->dv; }
static inline size_t tl_prefill_lse_elems(const tl_prefill_shape *s) { return (size_t)s->heads * s->seq; }
/* Keys query row i sees: [0, tl_prefill_keys(s, i)). */
static inline long tl_prefill_keys(int causal, long seq, long i) { return causal ? i + 1 : seq; }
/* The scores the function defines: sum over query rows of the keys each sees, times H (causal:
 * H seq (seq + 1) / 2, else H seq^2). As a double: exact up to 2^53. */
static inline double tl_prefill_scores(const tl_prefill_shape *s)
{
    const double n = (double)s->seq;
    return (double)s->heads * (s->causal ? n * (n + 1) / 2 : n * n);
}
/* The counted FLOPs: 2 (dqk + dv) per score (the Q.K and P.V multiply-adds; causal work only). */
static inline double tl_prefill_flops(const tl_prefill_shape *s) { return 2.0 * (s->dqk + s->dv) * tl_prefill_scores(s); }

/* The FP8 kernel's P rule (above), host and device: the E4M3FN code of p in [0, 1], and the value a
 * code stands for. A few instructions each. */
TL_CODE_FN uint32_t tl_prefill_p_code(float p) { return tl_code_e4m3_from_f32(p * TL_PREFILL_P_MULT); }
TL_CODE_FN float tl_prefill_p_value(uint32_t code) { return tl_code_e4m3_to_f32(code) / TL_PREFILL_P_MULT; }

/* The kernel's tiling (the model and the kernel read the same numbers): a work-group (CTA) serves
 * block_m query rows of one query head, `warps` waves (warps) of block_m / warps rows each, and walks
 * its rows' keys in tiles of block_n, the causal tiles above the diagonal skipped, the diagonal
 * tiles masked. Per arch ("sm_90", "gfx942", "gfx950") and dtype; block_m a multiple of 16 x warps,
 * block_n of 16. */
typedef struct {
    int block_m, block_n, warps;
} tl_prefill_tiling;
tl_prefill_tiling tl_prefill_tiling_for(const char *arch, const tl_prefill_shape *s);

/* FP8 block quantization of one tensor x [seq][heads][dim] (float32) into codes (same layout, one
 * byte each) and scales [heads][nblk], by the rule above. NaN/Inf in x: TL_EUSAGE naming the first
 * (a non-finite activation has no meaningful scale). Cost: two passes over x. */
int tl_prefill_quantize_fp8(const float *x, long seq, int heads, int dim, uint8_t *codes, float *scales);
/* The inverse: y = decode(code) x scale in double (exact: 4 significant bits times 24; float32 would
 * round it). */
void tl_prefill_dequantize_fp8(const uint8_t *codes, const float *scales, long seq, int heads, int dim, double *y);

#ifdef __cplusplus
}
#endif

#endif
