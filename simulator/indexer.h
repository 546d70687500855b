/* simulator/indexer.h: the cost model of the DSA lightning indexer (contract/indexer.h) on a
 * hardware preset, for the kernel kernels/indexer.hip runs.
 *
 * The kernel: one block per BLOCK_Q consecutive query rows, one wave (warp) per row; Q and w of the
 * row in the wave's registers; the block walks the union of its rows' windows in KV tiles of
 * `tile` positions, double buffered in shared memory / LDS: while the block scores tile t, the
 * next tile is one load in flight (tile x D bytes of K, plus its scales); on sm_90 up to
 * TL_INDEXER_STAGES_SM90 - 1 raw tiles are in flight while the block decodes one to bf16 and scores
 * another, and the grid runs the last (longest) block first. The scores of a tile are
 * [tile positions x H heads] matrix-core products over D; the epilogue (x k_scale, relu, x w, the
 * head sum across lanes, -inf outside the row's window) runs on the vector ALU.
 *
 * What the model charges (times in microseconds; each term is its own work, the body takes the
 * largest, the limiter names it):
 *   - mma: the computed scores (tl_indexer_computed_scores: whole tiles, and every position of the
 *     block's union for each of its rows, so the causal triangle inside a block is paid) x 2 D H
 *     FLOPs at the instruction's rate: the preset's instruction for the kernel's operand format
 *     (sm_90: bf16 mma.sync on FP8 decoded to bf16; gfx950: FP8 16x16x128 f8f6f4; gfx942: FP8
 *     16x16x32 on the codes reinterpreted as FNUZ), capped by the preset's measured ceiling of
 *     that format, times TL_INDEXER_MMA_EFF (the share of issue the inner loop gives the matrix
 *     cores), over the CUs that hold blocks; on sm_90 instead the measured mma.sync loop ceiling
 *     times TL_INDEXER_MMA_EFF_SM90 times the share of it the independent accumulators on each
 *     scheduler sustain (resident warps / 4 x TL_INDEXER_CHAINS_WARP_SM90 over
 *     TL_INDEXER_CHAINS_FULL_SM90, at most 1). The K-depth: D / k instructions per 16-position x
 *     n-head product.
 *   - epilogue: AMD: per computed score and head TL_INDEXER_EPI_OPS vector operations (scale,
 *     relu, weight FMA) plus log2(lanes sharing a row) shuffle-adds per score, gfx942 fixing each K
 *     byte's 0x80. sm_90 (issue: every warp instruction but the copies): per score and head
 *     TL_INDEXER_EPI_OPS_SM90 plus the mma.sync issue's share, per score TL_INDEXER_POS_OPS_SM90
 *     and the ldmatrix loads' share, each K value decoded once per block (TL_INDEXER_DECODE_OPS).
 *     At the preset's vector lanes per CU and clock.
 *   - kv: every block reads its tiles' K bytes (tile x (D + 4) each) from L2. Each CU streams at
 *     most min(its cap, bytes in flight / latency) (Little's law): bytes in flight = resident
 *     blocks x one tile (sm_90: TL_INDEXER_STAGES_SM90 - 1 tiles); resident blocks = min(the blocks
 *     a CU gets, the waves a CU holds / BLOCK_Q, what the LDS holds; on AMD the kernel's own
 *     registers and LDS where its code is in the build's table). The latency and cap are an L2
 *     hit's for the share of the furthest window's K that fits 0.8 of one XCD's L2 (each XCD's L2
 *     is private: every XCD needs its own copy), a miss's for the rest, weighted (preset
 *     hbm_latency_us or 1 us; an L2 hit's is that times hbm_per_cu / l2_per_cu).
 *   - hbm: the contract's bytes (inputs once, logits written once) at the measured HBM rate.
 *   - waves of blocks: when the grid is one to four block slots (CUs x resident blocks) deep, the
 *     last partial wave leaves CUs idle: the body is divided by blocks / (waves x slots); under
 *     one wave the idle slots are already in the blocks a CU holds (its bytes in flight).
 *   - launch_us and item_fixed_us (the pipeline's first loads) added once.
 * Why skinny shapes lose on mi355x (seed 000, Figure 11): 2048 rows with BLOCK_Q = 1 give 8 blocks
 * a CU, fewer waves than a square's rows give, and 32K-64K positions of K (4-8 MiB) outgrow an
 * XCD's 4 MiB L2: fewer bytes in flight, a larger share at a miss's latency (README's seed table
 * has the model's figures beside the seed's; the model misses the seed's 32K loss at H = 64). A
 * larger BLOCK_Q cuts the K bytes by BLOCK_Q but, with one tile in flight a block, also
 * the bytes in flight: a latency-bound stream does not speed up; it pays where the matrix cores or
 * the decode limit, and on sm_90 where BLOCK_Q 1-2 leave too few warps (the shared memory of a
 * block: 3 a CU): at H = 32, 64K square, BLOCK_Q 1 / 2 / 4 / 8 give 116 / 232 / 310 / 310 TFLOP/s.
 * Constants: stated guesses, but for TL_INDEXER_MMA_EFF_SM90 and TL_INDEXER_CHAINS_FULL_SM90,
 * fitted to the H200's measurements of this kernel (bench/results/h200_indexer_bench_run43.csv).
 * Ignored: bank conflicts, the imbalance between a square's short and long blocks inside a wave,
 * clock changes under load, the logits' write traffic overlapping the reads. */
