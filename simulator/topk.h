/* simulator/topk.h: the cost model of exact top-k selection (contract/topk.h) on a hardware preset,
 * for the kernel kernels/topk*.hip runs: one launch, each row over `split` blocks that keep their
 * chunk of the row's keys in shared memory, a radix select of the k-th key, most significant digit
 * first, with the row's blocks meeting at a barrier after each pass, then an exact placement and,
 * for sorted output, a sort by the row's last block.
 *
 * What the model charges (the geometry is the contract's: TL_TOPK_THREADS, TL_TOPK_VECS,
 * tl_topk_block_smem):
 *   - blocks a CU holds at once: the fewest of TL_TOPK_REG_BLOCKS_PER_CU (registers), the preset's
 *     shared memory over a block's, and the CU's threads; a split whose chunk does not fit the
 *     shared memory, or whose row does not fit the GPU at once, is not a split the kernel can run;
 *   - one block's life, on its own: its ticket (split > 1: one dependent load, load_chain_us);
 *     its chunk's load, hbm_latency_us for each TL_TOPK_VECS x TL_TOPK_THREADS x 16 bytes in
 *     flight, or the wave's bytes at the HBM ceiling if that is longer; per radix pass: the chunk's
 *     keys counted in shared memory (TL_TOPK_KEY_OPS lane operations a key over the CU's lanes),
 *     TL_TOPK_PASS_STEPS block-wide steps (a barrier and the code around it, whose instructions a
 *     block fetches cold: TL_TOPK_STEP_CYCLES each), and with split > 1 the row barrier with the
 *     histogram's loads (TL_TOPK_ROW_SYNC_CHAINS x load_chain_us); the counts (2 steps, and with
 *     split > 1 another row barrier and the chunks' counts); the placement (5 steps a tile); the
 *     end (a step, and the last block's atomic); the sort when sorted;
 *   - passes: 16-bit keys 2; float32 keys 2 of their 3, as the k-th of continuous scores sits
 *     alone in its 22-bit bin and the third pass is skipped (ties or few distinct values take 3:
 *     the model does not see the data);
 *   - the whole launch: launch_us, then the blocks in waves of what the GPU holds at once, at most
 *     as fast as the HBM reads the scores once: max(blocks / resident x a block's life, the scores
 *     at the HBM ceiling + a block's life after its load).
 * The costs below are partly fitted: TL_TOPK_ROW_SYNC_CHAINS to H200 traces of this kernel's
 * 256-thread form (bench/journal/runs.md: a row barrier with its histogram's loads, about 2 us
 * beyond the local steps); TL_TOPK_STEP_CYCLES is a stated guess, not fitted. Ignored:
 * imbalance between a row's chunks, atomic contention on the row's histogram (pass 1 of normal
 * scores puts most keys in a few bins), rows of a causal batch shorter than their blocks, clock
 * changes under load. */
#ifndef TL_SIM_TOPK_H
#define TL_SIM_TOPK_H

#include "../contract/topk.h"
#include "hw.h"

#define TL_TOPK_REG_BLOCKS_PER_CU 2 /* sm_90: 64 registers a thread (ptxas) -> 2 blocks of 512 in 64K */
#define TL_TOPK_KEY_OPS 8           /* lane operations a key costs in a histogram pass */
#define TL_TOPK_PASS_STEPS 6        /* block-wide steps of a pass: clear, count, the pick's scan (3), pick */
#define TL_TOPK_STEP_CYCLES 400     /* one block-wide step */
#define TL_TOPK_ROW_SYNC_CHAINS 6   /* a row barrier and its histogram's loads, in load_chain_us */
#define TL_TOPK_SORT_STEP_CYCLES 200 /* one bitonic step of the sort (a barrier + a few loads) */

/* The stream path (contract/topk.h's TL_TOPK_STREAM), as the model charges it: blocks in waves of
 * what the GPU holds at once, none waiting for another; a block's life: its chunk streamed
 * (TL_TOPK_STREAM_KEY_OPS lane operations a score, two block-wide steps a tile of TL_TOPK_VECS x
 * TL_TOPK_THREADS vectors, the loads as the resident path's), the cuts of its buffer (random
 * scores: the first cap ranks enter, then about k ln(n / cap); a cut per cap - k of them, each
 * TL_TOPK_CUT_PASSES radix passes over the buffer), the output's bitonic sort (always: the set goes
 * out in index order); with split > 1 the row's last block reads the split x k ranks from L2 and
 * merges them the same way. Stated guesses, not fitted: TL_TOPK_STREAM_KEY_OPS, TL_TOPK_CUT_PASSES. */
