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
