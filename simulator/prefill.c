/* simulator/prefill.c: the cost model of causal prefill attention (simulator/prefill.h). */
#include "prefill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "slots.h"

static int is_sm(const tl_hw *hw) { return strncmp(hw->arch, "sm_", 3) == 0; }
static double or_default(double v, double d) { return v > 0 ? v : d; }
static double round_up(double x, double to) { return ceil(x / to) * to; }

long tl_prefill_block_tiles(const tl_prefill_shape *s, tl_prefill_tiling t, long qb, long *masked)
{
    const long r0 = qb * t.block_m, r1 = (qb + 1) * t.block_m < s->seq ? (qb + 1) * t.block_m : s->seq;
    const long keys = s->causal ? r1 : s->seq; /* the block's last row sees keys [0, r1) */
    const long tiles = (keys + t.block_n - 1) / t.block_n;
    /* whole tiles: every row of the block sees every key of them (causal: keys up to its first row) */
    long full = s->causal ? (r0 + 1) / t.block_n : s->seq / t.block_n;
    if (full > tiles) full = tiles;
    if (masked) *masked = tiles - full;
    return tiles;
}

/* ---- the list schedule (shared by the model and the picture) ---- */

/* Lays the blocks over r->slots slots (grid order: causal, the last query block first), each
 * tile r->tile_us, from r->fixed_us; writes span (when not NULL) and returns the end (< 0 out of
 * memory, after tl_error). */
static double lay_out(const tl_hw *hw, const tl_prefill_shape *s, const tl_prefill_model_result *r,
                      tl_prefill_span *span)
{
    tl_slots sl;
    if (tl_slots_open(&sl, hw, r->slots, r->fixed_us)) return -1;
    double end = r->fixed_us;
    for (long x = 0; x < r->qblocks; x++) {
        const long qb = s->causal ? r->qblocks - 1 - x : x;
        const long tiles = tl_prefill_block_tiles(s, r->tile, qb, NULL);
        for (int head = 0; head < s->heads; head++) {
            double start;
            const long k = tl_slots_first(&sl, &start);
            const double stop = start + tiles * r->tile_us;
            if (span) {
                tl_prefill_span *sp = &span[qb * s->heads + head];
                sp->qblock = qb, sp->head = head, sp->tiles = tiles;
                tl_slots_place(&sl, k, &sp->cu, &sp->slot);
                sp->start_us = start, sp->end_us = stop;
            }
            if (stop > end) end = stop;
            tl_slots_fill_first(&sl, stop);
        }
    }
    tl_slots_close(&sl);
    return end;
}

/* ---- the terms ---- */

/* K/V buffers of the kernel: on sm_90 the warp-specialized kernel's (three, two for bf16 dqk 192:
 * what fits 227 KB with Q), else TL_PREFILL_STAGES. */
static int stages_of(const tl_hw *hw, const tl_prefill_shape *s)
{
    if (!is_sm(hw)) return TL_PREFILL_STAGES;
    return s->dtype == TL_PREFILL_BF16 && s->dqk > 128 ? 2 : 3;
}

/* Blocks a CU holds: the waves the kernel's registers allow, and the LDS its K/V stages (and, on
 * sm_90, Q's staging tile) take. */
static int resident_of(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_tiling t, double lds_elem)
{
    const int waves = is_sm(hw) ? TL_PREFILL_WAVES_SM90 : TL_PREFILL_WAVES_AMD;
    int by_waves = waves / t.warps;
    double lds = stages_of(hw, s) * (double)t.block_n * (s->dqk + s->dv) * lds_elem;
    if (is_sm(hw)) lds += (double)t.block_m * s->dqk * lds_elem;
    int by_lds = (int)(hw->lds_kib * 1024.0 / lds);
    int n = by_waves < by_lds ? by_waves : by_lds;
    return n > 0 ? n : 1;
}

