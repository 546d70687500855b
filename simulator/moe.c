/* The fused MoE cost model (contract and what it ignores: moe.h). */
#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define DEFAULT_TILE_N 128

/* The scaled f8f6f4 instructions (E8M0 scales fed to the instruction): FP4 inputs mark the family
 * (gfx950). */
static int has_scaled_f8f6f4(const tl_hw *hw) { return hw && tl_hw_has_dtype(hw, "fp4"); }

void tl_moe_instr_dtypes(const tl_hw *hw, tl_moe_dtype d, const char **a, const char **b)
{
    /* fp8: its E4M3 codes where the arch has FP8; mxfp4 / mxfp8: the scaled f8f6f4 instruction
     * where the arch has it, the E8M0 scales fed to it; the rest (and these without such
     * instructions) run BF16 on weights converted in registers */
    const char *t = "bf16";
    if (d == TL_MOE_FP8 && tl_hw_has_dtype(hw, "fp8")) t = "fp8";
    if (has_scaled_f8f6f4(hw) && tl_moe_mx_acts(d)) t = d == TL_MOE_MXFP4 ? "fp4" : "fp8";
    *a = *b = t;
}

/* Instructions a lane issues per weight element to turn a16w4, mxfp4 and mxfp8 codes into BF16:
 * kernels/moe.hip's weights_bf16, fitted per dtype to 8 timings of
 * bench/results/h200_moe_bench_<dtype>_run30.csv (moe.h). The only measured counts: the generic
 * kernel charges them too wherever its instruction takes BF16 weights that are stored otherwise. */
static double bf16_conversion_instr(tl_moe_dtype d)
{
    return d == TL_MOE_A16W4 ? 6.75 : d == TL_MOE_MXFP4 ? 8.0 : d == TL_MOE_MXFP8 ? 16.25 : 0.0;
}

/* The matrix ceiling that goes with an instruction's input type. */
static tl_ceiling matrix_ceiling(const tl_hw *hw, const char *dtype)
{
    if (strcmp(dtype, "fp8") == 0) return hw->ceilings.fp8_tflops;
    if (strcmp(dtype, "fp6") == 0) return hw->ceilings.fp6_tflops;
    if (strcmp(dtype, "fp4") == 0) return hw->ceilings.fp4_tflops;
    return hw->ceilings.bf16_tflops;
}

static int validate(const tl_moe_problem *p)
{
    if (!p || !p->hw || !p->model) return tl_error(TL_EUSAGE, "sim moe", "missing hardware or model");
    if (p->tokens < 1) return tl_error(TL_EUSAGE, "--tokens", "tokens = %d must be at least 1", p->tokens);
    if (p->stage != 1 && p->stage != 2) return tl_error(TL_EUSAGE, "--stage", "stage %d is not 1 or 2", p->stage);
    if (p->tp < 1 || p->tp > 1024) return tl_error(TL_EUSAGE, "--tp", "tp = %d outside [1, 1024]", p->tp);
    if (p->tile_m < 1 || p->tile_m > 4096)
        return tl_error(TL_EUSAGE, "--tile-m", "tile height %d outside [1, 4096]", p->tile_m);
    if (p->tile_n < 0 || p->tile_n > 65536)
        return tl_error(TL_EUSAGE, "--tile-n", "tile width %d outside [1, 65536]", p->tile_n);
    if (p->dtype < 0 || p->dtype >= TL_MOE_NDTYPES) return tl_error(TL_EUSAGE, "--dtype", "unknown dtype");
    if (!(p->cu_gbps >= 0 && p->cu_gbps <= 1e6))
        return tl_error(TL_EUSAGE, "--cu-gbps", "per-CU stream %g GB/s outside [0, 1e6]", p->cu_gbps);
    if (p->blocks_per_cu < 0 || p->blocks_per_cu > 1024)
        return tl_error(TL_EUSAGE, "sim moe", "blocks per CU %d outside [0, 1024]", p->blocks_per_cu);
    if (!(p->inflight_kib >= 0 && p->inflight_kib <= 1e6))
        return tl_error(TL_EUSAGE, "sim moe", "bytes in flight %g KiB outside [0, 1e6]", p->inflight_kib);
    if (!(p->inflight_kib_wide >= 0 && p->inflight_kib_wide <= 1e6) || p->narrow_rows < 0 || p->narrow_rows > 4096)
        return tl_error(TL_EUSAGE, "sim moe", "wide tiles' bytes in flight %g KiB or narrow rows %d out of range",
                        p->inflight_kib_wide, p->narrow_rows);
    if (p->prologue_loads < 0 || p->prologue_loads > 64)
        return tl_error(TL_EUSAGE, "sim moe", "prologue loads %d outside [0, 64]", p->prologue_loads);
    if (p->act_loads < 0 || p->act_loads > 64)
        return tl_error(TL_EUSAGE, "sim moe", "activation loads per item %d outside [0, 64]", p->act_loads);
    if (p->n_shared < 0 || p->n_shared > 16)
        return tl_error(TL_EUSAGE, "--shared", "shared experts %d outside [0, 16]", p->n_shared);
    if (!(p->load_cap_gbps >= 0 && p->load_cap_gbps <= 1e6) || !(p->load_cap_w_gbps >= 0 && p->load_cap_w_gbps <= 1e6))
        return tl_error(TL_EUSAGE, "sim moe", "load cap %g / %g GB/s outside [0, 1e6]", p->load_cap_gbps, p->load_cap_w_gbps);
    if (p->wgmma && (strncmp(p->hw->arch, "sm_9", 4) != 0 || p->tile_m % 64 || p->vector_rows))
        return tl_error(TL_EUSAGE, "sim moe", "wgmma needs an sm_90 preset (%s is %s) and tile_m a multiple of 64 "
                        "(%d)", p->hw->name, p->hw->arch, p->tile_m);
    if (p->wgmma && (p->tile_n % 8 || p->tile_n < 8 || p->tile_n > 256))
        return tl_error(TL_EUSAGE, "sim moe", "wgmma's n is a multiple of 8 up to 256 (tile_n %d)", p->tile_n);
    if (p->requant_rows_per_cu < 0 || p->requant_rows_per_cu > 4096)
        return tl_error(TL_EUSAGE, "sim moe", "re-quantization rows per CU %d outside [0, 4096]",
                        p->requant_rows_per_cu);
    if (p->mx_acts != TL_MOE_MX_ACTS_DEFAULT && p->mx_acts != TL_MOE_MX_ACTS_E4M3 && p->mx_acts != TL_MOE_MX_ACTS_BF16)
        return tl_error(TL_EUSAGE, "sim moe", "MX activation mode %d is not 0, 1 or 2", (int)p->mx_acts);
    if (p->mx_acts == TL_MOE_MX_ACTS_E4M3 && tl_moe_mx_acts(p->dtype) && !has_scaled_f8f6f4(p->hw))
        return tl_error(TL_EUSAGE, "sim moe", "E4M3 MX activations need the scaled f8f6f4 instruction, which %s (%s) "
                        "lacks", p->hw->name, p->hw->arch);
    return 0;
}

