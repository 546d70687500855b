/* kernels/quant.h: the fused quantization kernels' launcher (contract/quant.h; the judge:
 * reference/quant.c, which is numerics/' quantizers).
 *
 * Plain C header (the op row, ops/quant.c, calls it through tl_quant_gpu_kernels); implemented in
 * kernels/quant.hip, which exists only in GPU builds.
 *
 * What runs: one launch per quantization, no host synchronization inside it:
 *   quant_group<FAMILY> (fp8, fp8-fnuz, mxfp8, mxfp4, dispatch): min(tl_quant_blocks(s) tiles, the
 *     blocks the GPU holds at once) blocks of TL_QUANT_THREADS threads looping over the tiles; a
 *     thread loads TL_QUANT_VECS x 8 bf16 values of a tile (16-byte loads) and issues the next
 *     tile's before converting these, a 1 x 128 group being 16 lanes (an MX block 4); the group's
 *     largest |x| by a shuffle butterfly on the bits (integer max: NaN-free for FP8 as fmaxf,
 *     NaN-first for MX); the scale and codes by contract/quant.h's tl_quant_* functions (E4M3FN
 *     codes by gpu.h's tl_e4m3x2_hw pair conversion where the hardware has one, the same codes);
 *     codes out in 8-byte (FP4: 4-byte) stores, the scale by the group's first lane. dispatch
 *     writes into the records and its group-0 team copies the token's routing.
 *   quant_query<HADAMARD>: one block of TL_QUANT_QUERY_THREADS per 128-token block per head: 4 rows x 8 values a thread, the Hadamard
 *     butterfly in registers and shuffles, the tile's amax through shared memory, then codes.
 *   quant_unpack: the dispatch records back into codes, scales, ids, weights and source (a block a
 *     token, 8-byte copies).
 * Cost: one read of x and one write of the outputs; no atomics, deterministic.
 */
#ifndef TL_KERNELS_QUANT_H
#define TL_KERNELS_QUANT_H

#include "../contract/quant.h"
#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_quant_gpu tl_quant_gpu;
/* Device buffers for shape s (x, ids and weights for dispatch, codes or records, scales, the
 * unpacked fields). TL_EUSAGE for a bad shape; TL_EFAIL on a GPU error. */
int tl_quant_gpu_open(const tl_quant_shape *s, tl_quant_gpu **g);
/* x [rows][K] bf16; ids, weights [rows][topk] for dispatch (else NULL). */
int tl_quant_gpu_upload(tl_quant_gpu *g, const uint16_t *x, const int32_t *ids, const float *weights);
/* Fills codes / records and scales with `byte`, so that anything the kernel does not write shows. */
int tl_quant_gpu_poison(tl_quant_gpu *g, int byte);
/* One quantization (dispatch: records stamped with src_rank), then synchronizes. */
int tl_quant_gpu_run(tl_quant_gpu *g, int src_rank);
/* Reads back codes (tl_quant_code_bytes; dispatch: the records) and scales (NULL for dispatch). */
int tl_quant_gpu_read(tl_quant_gpu *g, uint8_t *codes, void *scales);
/* dispatch: runs quant_unpack on the device's records and reads the fields back (layouts of
 * reference/quant.h's tl_quant_unpack). */
int tl_quant_gpu_unpack(tl_quant_gpu *g, uint8_t *codes, float *scales, int32_t *ids, float *weights, int32_t *src_row,
                        int32_t *src_rank);
/* Times one quantization with kernels/bench.h's method (flush, warm-up, median; graph replay). */
int tl_quant_gpu_time(tl_quant_gpu *g, int src_rank, const tl_bench_opts *o, tl_bench_result *r);
void tl_quant_gpu_close(tl_quant_gpu *g);

typedef struct {
    int (*open)(const tl_quant_shape *s, tl_quant_gpu **g);
    int (*upload)(tl_quant_gpu *g, const uint16_t *x, const int32_t *ids, const float *weights);
    int (*poison)(tl_quant_gpu *g, int byte);
    int (*run)(tl_quant_gpu *g, int src_rank);
    int (*read)(tl_quant_gpu *g, uint8_t *codes, void *scales);
    int (*unpack)(tl_quant_gpu *g, uint8_t *codes, float *scales, int32_t *ids, float *weights, int32_t *src_row,
                  int32_t *src_rank);
    int (*time)(tl_quant_gpu *g, int src_rank, const tl_bench_opts *o, tl_bench_result *r);
    void (*close)(tl_quant_gpu *g);
} tl_quant_gpu_api;
/* The selected device's table (kernels/devices.c): this build's GPU (tl_quant_gpu_native, NULL without
 * one: kernels/absent.c), or the CPU executor's for an AMD target; NULL when nothing runs it. */
extern const tl_quant_gpu_api *const tl_quant_gpu_native;
extern const tl_quant_gpu_api *const *tl_quant_gpu_selected;
#define tl_quant_gpu_kernels (*tl_quant_gpu_selected)

#ifdef __cplusplus
}
#endif

#endif
