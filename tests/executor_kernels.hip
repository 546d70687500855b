/* tests/executor_kernels.hip: small kernels that test the CPU executor itself (tests/test_executor.c),
 * compiled for the executor once per AMD target (TL_TEST_ARCH names the entry points' suffix).
 *
 *   - every matrix step of kernels/mma.h (bf16; fp8; gfx950's scaled f8f6f4 with E8M0 block scales,
 *     FP8 x FP8 and FP8 x FP4 as the MX MoE path multiplies) through its own fragment loads, against
 *     the host product: the executor's MFMA reads the operands where simulator/mfma.c says they are;
 *   - hazards the executor must report: a wave-divergent shuffle, a barrier some work-items never
 *     reach, work-items at two different barriers, a shuffle from a lane that has exited;
 *   - LDS a kernel reads before anything wrote it holds the poison (0xFF bytes).
 * Each entry returns the launch's hipError_t; the message is in tl_test_emu_error().
 */
#include "../kernels/gpu.h"
#include "../kernels/mma.h"

#define TL_TEST_CAT2(a, b) a##_##b
#define TL_TEST_CAT(a, b) TL_TEST_CAT2(a, b)
#define TL_TEST_FN(name) extern "C" int TL_TEST_CAT(name, TL_TEST_ARCH)

/* ---- matrix steps: C[16][16] = A[16][K] Bt[16][K]^T through mma.h's fragments ------------- */
static __global__ void mma_bf16_kernel(const uint16_t *A, const uint16_t *Bt, float *C)
{
    tl_frag_a_bf16 a;
    tl_frag_b_bf16 b;
    tl_frag_c c;
    tl_frag_zero(&c);
    tl_frag_load_a_bf16(&a, A, TL_MMA_BF16_K);
    tl_frag_load_bt_bf16(&b, Bt, TL_MMA_BF16_K);
    tl_mma_bf16(&c, &a, &b);
    tl_frag_store_c(&c, C, 16);
}
static __global__ void mma_fp8_kernel(const uint8_t *A, const uint8_t *Bt, float *C)
{
    tl_frag_a_fp8 a;
    tl_frag_b_fp8 b;
    tl_frag_c c;
    tl_frag_zero(&c);
    tl_frag_load_a_fp8(&a, A, TL_MMA_FP8_K);
    tl_frag_load_bt_fp8(&b, Bt, TL_MMA_FP8_K);
    tl_mma_fp8(&c, &a, &b);
    tl_frag_store_c(&c, C, 16);
}

TL_TEST_FN(tl_test_mma_bf16)(const uint16_t *A, const uint16_t *Bt, float *C, int *k)
{
    *k = TL_MMA_BF16_K;
    return tl_launch(mma_bf16_kernel, 1, 64, 0, 0, false, A, Bt, C);
}
TL_TEST_FN(tl_test_mma_fp8)(const uint8_t *A, const uint8_t *Bt, float *C, int *k)
{
    *k = TL_MMA_FP8_K;
    return tl_launch(mma_fp8_kernel, 1, 64, 0, 0, false, A, Bt, C);
}

#if defined(TL_MMA_TARGET_GFX950)
/* One scaled 16x16x128 step, A E4M3 [16][128] codes, B [16][128] codes of format FB (E4M3 bytes,
 * or E2M1 nibbles packed two a byte, low first), E8M0 scales sa[16][4], sb[16][4] (row / column,
 * 32-deep block): lane l loads its bytes in the instruction's layout (kernels/mma.h) and gives the
 * scales of row/column l % 16, block l / 16. */