#ifndef TL_SIM_INDEXER_H
#define TL_SIM_INDEXER_H

#include "../contract/indexer.h"
#include "amd_code.h"
#include "hw.h"

#define TL_INDEXER_MMA_EFF 0.80    /* AMD: matrix-core share of the inner loop's issue (estimate) */
/* sm_90 is modelled as the kernel that runs there: E4M3 wgmma (sm_90a) on the codes as copied. */
#define TL_INDEXER_MMA_EFF_WGMMA 0.80 /* sm_90a: share of the preset's FP8 ceiling the products keep between
                                       * the per-tile barrier and the 4-k-step product per row (an a-priori
                                       * estimate, not fitted to any measurement of this kernel) */
#define TL_INDEXER_EPI_OPS 3.0     /* AMD: vector ops per score and head: x scale, max 0, FMA with w */
/* sm_90a: the epilogue as warp instructions a product (64 positions x RP rows, 4 warps) issues at
 * TL_INDEXER_IPC_WGMMA a scheduler: a thread's accumulators of a row cost H / 2 maxes, H / 2 FMAs
 * and H / 8 weight loads (1.125 H), plus PRODUCT_INSTR a product (the wgmma issue, fences, waits)
 * and ROW_INSTR a row (its cross-lane sum, bound, scale, store and bookkeeping). IPC and
 * PRODUCT_INSTR are fitted to a Nsight Compute profile of the 8K squares (SM clock 1.78 GHz): 2.36
 * warp instructions a clock an SM at both H, 203 a warp a product at H = 64 (one row a product)
 * and 288 at H = 32 (two rows), so 46 a product and 85 a row for a kernel that summed each row
 * across its quad alone. ROW_INSTR counts the shipped kernel, which sums two rows at once (three
 * shuffles for two rows, int windows from shared memory): 85 less the 17 instructions a row that
 * removes, by count. The profile and its kernel: bench/journal/runs.md. */
