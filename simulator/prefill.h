/* simulator/prefill.h: the cost model of causal prefill attention (contract/prefill.h) on a hardware
 * preset, for the kernel kernels/prefill.hip runs (tiling: tl_prefill_tiling_for).
 *
 * API shared by the op row (ops/prefill.c: sim, bench's model columns) and the figures
 * (ops/prefill_figs.c). The fields below are the ones the op row reads; the model may add more.
 * (The terms it charges are documented at tl_prefill_model in this header once it is written.)
 */
#ifndef TL_SIM_PREFILL_H
#define TL_SIM_PREFILL_H

#include "../contract/prefill.h"
#include "hw.h"

typedef struct {
    tl_prefill_tiling tile;          /* the kernel's, on hw->arch */
    char instr[TL_HW_NAME_LEN];      /* the matrix instruction charged for Q.K and P.V */
    int instr_k;                     /* its K-depth */
    long blocks;                     /* work-groups: ceil(seq / block_m) x heads */
    double waves;                    /* blocks / (CUs x resident blocks a CU) */
    long tiles_total;                /* (query block, key tile, head) tiles without causal skipping */
    long tiles_computed;             /* those the kernel computes (causal ones skipped) */
    double flops;                    /* counted: causal FLOPs only, 2 (dqk + dv) per (row, key, head) */
    double flops_computed;           /* what the matrix cores run (whole tiles, the diagonal's included) */
    double exps;                     /* exponentials computed (one per computed score) */
    double hbm_bytes;                /* Q, K, V (and scales) read, O and LSE written */
    double mma_us, exp_us, hbm_us, fixed_us, time_us;
    double tflops;                   /* counted FLOPs / time */
    const char *limiter;             /* "matrix", "exp", "hbm", "tail" or "fixed" */
} tl_prefill_model_result;

/* The model for shape s (tl_prefill_shape_check) on hw. TL_EUSAGE for a NULL preset, a bad shape,
 * or a preset without the instruction the kernel uses for s->dtype. */
int tl_prefill_model(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_model_result *r);

#endif
