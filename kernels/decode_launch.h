/* kernels/decode_launch.h: what the decode launcher (kernels/decode.hip) hands the shard kernels
 * (kernels/decode_paged.hip, kernels/decode_mla.hip) and the merge (kernels/decode.hip). Internal
 * to kernels/ (C++, GPU builds only); the layouts are contract/decode.h's.
 *
 * Output convention of both shard kernels: row-head i (= row x H + head) of shard s writes
 * o[(i x shards + s) x dv + d] and lse[i x shards + s]; with shards = 1 that is O and LSE themselves
 * (the o normalized by its own sum, lse the natural log of that sum; a shard without a counted key:
 * o = 0, lse = -inf), otherwise the partials that dec_merge_launch combines.
 */
#ifndef TL_KERNELS_DECODE_LAUNCH_H
#define TL_KERNELS_DECODE_LAUNCH_H

#include "../contract/decode.h"
#include "gpu.h"

/* Paged: one work-group per (request b, KV head h, shard s), group index (b x kv_heads + h) x shards + s. */
struct DecPagedArgs {
    const uint16_t *q;       /* [B][H][128] bf16 */
    const void *k, *v;       /* pools [pages][16][kv_heads][128], bf16 or E4M3 */
    const float *ks, *vs;    /* [pages][16][kv_heads] (fp8; unused for bf16) */
    const int32_t *table;    /* [B][max_blocks] */
    const int32_t *lens;     /* [B] */
    float *o, *lse;          /* see above */
    int kv_heads, gqa, max_blocks, shards;
    float scale_log2;        /* the softmax scale x log2(e): scores are kept in base 2 */
};

/* Dual-scope: one work-group per (row r, head block hb, shard s), group index (r x hblocks + hb) x
 * shards + s; a head block is 32 heads (16 when H is not a multiple of 32). */
struct DecMlaArgs {
    const uint16_t *q;       /* [B][T][H][576] bf16 */
    const void *kv;          /* latent [B][max_len][576], bf16 or E4M3 */
    const float *ks;         /* [B][max_len] (fp8) */
    const int32_t *topk;     /* [B][T][k] (k > 0) */
    const int32_t *lens;     /* [B] */
    float *o, *lse;
    long max_len, window;
    int heads, mtp, topk_n, shards, hblocks;
    float scale_log2;
    unsigned long long *trace; /* NULL, or [groups][DEC_TRACE_WORDS]: where each group's time went */
};

/* A traced block's record (thread 0 writes it at its end): the device clock (tl_gpu_clock) at entry,
 * its SM, then its cycle counter at each of contract/decode.h's TL_DECODE_TRACE_* points. */
#define DEC_TRACE_WORDS (2 + TL_DECODE_TRACE_POINTS)

/* The paged kernel's tensor maps of the K and V pools (CUtensorMap's 128 bytes each, copied into the
 * launch's tl_tmap parameters; held as plain words: the launcher's struct is calloc'd, not 64-byte
 * aligned): built at open where TL_GPU_TENSOR_MAPS and the device allow (tma = 1), otherwise tma = 0
 * and the kernel copies by its other path (decode_paged.hip). */
struct DecPagedMaps {
    unsigned long long k[16], v[16];
    int tma;
};
/* Builds m for the pools k, v of `pages` pages (kv_heads heads, fp8 or bf16), where usable, and raises
 * the paged kernel's dynamic shared-memory limit (sm_90: its rings) for the path m picks; at open. */
int dec_paged_prepare(DecPagedMaps *m, const void *k, const void *v, long pages, int kv_heads, int fp8, int wave);
/* Launches the paged shard kernel over `groups` work-groups (4 waves each: 4 x wave threads). */
int dec_paged_launch(const DecPagedArgs &a, const DecPagedMaps &m, int fp8, long groups, int wave, hipStream_t st);
/* Dynamic shared memory of the dual-scope kernel (bytes) for H heads, k top-k entries and the
 * device's wave size. */
size_t dec_mla_smem(int heads, int topk, int wave);
/* Raises the dual-scope kernel's dynamic shared-memory limit to smem (at open: not a stream
 * operation, so never inside a graph capture). */
int dec_mla_prepare(int heads, int fp8, size_t smem);
/* Launches the dual-scope shard kernel (256 threads a group) with smem bytes of dynamic shared
 * memory (dec_mla_prepare first when the limit was not raised yet). */
int dec_mla_launch(const DecMlaArgs &a, int fp8, long groups, size_t smem, hipStream_t st);
/* Merges items = rows x H row-heads of `shards` partials of dv floats (dv a multiple of 4, at most
 * 512) into o [items][dv] and lse [items]: the contract's tl_decode_merge per row-head. dependent:
 * launched as a programmatic dependent of the shard launch (it waits for it before reading).
 * trace: NULL, or one DEC_TRACE_WORDS record a block (dec_merge_blocks of them). */
int dec_merge_launch(const float *op, const float *lsep, float *o, float *lse, long items, int shards, int dv,
                     hipStream_t st, bool dependent, unsigned long long *trace);
/* The merge launch's blocks for items row-heads of dv dims. */
long dec_merge_blocks(long items, int dv);

#endif
