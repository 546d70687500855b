/* The fused MoE cost model: the tile schedule of a two-stage fused MoE kernel on a hardware preset,
 * with padding, bytes, FLOPs, time and what bounds it. The op (its function, data types, layouts
 * and this project's kernel geometry) is contract/moe.h; the tile order is contract/worklist.h.
 *
 * The kernel modelled: stage 1 computes, for each tile of tile_m routed rows of one expert and each
 * block of tile_n output columns, gate+up = X[rows] * W1[e] (N = 2 * width / tp, K = hidden) with a
 * SwiGLU epilogue that writes width/tp activations per row; stage 2 computes down = H[rows] * W2[e]
 * (N = hidden, K = width / tp) and scatters rows back with their top-k weights (weighted combine).
 * A work item is one (tile, n-block) pair; work items are dealt to CUs in waves, round robin over
 * XCDs first (item i -> XCD i % xcds), so one wave holds cus items.
 *
 * Counted:
 *  - tiles from the worklist (contract/worklist.h) for the chosen routing; padding = rows computed /
 *    real rows. Shared experts (n_shared) are experts every token routes to, after its k routed
 *    ones: tokens more rows each, so their tiles, weights, outputs and FLOPs join the stage's (stage
 *    1 reads each token's activations once, charged to its routed rows).
 *  - k_padding = K rounded up to the instruction's K-depth / K (e.g. width 96 under FP8's K = 128)
 *  - flops_useful = 2 * real rows * N * K; flops_issued = 2 * padded rows * N_padded * K_padded
 *  - HBM bytes: each active expert's weights (all of N x K, with scales) read once however many of
 *    its rows use them; activations in (stage 1: each token's hidden vector once; stage 2: each
 *    routed row), outputs out (stage 1: width/tp per routed row; stage 2: hidden per routed row);
 *    routing metadata (sorted ids, tile expert, top-k weights) too. The result's byte fields are
 *    exact counts of codes and scales as stored; the time terms charge bytes per element (scales
 *    included) are the contract's storages: weights bf16 2, fp8 1 + 4/128^2, a16w4 0.5 + 4/128,
 *    mxfp4 0.5 + 1/32, mxfp8 1 + 1/32; stage-1 activations fp8 1 + 4/128, mxfp4 and mxfp8 1 + 1/32
 *    (MXFP8; 2 where the kernel carries them as BF16 values: mx_acts), bf16 and a16w4 2. The
 *    stage-1 output is bf16 for every type; stage 2 reads it, or with requant_kernel its
 *    re-quantization (below); stage 2 writes each routed row's weighted result in bf16 (tokens * k
 *    * hidden * 2 bytes, as a kernel that scatters before the top-k sum).
 *  - Instructions: fp8 runs fp8 x fp8 (gfx950: the 16x16x128 / 32x32x64 f8f6f4 ones). The MX types
 *    (mx_acts): the generic kernel (mx_acts 0), where the arch has the scaled f8f6f4 instructions
 *    (gfx950), runs mxfp4 as fp4 x fp4 and mxfp8 as fp8 x fp8 on them, the weights' E8M0 scales fed
 *    to the instruction and the activations quantized to the weights' MX format in the kernel (the
 *    seed's MX path; that quantization is not charged); tilelab's kernel on gfx950
 *    (TL_MOE_MX_ACTS_E4M3) runs the activations' E4M3 codes against the weights' codes (fp8 x fp4
 *    or fp8 x fp8: a mixed pair at the fp8 entry's rate, tl_hw_pick_instr), both E8M0 scales fed
 *    to the instruction, nothing converted. bf16, a16w4, and the MX types elsewhere or in a kernel
 *    that converts them (dequant_instr > 0, or TL_MOE_MX_ACTS_BF16: tilelab's on sm_90 and gfx942)
 *    run bf16 x bf16. Weights stored otherwise than the instruction takes are converted in
 *    registers: at the kernel's dequant_instr, or, when it states none (the generic kernel), at
 *    the counts fitted to tilelab's conversion on the H200 (below; the only measured ones).
 *  - compute time of a work item = instructions issued (padded rows / m) * (N_blk / n) * (K_pad / k)
 *    * cycles, spread over the CU's matrix cores, at the preset clock, stretched by datasheet /
 *    measured of the dtype's matrix ceiling when a measured value is known.
 *  - memory of a wave = the larger of (a) its HBM bytes at the HBM read ceiling BW (measured when
 *    the preset has it, else datasheet), bytes charged to the work item that first touches them (an
 *    expert's weight block (tile_n x K) to its first tile, a tile's activations to its first
 *    n-block, outputs to every item; later touches hit L2/MALL), and (b) the bytes its items stream,
 *    cache hits included (each item loads its whole weight block and its tile's activation rows):
 *    misses at hw->hbm_per_cu_gbps and hits at hw->l2_per_cu_gbps per CU, for a items in parallel.
 *    One CU streams only its bytes in flight per load latency (Little's law), so a small grid
 *    cannot fill HBM, and a tile that re-reads cached weights is still bound by its own CU's
 *    stream. On the H200 both per-SM rates are fitted to 24 timings of a Triton fused-MoE stage
 *    (presets/hw/h200.json says which).
 *  - time per wave = max(HBM time of the wave, max(stream, compute of one item) + item_fixed_us):
 *    the fixed cost (prologue: the dependent loads of sorted ids and gathered rows; epilogue) sits
 *    on each CU's own timeline (one resident block per CU, as tiles that fill the LDS allow), while
 *    HBM is shared and stays busy with the other CUs' loads, so an HBM-bound wave hides it (except
 *    the first wave, whose CUs all start in step: it pays HBM time + fixed). Plus hw->launch_us
 *    once. fixed_us reports launch + the fixed costs not hidden.
 *  - The kernel's own geometry (tl_moe_problem's geometry fields; tl_moe_tilelab_kernel sets this
 *    project's kernels/moe.hip from contract/moe.h), with the preset's measured terms (each value
 *    and its measurement: presets/hw/h200.json; other presets leave them out and keep the rules
 *    above):
 *    * blocks_per_cu items are resident per CU, so a wave holds cus x blocks_per_cu items, and the
 *      items of a wave on one CU share its matrix cores (compute of a wave = items on the busiest CU
 *      x one item's compute).
 *    * inflight_kib: one item's stream = its bytes in flight / hbm_latency_us (on the H200 0.85 us,
 *      a loaded round trip: 16, 32 and 64 KiB in flight per SM stream 19, 38 and 76 GB/s).
 *      kernels/moe.hip keeps 32 KiB in flight per stage-1 block (8 warps x 32 lanes x 4 weight rows
 *      x 16-byte loads x 2 chunks; fp8: 32-byte loads x 1 chunk) and 16 KiB per stage-2 block
 *      (4 warps), so 64 KiB per SM in both stages. bf16 (both stages) and fp8 stage 1 switch lane
 *      layout per tile: a tile of at most 8 real rows (narrow_rows) loads more per lane than a
 *      fuller one (inflight_kib_wide), and the model charges each tile its own layout's stream.
 *    * prologue_loads > 0 (no cross-item prefetch): every wave pays prologue_loads x load_chain_us
 *      (its dependent loads: the sorted ids, and for fp8 then the activation scales staged in
 *      shared memory) + hbm_latency_us (the ramp-up: the first weight bytes arrive one loaded round
 *      trip after issue, and the HBM term assumes a full pipe) + item_fixed_us (epilogue), after the
 *      larger of its memory and compute time; nothing hides it. load_chain_us: one link of a chain
 *      of dependent loads (on the H200 0.33 us, a pointer chase).
 *    * Kernels: the first costs launch_us (on the H200 2.75 us: an event-timed graph of one empty
 *      kernel after the bench's flush), each further one of the stage next_kernel_us (0.74 us:
 *      graphs of 1-4 empty kernels). Stage 2 with combine_kernel writes fp32 partials (edges x
 *      hidden x 4 bytes) and a combine kernel reads them and writes tokens x hidden fp32:
 *      next_kernel_us + k x load_chain_us (a thread's k loads run one after another) + its bytes at
 *      the HBM ceiling. Stage 2 with requant_kernel (fp8, mxfp4, mxfp8: the op's Q2) first
 *      re-quantizes each routed row (read bf16; write fp8's E4M3 + fp32 scales per 128, the MX
 *      types' MXFP8, E4M3 + E8M0 per 32, or with TL_MOE_MX_ACTS_BF16 its round trip's bf16 values;
 *      in act_bytes), and the GEMM reads what it wrote: next_kernel_us + rounds x passes x
 *      load_chain_us + its bytes, where a row is a TL_MOE_QUANT_THREADS-thread block whose threads
 *      load 8 values each at once (passes = ceil(width / 8 / TL_MOE_QUANT_THREADS), 1 up to width
 *      2048) and reduce each scale group (128 or 32 values) by shuffles (no barrier),
 *      requant_rows_per_cu rows resident per CU, rounds = ceil(edges / (cus x requant_rows_per_cu)).
 *      extra_us reports both kernels.
 *    * weights_per_tile (an option; tl_moe_tilelab_kernel leaves it off, the CU's load stream below
 *      charges those re-reads instead): an expert's later tiles take as long as if their weights
 *      came from HBM again. The cost is time only: hbm_bytes counts each byte once.
 *    * dequant_instr: a16w4 weights, and mxfp4 and mxfp8 weights where the kernel multiplies BF16
 *      (every preset but gfx950's, TL_MOE_MX_ACTS_BF16), are turned into BF16 in registers, element
 *      by element, before the BF16 matrix instruction (kernels/moe.hip, weights_bf16). That work runs
 *      on the CU's vector units: an item's dequant time = its weight elements (tile_n x K) x
 *      dequant_instr / (vector_lanes_per_cu x clock_mhz, the preset's), added to its matrix
 *      compute. The instructions per element, set by tl_moe_tilelab_kernel, are fitted per dtype
 *      to 8 timings of bench/results/h200_moe_bench_<dtype>_run30.csv (both stages, M = 1, 8, 64,
 *      256): a16w4 6.75, mxfp4 8.0, mxfp8 16.25 (largest error 10.1%). Fitted, not derived from the
 *      instruction stream; AMD targets are not measured.
 *    * after_flush: the stage is timed right after a store pass of 256 MiB (`tilelab bench moe
 *      --flush write`), so the L2 starts full of dirty lines; the stage's loads write back
 *      min(its bytes read, flush_dirty_mb) to HBM first, at the read ceiling (writeback_us).
 *      flush_dirty_mb: on the H200 42.5 MB (a 470 MiB read after a store pass against one after a
 *      read pass).
 *    * Uneven expert loads (random, zipf or traced routing): the model charges the routing's own
 *      worklist, tile by tile, never an average expert: the busiest expert's extra tiles are work
 *      items of their own (with weights_per_tile each pays its weights' read time again), each tile
 *      streams at its own layout's rate (above), and the stage's last wave, where no item is left
 *      to take a freed slot, lasts as long as its slowest tile's items (a full wave charges its
 *      items' mean stream). Under balanced routing every tile is alike and these are the average.
 *      What it does not see: the kernel deals items n-block-major, so which tiles share the last
 *      wave differs from the model's tile-major walk.
 *    * cu_load_cap, the CU's load stream: every byte a CU's items load, L2 hits included, passes
 *      its load path at most hw->hbm_per_cu_gbps (the preset's per-SM stream, 55 GB/s on the
 *      H200, fitted to a Triton fused-MoE's timings; not re-fitted here), so a wave lasts at
 *      least (its items' streamed bytes on the busiest CU) / that rate. Where an expert's tiles
 *      are many (M >= 1024 on DeepSeek-V3.2), each item re-reads its tile's activation rows for
 *      every n-block (stage 1: 16 SwiGLU columns an item, so the rows are read 128 times) and the
 *      items of an expert's later tiles re-read its weights from L2: the stage is bound by these
 *      loads, not by HBM (measured on the H200 at M = 1024, bf16 and fp8, balanced and random
 *      routing, both stages: 6.4-7.4 TB/s of loads over the 132 SMs, about 55 GB/s an SM;
 *      bench/journal/moe-model.md). act_loads:
 *      stage 2's 4 warps each load the item's rows (split N), so its activation bytes count 4
 *      times. With this term an expert's later tiles hit L2 for their weights (weights_per_tile
 *      off): fp8's re-reads at M = 1024 (2.4 reads of each weight) take less time than HBM
 *      would.
 *    * Tile groups (tl_moe_tiles_per_item, contract/moe.h): bf16 items multiply 2 or 4 tiles of one
 *      expert (tile_m 32 or 64 in the model, whose worklist of tile_m rows gives the same items:
 *      ceil(ceil(c / 16) / g) = ceil(c / 16 g)); the group of 4 runs TL_MOE_GROUP_MINB blocks per SM.
 *    * The prefill kernel (bf16 stage 1 on sm_90: moe_prefill_s1, kernels/moe_prefill.hip; its
 *      geometry is contract/moe.h's TL_MOE_PF_*, tl_moe_tilelab_kernel_prefill sets it; which path
 *      runs: tl_moe_uses_prefill, same file). An item is (group of up to TL_MOE_PF_ROWS = 128 rows of
 *      one expert, 2 TL_MOE_PF_NB = 128 weight rows of W1 = 64 SwiGLU columns): the model's tile_m =
 *      128 (its worklist of 128-row tiles gives exactly the kernel's groups, ceil(c / 128) an expert,
 *      each expert's own count under random routing) and tile_n = 128; one block an SM, so a wave is
 *      132 items, dealt group-major as the grid's x = n-block runs fastest. Charged per wave, as a
 *      pipeline (the copies of later K steps overlap the products of earlier ones):
 *      max(an item's tensor time, its copy stream, the wave's first reads at the HBM ceiling) + the
 *      wave gap, where
 *      - tensor time (wgmma, the problem's wgmma field): 2 x 128 x 128 x K flops an item (all 128
 *        rows, padding included) at the preset's bf16 ceiling over its SMs. Measured on the h100
 *        preset (876.2 TFLOP/s, tilelab's wgmma m64n256k16 loop on the H100); the h200 preset's
 *        measured value is cuBLAS's 8192^3 GEMM (795), below the H200's own wgmma loop (917,
 *        bench/results/h200_prefill_roofline_run52.txt), so its tensor time may be 15% long. Not
 *        the bound at DeepSeek-V3.2's shapes (35.4 us an item on the h100 preset, against 152 us of
 *        copies).
 *      - copy stream (cu_load_cap at load_cap_gbps): every byte a step lands in shared memory: the
 *        gathered activation rows, the group's real ones only (its producer copies no padding
 *        row: pad_loads 0), and the 128 weight rows, at the
 *        preset's async_copy_per_cu_gbps (24.1 GB/s an SM: measured on the H200 with the paged
 *        decode kernel's cp.async rings, not with this kernel; the h100 preset carries it
 *        unmeasured). Bulk copies (TL_MOE_PF_CP_ASYNC 0) would stream at hbm_per_cu_gbps (55), a
 *        guess. Against the kernel on an H100 (DeepSeek-V3.2, random routing, seed 1; predictions
 *        committed before the timings: bench/results/h100_moe_prefill_bench_on_run55.csv,
 *        h100_moe_bench_bf16_random_run57.csv): -6.4% at M = 1024, +5.2% to +13.9% at 2048-8192,
 *        no constant fitted to those times; the kernel lands 25-27 GB/s an SM, and Nsight Compute
 *        puts it at 94.7% of the L2's throughput at M = 4096 (h100_moe_ncu_prefill_M4096_run56.txt).
 *      - HBM: the wave's first reads (each (expert, n-block) weight slice by the expert's first
 *        group, each token's row once) at the read ceiling; later groups' reads hit L2.
 *      - wave gap (prologue_loads; nothing hides it: one block an SM, no cross-item prefetch): the
 *        group scan's dependent loads (half of ceil(E / 32), rounded up: 4 for E = 256), the
 *        expert's tile offset and the group's sorted ids: 6 x load_chain_us; the first step's round
 *        trip (hbm_latency_us); the epilogue (item_fixed_us): 3.3 us on both sm_90 presets.
 *      The rule's switch (TL_MOE_PF_MIN_ROWS = 56 expected rows per expert, M k / E) is where the two
 *      paths' models cross, on the h100 and h200 presets alike (tests/test_sim_moe.c): DeepSeek-V3.2
 *      from M = 1792, Kimi-K2.6 from M = 2688.
 *      Stage 2 (moe_prefill_s2, contract/moe.h's TL_MOE_PF2_*): the same terms with tile_n =
 *      TL_MOE_PF2_NB = 128 output columns (rows of W2) and K = width / tp, except:
 *      - copy stream: the copies are tensor copies (the copy engine, no gather), charged at the
 *        preset's hbm_per_cu_gbps: a guess (the rate TL_MOE_PF_CP_ASYNC 0 names for stage 1; no
 *        bulk-copy rate of this kernel has been measured). The activation boxes land whole
 *        (pad_loads = TL_MOE_PF2_ABOX = 64: a group's rows rounded up to 64, at most 128).
 *      - wave gap: the scan's loads and the expert's tile offset only (prologue_loads 5 for E =
 *        256): the computing threads read their rows' edge ids and top-k weights beside the first
 *        step's copies.
 *      - the combine kernel after it (combine_kernel), as after moe_gemm: the float32 rows of every
 *        edge written, then read and summed per token.
 *      The rule (TL_MOE_PF2_MIN_ROWS = 32 rows per expert at a width of at least
 *      TL_MOE_PF2_LONG_K = 1024, TL_MOE_PF2_MIN_ROWS_SHORT = 80 below) is where the models cross:
 *      at full width between r = 24 and 40 (DeepSeek-V3.2 M = 1024 on both presets, Kimi-K2.6
 *      M = 1536, 7% slower than moe_gemm on the h100 preset and 18% faster on the h200 one), at
 *      TP8 between r = 64 and 96 (the short K: 4 steps an item, so the wave gap weighs).
 *      fp8 (moe_prefill_fp8, contract/moe.h's TL_MOE_PF8_*; simulator/moe.c's prefill_fp8): the
 *      same items and terms, K steps of 128 E4M3 values, the tensor time at the preset's
 *      wgmma_fp8_tflops (m64n128k32 E4M3), the copy stream split by path: what the copy engine
 *      lands (stage 1's weights: load_cap_w_gbps; all of stage 2, in whole TL_MOE_PF2_ABOX boxes)
 *      at hbm_per_cu_gbps, stage 1's gathered rows (and, with tl_moe_fp8_tma_off, everything, the
 *      real rows only) at async_copy_per_cu_gbps; both stages' prologue as bf16 stage 1's. Its rule
 *      is contract/moe.h's TL_MOE_PF8_MIN_ROWS / TL_MOE_PF8_2_MIN_ROWS(_SHORT). Against the H100
 *      (MoE 61, predictions committed first: bench/results/h100_moe_sim_fp8_prefill{,_tma}_run61.csv):
 *      -19.9% to +14.3% for the tensor-copy form at M = 1024-8192, -22.5% to +2.3% for cp.async's.
 *    tests/test_sim_vs_h200.c holds these terms to 15% of the kernel measured on the H200 for
 *    M <= 1024, balanced and random routing (every committed bench file; M = 1024 within 10%);
 *    M = 4096 is printed, not asserted (its committed rows timed moe_gemm's group 2, which the test
 *    models: tl_moe_tilelab_kernel_gemm).
 *  - limiter, in this order: "fixed" when launch + fixed costs exceed half the time; "tail" when
 *    there are 2+ waves, the last is under half full and costs over 25% of the time; "hbm" when
 *    memory-bound waves (HBM ceiling or the CUs' own streams) take at least as long as
 *    compute-bound ones, "loads" instead when most of that time is waves the CU's load path
 *    bounds (cu_load_cap: loads that L2 serves, not HBM); "padding" when compute bounds and flops_issued >= 2 x flops_useful (a
 *    tile's compute, its matrix work and any conversion of its weights, serves at most half as
 *    many real rows as it could: seed 000 Table 3's word for a16w4 at low M, where the conversion
 *    is most of that compute); "dequant" when compute bounds on fuller tiles and most of the
 *    compute is the weights' conversion; else "matrix".
 *
 * Ignored by the model (and stated so): L2/MALL capacity (every re-read of weights and activations
 * after the first is assumed to hit; on the H200 at M = 1024, where each expert has two 16-row
 * tiles whose items run side by side, the second read mostly misses: fp8 stage 1 and both stage-2
 * types are under-predicted by about 35%); the order the kernel deals its items in (kernels/moe.hip
 * deals n-block-major, the model tile-major; totals are the same, the per-wave mix is not); the
 * grid's empty blocks beyond the real tiles; LDS capacity and occupancy; instruction issue, address
 * arithmetic and waits; the VALU work of block scaling, of the SwiGLU and of the combine (the
 * weights' conversion is dequant_instr's); clock throttling under load; atomic contention in the
 * combine; routing (top-k/softmax) and the sort kernel's own time; TP all-reduce; imbalance
 * inside a CU (its matrix cores are all busy).
 */
