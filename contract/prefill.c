/* contract/prefill.c: the prefill shape's parsing and checks, and the FP8 block quantization the
 * kernels' host side and the references share. */
#include "prefill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "../numerics/blockfp8.h"
#include "../numerics/formats.h"

static const struct {
    const char *name;
    int heads, kv_heads, dqk, dv;
} PRESETS[] = {
    {"mistral-7b", 32, 8, 128, 128},
    {"qwen3-8b", 32, 8, 128, 128},
    {"deepseek-v2-lite", 16, 16, 192, 128},
};
#define NPRESETS (sizeof PRESETS / sizeof PRESETS[0])

const char *const *tl_prefill_presets(void)
{
    static const char *names[NPRESETS + 1];
    for (size_t i = 0; i < NPRESETS; i++) names[i] = PRESETS[i].name;
    names[NPRESETS] = NULL;
    return names;
}

int tl_prefill_dtype_parse(const char *s, tl_prefill_dtype *out)
{
    if (s && strcmp(s, "bf16") == 0) return *out = TL_PREFILL_BF16, TL_OK;
    if (s && strcmp(s, "fp8") == 0) return *out = TL_PREFILL_FP8, TL_OK;
    return tl_error(TL_EUSAGE, "--dtype", "'%s' is not bf16 or fp8", s ? s : "(null)");
}

const char *tl_prefill_dtype_name(tl_prefill_dtype d) { return d == TL_PREFILL_FP8 ? "fp8" : "bf16"; }

/* Parses "A", "AxB", "AxBxC" or "AxBxCxD" of decimal ints in [0, 10^6) (tl_scan_ints) into v;
 * returns how many, or 0 when the text is not of that form. */
static int parse_dims(const char *s, long v[4])
{
    long long w[4];
    int n = tl_scan_ints(s, 'x', w, 4);
    for (int i = 0; i < n; i++) {
        if (w[i] < 0 || w[i] >= 1000000) return 0;
        v[i] = (long)w[i];
    }
    return n;
}

int tl_prefill_shape_parse(const char *text, tl_prefill_shape *out)
{
    memset(out, 0, sizeof *out);
    out->seq = 1;
    out->causal = 1;
    out->dtype = TL_PREFILL_BF16;
    if (!text) return tl_error(TL_EUSAGE, "--shape", "missing");
    for (size_t i = 0; i < NPRESETS; i++)
        if (strcmp(text, PRESETS[i].name) == 0) {
            out->heads = PRESETS[i].heads, out->kv_heads = PRESETS[i].kv_heads;
            out->dqk = PRESETS[i].dqk, out->dv = PRESETS[i].dv;
            return TL_OK;
        }
    long v[4];
    int n = parse_dims(text, v);
    if (n == 2) {
        out->heads = out->kv_heads = (int)v[0];
        out->dqk = out->dv = (int)v[1];
        return TL_OK;
    }
    if (n == 3) {
        out->heads = (int)v[0], out->kv_heads = (int)v[1];
        out->dqk = out->dv = (int)v[2];
        return TL_OK;
    }
    if (n == 4) { /* MLA's expanded heads: q.k and value dims differ (GLM-5: 256 / 256, DeepSeek: 192 / 128) */
        out->heads = (int)v[0], out->kv_heads = (int)v[1];
        out->dqk = (int)v[2], out->dv = (int)v[3];
        return TL_OK;
    }
    return tl_error(TL_EUSAGE, "--shape", "'%s' is not mistral-7b, qwen3-8b, deepseek-v2-lite, HxD, HxKVxD or "
                    "HxKVxDQKxDV", text);
}

int tl_prefill_shape_check(const tl_prefill_shape *s)
{
    const char *w = "prefill shape";
    if (s->heads < 1 || s->heads > TL_PREFILL_MAX_HEADS)
        return tl_error(TL_EUSAGE, w, "heads %d outside 1..%d", s->heads, TL_PREFILL_MAX_HEADS);
    if (s->kv_heads < 1 || s->kv_heads > s->heads)
        return tl_error(TL_EUSAGE, w, "kv heads %d outside 1..%d (the query heads)", s->kv_heads, s->heads);
    if (s->heads % s->kv_heads != 0)
        return tl_error(TL_EUSAGE, w, "heads %d not a multiple of kv heads %d", s->heads, s->kv_heads);
    if (s->dqk < 1 || s->dqk > TL_PREFILL_MAX_DIM)
        return tl_error(TL_EUSAGE, w, "q.k dim %d outside 1..%d", s->dqk, TL_PREFILL_MAX_DIM);
    if (s->dv < 1 || s->dv > TL_PREFILL_MAX_DIM)
        return tl_error(TL_EUSAGE, w, "v dim %d outside 1..%d", s->dv, TL_PREFILL_MAX_DIM);
    if (s->seq < 1 || s->seq > TL_PREFILL_MAX_SEQ)
        return tl_error(TL_EUSAGE, w, "seq %ld outside 1..%ld", s->seq, TL_PREFILL_MAX_SEQ);
    if (s->causal != 0 && s->causal != 1) return tl_error(TL_EUSAGE, w, "causal must be 0 or 1");
    if (!(s->scale >= 0) || isinf(s->scale)) return tl_error(TL_EUSAGE, w, "scale %g not finite and >= 0", s->scale);
    if (s->dtype != TL_PREFILL_BF16 && s->dtype != TL_PREFILL_FP8) return tl_error(TL_EUSAGE, w, "unknown dtype");
    const double big = (double)TL_PREFILL_MAX_ELEMS;
    if ((double)s->seq * s->heads * (s->dqk > s->dv ? s->dqk : s->dv) > big)
        return tl_error(TL_EUSAGE, w, "seq %ld x %d heads x dim %d is more than %.3g elements", s->seq, s->heads,
                        s->dqk > s->dv ? s->dqk : s->dv, big);
    return TL_OK;
}

