/* simulator/mfma.c: the MFMA instruction table and its layout rules (see mfma.h). */
#include "mfma.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* cycles: CDNA3 ISA passes x 4; gfx950 from the CDNA4 ISA / FACTS.md (the CDNA3 16-bit forms run
 * at half the new 16x16x32 / 32x32x16 rate there; f64 16x16x4 takes 64). */
static const tl_mfma_instr table[] = {
    /* ---- FP32 ---- */
    {"v_mfma_f32_32x32x1_2b_f32", "v_mfma_f32_32x32x1f32", 32, 32, 1, 2, "f32", "f32", "f32", 32, 32, 0, 64, 64},
    {"v_mfma_f32_16x16x1_4b_f32", "v_mfma_f32_16x16x1f32", 16, 16, 1, 4, "f32", "f32", "f32", 32, 32, 0, 32, 32},
    {"v_mfma_f32_4x4x1_16b_f32", "v_mfma_f32_4x4x1f32", 4, 4, 1, 16, "f32", "f32", "f32", 32, 32, 0, 8, 8},
    {"v_mfma_f32_32x32x2_f32", "v_mfma_f32_32x32x2f32", 32, 32, 2, 1, "f32", "f32", "f32", 32, 32, 0, 64, 64},
    {"v_mfma_f32_16x16x4_f32", "v_mfma_f32_16x16x4f32", 16, 16, 4, 1, "f32", "f32", "f32", 32, 32, 0, 32, 32},
    /* ---- FP16 ---- */
    {"v_mfma_f32_32x32x4_2b_f16", "v_mfma_f32_32x32x4f16", 32, 32, 4, 2, "f16", "f16", "f32", 16, 32, 0, 64, 64},
    {"v_mfma_f32_16x16x4_4b_f16", "v_mfma_f32_16x16x4f16", 16, 16, 4, 4, "f16", "f16", "f32", 16, 32, 0, 32, 32},
    {"v_mfma_f32_4x4x4_16b_f16", "v_mfma_f32_4x4x4f16", 4, 4, 4, 16, "f16", "f16", "f32", 16, 32, 0, 8, 8},
    {"v_mfma_f32_32x32x8_f16", "v_mfma_f32_32x32x8f16", 32, 32, 8, 1, "f16", "f16", "f32", 16, 32, 0, 32, 32},
    {"v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16f16", 16, 16, 16, 1, "f16", "f16", "f32", 16, 32, 0, 16, 16},
    /* ---- BF16 (CDNA3's bf16 are CDNA2's "_1k" forms) ---- */
    {"v_mfma_f32_32x32x4_2b_bf16", "v_mfma_f32_32x32x4bf16_1k", 32, 32, 4, 2, "bf16", "bf16", "f32", 16, 32, 0, 64, 64},
    {"v_mfma_f32_16x16x4_4b_bf16", "v_mfma_f32_16x16x4bf16_1k", 16, 16, 4, 4, "bf16", "bf16", "f32", 16, 32, 0, 32, 32},
    {"v_mfma_f32_4x4x4_16b_bf16", "v_mfma_f32_4x4x4bf16_1k", 4, 4, 4, 16, "bf16", "bf16", "f32", 16, 32, 0, 8, 8},
    {"v_mfma_f32_32x32x8_bf16", "v_mfma_f32_32x32x8bf16_1k", 32, 32, 8, 1, "bf16", "bf16", "f32", 16, 32, 0, 32, 32},
    {"v_mfma_f32_16x16x16_bf16", "v_mfma_f32_16x16x16bf16_1k", 16, 16, 16, 1, "bf16", "bf16", "f32", 16, 32, 0, 16, 16},
    /* ---- INT8 ---- */
    {"v_mfma_i32_32x32x4_2b_i8", "v_mfma_i32_32x32x4i8", 32, 32, 4, 2, "i8", "i8", "i32", 8, 32, 0, 64, 64},
    {"v_mfma_i32_16x16x4_4b_i8", "v_mfma_i32_16x16x4i8", 16, 16, 4, 4, "i8", "i8", "i32", 8, 32, 0, 32, 32},
    {"v_mfma_i32_4x4x4_16b_i8", "v_mfma_i32_4x4x4i8", 4, 4, 4, 16, "i8", "i8", "i32", 8, 32, 0, 8, 8},
    {"v_mfma_i32_32x32x16_i8", NULL, 32, 32, 16, 1, "i8", "i8", "i32", 8, 32, 0, 32, 32},
    {"v_mfma_i32_16x16x32_i8", NULL, 16, 16, 32, 1, "i8", "i8", "i32", 8, 32, 0, 16, 16},
    /* ---- XF32 (gfx942 only) ---- */
    {"v_mfma_f32_16x16x8_xf32", "v_mfma_f32_16x16x8xf32", 16, 16, 8, 1, "xf32", "xf32", "f32", 32, 32, 0, 16, 0},
    {"v_mfma_f32_32x32x4_xf32", "v_mfma_f32_32x32x4xf32", 32, 32, 4, 1, "xf32", "xf32", "f32", 32, 32, 0, 32, 0},
    /* ---- FP8 / BF8 (FNUZ on gfx942, OCP on gfx950) ---- */
    {"v_mfma_f32_16x16x32_fp8_fp8", NULL, 16, 16, 32, 1, "fp8", "fp8", "f32", 8, 32, 0, 16, 16},
    {"v_mfma_f32_16x16x32_fp8_bf8", NULL, 16, 16, 32, 1, "fp8", "bf8", "f32", 8, 32, 0, 16, 16},
    {"v_mfma_f32_16x16x32_bf8_fp8", NULL, 16, 16, 32, 1, "bf8", "fp8", "f32", 8, 32, 0, 16, 16},
    {"v_mfma_f32_16x16x32_bf8_bf8", NULL, 16, 16, 32, 1, "bf8", "bf8", "f32", 8, 32, 0, 16, 16},
    {"v_mfma_f32_32x32x16_fp8_fp8", NULL, 32, 32, 16, 1, "fp8", "fp8", "f32", 8, 32, 0, 32, 32},
    {"v_mfma_f32_32x32x16_fp8_bf8", NULL, 32, 32, 16, 1, "fp8", "bf8", "f32", 8, 32, 0, 32, 32},
    {"v_mfma_f32_32x32x16_bf8_fp8", NULL, 32, 32, 16, 1, "bf8", "fp8", "f32", 8, 32, 0, 32, 32},
    {"v_mfma_f32_32x32x16_bf8_bf8", NULL, 32, 32, 16, 1, "bf8", "bf8", "f32", 8, 32, 0, 32, 32},
    /* ---- FP64 ---- */
    {"v_mfma_f64_16x16x4_f64", "v_mfma_f64_16x16x4f64", 16, 16, 4, 1, "f64", "f64", "f64", 64, 64, 0, 32, 64},
    {"v_mfma_f64_4x4x4_4b_f64", "v_mfma_f64_4x4x4f64", 4, 4, 4, 4, "f64", "f64", "f64", 64, 64, 0, 16, 32},
    /* ---- gfx950 (CDNA4) ---- */
    {"v_mfma_f32_16x16x32_bf16", NULL, 16, 16, 32, 1, "bf16", "bf16", "f32", 16, 32, 0, 0, 16},
    {"v_mfma_f32_16x16x32_f16", NULL, 16, 16, 32, 1, "f16", "f16", "f32", 16, 32, 0, 0, 16},
    {"v_mfma_f32_32x32x16_bf16", NULL, 32, 32, 16, 1, "bf16", "bf16", "f32", 16, 32, 0, 0, 32},
    {"v_mfma_f32_32x32x16_f16", NULL, 32, 32, 16, 1, "f16", "f16", "f32", 16, 32, 0, 0, 32},
    {"v_mfma_i32_16x16x64_i8", NULL, 16, 16, 64, 1, "i8", "i8", "i32", 8, 32, 0, 0, 16},
    {"v_mfma_i32_32x32x32_i8", NULL, 32, 32, 32, 1, "i8", "i8", "i32", 8, 32, 0, 0, 32},
    {"v_mfma_f32_16x16x128_f8f6f4_fp8", "v_mfma_f32_16x16x128_f8f6f4", 16, 16, 128, 1, "fp8", "fp8", "f32", 8, 32, 1, 0, 32},
    {"v_mfma_f32_16x16x128_f8f6f4_fp6", NULL, 16, 16, 128, 1, "fp6", "fp6", "f32", 6, 32, 1, 0, 16},
    {"v_mfma_f32_16x16x128_f8f6f4_fp4", NULL, 16, 16, 128, 1, "fp4", "fp4", "f32", 4, 32, 1, 0, 16},
    {"v_mfma_f32_32x32x64_f8f6f4_fp8", "v_mfma_f32_32x32x64_f8f6f4", 32, 32, 64, 1, "fp8", "fp8", "f32", 8, 32, 1, 0, 64},
    {"v_mfma_f32_32x32x64_f8f6f4_fp6", NULL, 32, 32, 64, 1, "fp6", "fp6", "f32", 6, 32, 1, 0, 32},
    {"v_mfma_f32_32x32x64_f8f6f4_fp4", NULL, 32, 32, 64, 1, "fp4", "fp4", "f32", 4, 32, 1, 0, 32},
};
#define NTABLE ((int)(sizeof table / sizeof table[0]))

