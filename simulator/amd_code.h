/* simulator/amd_code.h: what an AMD kernel costs, read from its own compiled code.
 *
 * The build compiles the kernels' device code to assembly (clang-22 for gfx950, clang-19 for
 * gfx942, the flags of tests/cli_gpu_compile.sh) and runs tl_amd_code_parse over it
 * (cmake/amd_asm_costs.c); the result is one generated C table in the build tree
 * (generated/amd_code_data.c, never written by hand) that the AMD models look up by arch and
 * mangled kernel name (tl_amd_code_find). So a change to a kernel changes its model.
 *
 * Per kernel (per template instance), from the assembly's metadata:
 *   registers: the amdhsa.kernels YAML's .vgpr_count, .agpr_count, .sgpr_count; the unified
 *     VGPR file a wave takes is accum_offset + agpr_count where it has AGPRs (gfx90a and later
 *     put the AGPRs after the arch VGPRs, from .amdhsa_accum_offset), else vgpr_count;
 *   lds: .group_segment_fixed_size (static LDS only: a kernel's dynamic LDS is its launcher's,
 *     which the model adds from the contract's tiling);
 *   scratch: .private_segment_fixed_size; wg_max: .max_flat_workgroup_size.
 * And its hot loop: the loops are LLVM's own (its MachineLoopInfo, which the assembly printer writes
 * as comments on every basic block: "Loop Header", "in Loop: Header=BB6_12", "Parent Loop"), each
 * loop all of its blocks wherever the layout placed them; the hot loop is the innermost loop that
 * holds matrix instructions (one holding no other such loop), the one with the most of them where
 * several are innermost (of equal ones, the first to appear in the file: the compiler lays loops
 * out in source order, so a kernel's main loop before its tail's); in a kernel without matrix instructions, the innermost loop with the most
 * instructions (its dominant loop). Its instructions, one pass over its blocks (an inner loop
 * without matrix instructions counts once: inner_loops says how many it holds), by class:
 *   mfma[]: each v_mfma* mnemonic and its count;
 *   trans: v_exp / v_log / v_rcp / v_rsq / v_sqrt / v_sin / v_cos (quarter-rate VALU);
 *   valu: every other v_* (v_pk_* packed ones also counted in valu_packed);
 *   salu: s_* but the classes below; branch: s_branch / s_cbranch_* / s_setpc;
 *   waitcnt: s_waitcnt*; barrier: s_barrier; nop_cycles: the wait states s_nop N asks (N + 1);
 *   lds: ds_* (lds_read_bytes / lds_write_bytes: bytes a lane moves, from the width suffix);
 *   vmem_load / vmem_store: global_ / buffer_ / flat_ loads and stores (vmem_load_bytes a lane);
 *   smem: s_load_* / s_buffer_load_* (scalar memory).
 * mca_cycles: llvm-mca-22's cycles per iteration of that region (the build runs it on the
 * region's instructions, labels and branches left out, 100 iterations; 0 where it did not run),
 * and mca_rthroughput its "Block RThroughput": a second opinion from LLVM's own scheduling model.
 */
#ifndef TL_SIM_AMD_CODE_H
#define TL_SIM_AMD_CODE_H

#include <stddef.h>

#include "hw.h"

#define TL_AMD_MAX_MFMA 4
#define TL_AMD_NAME_LEN 160

typedef struct {
    char name[48]; /* "v_mfma_scale_f32_16x16x128_f8f6f4" */
    char format[8]; /* f8f6f4 forms: the slower operand's format from cbsz / blgp ("fp8" when either
                     * is E4M3 / E5M2, the default; else "fp6", else "fp4"); "" for the others */
    int count;
} tl_amd_mfma_count;

typedef struct {
    int found;                 /* 0: the kernel has no loop */
    int first_line, last_line; /* its first and last line in the assembly file (1-based) */
    int instrs, inner_loops;
    int n_mfma;
    tl_amd_mfma_count mfma[TL_AMD_MAX_MFMA];
    int valu, valu_packed, trans, salu, branch, waitcnt, barrier, nop_cycles;
    int lds, lds_read_bytes, lds_write_bytes;
    int vmem_load, vmem_store, vmem_load_bytes, smem;
    double mca_cycles, mca_rthroughput;
} tl_amd_loop;

typedef struct {
    char arch[8];               /* "gfx950" | "gfx942" */
    char name[TL_AMD_NAME_LEN]; /* mangled */
    const char *file;           /* the kernel source (kernels/prefill.hip), static storage */
    int vgpr, agpr, accum_offset, sgpr;
    int vgpr_file;              /* unified VGPRs a lane of one wave takes (see above) */
    int lds, scratch, wg_max;
    tl_amd_loop loop;
} tl_amd_kernel;

