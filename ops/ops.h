/* ops/ops.h: what the op rows share (the rows themselves: ops/OP.c; the table: ops/ops.c). */
#ifndef TL_OPS_H
#define TL_OPS_H

#include <stdio.h>

#include "../core/op.h"
#include "../core/opts.h"
#include "../kernels/bench.h"

/* "--seed": an unsigned decimal integer in [0, 2^64) (tl_scan_u64: no sign, no hex, no blanks); TL_EUSAGE otherwise. */
int tl_ops_parse_seed(const char *val, uint64_t *seed);

/* Routed rows (tokens x k) one simulated worklist may hold, and all of one command's worklists
 * together (`sim moe`, `draw moe-tiles`, `draw timeline`): about 1 s per 2^24 rows on one core
 * (zipf routing: 4 s at a mild S, up to ~18 s at a steep one such as zipf:100, measured in the
 * release build), ~12 bytes of memory each. */
#define TL_OPS_MAX_EDGES (1L << 24)
#define TL_OPS_MAX_EDGES_TOTAL (1L << 25)
/* Adds the worklist of `tokens` tokens x k routed rows, simulated `passes` times (stages), to
 * *total. TL_EUSAGE (recorded, naming --tokens) when one worklist exceeds TL_OPS_MAX_EDGES or
 * *total exceeds TL_OPS_MAX_EDGES_TOTAL. */
int tl_ops_add_routed_rows(long tokens, int k, int passes, long long *total);

/* A bench trace file (`bench OP --trace FILE.csv`), written atomically (core/tl.h's tl_atomic):
 * opened with its header line when the command is parsed, so that a bad name fails before minutes
 * of timing; rows appended to f; committed after the last case; removed by tl_ops_trace_abort
 * when the run stops before. path NULL: no trace. */
typedef struct {
    const char *path;
    tl_atomic a;
    FILE *f;
} tl_ops_trace;
/* TL_EUSAGE naming the file when it cannot be written. */
int tl_ops_trace_open(tl_ops_trace *t, const char *header);
/* Closes and renames it over path (0 when none is open); TL_EFAIL "<path>: cannot write the trace:
 * <reason>" on an I/O error (none is left). */
int tl_ops_trace_commit(tl_ops_trace *t);
/* Closes and removes the temporary file, if one is open. */
void tl_ops_trace_abort(tl_ops_trace *t);

/* Where and when a bench row is measured: "<device name> <UTC date>" of GPU 0, commas turned to
 * spaces (it is one CSV field). Needs a GPU build (tl_gpu_kernels); the query's status otherwise. */
int tl_ops_measured_where(char *where, size_t n);
/* Fills *w (cleared first) with a case's part: the work the op counts (useful FLOPs, the fewest bytes)
 * and the model's (its FLOPs, bytes, time and limiter). */
void tl_ops_work_set(tl_op_work *w, const char *part, double flops, double hbm_bytes, double model_flops,
                     double model_hbm_bytes, double model_us, const char *limiter);
/* The columns a sim row on an AMD preset adds for the kernel's own code (simulator/amd_code.h):
 * code ("asm" when the loop cost is the build's assembly of the kernel instance, "estimate" when
 * the model's constants decide), the hot loop's clocks a wave-iteration and its bound, the
 * kernel's waves a SIMD, and llvm-mca-22's clocks for the same loop (its second opinion). */
#define TL_OPS_CODE_COLUMNS "code,loop_clk,loop_bound,simd_waves,mca_clk"
void tl_ops_code_cells(tl_table *t, const void *amd_loop_cost);

/* The bench's read floor: a plain read of `bytes` timed with opts (kernels/roofline.h), in us;
 * NAN (the error cleared) when it cannot be timed. */
double tl_ops_read_floor_us(double bytes, const tl_bench_opts *opts);
/* The preset `bench OP` models by default: the one of the first GPU (tl_hw_for_device), "h200"
 * when there is none or no preset describes it. Cost: one device query, the first call only. */
const char *tl_ops_bench_hw(void);

/* A picture's file: every draw command needs -o FILE; TL_EUSAGE naming cmd otherwise. */
int tl_ops_need_output(const char *out, const char *cmd);
/* TL_EUSAGE when the picture `out` is the input file `in` given as option `opt` (tl_same_file): the
 * figure would replace what it draws. 0 when in is NULL. */
int tl_ops_output_not_input(const char *out, const char *in, const char *opt);
/* tl_parse_long_list into ints (at most min(cap, 64) values). */
int tl_ops_parse_int_list(const char *s, long lo, long hi, const char *what, int *out, int cap, int *n);

/* Where every op's kernels are compiled in the test suite (tests/cli_gpu_compile.sh), for a row's
 * `targets`: sm_90's run column is the op's own; the AMD targets have never run (no AMD GPU here). */
#define TL_OPS_SM90_COMPILED "nvcc 13.0, in every test run where nvcc is found"
#define TL_OPS_EXECUTED "every dtype's check passes on the CPU executor, in every test run (tests/cli_executor.sh)"
#define TL_OPS_AMD_TARGETS                                                                              \
    {"gfx942", "Debian's clang-19, device code, in every test run", "never (no AMD GPU here)", TL_OPS_EXECUTED}, \
    {"gfx950", "Debian 12's clang-22, device code, in every test run", "never (no AMD GPU here)", TL_OPS_EXECUTED}

/* the rows, and the figures of each (ops/OP_figs.c) */
extern const tl_op tl_op_decode;
extern const tl_op tl_op_indexer;
extern const tl_op tl_op_moe;
extern const tl_op tl_op_prefill;
extern const tl_op tl_op_quant;
extern const tl_op tl_op_topk;
extern const tl_op_figure tl_decode_figures[];
extern const tl_op_figure tl_indexer_figures[];
extern const tl_op_figure tl_moe_figures[];
extern const tl_op_figure tl_prefill_figures[];
extern const tl_op_figure tl_quant_figures[];
extern const tl_op_figure tl_topk_figures[];

/* `tilelab sim dispatch` (ops/quant.c): the MoE dispatch payload's model. */
int tl_quant_sim_dispatch(int argc, char **argv);

#endif
