/* simulator/topk.c: the top-k cost model (simulator/topk.h). */
#include "topk.h"

#include <math.h>
#include <string.h>

#include "../core/tl.h"

static double or_default(double v, double d) { return v > 0 ? v : d; }

/* Blocks of `smem` bytes a CU holds at once (0: one does not fit). */
static int blocks_per_cu(const tl_hw *hw, double smem)
{
    const double lds = hw->lds_kib * 1024.0 - 1024.0; /* the driver keeps 1 KiB a block on sm_90 */
    int per = TL_TOPK_REG_BLOCKS_PER_CU;
    const int by_threads = 2048 / TL_TOPK_THREADS;
    if (by_threads < per) per = by_threads;
    const int by_smem = smem <= lds ? (int)(lds / smem) : 0;
    return by_smem < per ? by_smem : per;
}

/* Microseconds of `cycles` at the preset's clock. */
static double cycles_us(const tl_hw *hw, double cycles) { return cycles / or_default(hw->clock_mhz, 1000.0); }

/* The row's longest length and the valid scores' bytes. */
static void shape_bytes(const tl_topk_shape *s, double *bytes)
{
    double valid = 0;
    for (int b = 0; b < s->batch; b++) valid += (double)tl_topk_row_len(s, b);
    *bytes = valid * (double)tl_topk_score_bytes(s->dtype);
}

/* Microseconds of one bitonic sort of c ranks by a block (kp = c rounded up to a power of two). */
static double sort_us(const tl_hw *hw, long c)
{
    int kp = 1, lg = 0;
    while (kp < c) kp <<= 1, lg++;
    const double steps = lg * (lg + 1) / 2.0, per_thread = fmax(1.0, kp / 2.0 / TL_TOPK_THREADS);
    return cycles_us(hw, steps * TL_TOPK_SORT_STEP_CYCLES * per_thread);
}

/* One block's life, phase by phase (simulator/topk.h), for a chunk of `vecs` vectors. */
static void block_life(const tl_hw *hw, const tl_topk_shape *s, int split, double vecs, double wave_bytes,
                       tl_topk_result *r)
{
    const double chain = or_default(hw->load_chain_us, or_default(hw->hbm_latency_us, 1.0));
    const double lat = or_default(hw->hbm_latency_us, chain);
    const double hbm = tl_ceiling_value(hw->ceilings.hbm_read_gbps);
    const double lanes = or_default(hw->vector_lanes_per_cu, 64);
    const double keys = vecs * tl_topk_vec_scores(s->dtype), chunk_bytes = vecs * 16.0;
    const double in_flight = (double)TL_TOPK_VECS * TL_TOPK_THREADS * 16.0;
    const double step = cycles_us(hw, TL_TOPK_STEP_CYCLES);
    const double row_sync = split > 1 ? TL_TOPK_ROW_SYNC_CHAINS * chain : 0;
    r->start_us = split > 1 ? chain : 0; /* the ticket */
    r->load_us = lat * ceil(chunk_bytes / in_flight) + step;
    if (hbm > 0) r->load_us = fmax(r->load_us, lat + wave_bytes / (hbm * 1e3) + step);
    r->pass_us = cycles_us(hw, keys * TL_TOPK_KEY_OPS / lanes) + TL_TOPK_PASS_STEPS * step + row_sync;
    r->count_us = cycles_us(hw, keys * TL_TOPK_KEY_OPS / 2 / lanes) + 2 * step + (split > 1 ? row_sync + chain : 0);
    const double tiles = ceil(vecs / (TL_TOPK_VECS * TL_TOPK_THREADS));
    r->gather_us = tiles * (5 * step + cycles_us(hw, (double)TL_TOPK_VECS * TL_TOPK_THREADS * 4 * 4 / lanes));
    r->done_us = step + (split > 1 ? chain : 0);
    r->sort_us = s->sorted ? sort_us(hw, s->k) : 0;
    r->block_us = r->start_us + r->load_us + r->passes * r->pass_us + r->count_us + r->gather_us + r->done_us + r->sort_us;
    r->sync_us = r->start_us + r->passes * (TL_TOPK_PASS_STEPS * step + row_sync) + 2 * step +
                 (split > 1 ? row_sync + chain : 0) + tiles * 5 * step + r->done_us;
}

/* The launch's time: the launch, then the longer of the blocks' waves (by_latency) and the
 * scores' read with what follows it (by_hbm); the limiter the larger part names. */
