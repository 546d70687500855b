/* simulator/quant.h: the model of the fused quantization kernels (contract/quant.h) and of the MoE
 * dispatch payload they make.
 *
 * Kernel: one launch of tl_quant_blocks(s) blocks; a block issues all its loads at once
 * (TL_QUANT_VECS 16-byte loads a thread; the query's 8), reduces, converts and stores, so a wave of
 * blocks (8 a CU) costs one load round trip (hbm_latency_us). Bytes = the contract's fewest (x read
 * once, codes and scales written once), streamed at the preset's copy ceiling (hbm_copy_gbps, read
 * + write counted; the read ceiling when it has none). Time = launch_us + max(waves x round trip,
 * round trip + bytes / copy ceiling). The floor at small M is launch_us + one round trip.
 * Limiter: "launch" when the launch is half the time or more, else "hbm" or "latency".
 * FLOPs (for the roofline): 2 a value (the amax compare and the divide or multiply), plus 8 with
 * the Hadamard rotation (7 butterfly adds and the scale).
 *
 * Dispatch (`tilelab sim dispatch`): a token crosses the fabric as tl_payload_of(kind) bytes. The
 * seed's scheme gathers every token to every rank of the expert-parallel group (all-gather, as the
 * "collective gather" it names): a GPU sends its T tokens to each of its ep - 1 peers, so it sends
 * T x bytes x (ep - 1); time = max(that / link_gbps, T x bytes / link_peer_gbps) (bandwidth only:
 * no per-message latency, no overlap with compute). TL_EUSAGE when the preset has no link. */
#ifndef TL_SIM_QUANT_H
#define TL_SIM_QUANT_H

#include "../contract/quant.h"
#include "hw.h"

typedef struct {
    long blocks;
    double read_bytes, write_bytes, bytes, flops;
    double waves;        /* rounds of 8 blocks a CU */
    double stream_gbps;  /* the copy ceiling the model streams at */
    double launch_us, latency_us, stream_us, floor_us, time_us;
    const char *limiter;
} tl_quant_result;

int tl_quant_sim(const tl_hw *hw, const tl_quant_shape *s, tl_quant_result *r);

typedef struct {
    tl_payload_bytes per_token;
    double sent_bytes;   /* out of one GPU */
    double time_us;
    double vs_bf16;      /* per-token bytes / BF16's */
} tl_dispatch_result;

int tl_dispatch_sim(const tl_hw *hw, tl_payload_kind kind, long hidden, int topk, int ep, long tokens,
                    tl_dispatch_result *r);

#endif
