/* simulator/quant.h: the model of the fused quantization kernels (contract/quant.h) and of the MoE
 * dispatch payload they make.
 *
 * Kernel: one launch; its blocks (QUANT_BLOCKS_PER_CU a CU, at most tl_quant_blocks(s) tiles) loop
 * over the tiles, each issuing its next tile's loads before converting the current one (fp8-query:
 * one block a 128 x 128 tile, no loop). Bytes = the contract's fewest (x read once, codes and
 * scales written once), streamed at the preset's copy ceiling (hbm_copy_gbps, read + write counted;
 * the read ceiling when it has none). The conversion is vector work of its own: lane-operations
 * per value (TL_QUANT_OPS_*: the kernel's hot-path PTX instructions per value, nvcc 13 for sm_90,
 * times 0.65 instructions issued per PTX instruction, the ratio ncu counted on the first fp8 kernel
 * (61.5 issued a value for 95 PTX lines): estimates for every other kernel and arch) at cus x
 * vector_lanes_per_cu x clock. E4M3FN codes
 * take one pair-conversion instruction on NVIDIA sm_89+ (kernels/gpu.h); FNUZ, AMD and E2M1 the
 * integer encoder. Time = launch_us + max(round trips, round trip + bytes / copy ceiling, the
 * conversion work), where the round trips are one per tile a block takes in turn (the first
 * tile's loads, then at most one prefetched round trip an iteration). The floor at small M is
 * launch_us + one round trip. Limiter: "launch" when the launch is half the time or more, else
 * "hbm", "vector" or "latency".
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
    double waves;        /* tiles a block takes in turn */
    double ops;          /* lane-operations of the conversion */
    double vector_us;    /* the conversion at the preset's vector rate */
    double stream_gbps;  /* the copy ceiling the model streams at */
    double launch_us, latency_us, stream_us, floor_us, time_us;
    const char *limiter;
} tl_quant_result;

/* Lane-operations per value of each kernel's conversion (see above; estimates). */
#define TL_QUANT_OPS_E4M3_HW 10.0  /* fp8 / dispatch / query: the FMA division, the pair conversion (sm_89+) */
#define TL_QUANT_OPS_E4M3_SW 60.0  /* the same with the integer encoder (FNUZ, AMD): 87-95 PTX a value */
#define TL_QUANT_OPS_MXFP8_HW 8.0  /* mxfp8: exact scaling, then the pair conversion */
#define TL_QUANT_OPS_MXFP8_SW 58.0 /* mxfp8 with the integer encoder: 86 PTX a value */
#define TL_QUANT_OPS_MXFP4 20.0    /* E2M1: the branch-free rint encoder, no hardware conversion: ~30 PTX a value */
#define TL_QUANT_OPS_HADAMARD 20.0 /* fp8-query: the 7 butterfly stages (4 by shuffles) and the scale */

/* TL_EUSAGE for a NULL preset, a bad shape, or a preset without an HBM ceiling. O(1). */
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