static void finish_time(tl_topk_result *r, double by_latency, double by_hbm)
{
    r->time_us = r->launch_us + fmax(by_latency, by_hbm);
    if (r->launch_us > 0.5 * r->time_us) r->limiter = "launch";
    else if (r->sort_us > 0.5 * r->block_us) r->limiter = "sort";
    else if (by_hbm >= by_latency) r->limiter = "hbm";
    else r->limiter = "latency";
}

/* The stream path's cuts of a buffer offered `offered` random ranks, and their time. */
static double stream_cuts(const tl_hw *hw, int k, double cap, double offered, double *cuts)
{
    const double lanes = or_default(hw->vector_lanes_per_cu, 64);
    const double entered = offered <= cap ? offered : cap + k * log(offered / cap);
    *cuts = entered > cap ? ceil((entered - cap) / (cap - k)) + 1 : 0;
    if (offered > k) *cuts += entered > cap ? 0 : 1; /* the last cut to k */
    const double step = cycles_us(hw, TL_TOPK_STEP_CYCLES);
    const double one = TL_TOPK_CUT_PASSES * (TL_TOPK_PASS_STEPS * step + cycles_us(hw, cap * 4 / lanes)) + 4 * step +
                       cycles_us(hw, 2.0 * k / lanes);
    return *cuts * one;
}

/* The stream path (simulator/topk.h): blocks in waves, none waiting; the row's merge after. */
static int stream_sim(const tl_hw *hw, const tl_topk_shape *s, int split, tl_topk_result *r)
{
    r->path = TL_TOPK_STREAM;
    r->split = split;
    const int cap = tl_topk_stream_cap_fit(s->k, (size_t)(hw->lds_kib * 1024.0 - 1024.0)); /* as the launcher */
    r->smem_bytes = (double)tl_topk_stream_smem_cap(s->k, cap ? cap : tl_topk_stream_cap(s->k));
    r->per_cu = cap ? blocks_per_cu(hw, r->smem_bytes) : 0;
    if (r->per_cu < 1)
        return tl_error(TL_EUSAGE, "sim topk", "the stream path's %.0f bytes of shared memory do not fit %s's %.0f KiB",
                        r->smem_bytes, hw->name, hw->lds_kib);
    const long long resident = (long long)r->per_cu * hw->cus;
    r->blocks = (long long)s->batch * split;
    r->waves = (double)r->blocks / (double)resident;
    shape_bytes(s, &r->scores_bytes);
    r->hbm_bytes = r->scores_bytes;
    const double hbm = tl_ceiling_value(hw->ceilings.hbm_read_gbps);
    r->read_us = hbm > 0 ? r->scores_bytes / (hbm * 1e3) : INFINITY;
    const double chain = or_default(hw->load_chain_us, or_default(hw->hbm_latency_us, 1.0));
    const double lat = or_default(hw->hbm_latency_us, chain);
    const double lanes = or_default(hw->vector_lanes_per_cu, 64), step = cycles_us(hw, TL_TOPK_STEP_CYCLES);
    const double vecs = (double)tl_topk_chunk_vecs(s->dtype, s->n, split), keys = vecs * tl_topk_vec_scores(s->dtype);
    const double in_flight = (double)TL_TOPK_VECS * TL_TOPK_THREADS * 16.0, tiles = ceil(vecs / (in_flight / 16.0));
    const double live = (double)(r->blocks < resident ? r->blocks : resident);
    r->load_us = lat * tiles;
    if (hbm > 0) r->load_us = fmax(r->load_us, lat + vecs * 16.0 * live / (hbm * 1e3));
    r->pass_us = cycles_us(hw, keys * TL_TOPK_STREAM_KEY_OPS / lanes) + tiles * 2 * step;
    double cuts = 0;
    r->count_us = stream_cuts(hw, s->k, cap, keys, &cuts);
    r->passes = (int)cuts;
    const long c = s->k < s->n ? s->k : s->n;
    double merge_us = 0;
    if (split > 1) {
        double mcuts = 0;
        const double ranks = (double)split * s->k, l2 = 2.0 * (hbm > 0 ? hbm : 1000.0) / hw->cus; /* GB/s a CU */
        merge_us = 2 * chain + ranks * 8 / (l2 * 1e3) + cycles_us(hw, ranks * TL_TOPK_STREAM_KEY_OPS / lanes) +
                   stream_cuts(hw, s->k, cap, ranks, &mcuts);
        r->gather_us = cycles_us(hw, (double)s->k * 8 / 16 / lanes) + step; /* the block's k ranks out */
    }
    r->sort_us = sort_us(hw, c);
    r->done_us = merge_us;
    r->start_us = 0;
    r->block_us = r->load_us + r->pass_us + r->count_us + r->gather_us;
    r->sync_us = tiles * 2 * step + (split > 1 ? 2 * chain : 0);
    r->launch_us = or_default(hw->launch_us, 5.0);
    const double tail = merge_us + (split > 1 ? r->sort_us : 0), own_sort = split > 1 ? 0 : r->sort_us;
    const double by_latency = fmax(1.0, r->waves) * (r->block_us + own_sort) + tail;
    const double by_hbm = r->read_us + (r->block_us - r->load_us) + own_sort + tail;
    r->block_us += own_sort + tail;
    finish_time(r, by_latency, by_hbm);
    return TL_OK;
}

