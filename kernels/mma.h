/* kernels/mma.h: matrix fragments and multiply-accumulate steps, one implementation per target.
 *
 * A kernel written against this header runs the matrix cores of whatever it is compiled for:
 *   TL_MMA_TARGET_GFX950   __gfx950__ (CDNA4): v_mfma_f32_16x16x32_bf16 and
 *                          v_mfma_scale_f32_16x16x128_f8f6f4 with unit scales for FP8 (OCP E4M3,
 *                          the format of NVIDIA's and the OCP inputs; also FP6 / FP4, and OCP MX
 *                          E8M0 block scales fed to the instruction, via tl_mma_f8f6f4_16x16x128).
 *                          Compiled with clang-22 and its assembly read
 *                          by tests/cli_gpu_compile.sh; never run here (no gfx950 device).
 *   TL_MMA_TARGET_GFX942   __gfx942__ (CDNA3): v_mfma_f32_16x16x16_bf16 (the "_1k" builtin),
 *                          v_mfma_f32_16x16x32_fp8_fp8 - FP8 is E4M3 FNUZ (bias 8, max 240) there.
 *   TL_MMA_TARGET_SM80     NVIDIA sm_80+: mma.sync m16n8k16 bf16; sm_89+ also m16n8k32 e4m3.
 *                          On sm_90 (H100/H200) the e4m3 mma.sync is NOT a hardware instruction:
 *                          ptxas expands it into F2FP conversions, two f16 HMMAs and FADDs
 *                          (TL_MMA_FP8_NATIVE 0). Measured on the H200, 2026-11-29 (tilelab bench
 *                          roofline): bf16 mma.sync 645.7 TFLOP/s, e4m3 mma.sync 391.4 - FP8
 *                          through this header is slower than BF16 there; Hopper's FP8 rate
 *                          (cuBLAS 1450) needs wgmma (sm_90a), which this header does not use.
 *   TL_MMA_TARGET_GENERIC  anything else, and every host pass: a plain loop in which one thread
 *                          holds and computes a whole tile (the reference by construction).
 *
 * Shapes (from kernels/mma_shapes.h): TL_MMA_BF16_{M,N,K}, TL_MMA_FP8_{M,N,K}. They are device
 * facts: in the host pass of a HIP/CUDA build they are the GENERIC values. Host launch
 * geometry must use the per-target macros of mma_shapes.h chosen by the device's arch at run
 * time, never these.
 *
 * Fragment API (all __device__, per lane; every lane of the wave/warp must call them together):
 *   tl_frag_a_bf16 / tl_frag_b_bf16 / tl_frag_a_fp8 / tl_frag_b_fp8 / tl_frag_c
 *   tl_frag_zero(&c)
 *   tl_frag_load_a_bf16(&a, A, lda)   A: M x K tile, element (i, k) at A[i * lda + k] (row-major)
 *   tl_frag_load_bt_bf16(&b, Bt, ldb) B: K x N tile given as its transpose: element (k, n) at
 *                                     Bt[n * ldb + k] (weights stored [N][K], "col-major B")
 *   tl_frag_load_a_fp8 / tl_frag_load_bt_fp8: the same with one byte per element
 *   tl_mma_bf16(&c, &a, &b), tl_mma_fp8(&c, &a, &b): c += a * b (f32 accumulate)
 *   tl_frag_store_c(&c, C, ldc)       C: M x N tile of f32, element (i, n) at C[i * ldc + n]
 *   tl_frag_c_row(lane, r), tl_frag_c_col(lane, r): which C element lane's r-th value is
 *   TL_FRAG_C_COUNT: values of C per lane
 * Loads read the tile with the widest accesses the layout allows (8 or 16 bytes on AMD, 4 on
 * NVIDIA); pointers must be aligned accordingly (lda, ldb multiples of 8 elements suffice).
 * bf16 and fp8 elements are raw bits (uint16_t, uint8_t): encoding is numerics/'s business.
 *
 * Register layouts (lane l; "element e" = the e-th 16-bit half or byte of the fragment, low first)
 *   SM80 m16n8k16 bf16 (g = l / 4, t = l % 4):
 *     A 4 regs: r0 = A[g][2t,2t+1], r1 = A[g+8][2t,2t+1], r2 = A[g][2t+8,2t+9],
 *               r3 = A[g+8][2t+8,2t+9]
 *     B 2 regs: r0 = B[2t,2t+1][g], r1 = B[2t+8,2t+9][g]
 *     C 4 f32:  c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
 *   SM89 m16n8k32 e4m3: A r0 = A[g][4t..4t+3], r1 = A[g+8][4t..], r2 = A[g][4t+16..],
 *                       r3 = A[g+8][4t+16..]; B r0 = B[4t..4t+3][g], r1 = B[4t+16..4t+19][g];
 *                       C as above.
 *   GFX942 16x16x16 bf16: A lane holds row l%16, k = 4(l/16)+e (e = 0..3, 2 VGPRs);
 *                         B lane holds column l%16, k = 4(l/16)+e; C c_r = C[4(l/16)+r][l%16].
 *   GFX942 16x16x32 fp8:  A row l%16, k = 8(l/16)+e (e = 0..7, 2 VGPRs); B likewise; C as above.
 *   GFX950 16x16x32 bf16: A row l%16, k = 8(l/16)+e (e = 0..7, 4 VGPRs); B likewise; C as above.
 *   GFX950 16x16x128 f8f6f4 (FP8): A row l%16, byte e of 32 (8 VGPRs):
 *                         k = 64(e/16) + 16(l/16) + e%16; B likewise with column l%16.
 *                         FP4: k = 32(l/16) + e, e = 0..31 packed low nibble first in 4 VGPRs.
 *   simulator/mfma.c holds every gfx942/gfx950 layout as data (`tilelab mfma layout`).
 */
