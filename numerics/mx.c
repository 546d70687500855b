/* OCP MX block quantization (see mx.h for the rules, special blocks and storage). */
#include "mx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"

int tl_scale_rule_parse(const char *name, tl_scale_rule *out)
{
    static const char *names[] = {"floor", "rceil", "even"};
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, names[i]) == 0) {
            *out = (tl_scale_rule)i;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--scale-rule", "unknown scale rule '%s' (floor, rceil or even)",
                    name ? name : "");
}

const char *tl_scale_rule_name(tl_scale_rule r)
{
    return r == TL_SCALE_FLOOR ? "floor" : r == TL_SCALE_RCEIL ? "rceil" : r == TL_SCALE_EVEN ? "even" : "?";
}

int tl_mx_elem_ok(tl_numfmt e)
{
    return e == TL_NF_E4M3FN || e == TL_NF_E5M2 || e == TL_NF_E2M3 || e == TL_NF_E3M2 || e == TL_NF_E2M1;
}

size_t tl_mx_code_bytes(tl_numfmt elem, size_t n) { return elem == TL_NF_E2M1 ? n / 2 + n % 2 : n; }

size_t tl_mx_num_blocks(size_t n, int block)
{
    if (block < 1) return 0;
    return n / (size_t)block + (n % (size_t)block != 0);
}

static inline uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* Scale exponent s for a finite amax > 0 (before clamping to [-127, 127]). */
static int scale_exponent(tl_numfmt elem, tl_scale_rule rule, float amax)
{
    int emax = tl_numfmt_emax_elem(elem);
    uint32_t b = f2u(amax);
    if (rule == TL_SCALE_RCEIL) {
        int e;
        double fr = frexp((double)amax / tl_numfmt_max(elem), &e); /* q = fr * 2^e, fr in [0.5, 1) */
        return fr == 0.5 ? e - 1 : e;
    }
    if (rule == TL_SCALE_EVEN) b += 1u << (23 - tl_numfmt_mbits(elem) - 1);
    int biased = (int)(b >> 23);
    if (biased == 0) return -127 - emax - 1; /* subnormal amax: below every scale, clamps */
    return biased - 127 - emax;
}

uint8_t tl_mx_scale_code(tl_numfmt elem, tl_scale_rule rule, float amax)
{
    if (!(fabsf(amax) <= 3.4028234663852886e38f)) return 0xFF; /* NaN or Inf */
    if (amax == 0) return 0x00;
    int s = scale_exponent(elem, rule, fabsf(amax));
    if (s < -127) s = -127;
    if (s > 127) s = 127;
    return (uint8_t)(s + 127);
}

static int check_args(tl_numfmt elem, int block, const void *a, const void *b, const void *c, size_t n)
{
    if (!tl_mx_elem_ok(elem))
        return tl_error(TL_EUSAGE, "mx", "element format %s is not an MX format (e4m3fn e5m2 e2m3 "
                        "e3m2 e2m1)", tl_numfmt_name(elem));
    if (block < 1 || block > 65536) return tl_error(TL_EUSAGE, "mx", "block %d is not in [1, 65536]", block);
    if (n > 0 && (!a || !b || !c)) return tl_error(TL_EUSAGE, "mx", "NULL buffer");
    return TL_OK;
}

/* Quantizes one block of len values: returns its scale code, writes len codes (one per byte). */
static uint8_t quantize_block(tl_numfmt elem, tl_scale_rule rule, const float *x, size_t len,
                              uint8_t *codes)
{
    uint32_t maxbits = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t ab = f2u(x[i]) & 0x7FFFFFFFu;
        maxbits = ab > maxbits ? ab : maxbits;
    }
    if (maxbits >= 0x7F800000u) { /* NaN or Inf somewhere: NaN scale, zero codes */
        memset(codes, 0, len);
        return 0xFF;
    }
    float amax;
    memcpy(&amax, &maxbits, 4);
    uint8_t sc = tl_mx_scale_code(elem, rule, amax);
    float inv = ldexpf(1.0f, 127 - (int)sc); /* 1 / X, exact (2^-127 .. 2^127) */
    float tmp[256];
    for (size_t i0 = 0; i0 < len; i0 += 256) {
        size_t m = len - i0 < 256 ? len - i0 : 256;
        for (size_t i = 0; i < m; i++) tmp[i] = x[i0 + i] * inv;
        tl_encode_array8(elem, tmp, m, 1, codes + i0);
    }
    return sc;
}

