/* simulator/indexer.c: the indexer's cost model (simulator/indexer.h). */
#include "indexer.h"

#include <math.h>
#include <string.h>

#include "../core/tl.h"

static double or_default(double v, double d) { return v > 0 ? v : d; }

int tl_indexer_tile(const char *arch) { return strncmp(arch, "sm_", 3) == 0 ? TL_INDEXER_TILE_SM90 : TL_INDEXER_TILE_AMD; }

/* The kernel's operand format per arch: sm_90 decodes FP8 to bf16 (its bf16 mma.sync outruns its
 * FP8 one); the AMD targets feed the FP8 codes (gfx942 as FNUZ). */
static const char *operand_of(const tl_hw *hw) { return strncmp(hw->arch, "sm_", 3) == 0 ? "bf16" : "fp8"; }

static double ceiling_of(const tl_hw *hw, const char *operand)
{
    return tl_ceiling_value(strcmp(operand, "bf16") == 0 ? hw->ceilings.bf16_tflops : hw->ceilings.fp8_tflops);
}

/* Blocks one CU holds: the waves it holds over BLOCK_Q, and what its LDS holds (two tiles each). */
static int resident_limit(const tl_hw *hw, int q, int tile, const char *operand)
{
    const int waves = strncmp(hw->arch, "sm_", 3) == 0 ? TL_INDEXER_WAVES_SM90 : TL_INDEXER_WAVES_AMD;
    const double elem = strcmp(operand, "bf16") == 0 ? 2.0 : 1.0;
    const double lds = 2.0 * tile * (TL_INDEXER_DIM * elem + 4.0);
    int by_lds = (int)(hw->lds_kib * 1024.0 / lds);
    int by_waves = waves / q;
    int n = by_lds < by_waves ? by_lds : by_waves;
    return n > 0 ? n : 1;
}

static void charge_kv(const tl_indexer_problem *p, tl_indexer_result *r, long furthest)
{
    const tl_hw *hw = p->hw;
    const double hbm_cu = or_default(hw->hbm_per_cu_gbps, tl_ceiling_value(hw->ceilings.hbm_read_gbps) / hw->cus);
    const double l2_cu = or_default(hw->l2_per_cu_gbps, hbm_cu);
    const double miss_us = or_default(hw->hbm_latency_us, TL_INDEXER_MISS_US);
    const double k_bytes = (double)furthest * (TL_INDEXER_DIM + 4.0);
    r->fits_l2 = k_bytes <= 0.8 * hw->l2_mib_per_xcd * 1048576.0; /* most of it: Q, w, logits pass through */
    const double cap = r->fits_l2 ? l2_cu : hbm_cu;
    const double latency = r->fits_l2 ? miss_us * hbm_cu / l2_cu : miss_us;
    const double in_flight = (double)r->resident * r->tile * (TL_INDEXER_DIM + 4.0);
    r->cu_gbps = fmin(cap, in_flight / (latency * 1e3)); /* bytes / ns = GB/s */
    const long active = r->blocks < hw->cus ? r->blocks : hw->cus;
    r->kv_us = r->kv_bytes / ((double)active * r->cu_gbps * 1e3);
}

static void charge_compute(const tl_indexer_problem *p, tl_indexer_result *r, double peak)
{
    const tl_hw *hw = p->hw;
    const tl_indexer_shape *s = &p->shape;
    const long active = r->blocks < hw->cus ? r->blocks : hw->cus;
    r->mma_tflops = peak * TL_INDEXER_MMA_EFF * (double)active / hw->cus;
    r->mma_us = r->matrix_flops / (r->mma_tflops * 1e6);
    /* lanes sharing a score's row: 4 on sm_90 (m16n8: columns 2t, 2t+1), 16 on AMD (16x16) */
    const double shuffles = strncmp(hw->arch, "sm_", 3) == 0 ? 2.0 : 4.0;
    double ops = r->computed * (s->heads * TL_INDEXER_EPI_OPS + shuffles);
    const double k_values = r->kv_bytes / (TL_INDEXER_DIM + 4.0) * TL_INDEXER_DIM; /* per block, once */
    if (strncmp(hw->arch, "sm_", 3) == 0) ops += k_values * TL_INDEXER_DECODE_OPS;
    else if (strcmp(hw->arch, "gfx942") == 0) ops += k_values / 4.0; /* 0x80 -> 0x00, four bytes an op */
    const double lanes = or_default(hw->vector_lanes_per_cu, (double)hw->wave_size * hw->matrix_cores_per_cu);
    r->epi_us = ops / (lanes * (double)active * hw->clock_mhz);
}

