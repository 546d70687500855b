/* Hardware presets: one GPU's compute units, caches, memory, ceilings and matrix instructions.
 *
 * A preset is a JSON file under presets/hw/ (compiled into the binary) or a user's own file of the
 * same shape. Every hardware number the simulator uses comes from here; nothing is typed into code.
 *
 * JSON shape (the keys the loader reads; any other key, in a preset or an overlay, is an error that
 * names it and its file, so that a typo cannot pass unseen):
 *   name, arch ("gfx950" | "gfx942" | "sm_90"), cus, xcds, clock_mhz, wave_size,
 *   matrix_cores_per_cu, lds_kib, l2_mib_per_xcd, llc_mib, hbm_gb, launch_us, item_fixed_us,
 *   hbm_per_cu_gbps, l2_per_cu_gbps (optional), async_copy_per_cu_gbps (optional),
 *   hbm_latency_us, load_chain_us, next_kernel_us,
 *   flush_dirty_mb (optional), transcendental_per_cu_clk (optional), lds_bytes_per_cu_clk
 *   (optional), wgmma_bf16_tflops and wgmma_fp8_tflops (optional), gemm_bf16_tflops and
 *   gemm_fp8_tflops (optional), allreduce_us (optional), description (optional),
 *   "ceilings": { "hbm_read_gbps": {"datasheet": 8000, "measured": 6271.2},
 *                 "hbm_copy_gbps": {"measured": 6068.8},
 *                 "bf16_tflops" | "fp8_tflops" | "fp6_tflops" | "fp4_tflops": {...} }
 *     (a ceiling an arch lacks is omitted; either of datasheet/measured may be absent; a value
 *     is 0 = absent, or in [0.001, 1e9]),
 *   "matrix_instructions": [ {"name": "v_mfma_f32_16x16x32_bf16", "m": 16, "n": 16, "k": 32,
 *                             "a": "bf16", "b": "bf16", "cycles": 16}, ... ]
 *     (an instruction may carry "measured_tflops": what a loop of it alone reached on the device,
 *     where that differs from the format's ceiling, e.g. sm_90's mma.sync against cuBLAS's wgmma)
 *     dtype names: "bf16", "f16", "fp8", "fp6", "fp4", "f32", "f64" ("fp8" covers e4m3/e5m2 and
 *     their FNUZ forms on gfx942); "cycles" = cycles one matrix core is busy per instruction.
 *   Overlay files (written by `tilelab bench roofline --save`) also carry "device", "date",
 *   "source"; they may hold only "ceilings". Kept but not read: "clock_note", "link_note",
 *   "rates_note" and "step_note" (notes), and what bench roofline records of its run ("clocks", "label", "mma", "memcpy_gbps", "configurations");
 *   a ceiling may carry "unit" and an instruction "peak_tflops" (as `hw show --format json`
 *   writes them, so that its output loads back).
 *
 * Units: clock in MHz, bandwidth in GB/s (10^9 B/s), compute in TFLOP/s (10^12), times in
 * microseconds, capacities as named (KiB, MiB, GB).
 */
#ifndef TL_SIM_HW_H
#define TL_SIM_HW_H

#include "../core/tl.h"

#define TL_HW_MAX_INSTR 32
#define TL_HW_NAME_LEN 64

/* One ceiling; 0 means "not known". */
typedef struct {
    double datasheet;
    double measured;
} tl_ceiling;

typedef struct {
    tl_ceiling hbm_read_gbps;
    tl_ceiling hbm_copy_gbps;
    tl_ceiling bf16_tflops;
    tl_ceiling fp8_tflops;
    tl_ceiling fp6_tflops;
    tl_ceiling fp4_tflops;
} tl_hw_ceilings;

/* One matrix-core instruction: D[m x n] += A[m x k] * B[k x n] on one matrix core. */
typedef struct {
    char name[TL_HW_NAME_LEN];
    int m, n, k;
    char a[8], b[8]; /* input dtypes, see above */
    int cycles;      /* matrix-core cycles per instruction */
    double measured_tflops; /* a loop of this instruction alone, whole GPU (0 = not measured) */
} tl_instr;

