/* executor/amdgcn.c: the amdgcn builtins' semantics on the CPU executor (executor/amdgcn_ops.h says
 * what each computes and what is assumed where the ISA guides are silent).
 *
 * The MFMA operand layouts are simulator/mfma.c's (the data `tilelab mfma layout` prints), turned
 * once per instruction and operand format into a table of (lane, VGPR, first bit) per element, so a
 * lane-mapping error in a kernel gives a wrong product here exactly as on the hardware. Cost of one
 * 16x16xK instruction: 256 K multiply-adds in double plus 2 x 16 K table look-ups.
 */
#include "amdgcn_ops.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../numerics/codes.h"
#include "../numerics/formats.h"
#include "../simulator/mfma.h"

#define MAXK 128

/* Where element (i, k) of A (i < 16) or (k, j) of B lives: lane, VGPR, first bit, width in bits. */
typedef struct {
    unsigned char lane, vgpr, bit, bits;
} elem_at;

typedef struct {
    int k;                     /* the instruction's K */
    elem_at a[16][MAXK];       /* A[i][k] */
    elem_at b[16][MAXK];       /* B[k][j], stored [j][k] */
    unsigned char c_lane[16][16], c_reg[16][16];
    const float *dec_a, *dec_b; /* the operands' code -> value tables (NULL: bf16) */
} mfma_plan;

/* (instruction, arch, format A, format B) -> plan; built once, read by every OS thread. */
enum { N_INSTR = 5, N_FMT = 5 };
static mfma_plan plans[N_INSTR][2][N_FMT][N_FMT];
static int plan_ok[N_INSTR][2][N_FMT][N_FMT];
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *f8f6f4_name(int fmt)
{
    return fmt <= 1 ? "v_mfma_f32_16x16x128_f8f6f4_fp8" : fmt <= 3 ? "v_mfma_f32_16x16x128_f8f6f4_fp6" : "v_mfma_f32_16x16x128_f8f6f4_fp4";
}

/* The instruction entry of simulator/mfma.c for one operand of `instr` in format fmt. */
static const tl_mfma_instr *operand_instr(int instr, int gfx950, int fmt)
{
    const char *arch = gfx950 ? "gfx950" : "gfx942";
    switch (instr) {
    case TL_EMU_MFMA_16X16X16_BF16: return tl_mfma_find(arch, "v_mfma_f32_16x16x16_bf16");
    case TL_EMU_MFMA_16X16X32_BF16: return tl_mfma_find(arch, "v_mfma_f32_16x16x32_bf16");
    case TL_EMU_MFMA_16X16X32_FP8: return tl_mfma_find(arch, "v_mfma_f32_16x16x32_fp8_fp8");
    case TL_EMU_MFMA_16X16X128_F8F6F4: return tl_mfma_find(arch, f8f6f4_name(fmt));
    default: return NULL;
    }
}

/* The decoder of an 8-bit-or-narrower code of format fmt on the arch (NULL: bf16 operand). */
static const float *decoder(int instr, int gfx950, int fmt)
{
    if (instr == TL_EMU_MFMA_16X16X16_BF16 || instr == TL_EMU_MFMA_16X16X32_BF16) return NULL;
    if (instr == TL_EMU_MFMA_16X16X32_FP8) return tl_decode_table8(gfx950 ? TL_NF_E4M3FN : TL_NF_E4M3FNUZ);
    static const tl_numfmt f[N_FMT] = {TL_NF_E4M3FN, TL_NF_E5M2, TL_NF_E2M3, TL_NF_E3M2, TL_NF_E2M1};
    return tl_decode_table8(f[fmt]);
}

static int fill_operand(const tl_mfma_instr *in, char matrix, int k_total, elem_at (*t)[MAXK])
{
    for (int f = 0; f < 16; f++)
        for (int k = 0; k < k_total; k++) {
            tl_mfma_slot s;
            const int rc = matrix == 'A' ? tl_mfma_locate_slot(in, 'A', 0, f, k, &s) : tl_mfma_locate_slot(in, 'B', 0, k, f, &s);
            if (rc) return rc;
            t[f][k] = (elem_at){(unsigned char)s.lane, (unsigned char)s.vgpr, (unsigned char)s.bit_lo,
                                (unsigned char)(s.bit_hi - s.bit_lo + 1)};
        }
    return 0;
}

