/* simulator/indexer.c: the indexer's cost model (simulator/indexer.h). */
#include "indexer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "slots.h"

static double or_default(double v, double d) { return v > 0 ? v : d; }

int tl_indexer_tile(const char *arch) { return strncmp(arch, "sm_", 3) == 0 ? TL_INDEXER_TILE_SM90 : TL_INDEXER_TILE_AMD; }

/* The kernel's operand format: the FP8 codes on every target (sm_90a's E4M3 wgmma, gfx950's f8f6f4
 * MFMA, gfx942's FNUZ MFMA). */
static const char *operand_of(const tl_hw *hw)
{
    (void)hw;
    return "fp8";
}

static double ceiling_of(const tl_hw *hw, const char *operand)
{
    return tl_ceiling_value(strcmp(operand, "bf16") == 0 ? hw->ceilings.bf16_tflops : hw->ceilings.fp8_tflops);
}

static int is_sm(const tl_hw *hw) { return strncmp(hw->arch, "sm_", 3) == 0; }

/* Warps (waves) a CU holds: on sm_90 the kernel's register budget (TL_INDEXER_WAVES_SM90), on AMD
 * TL_INDEXER_WAVES_AMD. */
static int cu_waves_of(const tl_hw *hw) { return is_sm(hw) ? TL_INDEXER_WAVES_SM90 : TL_INDEXER_WAVES_AMD; }

/* sm_90a block geometry: one warpgroup for BLOCK_Q 1, two otherwise, each holding BLOCK_Q / groups
 * query rows. */
static int wgmma_groups(int block_q) { return block_q >= 2 ? 2 : 1; }
static int wgmma_rows(int block_q) { return block_q / wgmma_groups(block_q); }

/* Warps (waves) a block has: BLOCK_Q on AMD, four a warpgroup on sm_90a. */
static int block_waves_of(const tl_hw *hw, int q) { return is_sm(hw) ? 4 * wgmma_groups(q) : q; }

/* Blocks one CU holds: the waves it holds over the block's, and what its LDS holds (AMD: two tiles
 * of codes; sm_90a: TL_INDEXER_SMEM_WGMMA). */
static int resident_limit(const tl_hw *hw, int q, int heads, int tile)
{
    const double lds = is_sm(hw) ? (double)TL_INDEXER_SMEM_WGMMA(heads, q) : 2.0 * tile * (TL_INDEXER_DIM + 4.0);
    int by_lds = (int)(hw->lds_kib * 1024.0 / lds);
    int by_waves = cu_waves_of(hw) / block_waves_of(hw, q);
    int n = by_lds < by_waves ? by_lds : by_waves;
    return n > 0 ? n : 1;
}

/* One CU's K stream when K runs to position `furthest`: its cap (GB/s) and a load's latency (us)
 * for the share of the stream that hits one XCD's L2 (returned): the part of that K which fits
 * 0.8 of the L2 (the rest is Q, w and the logits passing through), min(1, 0.8 L2 / K bytes) (an
 * estimate: the blocks of a CU walk their windows together, so what the L2 keeps of one window
 * serves the others); the rest misses. The latency and the cap's time per byte are weighted by
 * the two shares, so the stream slows as K outgrows the L2 rather than at one size. */
static double stream_of(const tl_hw *hw, long furthest, double *cap, double *latency)
{
    const double hbm_cu = or_default(hw->hbm_per_cu_gbps, tl_ceiling_value(hw->ceilings.hbm_read_gbps) / hw->cus);
    const double l2_cu = or_default(hw->l2_per_cu_gbps, hbm_cu);
    const double miss_us = or_default(hw->hbm_latency_us, TL_INDEXER_MISS_US);
    const double k_bytes = (double)furthest * (TL_INDEXER_DIM + 4.0);
    const double hits = fmin(1.0, 0.8 * hw->l2_mib_per_xcd * 1048576.0 / k_bytes);
    *cap = 1.0 / (hits / l2_cu + (1.0 - hits) / hbm_cu);
    *latency = hits * miss_us * hbm_cu / l2_cu + (1.0 - hits) * miss_us;
    return hits;
}