/* Appends n_shared slots to each token's k routed ones (ids [tokens][k] -> [tokens][k + n_shared]),
 * in place from the last token down: slot k + j of every token is shared expert E + j. */
static void add_shared_slots(int32_t *ids, int tokens, int k, int n_shared, int n_experts)
{
    const int ks = k + n_shared;
    for (int t = tokens - 1; t >= 0; t--) {
        for (int j = n_shared - 1; j >= 0; j--) ids[(size_t)t * ks + k + j] = n_experts + j;
        for (int s = k - 1; s >= 0; s--) ids[(size_t)t * ks + s] = ids[(size_t)t * k + s];
    }
}

int tl_moe_worklist(const tl_moe_problem *p, tl_worklist *wl)
{
    memset(wl, 0, sizeof *wl);
    if (validate(p)) return TL_EUSAGE;
    int E, k, width;
    tl_model_moe_shape(p->model, &E, &k, &width);
    const int ks = k + p->n_shared;
    if ((int64_t)p->tokens * ks > INT32_MAX)
        return tl_error(TL_EUSAGE, "--tokens", "tokens x (k + shared) = %lld edges exceed 2^31 - 1",
                        (long long)p->tokens * ks);
    if (k < 1 || E < 1 || k > E) return tl_error(TL_EUSAGE, "--model", "bad MoE shape E = %d, k = %d", E, k);
    int32_t *ids = malloc((size_t)p->tokens * (size_t)ks * sizeof *ids);
    if (!ids) return tl_error(TL_EFAIL, "sim moe", "out of memory for %d x %d routing ids", p->tokens, ks);
    int rc = tl_route(&p->routing, p->tokens, E, k, p->seed, ids, NULL);
    if (!rc) add_shared_slots(ids, p->tokens, k, p->n_shared, E);
    if (!rc) rc = tl_worklist_build(ids, p->tokens, ks, E + p->n_shared, p->tile_m, wl);
    free(ids);
    return rc;
}

void tl_moe_result_free(tl_moe_result *r)
{
    if (!r) return;
    free(r->items);
    r->items = NULL;
}

/* What the work items of one tile's n-blocks [nb0, nb1) move to and from HBM. Bytes are charged
 * to the item that first touches them: an expert's weight columns to its first tile, a tile's
 * activations and metadata to its first n-block, outputs to every item. */
typedef struct {
    const tl_worklist *wl;
    int N, K, tile_n, n_blocks, tile_m, stage;
    int weights_per_tile; /* every tile pays the time of its expert's weights from HBM */
    int n_routed;         /* experts below this are routed; the rest shared */
    int act_loads;        /* times an item loads its rows (tl_moe_problem.act_loads, >= 1) */
    int pad_loads;        /* its copies land the tile's padding rows too (tl_moe_problem.pad_loads) */
    double w_elem, in_elem, out_elem;
    double act_share;     /* of a row's activation bytes, charged per routed row (stage 1: 1/k, each
                             token once; a shared expert's rows find them in the cache) */
} cost_ctx;

typedef struct {
    double w, a, o, m; /* HBM bytes (first touches): weights, activations, outputs, metadata */
    double w_again;    /* a later tile's weights, charged as HBM time (weights_per_tile), not bytes */
    double streamed;   /* every byte the items load or store, cache hits included */
    double streamed_w; /* of those, the weights' */
} byte_parts;

static byte_parts chunk_bytes(const cost_ctx *c, int tile, int nb0, int nb1)
{
    byte_parts b = {0, 0, 0, 0, 0, 0, 0};
    int rows = c->wl->tile_rows[tile];
    int last_cols = c->N - (c->n_blocks - 1) * c->tile_n;
    int full = nb1 - nb0 - (nb1 == c->n_blocks ? 1 : 0);
    double cols = (double)full * c->tile_n + (nb1 == c->n_blocks ? last_cols : 0);
    /* stage 1's SwiGLU epilogue writes half of the gate+up columns */
    double out_cols = c->stage == 1 ? (double)full * (c->tile_n / 2) + (nb1 == c->n_blocks ? last_cols / 2 : 0) : cols;
    int first_of_expert = tile == 0 || c->wl->tile_expert[tile - 1] != c->wl->tile_expert[tile];
    if (first_of_expert) b.w = cols * c->K * c->w_elem;
    else if (c->weights_per_tile) b.w_again = cols * c->K * c->w_elem;
    if (nb0 == 0) {
        int shared = c->stage == 1 && c->wl->tile_expert[tile] >= c->n_routed;
        b.a = shared ? 0 : rows * (double)c->K * c->in_elem * c->act_share;
        b.m = c->tile_m * 4.0 + 4.0 + rows * 4.0;
    }
    b.o = rows * out_cols * c->out_elem;
    /* each item streams its whole weight block and its tile's activation rows, hit or miss */
    /* zero-filled padding rows pass the copy path too: pad_loads 1 the tile's tile_m rows, above 1
     * its rows rounded up to whole boxes of pad_loads rows (at most tile_m) */
    int landed = rows;
    if (c->pad_loads == 1) landed = c->tile_m;
    else if (c->pad_loads > 1) {
        landed = (rows + c->pad_loads - 1) / c->pad_loads * c->pad_loads;
        if (landed > c->tile_m) landed = c->tile_m;
    }
    b.streamed_w = cols * c->K * c->w_elem;
    b.streamed = b.streamed_w + (double)(nb1 - nb0) * c->act_loads * landed * c->K * c->in_elem + b.o + b.m;
    return b;
}


/* The stage's HBM bytes as stored, exact integers (moe.h): the active experts' weight matrices
 * (N x K each, codes and scales), the GEMM's activations in (stage 1: each token once; stage 2: each
 * edge's row, bf16 or its re-quantization) and outputs out (stage 1: bf16 SwiGLU outputs per
 * edge; stage 2: per edge, fp32 partials for the combine else bf16), the routing metadata (each
 * tile's sorted ids, expert and row count, each edge's top-k weight), and the stage's other kernels:
 * the re-quantization (bf16 rows in, rows in act_dtype's stage-1 storage out) and the combine
 * (partials in, output out). act_dtype: the dtype whose activation storage (tl_moe_act_bytes) the
 * kernel's activations take: the problem's, or bf16 for MX activations carried as BF16 values. */
typedef struct {
    double w, a, o, m;        /* the GEMM's: weights, activations, outputs, metadata */
    double requant, combine;  /* the other kernels' */
} stage_bytes;

