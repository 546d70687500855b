/* executor/amdgcn_ops.h: the wave operations of the amdgcn builtins, as the CPU executor computes
 * them (executor/amdgcn.c), and the lane records the kernels' side (executor/amdgcn.h) hands them.
 * Plain C, shared by the clang-built kernel objects and the runtime.
 *
 * MFMA: every lane gives its A and B registers (up to 8 VGPRs each), its C values and, for the
 * scaled form, its scale VGPRs; the operation gathers each operand element from the lane, VGPR and
 * bits that simulator/mfma.c's layout gives (the layouts `tilelab mfma layout` prints, which match
 * AMD's matrix instruction calculator on CDNA3), decodes it with numerics' decoder of its format
 * (gfx942's FP8 is E4M3FNUZ / E5M2FNUZ, gfx950's OCP E4M3FN / E5M2), and computes
 *   D[i][j] = C[i][j] + sum_k A[i][k] B[k][j]          (x 2^(sa - 127) 2^(sb - 127) when scaled)
 * with every product exact and the sum over k, plus C, in double precision rounded once to float.
 * The hardware's order of summation and its internal width are not documented: a float32 sum in
 * any order differs from this by at most K ulp-scale roundings, which the checks' tolerances (derived
 * from the reduction length with float32 accumulation) already allow. Denormal inputs are kept (the
 * MFMA's FP8/BF16 inputs have no flush mode documented for these forms); NaN propagates.
 */
#ifndef TL_EXECUTOR_AMDGCN_OPS_H
#define TL_EXECUTOR_AMDGCN_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The instructions (imm bits 0..7) */
enum {
    TL_EMU_MFMA_16X16X16_BF16 = 1, /* v_mfma_f32_16x16x16_bf16 (the "_1k" builtin) */
    TL_EMU_MFMA_16X16X32_BF16,     /* v_mfma_f32_16x16x32_bf16 (gfx950) */
    TL_EMU_MFMA_16X16X32_FP8,      /* v_mfma_f32_16x16x32_fp8_fp8 */
    TL_EMU_MFMA_16X16X128_F8F6F4,  /* v_mfma_scale_f32_16x16x128_f8f6f4 (gfx950) */
};
/* imm = instruction | arch << 8 (0 gfx942, 1 gfx950) | cbsz (A's format) << 12 | blgp (B's) << 16
 *     | opsel_a << 20 | opsel_b << 22; formats as the f8f6f4 instruction codes them:
 *     0 E4M3, 1 E5M2, 2 E2M3, 3 E3M2, 4 E2M1. */
#define TL_EMU_MFMA_IMM(instr, gfx950, fa, fb, sa, sb) \
    ((uint32_t)(instr) | (uint32_t)(gfx950) << 8 | (uint32_t)(fa) << 12 | (uint32_t)(fb) << 16 | (uint32_t)(sa) << 20 | (uint32_t)(sb) << 22)

typedef struct {
    uint32_t a[8], b[8]; /* the lane's A and B VGPRs */
    float c[4];          /* C: the 16x16 forms' four values a lane */
    uint32_t scale_a, scale_b;
} tl_emu_mfma_in;
typedef struct {
    float d[4];
} tl_emu_mfma_out;

int tl_emu_op_mfma(const void *const *in, void *const *out, uint64_t live, uint32_t imm, char *why, size_t why_n);

/* v_cvt_pk_f32_fp8: two FP8 codes (bytes 2w, 2w + 1 of src) as two floats; gfx942 reads FNUZ,
 * gfx950 OCP E4M3FN. */
void tl_emu_cvt_pk_f32_fp8(uint32_t src, int word, int gfx950, float *lo, float *hi);
/* v_cvt_pk_fp8_f32: two floats to FP8 codes (gfx950 OCP E4M3FN, gfx942 E4M3FNUZ), rounded to
 * nearest even, into bytes 2w, 2w + 1 of old (the other half kept). Out-of-range values saturate
 * here (numerics/codes.h's encoders): the hardware's saturation follows a mode this project has not
 * run (kernels/gpu.h), so a kernel may pass it only values within the format's range. */
uint32_t tl_emu_cvt_pk_fp8_f32(float lo, float hi, uint32_t old, int word, int gfx950);
/* v_perm_b32: byte i of the result is byte sel_i of the 8-byte value {a (bytes 4..7), b (0..3)};
 * selector 8..11 replicate the sign bit of byte 1, 3, 5, 7; 12 gives 0x00; 13 and above 0xFF. */
uint32_t tl_emu_perm(uint32_t a, uint32_t b, uint32_t sel);
/* __shfl (input: tl_emu_shfl_in of executor/hip_emu.h, output 8 bytes) and __ballot (input int,
 * output the 64-bit mask). */
int tl_emu_op_shfl(const void *const *in, void *const *out, uint64_t live, uint32_t imm, char *why, size_t why_n);
int tl_emu_op_ballot(const void *const *in, void *const *out, uint64_t live, uint32_t imm, char *why, size_t why_n);

#ifdef __cplusplus
}
#endif

#endif
