/* The fused MoE's CPU reference: the same function the GPU kernel computes, on the same quantized
 * inputs, plus an independent naive loop to check the reference itself.
 *
 * It computes the op's function (contract/moe.h, which also gives the data types and the layouts
 * of tl_moe_inputs, the arrays the GPU kernel reads too) in float32; the naive loop accumulates in
 * double.
 *
 * Where the inputs and the intermediate are quantized, and how (the kernel does exactly this):
 *   - x, the stage-1 input: fp8 quantizes its bf16 values per row as fp8's Q2 below does, mxfp4
 *     and mxfp8 as their Q2 below does, and stage 1 reads the dequantized values (bf16 and a16w4:
 *     the bf16 values themselves);
 *   - stage 1 rounds silu(g) * u (float32) to bf16, RNE: the activation buffer it writes is bf16;
 *   - Q2 for fp8: stage 2 reads that buffer re-quantized per row in 1x128 groups to E4M3FN with
 *     float32 scales (amax clamped to 1e-4, scale = amax / 448, RNE, saturating: numerics/blockfp8.h),
 *     so Q2 = dequantize(quantize_act(.));
 *   - Q2 for mxfp4 and mxfp8 (both have MXFP8 activations): each row re-quantized in blocks of 32
 *     from its first value (a row's last block may be short) to E4M3FN with one E8M0 scale each,
 *     the OCP floor rule: X = 2^(floor(log2 amax) - 8), code = encode(x / X), RNE, saturating at 448
 *     (numerics/mx.h's tl_mx_quantize(TL_NF_E4M3FN, TL_SCALE_FLOOR, 32, ...), which the kernels'
 *     tl_quant_mx_scale / tl_quant_mx_code of contract/quant.h equal), then dequantized; an
 *     all-zero block gets scale code 0x00 and +-0 codes (values +-0, signs kept), a block holding
 *     NaN or +-Inf scale code 0xFF and decodes to NaN throughout;
 *   - Q2 for bf16 and a16w4 is the identity (bf16 feeds the bf16 matrix instructions).
 *
 * Inputs are random and seeded, never all zeros: weights are drawn as codes of their own format
 * (normal values encoded, or uniform codes for INT4/FP4) with random positive scales, so no
 * quantization of big weight arrays is needed and every code of the format can occur.
 */
#ifndef TL_REFERENCE_MOE_H
#define TL_REFERENCE_MOE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../contract/moe.h"
#include "../contract/worklist.h"
#include "../core/tl.h"
#include "../numerics/formats.h"
#include "../numerics/metrics.h"

/* Random weights: n_mat matrices rows x cols of dtype d, values of RMS about 1/sqrt(cols).
 * Deterministic for (seed, d, n_mat, rows, cols) whatever the thread count (a counter-based
 * generator per row). TL_EFAIL on allocation failure (then *w is left empty). Cost: O(n_mat * rows
 * * cols), parallel over rows with OpenMP; DeepSeek-V3.2's 256 experts (11.3 G elements) take
 * seconds on 16 cores and 22.5 GB (bf16) of memory. */
int tl_moe_weights_make(tl_moe_dtype d, int n_mat, int rows, int cols, uint64_t seed,
                        tl_moe_weights *w);
void tl_moe_weights_free(tl_moe_weights *w);
/* Dequantizes matrix `mat` into y (rows * cols floats), exactly (numerics' dequantizers). */
int tl_moe_weights_dequant(const tl_moe_weights *w, int mat, float *y);
/* The value of one element, decoded on its own (no bulk path): what the naive loop uses. */
float tl_moe_weight_at(const tl_moe_weights *w, int mat, int row, int col);

/* Token-side inputs for s->tokens tokens: x ~ N(0, 1) in bf16 (and its block-FP8 form xq, xs for
 * fp8; its MXFP8 form xq, xe for mxfp4 and mxfp8),
 * routing by r with this seed (topk weights from tl_route). Frees any token-side arrays *in
 * already holds; leaves the weights alone. */
