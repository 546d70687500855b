/* Small floating-point formats: descriptors, RNE encoding by bit manipulation, exact decoding.
 *
 * Encoding of every format except E8M0 works on the float32 bit pattern of |x|:
 *   normal range of the target: add the rounding increment (half an ulp of the target minus one,
 *     plus the lsb that is kept, which gives ties-to-even), shift the mantissa down and rebias the
 *     exponent. A carry out of the mantissa moves into the exponent, which is exactly right.
 *   subnormal range: scale |x| by 2^(mbits - emin) (exact: a power of two) so that the target's
 *     subnormal codes are the integers 0..2^mbits, and round to an integer by adding 2^23 in float
 *     (the FPU rounds to nearest even); the result's low mantissa bits are the code.
 *   The code sequence runs on past the largest finite code, so "rounds beyond max" is simply
 *   "code > max code", which then saturates or overflows.
 * Both paths are computed and one is selected, so the inner loops have no data-dependent branches.
 */
#include "formats.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "../core/tl.h"

typedef struct {
    const char *name;
    int bits, ebits, mbits, bias;
    uint32_t maxmag;   /* largest finite magnitude code */
    uint32_t infmag;   /* Inf magnitude code, 0 when none */
    uint32_t nanmag;   /* NaN magnitude code (sign added), 0 when none */
    int fnuz;          /* 0x80 is the only NaN; no -0 */
    int emax_elem;
} fmt_desc;

static const fmt_desc FMT[TL_NF_COUNT] = {
    [TL_NF_E4M3FN] = {"e4m3fn", 8, 4, 3, 7, 0x7E, 0, 0x7F, 0, 8},
    [TL_NF_E5M2] = {"e5m2", 8, 5, 2, 15, 0x7B, 0x7C, 0x7E, 0, 15},
    [TL_NF_E4M3FNUZ] = {"e4m3fnuz", 8, 4, 3, 8, 0x7F, 0, 0, 1, 7},
    [TL_NF_E5M2FNUZ] = {"e5m2fnuz", 8, 5, 2, 16, 0x7F, 0, 0, 1, 15},
    [TL_NF_E2M3] = {"e2m3", 6, 2, 3, 1, 0x1F, 0, 0, 0, 2},
    [TL_NF_E3M2] = {"e3m2", 6, 3, 2, 3, 0x1F, 0, 0, 0, 4},
    [TL_NF_E2M1] = {"e2m1", 4, 2, 1, 1, 0x7, 0, 0, 0, 2},
    [TL_NF_E8M0] = {"e8m0", 8, 8, 0, 127, 0xFE, 0, 0xFF, 0, 127},
    [TL_NF_BF16] = {"bf16", 16, 8, 7, 127, 0x7F7F, 0x7F80, 0x7FC0, 0, 127},
    [TL_NF_FP16] = {"fp16", 16, 5, 10, 15, 0x7BFF, 0x7C00, 0x7E00, 0, 15},
};

static int fmt_ok(tl_numfmt f) { return (unsigned)f < (unsigned)TL_NF_COUNT; }

int tl_numfmt_parse(const char *name, tl_numfmt *out)
{
    for (int f = 0; f < TL_NF_COUNT; f++)
        if (name && strcmp(name, FMT[f].name) == 0) {
            *out = (tl_numfmt)f;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "format",
                    "unknown format '%s' (one of e4m3fn e5m2 e4m3fnuz e5m2fnuz e2m3 e3m2 e2m1 e8m0 "
                    "bf16 fp16)", name ? name : "");
}

const char *tl_numfmt_name(tl_numfmt f) { return fmt_ok(f) ? FMT[f].name : "?"; }
int tl_numfmt_bits(tl_numfmt f) { return fmt_ok(f) ? FMT[f].bits : 0; }
int tl_numfmt_ebits(tl_numfmt f) { return fmt_ok(f) ? FMT[f].ebits : 0; }
int tl_numfmt_mbits(tl_numfmt f) { return fmt_ok(f) ? FMT[f].mbits : 0; }
int tl_numfmt_bias(tl_numfmt f) { return fmt_ok(f) ? FMT[f].bias : 0; }
uint32_t tl_numfmt_code_count(tl_numfmt f) { return fmt_ok(f) ? 1u << FMT[f].bits : 0; }
int tl_numfmt_emax_elem(tl_numfmt f) { return fmt_ok(f) ? FMT[f].emax_elem : 0; }
int tl_numfmt_has_inf(tl_numfmt f) { return fmt_ok(f) && FMT[f].infmag != 0; }
int tl_numfmt_has_nan(tl_numfmt f) { return fmt_ok(f) && (FMT[f].nanmag != 0 || FMT[f].fnuz); }