static void charge_kv(const tl_indexer_problem *p, tl_indexer_result *r, long furthest)
{
    const tl_hw *hw = p->hw;
    double cap, latency;
    r->l2_hits = stream_of(hw, furthest, &cap, &latency);
    r->fits_l2 = r->l2_hits >= 1.0;
    /* tiles in flight a block: the one being copied while another is scored (AMD); on sm_90a the
     * stages but the one being scored and the next (waited for, its sign folded) */
    const double ahead = is_sm(hw) ? TL_INDEXER_STAGES_WGMMA - 2 : 1;
    const double in_flight = (double)r->resident * ahead * r->tile * (TL_INDEXER_DIM + 4.0);
    r->cu_gbps = fmin(cap, in_flight / (latency * 1e3)); /* bytes / ns = GB/s */
    const long active = r->blocks < hw->cus ? r->blocks : hw->cus;
    r->kv_us = r->kv_bytes / ((double)active * r->cu_gbps * 1e3);
}

/* sm_90a: shared-memory operand bytes a computed score costs. A warpgroup holds R = BLOCK_Q / 2 rows
 * (1 at BLOCK_Q 1); it reads a tile's 64 K rows (8 KiB) once into registers and each of its rows'
 * Q (H x 128 bytes) once a tile, so a score costs 128 / R + 2 H bytes. */
static double smem_bytes_per_score(int block_q, int heads)
{
    return TL_INDEXER_DIM / (double)wgmma_rows(block_q) + 2.0 * heads;
}

/* sm_90a: the N of the kernel's products: 64 / H rows a product when the warpgroup holds that many
 * (H = 32 at BLOCK_Q >= 4: two rows, N = 64), else one (N = H). */
static int wgmma_n(int block_q, int heads)
{
    const int rows = wgmma_rows(block_q), pair = 64 / heads;
    return (pair >= 1 && pair <= rows ? pair : 1) * heads;
}

static void charge_compute(const tl_indexer_problem *p, tl_indexer_result *r, double peak)
{
    const tl_hw *hw = p->hw;
    const tl_indexer_shape *s = &p->shape;
    const long active = r->blocks < hw->cus ? r->blocks : hw->cus;
    r->mma_tflops = peak * (is_sm(hw) ? TL_INDEXER_MMA_EFF_WGMMA : TL_INDEXER_MMA_EFF) * (double)active / hw->cus;
    r->mma_us = r->matrix_flops / (r->mma_tflops * 1e6);
    const double k_values = r->kv_bytes / (TL_INDEXER_DIM + 4.0) * TL_INDEXER_DIM; /* per block, once */
    double ops;
    if (is_sm(hw)) {
        /* issue-slot lane-operations a score costs: a product's warp instructions (4 warps, 32
         * lanes) over its 64 RP scores, at the scheduler's sustained rate */
        const double rp = (double)wgmma_n(r->block_q, s->heads) / s->heads;
        const double per_warp = TL_INDEXER_PRODUCT_INSTR_WGMMA / rp + 1.125 * s->heads + TL_INDEXER_ROW_INSTR_WGMMA;
        ops = r->computed * 4.0 * 32.0 * per_warp / 64.0 / TL_INDEXER_IPC_WGMMA;
    } else {
        /* lanes sharing a score's row: 16 on AMD (16x16): log2 16 shuffle-adds */
        ops = r->computed * (s->heads * TL_INDEXER_EPI_OPS + 4.0);
        if (strcmp(hw->arch, "gfx942") == 0) ops += k_values / 4.0; /* 0x80 -> 0x00, four bytes an op */
    }
    const double lanes = or_default(hw->vector_lanes_per_cu, (double)hw->wave_size * hw->matrix_cores_per_cu);
    r->epi_us = ops / (lanes * (double)active * hw->clock_mhz);
    if (is_sm(hw))
        r->smem_us = r->computed * smem_bytes_per_score(r->block_q, s->heads) /
                     (TL_INDEXER_SMEM_GBPS_WGMMA * 1e3 * (double)active);
}

/* The compute terms of the larger ones: the code's loop (code_us) where the kernel's assembly is
 * in the build's table, else the estimates (mma, smem-operands, epilogue). */
static double compute_of(const tl_indexer_result *r)
{
    return r->code.k ? r->code_us : fmax(fmax(r->mma_us, r->smem_us), r->epi_us);
}