static int arch_index(const char *arch)
{
    if (!arch) return -1;
    if (strcmp(arch, "gfx942") == 0) return 0;
    if (strcmp(arch, "gfx950") == 0) return 1;
    return -1;
}

int tl_mfma_cycles(const tl_mfma_instr *in, const char *arch)
{
    int a = arch_index(arch);
    if (!in || a < 0) return 0;
    return a == 0 ? in->cycles_gfx942 : in->cycles_gfx950;
}

int tl_mfma_list(const char *arch, const tl_mfma_instr **out, int cap)
{
    int n = 0;
    if (arch_index(arch) < 0) return 0;
    for (int i = 0; i < NTABLE; i++) {
        if (!tl_mfma_cycles(&table[i], arch)) continue;
        if (out && n < cap) out[n] = &table[i];
        n++;
    }
    return n;
}

/* Lower-cases src into dst and turns "v_mfma_scale_" into "v_mfma_". */
static void normalize(const char *src, char *dst, size_t cap)
{
    size_t n = 0;
    for (; src[n] && n + 1 < cap; n++) dst[n] = (char)tolower((unsigned char)src[n]);
    dst[n] = '\0';
    const char *scale = "v_mfma_scale_";
    size_t ls = strlen(scale);
    if (strncmp(dst, scale, ls) == 0) memmove(dst + 7, dst + ls, strlen(dst + ls) + 1);
}