int tl_moe_tokens_make(tl_moe_inputs *in, const tl_moe_shape *s, const tl_routing *r,
                       uint64_t seed);
/* Token-side inputs from the caller's tensors (a user's .npy files): x float32 [tokens][hidden]
 * rounded to bf16 (and quantized for fp8, mxfp4, mxfp8) exactly as tl_moe_tokens_make rounds its random
 * values; ids and w [tokens][k] copied. Frees any token-side arrays *in already holds; leaves the
 * weights alone. TL_EUSAGE for a bad shape, TL_EFAIL on allocation failure. */
int tl_moe_tokens_set(tl_moe_inputs *in, const tl_moe_shape *s, const float *x, const int32_t *ids, const float *w);
/* Everything: weights (seeded from seed) and token-side inputs. On error *in is freed. */
int tl_moe_inputs_make(const tl_moe_shape *s, const tl_routing *r, uint64_t seed,
                       tl_moe_inputs *in);
void tl_moe_inputs_free(tl_moe_inputs *in);

/* The reference: walks the worklist (built by the caller with tl_worklist_build from in->topk_ids;
 * its tile_m is irrelevant to the result), per expert gathers its rows, dequantizes its weights,
 * cblas_sgemm for both stages (OpenMP over experts, BLAS single-threaded inside), SwiGLU, Q2, and
 * writes per-edge weighted rows that a serial pass sums in slot order (no races, deterministic).
 * out: tokens * hidden floats. act, if not NULL, gets the stage-1 output as bf16 codes, one row per
 * worklist row ([wl->n_rows_padded][width], padding rows 0). Errors: TL_EUSAGE for a worklist that
 * does not match the inputs, TL_EFAIL on allocation failure. Cost: 2 * tokens * k * 3 * width *
 * hidden FLOPs plus dequantizing every active expert (its rows x cols) once; memory per thread
 * 3 * width * hidden floats. */
int tl_moe_reference(const tl_moe_inputs *in, const tl_worklist *wl, float *out, uint16_t *act);

/* Q2 on one row of stage 1's output (width bf16 codes): the values stage 2 reads (a, width floats),
 * as above for dtype d: the bf16 values (bf16, a16w4), their fp8 round trip (what the kernels'
 * moe_quant_act, kernels/moe_requant.hip, writes) or their MXFP8 round trip (mxfp4, mxfp8). The
 * reference and the naive loop both call it. TL_EUSAGE for an empty row; TL_EFAIL on allocation
 * failure (a is then all NaN). Cost: O(width) and two small allocations. */
int tl_moe_q2_row(tl_moe_dtype d, int width, const uint16_t *code, float *a);

/* The naive loop: the definition above as straight loops over tokens, slots, outputs and K, in
 * double, decoding every weight element on its own (tl_moe_weight_at); no BLAS, no worklist.
 * out: tokens * hidden floats. Cost: the same FLOPs as the reference but 10-100x slower: for small
 * shapes only. */
int tl_moe_naive(const tl_moe_inputs *in, float *out);

/* The tolerance of the final output against the reference for this shape (tokens included): two
 * chained float32 reductions (K = hidden, then K = width) with the intermediate in the stage-2
 * input format, which the kernel may round differently from the reference, plus the size of one
 * such rounding flip of a large activation, which dominates small cases: rel_rms bounds the whole
 * output, row_factor x rel_rms each token's row. reference/moe.c says where the constants come from. */
int tl_moe_tolerance(const tl_moe_shape *s, tl_tolerance *t);

