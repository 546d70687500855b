/* simulator/prefill.h: the cost model of causal prefill attention (contract/prefill.h) on a hardware
 * preset, for the kernel kernels/prefill.hip runs (tiling: tl_prefill_tiling_for).
 *
 * API shared by the op row (ops/prefill.c: sim, bench's model columns) and the figures
 * (ops/prefill_figs.c).
 *
 * The kernel (FA2-style): one work-group (CTA) per (block_m query rows, query head), `warps` waves
 * of block_m / warps rows each; it walks its rows' keys in tiles of block_n, K and V tiles staged
 * through LDS / shared memory (TL_PREFILL_STAGES buffers), S = Q.K^T on the matrix cores, the online
 * softmax in registers, O += P.V on the matrix cores; causal tiles above the diagonal are skipped,
 * the diagonal ones computed whole and masked; the grid runs the longest blocks (the last query
 * rows) first. Operands: sm_90 (Hopper, sm_90a) wgmma m64n128 on two warpgroups of 64 rows, bf16
 * or the FP8 codes in e4m3 for both products (V^T codes from a kernel of their own), a producer
 * warpgroup loading K/V tiles by the copy engine (three buffers; two for bf16 dqk 192);
 * gfx950 v_mfma_f32_16x16x32_bf16 or the FP8 v_mfma_scale_f32_16x16x128_f8f6f4; gfx942 16x16x16
 * bf16 or 16x16x32 FP8 (FNUZ).
 *
 * What the model charges (times in microseconds, over the CUs that hold a block):
 *   - matrix: every computed tile whole, 2 block_m block_n (dqk' + dv) FLOPs where dqk' is dqk
 *     rounded up to the instruction's K-depth (S) and block_n likewise for P.V (its contraction is
 *     over the tile's keys), at the instruction's rate: on AMD (tl_hw_pick_instr for 16-row
 *     fragments) its datasheet rate capped by the preset's ceiling of that format, times
 *     TL_PREFILL_MMA_EFF; on sm_90 the preset's wgmma loop rate of the format (wgmma_bf16_tflops /
 *     wgmma_fp8_tflops: `tilelab bench roofline`'s wgmma loops on that GPU), or where the preset
 *     has none its ceiling of the format (measured, else datasheet).
 *   - exp: one exponential per computed score (masked ones included) and one per row and tile (the
 *     running max's correction), at the preset's transcendental_per_cu_clk.
 *   - vector: per computed score TL_PREFILL_SCORE_OPS lane-operations (scale and max subtraction in
 *     one FMA, the running max, the row sum), the conversion of P (TL_PREFILL_P_OPS_*), the masking
 *     of diagonal tiles (TL_PREFILL_MASK_OPS), the rescale of O (dv / block_n per score: one multiply
 *     per O element per tile; twice that for AMD's FP8, whose P.V is scaled by v_scale / 448 into
 *     O; sm_90's fp8 folds each tile's P.V into O in one FMA), the row reductions
 *     (TL_PREFILL_ROW_OPS per row and tile), or K and V bytes fixed to FNUZ on gfx942 (a quarter
 *     op per value). At the preset's vector lanes per CU and clock.
 *   - softmax = max(exp, vector) on sm_90 (MUFU is its own pipe beside the FMA pipe; the issue is
 *     in vector) and exp + vector on AMD (the transcendentals run on the VALU at quarter rate).
 *   - compute (AMD), where the build's table has the kernel instance (r->code, simulator/amd_code.h):
 *     tiles_computed x warps wave-iterations of its hot loop (one key tile of one wave's 16 rows)
 *     at the loop's clocks (max(matrix, valu, lds, issue / waves a SIMD), from its instruction
 *     counts), over the CU's SIMDs; residency from its registers and LDS. Else the estimate:
 *     max(matrix, softmax) + (1 - overlap) x min(matrix, softmax). Within one wave
 *     the loop is serial (S, then its softmax, then P.V); only another wave on the same SIMD can
 *     fill the matrix core while this one exponentiates. overlap = 1 - 1 / (waves a SIMD holds).
 *   - compute (sm_90, the warp-specialized kernel) in SM cycles per tile of a block, at the clock
 *     its matrix rate implies (load_mhz = that wgmma rate / (SMs x the datasheet's FLOPs a
 *     clock: 4096 bf16, 8192 e4m3)): the tile period is the largest of
 *       matrix: both warpgroups' S and P V at that rate (the tensor cores take both warpgroups'
 *               products as they are issued);
 *       exp:    the tile's exponentials at transcendental_per_cu_clk (MUFU, its own pipe);
 *       vector: the issue slots, the vector lane-ops above plus the exponentials' own issue, at
 *               TL_PREFILL_SM90_ISSUE warp instructions a scheduler and clock (two warps a
 *               scheduler, each mostly waiting on its own dependent chain);
 *       pipeline: one warpgroup's own chain: its S at the full rate, its softmax (its half of
 *               max(exp, vector), behind the row max's dependent chain TL_PREFILL_SM90_CHAIN),
 *               a product issue (TL_PREFILL_SM90_TURN); fp8 also the second half of its P V and
 *               a second issue (P V runs in two halves of 64 value columns, the first during the
 *               softmax of the next tile). bf16's P V runs during the next softmax and is not on
 *               the chain;
 *       load:   a K/V tile's load by the copy engine, one round trip (hbm_latency_us) and its
 *               bytes at one SM's L2 stream (l2_per_cu_gbps), over the periods it has to land:
 *               K's and V's halves of a stage have barriers of their own (K released once S is
 *               done, V once P V is), so each load has stages - 1 periods;
 *     plus, per block, the first tile alone: one memory round trip (hbm_latency_us) for Q and the
 *     first K/V, S(0) and its softmax.
 *   - lds: every wave reads the whole K and V tile from LDS (warps x block_n x (dqk + dv) x the
 *     operand's bytes a tile and block) and the tile is written once; on sm_90 wgmma reads them
 *     once per warpgroup, and Q's rows once per tile; at lds_bytes_per_cu_clk.
 *   - l2: every block reads its computed tiles' K and V (and scales) from L2; a CU streams at most
 *     min(its cap, bytes in flight / latency): (stages - 1) tiles a resident block; of
 *     those bytes the HBM term's K/V passes miss and the rest hit (the blocks running at once walk
 *     the same keys from the first), the latency and the cap's time per byte weighted by the two.
 *   - hbm: Q read, O (bf16) and LSE written once; K and V (and FP8 scales) read once when all of
 *     K and V fit 0.8 of the L2s and last-level cache together, else once per wave of blocks over
 *     the part a wave reads (waves x computed / total tiles), at the measured HBM read rate.
 *   - body = max(compute, lds, l2, hbm).
 *   - tail: the blocks laid over the block slots (CUs x resident blocks) by the list schedule
 *     (tl_prefill_schedule: longest first, each to the slot that frees first), a tile of any
 *     block taking body x slots in use / computed tiles; tail = the schedule's end - body.
 *   - fixed: launch_us + item_fixed_us (the first loads, the last epilogue); sm_90 fp8 adds V^T's
 *     kernel: V read and written at the HBM read rate, and next_kernel_us.
 * time = fixed + body + tail; the limiter names the largest of body (by its largest part:
 * "matrix", "exp", "vector", "pipeline", "load", "lds", "l2", "hbm"), "tail" and "fixed".
 * Constants: guesses or instruction measurements, stated below; none fitted to this kernel's times.
 * Ignored: bank conflicts, barriers between tiles, register spills, a CU's blocks finishing at
 * different times (a block alone on a CU gets no more than its share), clock changes under load
 * (the seed's data-dependent MI355X clock).
 */
