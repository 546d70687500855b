/* tests/test_executor.c: the CPU executor itself, on both AMD targets (tests/executor_kernels.hip):
 * every matrix step of kernels/mma.h against the host product of the same codes, the hazards it
 * must report (with the kernel's name and the source line), LDS poison, the dispatch packet. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../core/tl.h"
#include "../executor/executor.h"
#include "../numerics/codes.h"
#include "../numerics/formats.h"

#define ARCH_FNS(a)                                                                                     \
    int tl_test_mma_bf16_##a(const uint16_t *A, const uint16_t *Bt, float *C, int *k);                \
    int tl_test_mma_fp8_##a(const uint8_t *A, const uint8_t *Bt, float *C, int *k);                   \
    int tl_test_divergent_shuffle_##a(float *out);                                                    \
    int tl_test_barrier_skipped_##a(float *out);                                                      \
    int tl_test_two_barriers_##a(float *out);                                                         \
    int tl_test_shuffle_exited_##a(float *out);                                                       \
    int tl_test_lds_poison_##a(uint32_t *out);                                                        \
    int tl_test_grid_##a(uint32_t *out);                                                              \
    int tl_test_error_text_##a(int e, char *buf, size_t n);
ARCH_FNS(gfx942)
ARCH_FNS(gfx950)
int tl_test_mma_scaled_gfx950(int fp4, const uint8_t *A, const uint8_t *B, const uint8_t *sa, const uint8_t *sb, float *C);

typedef struct {
    const char *arch;
    int (*mma_bf16)(const uint16_t *, const uint16_t *, float *, int *);
    int (*mma_fp8)(const uint8_t *, const uint8_t *, float *, int *);
    int (*divergent_shuffle)(float *);
    int (*barrier_skipped)(float *);
    int (*two_barriers)(float *);
    int (*shuffle_exited)(float *);
    int (*lds_poison)(uint32_t *);
    int (*grid)(uint32_t *);
    int (*error_text)(int, char *, size_t);
} arch_fns;
#define ARCH_TABLE(a)                                                                                   \
    {#a, tl_test_mma_bf16_##a, tl_test_mma_fp8_##a, tl_test_divergent_shuffle_##a, tl_test_barrier_skipped_##a, \
     tl_test_two_barriers_##a, tl_test_shuffle_exited_##a, tl_test_lds_poison_##a, tl_test_grid_##a, tl_test_error_text_##a}
static const arch_fns ARCHES[2] = {ARCH_TABLE(gfx942), ARCH_TABLE(gfx950)};

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
/* a random finite code of an 8-bit format (never NaN) */
static uint8_t finite_code(tl_numfmt f)
{
    const float *dec = tl_decode_table8(f);
    for (;;) {
        const uint8_t c = (uint8_t)next_u32();
        if (isfinite(dec[c])) return c;
    }
}

static void use(const arch_fns *a) { tl_emu_set_target(tl_emu_find_target(a->arch)); }

/* |got - want| within float32 rounding of a K-term sum of exact products */
static void assert_product(const float *C, const double *want, int K, const char *what)
{
    for (int i = 0; i < 256; i++) {
        const double tol = 1e-6 * (fabs(want[i]) + 1.0) * K;
        if (fabs(C[i] - want[i]) > tol) fail_msg("%s: C[%d][%d] = %g, want %g", what, i / 16, i % 16, C[i], want[i]);
    }
}

static void test_mma_bf16(void **state)
{
    (void)state;
    for (int a = 0; a < 2; a++) {
        use(&ARCHES[a]);
        uint16_t A[16 * 32], Bt[16 * 32];
        float C[256];
        int K = 0;
        for (int i = 0; i < 16 * 32; i++) {
            A[i] = tl_code_bf16_from_f32((float)((int)(next_u32() % 2001) - 1000) / 256.0f);
            Bt[i] = tl_code_bf16_from_f32((float)((int)(next_u32() % 2001) - 1000) / 512.0f);
        }
        assert_int_equal(ARCHES[a].mma_bf16(A, Bt, C, &K), 0);
        assert_true(K == (a ? 32 : 16));
        double want[256];
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)tl_code_bf16_to_f32(A[i * K + k]) * tl_code_bf16_to_f32(Bt[j * K + k]);
                want[i * 16 + j] = s;
            }
        assert_product(C, want, K, ARCHES[a].arch);
    }
}

/* fp8: FNUZ codes on gfx942 (v_mfma_f32_16x16x32_fp8_fp8), OCP E4M3FN on gfx950 (the scaled
 * f8f6f4 form at unit scales, K = 128) */