static void pick_limiter(tl_indexer_result *r)
{
    double body = fmax(compute_of(r), fmax(r->kv_us, r->hbm_us));
    if (r->code.k) {
        r->limiter = body == r->code_us ? r->code.bound : body == r->kv_us ? "kv-stream" : "hbm";
        r->time_us = body / r->balance + r->fixed_us;
        return;
    }
    r->limiter = body == r->mma_us    ? "mma"
                 : body == r->smem_us ? "smem-operands"
                 : body == r->epi_us  ? "epilogue"
                 : body == r->kv_us   ? "kv-stream"
                                      : "hbm";
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
    double peak;
    if (is_sm(hw)) {
        /* wgmma m64nNk32 E4M3, A (the K tile) from registers: its rate is the preset's FP8 ceiling
         * (no per-instruction entry); named below, once BLOCK_Q gives N */
        memset(&in, 0, sizeof in);
        in.k = 32;
        peak = ceiling_of(hw, "fp8");
        if (!(peak > 0)) return tl_error(TL_EUSAGE, "sim indexer", "preset %s has no fp8 ceiling", hw->name);
    } else {
        if (tl_hw_pick_instr(hw, r->operand, r->operand, 16, &in)) return TL_EUSAGE;
        peak = fmin(tl_hw_instr_tflops(hw, &in), or_default(ceiling_of(hw, r->operand), INFINITY));
    }
    r->instr_k = in.k;
    r->k_steps = (s->dim + in.k - 1) / in.k;
    r->block_q = s->block_q ? s->block_q : tl_indexer_best_block_q(hw, s);
    if (is_sm(hw)) snprintf(in.name, sizeof in.name, "wgmma.m64n%dk32.f32.e4m3.e4m3", wgmma_n(r->block_q, s->heads));
    snprintf(r->instr, sizeof r->instr, "%s", in.name);
    r->tile = tl_indexer_tile(hw->arch);
    r->blocks = tl_indexer_blocks(s, r->block_q);
    r->scores = tl_indexer_scores(s);
    r->computed = tl_indexer_computed_scores(s, r->block_q, r->tile);
    r->flops = tl_indexer_flops(s);
    r->matrix_flops = 2.0 * s->dim * s->heads * r->computed;
    r->kv_bytes = r->computed / r->block_q * (TL_INDEXER_DIM + 4.0);
    r->hbm_bytes = tl_indexer_bytes(s);
    r->hbm_us = r->hbm_bytes / (tl_ceiling_value(hw->ceilings.hbm_read_gbps) * 1e3);
    const int limit = resident_limit(hw, r->block_q, s->heads, r->tile);
    const long per_cu = (r->blocks + hw->cus - 1) / hw->cus;
    r->resident = per_cu < limit ? (int)per_cu : limit;
    r->cu_slots = limit;
    r->cu_waves = cu_waves_of(hw);
    if (!is_sm(hw)) {
        /* the kernel's own code: its registers and LDS decide the blocks a CU holds */
        snprintf(r->kernel, sizeof r->kernel, "_Z14indexer_kernelILi%dELi%dEEv7IdxArgs", s->heads, r->block_q);
        if (tl_amd_loop_cost_of(hw, r->kernel, r->block_q, 0.0, per_cu, &r->code) == TL_OK) {
            r->resident = r->code.wgs;
            r->cu_slots = r->code.wgs_by_lds && r->code.wgs_by_lds < r->code.wgs_by_regs ? r->code.wgs_by_lds : r->code.wgs_by_regs;
            r->cu_waves = r->cu_slots * r->block_q;
        } else {
            tl_clear_error();
            memset(&r->code, 0, sizeof r->code);
        }
    }
    const double slots = (double)hw->cus * r->cu_slots;
    r->block_waves = r->blocks / slots;
    const double full = ceil(r->block_waves);
    /* a last, partial wave leaves slots idle; under one wave the idle slots are already in the
     * blocks a CU holds (r->resident: its bytes in flight and its rate), not charged twice */
    r->balance = r->block_waves >= 4 || r->block_waves <= 1.0 ? 1.0 : r->block_waves / full;
    long furthest = 0;
    for (long b = 0; b < r->blocks; b++) {
        long a, e;
        tl_indexer_block_window(s, r->block_q, b, &a, &e);
        if (e > furthest) furthest = e;
        if (!s->starts) break; /* under the rule the last block's end is the furthest: computed below */
    }
    if (!s->starts) furthest = s->prefix + s->rows;
    charge_kv(p, r, furthest);
    charge_compute(p, r, peak);
    if (r->code.k) {
        const long active = r->blocks < hw->cus ? r->blocks : hw->cus;
        const int simds = hw->matrix_cores_per_cu > 0 ? hw->matrix_cores_per_cu : 4;
        r->code_us = r->computed / 16.0 * r->code.cycles / ((double)simds * active * hw->clock_mhz);
    }
    r->fixed_us = or_default(hw->launch_us, 5.0) + or_default(hw->item_fixed_us, 0.0);
    pick_limiter(r);
    r->tflops = r->flops / (r->time_us * 1e6);
    return TL_OK;
}

