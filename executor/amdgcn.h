/* executor/amdgcn.h: the amdgcn builtins the kernels use, on the CPU executor (included by
 * executor/hip_emu.h). Each __builtin_amdgcn_X is a macro for tl_emu_amdgcn_X, with the builtin's
 * own operand types (clang's ext vectors), so the kernels' calls compile unchanged. The semantics
 * are executor/amdgcn.c's (amdgcn_ops.h says what they are and what is assumed); the wave-level
 * ones (every MFMA) go through tl_emu_wave: all 64 lanes together, at the same call site.
 * A builtin a kernel uses that is missing here fails to compile (the name is undeclared on the host).
 */
#ifndef TL_EXECUTOR_AMDGCN_H
#define TL_EXECUTOR_AMDGCN_H

#include "amdgcn_ops.h"

#if defined(__gfx950__)
#define TL_EMU_GFX950 1
#else
#define TL_EMU_GFX950 0
#endif

typedef short tl_emu_i16x4 __attribute__((ext_vector_type(4)));
typedef __bf16 tl_emu_bf16x8 __attribute__((ext_vector_type(8)));
typedef float tl_emu_f32x4 __attribute__((ext_vector_type(4)));
typedef float tl_emu_f32x2 __attribute__((ext_vector_type(2)));
typedef int tl_emu_i32x8 __attribute__((ext_vector_type(8)));

/* One MFMA of this lane: A, B (bytes of their VGPRs), C; scales for the scaled form. */
TL_EMU_WAVE_FN static tl_emu_f32x4 tl_emu_mfma(const void *a, const void *b, size_t ab_bytes, const tl_emu_f32x4 &c,
                                                          uint32_t imm, uint32_t scale_a, uint32_t scale_b,
                                                          const char *what, const void *site)
{
    tl_emu_mfma_in in;
    memset(&in, 0, sizeof in);
    memcpy(in.a, a, ab_bytes);
    memcpy(in.b, b, ab_bytes);
    for (int i = 0; i < 4; i++) in.c[i] = c[i];
    in.scale_a = scale_a;
    in.scale_b = scale_b;
    tl_emu_mfma_out out;
    tl_emu_wave(what, tl_emu_op_mfma, &in, &out, imm, site);
    tl_emu_f32x4 d;
    for (int i = 0; i < 4; i++) d[i] = out.d[i];
    return d;
}

/* cbsz / abid / blgp of the classic forms must be 0 (the kernels broadcast nothing). */
TL_EMU_WAVE_FN static tl_emu_f32x4 tl_emu_amdgcn_mfma_f32_16x16x16bf16_1k(const tl_emu_i16x4 &a, const tl_emu_i16x4 &b,
                                                                                     const tl_emu_f32x4 &c, int cbsz, int abid,
                                                                                     int blgp)
{
    if (cbsz || abid || blgp) tl_emu_trap("v_mfma_f32_16x16x16_bf16: cbsz/abid/blgp broadcasts are not emulated");
    return tl_emu_mfma(&a, &b, sizeof a, c, TL_EMU_MFMA_IMM(TL_EMU_MFMA_16X16X16_BF16, TL_EMU_GFX950, 0, 0, 0, 0), 0, 0,
                       "v_mfma_f32_16x16x16_bf16", TL_EMU_SITE());
}
#define __builtin_amdgcn_mfma_f32_16x16x16bf16_1k tl_emu_amdgcn_mfma_f32_16x16x16bf16_1k

TL_EMU_WAVE_FN static tl_emu_f32x4 tl_emu_amdgcn_mfma_f32_16x16x32_fp8_fp8(long a, long b, const tl_emu_f32x4 &c, int cbsz,
                                                                                      int abid, int blgp)
{
    if (cbsz || abid || blgp) tl_emu_trap("v_mfma_f32_16x16x32_fp8_fp8: cbsz/abid/blgp broadcasts are not emulated");
    return tl_emu_mfma(&a, &b, sizeof a, c, TL_EMU_MFMA_IMM(TL_EMU_MFMA_16X16X32_FP8, TL_EMU_GFX950, 0, 0, 0, 0), 0, 0,
                       "v_mfma_f32_16x16x32_fp8_fp8", TL_EMU_SITE());
}
#define __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8 tl_emu_amdgcn_mfma_f32_16x16x32_fp8_fp8

