/* simulator/mfma.h: where every element of an AMD matrix (MFMA) instruction's operands lives.
 *
 * For each dense MFMA of gfx942 (CDNA3) and gfx950 (CDNA4) this module knows the shape
 * M x N x K, the number of blocks (the multi-block 4x4x4_16b, 16x16x4_4b, 32x32x2... forms compute
 * `blocks` independent products at once), the operand formats, and the layout rules of AMD's CDNA3
 * and CDNA4 ISA guides (the "AMD matrix instruction calculator" prints the same mapping):
 *
 *   A (M x K per block; i = row, j = k) and B (K x N; i = k, j = column), classic instructions:
 *     kpl = M*K*blocks/64 consecutive k per lane;
 *     lane = f + M*(block + blocks*(k / kpl)), element e = k % kpl packed low bits first
 *     (f = the row of A or the column of B).
 *   A and B of the gfx950 f8f6f4 instructions (32 values per lane, G = 64/M lane groups):
 *     FP8: k = (K/2)*(e/16) + 16*(lane/M) + e%16  (two halves of K, 16 bytes each)
 *     FP6, FP4: k = 32*(lane/M) + e, packed contiguously (6-bit fields run across registers).
 *   C and D, 32-bit: 4x4 forms: lane = j + 4*block, vgpr = i; others with G = 64/N groups:
 *     lane = j + N*((i/4) % G), vgpr = (M*N/64)*block + 4*(i/(4G)) + i%4.
 *   C and D of FP64: 16x16: lane = j + 16*(i%4), value i/4 in vgprs 2(i/4), 2(i/4)+1;
 *     4x4x4_4b: lane = j + 4*block + 16*i.
 * (The f64 4x4x4_4b layout follows the general rule; no second source confirmed it here.)
 *
 * Everything is static data and arithmetic: no allocation, nothing to free. Cost: O(1) per call.
 */
#ifndef TL_SIM_MFMA_H
#define TL_SIM_MFMA_H

#include "../core/tl.h"

#define TL_MFMA_MAX 64

typedef struct {
    const char *name;   /* the ISA's name, lower case: "v_mfma_f32_16x16x16_bf16" */
    const char *alias;  /* another accepted name (LLVM builtin style), or NULL */
    int m, n, k;        /* per block */
    int blocks;         /* 1, 2, 4 or 16 */
    const char *a_type, *b_type, *c_type; /* "f32","xf32","f16","bf16","i8","fp8","bf8","fp6","fp4","f64","i32" */
    int a_bits;         /* bits per A/B element in registers (xf32 is held as 32) */
    int c_bits;         /* 32, or 64 for f64 */
    int f8f6f4;         /* 1 for the gfx950 f8f6f4 layout */
    int cycles_gfx942;  /* matrix-core cycles per instruction; 0 = not on gfx942 */
    int cycles_gfx950;  /* 0 = not on gfx950 */
} tl_mfma_instr;

typedef struct {
    int lane;   /* 0..63 */
    int vgpr;   /* counted from the operand's first register */
    int bit_lo; /* first bit inside vgpr */
    int bit_hi; /* last bit; > 31 when a field runs into the next register (FP6) or for FP64 */
} tl_mfma_slot;

/* The instruction called `name` (its ISA name or alias, any case) on arch "gfx942" or "gfx950",
 * or NULL (unknown arch or name). The f8f6f4 instructions are listed once per element format
 * ("v_mfma_f32_16x16x128_f8f6f4_fp4"); the bare name means FP8, and "v_mfma_scale_..." names
 * give the same layouts. */
const tl_mfma_instr *tl_mfma_find(const char *arch, const char *name);
/* Fills out[0..cap) with arch's instructions in table order; returns how many there are (0 for
 * an unknown arch). */
int tl_mfma_list(const char *arch, const tl_mfma_instr **out, int cap);
/* Cycles per instruction on arch (0 when it lacks the instruction). */
int tl_mfma_cycles(const tl_mfma_instr *in, const char *arch);

/* Rows and columns of one block of matrix 'A', 'B', 'C' or 'D': A is M x K, B is K x N, C and D
 * are M x N. Returns TL_EUSAGE (recorded) for another letter. */
int tl_mfma_dims(const tl_mfma_instr *in, char matrix, int *rows, int *cols);
/* Number of blocks (the same for every operand). */
int tl_mfma_blocks(const tl_mfma_instr *in, char matrix);
/* VGPRs per lane that the operand takes. */
int tl_mfma_vgprs(const tl_mfma_instr *in, char matrix);

/* Where element (i, j) of block `block` of `matrix` lives. TL_EUSAGE (recorded) when the
 * matrix letter, block or index is out of range. */
int tl_mfma_locate_slot(const tl_mfma_instr *in, char matrix, int block, int i, int j,
                        tl_mfma_slot *out);
/* The same with the blocks stacked along i: i in [0, blocks*rows) is row i % rows of block
 * i / rows; *block receives the block. Any output pointer may be NULL. */
int tl_mfma_locate(const tl_mfma_instr *in, char matrix, int i, int j, int *block, int *lane,
                   int *vgpr, int *bit_lo, int *bit_hi);

#endif