int tl_topk_sim(const tl_topk_problem *p, tl_topk_result *r)
{
    memset(r, 0, sizeof *r);
    if (!p || !p->hw) return tl_error(TL_EUSAGE, "sim topk", "no hardware preset");
    int rc = tl_topk_shape_check(&p->shape);
    if (rc) return rc;
    if (p->split < 0 || p->split > TL_TOPK_MAX_SPLIT)
        return tl_error(TL_EUSAGE, "--split", "%d outside [0, %d] (0: the model chooses)", p->split, TL_TOPK_MAX_SPLIT);
    const tl_hw *hw = p->hw;
    const tl_topk_shape *s = &p->shape;
    tl_topk_plan plan = {p->path, p->split};
    if (!p->split && (rc = tl_topk_best_plan(hw, s, &plan))) return rc;
    if (plan.path == TL_TOPK_STREAM) return stream_sim(hw, s, plan.split, r);
    r->path = TL_TOPK_RESIDENT;
    r->split = plan.split;
    if (r->split < 1)
        return tl_error(TL_EUSAGE, "sim topk", "no split of a row of %ld fits %s's shared memory and CUs", s->n, hw->name);
    r->smem_bytes = (double)tl_topk_block_smem(s->dtype, s->n, r->split, s->sorted, s->k);
    r->per_cu = blocks_per_cu(hw, r->smem_bytes);
    const long long resident = (long long)r->per_cu * hw->cus;
    if (r->per_cu < 1)
        return tl_error(TL_EUSAGE, "--split", "%d: a block's share of a row of %ld (%.0f bytes of shared memory) does not "
                        "fit %s's %.0f KiB", r->split, s->n, r->smem_bytes, hw->name, hw->lds_kib);
    if (r->split > resident)
        return tl_error(TL_EUSAGE, "--split", "%d: a row's blocks wait for one another, and %s holds %lld of them at "
                        "once", r->split, hw->name, resident);
    r->passes = s->dtype == TL_TOPK_F32 ? TL_TOPK_PASSES_32 - 1 : TL_TOPK_PASSES_16;
    r->blocks = (long long)s->batch * r->split;
    r->waves = (double)r->blocks / (double)resident;
    shape_bytes(s, &r->scores_bytes);
    r->hbm_bytes = r->scores_bytes;
    const double hbm = tl_ceiling_value(hw->ceilings.hbm_read_gbps);
    r->read_us = hbm > 0 ? r->scores_bytes / (hbm * 1e3) : INFINITY;
    /* a chunk as the longest row gives it; a wave of such blocks shares the HBM */
    const double vecs = (double)tl_topk_chunk_vecs(s->dtype, s->n, r->split);
    const double chunk_bytes = fmin(vecs * 16.0, r->scores_bytes / r->blocks * 2 + 16.0);
    const double wave_bytes = chunk_bytes * (double)(r->blocks < resident ? r->blocks : resident);
    block_life(hw, s, r->split, vecs, wave_bytes, r);
    r->launch_us = or_default(hw->launch_us, 5.0);
    const double after_load = r->block_us - r->load_us;
    const double by_latency = fmax(1.0, r->waves) * r->block_us, by_hbm = r->read_us + after_load;
    finish_time(r, by_latency, by_hbm);
    return TL_OK;
}

int tl_topk_best_split(const tl_hw *hw, const tl_topk_shape *s)
{
    int best = 0;
    double best_us = INFINITY;
    for (int split = 1; split <= TL_TOPK_MAX_SPLIT; split *= 2) {
        const double smem = (double)tl_topk_block_smem(s->dtype, s->n, split, s->sorted, s->k);
        const int per = blocks_per_cu(hw, smem);
        if (per < 1) continue;                           /* the chunk is too big: split further */
        if (split > (long long)per * hw->cus) break;      /* the row no longer fits the GPU at once */
        tl_topk_problem p = {hw, *s, split, TL_TOPK_RESIDENT};
        tl_topk_result r;
        if (tl_topk_sim(&p, &r)) {
            tl_clear_error();
            continue;
        }
        if (r.time_us < best_us * 0.98) best = split, best_us = r.time_us; /* a bigger split must pay */
    }
    return best;
}