#ifndef TL_SIM_PREFILL_H
#define TL_SIM_PREFILL_H

#include "../contract/prefill.h"
#include "amd_code.h"
#include "hw.h"

#define TL_PREFILL_MMA_EFF 0.90      /* AMD: share of the instruction's rate the inner loop keeps
                                      * (guess: the waits for the next tile and the barriers) */
#define TL_PREFILL_SM90_FLOP_CLK_BF16 4096.0 /* an SM's dense bf16 FLOPs a clock: the datasheet's
                                      * 989.4 TFLOP/s / (132 SMs x 1830 MHz) */
#define TL_PREFILL_SM90_FLOP_CLK_FP8 8192.0 /* e4m3: twice that */
#define TL_PREFILL_SM90_CHAIN 200.0  /* cycles: a row's running max as a dependent chain (32 max a
                                      * half row at ~4 cycles) and two shuffles before the first
                                      * exponential (guess) */
#define TL_PREFILL_SM90_TURN 100.0   /* cycles: a fence, a product issue and commit, and a wait's
                                      * return (guess) */
#define TL_PREFILL_SM90_ISSUE 0.5    /* warp instructions a scheduler issues a clock in the softmax:
                                      * Nsight Compute on the fp8 kernel on an H100 (2.2 warps a
                                      * scheduler; 0.50 issued a cycle: h100_prefill_ncu_fp8_run54.txt).
                                      * A profile, not fitted to a time; the kernel profiled
                                      * predicated its causal mask into every tile */