#ifndef TL_SIM_MOE_H
#define TL_SIM_MOE_H

#include "../contract/moe.h"
#include "../contract/worklist.h"
#include "hw.h"
#include "model.h"
/* Instruction input dtypes the generic kernel, which feeds weights as stored, runs this data type on
 * for hw: "fp8" for fp8 where the arch has FP8 instructions; "fp4" for mxfp4 and "fp8" for mxfp8
 * where it has the scaled f8f6f4 ones (gfx950: E8M0 scales fed to the instruction, activations
 * quantized to the weights' MX format: the seed's MX path); otherwise "bf16" (a16w4, and the MX
 * types elsewhere: weights converted in registers). A kernel with dequant_instr > 0 or
 * TL_MOE_MX_ACTS_BF16 runs BF16; with TL_MOE_MX_ACTS_E4M3 (tilelab's on gfx950) A is "fp8" (the
 * activations' E4M3 codes) and B these. */
void tl_moe_instr_dtypes(const tl_hw *hw, tl_moe_dtype d, const char **a, const char **b);

/* How a kernel takes the MX types' activations (MXFP8 in the op: contract/moe.h); tl_moe_problem's
 * mx_acts, read for mxfp4 and mxfp8 only. */
typedef enum {
    TL_MOE_MX_ACTS_DEFAULT = 0, /* the generic kernel's: the instruction tl_moe_instr_dtypes names;
                                   stage 1 reads them as the contract stores them (1 + 1/32 bytes an
                                   element), stage 2 the bf16 buffer or, with requant_kernel, its
                                   MXFP8 re-quantization */
    TL_MOE_MX_ACTS_E4M3,        /* their E4M3 codes are the scaled f8f6f4 instruction's A operand,
                                   the weights' codes its B, both E8M0 scales fed to it (the preset
                                   must have it: gfx950); nothing converted (dequant_instr unused);
                                   1 + 1/32 bytes an element in stage 1 and, re-quantized, in stage
                                   2 (tilelab's kernel on gfx950) */
    TL_MOE_MX_ACTS_BF16         /* their exact BF16 values on the BF16 instruction, the weights
                                   converted in registers (dequant_instr); 2 bytes an element in
                                   stage 1, and stage 2's re-quantization writes the MXFP8 round
                                   trip's BF16 values (2 bytes) for the GEMM (tilelab's kernel on
                                   sm_90 and gfx942) */
} tl_moe_mx_acts_mode;