const tl_mfma_instr *tl_mfma_find(const char *arch, const char *name)
{
    if (!name || arch_index(arch) < 0) return NULL;
    char want[96];
    normalize(name, want, sizeof want);
    for (int i = 0; i < NTABLE; i++) {
        const tl_mfma_instr *in = &table[i];
        if (!tl_mfma_cycles(in, arch)) continue;
        if (strcmp(in->name, want) == 0 || (in->alias && strcmp(in->alias, want) == 0)) return in;
    }
    return NULL;
}

static int is_letter(char m) { return m == 'A' || m == 'B' || m == 'C' || m == 'D'; }

int tl_mfma_dims(const tl_mfma_instr *in, char matrix, int *rows, int *cols)
{
    if (!in || !is_letter(matrix))
        return tl_error(TL_EUSAGE, "mfma", "matrix '%c' is not one of A, B, C, D", matrix ? matrix : '?');
    int r, c;
    if (matrix == 'A') r = in->m, c = in->k;
    else if (matrix == 'B') r = in->k, c = in->n;
    else r = in->m, c = in->n;
    if (rows) *rows = r;
    if (cols) *cols = c;
    return 0;
}

int tl_mfma_blocks(const tl_mfma_instr *in, char matrix)
{
    (void)matrix;
    return in ? in->blocks : 0;
}

/* k values one lane holds of A or B (classic layout). */
static int k_per_lane(const tl_mfma_instr *in) { return in->m * in->k * in->blocks / 64; }