/* The vector lane-operations of the online softmax and its companions (simulator/prefill.h). */
static double vector_ops(const tl_hw *hw, const tl_prefill_shape *s, const tl_prefill_model_result *r)
{
    const tl_prefill_tiling t = r->tile;
    const int fp8 = s->dtype == TL_PREFILL_FP8;
    const double scores = (double)r->tiles_computed * t.block_m * t.block_n;
    const double masked = (double)r->tiles_masked * t.block_m * t.block_n;
    const double p_ops = !fp8 ? TL_PREFILL_P_OPS_BF16 : is_sm(hw) ? TL_PREFILL_P_OPS_FP8_WGMMA : TL_PREFILL_P_OPS_FP8;
    /* one multiply per O element and tile; AMD's FP8 P.V is also scaled into O */
    const double rescale = (fp8 && !is_sm(hw) ? 2.0 : 1.0) * s->dv / t.block_n;
    double ops = scores * (TL_PREFILL_SCORE_OPS + p_ops + rescale) + masked * TL_PREFILL_MASK_OPS +
                 (double)r->tiles_computed * t.block_m * TL_PREFILL_ROW_OPS;
    const double kv_values = (double)r->tiles_computed * t.block_n * (s->dqk + s->dv);
    const double q_values = (double)r->blocks * t.block_m * s->dqk;
    if (is_sm(hw)) {
        /* wgmma: a warpgroup's few product instructions a tile take no issue share worth counting;
         * FP8's V^T comes from its own kernel (fixed_us) */
        (void)kv_values, (void)q_values;
    } else if (fp8 && strcmp(hw->arch, "gfx942") == 0) {
        ops += (kv_values + q_values) / 4.0; /* E4M3FN codes as FNUZ: 0x80 fixed, four bytes an op */
    }
    return ops;
}

/* The K/V stream from L2: r->l2_bytes at one CU's min(cap, bytes in flight / latency). The first
 * read of a tile by the blocks running at once misses (r->kv_passes x K and V of the l2 bytes),
 * the others hit: latency and the time per byte at the cap are those shares of a miss's and a
 * hit's. */
static double l2_us_of(const tl_hw *hw, const tl_prefill_shape *s, const tl_prefill_model_result *r, double elem,
                       double kv_all, long active)
{
    const double hbm_cu = or_default(hw->hbm_per_cu_gbps, tl_ceiling_value(hw->ceilings.hbm_read_gbps) / hw->cus);
    const double l2_cu = or_default(hw->l2_per_cu_gbps, hbm_cu);
    const double miss_us = or_default(hw->hbm_latency_us, TL_PREFILL_MISS_US), hit_us = miss_us * hbm_cu / l2_cu;
    const double miss = fmin(1.0, kv_all * r->kv_passes / r->l2_bytes);
    const double latency = miss * miss_us + (1.0 - miss) * hit_us, cap = 1.0 / (miss / hbm_cu + (1.0 - miss) / l2_cu);
    const double in_flight = (double)r->resident * (stages_of(hw, s) - 1) * r->tile.block_n * (s->dqk + s->dv) * elem;
    const double cu_gbps = fmin(cap, in_flight / (latency * 1e3)); /* bytes / ns = GB/s */
    return r->l2_bytes / ((double)active * cu_gbps * 1e3);
}

/* sm_90's compute term (simulator/prefill.h): the warp-specialized kernel's tile period in SM
 * cycles, at the clock the matrix ceiling implies. */