int tl_indexer_best_block_q(const tl_hw *hw, const tl_indexer_shape *s)
{
    if (is_sm(hw)) return TL_INDEXER_TIMED_BLOCK_Q_SM90;
    int best = 1;
    double best_us = INFINITY;
    for (int q = 1; q <= 4; q *= 2) { /* AMD: the seed's kernel up to 4 */
        tl_indexer_problem p = {hw, *s};
        p.shape.block_q = q;
        tl_indexer_result r;
        if (tl_indexer_sim(&p, &r)) {
            tl_clear_error();
            break;
        }
        if (r.time_us < best_us * 0.98) { /* a larger BLOCK_Q only when 2% faster */
            best = q;
            best_us = r.time_us;
        }
    }
    return best;
}

/* ---- the schedule ---- */

int tl_indexer_schedule(const tl_indexer_problem *p, tl_indexer_span *span, long cap, tl_indexer_result *r,
                        double *end_us)
{
    int rc = tl_indexer_sim(p, r);
    if (rc) return rc;
    if (!span || cap < r->blocks)
        return tl_error(TL_EUSAGE, "indexer schedule", "room for %ld spans, the grid has %ld blocks", cap, r->blocks);
    const tl_hw *hw = p->hw;
    tl_indexer_problem q = *p;
    q.shape.block_q = r->block_q;
    const tl_indexer_shape *s = &q.shape;
    double tiles = 0;
    for (long b = 0; b < r->blocks; b++) tiles += (double)tl_indexer_block_tiles(s, r->block_q, b, r->tile);
    const double body = fmax(compute_of(r), fmax(r->kv_us, r->hbm_us));
    const long active = r->blocks < hw->cus ? r->blocks : hw->cus;
    const double tile_us = tiles > 0 ? r->resident * (double)active * body / tiles : 0;
    long slots = (long)hw->cus * r->cu_slots;
    if (slots > r->blocks) slots = r->blocks;
    tl_slots sl;
    if (tl_slots_open(&sl, hw, slots, r->fixed_us)) return TL_EFAIL;
    double end = r->fixed_us;
    for (long x = 0; x < r->blocks; x++) {
        const long b = is_sm(hw) ? r->blocks - 1 - x : x; /* sm_90: the last (longest) block first */
        tl_indexer_span *sp = &span[b];
        tl_slots_place(&sl, tl_slots_first(&sl, &sp->start_us), &sp->cu, &sp->slot);
        sp->block = b;
        sp->tiles = tl_indexer_block_tiles(s, r->block_q, b, r->tile);
        sp->end_us = sp->start_us + sp->tiles * tile_us;
        if (sp->end_us > end) end = sp->end_us;
        tl_slots_fill_first(&sl, sp->end_us);
    }
    tl_slots_close(&sl);
    if (end_us) *end_us = end;
    return TL_OK;
}

/* ---- one block's pipeline ---- */

static int add_step(tl_indexer_step *step, int cap, int *n, tl_indexer_step st)
{
    if (*n >= cap) return tl_error(TL_EUSAGE, "indexer pipeline", "more than %d steps", cap);
    step[(*n)++] = st;
    return TL_OK;
}

