/* kernels/moe.hip: the fused MoE kernel's launcher (the tl_moe_gpu_* API of kernels/moe.h, exported
 * as tl_moe_gpu_kernels): the device buffers, the weights' upload and packing, poisoning, the order
 * of the launches on one stream, reading back, timing and tracing. The kernels are one file each
 * (kernels/moe_launch.h lists them and their launch wrappers); the contract, layouts and what runs
 * where: kernels/moe.h and reference/moe.h.
 *
 * Why the kernels look as they do: at low M the op is a weight stream (DeepSeek-V3.2 stage 1 at
 * M = 1 reads 470 MB of bf16 weights and does almost no arithmetic), so what matters is bytes in
 * flight and how the DRAM sees them: 16-byte weight loads straight into registers, 4 blocks per SM,
 * a grid of (tile, n-block) items that covers every SM even at M = 1, and weights packed at upload
 * so that each wave streams one contiguous region (kernels/moe_pack.h). What was tried instead and
 * measured slower on the H200 - cross-item prefetch, split K, split or paired items, a persistent
 * grid, staging weights in shared memory, a fused combine - is in bench/journal/moe-kernel.md.
 */
#include "moe_launch.h"
#include "wgmma.h"                /* tl_tma_encode: moe_prefill_s2's tensor maps */
#include "../numerics/blockfp8.h" /* the FP8 scale group */
#include "../numerics/mx.h"       /* the MX block and its dequantizer */

#include <stdlib.h>
#include <string.h>

__global__ void moe_fill_f32(float *p, size_t n, float v)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
__global__ void moe_fill_u32(uint32_t *p, size_t n, uint32_t v)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

/* ---- host side ---- */
struct tl_moe_gpu {
    tl_moe_shape s; /* tokens = the current tokens */
    int max_tokens;
    long long cap_tiles;
    uint8_t *w1, *w2, *w1e, *w2e;
    float *w1s, *w2s;
    size_t w1_mat_bytes, w2_mat_bytes, w1_mat_scales, w2_mat_scales;
    uint16_t *x;   /* bf16 [tokens][hidden]: the MX types' MXFP8 values (exact), the others' x */
    uint8_t *xq;   /* fp8 and the MX types: E4M3FN codes */
    uint8_t *xe;   /* the MX types: E8M0 scales [tokens][hidden / 32] */
    float *xs, *topw;
    int32_t *ids, *sorted, *tile_expert, *tile_rows, *expert_count, *tile_off, *n_tiles;
    uint16_t *act;
    uint8_t *act_q;  /* fp8 and the MX types: Q2's E4M3FN codes */
    uint8_t *act_e;  /* the MX types: Q2's E8M0 scales */
    uint16_t *act_b; /* the MX types: Q2's values as bf16 (without TL_MOE_SCALED_MX) */
    float *act_s, *ybuf, *out;
    unsigned long long *trace; /* non-NULL only inside tl_moe_gpu_trace */
    /* moe_prefill_s2's tensor maps (CUtensorMap bytes; encode_s2_maps): act and W2; s2_maps: encoded */
    unsigned long long tmap_act[16], tmap_w2[16];
    bool s2_maps;
    /* the prefill kernels' tensor copies (encode_fp8_maps): fp8's weights' rows copies w1r, w2r
     * (the uploaded rows layout, beside the packed w1, w2 that moe_gemm reads) and the maps of
     * w1r, w2r and act_q; bf16's W1 rows copy w1r and its map tmap_w1f; f8_maps: encoded */
    uint8_t *w1r, *w2r;
    unsigned long long tmap_w1f[16], tmap_w2f[16], tmap_actq[16];
    bool f8_maps;
};

static int gpu_alloc(void **p, size_t bytes, const char *what)
{
    *p = NULL;
    if (bytes == 0) return 0;
    hipError_t e = hipMalloc(p, bytes);
    if (e != hipSuccess) {
        *p = NULL;
        (void)hipGetLastError();
        return tl_error(TL_EFAIL, "moe gpu", "cannot allocate %.3f GB for %s: %s", bytes / 1e9, what,
                        hipGetErrorString(e));
    }
    return 0;
}
#define GALLOC(ptr, bytes, what) gpu_alloc((void **)&(ptr), (bytes), (what))

static int upload(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return 0;
    TL_GPU_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice));
    return 0;
}

extern "C" void tl_moe_gpu_close(tl_moe_gpu *g)
{
    if (!g) return;
    void *ptrs[] = {g->w1, g->w2, g->w1r, g->w2r, g->w1e, g->w2e, g->w1s, g->w2s, g->x, g->xq, g->xe, g->xs, g->topw, g->ids,
                    g->sorted, g->tile_expert, g->tile_rows, g->expert_count, g->tile_off, g->n_tiles, g->act,
                    g->act_q, g->act_e, g->act_b, g->act_s, g->ybuf, g->out};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) (void)hipFree(ptrs[i]);
    free(g);
}

/* Uploads W1 (stage 1) or W2 (stage 2) of every expert from the host's rows layout: packed into
 * the kernels' groups (kernels/moe_pack.h), one expert at a time through `scratch` (one matrix),
 * or as it is where the stage reads rows (bf16's W2). */