float tl_prefill_scale(const tl_prefill_shape *s) { return s->scale > 0 ? s->scale : 1.0f / sqrtf((float)s->dqk); }

/* amax of block b of head h (rows [b*128, min(seq, b*128+128)) x dim); -1 if an element is not finite. */
static float block_amax(const float *x, long seq, int heads, int dim, int h, long b, long *bad)
{
    float amax = 0;
    long hi = (b + 1) * TL_PREFILL_BLOCK < seq ? (b + 1) * TL_PREFILL_BLOCK : seq;
    for (long r = b * TL_PREFILL_BLOCK; r < hi; r++) {
        const float *row = x + ((size_t)r * heads + h) * dim;
        for (int d = 0; d < dim; d++) {
            if (!isfinite(row[d])) return *bad = ((long)r * heads + h) * dim + d, -1.0f;
            float a = fabsf(row[d]);
            if (a > amax) amax = a;
        }
    }
    return amax;
}

int tl_prefill_quantize_fp8(const float *x, long seq, int heads, int dim, uint8_t *codes, float *scales)
{
    const long nblk = tl_prefill_nblk(seq);
    float *tmp = malloc((size_t)dim * sizeof *tmp);
    if (!tmp) return tl_error(TL_EFAIL, "prefill fp8", "out of memory");
    int rc = TL_OK;
    for (int h = 0; h < heads && !rc; h++)
        for (long b = 0; b < nblk && !rc; b++) {
            long bad = -1;
            float amax = block_amax(x, seq, heads, dim, h, b, &bad);
            if (amax < 0) {
                rc = tl_error(TL_EUSAGE, "prefill fp8", "element %ld is not finite", bad);
                break;
            }
            const float sc = tl_bfp8_scale(TL_NF_E4M3FN, amax, 0);
            scales[(size_t)h * nblk + b] = sc;
            long hi = (b + 1) * TL_PREFILL_BLOCK < seq ? (b + 1) * TL_PREFILL_BLOCK : seq;
            for (long r = b * TL_PREFILL_BLOCK; r < hi; r++) {
                const size_t off = ((size_t)r * heads + h) * dim;
                for (int d = 0; d < dim; d++) tmp[d] = x[off + d] / sc;
                tl_encode_array8(TL_NF_E4M3FN, tmp, (size_t)dim, 1, codes + off);
            }
        }
    free(tmp);
    return rc;
}

void tl_prefill_dequantize_fp8(const uint8_t *codes, const float *scales, long seq, int heads, int dim, double *y)
{
    const long nblk = tl_prefill_nblk(seq);
    const float *tab = tl_decode_table8(TL_NF_E4M3FN);
    for (long r = 0; r < seq; r++)
        for (int h = 0; h < heads; h++) {
            const double sc = scales[(size_t)h * nblk + r / TL_PREFILL_BLOCK];
            const size_t off = ((size_t)r * heads + h) * dim;
            for (int d = 0; d < dim; d++) y[off + d] = (double)tab[codes[off + d]] * sc;
        }
}

/* sm_90 (kernels/prefill.hip): 128 x 128 on 8 warps for every dtype and dqk. Built for sm_90a
 * (Hopper) that is two warpgroups of 64 rows on wgmma, one group a SM (its 112-208 KB of shared
 * memory); an fp8 tile is one 128-key scale block (P rounded against the running max of 128-key
 * blocks as tl_prefill_reference_f64_p does). Built without wgmma the mma.sync kernel runs the
 * same tiling at 16 rows a warp. gfx942 (64 KB of LDS) 64 x 32, gfx950 64 x 64 (bf16) and 64 x 128
 * (fp8: the f8f6f4 MFMA's K-depth is 128 keys), 4 waves of 16 rows. */
tl_prefill_tiling tl_prefill_tiling_for(const char *arch, const tl_prefill_shape *s)
{
    const int fp8 = s && s->dtype == TL_PREFILL_FP8;
    tl_prefill_tiling t = {128, 128, 8};
    if (arch && strncmp(arch, "gfx942", 6) == 0) {
        t.block_m = 64, t.block_n = 32, t.warps = 4;
    } else if (arch && strncmp(arch, "gfx", 3) == 0) {
        t.block_m = 64, t.block_n = fp8 ? 128 : 64, t.warps = 4;
    }
    return t;
}