static void pick_limiter(tl_indexer_result *r)
{
    double body = fmax(fmax(r->mma_us, r->epi_us), fmax(r->kv_us, r->hbm_us));
    r->limiter = body == r->mma_us ? "mma" : body == r->epi_us ? "epilogue" : body == r->kv_us ? "kv-stream" : "hbm";
    r->time_us = body / r->balance + r->fixed_us;
}

int tl_indexer_sim(const tl_indexer_problem *p, tl_indexer_result *r)
{
    memset(r, 0, sizeof *r);
    if (!p || !p->hw) return tl_error(TL_EUSAGE, "sim indexer", "no hardware preset");
    int rc = tl_indexer_shape_check(&p->shape);
    if (rc) return rc;
    const tl_hw *hw = p->hw;
    const tl_indexer_shape *s = &p->shape;
    r->operand = operand_of(hw);
    tl_instr in;
    if (tl_hw_pick_instr(hw, r->operand, r->operand, 16, &in)) return TL_EUSAGE;
    snprintf(r->instr, sizeof r->instr, "%s", in.name);
    r->instr_k = in.k;
    r->k_steps = (s->dim + in.k - 1) / in.k;
    r->block_q = s->block_q ? s->block_q : tl_indexer_best_block_q(hw, s);
    r->tile = tl_indexer_tile(hw->arch);
    r->blocks = tl_indexer_blocks(s, r->block_q);
    r->scores = tl_indexer_scores(s);
    r->computed = tl_indexer_computed_scores(s, r->block_q, r->tile);
    r->flops = tl_indexer_flops(s);
    r->matrix_flops = 2.0 * s->dim * s->heads * r->computed;
    r->kv_bytes = r->computed / r->block_q * (TL_INDEXER_DIM + 4.0);
    r->hbm_bytes = tl_indexer_bytes(s);
    r->hbm_us = r->hbm_bytes / (tl_ceiling_value(hw->ceilings.hbm_read_gbps) * 1e3);
    const int limit = resident_limit(hw, r->block_q, r->tile, r->operand);
    const long per_cu = (r->blocks + hw->cus - 1) / hw->cus;
    r->resident = per_cu < limit ? (int)per_cu : limit;
    const double slots = (double)hw->cus * limit;
    r->block_waves = r->blocks / slots;
    const double full = ceil(r->block_waves);
    r->balance = r->block_waves >= 4 || r->blocks < hw->cus ? 1.0 : r->block_waves / full;
    long furthest = 0;
    for (long b = 0; b < r->blocks; b++) {
        long a, e;
        tl_indexer_block_window(s, r->block_q, b, &a, &e);
        if (e > furthest) furthest = e;
        if (!s->starts) break; /* under the rule the last block's end is the furthest: computed below */
    }
    if (!s->starts) furthest = s->prefix + s->rows;
    charge_kv(p, r, furthest);
    charge_compute(p, r, fmin(tl_hw_instr_tflops(hw, &in), or_default(ceiling_of(hw, r->operand), INFINITY)));
    r->fixed_us = or_default(hw->launch_us, 5.0) + or_default(hw->item_fixed_us, 0.0);
    pick_limiter(r);
    r->tflops = r->flops / (r->time_us * 1e6);
    return TL_OK;
}

int tl_indexer_best_block_q(const tl_hw *hw, const tl_indexer_shape *s)
{
    int best = 1;
    double best_us = INFINITY;
    for (int q = 1; q <= TL_INDEXER_MAX_BLOCK_Q; q *= 2) {
        tl_indexer_problem p = {hw, *s};
        p.shape.block_q = q;
        tl_indexer_result r;
        if (tl_indexer_sim(&p, &r)) {
            tl_clear_error();
            break;
        }
        if (r.time_us < best_us * 0.98) best = q, best_us = r.time_us;
    }
    return best;
}