double tl_numfmt_max(tl_numfmt f) { return fmt_ok(f) ? tl_decode(f, (uint16_t)FMT[f].maxmag) : 0; }
double tl_numfmt_min_normal(tl_numfmt f)
{
    if (!fmt_ok(f)) return 0;
    if (f == TL_NF_E8M0) return ldexp(1.0, -127);
    return ldexp(1.0, 1 - FMT[f].bias);
}
double tl_numfmt_min_subnormal(tl_numfmt f)
{
    if (!fmt_ok(f) || f == TL_NF_E8M0) return 0;
    return ldexp(1.0, 1 - FMT[f].bias - FMT[f].mbits);
}
double tl_numfmt_unit_roundoff(tl_numfmt f)
{
    if (!fmt_ok(f)) return 0;
    if (f == TL_NF_E8M0) return 1.0 / 3.0;
    return ldexp(1.0, -(FMT[f].mbits + 1));
}

/* ---- bit helpers ---- */

static inline uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static inline float u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- encoding ---- */

/* The array loops are compiled twice, for AVX2 and for baseline x86-64, and the loader picks one
 * (GCC function multi-versioning); elsewhere they are plain functions. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TL_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define TL_MULTIVERSION
#endif

/* Everything the inner loop needs, resolved from the descriptor and the mode. */
typedef struct {
    int m, bits;
    uint32_t round_half, rebias, maxmag, ovf, nan_pos, nan_neg, minnorm_bits;
    float sub_scale;
    int use_sub, fnuz;
} enc_params;

static enc_params enc_params_of(tl_numfmt f, int saturate)
{
    const fmt_desc *d = &FMT[f];
    enc_params p;
    p.m = d->mbits;
    p.bits = d->bits;
    p.round_half = (1u << (22 - d->mbits)) - 1;
    p.rebias = (uint32_t)(127 - d->bias) << d->mbits;
    p.maxmag = d->maxmag;
    p.fnuz = d->fnuz;
    int emin = 1 - d->bias;
    p.minnorm_bits = (uint32_t)(emin + 127) << 23;
    p.sub_scale = ldexpf(1.0f, d->mbits - emin);
    p.use_sub = f != TL_NF_BF16; /* bf16 subnormals share float32's layout: the normal path is exact */
    if (saturate || (d->infmag == 0 && d->nanmag == 0 && !d->fnuz)) p.ovf = d->maxmag; /* FP4/FP6 */
    else if (d->infmag) p.ovf = d->infmag;
    else if (d->fnuz) p.ovf = 0x80; /* with the sign OR-ed in this stays 0x80 */
    else p.ovf = d->nanmag;
    uint32_t sbit = 1u << (d->bits - 1);
    if (d->fnuz) p.nan_pos = p.nan_neg = 0x80;
    else if (d->nanmag) p.nan_pos = d->nanmag, p.nan_neg = d->nanmag | sbit;
    else p.nan_pos = p.nan_neg = 0; /* FP4/FP6: no NaN, +0 */
    return p;
}

/* The core: float32 bits -> code. Inlined into every loop with p known per call. Written with
 * masks instead of branches so that the compiler vectorizes the loops. */
static inline uint32_t enc_core(uint32_t xb, const enc_params *p)
{
    uint32_t s = xb >> 31;
    uint32_t ab = xb & 0x7FFFFFFFu;
    /* normal path */
    int sh = 23 - p->m;
    uint32_t r = ab + p->round_half + ((ab >> sh) & 1u);
    uint32_t cn = (r >> sh) - p->rebias;
    /* subnormal path (selected only when ab < minnorm_bits, so q < 2^m) */
    uint32_t sub = (0u - (uint32_t)(ab < p->minnorm_bits)) & (0u - (uint32_t)p->use_sub);
    float q = u2f(ab & sub) * p->sub_scale;
    uint32_t cs = f2u(q + 0x1p23f) - 0x4B000000u;
    uint32_t mag = (cs & sub) | (cn & ~sub);
    uint32_t ovf = 0u - (uint32_t)(mag > p->maxmag);
    mag = (p->ovf & ovf) | (mag & ~ovf);
    uint32_t code = mag | (s << (p->bits - 1));
    code &= ~((0u - (uint32_t)p->fnuz) & (0u - (uint32_t)(mag == 0))); /* FNUZ: no -0 */
    uint32_t nan = 0u - (uint32_t)(ab > 0x7F800000u);
    uint32_t nan_code = p->nan_pos ^ ((p->nan_pos ^ p->nan_neg) & (0u - s));
    return (nan_code & nan) | (code & ~nan);
}