typedef struct {
    char name[TL_HW_NAME_LEN];  /* "mi355x" */
    char description[128];
    char arch[16];              /* "gfx950" | "gfx942" | "sm_90" */
    int cus;                    /* compute units (AMD) or SMs (NVIDIA) */
    int xcds;                   /* chiplets whose L2 is private; 1 on a monolithic GPU */
    double clock_mhz;           /* the engine clock the datasheet peaks assume */
    int wave_size;              /* 64 on CDNA, 32 (warp) on NVIDIA */
    int matrix_cores_per_cu;
    int vector_lanes_per_cu;    /* lanes of vector (non-matrix) instructions a CU issues per clock:
                                   128 on the H200 (4 schedulers x 32), 64 on CDNA (4 SIMDs x 16);
                                   optional in a preset, else wave_size x matrix_cores_per_cu */
    double lds_kib;             /* per CU */
    double l2_mib_per_xcd;
    double llc_mib;             /* MALL / Infinity Cache; 0 when none */
    double hbm_gb;
    double launch_us;           /* fixed cost of one kernel launch (plus its first wave's ramp) */
    double item_fixed_us;       /* fixed cost per work item of a GEMM-like kernel: pipeline fill
                                   (first loads' latency) and epilogue; an estimate */
    double hbm_per_cu_gbps;     /* the most one CU/SM streams from HBM on its own (Little's law:
                                   bytes in flight / latency) */
    double l2_per_cu_gbps;      /* the same for loads that hit L2 (shorter latency, same bytes in
                                   flight); defaults to hbm_per_cu_gbps when absent */
    double async_copy_per_cu_gbps; /* the most one CU/SM streams from HBM into shared memory
                                   through asynchronous 16-byte copies (sm_80+ cp.async), with more
                                   bytes in flight than Little's law asks (optional; 0 = no limit
                                   of its own: hbm_per_cu_gbps) */
    double hbm_latency_us;      /* a load's round trip while the memory streams (optional; 0 =
                                   unknown): bytes in flight / stream rate (Little's law) */
    double load_chain_us;       /* one link of a chain of dependent loads on an idle memory system
                                   (pointer chase; optional, 0 = hbm_latency_us) */
    double next_kernel_us;      /* each further dependent kernel of one graph or stream, beyond the
                                   first one's launch_us (optional, 0 = launch_us) */
    double flush_dirty_mb;      /* MB of dirty lines a store pass larger than the L2 leaves there,
                                   written back by the next kernel's loads (optional, 0 = the L2) */
    double link_gbps;           /* GPU-to-GPU bandwidth out of one GPU, one direction, all peers
                                   together (GB/s; optional, 0 = unknown): xGMI / NVLink */
    double link_peer_gbps;      /* the same to one peer (a full mesh: one link's; through a switch:
                                   link_gbps); optional, 0 = link_gbps */
    double transcendental_per_cu_clk; /* float32 exp2 (and the other transcendentals) one CU / SM
                                   returns per clock (optional, 0 = unknown): NVIDIA's SFU
                                   (MUFU), AMD's quarter-rate VALU transcendentals */
    double lds_bytes_per_cu_clk; /* bytes the LDS / shared memory of one CU / SM reads per clock
                                   (optional, 0 = unknown) */
    double wgmma_bf16_tflops;   /* sm_90: what a loop of wgmma m64n256k16 bf16 alone reached, whole
                                   GPU, TFLOP/s (`tilelab bench roofline`'s tl_roofline_wgmma_bf16;
                                   optional, 0 = unknown). The prefill model's matrix rate; kept
                                   apart from ceilings.bf16_tflops, which a preset may fill with a
                                   library GEMM's rate */
    double wgmma_fp8_tflops;    /* the same for wgmma m64n256k32 e4m3 (tl_roofline_wgmma_fp8) */
    double gemm_bf16_tflops;    /* the dense-GEMM peer: a vendor library's (cuBLAS / hipBLASLt through
                                   torch) best large bf16 GEMM, whole GPU, TFLOP/s (optional, 0 =
                                   unknown: simulator/gemm.h says what it charges then) */
    double gemm_fp8_tflops;     /* the same for its FP8 GEMM (torch._scaled_mm) */
    double allreduce_us;        /* one small all-reduce across the GPUs of one node (a few KB: the
                                   latency, not the bytes), as a serving engine's graph runs it
                                   (optional, 0 = unknown: simulator/step.h charges the link bytes
                                   alone then) */
    int vgprs_per_simd;         /* AMD: VGPRs (arch and AGPR, unified) a lane of one SIMD holds for all
                                   its waves (512 on gfx90a and later; optional, 0 = not AMD) */
    int sgprs_per_simd;         /* AMD: SGPRs one SIMD holds for its waves (800; optional) */
    int waves_per_simd;         /* AMD: the most waves one SIMD holds (8 on gfx942 / gfx950; optional) */
    tl_hw_ceilings ceilings;
    tl_instr instr[TL_HW_MAX_INSTR];
    int n_instr;
    /* from the last overlay that carried them ("" when none) */
    char device[128];
    char date[64];
    char source[4096];
} tl_hw;

/* Loads spec into *out. spec is a preset name ("mi355x"), a path to a JSON file, or a
 * comma-separated list whose first item is the base (name or path) and whose other items are
 * overlay files merged over it key by key (objects merge recursively; arrays and scalars replace).
 * Errors (TL_EUSAGE, one line): unknown preset (the message lists the known ones), unreadable
 * file, malformed JSON (file, line and column), missing or out-of-range field (names it).
 * Cost: parses each file once; microseconds. *out is plain data: nothing to free. */
int tl_hw_load(const char *spec, tl_hw *out);

/* The preset names compiled into the binary, NULL-terminated, sorted ("h100", "h200", "mi300x",
 * "mi355x"). Static storage; do not free. */
const char *const *tl_hw_list(void);

/* The preset of a GPU from the name its driver reports ("NVIDIA H100 80GB HBM3" -> "h100", "AMD
 * Instinct MI355X" -> "mi355x"), or NULL when no preset describes it. */
const char *tl_hw_for_device(const char *device_name);

/* The ceiling's best-known value: measured when present, else datasheet, else 0. */
double tl_ceiling_value(tl_ceiling c);

/* Peak rate of one instruction over the whole GPU in TFLOP/s:
 * 2*m*n*k * matrix_cores_per_cu * cus * clock / cycles. */
double tl_hw_instr_tflops(const tl_hw *hw, const tl_instr *in);

/* Picks the instruction for inputs a_dtype x b_dtype and a tile of tile_m rows: among the
 * instructions whose (a, b) match and whose m divides tile_m, the fastest per FLOP, ties broken by
 * the larger m, then the smaller k. Mixed FP8/FP6/FP4 pairs on gfx950 match the f8f6f4
 * instructions (listed there with a = b = the slower of the two; "fp8" x "fp4" looks up "fp8").
 * Returns TL_EUSAGE with a message when no instruction fits ("gfx942 has no fp4 instruction",
 * "tile height 8 is not a multiple of any bf16 instruction's M (16, 32)"). */
int tl_hw_pick_instr(const tl_hw *hw, const char *a_dtype, const char *b_dtype, int tile_m,
                     tl_instr *out);

/* True when hw has any instruction with inputs of this dtype. */
int tl_hw_has_dtype(const tl_hw *hw, const char *dtype);

#endif