#ifndef TL_KERNELS_MMA_H
#define TL_KERNELS_MMA_H

#include "gpu.h"
#include "mma_shapes.h"
#include "../numerics/codes.h" /* the plain loop decodes BF16 and E4M3 */

#if defined(__gfx950__)
#define TL_MMA_TARGET_GFX950 1
#define TL_MMA_TARGET_NAME "gfx950"
#define TL_MMA_BF16_M TL_MMA_GFX950_BF16_M
#define TL_MMA_BF16_N TL_MMA_GFX950_BF16_N
#define TL_MMA_BF16_K TL_MMA_GFX950_BF16_K
#define TL_MMA_FP8_M TL_MMA_GFX950_FP8_M
#define TL_MMA_FP8_N TL_MMA_GFX950_FP8_N
#define TL_MMA_FP8_K TL_MMA_GFX950_FP8_K
#define TL_MMA_HAS_FP8 1
#define TL_MMA_FP8_NATIVE 1
#define TL_MMA_FP8_FNUZ 0
#elif defined(__gfx942__) || defined(__gfx941__) || defined(__gfx940__)
#define TL_MMA_TARGET_GFX942 1
#define TL_MMA_TARGET_NAME "gfx942"
#define TL_MMA_BF16_M TL_MMA_GFX942_BF16_M
#define TL_MMA_BF16_N TL_MMA_GFX942_BF16_N
#define TL_MMA_BF16_K TL_MMA_GFX942_BF16_K
#define TL_MMA_FP8_M TL_MMA_GFX942_FP8_M
#define TL_MMA_FP8_N TL_MMA_GFX942_FP8_N
#define TL_MMA_FP8_K TL_MMA_GFX942_FP8_K
#define TL_MMA_HAS_FP8 1
#define TL_MMA_FP8_NATIVE 1
#define TL_MMA_FP8_FNUZ 1
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TL_MMA_TARGET_SM80 1
#define TL_MMA_TARGET_NAME "sm_80+"
#define TL_MMA_BF16_M TL_MMA_SM80_BF16_M
#define TL_MMA_BF16_N TL_MMA_SM80_BF16_N
#define TL_MMA_BF16_K TL_MMA_SM80_BF16_K
#define TL_MMA_FP8_M TL_MMA_SM89_FP8_M
#define TL_MMA_FP8_N TL_MMA_SM89_FP8_N
#define TL_MMA_FP8_K TL_MMA_SM89_FP8_K
#if __CUDA_ARCH__ >= 890
#define TL_MMA_HAS_FP8 1
#if __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200
#define TL_MMA_FP8_NATIVE 1 /* sm_89, sm_120: FP8 behind mma.sync (not measured here) */
#else
#define TL_MMA_FP8_NATIVE 0 /* sm_90: emulated by ptxas (measured); sm_100 not checked */
#endif
#else
#define TL_MMA_HAS_FP8 0 /* tl_mma_fp8 falls back to the plain loop per lane: correct, slow */
#define TL_MMA_FP8_NATIVE 0
#endif
#define TL_MMA_FP8_FNUZ 0
#else
#define TL_MMA_TARGET_GENERIC 1
#define TL_MMA_TARGET_NAME "generic"
#define TL_MMA_BF16_M TL_MMA_GENERIC_BF16_M
#define TL_MMA_BF16_N TL_MMA_GENERIC_BF16_N
#define TL_MMA_BF16_K TL_MMA_GENERIC_BF16_K
#define TL_MMA_FP8_M TL_MMA_GENERIC_FP8_M
#define TL_MMA_FP8_N TL_MMA_GENERIC_FP8_N
#define TL_MMA_FP8_K TL_MMA_GENERIC_FP8_K
#define TL_MMA_HAS_FP8 1
#define TL_MMA_FP8_NATIVE 0
#define TL_MMA_FP8_FNUZ 0
#endif