static void sm90_compute(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_model_result *r, long active, double lanes)
{
    const int fp8 = s->dtype == TL_PREFILL_FP8;
    const tl_prefill_tiling t = r->tile;
    const double tm = t.block_m, tn = t.block_n, tiles = (double)r->tiles_computed;
    const double fpc = fp8 ? TL_PREFILL_SM90_FLOP_CLK_FP8 : TL_PREFILL_SM90_FLOP_CLK_BF16;
    r->load_mhz = r->mma_tflops * 1e6 / (hw->cus * fpc);
    const double wgs = t.warps / 4.0, rows_wg = tm / wgs;
    /* one tile of the group: both warpgroups' products; one warpgroup's S and P V alone */
    const double c_mma = r->flops_matrix / tiles / fpc;
    const double c_s = 2.0 * rows_wg * tn * round_up(s->dqk, r->instr_k) / fpc;
    const double c_pv = 2.0 * rows_wg * s->dv * round_up(tn, r->instr_k) / fpc;
    /* the exponentials (MUFU, its own pipe) and the issue slots (one warp instruction a scheduler
     * and clock: the vector lane-ops and the exponentials' own issue), the group's per tile */
    const double exps = r->exps / tiles;
    const double c_exp = exps / hw->transcendental_per_cu_clk;
    const double c_issue = (r->vector_ops / tiles + exps) / (lanes * TL_PREFILL_SM90_ISSUE);
    /* one warpgroup's softmax: its share of both, at once, behind the row max's chain */
    const double c_soft = fmax(c_exp, c_issue) / wgs + TL_PREFILL_SM90_CHAIN;
    /* a warpgroup's own loop: S, its softmax, an issue; fp8 also the second half of its P V (the
     * first runs during the softmax) and its issue */
    r->chain_cycles = c_s + c_soft + TL_PREFILL_SM90_TURN + (fp8 ? c_pv / 2.0 + TL_PREFILL_SM90_TURN : 0.0);
    const double compute = fmax(fmax(c_mma, fmax(c_exp, c_issue)), r->chain_cycles);
    /* a tile's K and V by the copy engine: one round trip (hbm_latency_us) and its bytes at one
     * SM's L2 stream (l2_per_cu_gbps). K's and V's stages are released apart (K once S is done, V
     * once P V is) and refilled in the order K, V: K(kt + stages) goes out at the end of iteration
     * kt - 1 and is needed at the start of iteration kt + stages - 1, V(kt + stages) at the end of
     * iteration kt for P V in iteration kt + stages: stages - 1 periods to land */
    const int stages = stages_of(hw, s);
    const double elem = fp8 ? 1.0 : 2.0;
    const double kv_bytes = tn * (s->dqk + s->dv) * elem;
    const double l2_cu = or_default(hw->l2_per_cu_gbps, tl_ceiling_value(hw->ceilings.hbm_read_gbps) / hw->cus);
    r->load_cycles = (or_default(hw->hbm_latency_us, TL_PREFILL_MISS_US) + kv_bytes / (l2_cu * 1e3)) * r->load_mhz;
    r->period_cycles = fmax(compute, r->load_cycles / (stages - 1));
    /* the part that sets the period (the load when it adds or exceeds) */
    r->part = r->period_cycles > compute ? "load"
              : compute == c_mma                  ? "matrix"
              : compute == r->chain_cycles        ? "pipeline"
              : c_exp >= c_issue                  ? "exp"
                                                  : "vector";
    /* a block's first tile: Q and the first K/V from memory, S(0) and its softmax alone */
    const double first = or_default(hw->hbm_latency_us, TL_PREFILL_MISS_US) * r->load_mhz + c_s + c_soft;
    const double per_us = (double)active * r->load_mhz;
    r->mma_us = tiles * c_mma / per_us;
    r->exp_us = tiles * c_exp / per_us;
    r->vec_us = tiles * c_issue / per_us;
    r->soft_us = fmax(r->exp_us, r->vec_us);
    r->chain_us = tiles * r->chain_cycles / per_us;
    r->load_us = tiles * r->load_cycles / per_us;
    /* a block's first tile: the fill above and one period without the load (its loads are in the
     * fill); every later tile: the period */
    r->compute_us = ((tiles - (double)r->blocks) * r->period_cycles + (double)r->blocks * (first + compute)) / per_us;
}

/* The AMD kernel's dynamic LDS (kernels/prefill.hip's PfSmem<...>::AMD): Q [BM][DQKP], K [BN][DQKP],
 * V^T [DV][BN], P [BM][BN] of bf16, S [BM][BN] float32; gfx950's FP8 keeps S and P in registers:
 * Q, K and V^T of one-byte codes, DQKP = dqk padded to 128. */
static double amd_lds_bytes(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_tiling t)
{
    if (s->dtype == TL_PREFILL_FP8 && strcmp(hw->arch, "gfx950") == 0)
        return (t.block_m + t.block_n) * round_up(s->dqk, 128) + (double)s->dv * t.block_n;
    return 2.0 * (t.block_m * (double)s->dqk + t.block_n * (double)s->dqk + (double)s->dv * t.block_n +
                  (double)t.block_m * t.block_n) + 4.0 * t.block_m * t.block_n;
}