static stage_bytes count_stage_bytes(const tl_moe_problem *p, const tl_worklist *wl, int N, int K, int64_t edges,
                                     tl_moe_dtype act_dtype, int requant, int combine)
{
    const uint64_t e = (uint64_t)edges, tokens = (uint64_t)p->tokens, n = (uint64_t)N;
    const uint64_t bf16_rows = tl_moe_act_bytes(TL_MOE_BF16, e, K), q_rows = tl_moe_act_bytes(act_dtype, e, K);
    stage_bytes b = {0, 0, 0, 0, 0, 0};
    b.w = (double)((uint64_t)wl->active_experts * tl_moe_weight_matrix_bytes(p->dtype, N, K));
    if (p->stage == 1) {
        b.a = (double)tl_moe_act_bytes(act_dtype, tokens, K);
        b.o = (double)(e * (n / 2) * 2);
    } else {
        b.a = (double)(requant ? q_rows : bf16_rows);
        b.o = (double)(e * n * (combine ? 4 : 2));
        if (requant) b.requant = (double)(bf16_rows + q_rows);
        if (combine) b.combine = (double)((e + tokens) * n * 4);
    }
    b.m = (double)((uint64_t)wl->n_tiles * ((uint64_t)p->tile_m * 4 + 4) + e * 4);
    return b;
}

/* kernels/moe.hip as built for sm_90 (TL_MMA_TARGET_SM80 fragments: 32 lanes, 8-column B
 * fragments, so NF = NCOLS / 8 = 4 weight rows per lane, 16-byte loads of weight codes). */
#define KERNEL_LANES 32
#define KERNEL_NF (TL_MOE_NCOLS / 8)                    /* B fragments of 8 columns per wave */
#define KERNEL_S1_WAVES (TL_MOE_S1_THREADS / KERNEL_LANES) /* split K */
#define KERNEL_S2_WAVES (TL_MOE_S2_THREADS / KERNEL_LANES) /* split N */
#define KERNEL_S1_NB TL_MOE_S1_NB   /* SwiGLU columns per item = S1_NB gate + S1_NB up weight rows */
#define KERNEL_NCOLS TL_MOE_NCOLS   /* stage-2 columns per wave */
#define KERNEL_S1_BLOCKS TL_MOE_S1_MINB
#define KERNEL_S2_BLOCKS TL_MOE_S2_MINB
#define KERNEL_TILE_M TL_MOE_TILE_M
#define KERNEL_QUANT_ROWS 8       /* its blocks resident per SM (2048 threads per SM on sm_90) */

/* The contract's shape of p (width per GPU). */
static tl_moe_shape tilelab_shape(const tl_moe_problem *p)
{
    int E, k, width;
    tl_model_moe_shape(p->model, &E, &k, &width);
    tl_moe_shape shape = {.tokens = p->tokens, .hidden = p->model->hidden, .width = p->tp > 0 ? width / p->tp : width,
                          .n_experts = E, .top_k = k, .dtype = p->dtype};
    return shape;
}

/* kernels/moe.hip runs moe_prefill_s1 in a build with wgmma on a compute capability 9 device: the
 * sm_90 presets */
static int has_wgmma(const tl_hw *hw) { return hw && strncmp(hw->arch, "sm_90", 5) == 0; }

int tl_moe_tilelab_kernel(tl_moe_problem *p)
{
    if (!p || !p->model) return tl_error(TL_EUSAGE, "sim moe", "missing problem or model");
    tl_moe_shape shape = tilelab_shape(p);
    if (has_wgmma(p->hw) && tl_moe_uses_prefill(&shape, p->stage)) return tl_moe_tilelab_kernel_prefill(p);
    return tl_moe_tilelab_kernel_group(p, tl_moe_tiles_per_item(&shape, p->stage));
}

/* Clears p's kernel geometry fields (simulator/moe.h, tl_moe_tilelab_kernel's list) and names the
 * kernel: each of tilelab's kernels below then sets the fields it uses. */
static void clear_kernel(tl_moe_problem *p, const char *kernel)
{
    p->tile_m = p->tile_n = p->blocks_per_cu = p->narrow_rows = 0;
    p->inflight_kib = p->inflight_kib_wide = p->dequant_instr = p->load_cap_gbps = p->load_cap_w_gbps = 0.0;
    p->prologue_loads = p->combine_kernel = p->requant_kernel = p->requant_rows_per_cu = 0;
    p->weights_per_tile = p->vector_rows = p->cu_load_cap = p->act_loads = p->wgmma = p->pad_loads = 0;
    p->mx_acts = TL_MOE_MX_ACTS_DEFAULT;
    p->kernel = kernel;
}

int tl_moe_tilelab_kernel_gemm(tl_moe_problem *p)
{
    if (!p || !p->model) return tl_error(TL_EUSAGE, "sim moe", "missing problem or model");
    tl_moe_shape shape = tilelab_shape(p);
    return tl_moe_tilelab_kernel_group(p, tl_moe_tiles_per_item(&shape, p->stage));
}

/* moe_prefill_fp8<STAGE> (kernels/moe_prefill.hip; contract/moe.h's TL_MOE_PF8_*): the bf16 prefill
 * kernels' items (tile_m TL_MOE_PF_ROWS; tile_n 128 weight rows: stage 1's 64 gate + 64 up, stage
 * 2's 128 output columns), one block an SM, the ring of TL_MOE_PF8_STAGES steps of TL_MOE_PF8_KSTEP
 * E4M3 values, the products on the E4M3 wgmma (the problem's wgmma field, fp8: the preset's
 * wgmma_fp8_tflops). The copies: cp.async at the preset's async_copy_per_cu_gbps (bf16 stage 1's
 * rate) for what the producer threads copy, tensor copies at hbm_per_cu_gbps (bf16 stage 2's) for
 * what the copy engine lands: by default stage 1's weights (load_cap_w_gbps; its gathered rows stay
 * cp.async's) and all of stage 2's, whose activation boxes land whole (pad_loads TL_MOE_PF2_ABOX);
 * with tl_moe_fp8_tma_off everything by cp.async, the real rows only (pad_loads 0). The producer
 * reads the group's sorted ids before its first copies in both stages (prologue_loads as bf16 stage
 * 1's); stage 2 after the re-quantization kernel and before the combine, as moe_gemm's. */