#define TL_MMA_FN static __device__ __forceinline__

/* =============================================================================================
 * GFX950
 * =========================================================================================== */
#if defined(TL_MMA_TARGET_GFX950)
typedef __bf16 tl_bf16x8 __attribute__((ext_vector_type(8)));
typedef float tl_f32x4 __attribute__((ext_vector_type(4)));
typedef int tl_i32x8 __attribute__((ext_vector_type(8)));
typedef struct { tl_bf16x8 v; } tl_frag_a_bf16;
typedef struct { tl_bf16x8 v; } tl_frag_b_bf16;
typedef struct { tl_i32x8 v; } tl_frag_a_fp8;
typedef struct { tl_i32x8 v; } tl_frag_b_fp8;
typedef struct { tl_f32x4 v; } tl_frag_c;
#define TL_FRAG_C_COUNT 4
/* f8f6f4 format codes (cbsz / blgp): 0 E4M3, 1 E5M2, 2 E2M3, 3 E3M2, 4 E2M1 */
#define TL_F8F6F4_E4M3 0
#define TL_F8F6F4_E5M2 1
#define TL_F8F6F4_E2M3 2
#define TL_F8F6F4_E3M2 3
#define TL_F8F6F4_E2M1 4

TL_MMA_FN void tl_mma_bf16(tl_frag_c *c, const tl_frag_a_bf16 *a, const tl_frag_b_bf16 *b)
{
    c->v = __builtin_amdgcn_mfma_f32_16x16x32_bf16(a->v, b->v, c->v, 0, 0, 0);
}
typedef short tl_i16x4 __attribute__((ext_vector_type(4)));
/* CDNA3's 16-deep bf16 step, which gfx950 keeps (at half its 16x16x32 rate): returns c + a b for
 * A, B of four bf16 a lane (lane l: row / column l % 16, k = 4 (l / 16) + e), C as tl_frag_c. */