#if defined(__gfx950__)
TL_EMU_WAVE_FN static tl_emu_f32x4 tl_emu_amdgcn_mfma_f32_16x16x32_bf16(const tl_emu_bf16x8 &a, const tl_emu_bf16x8 &b,
                                                                                   const tl_emu_f32x4 &c, int cbsz, int abid,
                                                                                   int blgp)
{
    if (cbsz || abid || blgp) tl_emu_trap("v_mfma_f32_16x16x32_bf16: cbsz/abid/blgp broadcasts are not emulated");
    return tl_emu_mfma(&a, &b, sizeof a, c, TL_EMU_MFMA_IMM(TL_EMU_MFMA_16X16X32_BF16, 1, 0, 0, 0, 0), 0, 0,
                       "v_mfma_f32_16x16x32_bf16", TL_EMU_SITE());
}
#define __builtin_amdgcn_mfma_f32_16x16x32_bf16 tl_emu_amdgcn_mfma_f32_16x16x32_bf16

/* A's format cbsz and B's blgp (0 E4M3, 1 E5M2, 2 E2M3, 3 E3M2, 4 E2M1), and each operand's scale
 * VGPR with the byte op_sel picks (0..3). */
TL_EMU_WAVE_FN static tl_emu_f32x4 tl_emu_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(
    const tl_emu_i32x8 &a, const tl_emu_i32x8 &b, const tl_emu_f32x4 &c, int fmt_a, int fmt_b, int opsel_a, int scale_a, int opsel_b, int scale_b)
{
    if (fmt_a < 0 || fmt_a > 4 || fmt_b < 0 || fmt_b > 4 || opsel_a < 0 || opsel_a > 3 || opsel_b < 0 || opsel_b > 3)
        tl_emu_trap("v_mfma_scale_f32_16x16x128_f8f6f4: format or op_sel out of range");
    return tl_emu_mfma(&a, &b, sizeof a, c,
                       TL_EMU_MFMA_IMM(TL_EMU_MFMA_16X16X128_F8F6F4, 1, fmt_a, fmt_b, opsel_a, opsel_b),
                       (uint32_t)scale_a, (uint32_t)scale_b, "v_mfma_scale_f32_16x16x128_f8f6f4", TL_EMU_SITE());
}
#define __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4 tl_emu_amdgcn_mfma_scale_f32_16x16x128_f8f6f4
#endif

/* ---- per-lane builtins ---- */
static inline tl_emu_f32x2 tl_emu_amdgcn_cvt_pk_f32_fp8(int src, bool word)
{
    float lo, hi;
    tl_emu_cvt_pk_f32_fp8((uint32_t)src, word ? 1 : 0, TL_EMU_GFX950, &lo, &hi);
    return (tl_emu_f32x2){lo, hi};
}
#define __builtin_amdgcn_cvt_pk_f32_fp8 tl_emu_amdgcn_cvt_pk_f32_fp8
static inline int tl_emu_amdgcn_cvt_pk_fp8_f32(float lo, float hi, int old, bool word)
{
    return (int)tl_emu_cvt_pk_fp8_f32(lo, hi, (uint32_t)old, word ? 1 : 0, TL_EMU_GFX950);
}
#define __builtin_amdgcn_cvt_pk_fp8_f32 tl_emu_amdgcn_cvt_pk_fp8_f32
static inline unsigned tl_emu_amdgcn_perm(unsigned a, unsigned b, unsigned sel) { return tl_emu_perm(a, b, sel); }
#define __builtin_amdgcn_perm tl_emu_amdgcn_perm
/* v_log_f32 / v_exp_f32: log2 and 2^x (the hardware's are within 1 ulp; these are libm's) */
#define __builtin_amdgcn_logf log2f
#define __builtin_amdgcn_exp2f exp2f
#define __builtin_amdgcn_fence(order, scope) __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __builtin_amdgcn_s_sleep(n) tl_emu_spin()
#define __builtin_amdgcn_s_memrealtime() tl_emu_realtime()
#define __builtin_amdgcn_dispatch_ptr() tl_emu_dispatch_packet()
#define __builtin_amdgcn_workitem_id_x() (tl_emu_self()->thread.x)
#define __builtin_amdgcn_workgroup_id_x() (tl_emu_self()->block.x)
TL_EMU_WAVE_FN static void tl_emu_amdgcn_s_barrier(void) { tl_emu_barrier(TL_EMU_SITE()); }
#define __builtin_amdgcn_s_barrier tl_emu_amdgcn_s_barrier
/* v_atomic_inc: returns *p and stores (*p >= limit) ? 0 : *p + 1 (hip_emu.h's atomicInc) */
static inline unsigned tl_emu_amdgcn_atomic_inc32(unsigned *p, unsigned limit, int order, const char *scope)
{
    return atomicInc(p, limit);
}
#define __builtin_amdgcn_atomic_inc32 tl_emu_amdgcn_atomic_inc32

#endif