int tl_mfma_vgprs(const tl_mfma_instr *in, char matrix)
{
    if (!in) return 0;
    if (matrix == 'A' || matrix == 'B') {
        if (in->f8f6f4) return in->a_bits; /* 32 values x bits / 32 */
        int bits = k_per_lane(in) * in->a_bits;
        return (bits + 31) / 32;
    }
    if (matrix == 'C' || matrix == 'D') return in->blocks * in->m * in->n * in->c_bits / (64 * 32);
    return 0;
}

/* A / B element: f = row of A or column of B, kk = its k. */
static void locate_input(const tl_mfma_instr *in, int block, int f, int kk, tl_mfma_slot *s)
{
    int w = in->a_bits;
    if (in->f8f6f4) {
        int g, e;
        if (w == 8) {
            int half = kk / (in->k / 2), r = kk % (in->k / 2);
            g = r / 16;
            e = 16 * half + r % 16;
        } else {
            g = kk / 32;
            e = kk % 32;
        }
        s->lane = f + in->m * g;
        int bit = e * w;
        s->vgpr = bit / 32;
        s->bit_lo = bit % 32;
        s->bit_hi = s->bit_lo + w - 1;
        return;
    }
    int kpl = k_per_lane(in);
    int e = kk % kpl;
    s->lane = f + in->m * (block + in->blocks * (kk / kpl));
    if (w == 64) {
        s->vgpr = 2 * e;
        s->bit_lo = 0;
        s->bit_hi = 63;
        return;
    }
    int per = 32 / w;
    s->vgpr = e / per;
    s->bit_lo = (e % per) * w;
    s->bit_hi = s->bit_lo + w - 1;
}

static void locate_output(const tl_mfma_instr *in, int block, int i, int j, tl_mfma_slot *s)
{
    if (in->c_bits == 64) {
        if (in->m == 4) {
            s->lane = j + 4 * block + 16 * i;
            s->vgpr = 0;
        } else {
            s->lane = j + 16 * (i % 4);
            s->vgpr = 2 * (i / 4);
        }
        s->bit_lo = 0;
        s->bit_hi = 63;
        return;
    }
    if (in->m == 4) {
        s->lane = j + 4 * block;
        s->vgpr = i;
    } else {
        int groups = 64 / in->n, regs = in->m * in->n / 64;
        s->lane = j + in->n * ((i / 4) % groups);
        s->vgpr = regs * block + 4 * (i / (4 * groups)) + i % 4;
    }
    s->bit_lo = 0;
    s->bit_hi = 31;
}

int tl_mfma_locate_slot(const tl_mfma_instr *in, char matrix, int block, int i, int j,
                        tl_mfma_slot *out)
{
    int rows = 0, cols = 0, st;
    if ((st = tl_mfma_dims(in, matrix, &rows, &cols))) return st;
    if (block < 0 || block >= in->blocks)
        return tl_error(TL_EUSAGE, "mfma", "block %d is out of range [0, %d)", block, in->blocks);
    if (i < 0 || i >= rows || j < 0 || j >= cols)
        return tl_error(TL_EUSAGE, "mfma", "element (%d, %d) is outside %c (%d x %d)", i, j, matrix,
                        rows, cols);
    if (matrix == 'A') locate_input(in, block, i, j, out);
    else if (matrix == 'B') locate_input(in, block, j, i, out);
    else locate_output(in, block, i, j, out);
    return 0;
}

int tl_mfma_locate(const tl_mfma_instr *in, char matrix, int i, int j, int *block, int *lane,
                   int *vgpr, int *bit_lo, int *bit_hi)
{
    int rows = 0, cols = 0, st;
    if ((st = tl_mfma_dims(in, matrix, &rows, &cols))) return st;
    if (i < 0 || i >= rows * in->blocks)
        return tl_error(TL_EUSAGE, "mfma", "row %d is outside %c (%d blocks of %d rows)", i, matrix,
                        in->blocks, rows);
    tl_mfma_slot s;
    if ((st = tl_mfma_locate_slot(in, matrix, i / rows, i % rows, j, &s))) return st;
    if (block) *block = i / rows;
    if (lane) *lane = s.lane;
    if (vgpr) *vgpr = s.vgpr;
    if (bit_lo) *bit_lo = s.bit_lo;
    if (bit_hi) *bit_hi = s.bit_hi;
    return 0;
}