TL_MMA_FN tl_f32x4 tl_mma_bf16_16x16x16(tl_i16x4 a, tl_i16x4 b, tl_f32x4 c)
{
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
}
/* E8M0 code of the scale 1.0 (2^(127 - 127)): the unit scale of the scaled instructions. */
#define TL_E8M0_ONE 127
/* One 16x16x128 step, A in format FA and B in FB (TL_F8F6F4_*), each 32-deep block of K scaled by
 * an OCP MX E8M0 scale (2^(code - 127); 0xFF is NaN), byte 0 of scale_a / scale_b (op_sel 0):
 *   lane l gives the scale of A row l % 16 and of B column l % 16 for k in [32 (l / 16),
 *   32 (l / 16) + 32) (16 rows or columns x 4 blocks = 64 lanes: for FP4 the lane's own 32 values;
 *   Modular's CDNA4 block-scaled MFMA notes. For FP8, whose lane bytes lie in two blocks of k, no
 *   second source was found and no gfx950 device is here to run it);
 * c += (A x 2^(scale_a - 127)) (B x 2^(scale_b - 127)), f32 accumulate. The default scales are 1:
 * plain FP8/FP6/FP4 at the instruction's full rate. The scale operands live in VGPRs (LLVM's
 * VOP3PInstructions.td keeps them there: for an inline or SGPR constant the hardware would read
 * bits 30:23). */
template <int FA, int FB>
TL_MMA_FN void tl_mma_f8f6f4_16x16x128(tl_frag_c *c, const tl_i32x8 &a, const tl_i32x8 &b,
                                       int scale_a = TL_E8M0_ONE, int scale_b = TL_E8M0_ONE)
{
    c->v = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a, b, c->v, FA, FB, 0, scale_a, 0, scale_b);
}
TL_MMA_FN void tl_mma_fp8(tl_frag_c *c, const tl_frag_a_fp8 *a, const tl_frag_b_fp8 *b)
{
    tl_mma_f8f6f4_16x16x128<TL_F8F6F4_E4M3, TL_F8F6F4_E4M3>(c, a->v, b->v);
}
TL_MMA_FN void tl_frag_load_a_bf16(tl_frag_a_bf16 *a, const uint16_t *A, int lda)
{
    int l = tl_lane();
    a->v = *(const tl_bf16x8 *)(A + (l % 16) * lda + 8 * (l / 16));
}
TL_MMA_FN void tl_frag_load_bt_bf16(tl_frag_b_bf16 *b, const uint16_t *Bt, int ldb)
{
    int l = tl_lane();
    b->v = *(const tl_bf16x8 *)(Bt + (l % 16) * ldb + 8 * (l / 16));
}
/* bytes 0..15: k = 16(l/16) + e; bytes 16..31: k = 64 + 16(l/16) + e */
TL_MMA_FN void tl_frag_load_a_fp8(tl_frag_a_fp8 *a, const uint8_t *A, int lda)
{
    int l = tl_lane();
    const uint8_t *p = A + (l % 16) * lda + 16 * (l / 16);
    int4 lo = *(const int4 *)p, hi = *(const int4 *)(p + 64);
    a->v = (tl_i32x8){lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
}
TL_MMA_FN void tl_frag_load_bt_fp8(tl_frag_b_fp8 *b, const uint8_t *Bt, int ldb)
{
#if defined(TL_EMU_MUTANT) /* the executor's mutation test only (tests/cli_executor.sh): B's lanes swap columns pairwise */
    Bt += tl_lane() % 2 ? -ldb : ldb;
#endif
    tl_frag_load_a_fp8((tl_frag_a_fp8 *)b, Bt, ldb);
}
TL_MMA_FN int tl_frag_c_row(int lane, int r) { return 4 * (lane / 16) + r; }
TL_MMA_FN int tl_frag_c_col(int lane, int r) { return lane % 16; }

/* =============================================================================================
 * GFX942
 * =========================================================================================== */
#elif defined(TL_MMA_TARGET_GFX942)
typedef short tl_i16x4 __attribute__((ext_vector_type(4)));
typedef float tl_f32x4 __attribute__((ext_vector_type(4)));
typedef struct { tl_i16x4 v; } tl_frag_a_bf16;
typedef struct { tl_i16x4 v; } tl_frag_b_bf16;
typedef struct { long v; } tl_frag_a_fp8;
typedef struct { long v; } tl_frag_b_fp8;
typedef struct { tl_f32x4 v; } tl_frag_c;
#define TL_FRAG_C_COUNT 4

TL_MMA_FN void tl_mma_bf16(tl_frag_c *c, const tl_frag_a_bf16 *a, const tl_frag_b_bf16 *b)
{
    c->v = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a->v, b->v, c->v, 0, 0, 0);
}
/* The same step on raw registers (gfx950 has it too): returns c + a b. */
TL_MMA_FN tl_f32x4 tl_mma_bf16_16x16x16(tl_i16x4 a, tl_i16x4 b, tl_f32x4 c)
{
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
}
TL_MMA_FN void tl_mma_fp8(tl_frag_c *c, const tl_frag_a_fp8 *a, const tl_frag_b_fp8 *b)
{
    c->v = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a->v, b->v, c->v, 0, 0, 0);
}
TL_MMA_FN void tl_frag_load_a_bf16(tl_frag_a_bf16 *a, const uint16_t *A, int lda)
{
    int l = tl_lane();
    a->v = *(const tl_i16x4 *)(A + (l % 16) * lda + 4 * (l / 16));
}
TL_MMA_FN void tl_frag_load_bt_bf16(tl_frag_b_bf16 *b, const uint16_t *Bt, int ldb)
{
    int l = tl_lane();
    b->v = *(const tl_i16x4 *)(Bt + (l % 16) * ldb + 4 * (l / 16));
}
TL_MMA_FN void tl_frag_load_a_fp8(tl_frag_a_fp8 *a, const uint8_t *A, int lda)
{
    int l = tl_lane();
    a->v = *(const long *)(A + (l % 16) * lda + 8 * (l / 16));
}
TL_MMA_FN void tl_frag_load_bt_fp8(tl_frag_b_fp8 *b, const uint8_t *Bt, int ldb)
{
    int l = tl_lane();
    b->v = *(const long *)(Bt + (l % 16) * ldb + 8 * (l / 16));
}
TL_MMA_FN int tl_frag_c_row(int lane, int r) { return 4 * (lane / 16) + r; }
TL_MMA_FN int tl_frag_c_col(int lane, int r) { return lane % 16; }

