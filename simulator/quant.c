/* simulator/quant.c: the model of the quant kernels and the dispatch payload (simulator/quant.h). */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"

#define QUANT_BLOCKS_PER_CU 6 /* 256-thread blocks a CU holds at once (sm_90: 40 registers a thread; estimate elsewhere) */

/* Lane-operations per value of shape s's kernel on hw (simulator/quant.h's TL_QUANT_OPS_*). */
static double ops_per_value(const tl_hw *hw, const tl_quant_shape *s)
{
    const int pair_cvt = strncmp(hw->arch, "sm_", 3) == 0 && atoi(hw->arch + 3) >= 89;
    switch (s->scheme) {
    case TL_QUANT_MXFP4: return TL_QUANT_OPS_MXFP4;
    case TL_QUANT_MXFP8: return pair_cvt ? TL_QUANT_OPS_MXFP8_HW : TL_QUANT_OPS_MXFP8_SW;
    case TL_QUANT_FP8_FNUZ: return TL_QUANT_OPS_E4M3_SW;
    case TL_QUANT_FP8_QUERY:
        return (pair_cvt ? TL_QUANT_OPS_E4M3_HW : TL_QUANT_OPS_E4M3_SW) + (s->hadamard ? TL_QUANT_OPS_HADAMARD : 0.0);
    default: return pair_cvt ? TL_QUANT_OPS_E4M3_HW : TL_QUANT_OPS_E4M3_SW;
    }
}

int tl_quant_sim(const tl_hw *hw, const tl_quant_shape *s, tl_quant_result *r)
{
    memset(r, 0, sizeof *r);
    if (!hw) return tl_error(TL_EUSAGE, "sim quant", "no hardware preset");
    int rc = tl_quant_shape_check(s);
    if (rc) return rc;
    r->blocks = tl_quant_blocks(s);
    r->read_bytes = tl_quant_read_bytes(s);
    r->write_bytes = tl_quant_write_bytes(s);
    r->bytes = r->read_bytes + r->write_bytes;
    r->flops = (double)s->rows * (double)s->k * (s->hadamard ? 10.0 : 2.0);
    const double copy = tl_ceiling_value(hw->ceilings.hbm_copy_gbps) > 0 ? tl_ceiling_value(hw->ceilings.hbm_copy_gbps)
                                                                           : tl_ceiling_value(hw->ceilings.hbm_read_gbps);
    if (!(copy > 0)) return tl_error(TL_EUSAGE, "sim quant", "preset %s has no HBM ceiling", hw->name);
    const double slots = (double)hw->cus * QUANT_BLOCKS_PER_CU;
    r->waves = s->scheme == TL_QUANT_FP8_QUERY ? ceil((double)r->blocks / slots) : ceil((double)r->blocks / fmin(slots, (double)r->blocks));
    r->stream_gbps = copy;
    r->launch_us = hw->launch_us > 0 ? hw->launch_us : 5.0;
    r->latency_us = hw->hbm_latency_us > 0 ? hw->hbm_latency_us : 1.0;
    r->stream_us = r->bytes / (copy * 1e3);
    r->ops = (double)s->rows * (double)s->k * ops_per_value(hw, s);
    const int lanes = hw->vector_lanes_per_cu > 0 ? hw->vector_lanes_per_cu : hw->wave_size * hw->matrix_cores_per_cu;
    r->vector_us = r->ops / ((double)hw->cus * lanes * hw->clock_mhz);
    r->floor_us = r->launch_us + r->latency_us;
    const double by_latency = r->waves * r->latency_us, by_hbm = r->latency_us + r->stream_us;
    const double body = fmax(fmax(by_latency, by_hbm), r->vector_us);
    r->time_us = r->launch_us + body;
    if (r->launch_us >= 0.5 * r->time_us) r->limiter = "launch";
    else if (body == r->vector_us) r->limiter = "vector";
    else if (by_hbm >= by_latency) r->limiter = "hbm";
    else r->limiter = "latency";
    return TL_OK;
}

int tl_dispatch_sim(const tl_hw *hw, tl_payload_kind kind, long hidden, int topk, int ep, long tokens,
                    tl_dispatch_result *r)
{
    memset(r, 0, sizeof *r);
    if ((unsigned)kind >= TL_PAYLOAD_N) return tl_error(TL_EUSAGE, "sim dispatch", "unknown payload");
    if (hidden < TL_QUANT_GROUP || hidden % TL_QUANT_GROUP || hidden > TL_QUANT_MAX_K)
        return tl_error(TL_EUSAGE, "sim dispatch", "hidden size %ld is not a multiple of 128 in [128, %ld]", hidden,
                        TL_QUANT_MAX_K);
    if (topk < 1 || topk > TL_QUANT_MAX_TOPK)
        return tl_error(TL_EUSAGE, "sim dispatch", "top-k %d is not in [1, %d]", topk, TL_QUANT_MAX_TOPK);
    if (ep < 2 || ep > 1024) return tl_error(TL_EUSAGE, "--ep", "%d GPUs is not in [2, 1024]", ep);
    if (tokens < 1 || tokens > TL_QUANT_MAX_ROWS)
        return tl_error(TL_EUSAGE, "--tokens", "%ld is not in [1, %ld]", tokens, TL_QUANT_MAX_ROWS);
    if (!(hw->link_gbps > 0))
        return tl_error(TL_EUSAGE, "sim dispatch", "preset %s has no link bandwidth (link_gbps)", hw->name);
    r->per_token = tl_payload_of(kind, hidden, topk);
    r->vs_bf16 = r->per_token.total / tl_payload_of(TL_PAYLOAD_BF16, hidden, topk).total;
    const double per_peer = (double)tokens * r->per_token.total;
    r->sent_bytes = per_peer * (ep - 1);
    r->time_us = fmax(r->sent_bytes / (hw->link_gbps * 1e3), per_peer / (hw->link_peer_gbps * 1e3));
    return TL_OK;
}
