/* Paged split-KV decode attention model (contract: decode.h). */
#include "decode.h"

#include <math.h>
#include <string.h>

/* The refusal of a KV cache larger than the preset's HBM, its size in decimal units as hbm_gb is. */
static int kv_too_big(const tl_hw *hw, double kv_bytes)
{
    static const char *const units[] = {"GB", "TB", "PB", "EB"};
    double v = kv_bytes / 1e9;
    int u = 0;
    while (v >= 1000 && u < 3) v /= 1000, u++;
    return tl_error(TL_EUSAGE, "sim paged-decode", "the KV cache of %.3g %s (2 x batch x seq x kv-heads x head-dim "
                    "elements) does not fit in the %g GB of HBM of %s", v, units[u], hw->hbm_gb, hw->name);
}

int tl_decode_sim(const tl_decode_problem *p, tl_decode_result *r)
{
    memset(r, 0, sizeof *r);
    if (!p || !p->hw) return tl_error(TL_EUSAGE, "sim paged-decode", "missing hardware");
    const tl_hw *hw = p->hw;
    int D = p->head_dim > 0 ? p->head_dim : 128;
    int block = p->block > 0 ? p->block : 16;
    if (p->gqa < 1 || p->gqa > 1024) return tl_error(TL_EUSAGE, "--gqa", "gqa = %d outside [1, 1024]", p->gqa);
    if (p->batch < 1) return tl_error(TL_EUSAGE, "--batch", "batch = %d must be at least 1", p->batch);
    if (p->seq < 1) return tl_error(TL_EUSAGE, "--seq", "seq = %d must be at least 1", p->seq);
    if (p->kv_heads < 1 || p->kv_heads > 4096)
        return tl_error(TL_EUSAGE, "--kv-heads", "kv-heads = %d outside [1, 4096]", p->kv_heads);
    if (D < 1 || D > 1024) return tl_error(TL_EUSAGE, "--head-dim", "head-dim = %d outside [1, 1024]", D);
    if (block > 4096) return tl_error(TL_EUSAGE, "--block", "block = %d outside [1, 4096]", block);
    if (p->splits < 0 || p->splits > 65536) return tl_error(TL_EUSAGE, "--splits", "splits = %d outside [0, 65536]", p->splits);

    double B = p->batch, H = p->kv_heads, G = p->gqa, L = p->seq;
    double e = p->kv_fp8 ? 1.0 : 2.0;
    /* split-KV: enough chunks that batch x heads x splits covers two waves of CUs, chunks of at
     * least 16 pages */
    long long pairs = (long long)p->batch * p->kv_heads;
    int splits = p->splits;
    if (splits == 0) {
        long long want = (2LL * hw->cus + pairs - 1) / pairs;
        long long max_by_len = (p->seq + 16LL * block - 1) / (16LL * block);
        splits = (int)(want < max_by_len ? want : max_by_len);
        if (splits < 1) splits = 1;
    }
    r->splits = splits;
    r->work_items = pairs * splits;

    r->flops = 4.0 * B * H * G * L * D;
    r->kv_bytes = 2.0 * B * H * L * D * e + (p->kv_fp8 ? 8.0 * B * H * L : 0.0);
    double q_bytes = B * H * G * D * 2.0, o_bytes = B * H * G * D * 2.0;
    double table_bytes = B * ceil(L / block) * 4.0;
    double partial_bytes = splits > 1 ? 2.0 * B * H * G * splits * (D + 2.0) * 4.0 : 0.0;
    r->other_bytes = q_bytes + o_bytes + table_bytes + partial_bytes;
    r->hbm_bytes = r->kv_bytes + r->other_bytes;
    if (hw->hbm_gb > 0 && r->kv_bytes > hw->hbm_gb * 1e9) return kv_too_big(hw, r->kv_bytes);
    r->intensity = r->flops / r->hbm_bytes;

    double bw = tl_ceiling_value(hw->ceilings.hbm_read_gbps);
    double active = (double)(r->work_items < hw->cus ? r->work_items : hw->cus);
    double cap = active * hw->hbm_per_cu_gbps;
    r->bw_gbps = bw < cap ? bw : cap;
    r->memory_us = r->hbm_bytes / (r->bw_gbps * 1e3);
    tl_ceiling mc = p->kv_fp8 && hw->ceilings.fp8_tflops.datasheet > 0 ? hw->ceilings.fp8_tflops
                                                                         : hw->ceilings.bf16_tflops;
    double rate = tl_ceiling_value(mc);
    r->compute_us = rate > 0 ? r->flops / (rate * 1e6) : 0;
    r->fixed_us = hw->launch_us * (splits > 1 ? 2 : 1);
    double body = r->memory_us > r->compute_us ? r->memory_us : r->compute_us;
    r->time_us = body + r->fixed_us;
    if (r->fixed_us > body) r->limiter = "fixed";
    else r->limiter = r->memory_us >= r->compute_us ? "hbm" : "matrix";
    return 0;
}

