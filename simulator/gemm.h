/* simulator/gemm.h: a tile model of one dense GEMM (a projection or a dense MLP of a model layer),
 * C[m x n] = A[m x k] B[k x n], on a hardware preset: the term simulator/step.h charges for the
 * parts of a layer that tilelab has no kernel of its own for.
 *
 * The peer it models is a vendor library's GEMM (cuBLAS, hipBLASLt: torch.matmul and
 * torch._scaled_mm), and its one rate is that peer's: the preset's gemm_bf16_tflops /
 * gemm_fp8_tflops (a library's best large GEMM, measured; hw.h), or where the preset has none,
 * TL_GEMM_LIBRARY_SHARE of the preset's matrix ceiling of the format (measured, else datasheet).
 * bench/step_layer.sh times the same shapes with torch on the lent GPU.
 *
 * The kernel modelled: output tiles of tile_m x tile_n (tl_gemm_tile: tile_m the smallest of 16,
 * 32, 64, 128 that holds m, 128 from there; tile_n 128, or 64 when tile_m <= 32, as libraries'
 * skinny kernels split N finer), K split over `split` work items where the tiles alone leave CUs
 * idle (split-K: the fewest splits that fill the CUs, each at least TL_GEMM_MIN_K_SPLIT deep), one
 * work item a CU at a time, in waves. Per GEMM of the batch (batch: independent GEMMs of the same
 * shape in one launch, e.g. MLA's per-head products):
 *   - flops_useful = 2 m n k; flops_issued = 2 x (m rounded up to the instruction's M granule,
 *     the preset's instruction for the format, tl_hw_pick_instr) x n_padded x k_padded (k rounded
 *     up to the instruction's K-depth: FP8's 128 on gfx950);
 *   - bytes (HBM): B (the weights) once, at tl_gemm_weight_bytes per element (bf16 2; fp8
 *     E4M3 + one float32 scale per 128 x 128 block, DeepSeek's); A once (bf16 2, fp8 1 + 4/128:
 *     1x128 groups); C written once in bf16; with split > 1 the float32 partials (split x m x n x 4)
 *     written and read back;
 *   - matrix: the waves of items, each its issued flops at the rate above over the CUs;
 *   - memory: the bytes at the HBM read ceiling (measured, else datasheet), or, when fewer items
 *     than CUs run, at most active CUs x hbm_per_cu_gbps (a small grid cannot fill HBM);
 *   - time = launch_us + item_fixed_us + max(matrix, memory), plus next_kernel_us for split-K's
 *     reduction of the partials.
 * Limiter: "fixed" when launch and fixed cost are half the time or more, else "hbm",
 * "cu-stream" (the small grid's stream) or "matrix".
 * Ignored: L2 hits of A's re-reads by every n-block, the library's own tile heuristics (it may pick
 * other tiles; its rate is taken as given), epilogues fused into the GEMM (activation, residual).
 */
#ifndef TL_SIM_GEMM_H
#define TL_SIM_GEMM_H

#include "hw.h"

#define TL_GEMM_LIBRARY_SHARE 0.66  /* a library GEMM's best share of the matrix ceiling where the
                                     * preset has no measured GEMM: seed 000 Figure 5 (hipBLASLt on
                                     * MI355X, BF16 and FP8 alike); an estimate for other GPUs */
#define TL_GEMM_MIN_K_SPLIT 256     /* the shallowest K a split-K item takes */

typedef enum { TL_GEMM_BF16, TL_GEMM_FP8 } tl_gemm_dtype;

typedef struct {
    const tl_hw *hw;
    long m, n, k;        /* each >= 1 */
    int batch;           /* GEMMs of this shape in one launch, >= 1 */
    tl_gemm_dtype dtype; /* both operands' format: bf16, or block-scaled FP8 (E4M3) */
} tl_gemm_problem;

typedef struct {
    int tile_m, tile_n, split;
    char instr[TL_HW_NAME_LEN];
    long long items;     /* batch x tiles x split */
    double waves;        /* items / CUs */
    double flops_useful, flops_issued;
    double weight_bytes, act_bytes, out_bytes, partial_bytes, hbm_bytes;
    double rate_tflops;  /* the peer's rate charged */
    double matrix_us, memory_us, fixed_us, time_us;
    int kernels;         /* 1, or 2 with split-K's reduction */
    const char *limiter; /* "fixed", "hbm", "cu-stream", "matrix" (static string) */
} tl_gemm_result;

/* "bf16" | "fp8"; TL_EUSAGE with a message otherwise. */
int tl_gemm_dtype_parse(const char *s, tl_gemm_dtype *out);
const char *tl_gemm_dtype_name(tl_gemm_dtype d);
/* Bytes of one weight element as stored, scales included. */
double tl_gemm_weight_bytes(tl_gemm_dtype d);
/* The tile the model takes for m rows. */
void tl_gemm_tile(long m, int *tile_m, int *tile_n);

/* Runs the model. TL_EUSAGE for a NULL preset, a size below 1 or above 2^31, batch < 1, or a preset
 * without an instruction or ceiling for the format. Cost: O(1). */
int tl_gemm_sim(const tl_gemm_problem *p, tl_gemm_result *r);

#endif