static int upload_weights(tl_moe_gpu *g, int stage, const uint8_t *host, uint8_t *scratch)
{
    const int dt = g->s.dtype;
    const size_t mat = stage == 1 ? g->w1_mat_bytes : g->w2_mat_bytes;
    uint8_t *dev = stage == 1 ? g->w1 : g->w2;
    if (!PACKED(dt, stage)) return upload(dev, host, mat * g->s.n_experts);
    const int K = stage == 1 ? g->s.hidden : g->s.width, rows = stage == 1 ? 2 * g->s.width : g->s.hidden;
    for (int e = 0; e < g->s.n_experts; e++) {
        int rc = upload(scratch, host + (size_t)e * mat, mat);
        if (!rc) rc = tl_moe_launch_pack(dt, scratch, dev + (size_t)e * mat, stage, K, rows, g->s.width);
        if (rc) return rc;
    }
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}
/* W1 and W2 of `in` onto the device (upload_weights), with a scratch copy of the larger matrix for
 * the duration of the call. */
static int upload_all_weights(tl_moe_gpu *g, const tl_moe_inputs *in)
{
    const int dt = g->s.dtype;
    const size_t w1 = (size_t)2 * g->s.width * (size_t)W_BYTES(dt, (size_t)g->s.hidden),
                 w2 = (size_t)g->s.hidden * (size_t)W_BYTES(dt, (size_t)g->s.width);
    if (g->w1_mat_bytes != w1 || g->w2_mat_bytes != w2)
        return tl_error(TL_EFAIL, "moe gpu", "W1 / W2 hold %zu / %zu bytes per expert, the kernel expects %zu / %zu",
                        g->w1_mat_bytes, g->w2_mat_bytes, w1, w2);
    uint8_t *scratch;
    int rc = GALLOC(scratch, w1 > w2 ? w1 : w2, "weight packing scratch");
    if (rc) return rc;
    rc = upload_weights(g, 1, in->w1.codes, scratch);
    if (!rc) rc = upload_weights(g, 2, in->w2.codes, scratch);
    (void)hipFree(scratch);
    return rc;
}

/* The tensor maps moe_prefill_s2 reads (tl_moe_launch_prefill_s2), where it exists and fits the
 * shape (bf16, tl_moe_prefill_fits; a build with wgmma on a compute capability 9 device): the
 * activation buffer act [cap_tiles x 16 rows][width] in boxes of TL_MOE_PF2_ABOX rows and W2 [E x
 * hidden][width] (bf16's W2 is stored as it is) in boxes of TL_MOE_PF2_NB rows, both TL_MOE_PF_KSTEP
 * values (128 bytes) wide. Sets g->s2_maps; 0 or TL_EFAIL (the driver refused one). */
static int encode_s2_maps(tl_moe_gpu *g)
{
#if defined(TL_HAVE_WGMMA) && TL_GPU_TENSOR_MAPS
    const tl_moe_shape *s = &g->s;
    if (s->dtype != TL_MOE_BF16 || !tl_moe_prefill_fits(s, 2) || !tl_gpu_tensor_maps_usable()) return 0;
    static_assert(sizeof(CUtensorMap) == sizeof g->tmap_act, "a tensor map is 128 bytes");
    const uint64_t st[1] = {(uint64_t)s->width * 2};
    CUtensorMap m;
    {
        const uint64_t dims[2] = {(uint64_t)s->width, (uint64_t)g->cap_tiles * TL_MOE_TILE_M};
        const uint32_t box[2] = {TL_MOE_PF_KSTEP, TL_MOE_PF2_ABOX};
        if (tl_tma_encode(&m, g->act, 2, dims, st, box, 2)) return TL_EFAIL;
        memcpy(g->tmap_act, &m, sizeof m);
    }
    {
        const uint64_t dims[2] = {(uint64_t)s->width, (uint64_t)s->n_experts * (uint64_t)s->hidden};
        const uint32_t box[2] = {TL_MOE_PF_KSTEP, TL_MOE_PF2_NB};
        if (tl_tma_encode(&m, g->w2, 2, dims, st, box, 2)) return TL_EFAIL;
        memcpy(g->tmap_w2, &m, sizeof m);
    }
    g->s2_maps = true;
#else
    (void)g;
#endif
    return 0;
}

/* bf16 stage 1's prefill kernel reads W1 by tensor copies (tl_moe_launch_prefill_s1) where a build
 * with wgmma runs on a compute capability 9 device and the stage fits it: a second copy of W1 in the
 * rows layout (the packed one stays moe_gemm's), its map in boxes of 64 rows x 64 values
 * (TILELAB_MOE_BF16_TMA=0: the packed W1 by cp.async). Likewise fp8's prefill kernels
 * (tl_moe_launch_prefill_fp8), where both stages fit the kernel: a second copy of W1 and W2 in the rows layout
 * (the packed one stays moe_gemm's: twice the weights' device memory) and the maps of W1 [E x 2
 * width][hidden] in boxes of 64 rows, W2 [E x hidden][width] in boxes of 128 rows and act_q
 * [cap rows][width] in boxes of 64 rows, each box 128 codes wide. TILELAB_MOE_FP8_TMA=0 keeps the
 * packed weights by cp.async instead (A/B timing). Sets g->f8_maps; 0 or TL_EFAIL. */