int tl_topk_best_plan(const tl_hw *hw, const tl_topk_shape *s, tl_topk_plan *plan)
{
    plan->path = TL_TOPK_RESIDENT;
    plan->split = tl_topk_best_split(hw, s);
    double best_us = INFINITY;
    tl_topk_result r;
    if (plan->split > 0) {
        tl_topk_problem p = {hw, *s, plan->split, TL_TOPK_RESIDENT};
        int rc = tl_topk_sim(&p, &r);
        if (rc) return rc;
        best_us = r.time_us;
    }
    double stream_best = INFINITY;
    int stream_split = 0;
    for (int split = 1; split <= TL_TOPK_MAX_SPLIT; split *= 2) {
        memset(&r, 0, sizeof r);
        int rc = stream_sim(hw, s, split, &r);
        /* a stream path the preset cannot run (its buffer does not fit the shared memory: k = 2048 on
         * gfx942's 64 KiB) leaves the resident path the pick, where that one runs */
        if (rc && plan->split > 0) {
            tl_clear_error();
            break;
        }
        if (rc) return rc;
        if (r.time_us < stream_best * 0.98) stream_best = r.time_us, stream_split = split;
    }
    if (stream_best < best_us) plan->path = TL_TOPK_STREAM, plan->split = stream_split;
    return TL_OK;
}

int tl_topk_fewest_split(const tl_hw *hw, const tl_topk_shape *s)
{
    for (int split = 1; split <= TL_TOPK_MAX_SPLIT; split *= 2) {
        const int per = blocks_per_cu(hw, (double)tl_topk_block_smem(s->dtype, s->n, split, s->sorted, s->k));
        if (per >= 1) return split <= (long long)per * hw->cus ? split : 0;
    }
    return 0;
}

/* Appends one segment on each of row 0's drawn blocks. */
static void add_segments(tl_topk_segment *seg, int *n, int blocks, tl_topk_phase ph, int pass, double t, double dur)
{
    if (blocks > TL_TOPK_MAX_DRAWN_BLOCKS) blocks = TL_TOPK_MAX_DRAWN_BLOCKS;
    for (int b = 0; b < blocks && *n < TL_TOPK_MAX_SEGMENTS; b++)
        seg[(*n)++] = (tl_topk_segment){b, ph, pass, t, t + dur};
}

int tl_topk_schedule(const tl_topk_problem *p, tl_topk_segment *seg, int *n, tl_topk_result *r)
{
    *n = 0;
    tl_topk_problem q = *p; /* the picture is the resident path's */
    q.path = TL_TOPK_RESIDENT;
    if (!q.split && p->hw && !tl_topk_shape_check(&p->shape)) q.split = tl_topk_best_split(p->hw, &p->shape);
    if (!q.split && p->hw) return tl_error(TL_EUSAGE, "sim topk", "no resident split of a row of %ld fits %s", p->shape.n, p->hw->name);
    int rc = tl_topk_sim(&q, r);
    if (rc) return rc;
    const tl_hw *hw = p->hw;
    const double chain = or_default(hw->load_chain_us, or_default(hw->hbm_latency_us, 1.0));
    const double row_sync = r->split > 1 ? TL_TOPK_ROW_SYNC_CHAINS * chain : 0;
    double t = r->launch_us + r->start_us;
    add_segments(seg, n, r->split, TL_TOPK_PHASE_LOAD, 0, t, r->load_us);
    t += r->load_us;
    for (int pass = 0; pass < r->passes; pass++) {
        const double local = r->pass_us - row_sync;
        add_segments(seg, n, r->split, TL_TOPK_PHASE_HIST, pass, t, local);
        t += local;
        if (row_sync > 0) add_segments(seg, n, r->split, TL_TOPK_PHASE_SELECT, pass, t, row_sync);
        t += row_sync;
    }
    add_segments(seg, n, r->split, TL_TOPK_PHASE_COUNT, 0, t, r->count_us);
    t += r->count_us;
    add_segments(seg, n, r->split, TL_TOPK_PHASE_GATHER, 0, t, r->gather_us + r->done_us);
    t += r->gather_us + r->done_us;
    if (r->sort_us > 0) add_segments(seg, n, 1, TL_TOPK_PHASE_SORT, 0, t, r->sort_us);
    return TL_OK;
}