static const mfma_plan *get_plan(int instr, int gfx950, int fa, int fb, char *why, size_t why_n)
{
    if (instr < 1 || instr >= N_INSTR || fa < 0 || fa >= N_FMT || fb < 0 || fb >= N_FMT) {
        snprintf(why, why_n, "unknown MFMA %d (formats %d, %d)", instr, fa, fb);
        return NULL;
    }
    mfma_plan *p = &plans[instr][gfx950][fa][fb];
    if (__atomic_load_n(&plan_ok[instr][gfx950][fa][fb], __ATOMIC_ACQUIRE)) return p;
    pthread_mutex_lock(&plan_lock);
    int ok = plan_ok[instr][gfx950][fa][fb];
    if (!ok) {
        const tl_mfma_instr *ia = operand_instr(instr, gfx950, fa), *ib = operand_instr(instr, gfx950, fb);
        ok = ia && ib && ia->m == 16 && ia->n == 16 && ia->k <= MAXK && ia->k == ib->k;
        if (ok) {
            p->k = ia->k;
            ok = !fill_operand(ia, 'A', p->k, p->a) && !fill_operand(ib, 'B', p->k, p->b);
            for (int i = 0; i < 16 && ok; i++)
                for (int j = 0; j < 16 && ok; j++) {
                    int lane, vgpr;
                    ok = !tl_mfma_locate(ia, 'C', i, j, NULL, &lane, &vgpr, NULL, NULL);
                    p->c_lane[i][j] = (unsigned char)lane;
                    p->c_reg[i][j] = (unsigned char)vgpr;
                }
            p->dec_a = decoder(instr, gfx950, fa);
            p->dec_b = decoder(instr, gfx950, fb);
        }
        if (ok) __atomic_store_n(&plan_ok[instr][gfx950][fa][fb], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&plan_lock);
    if (!ok) {
        snprintf(why, why_n, "MFMA %d on %s: no 16x16 layout in simulator/mfma.c", instr, gfx950 ? "gfx950" : "gfx942");
        return NULL;
    }
    return p;
}

/* The bits of one element from a lane's registers (a field may run into the next VGPR: FP6). */
static inline uint32_t field(const uint32_t *regs, elem_at e)
{
    uint64_t w = regs[e.vgpr];
    if (e.vgpr + 1 < 8) w |= (uint64_t)regs[e.vgpr + 1] << 32;
    return (uint32_t)(w >> e.bit) & ((1u << e.bits) - 1u);
}

static inline double value(const float *dec, uint32_t code)
{
    return dec ? (double)dec[code] : (double)tl_code_bf16_to_f32(code);
}

/* The E8M0 scale of row (A) or column (B) f for the 32-deep block kb: the op_sel byte of lane
 * f + 16 kb's scale VGPR (kernels/mma.h's statement of the 16x16x128 form). */
static inline double block_scale(const tl_emu_mfma_in *const *lanes, int f, int kb, int a, int opsel)
{
    const tl_emu_mfma_in *l = lanes[f + 16 * kb];
    const uint32_t code = ((a ? l->scale_a : l->scale_b) >> (8 * opsel)) & 0xFFu;
    return code == 0xFFu ? NAN : ldexp(1.0, (int)code - 127);
}

int tl_emu_op_mfma(const void *const *in, void *const *out, uint64_t live, uint32_t imm, char *why, size_t why_n)
{
    if (live != ~0ull) {
        snprintf(why, why_n, "an MFMA with lanes that have exited (live mask %016llx): the instruction reads every lane",
                 (unsigned long long)live);
        return 1;
    }
    const int instr = (int)(imm & 0xFF), gfx950 = (int)((imm >> 8) & 1), fa = (int)((imm >> 12) & 0xF),
              fb = (int)((imm >> 16) & 0xF), sa = (int)((imm >> 20) & 3), sb = (int)((imm >> 22) & 3);
    const mfma_plan *p = get_plan(instr, gfx950, fa, fb, why, why_n);
    if (!p) return 1;
    const tl_emu_mfma_in *const *L = (const tl_emu_mfma_in *const *)in;
    const int scaled = instr == TL_EMU_MFMA_16X16X128_F8F6F4, K = p->k;
    double av[16][MAXK], bt[MAXK][16]; /* A[i][k], B[k][j] */
    for (int f = 0; f < 16; f++)
        for (int k = 0; k < K; k++) {
            const elem_at ea = p->a[f][k], eb = p->b[f][k];
            av[f][k] = value(p->dec_a, field(L[ea.lane]->a, ea));
            bt[k][f] = value(p->dec_b, field(L[eb.lane]->b, eb));
            if (scaled) {
                av[f][k] *= block_scale(L, f, k / 32, 1, sa);
                bt[k][f] *= block_scale(L, f, k / 32, 0, sb);
            }
        }
    double acc[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) acc[i][j] = 0.0;
    for (int k = 0; k < K; k++) /* k outermost: the j loop vectorizes */
        for (int i = 0; i < 16; i++) {
            const double a = av[i][k];
            for (int j = 0; j < 16; j++) acc[i][j] += a * bt[k][j];
        }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            const int lane = p->c_lane[i][j], r = p->c_reg[i][j];
            ((tl_emu_mfma_out *)out[lane])->d[r] = (float)(acc[i][j] + (double)L[lane]->c[r]);
        }
    return 0;
}