/* E8M0: nearest power of two in value, ties (1.5 * 2^k) to the even code. */
static inline uint32_t enc_e8m0(uint32_t xb, int saturate)
{
    uint32_t ab = xb & 0x7FFFFFFFu;
    if (ab > 0x7F800000u) return 0xFF;          /* NaN */
    if (ab == 0) return 0x00;                   /* +-0: nearest is 2^-127 */
    if (xb >> 31) return 0xFF;                  /* negative */
    if (ab == 0x7F800000u) return saturate ? 0xFE : 0xFF;
    uint32_t e = ab >> 23, mant = ab & 0x7FFFFFu;
    uint32_t c;
    if (e == 0) { /* float subnormal: below 2^-126 = code 0x01; 0x00 is 2^-127 = mant 0x400000 */
        if (mant <= 0x600000u) c = 0; /* up to the tie at 1.5 * 2^-127, which goes to even 0x00 */
        else c = 1;
    } else {
        c = e; /* candidate 2^(e-127) has code e; the next power has code e + 1 */
        if (mant > 0x400000u || (mant == 0x400000u && (c & 1u))) c = e + 1;
    }
    if (c > 0xFE) return saturate ? 0xFE : 0xFF;
    return c;
}

uint16_t tl_encode(tl_numfmt f, float x, int saturate)
{
    if (!fmt_ok(f)) return 0;
    if (f == TL_NF_E8M0) return (uint16_t)enc_e8m0(f2u(x), saturate);
    enc_params p = enc_params_of(f, saturate);
    return (uint16_t)enc_core(f2u(x), &p);
}

/* One loop per format so that the compiler sees constant parameters (m, shifts, maxima). */
#define TL_ENC_LOOP(T, FMT_ID, SAT)                                                          \
    do {                                                                                     \
        const enc_params p = enc_params_of(FMT_ID, SAT);                                     \
        for (size_t i = 0; i < n; i++) out[i] = (T)enc_core(f2u(x[i]), &p);                  \
    } while (0)

#define TL_ENC_SWITCH(T)                                                                     \
    switch (f) {                                                                             \
    case TL_NF_E4M3FN: if (saturate) TL_ENC_LOOP(T, TL_NF_E4M3FN, 1); else TL_ENC_LOOP(T, TL_NF_E4M3FN, 0); break; \
    case TL_NF_E5M2: if (saturate) TL_ENC_LOOP(T, TL_NF_E5M2, 1); else TL_ENC_LOOP(T, TL_NF_E5M2, 0); break; \
    case TL_NF_E4M3FNUZ: if (saturate) TL_ENC_LOOP(T, TL_NF_E4M3FNUZ, 1); else TL_ENC_LOOP(T, TL_NF_E4M3FNUZ, 0); break; \
    case TL_NF_E5M2FNUZ: if (saturate) TL_ENC_LOOP(T, TL_NF_E5M2FNUZ, 1); else TL_ENC_LOOP(T, TL_NF_E5M2FNUZ, 0); break; \
    case TL_NF_E2M3: TL_ENC_LOOP(T, TL_NF_E2M3, 1); break;                                   \
    case TL_NF_E3M2: TL_ENC_LOOP(T, TL_NF_E3M2, 1); break;                                   \
    case TL_NF_E2M1: TL_ENC_LOOP(T, TL_NF_E2M1, 1); break;                                   \
    case TL_NF_E8M0: for (size_t i = 0; i < n; i++) out[i] = (T)enc_e8m0(f2u(x[i]), saturate); break; \
    default: break;                                                                          \
    }

TL_MULTIVERSION int tl_encode_array8(tl_numfmt f, const float *x, size_t n, int saturate, uint8_t *out)
{
    if (!fmt_ok(f) || FMT[f].bits > 8)
        return tl_error(TL_EUSAGE, "encode", "tl_encode_array8 needs a format of at most 8 bits");
    TL_ENC_SWITCH(uint8_t)
    return TL_OK;
}

TL_MULTIVERSION int tl_encode_array16(tl_numfmt f, const float *x, size_t n, int saturate, uint16_t *out)
{
    if (!fmt_ok(f)) return tl_error(TL_EUSAGE, "encode", "unknown format");
    if (f == TL_NF_BF16) {
        if (saturate) TL_ENC_LOOP(uint16_t, TL_NF_BF16, 1);
        else TL_ENC_LOOP(uint16_t, TL_NF_BF16, 0);
    } else if (f == TL_NF_FP16) {
        if (saturate) TL_ENC_LOOP(uint16_t, TL_NF_FP16, 1);
        else TL_ENC_LOOP(uint16_t, TL_NF_FP16, 0);
    } else {
        TL_ENC_SWITCH(uint16_t)
    }
    return TL_OK;
}