typedef struct {
    const tl_hw *hw;
    const tl_model *model;
    tl_moe_dtype dtype;
    int tokens;          /* M >= 1 */
    int stage;           /* 1 or 2 */
    tl_routing routing;
    uint64_t seed;       /* for random / zipf routing */
    int tile_m;          /* 16, 32, 64 or 128 (any multiple of the instruction's M is accepted) */
    int tile_n;          /* output columns per work item; 0 = default (128) */
    int tp;              /* tensor-parallel split of the expert width, >= 1, must divide it */
    int want_schedule;   /* nonzero: fill result->items (costs memory per work item) */
    double cu_gbps;      /* the modelled kernel's per-CU HBM stream (bytes in flight / latency);
                            0 = the preset's hbm_per_cu_gbps; the L2-hit rate scales with it */
    /* The kernel's geometry beyond its tile (all 0 = the generic kernel described above; for this
     * project's kernels/moe.hip, tl_moe_tilelab_kernel fills them): */
    int blocks_per_cu;   /* work items resident on one CU at once (0 = 1): a wave holds cus x this */
    double inflight_kib; /* KiB of loads one work item keeps in flight; with the preset's
                            hbm_latency_us it sets the per-item stream (overrides cu_gbps) */
    int narrow_rows;     /* > 0 (with inflight_kib_wide): inflight_kib is that of the items of tiles
                            of at most this many real rows, and the items of fuller tiles keep */
    double inflight_kib_wide; /* this many KiB in flight (the kernel's other lane layout) */
    int prologue_loads;  /* > 0: the items do not prefetch across items, and each item's weight stream
                            starts after this many dependent DRAM round trips (ids -> rows / scales);
                            every wave pays (prologue_loads + 1) x hbm_latency_us + item_fixed_us */
    int combine_kernel;  /* stage 2: the GEMM writes fp32 partials per routed row and a separate
                            kernel sums each token's k rows (deterministic combine) */
    int requant_kernel;  /* fp8, mxfp4, mxfp8 stage 2: a separate kernel re-quantizes the bf16
                            activations (one row per block) before the GEMM: fp8 to E4M3 in 1x128
                            groups, the MX types to MXFP8 (stored as mx_acts says) */
    int requant_rows_per_cu; /* rows that kernel keeps resident per CU (0 = 1) */
    tl_moe_mx_acts_mode mx_acts; /* mxfp4, mxfp8: how the kernel takes their activations (above) */
    int weights_per_tile; /* each of an expert's tiles pays the time of reading its weights from
                            HBM, not only its first (an option, off for this project's kernel; see
                            above); the cost is time only: hbm_bytes still counts each byte once */
    double dequant_instr; /* instructions a lane issues per weight element that the kernel turns
                            into BF16 in registers before its matrix instruction (> 0: the BF16
                            instruction; 0: the weights go to the matrix cores as stored where the
                            arch's instructions take them, else at the measured counts). They run at the preset's
                            vector_lanes_per_cu lane-instructions per clock and add to an item's
                            compute; see the dequantization paragraph above */
    int vector_rows;     /* the kernel multiplies each real row on the vector units (moe_gemv_down:
                            a dot product per weight row in fp32 FMAs): no matrix instruction, no
                            padding rows, no K padding; the result's instruction says so and its
                            flops_issued are the useful ones. Its FMAs are not charged as time: at
                            one row a tile they are 1 flop per weight byte (bf16), a fraction of
                            any vector unit's flops per HBM byte */
    int after_flush;     /* the stage is timed right after a store pass over more than the L2 (as
                            `tilelab bench moe --flush write` flushes it, kernels/bench.hip): the L2
                            starts full of dirty lines, which its loads write back to HBM first */
    int cu_load_cap;     /* > 0: a CU's loads, L2 hits included, stream at most hw->hbm_per_cu_gbps
                            in all (its resident items share it); see "the CU's load stream" above */
    int act_loads;       /* times an item loads its tile's activation rows (0 = 1): tilelab's stage 2
                            splits N over 4 warps, each of which loads the rows over the whole K */
    int n_shared;        /* shared experts (the model's n_shared; 0 = none), each width / tp wide: an
                            expert every token routes to, after its k routed ones (ids E..E+n_shared-1,
                            top-k weight 1), so its tiles, bytes and FLOPs join the stage's. Routed
                            experts' tiles are those of n_shared = 0, unchanged */
    int wgmma;           /* sm_90 only: the items multiply by wgmma m64 n(tile_n) k16 bf16 from shared
                            memory (tile_m a multiple of 64, tile_n of 8 up to 256), charged 2 x
                            tile_m x tile_n x K_padded flops an item at the preset's bf16 ceiling
                            (measured, else datasheet) over its SMs; see "the prefill kernel" above */
    double load_cap_gbps; /* cu_load_cap's rate per CU (0 = hw->hbm_per_cu_gbps): the prefill
                            kernel's cp.async copies (stage 1) stream at hw->async_copy_per_cu_gbps,
                            its tensor copies (stage 2) at hw->hbm_per_cu_gbps */
    double load_cap_w_gbps; /* the weights' share of that stream at its own rate (0 = load_cap_gbps):
                            fp8 stage 1's prefill kernel lands its weights by tensor copies and
                            its gathered rows by cp.async */
    int pad_loads;       /* the items' copies land their tile's padding rows too (zero-filled): 1:
                            the bytes they stream count tile_m activation rows, not the real ones;
                            above 1: the real rows rounded up to whole boxes of pad_loads rows (at
                            most tile_m) */
    const char *kernel;  /* the kernel this geometry models (static string; set by
                            tl_moe_tilelab_kernel*: "moe_gemm", "moe_gemv_down", "moe_prefill_s1",
                            "moe_prefill_s2");
                            NULL = the generic kernel */
} tl_moe_problem;