template <int FB>
static __global__ void mma_scaled_kernel(const uint8_t *A, const uint8_t *B, const uint8_t *sa, const uint8_t *sb, float *C)
{
    const int l = tl_lane(), f = l % 16, g = l / 16;
    tl_i32x8 a, b;
    for (int e = 0; e < 32; e++) { /* FP8: k = 64 (e / 16) + 16 g + e % 16 */
        const int k = 64 * (e / 16) + 16 * g + e % 16;
        ((uint8_t *)&a)[e] = A[f * 128 + k];
    }
    if (FB == TL_F8F6F4_E4M3) {
        for (int e = 0; e < 32; e++) ((uint8_t *)&b)[e] = B[f * 128 + 64 * (e / 16) + 16 * g + e % 16];
    } else { /* FP4: k = 32 g + e, packed in 4 VGPRs */
        for (int e = 0; e < 32; e++) ((uint8_t *)&b)[e] = 0;
        for (int e = 0; e < 16; e++) ((uint8_t *)&b)[e] = B[f * 64 + 16 * g + e];
    }
    tl_frag_c c;
    tl_frag_zero(&c);
    tl_mma_f8f6f4_16x16x128<TL_F8F6F4_E4M3, FB>(&c, a, b, sa[f * 4 + g], sb[f * 4 + g]);
    tl_frag_store_c(&c, C, 16);
}
TL_TEST_FN(tl_test_mma_scaled)(int fp4, const uint8_t *A, const uint8_t *B, const uint8_t *sa, const uint8_t *sb, float *C)
{
    return fp4 ? tl_launch(mma_scaled_kernel<TL_F8F6F4_E2M1>, 1, 64, 0, 0, false, A, B, sa, sb, C)
               : tl_launch(mma_scaled_kernel<TL_F8F6F4_E4M3>, 1, 64, 0, 0, false, A, B, sa, sb, C);
}
#endif

/* ---- hazards ------------------------------------------------------------------------------ */
static __global__ void divergent_shuffle_kernel(float *out)
{
    float v = (float)tl_thread_x();
    if (tl_lane() < 32) v = tl_shfl_xor(v, 1);
    else v = tl_shfl_xor(v, 2);
    out[tl_thread_x()] = v;
}
static __global__ void barrier_skipped_kernel(float *out)
{
    if (tl_thread_x() >= 64) return; /* the second wave never reaches the barrier */
    out[tl_thread_x()] = 1.0f;
    tl_block_sync();
}
static __global__ void two_barriers_kernel(float *out)
{
    if (tl_thread_x() < 64) {
        out[tl_thread_x()] = 1.0f;
        tl_block_sync();
    } else {
        out[tl_thread_x()] = 2.0f;
        tl_block_sync();
    }
}
static __global__ void shuffle_exited_kernel(float *out)
{
    if (tl_lane() >= 32) return;
    out[tl_lane()] = tl_shfl((float)tl_lane(), tl_lane() + 32);
}
/* writes LDS word i only for even i, then every work-item reads word i: odd words are the poison */
static __global__ void lds_poison_kernel(uint32_t *out)
{
    TL_SHARED(uint32_t, w, [128]);
    const unsigned i = tl_thread_x();
    if (i % 2 == 0) w[i] = i;
    tl_block_sync();
    out[i] = w[i];
}
/* the grid's size and the work-group's as the dispatch packet gives them, from every work-item */
static __global__ void grid_kernel(uint32_t *out)
{
    out[tl_block_x() * 256 + tl_thread_x()] = tl_grid_x() * 1000u + tl_block_x();
}

TL_TEST_FN(tl_test_divergent_shuffle)(float *out) { return tl_launch(divergent_shuffle_kernel, 1, 64, 0, 0, false, out); }
TL_TEST_FN(tl_test_barrier_skipped)(float *out) { return tl_launch(barrier_skipped_kernel, 2, 128, 0, 0, false, out); }
TL_TEST_FN(tl_test_two_barriers)(float *out) { return tl_launch(two_barriers_kernel, 1, 128, 0, 0, false, out); }
TL_TEST_FN(tl_test_shuffle_exited)(float *out) { return tl_launch(shuffle_exited_kernel, 1, 64, 0, 0, false, out); }
TL_TEST_FN(tl_test_lds_poison)(uint32_t *out) { return tl_launch(lds_poison_kernel, 1, 128, 0, 0, false, out); }
TL_TEST_FN(tl_test_grid)(uint32_t *out) { return tl_launch(grid_kernel, 3, 256, 0, 0, false, out); }
TL_TEST_FN(tl_test_error_text)(int e, char *buf, size_t n)
{
    snprintf(buf, n, "%s", hipGetErrorString(e));
    return 0;
}