/* =============================================================================================
 * NVIDIA sm_80+ (mma.sync)
 * =========================================================================================== */
#elif defined(TL_MMA_TARGET_SM80)
typedef struct { uint32_t r[4]; } tl_frag_a_bf16;
typedef struct { uint32_t r[2]; } tl_frag_b_bf16;
typedef struct { uint32_t r[4]; } tl_frag_a_fp8;
typedef struct { uint32_t r[2]; } tl_frag_b_fp8;
typedef struct { float v[4]; } tl_frag_c;
#define TL_FRAG_C_COUNT 4

TL_MMA_FN void tl_mma_bf16(tl_frag_c *c, const tl_frag_a_bf16 *a, const tl_frag_b_bf16 *b)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c->v[0]), "+f"(c->v[1]), "+f"(c->v[2]), "+f"(c->v[3])
        : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
}
/* The same fragments holding IEEE f16 bits (same layout and rate as bf16): every E4M3 value is
 * exact in f16 and decodes to it in one instruction (cvt.rn.f16x2.e4m3x2) where bf16 takes several. */
TL_MMA_FN void tl_mma_f16(tl_frag_c *c, const tl_frag_a_bf16 *a, const tl_frag_b_bf16 *b)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c->v[0]), "+f"(c->v[1]), "+f"(c->v[2]), "+f"(c->v[3])
        : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
}
#if TL_MMA_HAS_FP8
TL_MMA_FN void tl_mma_fp8(tl_frag_c *c, const tl_frag_a_fp8 *a, const tl_frag_b_fp8 *b)
{
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c->v[0]), "+f"(c->v[1]), "+f"(c->v[2]), "+f"(c->v[3])
        : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
}
#else
/* sm_80..sm_88: no FP8 tensor instruction; the warp gathers the tile through shuffles and every
 * lane computes its own four outputs with the plain loop (correct, slow). */