/* One work item of the schedule (for the timeline picture). */
typedef struct {
    int tile, n_block;
    int cu, xcd, wave;
    int expert;
    int rows;            /* real rows of the tile */
    double start_us, end_us;
} tl_moe_item;

typedef struct {
    int tokens, stage;
    int n_experts, top_k, N, K, K_padded; /* routed experts, k, and the GEMM each tile computes */
    int n_shared;        /* shared experts included (each routes every token: tokens more edges) */
    int tile_m, tile_n;
    tl_instr instr;      /* the instruction chosen */
    int active_experts;
    int tiles;
    int n_blocks;        /* n-blocks per tile */
    long long work_items;
    int waves;
    double padding;      /* rows computed / real rows (tokens * k) */
    double k_padding;    /* K_padded / K */
    double flops_useful, flops_issued;
    /* HBM bytes, exact integers: counted from element and scale counts as stored (contract/moe.h's
     * storages, partial scale blocks whole), not from fractional bytes per element; hbm_bytes is
     * their sum. The time terms charge each work item its share at bytes per element. */
    double weight_bytes, act_bytes, out_bytes, meta_bytes, hbm_bytes;
    double intensity;    /* flops_useful / hbm_bytes */
    double compute_us, memory_us, fixed_us, time_us;
    double tail_us;      /* time of the last wave */
    double extra_us;     /* time of the stage's other kernels (combine, re-quantization), in time_us */
    double writeback_bytes, writeback_us; /* after_flush: dirty L2 lines written back, in time_us */
    int kernels;         /* kernels the stage launches */
    double bw_gbps;      /* the full-GPU bandwidth used */
    double matrix_tflops;/* the instruction rate used (measured-scaled) */
    const char *limiter; /* "hbm", "loads", "matrix", "padding", "dequant", "fixed", "tail" (static string) */
    double dequant_us;   /* of compute_us: the weights' conversion to BF16 (dequant_instr) */
    const char *kernel;  /* the problem's kernel: "generic" when it names none */
    tl_moe_item *items;  /* work_items entries when want_schedule, else NULL */
} tl_moe_result;

