/* kernels/mma_shapes.h: shapes and K-depths of the matrix instructions that kernels/mma.h uses.
 *
 * Plain C (host C, the simulator, tests) and device code (HIP, CUDA) alike: only macros, a
 * struct and a static table. This is the one table; kernels/mma.h takes its tile sizes from the
 * macros below, and tests/test_mma_shapes.c checks that the hardware presets'
 * "matrix_instructions" entries agree with it for every instruction they share.
 *
 * One instruction computes D (M x N, f32) = A (M x K) * B (K x N) + C, for one wave (64 lanes on
 * AMD CDNA) or one warp (32 lanes on NVIDIA). The K-depth is the lesson of the seed: at 16x16
 * tiles BF16 steps K by 16 (gfx942) or 32 (gfx950), FP8 by 32 (gfx942, sm_89+) or 128 (gfx950
 * f8f6f4), so a head dimension of 96 or 192 no longer divides evenly into FP8 steps on gfx950.
 */
#ifndef TL_KERNELS_MMA_SHAPES_H
#define TL_KERNELS_MMA_SHAPES_H

/* ---- compile-time shapes (usable in device code and array sizes) ---- */
/* NVIDIA sm_80+: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 */
#define TL_MMA_SM80_BF16_M 16
#define TL_MMA_SM80_BF16_N 8
#define TL_MMA_SM80_BF16_K 16
/* NVIDIA sm_89+: mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 */
#define TL_MMA_SM89_FP8_M 16
#define TL_MMA_SM89_FP8_N 8
#define TL_MMA_SM89_FP8_K 32
/* AMD gfx942 (CDNA3): v_mfma_f32_16x16x16_bf16, v_mfma_f32_16x16x32_fp8_fp8 (FNUZ) */
#define TL_MMA_GFX942_BF16_M 16
#define TL_MMA_GFX942_BF16_N 16
#define TL_MMA_GFX942_BF16_K 16
#define TL_MMA_GFX942_FP8_M 16
#define TL_MMA_GFX942_FP8_N 16
#define TL_MMA_GFX942_FP8_K 32
/* AMD gfx950 (CDNA4): v_mfma_f32_16x16x32_bf16, v_mfma_scale_f32_16x16x128_f8f6f4 and
 * v_mfma_scale_f32_32x32x64_f8f6f4 (unit E8M0 scales unless the caller gives its block scales) */
#define TL_MMA_GFX950_BF16_M 16
#define TL_MMA_GFX950_BF16_N 16
#define TL_MMA_GFX950_BF16_K 32
#define TL_MMA_GFX950_FP8_M 16
#define TL_MMA_GFX950_FP8_N 16
#define TL_MMA_GFX950_FP8_K 128
#define TL_MMA_GFX950_FP8_32_M 32
#define TL_MMA_GFX950_FP8_32_N 32
#define TL_MMA_GFX950_FP8_32_K 64
/* The plain loop (any other target, and the host): the gfx942 shapes. */
#define TL_MMA_GENERIC_BF16_M 16
#define TL_MMA_GENERIC_BF16_N 16
#define TL_MMA_GENERIC_BF16_K 16
#define TL_MMA_GENERIC_FP8_M 16
#define TL_MMA_GENERIC_FP8_N 16
#define TL_MMA_GENERIC_FP8_K 32

/* ---- the same facts as a table, for host code and tests ---- */
typedef struct {
    const char *name;   /* the ISA's own name, lower case */
    const char *target; /* "sm_80", "sm_89", "gfx942", "gfx950", "generic" */
    int m, n, k;        /* one instruction's D is m x n, its reduction depth k */
    int lanes;          /* threads that execute it together (wave or warp) */
    const char *a, *b;  /* operand formats in the presets' words: "bf16", "fp8" (E4M3; FNUZ on
                           gfx942); the f8f6f4 instructions also take "fp6" and "fp4" */
} tl_mma_shape;

static const tl_mma_shape tl_mma_shapes[] = {
    {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "sm_80", 16, 8, 16, 32, "bf16", "bf16"},
    {"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_89", 16, 8, 32, 32, "fp8", "fp8"},
    {"v_mfma_f32_16x16x16_bf16", "gfx942", 16, 16, 16, 64, "bf16", "bf16"},
    {"v_mfma_f32_16x16x32_fp8_fp8", "gfx942", 16, 16, 32, 64, "fp8", "fp8"},
    {"v_mfma_f32_16x16x32_bf16", "gfx950", 16, 16, 32, 64, "bf16", "bf16"},
    {"v_mfma_scale_f32_16x16x128_f8f6f4", "gfx950", 16, 16, 128, 64, "fp8", "fp8"},
    {"v_mfma_scale_f32_32x32x64_f8f6f4", "gfx950", 32, 32, 64, 64, "fp8", "fp8"},
    {"generic.16x16x16.bf16", "generic", 16, 16, 16, 1, "bf16", "bf16"},
    {"generic.16x16x32.e4m3", "generic", 16, 16, 32, 1, "fp8", "fp8"},
};
#define TL_MMA_SHAPE_COUNT ((int)(sizeof tl_mma_shapes / sizeof tl_mma_shapes[0]))

/* The entry named `name` (exact, lower case), or NULL. Cost: a linear scan of 9 entries. */
static inline const tl_mma_shape *tl_mma_shape_find(const char *name)
{
    for (int i = 0; i < TL_MMA_SHAPE_COUNT; i++) {
        const char *a = tl_mma_shapes[i].name, *b = name;
        while (*a && *a == *b) a++, b++;
        if (*a == '\0' && *b == '\0') return &tl_mma_shapes[i];
    }
    return (const tl_mma_shape *)0;
}

#endif