/* AMD: the kernel instance's loop cost from its assembly (r->code), or r->code.k NULL (estimates). */
static void amd_code_of(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_model_result *r, long per_cu)
{
    const tl_prefill_tiling t = r->tile;
    const int arch = strcmp(hw->arch, "gfx950") == 0 ? 2 : 1;
    snprintf(r->kernel, sizeof r->kernel, "_Z9pf_kernelILi%dELi%dELi%dELi%dELi%dELi%dELb%dEEv6PfArgs", arch, s->dqk, s->dv,
             t.block_m, t.block_n, t.warps, s->dtype == TL_PREFILL_FP8);
    if (tl_amd_loop_cost_of(hw, r->kernel, t.warps, amd_lds_bytes(hw, s, t), per_cu, &r->code)) {
        tl_clear_error();
        memset(&r->code, 0, sizeof r->code);
    }
}

static void name_limiter(tl_prefill_model_result *r)
{
    const struct {
        double us;
        const char *name;
    } part[] = {{r->mma_us, "matrix"}, {r->exp_us, "exp"}, {r->vec_us, "vector"}};
    /* compute: the larger of matrix and softmax, the softmax by its larger part */
    const char *compute = r->mma_us >= r->soft_us ? "matrix" : part[1].us >= part[2].us ? "exp" : "vector";
    if (r->part) compute = r->part; /* sm_90: the part that sets the tile period */
    if (r->code.k) compute = r->code.bound; /* AMD: the loop's bound: "matrix", "valu", "lds" or "issue" */
    const char *body = compute;
    double b = r->compute_us;
    if (r->lds_us > b) b = r->lds_us, body = "lds";
    if (r->l2_us > b) b = r->l2_us, body = "l2";
    if (r->hbm_us > b) b = r->hbm_us, body = "hbm";
    r->limiter = body;
    if (r->tail_us > r->body_us && r->tail_us >= r->fixed_us) r->limiter = "tail";
    else if (r->fixed_us > r->body_us && r->fixed_us > r->tail_us) r->limiter = "fixed";
}