/* Sets p's tile and geometry fields (tile_m, tile_n, blocks_per_cu, inflight_kib, prologue_loads,
 * combine_kernel, requant_kernel, requant_rows_per_cu, weights_per_tile, vector_rows, dequant_instr,
 * narrow_rows, inflight_kib_wide, cu_load_cap, act_loads, wgmma, load_cap_gbps, load_cap_w_gbps, pad_loads, mx_acts,
 * kernel) to those of this project's fused MoE kernel (kernels/moe.hip, as built for sm_90) for p->dtype,
 * p->stage, p->tokens and p->model; the other fields are left alone. The geometry comes from
 * contract/moe.h (TL_MOE_TILE_M, S1_NB, NCOLS, S1/S2_THREADS, S1/S2_MINB, QUANT_THREADS, GEMV_*,
 * tl_moe_uses_gemv, tl_moe_gemv_geometry), which the kernel is built with. What the contract does
 * not name is mirrored from kernels/moe.hip by hand and changes with it: Fmt<>::U and the load
 * widths, the tile pairing rule, the prologue's dependent loads, moe_quant_act's blocks per SM.
 * Which kernel, as kernels/moe.hip picks it: bf16 stage 1 runs moe_prefill_s1 and stage 2
 * moe_prefill_s2, fp8 both stages moe_prefill_fp8 (sm_90a's wgmma kernels,
 * tl_moe_tilelab_kernel_prefill; p->kernel "moe_prefill_fp8_s1" / "_s2") where
 * tl_moe_uses_prefill (contract/moe.h) says so and
 * p->hw is an sm_90 preset (kernels/moe.hip: a build with wgmma on a compute capability 9 device);
 * everything else moe_gemm / moe_gemv_down with tl_moe_tiles_per_item's group. No other preset
 * (mi300x, mi355x) and no p->hw (NULL) gets the prefill kernel. p->kernel names the one chosen.
 * The MX types: on a preset with the scaled f8f6f4 instruction (gfx950) TL_MOE_MX_ACTS_E4M3, no
 * conversion (dequant_instr 0); elsewhere, and with no p->hw, TL_MOE_MX_ACTS_BF16 with the weights'
 * conversion; their stage 2 re-quantizes its input in its own kernel (requant_kernel) everywhere.
 * TL_EUSAGE when p or its model is NULL. */