#define TL_TOPK_STREAM_KEY_OPS 10
#define TL_TOPK_CUT_PASSES 3

typedef struct {
    const tl_hw *hw;
    tl_topk_shape shape;
    int split;           /* blocks per row; 0: the model chooses the path and the split (tl_topk_best_plan) */
    tl_topk_path path;   /* with split > 0: the path */
} tl_topk_problem;

typedef struct {
    tl_topk_path path;
    int split, passes;       /* passes: the resident path's radix passes; the stream path's cuts a block */
    int per_cu;                /* blocks a CU holds at once */
    long long blocks;          /* B x split */
    double waves;              /* blocks over what the GPU holds at once */
    double smem_bytes;         /* a block's shared memory */
    double scores_bytes;       /* the valid scores, once: the read floor's bytes */
    double hbm_bytes;          /* read from HBM over the whole run (the scores, once) */
    double start_us, load_us, pass_us, count_us, gather_us, done_us, sort_us; /* one block's life, in order */
    double block_us;           /* their sum */
    double sync_us;            /* the part of block_us that is barriers and dependent loads */
    double read_us;            /* the scores at the HBM ceiling */
    double launch_us, time_us;
    const char *limiter;       /* "hbm", "latency" (a block's chain of barriers), "launch", "sort" */
} tl_topk_result;

/* The resident split the model picks: the fastest of 1, 2, 4, .. TL_TOPK_MAX_SPLIT that the kernel
 * can run on the preset (a larger one must be 2% faster); 0 when none can. */
int tl_topk_best_split(const tl_hw *hw, const tl_topk_shape *s);
/* The plan the model picks: the resident path's best split against the stream path's (1, 2, 4, ..
 * up to TL_TOPK_MAX_SPLIT; a larger one must be 2% faster), the faster. TL_EUSAGE as tl_topk_sim. */
int tl_topk_best_plan(const tl_hw *hw, const tl_topk_shape *s, tl_topk_plan *plan);
/* The fewest blocks a row can run over on the preset (1, 2, 4, ..; the smallest whose chunk fits
 * the shared memory); 0 when none does. */
int tl_topk_fewest_split(const tl_hw *hw, const tl_topk_shape *s);

/* One piece of the schedule of a batch's row 0, as the model times it (for the split picture). */
typedef enum {
    TL_TOPK_PHASE_LOAD, TL_TOPK_PHASE_HIST, TL_TOPK_PHASE_SELECT, TL_TOPK_PHASE_COUNT, TL_TOPK_PHASE_GATHER,
    TL_TOPK_PHASE_SORT, TL_TOPK_NPHASES
} tl_topk_phase;
typedef struct {
    int block;            /* which of row 0's split blocks */
    tl_topk_phase phase;
    int pass;             /* the radix pass of HIST and SELECT */
    double start_us, end_us;
} tl_topk_segment;
#define TL_TOPK_MAX_DRAWN_BLOCKS 64 /* the picture draws at most this many of a row's blocks */
#define TL_TOPK_MAX_SEGMENTS (TL_TOPK_MAX_DRAWN_BLOCKS * 12 + 4)
/* The life of row 0's blocks (the first TL_TOPK_MAX_DRAWN_BLOCKS) on the resident path (split 0:
 * its best split) after the launch, phase by phase
 * as tl_topk_sim charges them: the load, each pass's histogram and its barrier with the select
 * (SELECT), the counts and their barrier, the placement, the sort on the last block; the last
 * segment ends at the block's end, launch_us + block_us. Fills seg (TL_TOPK_MAX_SEGMENTS) and *n.
 * Errors as tl_topk_sim's. */
int tl_topk_schedule(const tl_topk_problem *p, tl_topk_segment *seg, int *n, tl_topk_result *r);

/* Runs the model. TL_EUSAGE for a NULL preset, a bad shape (tl_topk_shape_check), a split outside
 * [0, TL_TOPK_MAX_SPLIT], or one the kernel cannot run on the preset (its chunk does not fit the
 * shared memory, or its row does not fit the GPU at once). Cost: O(B) (the row lengths). */
int tl_topk_sim(const tl_topk_problem *p, tl_topk_result *r);

#endif