/* ---- decoding ---- */

static float decode_slow(tl_numfmt f, uint32_t code)
{
    const fmt_desc *d = &FMT[f];
    code &= (1u << d->bits) - 1;
    if (f == TL_NF_E8M0) return code == 0xFF ? NAN : ldexpf(1.0f, (int)code - 127);
    if (d->fnuz && code == 0x80) return NAN;
    uint32_t sbit = 1u << (d->bits - 1);
    uint32_t mag = code & (sbit - 1);
    float sign = (code & sbit) ? -1.0f : 1.0f;
    uint32_t e = mag >> d->mbits, mant = mag & ((1u << d->mbits) - 1);
    uint32_t emax_field = (1u << d->ebits) - 1;
    if (d->infmag && e == emax_field) return mant == 0 ? sign * INFINITY : (code & sbit ? -NAN : NAN);
    if (!d->infmag && d->nanmag && mag == d->nanmag) return code & sbit ? -NAN : NAN;
    if (e == 0) return sign * ldexpf((float)mant, 1 - d->bias - d->mbits);
    return sign * ldexpf((float)((1u << d->mbits) | mant), (int)e - d->bias - d->mbits);
}

float tl_decode(tl_numfmt f, uint16_t code)
{
    if (!fmt_ok(f)) return NAN;
    if (f == TL_NF_BF16) return u2f((uint32_t)code << 16);
    return decode_slow(f, code);
}

static float table8[TL_NF_COUNT][256];
static float table_fp16[65536];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    for (int f = 0; f < TL_NF_COUNT; f++) {
        if (FMT[f].bits > 8) continue;
        for (uint32_t c = 0; c < 256; c++) table8[f][c] = decode_slow((tl_numfmt)f, c);
    }
    for (uint32_t c = 0; c < 65536; c++) table_fp16[c] = decode_slow(TL_NF_FP16, c);
}

const float *tl_decode_table8(tl_numfmt f)
{
    if (!fmt_ok(f) || FMT[f].bits > 8) return NULL;
    pthread_once(&tables_once, build_tables);
    return table8[f];
}

int tl_decode_array8(tl_numfmt f, const uint8_t *codes, size_t n, float *out)
{
    const float *t = tl_decode_table8(f);
    if (!t) return tl_error(TL_EUSAGE, "decode", "tl_decode_array8 needs a format of at most 8 bits");
    for (size_t i = 0; i < n; i++) out[i] = t[codes[i]];
    return TL_OK;
}

int tl_decode_array16(tl_numfmt f, const uint16_t *codes, size_t n, float *out)
{
    if (!fmt_ok(f)) return tl_error(TL_EUSAGE, "decode", "unknown format");
    if (f == TL_NF_BF16) {
        for (size_t i = 0; i < n; i++) out[i] = u2f((uint32_t)codes[i] << 16);
        return TL_OK;
    }
    pthread_once(&tables_once, build_tables);
    if (f == TL_NF_FP16) {
        for (size_t i = 0; i < n; i++) out[i] = table_fp16[codes[i]];
        return TL_OK;
    }
    const float *t = table8[f];
    for (size_t i = 0; i < n; i++) out[i] = t[codes[i] & 0xFF];
    return TL_OK;
}

/* ---- classes ---- */

tl_numclass tl_classify(tl_numfmt f, uint16_t code)
{
    if (!fmt_ok(f)) return TL_NC_NAN;
    const fmt_desc *d = &FMT[f];
    uint32_t c = code & ((1u << d->bits) - 1);
    if (f == TL_NF_E8M0) return c == 0xFF ? TL_NC_NAN : c == 0xFE ? TL_NC_MAX : TL_NC_NORMAL;
    float v = decode_slow(f, c);
    if (isnan(v)) return TL_NC_NAN;
    if (isinf(v)) return TL_NC_INF;
    uint32_t mag = c & ((1u << (d->bits - 1)) - 1);
    if (mag == 0) return TL_NC_ZERO;
    if (mag == d->maxmag) return TL_NC_MAX;
    if ((mag >> d->mbits) == 0) return TL_NC_SUBNORMAL;
    return TL_NC_NORMAL;
}

const char *tl_numclass_name(tl_numclass c)
{
    static const char *names[] = {"zero", "subnormal", "normal", "max", "inf", "nan"};
    return (unsigned)c <= TL_NC_NAN ? names[c] : "?";
}
