/* simulator/topk.c: the top-k cost model (simulator/topk.h). */
#include "topk.h"

#include <math.h>
#include <string.h>

#include "../core/tl.h"

static double or_default(double v, double d) { return v > 0 ? v : d; }

/* Microseconds to read `bytes` with `blocks` blocks at ceiling gbps (GB/s), each CU streaming at
 * most cu_gbps. */
static double read_us(double bytes, long long blocks, const tl_hw *hw, double gbps, double cu_gbps)
{
    long long active = blocks < hw->cus ? blocks : hw->cus;
    double bw = fmin(gbps, (double)active * cu_gbps);
    return bw > 0 ? bytes / (bw * 1e3) : INFINITY;
}

int tl_topk_sim(const tl_topk_problem *p, tl_topk_result *r)
{
    memset(r, 0, sizeof *r);
    if (!p || !p->hw) return tl_error(TL_EUSAGE, "sim topk", "no hardware preset");
    int rc = tl_topk_shape_check(&p->shape);
    if (rc) return rc;
    if (p->split < 0 || p->split > TL_TOPK_MAX_SPLIT_MODEL)
        return tl_error(TL_EUSAGE, "--split", "%d outside [0, %d] (0: the model chooses)", p->split,
                        TL_TOPK_MAX_SPLIT_MODEL);
    const tl_hw *hw = p->hw;
    const tl_topk_shape *s = &p->shape;
    r->split = p->split ? p->split : tl_topk_best_split(hw, s);
    r->passes = s->dtype == TL_TOPK_F32 ? TL_TOPK_PASSES_32 : TL_TOPK_PASSES_16;
    r->kernels = 2 * r->passes + 4; /* histogram + select per pass; init, count, gather, final sort */
    r->blocks = (long long)s->batch * r->split;
    double valid = 0;
    for (int b = 0; b < s->batch; b++) valid += (double)tl_topk_row_len(s, b);
    r->scores_bytes = valid * (double)tl_topk_score_bytes(s->dtype);
    const double cache_mib = hw->l2_mib_per_xcd * (hw->xcds > 0 ? hw->xcds : 1) + hw->llc_mib;
    r->fits_l2 = r->scores_bytes <= cache_mib * 1048576.0 * 0.8; /* most of it: other lines live there too */
    const double hbm_gbps = tl_ceiling_value(hw->ceilings.hbm_read_gbps);
    const double cu_hbm = or_default(hw->hbm_per_cu_gbps, hbm_gbps / hw->cus);
    const double cu_l2 = or_default(hw->l2_per_cu_gbps, cu_hbm);
    const int reads = r->passes + 2; /* the histograms, the count, the gather */
    r->hbm_bytes = r->fits_l2 ? r->scores_bytes : reads * r->scores_bytes;
    r->l2_bytes = r->fits_l2 ? (reads - 1) * r->scores_bytes : 0;
    double first = read_us(r->scores_bytes, r->blocks, hw, hbm_gbps, cu_hbm);
    /* an L2 hit is not bounded by HBM: the CUs' own streams at the L2 rate bound it */
    double later = r->fits_l2 ? read_us(r->scores_bytes, r->blocks, hw, INFINITY, cu_l2) : first;
    r->read_us = first + (reads - 1) * later;
    r->first_read_us = first;
    r->later_read_us = later;
    const double launch = or_default(hw->launch_us, 5.0), next = or_default(hw->next_kernel_us, launch);
    const double chain = or_default(hw->load_chain_us, or_default(hw->hbm_latency_us, 1.0));
    r->launch_us = launch + (r->kernels - 1) * next;
    r->scan_us = r->passes * 2.0 * chain; /* each select's dependent loads */
    int kp = 1, lg = 0;
    while (kp < s->k) kp <<= 1, lg++;
    const double steps = lg * (lg + 1) / 2.0, per_thread = kp > 1024 ? kp / 1024.0 : 1.0;
    const long long waves = (s->batch + hw->cus - 1) / hw->cus;
    r->sort_us = waves * steps * TL_TOPK_SORT_STEP_CYCLES * per_thread / hw->clock_mhz;
    r->time_us = r->read_us + r->launch_us + r->scan_us + r->sort_us;
    if (r->launch_us + r->scan_us > 0.5 * r->time_us) r->limiter = "launch";
    else if (r->sort_us > 0.5 * r->time_us) r->limiter = "sort";
    else if (first > 1.2 * r->scores_bytes / (hbm_gbps * 1e3)) r->limiter = "cu-stream"; /* too few blocks */
    else r->limiter = "hbm";
    return TL_OK;
}

int tl_topk_best_split(const tl_hw *hw, const tl_topk_shape *s)
{
    int best = 1;
    double best_us = INFINITY;
    for (int split = 1; split <= TL_TOPK_MAX_SPLIT_MODEL; split *= 2) {
        if (split > 1 && s->n / split < TL_TOPK_MIN_CHUNK) break;
        tl_topk_problem p = {hw, *s, split};
        tl_topk_result r;
        if (tl_topk_sim(&p, &r)) break;
        if (r.time_us < best_us * 0.98) best = split, best_us = r.time_us; /* a bigger split must pay */
    }
    return best;
}

/* Appends a segment of `blocks` bars (one on block 0 when blocks is 1) from *t for dur. */
static void add_segments(tl_topk_segment *seg, int *n, int blocks, tl_topk_phase ph, int pass, double t, double dur)
{
    for (int b = 0; b < blocks && *n < TL_TOPK_MAX_SEGMENTS; b++) seg[(*n)++] = (tl_topk_segment){b, ph, pass, t, t + dur};
}

int tl_topk_schedule(const tl_topk_problem *p, tl_topk_segment *seg, int *n, tl_topk_result *r)
{
    *n = 0;
    int rc = tl_topk_sim(p, r);
    if (rc) return rc;
    const tl_hw *hw = p->hw;
    const double launch = or_default(hw->launch_us, 5.0), next = or_default(hw->next_kernel_us, launch);
    const double select = r->passes ? r->scan_us / r->passes : 0;
    double t = launch; /* the init kernel: its launch, no work charged */
    for (int pass = 0; pass < r->passes; pass++) {
        double read = pass == 0 ? r->first_read_us : r->later_read_us;
        t += next;
        add_segments(seg, n, r->split, TL_TOPK_PHASE_HIST, pass, t, read);
        t += read + next;
        add_segments(seg, n, 1, TL_TOPK_PHASE_SELECT, pass, t, select);
        t += select;
    }
    t += next;
    add_segments(seg, n, r->split, TL_TOPK_PHASE_COUNT, 0, t, r->later_read_us);
    t += r->later_read_us + next;
    add_segments(seg, n, r->split, TL_TOPK_PHASE_GATHER, 0, t, r->later_read_us);
    t += r->later_read_us + next;
    add_segments(seg, n, 1, TL_TOPK_PHASE_SORT, 0, t, r->sort_us);
    return TL_OK;
}