/* ---- the model of `decode` (simulator/decode.h) ---- */

#define DECODE_MMA_ROWS 16     /* a matrix tile's rows: the heads of a group are padded to it */
#define DECODE_SOFTMAX_OPS 4.0 /* vector operations per (key, head): scale, max, exp, sum */
#define DECODE_DEQUANT_OPS 2.0 /* per FP8 element: decode, scale */

/* Cache bytes of one counted key as one work-group reads it (scales and the block-table entry
 * included): a KV head's K and V row (paged) or the latent row (dual-scope). */
static double key_bytes(const tl_decode_shape *s)
{
    const double e = tl_decode_kv_bytes_per_elem(s), fp8 = s->kv == TL_DECODE_KV_FP8;
    if (s->kind == TL_DECODE_PAGED) return 2.0 * TL_DECODE_PAGED_DIM * e + (fp8 ? 8.0 : 0.0) + 4.0 / TL_DECODE_PAGE;
    return TL_DECODE_MLA_QK_DIM * e + (fp8 ? 4.0 : 0.0);
}

/* Cache elements a work-group decodes per key (FP8 only). */
static double key_elems(const tl_decode_shape *s)
{
    return s->kind == TL_DECODE_PAGED ? 2.0 * TL_DECODE_PAGED_DIM : TL_DECODE_MLA_QK_DIM;
}

/* Matrix FLOPs of one key for one group: its heads padded to a tile's rows. */
static double key_mma_flops(const tl_decode_shape *s)
{
    const int gh = tl_decode_group_heads(s);
    const int padded = (gh + DECODE_MMA_ROWS - 1) / DECODE_MMA_ROWS * DECODE_MMA_ROWS;
    return 2.0 * padded * (tl_decode_qk_dim(s) + tl_decode_v_dim(s));
}

static double vector_ops_per_us(const tl_hw *hw, double cus) { return cus * hw->vector_lanes_per_cu * hw->clock_mhz; }
static double matrix_flops_per_us(const tl_hw *hw, double cus)
{
    return tl_ceiling_value(hw->ceilings.bf16_tflops) * 1e6 * cus / hw->cus;
}

/* One CU's streaming rate for a group's cache reads: the preset's hbm_per_cu_gbps, for both kinds
 * and formats (the sm_90a paged kernel brings K and V by tensor copies of a page's 16 rows, 4 KB
 * (bf16) or 2 KB (fp8) a copy, so the per-copy cost that held the 16-byte cp.async and the 256-byte
 * bulk copies below the HBM rate is paid ~16 or ~32 times less often; async_copy_per_cu_gbps, the
 * cp.async rate, is no longer charged; the dual-scope kernel loads into registers). */
static double stream_per_cu_gbps(const tl_hw *hw, const tl_decode_shape *s)
{
    (void)s;
    return hw->hbm_per_cu_gbps;
}