int tl_indexer_pipeline(const tl_indexer_problem *p, long positions, tl_indexer_step *step, int cap, int *n,
                        tl_indexer_pipe *c)
{
    *n = 0;
    memset(c, 0, sizeof *c);
    if (!p || !p->hw) return tl_error(TL_EUSAGE, "indexer pipeline", "no hardware preset");
    if (positions < 1 || positions > 65536)
        return tl_error(TL_EUSAGE, "indexer pipeline", "positions %ld outside 1..65536", positions);
    const tl_hw *hw = p->hw;
    const tl_indexer_shape *s = &p->shape;
    if (s->heads < 16 || s->heads > TL_INDEXER_MAX_HEADS || s->heads % 16)
        return tl_error(TL_EUSAGE, "indexer pipeline", "heads %d: 16..%d, a multiple of 16", s->heads, TL_INDEXER_MAX_HEADS);
    const int q = s->block_q ? s->block_q : 1;
    if (q != 1 && q != 2 && q != 4 && q != 8) return tl_error(TL_EUSAGE, "indexer pipeline", "BLOCK_Q %d: 1, 2, 4 or 8", q);
    const char *operand = operand_of(hw);
    tl_instr in;
    if (!is_sm(hw) && tl_hw_pick_instr(hw, operand, operand, 16, &in)) return TL_EUSAGE;
    const double d = TL_INDEXER_DIM, h = s->heads;
    const int cores = hw->matrix_cores_per_cu > 0 ? hw->matrix_cores_per_cu : 4;
    const double lanes_cu = or_default(hw->vector_lanes_per_cu, (double)hw->wave_size * cores);
    const double lanes_simd = lanes_cu / cores;
    double cap_gbps, latency;
    stream_of(hw, positions, &cap_gbps, &latency);
    c->tile = tl_indexer_tile(hw->arch);
    c->tiles = (int)((positions + c->tile - 1) / c->tile);
    /* tiled: bytes / (GB/s x 1e3) = us */
    c->load_us = latency + c->tile * (d + 4.0) / (cap_gbps * 1e3);
    c->q_us = latency + q * h * (d + 4.0) / (cap_gbps * 1e3);
    const double peak = is_sm(hw) ? ceiling_of(hw, operand)
                                  : fmin(tl_hw_instr_tflops(hw, &in), or_default(ceiling_of(hw, operand), INFINITY));
    const double core_tflops = peak * TL_INDEXER_MMA_EFF / ((double)hw->cus * cores);
    c->mma_us = 2.0 * d * h * c->tile / (core_tflops * 1e6); /* a row a wave, a wave a core: rows in parallel */
    const double shuffles = strncmp(hw->arch, "sm_", 3) == 0 ? 2.0 : 4.0;
    double ops = c->tile * (h * TL_INDEXER_EPI_OPS + shuffles);
    c->epi_us = ops / (lanes_simd * hw->clock_mhz);
    const double q_end = c->q_us;
    double epi_end = 0, issue[2] = {0, 0};
    tl_indexer_step st;
    /* naive first: one score a lane */
    c->waves = (int)((positions + hw->wave_size - 1) / hw->wave_size) * q;
    const int rounds = (c->waves + cores - 1) / cores;
    const double l2_cu = or_default(hw->l2_per_cu_gbps, cap_gbps);
    const int at_once = c->waves < cores ? c->waves : cores;
    double hit_cap, hit_us;
    stream_of(hw, 1, &hit_cap, &hit_us); /* the re-reads hit L2 */
    c->naive_load_us = rounds * (hit_us + at_once * (double)hw->wave_size * 2.0 * d / (l2_cu * 1e3));
    c->naive_fma_us = rounds * d * TL_INDEXER_NAIVE_OPS * hw->wave_size / lanes_simd / hw->clock_mhz;
    double t = 0;
    for (int i = 0; i < s->heads; i++) {
        const double nl = t + c->naive_load_us, nf = nl + c->naive_fma_us;
        st = (tl_indexer_step){1, TL_IDX_NAIVE_LOAD, i, 0, t, nl};
        if (add_step(step, cap, n, st)) return TL_EUSAGE;
        st = (tl_indexer_step){1, TL_IDX_NAIVE_FMA, i, 0, nl, nf};
        if (add_step(step, cap, n, st)) return TL_EUSAGE;
        t = nf;
    }
    c->naive_us = t;
    /* tiled: the prologue issues tiles 0 and 1; tile t + 2 goes into t's buffer when t's epilogue ends */
    if (add_step(step, cap, n, (tl_indexer_step){0, TL_IDX_Q, 0, 0, 0, c->q_us})) return TL_EUSAGE;
    for (int i = 0; i < c->tiles; i++) {
        const double land = issue[i % 2] + c->load_us;
        if (add_step(step, cap, n, (tl_indexer_step){0, TL_IDX_LOAD, i, i % 2, issue[i % 2], land})) return TL_EUSAGE;
        const double m0 = fmax(fmax(land, q_end), epi_end), m1 = m0 + c->mma_us;
        epi_end = m1 + c->epi_us;
        if (add_step(step, cap, n, (tl_indexer_step){0, TL_IDX_MMA, i, 0, m0, m1}) ||
            add_step(step, cap, n, (tl_indexer_step){0, TL_IDX_EPI, i, 0, m1, epi_end}))
            return TL_EUSAGE;
        issue[i % 2] = epi_end;
    }
    c->tiled_us = epi_end;
    return TL_OK;
}