static int model(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_model_result *r, tl_prefill_span *span)
{
    memset(r, 0, sizeof *r);
    if (!hw) return tl_error(TL_EUSAGE, "sim prefill", "no hardware preset");
    int rc = tl_prefill_shape_check(s);
    if (rc) return rc;
    const tl_prefill_tiling t = tl_prefill_tiling_for(hw->arch, s);
    if (t.block_m < 16 || t.block_n < 16 || t.warps < 1 || t.block_m % (16 * t.warps) || t.block_n % 16)
        return tl_error(TL_EUSAGE, "sim prefill", "tiling %d x %d with %d waves on %s: block_m a multiple of 16 x "
                        "waves, block_n of 16", t.block_m, t.block_n, t.warps, hw->arch);
    if (hw->transcendental_per_cu_clk <= 0 || hw->lds_bytes_per_cu_clk <= 0)
        return tl_error(TL_EUSAGE, "sim prefill", "preset %s lacks transcendental_per_cu_clk or lds_bytes_per_cu_clk",
                        hw->name);
    r->tile = t;
    const int fp8 = s->dtype == TL_PREFILL_FP8;
    r->operand = fp8 ? "fp8" : "bf16";
    if (is_sm(hw)) {
        /* wgmma (sm_90a): m64n128, K-depth 16 (bf16) or 32 (e4m3), at the preset's wgmma loop rate,
         * else its ceiling of the format */
        snprintf(r->instr, sizeof r->instr, "wgmma.mma_async.m64n128k%d.%s", fp8 ? 32 : 16, fp8 ? "e4m3" : "bf16");
        r->instr_k = fp8 ? 32 : 16;
        const tl_ceiling c = fp8 ? hw->ceilings.fp8_tflops : hw->ceilings.bf16_tflops;
        r->mma_tflops = or_default(fp8 ? hw->wgmma_fp8_tflops : hw->wgmma_bf16_tflops, tl_ceiling_value(c));
        if (!(r->mma_tflops > 0))
            return tl_error(TL_EUSAGE, "sim prefill", "preset %s has neither wgmma_%s_tflops nor a %s_tflops ceiling",
                            hw->name, r->operand, r->operand);
    } else {
        tl_instr in;
        if (tl_hw_pick_instr(hw, r->operand, r->operand, 16, &in)) return TL_EUSAGE;
        snprintf(r->instr, sizeof r->instr, "%s", in.name);
        r->instr_k = in.k;
        const tl_ceiling c = fp8 ? hw->ceilings.fp8_tflops : hw->ceilings.bf16_tflops;
        r->mma_tflops = fmin(tl_hw_instr_tflops(hw, &in), or_default(tl_ceiling_value(c), INFINITY));
    }
    /* the grid and its tiles */
    r->qblocks = (s->seq + t.block_m - 1) / t.block_m;
    r->blocks = r->qblocks * s->heads;
    const long ntiles = (s->seq + t.block_n - 1) / t.block_n;
    long computed = 0, masked = 0;
    for (long qb = 0; qb < r->qblocks; qb++) {
        long m;
        computed += tl_prefill_block_tiles(s, t, qb, &m);
        masked += m;
    }
    r->tiles_total = r->qblocks * ntiles * s->heads;
    r->tiles_computed = computed * s->heads;
    r->tiles_masked = masked * s->heads;
    r->tiles_skipped = r->tiles_total - r->tiles_computed;
    r->flops = tl_prefill_flops(s);
    const double tm = t.block_m, tn = t.block_n, tiles = (double)r->tiles_computed;
    r->flops_computed = tiles * 2.0 * tm * tn * (s->dqk + s->dv);
    r->flops_matrix = tiles * 2.0 * tm * (tn * round_up(s->dqk, r->instr_k) + s->dv * round_up(tn, r->instr_k));
    r->exps = tiles * tm * (tn + 1.0);
    /* residency and the CUs in use */
    const double elem = fp8 ? 1.0 : 2.0, lds_elem = elem;
    const int limit = resident_of(hw, s, t, lds_elem);
    const long per_cu = (r->blocks + hw->cus - 1) / hw->cus;
    r->resident = per_cu < limit ? (int)per_cu : limit;
    int slots_cu = limit;
    if (!is_sm(hw)) {
        amd_code_of(hw, s, r, per_cu);
        if (r->code.k) r->resident = r->code.wgs, slots_cu = r->code.wgs_by_lds && r->code.wgs_by_lds < r->code.wgs_by_regs ? r->code.wgs_by_lds : r->code.wgs_by_regs;
    }
    const long all_slots = (long)hw->cus * slots_cu;
    r->slots = r->blocks < all_slots ? r->blocks : all_slots;
    r->waves = (double)r->blocks / all_slots;
    const long active = r->blocks < hw->cus ? r->blocks : hw->cus;
    const double share = (double)active / hw->cus;
    const int schedulers = hw->matrix_cores_per_cu > 0 ? hw->matrix_cores_per_cu : 4;
    const double per_sched = (double)r->resident * t.warps / schedulers;
    r->overlap = per_sched > 1 ? 1.0 - 1.0 / per_sched : 0.0;
    /* bytes */
    const double tile_kv = tn * (s->dqk + s->dv) * elem;
    if (is_sm(hw)) {
        /* wgmma reads its shared-memory operands once per warpgroup and tile: Q's rows (each
         * warpgroup its own), K and V whole; the tiles are written once, Q once per block; FP8's
         * V^T is written and its staged codes read once per tile */
        const double wgs = t.warps / 4.0;
        r->lds_bytes = tiles * (tm * s->dqk + wgs * tn * (s->dqk + s->dv) + tn * (s->dqk + s->dv)) * lds_elem +
                       (double)r->blocks * tm * s->dqk * lds_elem;
    } else {
        r->lds_bytes = tiles * (t.warps + 1.0) * tn * (s->dqk + s->dv) * lds_elem;
    }
    r->l2_bytes = tiles * (tile_kv + (fp8 ? 8.0 : 0.0)) + (double)r->blocks * tm * s->dqk * elem;
    const double kv_all = (double)s->seq * s->kv_heads * (s->dqk + s->dv) * elem;
    const double caches = (hw->l2_mib_per_xcd * (hw->xcds > 0 ? hw->xcds : 1) + hw->llc_mib) * 1048576.0;
    r->kv_fits = kv_all <= TL_PREFILL_L2_SHARE * caches;
    r->kv_passes = r->kv_fits ? 1.0 : fmax(1.0, r->waves * (double)r->tiles_computed / r->tiles_total);
    const double nblk = (double)tl_prefill_nblk(s->seq);
    const double scales = fp8 ? 4.0 * nblk * (s->heads + 2.0 * s->kv_heads) : 0.0;
    r->hbm_bytes = (double)tl_prefill_q_elems(s) * elem + kv_all * r->kv_passes + scales +
                   2.0 * (double)tl_prefill_o_elems(s) + 4.0 * (double)tl_prefill_lse_elems(s);
    /* the terms (clock_mhz = cycles per us) */
    r->vector_ops = vector_ops(hw, s, r);
    const double lanes = or_default(hw->vector_lanes_per_cu, (double)hw->wave_size * schedulers);
    double mhz = hw->clock_mhz;
    if (is_sm(hw)) {
        sm90_compute(hw, s, r, active, lanes);
        mhz = r->load_mhz;
    } else {
        r->mma_us = r->flops_matrix / (r->mma_tflops * TL_PREFILL_MMA_EFF * share * 1e6);
        r->exp_us = r->exps / (hw->transcendental_per_cu_clk * active * hw->clock_mhz);
        r->vec_us = r->vector_ops / (lanes * active * hw->clock_mhz);
        r->soft_us = r->exp_us + r->vec_us;
        r->compute_us = fmax(r->mma_us, r->soft_us) + (1.0 - r->overlap) * fmin(r->mma_us, r->soft_us);
        if (r->code.k) /* the kernel's own loop: a wave-iteration a tile and wave, over the CU's SIMDs */
            r->compute_us = tiles * t.warps * r->code.cycles / ((double)schedulers * active * hw->clock_mhz);
    }
    r->lds_us = r->lds_bytes / (hw->lds_bytes_per_cu_clk * active * mhz);
    r->l2_us = l2_us_of(hw, s, r, elem, kv_all, active);
    r->hbm_us = r->hbm_bytes / (tl_ceiling_value(hw->ceilings.hbm_read_gbps) * 1e3);
    r->body_us = fmax(fmax(r->compute_us, r->lds_us), fmax(r->l2_us, r->hbm_us));
    r->fixed_us = or_default(hw->launch_us, 5.0) + or_default(hw->item_fixed_us, 0.0);
    if (is_sm(hw) && fp8) {
        /* V^T's kernel before it: V read and written once (at the HBM read rate), one more launch */
        const double v_bytes = (double)s->seq * s->kv_heads * s->dv;
        r->fixed_us += 2.0 * v_bytes / (tl_ceiling_value(hw->ceilings.hbm_read_gbps) * 1e3) + or_default(hw->next_kernel_us, 0.0);
    }
    /* the tail: the list schedule at one tile's share of the body */
    r->tile_us = r->body_us * r->slots / tiles;
    const double end = lay_out(hw, s, r, span);
    if (end < 0) return TL_EFAIL;
    r->tail_us = fmax(0.0, end - r->fixed_us - r->body_us);
    r->time_us = r->fixed_us + r->body_us + r->tail_us;
    r->tflops = r->flops / (r->time_us * 1e6);
    name_limiter(r);
    return TL_OK;
}

int tl_prefill_model(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_model_result *r)
{
    return model(hw, s, r, NULL);
}

int tl_prefill_schedule(const tl_hw *hw, const tl_prefill_shape *s, tl_prefill_span *span, long cap,
                        tl_prefill_model_result *r)
{
    int rc = tl_prefill_model(hw, s, r);
    if (rc) return rc;
    if (!span || cap < r->blocks)
        return tl_error(TL_EUSAGE, "prefill schedule", "room for %ld spans, the grid has %ld blocks", cap, r->blocks);
    return model(hw, s, r, span);
}