int tl_moe_tilelab_kernel(tl_moe_problem *p);
/* The same with `group` tiles of one expert per work item (1, 2 or 4; above 1 bf16 only) in place
 * of the kernel's own choice, tl_moe_tiles_per_item: for weighing the choices against each other
 * (tests/test_sim_moe.c holds the kernel's choice to the fastest of them). TL_EUSAGE otherwise. */
int tl_moe_tilelab_kernel_group(tl_moe_problem *p, int group);
/* moe_gemm (or, for bf16 stage 2 at one token, moe_gemv_down) with the kernel's own tile group,
 * never the prefill kernel: the other path of tl_moe_uses_prefill's choice. */
int tl_moe_tilelab_kernel_gemm(tl_moe_problem *p);
/* moe_prefill_s1 (p->stage 1) or moe_prefill_s2 (stage 2), bf16, or moe_prefill_fp8 (either
 * stage), fp8, on an sm_90 preset (see "the prefill kernel" above). TL_EUSAGE when p, its model or
 * hw is NULL, the preset is not sm_90, or the shape does not fit the kernel (tl_moe_prefill_fits:
 * bf16 or fp8; bf16 stage 1 hidden % TL_MOE_PF_KCHUNK, width / tp % TL_MOE_PF_NB; bf16 stage 2
 * width / tp % TL_MOE_PF_KSTEP, hidden % TL_MOE_PF2_NB; fp8 K % TL_MOE_PF8_KSTEP and the n-block). */
