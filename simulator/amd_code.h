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
 * And its hot loop: the loops are the regions from a label to the last backward branch
 * (s_branch / s_cbranch_*) to it inside one function; the hot loop is the innermost loop that
 * holds matrix instructions (one holding no other such loop), the one with the most of them where
 * several are innermost; in a kernel without matrix instructions, the innermost loop with the most
 * instructions (its dominant loop). Its instructions, one pass over the region (an inner loop
 * without matrix instructions counts once: inner_loops says how many the region holds), by class:
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
    int first_line, last_line; /* the region in its assembly file (1-based) */
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

/* The kernel arch/name of the build's table, or of the table set by tl_amd_code_use; NULL when
 * neither has it. */
const tl_amd_kernel *tl_amd_code_find(const char *arch, const char *name);

/* Replaces the table lookups read (NULL, 0: back to the build's) until the next call; k must
 * outlive its use. For tests that change one kernel's code and for a user's own assembly. */
void tl_amd_code_use(const tl_amd_kernel *k, int n);

/* The build's table (generated/amd_code_data.c) and its size. */
extern const tl_amd_kernel tl_amd_code_table[];
extern const int tl_amd_code_count;


#endif
