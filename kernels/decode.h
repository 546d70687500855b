/* kernels/decode.h: the split-KV decode kernels' launcher (contract/decode.h; the judge:
 * reference/decode.c; the model: simulator/decode.h).
 *
 * Plain C header (the op row, ops/decode.c, calls it through tl_decode_gpu_kernels); implemented in
 * kernels/decode*.hip, which exist only in GPU builds (a build without them links kernels/absent.c's
 * NULL).
 *
 * What runs, for both kinds (contract/decode.h gives the function, the layouts and the geometry):
 *   - the shard launch: tl_decode_groups(s, shards) work-groups; a paged group serves the gqa query
 *     heads of one (request, KV head, shard) from one read of its pages through the block table; a
 *     dual-scope group serves one block of heads (tl_decode_group_heads: 32, or 16 when 32 does
 *     not divide H) of one (request, query token, shard), each latent row read once by the group,
 *     dequantized once into shared memory / LDS and used by all its heads. Shard s of a row
 *     covers the slots tl_decode_shard_range(tl_decode_row_slots(s, r), shards,
 *     tl_decode_granule(kind), s) and runs an online softmax over them in float32 (scores scaled by
 *     tl_decode_scale(s)); a dual-scope group counts exactly the top-k entries tl_decode_topk_counts
 *     counts. Scores and P.V accumulate in float32 on the matrix cores; each weight (times the
 *     FP8 value scale) enters P.V as a bf16 pair hi + lo (two products, 2^-16 of it at most: the
 *     bound's pv_bits, numerics/softmax.h). With shards = 1 it writes O and LSE; otherwise the
 *     partials (o normalized, lse; a shard with no counted key: o = 0, lse = -inf);
 *   - with shards > 1, the merge launch: one work-group (or wave) per (row, head) combines its
 *     shards with tl_decode_merge_stats / tl_decode_merge_weight / tl_decode_merge_lse (the
 *     contract's merge; never NaN: a row with no key gets O = 0, LSE = -inf).
 * Every element of O and LSE is written by every run. Cost: the model's (simulator/decode.h).
 */
#ifndef TL_KERNELS_DECODE_H
#define TL_KERNELS_DECODE_H

#include "../contract/decode.h"
#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_decode_gpu tl_decode_gpu;
/* Checks shape s (tl_decode_shape_check), keeps a copy of it and of its lens, and allocates device
 * memory for the inputs, O and LSE, and the partials of up to TL_DECODE_MAX_SHARDS shards where
 * they fit (tl_decode_partial_bytes; otherwise run() allocates what a larger shard count needs,
 * outside any timing). TL_EUSAGE for a bad shape; TL_EFAIL on a GPU error (out of memory included). */
int tl_decode_gpu_open(const tl_decode_shape *s, tl_decode_gpu **g);
/* Uploads the inputs of contract/decode.h (the pointers the kind and format need; sizes from the
 * shape: tl_decode_q_elems, tl_decode_cache_elems, tl_decode_scale_elems, tl_decode_table_elems,
 * tl_decode_topk_elems) and the lens kept at open. The caller has checked them
 * (tl_decode_inputs_check). */
int tl_decode_gpu_upload(tl_decode_gpu *g, const tl_decode_inputs *in);
/* Fills O, LSE and the partials with NaN, so that anything the kernels fail to write shows. */
int tl_decode_gpu_poison(tl_decode_gpu *g);
/* Runs the shard launch (and the merge when shards > 1), then synchronizes. shards: 1..
 * TL_DECODE_MAX_SHARDS, or 0 for tl_decode_auto_shards(s, the device's compute units); TL_EUSAGE
 * outside. *used (may be NULL): the shard count run. */
int tl_decode_gpu_run(tl_decode_gpu *g, int shards, int *used);
/* Reads back O [rows][H][dv] and LSE [rows][H] (float32). */
int tl_decode_gpu_read(tl_decode_gpu *g, float *o, float *lse);
/* Times one run (both launches) with kernels/bench.h's method (flush, warm-up, median; graph
 * replay when o->use_graph). shards as for run. */
int tl_decode_gpu_time(tl_decode_gpu *g, int shards, const tl_bench_opts *o, tl_bench_result *r);
/* Where the time of one dual-scope run goes, block by block: one run as the bench times it
 * (tl_bench_run_marked: after one warm-up run, the flush and busy-wait of opts; direct launches, no
 * graph), the shard groups and the merge's blocks recording the moments they reached
 * contract/decode.h's TL_DECODE_TRACE_* points. t_us: microseconds from the end of the busy-wait
 * (the moment the run could start); a block's entry is placed by the device clock (tl_gpu_clock:
 * about 1 us resolution on NVIDIA), its later points by its SM's cycle counter at the device's
 * reported clock. *end_us: when the run had ended (plus one launch). *blocks (the groups in launch
 * order, then the merge's blocks) is the caller's to free. TL_EUSAGE for the paged kind. Cost: two
 * flushes and two runs. */
typedef struct {
    int merge;            /* 0: a shard group; 1: a merge block */
    long block;           /* its index in its launch */
    long row;             /* shard groups: (request, query token) row, head block, shard; merge: -1 */
    int hblock, shard, sm;
    double t_us[TL_DECODE_TRACE_POINTS];
} tl_decode_trace_block;
int tl_decode_gpu_trace(tl_decode_gpu *g, int shards, const tl_bench_opts *opts, tl_decode_trace_block **blocks,
                        long *n_blocks, double *end_us);
void tl_decode_gpu_close(tl_decode_gpu *g);

/* The launcher as a table (NULL without a GPU: kernels/absent.c). */
typedef struct {
    int (*open)(const tl_decode_shape *s, tl_decode_gpu **g);
    int (*upload)(tl_decode_gpu *g, const tl_decode_inputs *in);
    int (*poison)(tl_decode_gpu *g);
    int (*run)(tl_decode_gpu *g, int shards, int *used);
    int (*read)(tl_decode_gpu *g, float *o, float *lse);
    int (*time)(tl_decode_gpu *g, int shards, const tl_bench_opts *o, tl_bench_result *r);
    int (*trace)(tl_decode_gpu *g, int shards, const tl_bench_opts *opts, tl_decode_trace_block **blocks, long *n_blocks,
                 double *end_us);
    void (*close)(tl_decode_gpu *g);
} tl_decode_gpu_api;
/* The selected device's table (kernels/devices.c): this build's GPU (tl_decode_gpu_native, NULL without
 * one: kernels/absent.c), or the CPU executor's for an AMD target; NULL when nothing runs it. */
extern const tl_decode_gpu_api *const tl_decode_gpu_native;
extern const tl_decode_gpu_api *const *tl_decode_gpu_selected;
#define tl_decode_gpu_kernels (*tl_decode_gpu_selected)

#ifdef __cplusplus
}
#endif

#endif
