/* kernels/topk.h: the exact top-k kernel's launcher (contract/topk.h; the judge: reference/topk.c).
 *
 * Plain C header (the op row, ops/, calls it through tl_topk_gpu_kernels); implemented in
 * kernels/topk.hip (the launcher) and kernels/topk_kernels.hip (the kernels), which exist only in
 * GPU builds.
 *
 * What runs: one launch of one of two kernels, B x split blocks of TL_TOPK_THREADS threads, all
 * rows of the batch, no host synchronization (contract/topk.h gives the geometry and the plan).
 *
 * topk_stream (the stream path): block b split + j streams chunk j of row b once, U 16-byte loads
 * in flight a thread, and offers each position's rank (key << 32 | ~index: distinct, larger
 * better) to a candidate buffer in shared memory: a rank above the buffer's threshold enters (one
 * shared atomic a wave); when the buffer overflows, it is cut to its best k by a radix select over
 * the 64-bit ranks (11/11/10 bits a half, ending when the k-th's bin is taken whole) and the
 * threshold rises to the cut's prefix; what did not get in is offered again. The chunk's best k
 * are exact: a rank cut or refused has k better ones in the chunk. split 1: the block sorts them
 * (by rank, or by index for the set) and writes the row; split > 1: they go to the row's merge
 * area, and the row's last block to finish (an acq_rel counter) offers the split x k ranks to its
 * buffer the same way, then writes the row. Cost: one read of the scores; a cut per (cap - k)
 * ranks that enter (random scores: the first cap, then about k ln(n / cap)); the sort.
 *
 * topk_rows (the resident path):
 *   - a block takes a ticket (the order blocks start in), which names its row b and chunk j, and
 *     loads its chunk (16-byte loads, TL_TOPK_VECS in flight a thread) into registers as keys; the
 *     scores are read from memory once;
 *   - a row of len <= k takes every position (rank = position);
 *   - otherwise, per radix pass, most significant digit first (float32 keys: 11, 11, 10 bits;
 *     16-bit keys: 8, 8): the block counts the keys that match the prefix found so far by digit in
 *     shared memory; with split > 1 it adds them into the row's histogram in device memory (integer
 *     atomics: the sums do not depend on their order) and meets the row's other blocks at a
 *     barrier; then every block reads the same histogram and finds the same bin holding the k-th
 *     key. A pass whose bin is taken whole ends the passes. The row now knows its threshold T (on
 *     the bits resolved), the keys above it and `need`, the ties (== T) it takes;
 *   - each block counts its keys > T and == T per slot, scans the counts over the block in index
 *     order, publishes its totals and meets the row's blocks once more: the exclusive sums over the
 *     lower chunks give its offsets. A key > T, or a tie among the `need` of lowest index across
 *     the row, goes to output position = the taken keys of lower index: the set in ascending index
 *     order, deterministic (nothing depends on the order of atomics);
 *   - the block of chunk 0 writes count (min(k, len)) and -1 past it; the row's last block to
 *     finish sorts the row's ranks in shared memory (bitonic, k <= 4096) when `sorted`, and zeroes
 *     the row's histograms and barrier for the next launch. A row whose counts do not add up (a
 *     kernel bug) gets count -1.
 * Positions past a row's length are never used: a 16-byte load that straddles the end of a row
 * brings them in, and their lanes are masked out.
 * A row's blocks wait for one another: the launcher refuses a split larger than the blocks the
 * device holds at once (with the ticket order, a waiting block's partners always get a slot).
 * Cost: one read of the scores; per pass a histogram in shared memory, its bins' atomics into
 * device memory and a barrier (an L2 round trip); one more barrier for the offsets; with split = 1
 * no barrier and no atomics outside the block.
 */
#ifndef TL_KERNELS_TOPK_H
#define TL_KERNELS_TOPK_H

#include "../contract/topk.h"
#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_topk_gpu tl_topk_gpu;
/* Allocates device memory for a problem of shape s (scores B x n in s->dtype, lengths, outputs,
 * workspace for any split up to TL_TOPK_MAX_SPLIT, zeroed). TL_EUSAGE for a bad shape; TL_EFAIL on a GPU error. */