/* ---- the dual-scope group's timeline (kernels/decode_mla.hip). H200 constants (H 128, fp8,
 * 32-head groups), fitted to the kernel's phase traces (`bench decode --trace`; which trace points,
 * in bench/journal/runs.md), none to the timings the model is judged on:
 *   DS_PROLOGUE_US   2.96  the group's start to its first tile's positions settled, for a shard
 *                          with no top-k compares: the cold loads of Q, the top-k list and the
 *                          length, the first positions;
 *   DS_TILE_US       2.0   one tile's work alone (a shard of one tile): the decoded store, QK,
 *                          softmax, PV, four barriers;
 *   DS_TILE_PERIOD_US 3.0  a tile of a longer shard: its work and the next tile's loads that one
 *                          tile of work does not hide;
 *   DS_STORE_GBPS    26.4  a group's O and LSE (32 heads x 513 floats) as staged 16-byte row
 *                          stores, per SM;
 *   DS_MERGE_GBPS    16.6  the merge's partials read by one block, per SM (fitted on the
 *                          dual-scope merge's 513-float rows; the paged merge's 129-float rows
 *                          take it too: extrapolated);
 *   DS_CMP_CYCLES    23    a 16-byte shared load of the first tile's repeat compares.
 * Derived: the first tile's rows land one HBM round trip (hbm_latency_us) after its loads leave;
 * the first tile's repeats cost ceil(i / 32) 16-byte shared loads a thread for its last slot's
 * entry index i at DS_CMP_CYCLES each; the hash set of the later tiles (k_end / 256 entries a
 * thread, a compare-and-swap and an atomic min each, not measured) is built while the first
 * tile's loads are in flight and charged only where it outlasts them, at DS_HASH_CYCLES an entry
 * (assumed). */
#define DS_PROLOGUE_US 2.96
#define DS_TILE_US 2.0
#define DS_TILE_PERIOD_US 3.0
#define DS_STORE_GBPS 26.4
#define DS_MERGE_GBPS 16.6
#define DS_CMP_CYCLES 23.0
#define DS_HASH_CYCLES 100.0
#define DS_THREADS 256.0

/* Shard `sh` of a row of `slots` slots (nwin of them the window's) on one SM: the timeline above. */
static double ds_shard_us(const tl_hw *hw, const tl_decode_shape *s, long slots, long nwin, int shards, int sh)
{
    long lo, hi;
    tl_decode_shard_range(slots, shards, TL_DECODE_DS_GRANULE, sh, &lo, &hi);
    if (lo >= hi) return DS_PROLOGUE_US + 4.0 * tl_decode_group_heads(s) * (tl_decode_v_dim(s) + 1.0) / (DS_STORE_GBPS * 1e3);
    const long tiles = (hi - lo + TL_DECODE_DS_GRANULE - 1) / TL_DECODE_DS_GRANULE;
    const long first_end = hi < lo + TL_DECODE_DS_GRANULE ? hi : lo + TL_DECODE_DS_GRANULE;
    const double cyc_us = 1.0 / hw->clock_mhz;
    const double cmp = first_end - 1 > nwin ? ceil((double)(first_end - 1 - nwin) / 32.0) * DS_CMP_CYCLES * cyc_us : 0;
    long k_end = tiles > 1 && hi > nwin ? hi - nwin : 0;
    if (k_end > s->topk) k_end = s->topk;
    double hash = ceil(k_end / DS_THREADS) * DS_HASH_CYCLES * cyc_us - hw->hbm_latency_us;
    if (hash < 0) hash = 0;
    const double out = 4.0 * tl_decode_group_heads(s) * (tl_decode_v_dim(s) + 1.0);
    return DS_PROLOGUE_US + cmp + hash + hw->hbm_latency_us + DS_TILE_US + (tiles - 1) * DS_TILE_PERIOD_US +
           out / (DS_STORE_GBPS * 1e3);
}

/* The longest shard group of any row (dual-scope). */
static double ds_longest_us(const tl_hw *hw, const tl_decode_shape *s, int shards)
{
    double most = 0;
    for (long r = 0; r < tl_decode_rows(s); r++) {
        const long slots = tl_decode_row_slots(s, r), nwin = slots - s->topk;
        for (int sh = 0; sh < shards; sh++) {
            const double t = ds_shard_us(hw, s, slots, nwin, shards, sh);
            if (t > most) most = t;
        }
    }
    return most;
}

/* A group's latency: the first load of its index (block table or top-k list), then of its keys. */
static double group_latency_us(const tl_hw *hw) { return hw->hbm_latency_us + hw->load_chain_us; }

/* A group's time after its first loads: its reads at one CU's streaming rate overlapped with its
 * work at one CU's share of the rates, then its output (partial, or rows of O and LSE) written at
 * one CU's L2 rate. */