static int prefill_fp8(tl_moe_problem *p, const tl_moe_shape *shape)
{
    const int E = shape->n_experts, s2 = p->stage == 2;
    const double step_kib = (TL_MOE_PF_ROWS + 128.0) * TL_MOE_PF8_KSTEP / 1024.0;
    clear_kernel(p, s2 ? "moe_prefill_fp8_s2" : "moe_prefill_fp8_s1");
    p->tile_m = TL_MOE_PF_ROWS;
    p->tile_n = s2 ? TL_MOE_PF2_NB : 2 * TL_MOE_PF_NB;
    p->blocks_per_cu = TL_MOE_PF_BLOCKS;
    p->inflight_kib = (TL_MOE_PF8_STAGES - 1) * step_kib;
    p->prologue_loads = ((E + TL_MOE_PF_SCAN - 1) / TL_MOE_PF_SCAN + 1) / 2 + 2;
    p->combine_kernel = s2;
    p->requant_kernel = s2;
    p->requant_rows_per_cu = KERNEL_QUANT_ROWS;
    p->act_loads = 1;
    p->cu_load_cap = 1;
    const double cp_async = p->hw->async_copy_per_cu_gbps > 0 ? p->hw->async_copy_per_cu_gbps : 0.0;
    const int tma = !tl_moe_fp8_tma_off();
    p->load_cap_gbps = tma && s2 ? p->hw->hbm_per_cu_gbps : cp_async;
    p->load_cap_w_gbps = tma && !s2 ? p->hw->hbm_per_cu_gbps : 0.0;
    p->pad_loads = tma && s2 ? TL_MOE_PF2_ABOX : 0;
    p->wgmma = 1;
    return 0;
}

/* moe_prefill_s1 and moe_prefill_s2 (kernels/moe_prefill.hip; their geometry: contract/moe.h's
 * TL_MOE_PF_* and TL_MOE_PF2_*): items of (group of TL_MOE_PF_ROWS rows, 2 TL_MOE_PF_NB weight rows of
 * W1 / TL_MOE_PF2_NB of W2), one block an SM, the steps' copies pipelined behind the products
 * (simulator/moe.h, "the prefill kernel"). */
int tl_moe_tilelab_kernel_prefill(tl_moe_problem *p)
{
    if (!p || !p->model || !p->hw) return tl_error(TL_EUSAGE, "sim moe", "missing problem, model or hardware");
    if (!has_wgmma(p->hw))
        return tl_error(TL_EUSAGE, "sim moe", "the prefill kernel is sm_90a's (wgmma); preset %s is %s", p->hw->name,
                        p->hw->arch);
    tl_moe_shape shape = tilelab_shape(p);
    if (!tl_moe_prefill_fits(&shape, p->stage))
        return tl_error(TL_EUSAGE, "sim moe", "the prefill kernel runs bf16 or fp8 stage 1 with hidden %% %d == 0 and "
                        "width %% %d == 0, or stage 2 with width %% %d == 0 and hidden %% %d == 0 (%s stage %d, hidden "
                        "%d, width %d)", TL_MOE_PF_KCHUNK, TL_MOE_PF_NB, TL_MOE_PF8_KSTEP, TL_MOE_PF2_NB,
                        tl_moe_dtype_name(p->dtype), p->stage, shape.hidden, shape.width);
    if (p->dtype == TL_MOE_FP8) return prefill_fp8(p, &shape);
    const int E = shape.n_experts, s2 = p->stage == 2;
    const double step_kib = (TL_MOE_PF_ROWS + (s2 ? TL_MOE_PF2_NB : 2.0 * TL_MOE_PF_NB)) * TL_MOE_PF_KSTEP * 2.0 / 1024.0;
    clear_kernel(p, s2 ? "moe_prefill_s2" : "moe_prefill_s1");
    p->tile_m = TL_MOE_PF_ROWS; /* the worklist of TL_MOE_PF_ROWS-row tiles: its tiles are the groups */
    p->tile_n = s2 ? TL_MOE_PF2_NB : 2 * TL_MOE_PF_NB;
    p->blocks_per_cu = TL_MOE_PF_BLOCKS;
    p->inflight_kib = (TL_MOE_PF_STAGES - 1) * step_kib; /* the ring's steps ahead of the one in use */
    /* the dependent loads before the first step's copies: the group scan's loads (on average half
     * of ceil(E / TL_MOE_PF_SCAN), rounded up) and the expert's tile offset; stage 1 then the
     * group's sorted ids (its copies gather by token; stage 2's computing threads read theirs
     * beside the first step's copies) */
    p->prologue_loads = ((E + TL_MOE_PF_SCAN - 1) / TL_MOE_PF_SCAN + 1) / 2 + (s2 ? 1 : 2);
    p->combine_kernel = s2; /* stage 2: the per-edge rows, then the combine (as moe_gemm's) */
    p->act_loads = 1;
    p->cu_load_cap = 1;
    /* stage 1: cp.async at the measured cp.async rate; stage 2: tensor copies at the preset's per-SM
     * stream, a guess (no bulk-copy rate of this kernel measured) */
    p->load_cap_gbps = s2 ? p->hw->hbm_per_cu_gbps
                     : TL_MOE_PF_CP_ASYNC && p->hw->async_copy_per_cu_gbps > 0 ? p->hw->async_copy_per_cu_gbps : 0.0;
    /* stage 1's producer copies the group's real rows only; stage 2's boxes land whole
     * TL_MOE_PF2_ABOX-row boxes, padding and rows past the group included */
    p->pad_loads = s2 ? TL_MOE_PF2_ABOX : 0;
    /* stage 1's weights by tensor copies from W1's rows copy (tl_moe_bf16_tma_off: the packed
     * chunks by cp.async), beside its gathered rows' cp.async */
    p->load_cap_w_gbps = !s2 && !tl_moe_bf16_tma_off() ? p->hw->hbm_per_cu_gbps : 0.0;
    p->wgmma = 1;
    return 0;
}