int tl_topk_gpu_open(const tl_topk_shape *s, tl_topk_gpu **g);
/* Uploads the scores (B x n, the shape's dtype) and the row lengths (B int32; computed from the
 * shape's rule when s->lens is NULL: tl_topk_row_len). */
int tl_topk_gpu_upload(tl_topk_gpu *g, const void *scores);
/* Writes 0x7FFFFFFF into idx and count, so that anything the kernels fail to write shows. */
int tl_topk_gpu_poison(tl_topk_gpu *g);
/* Runs the selection by `plan` (contract/topk.h), then synchronizes. Resident: split from the
 * fewest blocks whose chunks fit their shared memory to the blocks the device holds at once;
 * stream: 1..TL_TOPK_MAX_SPLIT (its merge area, B x split x k ranks, is allocated on first use).
 * The model chooses it; TL_EUSAGE outside. */
int tl_topk_gpu_run(tl_topk_gpu *g, const tl_topk_plan *plan);
/* Reads back idx [B][k] and count [B]. */
int tl_topk_gpu_read(tl_topk_gpu *g, int32_t *idx, int32_t *count);
/* Times one run with kernels/bench.h's method (flush, warm-up, median; graph replay). */
int tl_topk_gpu_time(tl_topk_gpu *g, const tl_topk_plan *plan, const tl_bench_opts *o, tl_bench_result *r);
/* Where the time of one run goes, block by block (the resident path only): one run by plan as the bench times it
 * (tl_bench_run_marked: after one warm-up run, the flush and busy-wait of opts; a direct launch, no
 * graph), every block recording the moments it reached the points below. t_us: microseconds from
 * the end of the busy-wait (the moment the run could start); a block's entry is placed by the
 * device clock (tl_gpu_clock), the later points by its SM's cycle counter at the device's reported
 * clock. *end_us: when the run had ended (plus one launch). *blocks (B x split entries, in row and
 * chunk order) is the caller's to free. Cost: two flushes and two runs. The points:
 * contract/topk.h's TL_TOPK_TRACE_*. */
typedef struct {
    int row, chunk, sm;
    int passes;                       /* radix passes the row made */
    double t_us[TL_TOPK_TRACE_POINTS];
} tl_topk_trace_block;
int tl_topk_gpu_trace(tl_topk_gpu *g, const tl_topk_plan *plan, const tl_bench_opts *opts, tl_topk_trace_block **blocks,
                      int *n_blocks, double *end_us);
void tl_topk_gpu_close(tl_topk_gpu *g);

/* The launcher above as a table of functions (the op row is built without GPU code):
 * kernels/topk.hip exports it in a GPU build, kernels/absent.c defines it as NULL without one. */
typedef struct {
    int (*open)(const tl_topk_shape *s, tl_topk_gpu **g);
    int (*upload)(tl_topk_gpu *g, const void *scores);
    int (*poison)(tl_topk_gpu *g);
    int (*run)(tl_topk_gpu *g, const tl_topk_plan *plan);
    int (*read)(tl_topk_gpu *g, int32_t *idx, int32_t *count);
    int (*time)(tl_topk_gpu *g, const tl_topk_plan *plan, const tl_bench_opts *o, tl_bench_result *r);
    int (*trace)(tl_topk_gpu *g, const tl_topk_plan *plan, const tl_bench_opts *opts, tl_topk_trace_block **blocks,
                 int *n_blocks, double *end_us);
    void (*close)(tl_topk_gpu *g);
} tl_topk_gpu_api;
/* The selected device's table (kernels/devices.c): this build's GPU (tl_topk_gpu_native, NULL without
 * one: kernels/absent.c), or the CPU executor's for an AMD target; NULL when nothing runs it. */
extern const tl_topk_gpu_api *const tl_topk_gpu_native;
extern const tl_topk_gpu_api *const *tl_topk_gpu_selected;
#define tl_topk_gpu_kernels (*tl_topk_gpu_selected)

#ifdef __cplusplus
}
#endif

#endif