int tl_moe_tilelab_kernel_prefill(tl_moe_problem *p);

/* Sets what the generic kernel (the geometry fields left 0) does beyond its tile: fp8's stage 2
 * re-quantizes its input (the op's Q2, contract/moe.h) in a kernel of its own (requant_kernel), as
 * the block-scaled two-stage paths do (tilelab's, and seed 000 Table 3's, whose fixed overhead at
 * low M it names block scaling); nothing else (the MX types' Q2 is the seed's MX path's in-kernel
 * quantization, uncharged: mx_acts 0). TL_EUSAGE when p is NULL. */
int tl_moe_generic_kernel(tl_moe_problem *p);

/* Limits of one run: waves of work items it walks, and work items it keeps a schedule of. */
#define TL_MOE_MAX_WAVES (1LL << 24)
#define TL_MOE_MAX_SCHEDULE (1LL << 22)

/* Runs the model. Errors (TL_EUSAGE): NULL hw/model, tokens < 1 or > 2^31 - 1, stage not 1 or 2,
 * tp < 1 or not dividing the width, tile_m the instruction cannot use, E or k = 0, k > E, a dtype the
 * hw cannot run at all, n_shared outside [0, 16], tokens * (k + n_shared) too
 * large, more than TL_MOE_MAX_WAVES waves, or (want_schedule)
 * more than TL_MOE_MAX_SCHEDULE work items. TL_EFAIL on allocation failure. On success the caller
 * frees with tl_moe_result_free. Cost: O(M*k + E + tiles + waves), plus O(work items) time and
 * memory when want_schedule; `tilelab bench sim` (3360 runs up to M = 8192) takes about 0.16 s. */
int tl_moe_sim(const tl_moe_problem *p, tl_moe_result *r);
void tl_moe_result_free(tl_moe_result *r);

/* Routes and builds the worklist the simulation uses for p (same seed, same order; with p->n_shared
 * shared experts, k + n_shared slots a token over E + n_shared experts): for pictures that draw
 * tiles. Caller frees with tl_worklist_free. */
int tl_moe_worklist(const tl_moe_problem *p, tl_worklist *wl);

#endif