TL_MMA_FN void tl_mma_fp8(tl_frag_c *c, const tl_frag_a_fp8 *a, const tl_frag_b_fp8 *b)
{
    int l = tl_lane(), g = l / 4, t = l % 4;
    for (int h = 0; h < 2; h++) {
        int row = g + 8 * h;
        for (int cc = 0; cc < 2; cc++) {
            int col = 2 * t + cc;
            float s = 0.0f;
            for (int kk = 0; kk < 32; kk++) {
                int ta = (kk % 16) / 4, ra = (row % 8) * 4 + ta, reg_a = (row / 8) + 2 * (kk / 16);
                uint32_t wa = __shfl_sync(0xffffffffu, a->r[reg_a], ra);
                int tb = (kk % 16) / 4, rb = col * 4 + tb, reg_b = kk / 16;
                uint32_t wb = __shfl_sync(0xffffffffu, b->r[reg_b], rb);
                s += tl_code_e4m3_to_f32((uint8_t)(wa >> (8 * (kk % 4)))) *
                     tl_code_e4m3_to_f32((uint8_t)(wb >> (8 * (kk % 4))));
            }
            c->v[2 * h + cc] += s;
        }
    }
}
#endif
TL_MMA_FN void tl_frag_load_a_bf16(tl_frag_a_bf16 *a, const uint16_t *A, int lda)
{
    int l = tl_lane(), g = l / 4, t = l % 4;
    a->r[0] = *(const uint32_t *)(A + g * lda + 2 * t);
    a->r[1] = *(const uint32_t *)(A + (g + 8) * lda + 2 * t);
    a->r[2] = *(const uint32_t *)(A + g * lda + 2 * t + 8);
    a->r[3] = *(const uint32_t *)(A + (g + 8) * lda + 2 * t + 8);
}
TL_MMA_FN void tl_frag_load_bt_bf16(tl_frag_b_bf16 *b, const uint16_t *Bt, int ldb)
{
    int l = tl_lane(), g = l / 4, t = l % 4;
    b->r[0] = *(const uint32_t *)(Bt + g * ldb + 2 * t);
    b->r[1] = *(const uint32_t *)(Bt + g * ldb + 2 * t + 8);
}
TL_MMA_FN void tl_frag_load_a_fp8(tl_frag_a_fp8 *a, const uint8_t *A, int lda)
{
    int l = tl_lane(), g = l / 4, t = l % 4;
    a->r[0] = *(const uint32_t *)(A + g * lda + 4 * t);
    a->r[1] = *(const uint32_t *)(A + (g + 8) * lda + 4 * t);
    a->r[2] = *(const uint32_t *)(A + g * lda + 4 * t + 16);
    a->r[3] = *(const uint32_t *)(A + (g + 8) * lda + 4 * t + 16);
}
TL_MMA_FN void tl_frag_load_bt_fp8(tl_frag_b_fp8 *b, const uint8_t *Bt, int ldb)
{
    int l = tl_lane(), g = l / 4, t = l % 4;
    b->r[0] = *(const uint32_t *)(Bt + g * ldb + 4 * t);
    b->r[1] = *(const uint32_t *)(Bt + g * ldb + 4 * t + 16);
}
TL_MMA_FN int tl_frag_c_row(int lane, int r) { return lane / 4 + 8 * (r / 2); }
TL_MMA_FN int tl_frag_c_col(int lane, int r) { return 2 * (lane % 4) + (r % 2); }