static double group_body_us(const tl_hw *hw, const tl_decode_shape *s, long keys)
{
    const int gh = tl_decode_group_heads(s);
    const double bytes = keys * key_bytes(s) + 2.0 * gh * tl_decode_qk_dim(s);
    const double out = 4.0 * gh * (tl_decode_v_dim(s) + 1.0);
    const double work = keys * key_mma_flops(s) / matrix_flops_per_us(hw, 1) +
                        keys * (s->kv == TL_DECODE_KV_FP8 ? key_elems(s) * DECODE_DEQUANT_OPS : 0) / vector_ops_per_us(hw, 1) +
                        keys * gh * DECODE_SOFTMAX_OPS / vector_ops_per_us(hw, 1);
    const double read = bytes / (stream_per_cu_gbps(hw, s) * 1e3);
    return (read > work ? read : work) + out / (hw->l2_per_cu_gbps * 1e3);
}

double tl_decode_model_group_us(const tl_hw *hw, const tl_decode_shape *s, long keys, int shards)
{
    (void)shards;
    if (s->kind == TL_DECODE_DUAL_SCOPE) /* the timeline above, for keys slots of the window (no compares) */
        return ds_shard_us(hw, s, keys, keys, 1, 0);
    return group_latency_us(hw) + group_body_us(hw, s, keys);
}

/* The counted keys of every row, and the longest row's. */
static double total_keys(const tl_decode_shape *s, const int32_t *topk, long *longest)
{
    double keys = 0;
    *longest = 0;
    for (long r = 0; r < tl_decode_rows(s); r++) {
        const long n = tl_decode_row_keys(s, r, topk ? topk + (size_t)r * s->topk : NULL);
        keys += (double)n;
        if (n > *longest) *longest = n;
    }
    return keys;
}

/* The largest shard of the longest row, in keys: its slots (a run of granules), at most its keys. */
static long longest_shard_keys(const tl_decode_shape *s, long longest_keys, int shards)
{
    long most_slots = 0;
    for (long r = 0; r < tl_decode_rows(s); r++) {
        const long n = tl_decode_row_slots(s, r);
        if (n > most_slots) most_slots = n;
    }
    long lo, hi;
    tl_decode_shard_range(most_slots, shards, tl_decode_granule(s->kind), 0, &lo, &hi);
    return hi - lo < longest_keys ? hi - lo : longest_keys;
}

/* Whether the partials stay in the caches between the two launches (L2 and the last level). */
static int partials_cached(const tl_hw *hw, double bytes)
{
    return bytes <= (hw->l2_mib_per_xcd * hw->xcds + hw->llc_mib) * 1048576.0;
}

/* The merge launch: blocks of 256 threads, dv / 4 a row-head (kernels/decode.hip), each reading its
 * row-heads' partials; the busiest SM runs ceil(blocks / CUs) of them, each at DS_MERGE_GBPS
 * (the fitted rate of a merge block's reads from L2), or the whole launch at the HBM ceiling
 * when the partials did not stay in the caches, whichever is longer. */
static void merge_time(const tl_hw *hw, const tl_decode_shape *s, tl_decode_model_result *r)
{
    if (r->shards <= 1) return;
    const int in_l2 = partials_cached(hw, r->partial_bytes);
    const double items = (double)tl_decode_lse_elems(s), dv = tl_decode_v_dim(s);
    const double per_block = 256.0 / (dv / 4.0), blocks = ceil(items / per_block);
    const double block_bytes = per_block * r->shards * (dv + 1.0) * 4.0;
    const double busiest = ceil(blocks / hw->cus) * block_bytes / (DS_MERGE_GBPS * 1e3);
    const double out = 4.0 * tl_decode_o_elems(s) + 4.0 * tl_decode_lse_elems(s);
    const double whole = in_l2 ? 0 : (r->partial_bytes + out) / (tl_ceiling_value(hw->ceilings.hbm_read_gbps) * 1e3);
    r->merge_us = busiest > whole ? busiest : whole;
    r->fixed_us += hw->next_kernel_us;
}

static const char *pick_limiter(const tl_decode_model_result *r)
{
    struct { double t; const char *name; } parts[] = {
        {r->hbm_us, "hbm"}, {r->mma_us, "matrix"}, {r->dequant_us, "dequant"}, {r->group_us, "latency"},
        {r->merge_us, "merge"}, {r->fixed_us, "fixed"}};
    int best = 0;
    for (int i = 1; i < 6; i++)
        if (parts[i].t > parts[best].t) best = i;
    return parts[best].name;
}