static int encode_fp8_maps(tl_moe_gpu *g, const tl_moe_inputs *in)
{
#if defined(TL_HAVE_WGMMA) && TL_GPU_TENSOR_MAPS
    const tl_moe_shape *s = &g->s;
    const size_t E = (size_t)s->n_experts;
    if (s->dtype == TL_MOE_BF16 && tl_moe_prefill_fits(s, 1) && tl_gpu_tensor_maps_usable() && !tl_moe_bf16_tma_off()) {
        /* bf16 stage 1 (moe_prefill_s1's tensor-copy form): W1's rows copy in boxes of 64 rows x 64 values */
        int rc = GALLOC(g->w1r, g->w1_mat_bytes * E, "W1 rows (bf16 prefill)");
        if (!rc) rc = upload(g->w1r, in->w1.codes, g->w1_mat_bytes * E);
        if (rc) return rc;
        CUtensorMap m;
        const uint64_t dims[2] = {(uint64_t)s->hidden, E * 2 * (uint64_t)s->width}, st[1] = {(uint64_t)s->hidden * 2};
        const uint32_t box[2] = {TL_MOE_PF_KSTEP, TL_MOE_PF_NB};
        if (tl_tma_encode(&m, g->w1r, 2, dims, st, box, 2)) return TL_EFAIL;
        memcpy(g->tmap_w1f, &m, sizeof m);
        g->f8_maps = true;
        return 0;
    }
    if (s->dtype != TL_MOE_FP8 || !tl_moe_prefill_fits(s, 1) || !tl_moe_prefill_fits(s, 2) ||
        !tl_gpu_tensor_maps_usable() || tl_moe_fp8_tma_off())
        return 0;
    int rc = GALLOC(g->w1r, g->w1_mat_bytes * E, "W1 rows (fp8 prefill)");
    if (!rc) rc = GALLOC(g->w2r, g->w2_mat_bytes * E, "W2 rows (fp8 prefill)");
    if (!rc) rc = upload(g->w1r, in->w1.codes, g->w1_mat_bytes * E);
    if (!rc) rc = upload(g->w2r, in->w2.codes, g->w2_mat_bytes * E);
    if (rc) return rc;
    CUtensorMap m;
    const uint32_t box64[2] = {TL_MOE_PF8_KSTEP, TL_MOE_PF2_ABOX}, box128[2] = {TL_MOE_PF8_KSTEP, TL_MOE_PF2_NB};
    {
        const uint64_t dims[2] = {(uint64_t)s->hidden, E * 2 * (uint64_t)s->width}, st[1] = {(uint64_t)s->hidden};
        if (tl_tma_encode(&m, g->w1r, 2, dims, st, box64, 1)) return TL_EFAIL;
        memcpy(g->tmap_w1f, &m, sizeof m);
    }
    {
        const uint64_t dims[2] = {(uint64_t)s->width, E * (uint64_t)s->hidden}, st[1] = {(uint64_t)s->width};
        if (tl_tma_encode(&m, g->w2r, 2, dims, st, box128, 1)) return TL_EFAIL;
        memcpy(g->tmap_w2f, &m, sizeof m);
    }
    {
        const uint64_t dims[2] = {(uint64_t)s->width, (uint64_t)g->cap_tiles * TL_MOE_TILE_M}, st[1] = {(uint64_t)s->width};
        if (tl_tma_encode(&m, g->act_q, 2, dims, st, box64, 1)) return TL_EFAIL;
        memcpy(g->tmap_actq, &m, sizeof m);
    }
    g->f8_maps = true;
#else
    (void)g, (void)in;
#endif
    return 0;
}

