/* kernels/topk.h: the top-k kernel's C launcher API (kernels/topk*.hip, GPU builds only) and the
 * table it exports (NULL in a build without a GPU: kernels/absent.c). The contract: contract/topk.h. */
#ifndef TL_KERNELS_TOPK_H
#define TL_KERNELS_TOPK_H

#include "../contract/topk.h"
#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_TOPK_MAX_SPLIT 64

typedef struct tl_topk_gpu tl_topk_gpu;
/* Allocates device memory for a problem of shape s (scores B x n in s->dtype, lengths, outputs,
 * workspace for any split up to TL_TOPK_MAX_SPLIT). TL_EUSAGE for a bad shape; TL_EFAIL on a GPU error. */
int tl_topk_gpu_open(const tl_topk_shape *s, tl_topk_gpu **g);
/* Uploads the scores (B x n, the shape's dtype) and the row lengths (computed from the shape's rule
 * when s->lens is NULL: tl_topk_row_len). */
int tl_topk_gpu_upload(tl_topk_gpu *g, const void *scores);
/* Writes 0x7FFFFFFF into idx and count, so that anything the kernels fail to write shows. */
int tl_topk_gpu_poison(tl_topk_gpu *g);
/* Runs the selection with each row split over `split` blocks (1..TL_TOPK_MAX_SPLIT; the model
 * chooses it), then synchronizes. */
int tl_topk_gpu_run(tl_topk_gpu *g, int split);
/* Reads back idx [B][k] and count [B]. */
int tl_topk_gpu_read(tl_topk_gpu *g, int32_t *idx, int32_t *count);
/* Times one run with kernels/bench.h's method (flush, warm-up, median; graph replay). */
int tl_topk_gpu_time(tl_topk_gpu *g, int split, const tl_bench_opts *o, tl_bench_result *r);
void tl_topk_gpu_close(tl_topk_gpu *g);

typedef struct {
    int (*open)(const tl_topk_shape *s, tl_topk_gpu **g);
    int (*upload)(tl_topk_gpu *g, const void *scores);
    int (*poison)(tl_topk_gpu *g);
    int (*run)(tl_topk_gpu *g, int split);
    int (*read)(tl_topk_gpu *g, int32_t *idx, int32_t *count);
    int (*time)(tl_topk_gpu *g, int split, const tl_bench_opts *o, tl_bench_result *r);
    void (*close)(tl_topk_gpu *g);
} tl_topk_gpu_api;
extern const tl_topk_gpu_api *const tl_topk_gpu_kernels;

#ifdef __cplusplus
}
#endif

#endif