static void test_mma_fp8(void **state)
{
    (void)state;
    for (int a = 0; a < 2; a++) {
        use(&ARCHES[a]);
        const tl_numfmt f = a ? TL_NF_E4M3FN : TL_NF_E4M3FNUZ;
        const float *dec = tl_decode_table8(f);
        uint8_t A[16 * 128], Bt[16 * 128];
        float C[256];
        int K = 0;
        for (int i = 0; i < 16 * 128; i++) A[i] = finite_code(f), Bt[i] = finite_code(f);
        assert_int_equal(ARCHES[a].mma_fp8(A, Bt, C, &K), 0);
        assert_true(K == (a ? 128 : 32));
        double want[256];
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)dec[A[i * K + k]] * dec[Bt[j * K + k]];
                want[i * 16 + j] = s;
            }
        assert_product(C, want, K, ARCHES[a].arch);
    }
}

/* gfx950's scaled step: E4M3 A with E8M0 scales per row and 32-deep block, B E4M3 or E2M1 with its
 * own: the scales go to the lanes kernels/mma.h names */
static void test_mma_scaled(void **state)
{
    (void)state;
    use(&ARCHES[1]);
    const float *e4m3 = tl_decode_table8(TL_NF_E4M3FN), *e2m1 = tl_decode_table8(TL_NF_E2M1);
    for (int fp4 = 0; fp4 < 2; fp4++) {
        uint8_t A[16 * 128], B[16 * 128], sa[64], sb[64];
        float C[256];
        for (int i = 0; i < 16 * 128; i++) A[i] = finite_code(TL_NF_E4M3FN), B[i] = fp4 ? (uint8_t)next_u32() : finite_code(TL_NF_E4M3FN);
        for (int i = 0; i < 64; i++) sa[i] = (uint8_t)(120 + next_u32() % 14), sb[i] = (uint8_t)(120 + next_u32() % 14);
        assert_int_equal(tl_test_mma_scaled_gfx950(fp4, A, B, sa, sb, C), 0);
        double want[256];
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                double s = 0;
                for (int k = 0; k < 128; k++) {
                    const double b = fp4 ? e2m1[(B[j * 64 + k / 2] >> (4 * (k % 2))) & 15] : e4m3[B[j * 128 + k]];
                    s += e4m3[A[i * 128 + k]] * ldexp(1.0, sa[i * 4 + k / 32] - 127) * b * ldexp(1.0, sb[j * 4 + k / 32] - 127);
                }
                want[i * 16 + j] = s;
            }
        assert_product(C, want, 128, fp4 ? "gfx950 E4M3 x E2M1 scaled" : "gfx950 E4M3 x E4M3 scaled");
    }
}

static void expect_error(const arch_fns *a, int rc, const char *const *needles)
{
    char msg[2048];
    assert_int_not_equal(rc, 0);
    a->error_text(rc, msg, sizeof msg);
    for (const char *const *n = needles; *n; n++)
        if (!strstr(msg, *n)) fail_msg("%s: the executor's report '%s' does not name '%s'", a->arch, msg, *n);
}

static void test_hazards(void **state)
{
    (void)state;
    for (int a = 0; a < 2; a++) {
        const arch_fns *f = &ARCHES[a];
        use(f);
        float out[256];
        static const char *const div[] = {"divergent_shuffle_kernel", "wave 0 diverges", "lanes 0-31", "lanes 32-63",
                                          "__shfl", "executor_kernels.hip:", NULL};
        expect_error(f, f->divergent_shuffle(out), div);
        static const char *const skip[] = {"barrier_skipped_kernel", "work-items 64-127 have exited", "never reach the barrier",
                                           "executor_kernels.hip:", NULL};
        expect_error(f, f->barrier_skipped(out), skip);
        static const char *const two[] = {"two_barriers_kernel", "another barrier", NULL};
        expect_error(f, f->two_barriers(out), two);
        static const char *const exited[] = {"shuffle_exited_kernel", "lane 0 reads lane 32, which has exited", NULL};
        expect_error(f, f->shuffle_exited(out), exited);
    }
}

static void test_lds_poison_and_grid(void **state)
{
    (void)state;
    for (int a = 0; a < 2; a++) {
        const arch_fns *f = &ARCHES[a];
        use(f);
        uint32_t w[128], g[3 * 256];
        assert_int_equal(f->lds_poison(w), 0);
        for (uint32_t i = 0; i < 128; i++) assert_int_equal(w[i], i % 2 ? 0xFFFFFFFFu : i);
        assert_int_equal(f->grid(g), 0);
        for (uint32_t i = 0; i < 3 * 256; i++) assert_int_equal(g[i], 3000u + i / 256);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mma_bf16), cmocka_unit_test(test_mma_fp8), cmocka_unit_test(test_mma_scaled),
        cmocka_unit_test(test_hazards), cmocka_unit_test(test_lds_poison_and_grid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