/* SM80 extras for tiles in shared memory (one ldmatrix.x4 each; rows 16-byte aligned; a row
 * stride of 8 (mod 64) elements keeps the 8 rows of a matrix in distinct banks):
 *   tl_frag_ldsm_a_bf16(&a, A, lda)           the A fragment of a row-major [16][16] tile
 *   tl_frag_ldsm_bt_bf16_x2(&b0, &b1, Bt, ldb) the B fragments of n 0..7 and 8..15 from a [n][k] tile
 *   tl_frag_ldsm_b_bf16_x2(&b0, &b1, B, ldb)   the same from a row-major [k][n] tile (.trans)
 *   tl_frag_a_from_c(&a, c0, c1, pack)         the A fragment (k = columns 0..15) that accumulator
 *       tiles c0 (columns 0..7) and c1 (8..15) of the same 16 rows become, two values at a time
 *       through pack(lo, hi) -> a 16-bit pair (low half first): registers only, because the
 *       m16n8k16 C layout is half of the A layout (FlashAttention-2's P in registers). */
TL_MMA_FN void tl_frag_ldsm_a_bf16(tl_frag_a_bf16 *a, const uint16_t *A, int lda)
{
    const int l = tl_lane();
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a->r[0]), "=r"(a->r[1]), "=r"(a->r[2]), "=r"(a->r[3])
                 : "r"(tl_smem_addr(A + (l & 15) * lda + 8 * (l >> 4))));
}
TL_MMA_FN void tl_frag_ldsm_bt_bf16_x2(tl_frag_b_bf16 *b0, tl_frag_b_bf16 *b1, const uint16_t *Bt, int ldb)
{
    const int l = tl_lane();
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(b0->r[0]), "=r"(b0->r[1]), "=r"(b1->r[0]), "=r"(b1->r[1])
                 : "r"(tl_smem_addr(Bt + ((l & 7) + 8 * (l >> 4)) * ldb + 8 * ((l >> 3) & 1))));
}
TL_MMA_FN void tl_frag_ldsm_b_bf16_x2(tl_frag_b_bf16 *b0, tl_frag_b_bf16 *b1, const uint16_t *B, int ldb)
{
    const int l = tl_lane();
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(b0->r[0]), "=r"(b0->r[1]), "=r"(b1->r[0]), "=r"(b1->r[1])
                 : "r"(tl_smem_addr(B + ((l & 7) + 8 * ((l >> 3) & 1)) * ldb + 8 * (l >> 4))));
}
template <typename Pack>
TL_MMA_FN void tl_frag_a_from_c(tl_frag_a_bf16 *a, const tl_frag_c &c0, const tl_frag_c &c1, Pack pack)
{
    a->r[0] = pack(c0.v[0], c0.v[1]);
    a->r[1] = pack(c0.v[2], c0.v[3]);
    a->r[2] = pack(c1.v[0], c1.v[1]);
    a->r[3] = pack(c1.v[2], c1.v[3]);
}

/* =============================================================================================
 * GENERIC: one thread holds a whole tile
 * =========================================================================================== */
#else
typedef struct { uint16_t x[TL_MMA_BF16_M * TL_MMA_BF16_K]; } tl_frag_a_bf16; /* [i][k] */
typedef struct { uint16_t x[TL_MMA_BF16_N * TL_MMA_BF16_K]; } tl_frag_b_bf16; /* [n][k] */
typedef struct { uint8_t x[TL_MMA_FP8_M * TL_MMA_FP8_K]; } tl_frag_a_fp8;
typedef struct { uint8_t x[TL_MMA_FP8_N * TL_MMA_FP8_K]; } tl_frag_b_fp8;
typedef struct { float v[TL_MMA_BF16_M * TL_MMA_BF16_N]; } tl_frag_c; /* [i][n] */
#define TL_FRAG_C_COUNT (TL_MMA_BF16_M * TL_MMA_BF16_N)
#undef TL_MMA_FN
#define TL_MMA_FN static __host__ __device__ inline