void tl_emu_cvt_pk_f32_fp8(uint32_t src, int word, int gfx950, float *lo, float *hi)
{
    const float *dec = tl_decode_table8(gfx950 ? TL_NF_E4M3FN : TL_NF_E4M3FNUZ);
    const uint32_t w = src >> (16 * (word & 1));
    *lo = dec[w & 0xFFu];
    *hi = dec[(w >> 8) & 0xFFu];
}

uint32_t tl_emu_cvt_pk_fp8_f32(float lo, float hi, uint32_t old, int word, int gfx950)
{
    const uint32_t a = gfx950 ? tl_code_e4m3_from_f32(lo) : tl_code_e4m3fnuz_from_f32(lo);
    const uint32_t b = gfx950 ? tl_code_e4m3_from_f32(hi) : tl_code_e4m3fnuz_from_f32(hi);
    const int shift = 16 * (word & 1);
    return (old & ~(0xFFFFu << shift)) | (a | b << 8) << shift;
}

uint32_t tl_emu_perm(uint32_t a, uint32_t b, uint32_t sel)
{
    const uint64_t v = (uint64_t)a << 32 | b;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t s = (sel >> (8 * i)) & 0xFFu;
        uint32_t byte;
        if (s >= 13) byte = 0xFF;
        else if (s == 12) byte = 0x00;
        else if (s >= 8) byte = (v >> (8 * (2 * (s - 8) + 1) + 7)) & 1 ? 0xFF : 0x00;
        else byte = (uint32_t)(v >> (8 * s)) & 0xFFu;
        r |= byte << (8 * i);
    }
    return r;
}

/* __shfl family: lane l receives the value of lane src(l); reading a lane that has exited is an
 * error (the hardware returns whatever that lane's register last held). */
typedef struct {
    uint64_t bits;
    int src;
} shfl_in;

int tl_emu_op_shfl(const void *const *in, void *const *out, uint64_t live, uint32_t imm, char *why, size_t why_n)
{
    (void)imm;
    for (int l = 0; l < 64; l++) {
        if (!in[l]) continue;
        const int s = ((const shfl_in *)in[l])->src;
        if (s < 0 || s >= 64 || !in[s]) {
            snprintf(why, why_n, "lane %d reads lane %d, which %s", l, s, s < 0 || s >= 64 ? "does not exist" : "has exited");
            return 1;
        }
        *(uint64_t *)out[l] = ((const shfl_in *)in[s])->bits;
    }
    (void)live;
    return 0;
}

/* __ballot: bit l set when live lane l's predicate holds; every live lane gets the mask. */
int tl_emu_op_ballot(const void *const *in, void *const *out, uint64_t live, uint32_t imm, char *why, size_t why_n)
{
    (void)imm, (void)why, (void)why_n, (void)live;
    uint64_t m = 0;
    for (int l = 0; l < 64; l++)
        if (in[l] && *(const int *)in[l]) m |= 1ull << l;
    for (int l = 0; l < 64; l++)
        if (out[l]) *(uint64_t *)out[l] = m;
    return 0;
}