#define TL_INDEXER_IPC_WGMMA 0.59
#define TL_INDEXER_PRODUCT_INSTR_WGMMA 46.0
#define TL_INDEXER_ROW_INSTR_WGMMA 68.0
#define TL_INDEXER_SMEM_GBPS_WGMMA 79.2 /* sm_90a: GB/s an SM's products read their shared-memory operands
                                         * at (the K tile by ldmatrix, each product's Q by the wgmma).
                                         * Fitted to a kernel that read the K tile from shared memory for
                                         * every row: 39-42 bytes a clock at 1980 MHz at H = 32 and 64
                                         * (192 and 256 bytes a score): 40 x 1.98 */
/* sm_90a's BLOCK_Q: the configuration the shipped wgmma kernel was timed at on the H200, every shape
 * of README's table (bench/results/h200_indexer_bench_run52.csv, the model -11.5% .. +3.8% of it).
 * BLOCK_Q 1, 2 and 4 are checked but not timed for this kernel; the model puts 4 up to 3% ahead of
 * 8 on the 8K squares, inside that error (an earlier form of the kernel, the K tile read from
 * shared memory by every product, was timed at both: h200_indexer_bench_run50.csv). */
#define TL_INDEXER_TIMED_BLOCK_Q_SM90 8
#define TL_INDEXER_WAVES_SM90 16   /* warps an SM holds: up to 128 registers a thread (2 blocks of 8 warps) */
#define TL_INDEXER_WAVES_AMD 16    /* waves a CU holds where the kernel's code is not in the build's
                                    * table: ~100 VGPRs a lane (Q as FP8 fragments) */
#define TL_INDEXER_MISS_US 1.0     /* a miss's latency when the preset has none */

typedef struct {
    const tl_hw *hw;
    tl_indexer_shape shape; /* shape.block_q 0: the model chooses (tl_indexer_best_block_q) */
} tl_indexer_problem;

typedef struct {
    int block_q, tile;
    char instr[TL_HW_NAME_LEN];
    int instr_k, k_steps;          /* the instruction's K-depth and D / k */
    const char *operand;           /* "bf16" (decoded) or "fp8" */
    long blocks;
    int resident;                  /* blocks a CU holds at once */
    int cu_slots;                  /* blocks a CU could hold (waves / BLOCK_Q, the LDS) */
    int cu_waves;                  /* waves (warps) a CU holds: TL_INDEXER_WAVES_* */
    double block_waves;            /* blocks / (CUs x resident) */
    double scores, computed;       /* in-window scores; scores the matrix cores compute */
    double flops, matrix_flops;    /* 2 D H x each */
    double kv_bytes;               /* K and scales read from L2 by all blocks */
    double hbm_bytes;              /* the contract's bytes */
    int fits_l2;                   /* the furthest window's K fits one XCD's L2 */
    double cu_gbps;                /* one CU's K stream */
    double mma_tflops;             /* the rate charged */
    double mma_us, epi_us, kv_us, hbm_us, fixed_us, balance, time_us;
    double smem_us; /* sm_90a: the products' shared-memory operand reads (0 elsewhere) */
    double tflops;                 /* counted FLOPs / time */
    const char *limiter;           /* "mma", "smem-operands", "epilogue", "kv-stream", "hbm"; with the
                                    * kernel's code: its loop's bound ("matrix", "valu", "lds", "issue") */
    double l2_hits;                /* the share of the K stream that hits one XCD's L2 */
    /* AMD, from the kernel's own assembly (simulator/amd_code.h) where the build's table has the
     * instance indexer_kernel<H, BLOCK_Q> (kernel names it): the residency is the code's and
     * code_us replaces mma_us and epi_us (kept as the estimates, for comparison): computed / 16
     * wave-iterations of its hot loop (one 16-position fragment of one row's scores) at
     * code.cycles each, over the CU's SIMDs. code.k NULL: the estimates decide. */
    char kernel[TL_AMD_NAME_LEN];
    tl_amd_loop_cost code;
    double code_us;
} tl_indexer_result;

/* Runs the model. TL_EUSAGE for a NULL preset, a bad shape, or an arch without the kernel's
 * instruction. Cost: O(blocks) for the tiles (O(rows) with a list of windows). */
int tl_indexer_sim(const tl_indexer_problem *p, tl_indexer_result *r);

/* The BLOCK_Q the model picks, which is what the launcher launches (ops/indexer.c asks the model):
 *   - sm_90a: TL_INDEXER_TIMED_BLOCK_Q_SM90, the one configuration the shipped kernel has been timed
 *     at, on every shape (the model's margins between BLOCK_Q there are inside its own error);
 *   - AMD: the fastest of 1, 2, 4 by the model (a larger one must be 2% faster). 1 on error.
 * An explicit shape.block_q is not a pick: the model then models that one. */
int tl_indexer_best_block_q(const tl_hw *hw, const tl_indexer_shape *s);

/* ---- the schedule of the blocks (draw indexer-tiles) ---- */
/* One block of the grid as the schedule places it. */
typedef struct {
    long block;               /* query rows [block x BLOCK_Q, + BLOCK_Q) */
    int cu, slot;             /* its CU and block slot there (waves slot x BLOCK_Q .. + BLOCK_Q - 1) */
    long tiles;               /* KV tiles it walks (tl_indexer_block_tiles) */
    double start_us, end_us;  /* from the launch */
} tl_indexer_span;

/* Lays the grid's blocks over CUs and their block slots at the model's rates: runs tl_indexer_sim
 * (into *r), then deals the first blocks to slots in the order the model's XCD numbering gives
 * (slot k: XCD k % xcds, CU (k / xcds) % (cus / xcds) of that XCD, slot k / cus: so a grid smaller
 * than the slots fills every CU alike), each later block to the slot that frees first (ties: the
 * lower k). Blocks start at r->fixed_us (launch, the pipeline's first loads) and take tiles x
 * tile_us, where tile_us = resident x active CUs x body / (the grid's tiles) and body is the
 * model's largest term (mma, smem-operands, epilogue, kv-stream or hbm, before its partial-wave factor): a block
 * tile costs the same throughout, the rate at r->resident blocks a CU. The list schedule makes the
 * tail by itself, so its end (*end_us, the last block's end) can differ from r->time_us: the model
 * ignores the square's short-then-long blocks, and divides the body by its partial-wave factor
 * (r->balance) only for a partial wave after a full one (under one wave, r->resident charges the
 * idle slots). cap: spans writable; fewer
 * than r->blocks is TL_EUSAGE. Cost: O(blocks log slots) time, O(slots) memory. */
int tl_indexer_schedule(const tl_indexer_problem *p, tl_indexer_span *span, long cap, tl_indexer_result *r,
                        double *end_us);

/* ---- one block's pipeline against the naive loop (draw indexer-pipeline, seed Figure 7) ---- */
#define TL_INDEXER_NAIVE_OPS 3.0   /* naive: vector ops per multiply-add (decode q, decode k, FMA) */
#define TL_INDEXER_MAX_STEPS 4096

typedef enum {
    TL_IDX_Q,          /* tiled: Q and w of the block's rows into registers, once */
    TL_IDX_LOAD,       /* tiled: one KV tile (K and scales) copied into an LDS buffer */
    TL_IDX_MMA,        /* tiled: the tile's [positions x heads] products on the matrix cores */
    TL_IDX_EPI,        /* tiled: x k_scale, relu, x w, head sum (vector ALU) */
    TL_IDX_NAIVE_LOAD, /* naive: one head's q and k re-read from memory, every score */
    TL_IDX_NAIVE_FMA,  /* naive: one head's D scalar multiply-adds a score (vector ALU) */
} tl_indexer_step_kind;

typedef struct {
    int naive;                  /* 1: the naive loop's step */
    tl_indexer_step_kind kind;
    int index;                  /* the tile (LOAD, MMA, EPI) or head (NAIVE_*) */
    int buffer;                 /* LOAD: the LDS buffer, 0 or 1 */
    double start_us, end_us;    /* from the block's start */
} tl_indexer_step;

typedef struct {
    int tile, tiles, waves;     /* KV tile, tiles walked, the naive's waves (one score a lane) */
    double load_us, q_us, mma_us, epi_us;   /* the tiled kernel's step costs */
    double naive_load_us, naive_fma_us;     /* the naive loop's, per head */
    double tiled_us, naive_us;  /* each kernel's end */
} tl_indexer_pipe;

/* One block of p->shape.block_q rows (0: 1) scoring `positions` KV positions (1..65536), alone on a
 * CU, two ways, at the model's per-CU rates on p->hw:
 *   tiled: Q and w loaded once; tiles copied into two LDS buffers in turn (tile t + 2 issued when
 *     tile t's epilogue ends: the loop issues the next copy, waits for its tile, computes it); a
 *     tile's products start when its copy has landed and the previous tile's epilogue has ended.
 *     A copy takes the model's load latency (an L2 hit's when `positions` of K fit an XCD's L2)
 *     plus its bytes at the CU's cap; a row's products run on one matrix core (the instruction's
 *     rate, capped by the preset's ceiling, x TL_INDEXER_MMA_EFF, over cus x matrix cores); the
 *     epilogue on that core's SIMD (vector lanes / matrix cores a clock), as the model charges it.
 *   naive: one score a lane, waves over the CU's SIMDs; per head, q[h][:] and k[j][:] re-read (an
 *     L2 hit's latency plus 2 D bytes a lane at the CU's L2 rate shared by the SIMDs), then D
 *     multiply-adds of TL_INDEXER_NAIVE_OPS vector ops each; no overlap between the two.
 * Writes the steps (naive's first) and *c. TL_EUSAGE for bad input, more than cap steps, or a
 * preset without the model's instruction. Cost: O(tiles + heads). */
int tl_indexer_pipeline(const tl_indexer_problem *p, long positions, tl_indexer_step *step, int cap, int *n,
                        tl_indexer_pipe *c);

/* The kernel's KV tile on arch ("sm_*": TL_INDEXER_TILE_SM90, else TL_INDEXER_TILE_AMD). */
int tl_indexer_tile(const char *arch);

#endif