int tl_decode_model(const tl_hw *hw, const tl_decode_shape *s, const int32_t *topk, int shards, tl_decode_model_result *r)
{
    memset(r, 0, sizeof *r);
    if (!hw) return tl_error(TL_EUSAGE, "sim decode", "missing hardware");
    int rc = tl_decode_shape_check(s);
    if (rc) return rc;
    if (shards < 0 || shards > TL_DECODE_MAX_SHARDS)
        return tl_error(TL_EUSAGE, "--shards", "%d shards outside [0, %d] (0: the model picks)", shards, TL_DECODE_MAX_SHARDS);
    r->shards = shards ? shards : tl_decode_auto_shards(s, hw->cus);
    r->groups = tl_decode_groups(s, r->shards);
    r->waves = (double)r->groups / ((double)hw->cus * tl_decode_groups_per_cu(s->kind));
    r->group_heads = tl_decode_group_heads(s);
    const double keys = total_keys(s, topk, &r->longest_keys);
    const double groups_per_row = tl_decode_head_blocks(s);
    r->flops = tl_decode_flops(s, topk);
    r->mma_flops = keys * groups_per_row * key_mma_flops(s);
    r->kv_bytes = keys * groups_per_row * key_bytes(s);
    if (s->kind == TL_DECODE_DUAL_SCOPE) /* the union over scopes and MTP queries: the contract's count */
        r->kv_bytes = tl_decode_bytes(s, topk) - 2.0 * tl_decode_q_elems(s) - 4.0 * tl_decode_o_elems(s) -
                      4.0 * tl_decode_lse_elems(s) - 4.0 * tl_decode_topk_elems(s);
    if (hw->hbm_gb > 0 && r->kv_bytes > hw->hbm_gb * 1e9) return kv_too_big(hw, r->kv_bytes);
    r->partial_bytes = tl_decode_partial_bytes(s, r->shards);
    /* the shards write O and LSE, or the partials (which reach HBM only when the caches cannot hold them) */
    double out = 4.0 * tl_decode_o_elems(s) + 4.0 * tl_decode_lse_elems(s);
    if (r->shards > 1) out = partials_cached(hw, r->partial_bytes) ? 0 : r->partial_bytes;
    r->hbm_bytes = r->kv_bytes + 2.0 * tl_decode_q_elems(s) + 4.0 * tl_decode_topk_elems(s) + out;
    r->dequant_ops = s->kv == TL_DECODE_KV_FP8 ? keys * groups_per_row * key_elems(s) * DECODE_DEQUANT_OPS : 0;
    r->softmax_ops = keys * tl_decode_heads(s) * DECODE_SOFTMAX_OPS;

    const double active = (double)(r->groups < hw->cus ? r->groups : hw->cus);
    const double ceiling = tl_ceiling_value(hw->ceilings.hbm_read_gbps), cap = active * stream_per_cu_gbps(hw, s);
    r->bw_gbps = ceiling < cap ? ceiling : cap;
    r->hbm_us = r->hbm_bytes / (r->bw_gbps * 1e3);
    r->mma_us = r->mma_flops / matrix_flops_per_us(hw, active);
    r->dequant_us = r->dequant_ops / vector_ops_per_us(hw, active);
    r->softmax_us = r->softmax_ops / vector_ops_per_us(hw, active);
    /* the busiest CU runs ceil(groups / CUs) groups, each as long as the longest, sharing its rates
     * (together or one after another); the first loads' latency once */
    const double per_cu = ceil((double)r->groups / hw->cus);
    if (s->kind == TL_DECODE_DUAL_SCOPE) /* one group a SM: each its whole timeline */
        r->group_us = per_cu * ds_longest_us(hw, s, r->shards);
    else
        r->group_us = group_latency_us(hw) + per_cu * group_body_us(hw, s, longest_shard_keys(s, r->longest_keys, r->shards));
    const double work = r->mma_us + r->dequant_us + r->softmax_us;
    r->body_us = r->hbm_us > work ? r->hbm_us : work;
    if (r->group_us > r->body_us) r->body_us = r->group_us;
    r->fixed_us = hw->launch_us;
    merge_time(hw, s, r);
    r->time_us = r->body_us + r->merge_us + r->fixed_us;
    r->tbps = tl_decode_bytes(s, topk) / (r->time_us * 1e6);
    r->limiter = pick_limiter(r);
    return TL_OK;
}