#define TL_PREFILL_STAGES 2          /* K/V tile buffers in LDS (double buffering; guess) */
#define TL_PREFILL_SCORE_OPS 3.0     /* lane-ops per score: FMA (x scale - max), max, sum (count) */
#define TL_PREFILL_P_OPS_BF16 0.5    /* P to bf16: one pack-convert per two */
#define TL_PREFILL_P_OPS_FP8 1.0     /* AMD: x 448 and a pack-convert per two (contract's P rule) */
#define TL_PREFILL_P_OPS_FP8_WGMMA 0.75 /* sm_90: one pair conversion per two, a pack per four (the
                                      * x 448 rides on the exponential's FMA) */
#define TL_PREFILL_MASK_OPS 2.0      /* lane-ops per score of a diagonal tile: compare, select */
#define TL_PREFILL_ROW_OPS 8.0       /* lane-ops per row and tile: the max and sum reductions
                                      * across the lanes sharing a row (shuffles and ops), the
                                      * correction factor */
#define TL_PREFILL_WAVES_SM90 8      /* warps an SM holds for this kernel: its O, S and Q fragments
                                      * take up to 255 registers a thread, 8 warps of the 64K (guess) */
#define TL_PREFILL_WAVES_AMD 8       /* waves a CU holds where the kernel's code is not in the build's
                                      * table: ~200 VGPRs and AGPRs of 512 a lane, 2 a SIMD (guess) */
#define TL_PREFILL_MISS_US 1.0       /* a miss's latency when the preset has none (guess) */
#define TL_PREFILL_L2_SHARE 0.8      /* the share of the caches K and V may take (Q, O pass through) */