TL_MMA_FN void tl_mma_bf16(tl_frag_c *c, const tl_frag_a_bf16 *a, const tl_frag_b_bf16 *b)
{
    for (int i = 0; i < TL_MMA_BF16_M; i++)
        for (int n = 0; n < TL_MMA_BF16_N; n++) {
            float s = 0.0f;
            for (int k = 0; k < TL_MMA_BF16_K; k++)
                s += tl_code_bf16_to_f32(a->x[i * TL_MMA_BF16_K + k]) *
                     tl_code_bf16_to_f32(b->x[n * TL_MMA_BF16_K + k]);
            c->v[i * TL_MMA_BF16_N + n] += s;
        }
}
TL_MMA_FN void tl_mma_fp8(tl_frag_c *c, const tl_frag_a_fp8 *a, const tl_frag_b_fp8 *b)
{
    for (int i = 0; i < TL_MMA_FP8_M; i++)
        for (int n = 0; n < TL_MMA_FP8_N; n++) {
            float s = 0.0f;
            for (int k = 0; k < TL_MMA_FP8_K; k++)
                s += tl_code_e4m3_to_f32(a->x[i * TL_MMA_FP8_K + k]) *
                     tl_code_e4m3_to_f32(b->x[n * TL_MMA_FP8_K + k]);
            c->v[i * TL_MMA_FP8_N + n] += s;
        }
}
TL_MMA_FN void tl_frag_load_a_bf16(tl_frag_a_bf16 *a, const uint16_t *A, int lda)
{
    for (int i = 0; i < TL_MMA_BF16_M; i++)
        for (int k = 0; k < TL_MMA_BF16_K; k++) a->x[i * TL_MMA_BF16_K + k] = A[i * lda + k];
}
TL_MMA_FN void tl_frag_load_bt_bf16(tl_frag_b_bf16 *b, const uint16_t *Bt, int ldb)
{
    for (int n = 0; n < TL_MMA_BF16_N; n++)
        for (int k = 0; k < TL_MMA_BF16_K; k++) b->x[n * TL_MMA_BF16_K + k] = Bt[n * ldb + k];
}
TL_MMA_FN void tl_frag_load_a_fp8(tl_frag_a_fp8 *a, const uint8_t *A, int lda)
{
    for (int i = 0; i < TL_MMA_FP8_M; i++)
        for (int k = 0; k < TL_MMA_FP8_K; k++) a->x[i * TL_MMA_FP8_K + k] = A[i * lda + k];
}
TL_MMA_FN void tl_frag_load_bt_fp8(tl_frag_b_fp8 *b, const uint8_t *Bt, int ldb)
{
    for (int n = 0; n < TL_MMA_FP8_N; n++)
        for (int k = 0; k < TL_MMA_FP8_K; k++) b->x[n * TL_MMA_FP8_K + k] = Bt[n * ldb + k];
}
TL_MMA_FN int tl_frag_c_row(int lane, int r) { return r / TL_MMA_BF16_N; }
TL_MMA_FN int tl_frag_c_col(int lane, int r) { return r % TL_MMA_BF16_N; }
#endif

/* ---- common to every target ---- */
TL_MMA_FN void tl_frag_zero(tl_frag_c *c)
{
    for (int r = 0; r < TL_FRAG_C_COUNT; r++) c->v[r] = 0.0f;
}
/* Every lane writes its TL_FRAG_C_COUNT values (GENERIC: the one thread writes the tile; in a
 * GENERIC device build every lane writes the same values, which is redundant but correct). */
TL_MMA_FN void tl_frag_store_c(const tl_frag_c *c, float *C, int ldc)
{
#if defined(TL_MMA_TARGET_GENERIC)
    int l = 0;
#else
    int l = tl_lane();
#endif
    for (int r = 0; r < TL_FRAG_C_COUNT; r++)
        C[tl_frag_c_row(l, r) * ldc + tl_frag_c_col(l, r)] = c->v[r];
}

#endif