/* Reads every kernel of one assembly file (text, NUL-terminated) compiled for arch into k[0..cap),
 * *n the number found. file names the kernel source for the table. TL_EUSAGE with a message
 * ("LINE: why") for metadata it cannot read or more kernels than cap. Cost: O(lines) per kernel. */
int tl_amd_code_parse(const char *text, const char *arch, const char *file, tl_amd_kernel *k, int cap, int *n);

/* The hot loop's instructions of kernel `name` in one assembly file, in file order, without its
 * branches (what llvm-mca reads as one straight block), one a line; malloc'd (free it), NULL on a
 * parse failure (after tl_error) or when out of memory. */
char *tl_amd_code_loop_text(const char *text, const char *arch, const char *name);

/* The kernel arch/name of the build's table, or of the table set by tl_amd_code_use; NULL when
 * neither has it. */
const tl_amd_kernel *tl_amd_code_find(const char *arch, const char *name);

/* Replaces the table lookups read (NULL, 0: back to the build's) until the next call; k must
 * outlive its use. For tests that change one kernel's code and for a user's own assembly. */
void tl_amd_code_use(const tl_amd_kernel *k, int n);

/* The build's table (generated/amd_code_data.c) and its size. */
extern const tl_amd_kernel tl_amd_code_table[];
extern const int tl_amd_code_count;


/* ---- what a loop costs on a preset ----
 * Occupancy: a wave takes its VGPR file (vgpr_file rounded up to 8) of the preset's vgprs_per_simd
 * and its SGPRs (sgpr + 6 reserved, rounded up to 16) of sgprs_per_simd, at most waves_per_simd
 * waves a SIMD; a work-group of W waves spreads over the CU's SIMDs (matrix_cores_per_cu of them),
 * so a CU holds floor(SIMDs x waves a SIMD / W) of them by registers, and floor(lds_kib KiB / (its
 * static + dynamic LDS)) by LDS.
 * One wave's pass over the hot loop ("a wave-iteration"), in clocks of its SIMD:
 *   matrix: sum over its MFMAs of the preset's cycles for that instruction (FACTS.md's table; the
 *           f8f6f4 forms by their operand format);
 *   valu:   the VALU pipe: every VALU instruction wave_size / SIMD lanes clocks (4 on CDNA: a wave of
 *           64 over 16 lanes), a transcendental wave_size / (transcendental_per_cu_clk / SIMDs) (16);
 *   lds:    its LDS bytes (64 lanes x bytes a lane read and written) at lds_bytes_per_cu_clk / SIMDs;
 *   issue:  its own in-order issue, one instruction a cadence (wave_size / SIMD lanes clocks), a
 *           transcendental its valu clocks, plus the wait states of its s_nop.
 * With n waves of the kernel on a SIMD the pipes are shared and the issue streams interleave:
 * a wave-iteration costs max(matrix, valu, lds, issue / n) clocks of the SIMD on average, the
 * bound naming the largest. Not charged: waits on memory (s_waitcnt: the loads are the models'
 * stream terms), barriers, dependent MFMA chains inside one wave, SALU beyond its issue slot. */
typedef struct {
    const tl_amd_kernel *k;        /* the kernel's entry */
    int waves_by_vgpr, waves_by_sgpr; /* waves a SIMD holds by each register file */
    int wgs_by_regs, wgs_by_lds;   /* work-groups a CU holds by registers, by LDS (0: no LDS limit) */
    int wgs;                       /* the smaller, at least 1 */
    double waves_per_simd;         /* the kernel's waves a SIMD at wgs work-groups a CU */
    double matrix_cycles, valu_cycles, lds_cycles, issue_cycles, cycles;
    const char *bound;             /* "matrix", "valu", "lds" or "issue" */
} tl_amd_loop_cost;

/* The cost on hw (an AMD preset with vgprs_per_simd, sgprs_per_simd, waves_per_simd) of kernel
 * `name` (tl_amd_code_find on hw->arch) run as work-groups of wg_waves waves with lds_dynamic
 * bytes of dynamic LDS each, at most wgs_cap work-groups a CU (the grid's share; 0: no cap).
 * TL_EUSAGE (one line) when the preset lacks those fields, the table lacks the kernel or its hot
 * loop, or the preset lacks one of its matrix instructions. Cost: O(table). */
int tl_amd_loop_cost_of(const tl_hw *hw, const char *name, int wg_waves, double lds_dynamic, long wgs_cap,
                        tl_amd_loop_cost *c);

#endif