typedef struct {
    tl_prefill_tiling tile;          /* the kernel's, on hw->arch */
    char instr[TL_HW_NAME_LEN];      /* the matrix instruction charged for Q.K and P.V */
    int instr_k;                     /* its K-depth */
    const char *operand;             /* "bf16" or "fp8": the matrix cores' inputs */
    double mma_tflops;               /* the rate charged (before TL_PREFILL_MMA_EFF) */
    long blocks;                     /* work-groups: ceil(seq / block_m) x heads */
    long qblocks;                    /* ceil(seq / block_m) */
    int resident;                    /* blocks a CU holds at once (waves, LDS) */
    long slots;                      /* block slots in use: min(blocks, CUs x resident) */
    double waves;                    /* blocks / (CUs x resident blocks a CU) */
    double overlap;                  /* the share of min(matrix, softmax) hidden (see above) */
    long tiles_total;                /* (query block, key tile, head) tiles without causal skipping */
    long tiles_computed;             /* those the kernel computes (causal ones skipped) */
    long tiles_masked;               /* computed tiles that cross the diagonal (masked) */
    long tiles_skipped;              /* tiles_total - tiles_computed */
    double flops;                    /* counted: causal FLOPs only, 2 (dqk + dv) per (row, key, head) */
    double flops_computed;           /* what the matrix cores run (whole tiles, the diagonal's included) */
    double flops_matrix;             /* flops_computed with K-depths rounded up to the instruction's */
    double exps;                     /* exponentials computed (one per computed score, one per row and tile) */
    double vector_ops;               /* lane-operations of the vector term */
    double lds_bytes, l2_bytes;      /* LDS reads and writes; K/V read from L2 by all blocks */
    int kv_fits;                     /* K and V fit the caches (read once from HBM) */
    double kv_passes;                /* passes over K and V from HBM */
    double hbm_bytes;                /* Q, K, V (and scales) read, O and LSE written */
    double mma_us, exp_us, vec_us, soft_us, compute_us, lds_us, l2_us, hbm_us;
    double chain_us;                 /* sm_90: the warpgroups' own chains (0 on AMD) */
    double load_mhz;                 /* sm_90: the clock the matrix ceiling implies (0 on AMD) */
    double chain_cycles, period_cycles; /* sm_90: a warpgroup's chain and the tile period (cycles) */
    double load_cycles, load_us;     /* sm_90: a K/V tile's load (cycles), and all tiles' (us) */
    const char *part;                /* sm_90: what sets the tile period ("matrix", "exp", "vector",
                                      * "pipeline", "load"); NULL on AMD */
    double body_us, tail_us, fixed_us, time_us;
    double tile_us;                  /* one tile of one block in the schedule */
    double tflops;                   /* counted FLOPs / time */
    const char *limiter;             /* "matrix", "exp", "vector", "pipeline", "load", "lds", "l2", "hbm", "tail" or "fixed" */
    /* AMD, from the kernel's own assembly (simulator/amd_code.h) where the build's table has its
     * instance (kernel names it): then the residency is the code's (registers, LDS) and compute_us
     * is tiles_computed x warps wave-iterations of its hot loop at code.cycles each over the CU's
     * SIMDs; mma_us, exp_us and vec_us stay the estimates above, for comparison. code.k NULL: the
     * estimates decide (a shape without an instance, a preset without register fields). */
    char kernel[TL_AMD_NAME_LEN];
    tl_amd_loop_cost code;
} tl_prefill_model_result;

/* The model for shape s (tl_prefill_shape_check) on hw. TL_EUSAGE for a NULL preset, a bad shape,
 * a preset without the instruction the kernel uses for s->dtype, or one without the rates the
 * model needs (transcendental_per_cu_clk, lds_bytes_per_cu_clk; on sm_90 the measured bf16_tflops
 * or fp8_tflops ceiling). Cost: O(blocks log slots) (the list schedule), no allocation beyond a heap of
 * slots. */
int tl_prefill_model(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_model_result *r);

/* The key tiles block qb computes (causal: up to its last row's key; else all), and how many of
 * them cross the diagonal (masked), for tiling t. */
long tl_prefill_block_tiles(const tl_prefill_shape *s, tl_prefill_tiling t, long qb, long *masked);

/* ---- the schedule of the blocks (draw prefill-tiles) ---- */
typedef struct {
    long qblock;              /* query rows [qblock x block_m, + block_m) */
    int head;
    int cu, slot;             /* its CU and block slot there */
    long tiles;               /* key tiles it computes */
    double start_us, end_us;  /* from the launch */
} tl_prefill_span;

/* The model (into *r) and its list schedule: blocks in the grid's order (causal: the last query
 * block first, its heads in order; then the one before), over r->slots block slots
 * (simulator/slots.h: the first blocks dealt over every XCD and CU alike, each later one to the
 * slot that frees first); a block starts at r->fixed_us at the earliest and takes tiles x
 * r->tile_us. span[qb x heads + head] is written for every block (cap: at least
 * r->blocks, else TL_EUSAGE). Cost: O(blocks log slots). */
int tl_prefill_schedule(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_span *span, long cap,
                        tl_prefill_model_result *r);

#endif