int tl_moe_tilelab_kernel_group(tl_moe_problem *p, int group)
{
    if (!p || !p->model) return tl_error(TL_EUSAGE, "sim moe", "missing problem or model");
    if (group != 1 && group != 2 && group != 4)
        return tl_error(TL_EUSAGE, "sim moe", "tiles per item %d is not 1, 2 or 4", group);
    if (group > 1 && p->dtype != TL_MOE_BF16)
        return tl_error(TL_EUSAGE, "sim moe", "only bf16 groups tiles (%d asked)", group);
    int E, k, width;
    tl_model_moe_shape(p->model, &E, &k, &width);
    tl_moe_shape shape = {.tokens = p->tokens, .hidden = p->model->hidden, .width = p->tp > 0 ? width / p->tp : width,
                          .n_experts = E, .top_k = k, .dtype = p->dtype};
    /* bf16 multiplies 2 or 4 tiles of one expert per item (contract/moe.h, both stages) */
    const int pair = group > 1;
    /* Fmt<DT, layout>: chunks in flight per wave (U) x 16-byte loads per weight row (W_VEC: bf16 and
     * fp8 read 32 bytes, 128 bytes of a row over 4 lanes; layout 2, used for tiles of at most 8 rows:
     * bf16 64 bytes, fp8 in stage 1 two 32-byte chunks). The kernel picks the layout per tile
     * (tile_rows <= TL_MOE_TILE_M / 2), and so does the model: inflight_kib is layout 2's and
     * inflight_kib_wide layout 0's for the tiles of more rows (under random routing, the busier
     * experts' tiles), unpaired only. */
    int has_half = p->dtype == TL_MOE_BF16 || (p->dtype == TL_MOE_FP8 && p->stage == 1);
    int half = has_half && !pair;
    int u = 1, vec = 1, u0 = 1, vec0 = 1; /* layout 2 (when half), layout 0 */
    switch (p->dtype) {
    case TL_MOE_BF16: vec = half ? 4 : 2, vec0 = 2; break;
    case TL_MOE_FP8: vec = vec0 = 2, u = half ? 2 : 1; break;
    case TL_MOE_MXFP8: u = u0 = 2; break;
    default: break; /* a16w4, mxfp4: one 16-byte chunk of 32 codes */
    }
    int waves = p->stage == 1 ? KERNEL_S1_WAVES : KERNEL_S2_WAVES;
    if (tl_moe_uses_gemv(&shape, p->stage)) {
        /* moe_gemv_down (kernels/moe.h, tl_moe_gemv_geometry): an item is a long block, up to
         * TL_MOE_GEMV_TASKS tasks of (blockDim / gs) x TL_MOE_GEMV_R columns in turn, each thread TL_MOE_GEMV_R x
         * TL_MOE_GEMV_VJ 16-byte loads in flight; the next task's loads are issued before this one's
         * sums are reduced, so only the tile's expert is a dependent load. The short blocks that
         * end its grid are not modelled. */
        tl_moe_gemv_geom g = tl_moe_gemv_geometry(&shape, KERNEL_LANES);
        clear_kernel(p, "moe_gemv_down");
        p->tile_m = KERNEL_TILE_M;
        p->tile_n = g.tasks * g.cols_per_task;
        p->blocks_per_cu = TL_MOE_GEMV_MINB;
        p->inflight_kib = g.threads * TL_MOE_GEMV_R * TL_MOE_GEMV_VJ * 16.0 / 1024.0;
        p->prologue_loads = 1;
        p->combine_kernel = 1;
        p->requant_rows_per_cu = KERNEL_QUANT_ROWS;
        p->vector_rows = 1;
        return 0;
    }
    clear_kernel(p, "moe_gemm");
    p->tile_m = group * KERNEL_TILE_M;
    p->tile_n = p->stage == 1 ? 2 * KERNEL_S1_NB : KERNEL_S2_WAVES * KERNEL_NCOLS;
    p->blocks_per_cu = group > 2 ? TL_MOE_GROUP_MINB : p->stage == 1 ? KERNEL_S1_BLOCKS : KERNEL_S2_BLOCKS;
    p->inflight_kib = (double)waves * KERNEL_LANES * KERNEL_NF * 16.0 * vec * u / 1024.0;
    p->narrow_rows = half ? KERNEL_TILE_M / 2 : 0;
    p->inflight_kib_wide = half ? (double)waves * KERNEL_LANES * KERNEL_NF * 16.0 * vec0 * u0 / 1024.0 : 0;
    /* the first weight loads wait for one dependent round trip (the tile's expert; fp8: then the
     * sorted ids and the activation scales that go to shared memory before the first chunk) */
    p->prologue_loads = p->dtype == TL_MOE_FP8 ? 2 : 1;
    p->combine_kernel = p->stage == 2;
    /* stage 2's input re-quantized by its own kernel, one block a worklist row: fp8's 1x128 groups;
     * the MX types' MXFP8 (as E4M3 codes + E8M0 scales for the scaled instruction, else as the
     * round trip's BF16 values) */
    const int mx = tl_moe_mx_acts(p->dtype), scaled = mx && has_scaled_f8f6f4(p->hw);
    p->requant_kernel = p->stage == 2 && tl_moe_quantized_acts(p->dtype);
    p->requant_rows_per_cu = KERNEL_QUANT_ROWS;
    /* the MX types on gfx950: the scaled f8f6f4 instruction takes the activations' E4M3 codes and
     * the weights' codes (E2M1 / E4M3) with both E8M0 scales, nothing converted; elsewhere (sm_90,
     * gfx942) the activations' BF16 values and the BF16 instruction */
    p->mx_acts = !mx ? TL_MOE_MX_ACTS_DEFAULT : scaled ? TL_MOE_MX_ACTS_E4M3 : TL_MOE_MX_ACTS_BF16;
    /* an expert's later tiles find its weights in L2 (weights_per_tile 0); every byte an SM loads
     * passes its load path (cu_load_cap), and stage 2's warps each load the item's rows
     * (simulator/moe.h) */
    p->cu_load_cap = 1;
    p->act_loads = p->stage == 2 ? KERNEL_S2_WAVES : 1;
    /* instructions per weight element of weights_bf16: a16w4 on every arch, the MX types where the
     * kernel multiplies BF16 (not gfx950) */
    p->dequant_instr = scaled ? 0.0 : bf16_conversion_instr(p->dtype);
    return 0;
}

int tl_moe_generic_kernel(tl_moe_problem *p)
{
    if (!p) return tl_error(TL_EUSAGE, "sim moe", "missing problem");
    p->requant_kernel = p->stage == 2 && p->dtype == TL_MOE_FP8;
    return 0;
}