extern "C" int tl_moe_gpu_open(const tl_moe_inputs *in, int max_tokens, tl_moe_gpu **out)
{
    *out = NULL;
    tl_moe_shape s = in->s;
    s.tokens = max_tokens;
    int rc = tl_moe_kernel_supports(&s);
    if (rc) return rc;
    tl_moe_gpu *g = (tl_moe_gpu *)calloc(1, sizeof *g);
    if (!g) return tl_error(TL_EFAIL, "moe gpu", "out of memory");
    g->s = s;
    g->max_tokens = max_tokens;
    const int E = s.n_experts, H = s.hidden, WI = s.width, k = s.top_k;
    const size_t edges = (size_t)max_tokens * k;
    g->cap_tiles = tl_moe_max_tiles(max_tokens, k, E);
    const size_t rows = (size_t)g->cap_tiles * TL_MOE_TILE_M;
    g->w1_mat_bytes = in->w1.mat_code_bytes;
    g->w2_mat_bytes = in->w2.mat_code_bytes;
    g->w1_mat_scales = in->w1.mat_scales;
    g->w2_mat_scales = in->w2.mat_scales;
    const bool fs = in->w1.scales != NULL, es = in->w1.e8m0 != NULL, fp8 = s.dtype == TL_MOE_FP8,
               mx = tl_moe_mx_acts(s.dtype), q = tl_moe_quantized_acts(s.dtype);
    rc = GALLOC(g->w1, g->w1_mat_bytes * E, "W1");
    if (!rc) rc = GALLOC(g->w2, g->w2_mat_bytes * E, "W2");
    if (!rc && fs) rc = GALLOC(g->w1s, g->w1_mat_scales * E * sizeof(float), "W1 scales");
    if (!rc && fs) rc = GALLOC(g->w2s, g->w2_mat_scales * E * sizeof(float), "W2 scales");
    if (!rc && es) rc = GALLOC(g->w1e, g->w1_mat_scales * E, "W1 scales");
    if (!rc && es) rc = GALLOC(g->w2e, g->w2_mat_scales * E, "W2 scales");
    if (!rc) rc = GALLOC(g->x, (size_t)max_tokens * H * 2, "x");
    if (!rc && q) rc = GALLOC(g->xq, (size_t)max_tokens * H, "x fp8");
    if (!rc && mx) rc = GALLOC(g->xe, (size_t)max_tokens * (H / TL_MX_BLOCK), "x mx scales");
    if (!rc && fp8) rc = GALLOC(g->xs, (size_t)max_tokens * (H / TL_BFP8_GROUP) * sizeof(float), "x scales");
    if (!rc) rc = GALLOC(g->ids, edges * sizeof(int32_t), "topk ids");
    if (!rc) rc = GALLOC(g->topw, edges * sizeof(float), "topk weights");
    if (!rc) rc = GALLOC(g->sorted, rows * sizeof(int32_t), "sorted ids");
    if (!rc) rc = GALLOC(g->tile_expert, (size_t)g->cap_tiles * sizeof(int32_t), "tile experts");
    if (!rc) rc = GALLOC(g->tile_rows, (size_t)g->cap_tiles * sizeof(int32_t), "tile rows");
    if (!rc) rc = GALLOC(g->expert_count, (size_t)E * sizeof(int32_t), "expert counts");
    if (!rc) rc = GALLOC(g->tile_off, (size_t)E * sizeof(int32_t), "tile offsets");
    if (!rc) rc = GALLOC(g->n_tiles, sizeof(int32_t), "tile count");
    if (!rc) rc = GALLOC(g->act, rows * WI * 2, "activations");
    if (!rc && q) rc = GALLOC(g->act_q, rows * WI, "fp8 activations");
    if (!rc && mx) rc = GALLOC(g->act_e, rows * (WI / TL_MX_BLOCK), "activation mx scales");
    if (!rc && mx) rc = GALLOC(g->act_b, rows * WI * 2, "mx activation values");
    if (!rc && fp8) rc = GALLOC(g->act_s, rows * (WI / TL_BFP8_GROUP) * sizeof(float), "activation scales");
    if (!rc) rc = GALLOC(g->ybuf, edges * H * sizeof(float), "per-edge rows");
    if (!rc) rc = GALLOC(g->out, (size_t)max_tokens * H * sizeof(float), "output");
    if (!rc) rc = upload_all_weights(g, in);
    if (!rc) rc = encode_s2_maps(g);
    if (!rc) rc = encode_fp8_maps(g, in);
    if (!rc && fs) rc = upload(g->w1s, in->w1.scales, g->w1_mat_scales * E * sizeof(float));
    if (!rc && fs) rc = upload(g->w2s, in->w2.scales, g->w2_mat_scales * E * sizeof(float));
    if (!rc && es) rc = upload(g->w1e, in->w1.e8m0, g->w1_mat_scales * E);
    if (!rc && es) rc = upload(g->w2e, in->w2.e8m0, g->w2_mat_scales * E);
    if (rc) {
        tl_moe_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* The MX types' activations as the GEMMs without TL_MOE_SCALED_MX read them: the bf16 of each
 * MXFP8 value (numerics' dequantizer of codes xq and scales xe, as the reference reads them), one
 * token row at a time through host buffers. */
static int upload_mx_values(uint16_t *dev, const tl_moe_inputs *in)
{
    const int H = in->s.hidden, nb = H / TL_MX_BLOCK;
    float *val = (float *)malloc((size_t)H * sizeof *val);
    uint16_t *row = (uint16_t *)malloc((size_t)H * sizeof *row);
    int rc = val && row ? 0 : tl_error(TL_EFAIL, "moe gpu", "out of memory");
    for (int t = 0; t < in->s.tokens && !rc; t++) {
        rc = tl_mx_dequantize(TL_NF_E4M3FN, TL_MX_BLOCK, in->xq + (size_t)t * H, in->xe + (size_t)t * nb, (size_t)H, val);
        if (!rc) rc = tl_encode_array16(TL_NF_BF16, val, (size_t)H, 0, row);
        if (!rc) rc = upload(dev + (size_t)t * H, row, (size_t)H * sizeof *row);
    }
    free(val);
    free(row);
    return rc;
}

extern "C" int tl_moe_gpu_set_tokens(tl_moe_gpu *g, const tl_moe_inputs *in)
{
    const tl_moe_shape *s = &in->s;
    if (s->hidden != g->s.hidden || s->width != g->s.width || s->n_experts != g->s.n_experts ||
        s->top_k != g->s.top_k || s->dtype != g->s.dtype)
        return tl_error(TL_EUSAGE, "moe gpu", "the tokens' shape does not match the uploaded weights");
    if (s->tokens < 1 || s->tokens > g->max_tokens)
        return tl_error(TL_EUSAGE, "moe gpu", "%d tokens, room for %d", s->tokens, g->max_tokens);
    const size_t edges = (size_t)s->tokens * s->top_k;
    for (size_t i = 0; i < edges; i++)
        if (in->topk_ids[i] < 0 || in->topk_ids[i] >= s->n_experts)
            return tl_error(TL_EUSAGE, "moe gpu", "topk id %d outside [0, %d)", in->topk_ids[i], s->n_experts);
    g->s.tokens = s->tokens;
    const bool mx = tl_moe_mx_acts(s->dtype);
    int rc = mx ? upload_mx_values(g->x, in) : upload(g->x, in->x, (size_t)s->tokens * s->hidden * 2);
    if (!rc && tl_moe_quantized_acts(s->dtype)) rc = upload(g->xq, in->xq, (size_t)s->tokens * s->hidden);
    if (!rc && mx) rc = upload(g->xe, in->xe, (size_t)s->tokens * (s->hidden / TL_MX_BLOCK));
    if (!rc && s->dtype == TL_MOE_FP8) rc = upload(g->xs, in->xs, (size_t)s->tokens * (s->hidden / TL_BFP8_GROUP) * sizeof(float));
    if (!rc) rc = upload(g->ids, in->topk_ids, edges * sizeof(int32_t));
    if (!rc) rc = upload(g->topw, in->topk_w, edges * sizeof(float));
    return rc;
}

static int fill_f32(float *p, size_t n, float v)
{
    if (!p || !n) return 0;
    (void)tl_launch(moe_fill_f32, (unsigned)((n + 255) / 256), 256, 0, 0, false, p, n, v);
    TL_GPU_CHECK_LAUNCH("moe_fill_f32");
    return 0;
}
static int fill_u32(void *p, size_t n, uint32_t v)
{
    if (!p || !n) return 0;
    (void)tl_launch(moe_fill_u32, (unsigned)((n + 255) / 256), 256, 0, 0, false, (uint32_t *)p, n, v);
    TL_GPU_CHECK_LAUNCH("moe_fill_u32");
    return 0;
}

extern "C" int tl_moe_gpu_poison(tl_moe_gpu *g)
{
    const size_t rows = (size_t)g->cap_tiles * TL_MOE_TILE_M, edges = (size_t)g->max_tokens * g->s.top_k;
    const float nan = __builtin_nanf("");
    int rc = fill_u32(g->act, rows * g->s.width / 2, 0x7FC07FC0u); /* bf16 NaN pairs */
    if (!rc && g->act_q) rc = fill_u32(g->act_q, rows * g->s.width / 4, 0x7F7F7F7Fu); /* e4m3 NaN */
    if (!rc && g->act_s) rc = fill_f32(g->act_s, rows * (g->s.width / TL_BFP8_GROUP), nan);
    if (!rc && g->act_e) rc = fill_u32(g->act_e, rows * g->s.width / TL_MX_BLOCK / 4, 0xFFFFFFFFu); /* E8M0 NaN */
    if (!rc && g->act_b) rc = fill_u32(g->act_b, rows * g->s.width / 2, 0x7FC07FC0u);
    if (!rc) rc = fill_f32(g->ybuf, edges * g->s.hidden, nan);
    if (!rc) rc = fill_f32(g->out, (size_t)g->max_tokens * g->s.hidden, nan);
    if (!rc) rc = fill_u32(g->sorted, rows, 0x80000000u);
    if (!rc) rc = fill_u32(g->tile_expert, (size_t)g->cap_tiles, 0x80000000u);
    if (!rc) rc = fill_u32(g->tile_rows, (size_t)g->cap_tiles, 0x80000000u);
    if (!rc) rc = fill_u32(g->n_tiles, 1, 0x80000000u);
    if (!rc) TL_GPU_CHECK(hipDeviceSynchronize());
    return rc;
}

/* ---- enqueueing the parts ---- */
static int enqueue_sort(tl_moe_gpu *g, hipStream_t st)
{
    return tl_moe_launch_sort(g->ids, g->s.tokens * g->s.top_k, g->s.n_experts, g->expert_count, g->tile_off,
                              g->n_tiles, g->sorted, g->tile_expert, g->tile_rows, st);
}

/* The grid of stage `stage` of shape s (StageGrid, kernels/moe_launch.h). */
static StageGrid stage_grid(const tl_moe_shape *s, int stage)
{
    StageGrid g = {};
    const long long max_tiles = tl_moe_max_tiles(s->tokens, s->top_k, s->n_experts);
    g.gemv = tl_moe_uses_gemv(s, stage);
    if (!g.gemv) {
        g.per_tile = stage == 1 ? s->width / TL_MOE_S1_NB : s->hidden / (TL_MOE_S2_THREADS / tl_gpu_wave_size() * TL_MOE_NCOLS);
        g.blocks = max_tiles * g.per_tile;
        return g;
    }
    g.geom = tl_moe_gemv_geometry(s, tl_gpu_wave_size());
    g.per_tile = g.geom.tasks_per_tile;
    const long long tasks = max_tiles * g.per_tile, per_block = g.geom.tasks; /* per_block divides per_tile */
    g.big = tasks * TL_MOE_GEMV_TAPER_PCT / 100 / per_block;
    g.blocks = g.big + (tasks - g.big * per_block);
    return g;
}

/* Whether stage `stage` runs a prefill kernel (sm_90a's warpgroup kernels: bf16 moe_prefill_s1 /
 * moe_prefill_s2, fp8 moe_prefill_fp8<stage>) instead of moe_gemm: where the kernel exists (a build
 * with wgmma, TL_HAVE_WGMMA, on a compute capability 9 device; bf16 stage 2: its tensor maps
 * encoded, g->s2_maps) and fits the shape (tl_moe_prefill_fits: bf16 or fp8, K and the n-block's
 * columns), the model's pick, tl_moe_uses_prefill (contract/moe.h: from TL_MOE_PF_MIN_ROWS /
 * TL_MOE_PF2_MIN_ROWS(_SHORT), fp8 TL_MOE_PF8_MIN_ROWS / TL_MOE_PF8_2_MIN_ROWS, routed rows per expert).
 * TILELAB_MOE_PREFILL=1 or 0 overrides the pick of both stages, for timing both kernels on one
 * shape (A/B); it cannot make the kernel run where it does not exist or fit. `tilelab sim moe` and
 * the model column of `tilelab bench moe` follow the same variable (ops/moe.c). */
static bool moe_prefill_asked(const tl_moe_gpu *g, int stage)
{
#if defined(TL_HAVE_WGMMA) && TL_GPU_TENSOR_MAPS
    const tl_moe_shape *s = &g->s;
    static int forced = -2, device = -1; /* forced: -1 none, 0 or 1 */
    if (forced == -2) forced = tl_moe_prefill_forced();
    if (device < 0) device = tl_gpu_tensor_maps_usable(); /* runs this build's sm_90a code */
    if (!device || !tl_moe_prefill_fits(s, stage) || (stage == 2 && s->dtype == TL_MOE_BF16 && !g->s2_maps)) return false;
    return forced >= 0 ? forced == 1 : tl_moe_uses_prefill(s, stage) != 0;
#else
    (void)g, (void)stage;
    return false;
#endif
}

static int enqueue_stage(tl_moe_gpu *g, int stage, hipStream_t st)
{
    const tl_moe_shape *s = &g->s;
    const int max_tiles = (int)tl_moe_max_tiles(s->tokens, s->top_k, s->n_experts);
    GemmArgs a;
    memset(&a, 0, sizeof a);
    a.sorted_ids = g->sorted;
    a.tile_expert = g->tile_expert;
    a.tile_rows = g->tile_rows;
    a.tile_off = g->tile_off;
    a.expert_count = g->expert_count;
    a.n_experts = s->n_experts;
    a.n_tiles = g->n_tiles;
    a.max_tiles = max_tiles;
    a.top_k = s->top_k;
    a.topk_w = g->topw;
    a.trace = g->trace;
    const bool fp8 = s->dtype == TL_MOE_FP8, mx = tl_moe_mx_acts(s->dtype);
    if (stage == 1) {
        a.A = fp8 ? g->xq : (const uint8_t *)g->x;
        a.a_scale = g->xs;
        a.a_mx = g->xq;
        a.a_e8m0 = g->xe;
        a.W = g->w1;
        a.w_scale = g->w1s;
        a.w_e8m0 = g->w1e;
        a.w_mat_bytes = g->w1_mat_bytes;
        a.w_mat_scales = g->w1_mat_scales;
        a.K = s->hidden;
        a.n_out = s->width;
        a.act = g->act;
    } else {
        if (fp8) {
            int rc = tl_moe_launch_requant(g->act, g->sorted, g->n_tiles, max_tiles * TL_MOE_TILE_M, s->width, g->act_q,
                                           g->act_s, st);
            if (rc) return rc;
        }
        if (mx) {
            int rc = tl_moe_launch_requant_mx(g->act, g->sorted, g->n_tiles, max_tiles * TL_MOE_TILE_M, s->width,
                                              g->act_q, g->act_e, g->act_b, st);
            if (rc) return rc;
        }
        a.A = fp8 ? g->act_q : mx ? (const uint8_t *)g->act_b : (const uint8_t *)g->act;
        a.a_scale = g->act_s;
        a.a_mx = g->act_q;
        a.a_e8m0 = g->act_e;
        a.W = g->w2;
        a.w_scale = g->w2s;
        a.w_e8m0 = g->w2e;
        a.w_mat_bytes = g->w2_mat_bytes;
        a.w_mat_scales = g->w2_mat_scales;
        a.K = s->width;
        a.n_out = s->hidden;
        a.ybuf = g->ybuf;
    }
    const int group = tl_moe_tiles_per_item(s, stage); /* tiles of one expert per work item */
    /* Dependent launches: fp8's and the MX types' stage-2 GEMM after the quant kernel, and every dtype's combine
     * after the GEMM: each starts (pointers, tile ids) while the kernel before it finishes and
     * waits for its output with tl_grid_dep_wait (fp8 stage 2 at M = 1 is about 4% faster so on the
     * H200; bf16 unchanged: bench/journal/moe-kernel.md). */
    const bool dep = stage == 2 && tl_moe_quantized_acts(s->dtype);
    const StageGrid grid = stage_grid(s, stage);
    const bool prefill = moe_prefill_asked(g, stage);
    const int groups = (int)tl_moe_max_groups(s->tokens, s->top_k, s->n_experts); /* a grid row each */
    const void *f8w = !g->f8_maps ? NULL : stage == 1 ? (const void *)g->tmap_w1f : (const void *)g->tmap_w2f;
    const void *f8a = g->f8_maps && fp8 && stage == 2 ? (const void *)g->tmap_actq : NULL;
    if (stage == 1 && prefill)
        return fp8 ? tl_moe_launch_prefill_fp8(1, a, f8w, NULL, groups, st) : tl_moe_launch_prefill_s1(a, f8w, groups, st);
    int rc = prefill && fp8 ? tl_moe_launch_prefill_fp8(2, a, f8w, f8a, groups, st)
             : prefill ? tl_moe_launch_prefill_s2(a, g->tmap_act, g->tmap_w2, groups, st)
             : grid.gemv ? tl_moe_launch_gemv_down(a, grid, st)
                         : tl_moe_launch_gemm(s->dtype, stage, a, grid.blocks, group, dep, st);
    if (rc || stage == 1) return rc;
    return tl_moe_launch_combine(g->ybuf, s->tokens, s->top_k, s->hidden, g->out, st);
}

static int enqueue(tl_moe_gpu *g, int parts, hipStream_t st)
{
    int rc = 0;
    if (parts & TL_MOE_PART_SORT) rc = enqueue_sort(g, st);
    if (!rc && (parts & TL_MOE_PART_STAGE1)) rc = enqueue_stage(g, 1, st);
    if (!rc && (parts & TL_MOE_PART_STAGE2)) rc = enqueue_stage(g, 2, st);
    return rc;
}

extern "C" int tl_moe_gpu_run(tl_moe_gpu *g, int parts)
{
    int rc = enqueue(g, parts, 0);
    if (rc) return rc;
    TL_GPU_CHECK(hipDeviceSynchronize());
    return 0;
}

/* The device's tile count, within [0, cap_tiles] (else TL_EFAIL: a sort bug). */
static int read_n_tiles(tl_moe_gpu *g, int32_t *nt)
{
    TL_GPU_CHECK(hipMemcpy(nt, g->n_tiles, sizeof *nt, hipMemcpyDeviceToHost));
    if (*nt < 0 || *nt > g->cap_tiles)
        return tl_error(TL_EFAIL, "moe gpu", "the sort reported %d tiles (at most %lld possible)", *nt, g->cap_tiles);
    return 0;
}

extern "C" int tl_moe_gpu_read(tl_moe_gpu *g, float *out, int32_t *sorted_ids, size_t cap_rows,
                               int32_t *tile_expert, int32_t *tile_rows, size_t cap_tiles, int *n_tiles)
{
    int32_t nt = 0;
    int rc = read_n_tiles(g, &nt);
    if (n_tiles) *n_tiles = nt;
    if (rc) return rc;
    if ((sorted_ids && (size_t)nt * TL_MOE_TILE_M > cap_rows) || ((tile_expert || tile_rows) && (size_t)nt > cap_tiles))
        return tl_error(TL_EFAIL, "moe gpu", "the sort reported %d tiles, more than the caller's worklist holds", nt);
    if (out) TL_GPU_CHECK(hipMemcpy(out, g->out, (size_t)g->s.tokens * g->s.hidden * sizeof(float), hipMemcpyDeviceToHost));
    if (sorted_ids && nt)
        TL_GPU_CHECK(hipMemcpy(sorted_ids, g->sorted, (size_t)nt * TL_MOE_TILE_M * sizeof(int32_t), hipMemcpyDeviceToHost));
    if (tile_expert && nt) TL_GPU_CHECK(hipMemcpy(tile_expert, g->tile_expert, (size_t)nt * sizeof(int32_t), hipMemcpyDeviceToHost));
    if (tile_rows && nt) TL_GPU_CHECK(hipMemcpy(tile_rows, g->tile_rows, (size_t)nt * sizeof(int32_t), hipMemcpyDeviceToHost));
    return 0;
}

extern "C" int tl_moe_gpu_read_act(tl_moe_gpu *g, uint16_t *act, size_t cap_rows)
{
    int32_t nt = 0;
    int rc = read_n_tiles(g, &nt);
    if (rc) return rc;
    const size_t rows = (size_t)nt * TL_MOE_TILE_M;
    if (rows > cap_rows)
        return tl_error(TL_EFAIL, "moe gpu", "the sort reported %d tiles: more rows than the caller holds", nt);
    if (rows) TL_GPU_CHECK(hipMemcpy(act, g->act, rows * (size_t)g->s.width * sizeof(uint16_t), hipMemcpyDeviceToHost));
    return 0;
}

extern "C" int tl_moe_gpu_acc_bits(const tl_moe_gpu *g, int stage)
{
    return g->s.dtype == TL_MOE_FP8 && moe_prefill_asked(g, stage) ? TL_WGMMA_E4M3_ACC_BITS : 23;
}

struct time_ctx {
    tl_moe_gpu *g;
    int part;
};
static int time_fn(void *ctx, void *stream)
{
    time_ctx *c = (time_ctx *)ctx;
    return enqueue(c->g, c->part, (hipStream_t)stream);
}

extern "C" int tl_moe_gpu_time(tl_moe_gpu *g, int part, const tl_bench_opts *opts, tl_bench_result *r)
{
    if (part != TL_MOE_PART_SORT && part != TL_MOE_PART_STAGE1 && part != TL_MOE_PART_STAGE2)
        return tl_error(TL_EUSAGE, "moe gpu", "time one part at a time");
    time_ctx c = {g, part};
    return tl_bench_run(opts, time_fn, &c, r);
}

extern "C" int tl_moe_gpu_trace(tl_moe_gpu *g, int part, const tl_bench_opts *opts, tl_moe_trace_block **blocks,
                                int *n_blocks, double *end_us)
{
    *blocks = NULL;
    *n_blocks = 0;
    *end_us = 0.0;
    if (part != TL_MOE_PART_STAGE1 && part != TL_MOE_PART_STAGE2)
        return tl_error(TL_EUSAGE, "moe gpu", "trace stage 1 or stage 2");
    const int stage = part == TL_MOE_PART_STAGE1 ? 1 : 2;
    const tl_moe_shape *s = &g->s;
    if (moe_prefill_asked(g, stage))
        return tl_error(TL_EUSAGE, "moe gpu", "stage %d runs moe_prefill_s%d at %d tokens, which records no trace "
                        "(TILELAB_MOE_PREFILL=0 traces moe_gemm)", stage, stage, s->tokens);
    const long long max_tiles = tl_moe_max_tiles(s->tokens, s->top_k, s->n_experts);
    const StageGrid sg = stage_grid(s, stage);
    const long long grid = sg.blocks;
    const size_t words = 2 + 3 * (size_t)grid; /* t0, t1, then 3 per block */
    const double per_us = tl_gpu_clock_per_us();
    if (per_us <= 0.0) return TL_EFAIL;
    unsigned long long *dev = NULL, *host = (unsigned long long *)malloc(words * sizeof *host);
    tl_moe_trace_block *b = (tl_moe_trace_block *)malloc((size_t)grid * sizeof *b);
    time_ctx c = {g, part};
    int rc = 0, n = 0;
    if (!host || !b) {
        rc = tl_error(TL_EFAIL, "moe gpu", "out of memory");
        goto done;
    }
    TL_GPU_CHECK_GOTO(hipMalloc((void **)&dev, words * sizeof *dev), rc, done);
    TL_GPU_CHECK_GOTO(hipMemset(dev, 0, words * sizeof *dev), rc, done);
    g->trace = dev + 2;
    rc = tl_bench_run_marked(opts, time_fn, &c, dev, dev + 1);
    g->trace = NULL;
    if (rc) goto done;
    TL_GPU_CHECK_GOTO(hipMemcpy(host, dev, words * sizeof *host, hipMemcpyDeviceToHost), rc, done);
    for (long long i = 0; i < grid; i++) {
        const unsigned long long *w = host + 2 + 3 * i;
        if (!w[0]) continue; /* the block had no item (past n_tiles, or a tile after a group's first) */
        b[n].block = (int)i;
        if (sg.gemv) { /* the block's first task */
            const long long first = gemv_first_task(i, sg.big, sg.geom.tasks);
            b[n].tile = (int)(first / sg.per_tile);
            b[n].nblock = (int)(first % sg.per_tile);
        } else {
            b[n].tile = (int)(i % max_tiles);
            b[n].nblock = (int)(i / max_tiles);
        }
        b[n].sm = (int)w[2];
        b[n].start_us = (double)(long long)(w[0] - host[0]) / per_us;
        b[n].end_us = (double)(long long)(w[1] - host[0]) / per_us;
        n++;
    }
    *end_us = (double)(long long)(host[1] - host[0]) / per_us;
done:
    if (dev) (void)hipFree(dev);
    free(host);
    if (rc) free(b);
    else *blocks = b, *n_blocks = n;
    return rc;
}

/* the exported table: host code only (the device pass of a HIP build has no host functions) */
#if !defined(__HIP_DEVICE_COMPILE__) && !defined(__CUDA_ARCH__)
extern "C" {
static const tl_moe_gpu_api moe_gpu_api = {tl_moe_gpu_open, tl_moe_gpu_set_tokens, tl_moe_gpu_poison,
                                           tl_moe_gpu_run,  tl_moe_gpu_read,       tl_moe_gpu_read_act,
                                           tl_moe_gpu_time, tl_moe_gpu_trace,      tl_moe_gpu_close,
                                           tl_moe_gpu_acc_bits};
TL_GPU_EXPORT(const tl_moe_gpu_api, tl_moe_gpu) = &moe_gpu_api;
}
#endif
