/* simulator/topk.h: the cost model of exact top-k selection (contract/topk.h) on a hardware preset,
 * for the kernel kernels/topk.hip runs: a radix select of each row's k-th key, most significant
 * digit first, over `split` blocks per row, then an exact gather and a per-row sort.
 *
 * What the kernel does, and what the model charges for it (all rows of a batch in one launch per
 * step; no host synchronization between the launches):
 *   - passes: f32's 32-bit keys in 3 digits (11, 11, 10 bits), bf16's and f16's 16-bit keys in 2
 *     (8, 8). Each pass launches a histogram kernel (B x split blocks, each reading its chunk of the
 *     row) and a select kernel (one block per row, reading the row's histogram: its launch and two
 *     dependent loads). Around them: an init kernel, a count and a gather kernel (B x split blocks,
 *     each reading the rows once more), and the final sort (one block per row): 2 x passes + 4
 *     kernels.
 *   - bytes: every histogram pass, the count and the gather read each valid score once: passes + 2
 *     reads of the scores. The first comes from HBM; the later ones hit the L2 (and MALL) when the scores fit
 *     in it (the preset's l2_mib_per_xcd x xcds + llc_mib), else come from HBM again.
 *   - a read of `bytes` by `blocks` blocks takes max(bytes / the HBM (or L2) ceiling, bytes /
 *     (active CUs x the preset's per-CU stream)), active CUs = min(cus, blocks): a row on one CU
 *     streams at one CU's rate (Little's law), which is why long rows are split.
 *   - kernels: the first costs launch_us, each further one next_kernel_us; each scan adds
 *     2 x load_chain_us (its dependent loads).
 *   - the final sort: a bitonic sort of the k (key, index) pairs in shared memory, log2(K)(log2(K)+1)/2
 *     steps for K = k rounded up to a power of two, each a barrier and K / 1024 compare-exchanges per
 *     thread: TL_TOPK_SORT_STEP_CYCLES cycles a step at the preset clock; rows beyond the CUs run
 *     in further waves.
 * Estimates, not fitted: the constants below are stated guesses until a measurement judges them.
 * Ignored: imbalance between a row's chunks, atomic contention on the histograms, the cost of
 * rows shorter than one block's loads in flight, clock changes under load. */
#ifndef TL_SIM_TOPK_H
#define TL_SIM_TOPK_H

#include "../contract/topk.h"
#include "hw.h"

#define TL_TOPK_PASSES_32 3          /* the kernel's digits of a 32-bit key (2048 bins a pass) */
#define TL_TOPK_PASSES_16 2          /* of a 16-bit key (256 bins a pass) */
#define TL_TOPK_SORT_STEP_CYCLES 200 /* one bitonic step of the final sort (a barrier + a few loads) */
#define TL_TOPK_MIN_CHUNK 4096       /* a block's chunk is at least this many positions */

typedef struct {
    const tl_hw *hw;
    tl_topk_shape shape;
    int split;           /* blocks per row; 0: the model chooses (tl_topk_best_split) */
} tl_topk_problem;

typedef struct {
    int split, passes, kernels;
    long long blocks;          /* B x split */
    double scores_bytes;       /* the valid scores, once: the read floor's bytes */
    double hbm_bytes, l2_bytes;/* read from HBM and from L2 over the whole run */
    double read_us, launch_us, scan_us, sort_us, time_us;
    double first_read_us, later_read_us; /* one read of the scores: the first (HBM), each later one */
    int fits_l2;               /* the later passes hit the L2 */
    const char *limiter;       /* "hbm", "cu-stream" (too few blocks), "launch", "sort" */
} tl_topk_result;

/* The split the model picks: the fastest of 1, 2, 4, .. TL_TOPK_MAX_SPLIT_MODEL blocks per row
 * whose chunks hold at least TL_TOPK_MIN_CHUNK positions (1 for short rows). */
#define TL_TOPK_MAX_SPLIT_MODEL 64
int tl_topk_best_split(const tl_hw *hw, const tl_topk_shape *s);

/* One piece of the schedule of a batch's row 0, as the model times it (for the split picture). */
typedef enum {
    TL_TOPK_PHASE_HIST, TL_TOPK_PHASE_SELECT, TL_TOPK_PHASE_COUNT, TL_TOPK_PHASE_GATHER, TL_TOPK_PHASE_SORT,
    TL_TOPK_NPHASES
} tl_topk_phase;
typedef struct {
    int block;            /* which of row 0's split blocks (0 for the one-block-a-row kernels) */
    tl_topk_phase phase;
    int pass;             /* the radix pass of HIST and SELECT */
    double start_us, end_us;
} tl_topk_segment;
#define TL_TOPK_MAX_SEGMENTS (TL_TOPK_MAX_SPLIT_MODEL * 8 + 16)
/* The kernels of one run in launch order, each after its launch gap (launch_us for the first,
 * next_kernel_us after), with the durations tl_topk_sim charges: a read of the scores for every
 * histogram, the count and the gather (one bar per block of row 0), a select's dependent loads,
 * the final sort; the last segment ends at r->time_us. Fills seg (TL_TOPK_MAX_SEGMENTS) and *n.
 * Errors as tl_topk_sim's. */
int tl_topk_schedule(const tl_topk_problem *p, tl_topk_segment *seg, int *n, tl_topk_result *r);

/* Runs the model. TL_EUSAGE for a NULL preset, a bad shape (tl_topk_shape_check) or a split outside
 * [0, TL_TOPK_MAX_SPLIT_MODEL]. Cost: O(B) (the row lengths). */
int tl_topk_sim(const tl_topk_problem *p, tl_topk_result *r);

#endif