/* The accumulator a kernel's stage sums its products in, for the tolerances: TL_MOE_ACC_FP32 (23
 * mantissa bits: float32 sums, what the functions without _acc assume), or the mantissa bits of a
 * matrix-core accumulator whose sums are added into float32 every TL_MOE_ACC_BLOCK products (sm_90a's
 * E4M3 wgmma: 13, kernels/wgmma.h's TL_WGMMA_E4M3_ACC_BITS, promoted every 128-value K block by
 * the fp8 prefill kernels). The stage's relative RMS model then adds, per block, the indexer's
 * truncating-accumulator term (reference/indexer.c): TL_MOE_ACC_BLOCK x ulp^2 / 6, ulp = 2^-bits
 * (the blocks' errors independent, so the sum's relative error is a block's). */
#define TL_MOE_ACC_FP32 23
#define TL_MOE_ACC_BLOCK 128
typedef struct {
    int s1, s2; /* stage 1's and stage 2's accumulator mantissa bits, each in [8, 23] */
} tl_moe_acc;
/* tl_moe_tolerance for stages summed in `acc`; TL_EUSAGE for bits outside [8, 23]. */
int tl_moe_tolerance_acc(const tl_moe_shape *s, tl_moe_acc acc, tl_tolerance *t);

/* Stage 2 and the combine alone, on the activations `act` (bf16 codes, [wl->n_rows_padded][width]
 * in worklist order, as tl_moe_reference writes them and the GPU's stage 1 does): what the
 * reference would output had its stage 1 produced exactly these. Same costs as tl_moe_reference's
 * stage 2 (a third of its FLOPs); bad worklist TL_EUSAGE, allocation TL_EFAIL. */
int tl_moe_reference_from_act(const tl_moe_inputs *in, const tl_worklist *wl, const uint16_t *act, float *out);
/* The tolerance of tl_moe_reference_from_act's output against a kernel's final output computed
 * from the same activations: only stage 2's float32 reduction (K = width) differs, so no rounding
 * flips: 16x the float32 model (4 sigma, x4 for matrix-core accumulation), rows 10x that. */
int tl_moe_tolerance_stage2(const tl_moe_shape *s, tl_tolerance *t);
/* The same for a stage 2 summed in an accumulator of acc2 mantissa bits (tl_moe_acc). */
int tl_moe_tolerance_stage2_acc(const tl_moe_shape *s, int acc2, tl_tolerance *t);

/* Stage 1's output of a kernel (got) against the reference's (ref), both bf16 codes
 * [wl->n_rows_padded][width] in worklist order. Every value of a real row must be equal or one
 * bf16 step apart (a rounding flip: the two sides sum float32 in different orders), up to an
 * absolute tau = 16 x the float32 model of K = hidden x the activations' RMS for values near zero,
 * where silu(g) u magnifies g's difference; at most 1 in 20 values may differ at all (simulated:
 * 0.3-1.1%); padding rows must be 0. d->pass says so; TL_EUSAGE for missing arrays.
 * tl_moe_compare_act_acc: the same for a stage 1 summed in an accumulator of acc1 mantissa bits
 * (tl_moe_acc): tau from that accumulator's model e1, and at most max(1/20, 4 x e1 / (2 u_bf16))
 * of the values one step apart (e1 / 2u: the rate at which a relative difference e1 moves a value
 * across a bf16 rounding midpoint; the float32 model's rate is under 1/80 of 1/20 at K >= 128). */
typedef struct {
    size_t compared, one_step, far, padding_bad; /* values of real rows; those apart; bad padding */
    double tau;                                  /* the absolute allowance used */
    double one_step_max;                         /* the share of compared values allowed one step apart */
    size_t worst_row, worst_col, first_pad_row;  /* the value furthest apart (when far > 0) */
    uint16_t worst_ref, worst_got;
    int pass;
} tl_moe_act_diff;
int tl_moe_compare_act(const tl_moe_shape *s, const tl_worklist *wl, const uint16_t *ref, const uint16_t *got,
                       tl_moe_act_diff *d);
int tl_moe_compare_act_acc(const tl_moe_shape *s, const tl_worklist *wl, const uint16_t *ref, const uint16_t *got,
                           int acc1, tl_moe_act_diff *d);

#ifdef __cplusplus
}
#endif

#endif
