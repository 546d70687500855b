/* kernels/prefill.h: the causal prefill attention kernel's launcher (contract/prefill.h; the judge:
 * reference/prefill.c; the model: simulator/prefill.h).
 *
 * Plain C header (the op row, ops/prefill.c, calls it through tl_prefill_gpu_kernels); implemented in
 * kernels/prefill.hip, which exists only in GPU builds (a build without it links kernels/absent.c's
 * NULL).
 *
 * What runs: one launch of ceil(seq / block_m) x H work-groups (tl_prefill_tiling_for of the device's
 * arch), the query blocks that see the most keys first; each group computes O and LSE of block_m
 * query rows of one head with an online softmax in float32, walking the keys in tiles of block_n,
 * the causal tiles above the diagonal skipped and the diagonal ones masked. kernels/prefill.hip's
 * header gives the per-target arithmetic (what multiplies in which format, how P is rounded).
 * Every element of O and LSE is written by every run. Supported: dqk 128 or 192, dv 128 (the
 * presets: mistral-7b, qwen3-8b, deepseek-v2-lite); open() refuses other dims with TL_EUSAGE.
 * Cost: the model's (simulator/prefill.h).
 */
#ifndef TL_KERNELS_PREFILL_H
#define TL_KERNELS_PREFILL_H

#include <stdint.h>

#include "../contract/prefill.h"
#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_prefill_gpu tl_prefill_gpu;

/* 1 when the kernel serves dims (dqk, dv): dqk 128 or 192, dv 128. */
int tl_prefill_gpu_dims_ok(int dqk, int dv);
/* Checks shape s (tl_prefill_shape_check, the dims above, the device's shared memory), keeps a copy,
 * and allocates device memory for the inputs, O and LSE. tile: NULL for the contract's
 * (tl_prefill_tiling_for of the device's arch), or another tiling to try (sm_90 bf16 also has the
 * mma.sync kernel's 128 x 64 on 4 or 8 warps, dqk 192 on 8); TL_EUSAGE when no kernel is built for it. TL_EUSAGE for a bad or
 * unsupported shape; TL_EFAIL on a GPU error (out of memory included). */
int tl_prefill_gpu_open(const tl_prefill_shape *s, const tl_prefill_tiling *tile, tl_prefill_gpu **g);
/* Uploads the inputs (contract/prefill.h's layouts; sizes from the shape): q, k, v are uint16 bf16
 * bits or uint8 E4M3FN codes as s->dtype says; the scales [heads][nblk] are read for fp8 only. */
int tl_prefill_gpu_upload(tl_prefill_gpu *g, const void *q, const void *k, const void *v, const float *q_scale,
                          const float *k_scale, const float *v_scale);
/* Fills O and LSE with NaN, so that anything the kernel fails to write shows. */
int tl_prefill_gpu_poison(tl_prefill_gpu *g);
/* Runs the kernel once, then synchronizes. */
int tl_prefill_gpu_run(tl_prefill_gpu *g);
/* Reads back O [seq][H][dv] (bf16 bits) and LSE [H][seq] (float32). */
int tl_prefill_gpu_read(tl_prefill_gpu *g, uint16_t *o, float *lse);
/* Times one run with kernels/bench.h's method. *sm_mhz: the SM clock during the last timed
 * iteration (work-group 0, the longest: its SM's cycles over the global timer's ns across its
 * run), 0 when the device cannot say. */
int tl_prefill_gpu_time(tl_prefill_gpu *g, const tl_bench_opts *o, tl_bench_result *r, double *sm_mhz);
void tl_prefill_gpu_close(tl_prefill_gpu *g);
/* Mantissa bits the open kernel's Q.K accumulator keeps: 13 for the sm_90a kernel's E4M3 wgmma
 * (Hopper's FP8 accumulator; numerics/softmax.h's acc_bits), 23 (float32) for every other kernel. */
int tl_prefill_gpu_acc_bits(const tl_prefill_gpu *g);

/* The launcher as a table (NULL without a GPU: kernels/absent.c). */
typedef struct {
    int (*dims_ok)(int dqk, int dv);
    int (*open)(const tl_prefill_shape *s, const tl_prefill_tiling *tile, tl_prefill_gpu **g);
    int (*upload)(tl_prefill_gpu *g, const void *q, const void *k, const void *v, const float *q_scale,
                  const float *k_scale, const float *v_scale);
    int (*poison)(tl_prefill_gpu *g);
    int (*run)(tl_prefill_gpu *g);
    int (*read)(tl_prefill_gpu *g, uint16_t *o, float *lse);
    int (*time)(tl_prefill_gpu *g, const tl_bench_opts *o, tl_bench_result *r, double *sm_mhz);
    void (*close)(tl_prefill_gpu *g);
    int (*acc_bits)(const tl_prefill_gpu *g);
} tl_prefill_gpu_api;
/* The selected device's table (kernels/devices.c): this build's GPU (tl_prefill_gpu_native, NULL without
 * one: kernels/absent.c), or the CPU executor's for an AMD target; NULL when nothing runs it. */
extern const tl_prefill_gpu_api *const tl_prefill_gpu_native;
extern const tl_prefill_gpu_api *const *tl_prefill_gpu_selected;
#define tl_prefill_gpu_kernels (*tl_prefill_gpu_selected)

#ifdef __cplusplus
}
#endif

#endif