int tl_mx_quantize(tl_numfmt elem, tl_scale_rule rule, int block, const float *x, size_t n,
                   uint8_t *codes, uint8_t *scales)
{
    int rc = check_args(elem, block, x, codes, scales, n);
    if (rc) return rc;
    if ((unsigned)rule > TL_SCALE_EVEN) return tl_error(TL_EUSAGE, "mx", "unknown scale rule");
    size_t nb = tl_mx_num_blocks(n, block);
    if (elem != TL_NF_E2M1) {
        for (size_t b = 0; b < nb; b++) {
            size_t start = b * (size_t)block;
            size_t len = n - start < (size_t)block ? n - start : (size_t)block;
            scales[b] = quantize_block(elem, rule, x + start, len, codes + start);
        }
        return TL_OK;
    }
    /* FP4: quantize a chunk of whole blocks into one-per-byte codes, then pack low nibble first. */
    uint8_t one[4096];
    size_t chunk_blocks = (size_t)block <= sizeof one ? sizeof one / (size_t)block : 1;
    uint8_t *buf = one;
    if ((size_t)block > sizeof one) {
        buf = malloc((size_t)(unsigned)block);
        if (!buf) return tl_error(TL_EFAIL, "mx", "out of memory");
    }
    for (size_t b0 = 0; b0 < nb; b0 += chunk_blocks) {
        size_t start = b0 * (size_t)block;
        size_t filled = 0;
        for (size_t b = b0; b < nb && b < b0 + chunk_blocks; b++) {
            size_t s = b * (size_t)block;
            size_t len = n - s < (size_t)block ? n - s : (size_t)block;
            scales[b] = quantize_block(elem, rule, x + s, len, buf + filled);
            filled += len;
        }
        size_t i = 0;
        if (start % 2 == 1) { /* a chunk can start on an odd element only when block is odd */
            codes[start / 2] = (uint8_t)((codes[start / 2] & 0x0F) | (buf[0] << 4));
            i = 1;
        }
        for (; i + 1 < filled; i += 2) codes[(start + i) / 2] = (uint8_t)(buf[i] | (buf[i + 1] << 4));
        if (i < filled) codes[(start + i) / 2] = buf[i]; /* high nibble 0 until the next chunk */
    }
    if (buf != one) free(buf);
    return TL_OK;
}

int tl_mx_dequantize(tl_numfmt elem, int block, const uint8_t *codes, const uint8_t *scales, size_t n,
                     float *y)
{
    int rc = check_args(elem, block, codes, scales, y, n);
    if (rc) return rc;
    const float *t = tl_decode_table8(elem);
    size_t nb = tl_mx_num_blocks(n, block);
    for (size_t b = 0; b < nb; b++) {
        size_t start = b * (size_t)block;
        size_t len = n - start < (size_t)block ? n - start : (size_t)block;
        float *yb = y + start;
        if (scales[b] == 0xFF) {
            for (size_t i = 0; i < len; i++) yb[i] = NAN;
            continue;
        }
        float X = ldexpf(1.0f, (int)scales[b] - 127);
        if (elem == TL_NF_E2M1) {
            for (size_t i = 0; i < len; i++) {
                size_t g = start + i;
                uint8_t c = (uint8_t)((codes[g / 2] >> ((g & 1) * 4)) & 0x0F);
                yb[i] = t[c] * X;
            }
        } else {
            for (size_t i = 0; i < len; i++) yb[i] = t[codes[start + i]] * X;
        }
    }
    return TL_OK;
}