int tl_moe_sim(const tl_moe_problem *p, tl_moe_result *r)
{
    memset(r, 0, sizeof *r);
    if (validate(p)) return TL_EUSAGE;
    const tl_hw *hw = p->hw;
    int E, k, width;
    tl_model_moe_shape(p->model, &E, &k, &width);
    if (E < 1 || k < 1) return tl_error(TL_EUSAGE, "--model", "E = %d and k = %d must be at least 1", E, k);
    if (k > E) return tl_error(TL_EUSAGE, "--model", "top-k = %d is larger than the %d experts", k, E);
    if (width < 1 || p->model->hidden < 1)
        return tl_error(TL_EUSAGE, "--model", "hidden size %d and FFN width %d must be at least 1", p->model->hidden, width);
    if (width % p->tp != 0)
        return tl_error(TL_EUSAGE, "--tp", "tp = %d does not divide the expert width %d", p->tp, width);
    int wtp = width / p->tp;
    int N = p->stage == 1 ? 2 * wtp : p->model->hidden;
    int K = p->stage == 1 ? p->model->hidden : wtp;

    /* the MX types' activations (tl_moe_problem.mx_acts): E4M3 codes into the scaled f8f6f4
     * instruction beside the weights' codes, or BF16 values into the BF16 one */
    const int mx = tl_moe_mx_acts(p->dtype);
    const int mx_e4m3 = mx && p->mx_acts == TL_MOE_MX_ACTS_E4M3, mx_bf16 = mx && p->mx_acts == TL_MOE_MX_ACTS_BF16;
    const char *ad, *bd;
    tl_moe_instr_dtypes(hw, p->dtype, &ad, &bd);
    if (mx_e4m3) ad = "fp8"; /* B stays the weights' (fp4 or fp8); a mixed pair runs at fp8's rate */
    else if (p->dequant_instr > 0 || mx_bf16) ad = bd = "bf16"; /* the kernel converts its weights to BF16 */
    /* weights stored in another format than the instruction takes are converted, at the kernel's
     * stated count or else the measured one (bf16_conversion_instr) */
    const int converts = strcmp(bd, "bf16") == 0 && p->dtype != TL_MOE_BF16 && p->dtype != TL_MOE_FP8;
    const double dequant_instr = !converts ? 0.0 : p->dequant_instr > 0 ? p->dequant_instr : bf16_conversion_instr(p->dtype);
    tl_instr in;
    int tile_n = p->tile_n > 0 ? p->tile_n : DEFAULT_TILE_N;
    /* wgmma (sm_90a): bf16 2 x 64 x tile_n x 16 flops an instruction at the preset's bf16 ceiling;
     * fp8 (E4M3) 2 x 64 x tile_n x 32 at the preset's wgmma E4M3 loop rate (wgmma_fp8_tflops, else
     * its fp8 ceiling); its cycles on one of the SM's matrix cores at the datasheet rate (256 for
     * m64n128k16 and m64n128k32) */
    const int wg8 = p->wgmma && p->dtype == TL_MOE_FP8;
    const tl_ceiling wc = wg8 ? hw->ceilings.fp8_tflops : hw->ceilings.bf16_tflops;
    const double wgmma_tflops = !p->wgmma ? 0.0 : wg8 && hw->wgmma_fp8_tflops > 0 ? hw->wgmma_fp8_tflops : tl_ceiling_value(wc);
    if (p->wgmma && !(wgmma_tflops > 0 && wc.datasheet > 0))
        return tl_error(TL_EUSAGE, "sim moe", "preset %s has no %s ceiling for wgmma", hw->name, wg8 ? "fp8" : "bf16");
    if (p->vector_rows) /* fp32 FMAs, one real row at a time: nothing to pad to */
        in = (tl_instr){.name = "none: fp32 FMA per row", .m = 1, .n = 1, .k = 1};
    else if (p->wgmma) {
        in = (tl_instr){.m = 64, .n = tile_n, .k = wg8 ? 32 : 16};
        snprintf(in.a, sizeof in.a, "%s", wg8 ? "fp8" : "bf16");
        snprintf(in.b, sizeof in.b, "%s", in.a);
        snprintf(in.name, sizeof in.name, wg8 ? "wgmma.mma_async.m64n%dk32.f32.e4m3.e4m3" : "wgmma.mma_async.m64n%dk16.f32.bf16.bf16",
                 tile_n);
        const double per_core_clk = wc.datasheet * 1e12 / ((double)hw->cus * hw->matrix_cores_per_cu * hw->clock_mhz * 1e6);
        in.cycles = (int)lround(2.0 * in.m * in.n * in.k / per_core_clk);
    } else if (tl_hw_pick_instr(hw, ad, bd, p->tile_m, &in))
        return TL_EUSAGE;

    tl_worklist wl;
    int rc = tl_moe_worklist(p, &wl);
    if (rc) return rc;

    const int ks = k + p->n_shared; /* slots a token: routed, then shared */
    int64_t edges = (int64_t)p->tokens * ks;
    int n_blocks = (N + tile_n - 1) / tile_n;
    int K_pad = (K + in.k - 1) / in.k * in.k;
    long long items = (long long)wl.n_tiles * n_blocks;
    /* the walk below is O(tiles + waves) and a schedule O(items): bound both, so that an absurd
     * shape (tile_n 1 against a huge hidden size) is an error, not a run of hours */
    if ((items + hw->cus - 1) / hw->cus > TL_MOE_MAX_WAVES) {
        tl_worklist_free(&wl);
        return tl_error(TL_EUSAGE, "sim moe", "%lld work items make more than %lld waves of %d CUs; use a wider "
                        "--tile-n or fewer tokens", items, (long long)TL_MOE_MAX_WAVES, hw->cus);
    }
    if (p->want_schedule && items > TL_MOE_MAX_SCHEDULE) {
        tl_worklist_free(&wl);
        return tl_error(TL_EUSAGE, "schedule", "%lld work items, more than the %lld a schedule keeps; use fewer "
                        "tokens%s", items, (long long)TL_MOE_MAX_SCHEDULE,
                        p->kernel ? "" : " or a larger --tile-m"); /* the shipped kernel's tile is its own */
    }

    r->tokens = p->tokens;
    r->stage = p->stage;
    r->kernel = p->kernel ? p->kernel : "generic";
    r->n_experts = E;
    r->top_k = k;
    r->n_shared = p->n_shared;
    r->N = N;
    r->K = K;
    r->K_padded = K_pad;
    r->tile_m = p->tile_m;
    r->tile_n = tile_n;
    r->instr = in;
    r->active_experts = wl.active_experts;
    r->tiles = wl.n_tiles;
    r->n_blocks = n_blocks;
    r->work_items = items;
    r->padding = p->vector_rows ? 1.0 : (double)wl.n_rows_padded / (double)edges;
    r->k_padding = (double)K_pad / K;
    r->flops_useful = 2.0 * (double)edges * N * K;
    r->flops_issued = p->vector_rows ? r->flops_useful
                                     : 2.0 * (double)wl.n_rows_padded * ((double)n_blocks * tile_n) * K_pad;

    if (p->want_schedule) {
        r->items = calloc((size_t)items, sizeof *r->items);
        if (!r->items) {
            tl_worklist_free(&wl);
            return tl_error(TL_EFAIL, "sim moe", "out of memory for %lld work items", items);
        }
    }

    /* compute time of one work item (every item computes a full padded tile; vector_rows: not
     * charged, see tl_moe_problem) */
    double item_compute_us = 0.0;
    if (p->wgmma) {
        item_compute_us = 2.0 * p->tile_m * (double)tile_n * K_pad / (wgmma_tflops * 1e6 / hw->cus);
        r->matrix_tflops = wgmma_tflops;
    } else if (!p->vector_rows) {
        double instrs = (double)(p->tile_m / in.m) * ((tile_n + in.n - 1) / in.n) * ((double)K_pad / in.k);
        double item_cycles = instrs * in.cycles / hw->matrix_cores_per_cu;
        tl_ceiling mc = matrix_ceiling(hw, in.a);
        double slow = (mc.measured > 0 && mc.datasheet > 0) ? mc.datasheet / mc.measured : 1.0;
        item_compute_us = item_cycles / hw->clock_mhz * slow;
        r->matrix_tflops = tl_hw_instr_tflops(hw, &in) / slow;
    }
    /* the weights' conversion to BF16 on the issue slots (dequant_instr) */
    double item_dequant_us = dequant_instr > 0 ? (double)tile_n * K * dequant_instr /
                                                        ((double)hw->vector_lanes_per_cu * hw->clock_mhz)
                                                  : 0.0;
    item_compute_us += item_dequant_us;
    double bw = tl_ceiling_value(hw->ceilings.hbm_read_gbps); /* GB/s = 1e3 B/us */
    double lat = hw->hbm_latency_us;
    int bpc = p->blocks_per_cu > 0 ? p->blocks_per_cu : 1;
    /* one work item's own stream: its bytes in flight per DRAM round trip when the kernel states
     * them, else the CU's stream (the problem's or the preset's) shared by its resident items */
    double cu_hbm = p->cu_gbps > 0 ? p->cu_gbps : hw->hbm_per_cu_gbps;
    double item_hbm = p->inflight_kib > 0 && lat > 0 ? p->inflight_kib * 1024.0 / lat / 1e3 : cu_hbm / bpc;
    double item_l2 = hw->l2_per_cu_gbps * item_hbm / hw->hbm_per_cu_gbps;
    /* the tiles of more than narrow_rows rows: their layout's bytes in flight (inflight_kib_wide) */
    const int narrow = p->narrow_rows > 0 && p->inflight_kib_wide > 0 && p->inflight_kib > 0 && lat > 0 ? p->narrow_rows : 0;
    double wide_hbm = narrow ? p->inflight_kib_wide * 1024.0 / lat / 1e3 : item_hbm;
    double wide_l2 = hw->l2_per_cu_gbps * wide_hbm / hw->hbm_per_cu_gbps;
    r->bw_gbps = bw;
    /* cu_load_cap's rate: the kernel's copy path (load_cap_gbps), else the preset's per-CU stream */
    const double cap_gbps = p->load_cap_gbps > 0 ? p->load_cap_gbps : hw->hbm_per_cu_gbps;
    int requant = p->stage == 2 && p->requant_kernel && tl_moe_quantized_acts(p->dtype);
    int combine = p->stage == 2 && p->combine_kernel;

    /* bytes per element class: the activations in act_dtype's stage-1 storage (MX activations
     * carried as BF16 values: bf16's) */
    const tl_moe_dtype act_dtype = mx_bf16 ? TL_MOE_BF16 : p->dtype;
    double q_act = tl_moe_act_bytes_per_elem(act_dtype);
    double in_elem = p->stage == 1 ? q_act /* stage 2 reads the bf16 buffer, or its re-quantization */
                     : requant ? q_act : 2.0;
    double out_elem = combine ? 4.0 : 2.0;                    /* fp32 partials for the combine */
    double act_share = p->stage == 1 ? 1.0 / k : 1.0;         /* stage 1 reads each token once */

    cost_ctx c = {.wl = &wl, .N = N, .K = K, .tile_n = tile_n, .n_blocks = n_blocks, .tile_m = p->tile_m,
                  .weights_per_tile = p->weights_per_tile, .n_routed = E, .act_loads = p->act_loads > 0 ? p->act_loads : 1,
                  .pad_loads = p->pad_loads,
                  .stage = p->stage, .w_elem = tl_moe_weight_bytes_per_elem(p->dtype), .in_elem = in_elem,
                  .out_elem = out_elem, .act_share = act_share};
    double t = hw->launch_us;
    double mem_bound_us = 0, cmp_bound_us = 0, load_bound_us = 0; /* load_bound_us: of mem_bound_us, the
                                    waves the CU's load path bounds (cu_load_cap) */
    int cus = hw->cus, per_xcd = hw->cus / hw->xcds;
    long long slots = (long long)cus * bpc; /* items resident at once: one wave */
    long long waves = (items + slots - 1) / slots;
    /* a kernel without cross-item prefetch: every wave's items wait for their prologue's dependent
     * loads, then one more round trip before the first weight bytes arrive, and end with the
     * epilogue; the resident items of a wave start together, so the wave pays it once */
    double wave_gap = p->prologue_loads > 0 ? p->prologue_loads * hw->load_chain_us + lat + hw->item_fixed_us : 0;
    r->waves = (int)(waves > INT32_MAX ? INT32_MAX : waves);
    int tile = 0, nb = 0; /* next work item: idx = tile * n_blocks + nb */
    double fixed_total = hw->launch_us;
    for (long long w = 0; w < waves; w++) {
        long long first = w * slots, last = first + slots < items ? first + slots : items;
        int a = (int)(last - first);
        int on_cu = (a + cus - 1) / cus; /* items of the wave on the busiest CU share its matrix cores */
        double compute_w = on_cu * item_compute_us;
        /* the wave's bytes, a run of n-blocks of one tile at a time: O(tiles + waves) overall; each
         * run's own stream time at its tile's rates (misses at the per-item HBM rate, cache hits at the
         * per-item L2 rate; a tile of more than narrow rows at its wider layout's) */
        double wave_bytes = 0, stream_sum = 0, stream_max = 0, wave_streamed = 0, wave_streamed_w = 0;
        for (long long left = a; left > 0;) {
            int take = n_blocks - nb < left ? n_blocks - nb : (int)left;
            byte_parts b = chunk_bytes(&c, tile, nb, nb + take);
            const double miss = b.w + b.w_again + b.a + b.o + b.m;
            const int wide = narrow && wl.tile_rows[tile] > narrow;
            const double run_us = (miss / (wide ? wide_hbm : item_hbm) + (b.streamed - miss) / (wide ? wide_l2 : item_l2)) / 1e3;
            wave_bytes += miss;
            wave_streamed += b.streamed;
            wave_streamed_w += b.streamed_w;
            stream_sum += run_us;
            if (run_us / take > stream_max) stream_max = run_us / take;
            left -= take;
            nb += take;
            if (nb == n_blocks) nb = 0, tile++;
        }
        /* HBM ceiling on first touches; each CU's own stream on everything its item loads. A full wave
         * charges its items' mean (a CU whose item ends early takes the next one); the last wave, with
         * nothing left to take, its slowest tile's items: the tail of the busiest tile */
        double hbm_us = wave_bytes / (bw * 1e3);
        double stream_us = w == waves - 1 ? stream_max : stream_sum / (double)a;
        /* cu_load_cap: the busiest CU's share of the wave's loads, hits included, at its load rate */
        int load_bound = 0; /* the CU's load path is the wave's bound */
        int hides_gap = 0;  /* and its other resident items keep it busy through one item's gap */
        if (p->cu_load_cap && cap_gbps > 0) {
            /* the weights' share at its own rate where the kernel states one (load_cap_w_gbps) */
            const double w_share = p->load_cap_w_gbps > 0 ? wave_streamed_w : 0.0;
            const double cap_us = on_cu * ((wave_streamed - w_share) / a / (cap_gbps * 1e3) +
                                           (w_share > 0 ? w_share / a / (p->load_cap_w_gbps * 1e3) : 0.0));
            load_bound = cap_us > stream_us && cap_us > hbm_us && (on_cu > 1 || p->load_cap_gbps > 0);
            hides_gap = load_bound && on_cu > 1;
            if (cap_us > stream_us) stream_us = cap_us;
        }
        double mem_us = hbm_us > stream_us ? hbm_us : stream_us;
        double fixed_w, wave_us;
        if (p->prologue_loads > 0) { /* no cross-item prefetch: nothing hides the wave's gap, but
                                      * where the CU's load path bounds the wave, its other resident
                                      * items keep that path busy through one item's gap (after the
                                      * first wave, whose items start in step) */
            fixed_w = hides_gap && w > 0 ? 0.0 : wave_gap;
            wave_us = (mem_us > compute_w ? mem_us : compute_w) + fixed_w;
            fixed_total += fixed_w;
            if (mem_us >= compute_w) mem_bound_us += wave_us, load_bound_us += load_bound ? wave_us : 0.0;
            else cmp_bound_us += wave_us;
        } else {
            /* the per-item fixed cost (prologue: dependent loads of sorted ids and gathered rows;
             * epilogue) sits on each CU's own timeline, after its stream or its compute; HBM is
             * shared and stays busy with the other CUs' loads meanwhile, so an HBM-bound wave
             * hides it */
            fixed_w = hw->item_fixed_us;
            double own_us = (stream_us > compute_w ? stream_us : compute_w) + fixed_w;
            /* the first wave starts in step (every CU in its prologue at once): nothing hides it */
            wave_us = w == 0 ? hbm_us + fixed_w : hbm_us;
            if (own_us > wave_us) wave_us = own_us;
            if (hbm_us >= own_us - fixed_w || stream_us > compute_w) mem_bound_us += wave_us, load_bound_us += load_bound ? wave_us : 0.0;
            else cmp_bound_us += wave_us;
            if (w == 0 || hbm_us < own_us) fixed_total += fixed_w;
        }
        r->memory_us += mem_us;
        r->compute_us += compute_w;
        r->dequant_us += on_cu * item_dequant_us;
        if (r->items) { /* each item: its own bytes at its share of the wave's bandwidth */
            double per_item_hbm = bw / a * 1e3;
            for (long long idx = first; idx < last; idx++) {
                tl_moe_item *it = &r->items[idx];
                int pos = (int)((idx - first) % cus); /* the wave's items dealt round robin over CUs */
                it->tile = (int)(idx / n_blocks);
                it->n_block = (int)(idx % n_blocks);
                it->xcd = pos % hw->xcds;
                it->cu = it->xcd * per_xcd + pos / hw->xcds;
                it->wave = (int)w;
                it->expert = wl.tile_expert[it->tile];
                it->rows = wl.tile_rows[it->tile];
                byte_parts b = chunk_bytes(&c, it->tile, it->n_block, it->n_block + 1);
                double miss = b.w + b.a + b.o + b.m;
                double own = miss / per_item_hbm;
                const int wide = narrow && it->rows > narrow;
                double stream = (miss / (wide ? wide_hbm : item_hbm) + (b.streamed - miss) / (wide ? wide_l2 : item_l2)) / 1e3;
                if (stream > own) own = stream;
                double dur = (own > compute_w ? own : compute_w) + fixed_w;
                it->start_us = t;
                it->end_us = t + (dur < wave_us ? dur : wave_us);
            }
        }
        if (w == waves - 1) r->tail_us = wave_us;
        t += wave_us;
    }
    stage_bytes sb = count_stage_bytes(p, &wl, N, K, edges, act_dtype, requant, combine);
    tl_worklist_free(&wl);
    r->weight_bytes = sb.w;
    r->act_bytes = sb.a + sb.requant;
    r->out_bytes = sb.o + sb.combine;
    r->meta_bytes = sb.m;
    r->kernels = 1;

    /* stage 2's other kernels, each a further launch + its chain of dependent steps + its bytes at
     * the HBM ceiling (moe.h) */
    if (requant) {
        double rows_per_round = (double)cus * (p->requant_rows_per_cu > 0 ? p->requant_rows_per_cu : 1);
        double rounds = ceil((double)edges / rows_per_round);
        double passes = ceil((double)K / 8 / TL_MOE_QUANT_THREADS); /* each a load, then shuffles */
        double chain = rounds * (passes > 1 ? passes : 1) * hw->load_chain_us, byte_us = sb.requant / (bw * 1e3);
        r->extra_us += hw->next_kernel_us + chain + byte_us;
        fixed_total += hw->next_kernel_us + chain;
        mem_bound_us += byte_us;
        r->kernels++;
    }
    if (combine) {
        double byte_us = sb.combine / (bw * 1e3);
        double chain = ks * hw->load_chain_us; /* a thread's loads of its token's slots, one after another */
        r->extra_us += hw->next_kernel_us + chain + byte_us;
        fixed_total += hw->next_kernel_us + chain;
        mem_bound_us += byte_us;
        r->kernels++;
    }
    t += r->extra_us;
    if (p->after_flush) { /* the stage's loads first evict the flush's dirty lines: HBM writes */
        double l2_bytes = hw->flush_dirty_mb * 1e6;
        double read = r->weight_bytes + r->act_bytes + r->meta_bytes;
        r->writeback_bytes = read < l2_bytes ? read : l2_bytes;
        r->writeback_us = r->writeback_bytes / (bw * 1e3);
        r->memory_us += r->writeback_us;
        mem_bound_us += r->writeback_us;
        t += r->writeback_us;
    }

    r->fixed_us = fixed_total;
    r->time_us = t;
    r->hbm_bytes = r->weight_bytes + r->act_bytes + r->out_bytes + r->meta_bytes;
    r->intensity = r->flops_useful / r->hbm_bytes;

    long long last_items = items - (waves - 1) * slots;
    if (r->fixed_us > 0.5 * r->time_us) r->limiter = "fixed";
    else if (waves >= 2 && last_items * 2 < slots && r->tail_us > 0.25 * r->time_us) r->limiter = "tail";
    else if (mem_bound_us >= cmp_bound_us) r->limiter = load_bound_us > 0.5 * mem_bound_us ? "loads" : "hbm";
    else if (r->flops_issued >= 2.0 * r->flops_useful) r->limiter = "padding";
    else if (r->dequant_us > 0.5 * r->compute_us) r->limiter = "dequant";
    else r->limiter = "matrix";
    return 0;
}
