/* The fused MoE's CPU reference and its naive twin (see moe.h for the function and the formats). */
#include "moe.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../numerics/blockfp8.h"
#include "../numerics/int4.h"
#include "../numerics/mx.h"

/* numerics/ owns the block sizes: the DeepSeek FP8 128 (weight block, activation group; this op's
 * INT4 group too) and the OCP MX block of 32 */
#define BLOCK TL_BFP8_GROUP
#define MX_BLOCK TL_MX_BLOCK

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* ---- random codes ----------------------------------------------------------------------------
 * A counter-based generator: every row of every matrix gets its own stream seeded from (seed,
 * matrix, row), so the result does not depend on how OpenMP splits the rows. */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Approximately N(0, 1): the sum of four 16-bit uniforms, centred and scaled (Irwin-Hall), never
 * exactly zero. Cheap enough for billions of weights. */
static float normal4(uint64_t h)
{
    uint32_t a = (uint32_t)(h & 0xffff), b = (uint32_t)((h >> 16) & 0xffff);
    uint32_t c = (uint32_t)((h >> 32) & 0xffff), d = (uint32_t)(h >> 48);
    float s = ((float)(a + b + c + d) + 2.0f) * (1.0f / 65536.0f) - 2.0f; /* in (-2, 2) */
    return s * 1.7320508f;                                               /* variance 1 */
}

static int alloc_weights(tl_moe_dtype d, int n_mat, int rows, int cols, tl_moe_weights *w)
{
    memset(w, 0, sizeof *w);
    w->dtype = d;
    w->n_mat = n_mat;
    w->rows = rows;
    w->cols = cols;
    w->mat_code_bytes = tl_moe_code_bytes(d, rows, cols);
    w->mat_scales = tl_moe_scale_count(d, rows, cols);
    if (n_mat == 0) return 0;
    w->codes = malloc(w->mat_code_bytes * (size_t)n_mat);
    if (d == TL_MOE_FP8 || d == TL_MOE_A16W4) w->scales = malloc(w->mat_scales * (size_t)n_mat * sizeof(float));
    if (d == TL_MOE_MXFP4 || d == TL_MOE_MXFP8) w->e8m0 = malloc(w->mat_scales * (size_t)n_mat);
    if (!w->codes || (w->mat_scales && !w->scales && !w->e8m0)) {
        tl_moe_weights_free(w);
        return tl_error(TL_EFAIL, "moe", "out of memory for %d x %d x %d weights", n_mat, rows, cols);
    }
    return 0;
}

/* One row of codes and its per-row scales (a16w4, mx) from its own stream. fp8 block scales are
 * drawn separately (they span 128 rows). sigma is the target RMS of the dequantized values. */
static void make_row(tl_moe_weights *w, int mat, int row, uint64_t seed, float *tmp)
{
    const int cols = w->cols;
    const float sigma = 1.0f / sqrtf((float)cols);
    uint64_t base = mix64(seed ^ mix64(((uint64_t)mat << 32) | (uint32_t)row));
    size_t row_bytes = w->mat_code_bytes / (size_t)w->rows;
    uint8_t *codes = w->codes + (size_t)mat * w->mat_code_bytes + (size_t)row * row_bytes;
    switch (w->dtype) {
    case TL_MOE_BF16:
        for (int c = 0; c < cols; c++) tmp[c] = sigma * normal4(mix64(base + (uint64_t)c));
        tl_encode_array16(TL_NF_BF16, tmp, (size_t)cols, 1, (uint16_t *)(void *)codes);
        break;
    case TL_MOE_FP8:   /* codes carry N(0, 64): the block scale brings them to sigma */
    case TL_MOE_MXFP8: /* likewise, with a power-of-two scale per 32 */
        for (int c = 0; c < cols; c++) tmp[c] = 64.0f * normal4(mix64(base + (uint64_t)c));
        tl_encode_array8(TL_NF_E4M3FN, tmp, (size_t)cols, 1, codes);
        break;
    case TL_MOE_A16W4:
    case TL_MOE_MXFP4: /* uniform nibbles: every INT4 / E2M1 code occurs */
        for (size_t b = 0; b < row_bytes; b++) codes[b] = (uint8_t)(mix64(base + b) >> 56);
        if (cols % 2) codes[row_bytes - 1] &= 0x0f; /* the unused high nibble stays 0 */
        break;
    default: break;
    }
    size_t per_row = w->dtype == TL_MOE_FP8 ? 0 : w->mat_scales / (size_t)w->rows;
    for (size_t g = 0; g < per_row; g++) {
        uint64_t h = mix64(base ^ 0x5ca1e5ca1e000000ull ^ g);
        float u = (float)(h >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
        size_t at = (size_t)mat * w->mat_scales + (size_t)row * per_row + g;
        if (w->dtype == TL_MOE_A16W4) /* uniform INT4 codes have RMS 4.6 */
            w->scales[at] = sigma / 4.6f * (0.5f + u);
        else { /* E2M1 uniform codes have RMS 2.9; E4M3 here 64. Exponent jitter -1, 0, +1 */
            float rms = w->dtype == TL_MOE_MXFP4 ? 2.9f : 64.0f;
            int e = 127 + (int)lrintf(log2f(sigma / rms)) + (int)(h % 3) - 1;
            w->e8m0[at] = (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e);
        }
    }
}

int tl_moe_weights_make(tl_moe_dtype d, int n_mat, int rows, int cols, uint64_t seed,
                        tl_moe_weights *w)
{
    if (n_mat < 0 || rows < 1 || cols < 1 || (int)d < 0 || d >= TL_MOE_NDTYPES)
        return tl_error(TL_EUSAGE, "moe", "bad weight shape %d x %d x %d", n_mat, rows, cols);
    int rc = alloc_weights(d, n_mat, rows, cols, w);
    if (rc) return rc;
    long long total = (long long)n_mat * rows;
    int failed = 0;
#pragma omp parallel
    {
        float *tmp = malloc((size_t)cols * sizeof(float));
        if (!tmp) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (long long i = 0; i < total; i++)
            if (tmp) make_row(w, (int)(i / rows), (int)(i % rows), seed, tmp);
        free(tmp);
    }
    if (failed) {
        tl_moe_weights_free(w);
        return tl_error(TL_EFAIL, "moe", "out of memory");
    }
    if (d == TL_MOE_FP8) { /* block scales: sigma / 64 times a factor in [0.5, 1.5) */
        const float sigma = 1.0f / sqrtf((float)cols);
        for (size_t i = 0; i < w->mat_scales * (size_t)n_mat; i++) {
            uint64_t h = mix64(seed ^ 0xb10cb10c00000000ull ^ i);
            w->scales[i] = sigma / 64.0f * (0.5f + (float)(h >> 40) * (1.0f / 16777216.0f));
        }
    }
    return 0;
}

void tl_moe_weights_free(tl_moe_weights *w)
{
    if (!w) return;
    free(w->codes);
    free(w->scales);
    free(w->e8m0);
    tl_moe_dtype d = w->dtype;
    memset(w, 0, sizeof *w);
    w->dtype = d;
}

int tl_moe_weights_dequant(const tl_moe_weights *w, int mat, float *y)
{
    if (mat < 0 || mat >= w->n_mat) return tl_error(TL_EUSAGE, "moe", "matrix %d outside [0, %d)", mat, w->n_mat);
    const uint8_t *codes = w->codes + (size_t)mat * w->mat_code_bytes;
    size_t rows = (size_t)w->rows, cols = (size_t)w->cols;
    switch (w->dtype) {
    case TL_MOE_BF16:
        return tl_decode_array16(TL_NF_BF16, (const uint16_t *)(const void *)codes, rows * cols, y);
    case TL_MOE_FP8:
        return tl_bfp8_dequantize_weight(TL_NF_E4M3FN, BLOCK, codes, w->scales + (size_t)mat * w->mat_scales,
                                         rows, cols, y);
    case TL_MOE_A16W4:
        return tl_int4_dequantize(BLOCK, codes, w->scales + (size_t)mat * w->mat_scales, NULL, rows, cols, y);
    case TL_MOE_MXFP4:
    case TL_MOE_MXFP8: {
        tl_numfmt f = w->dtype == TL_MOE_MXFP4 ? TL_NF_E2M1 : TL_NF_E4M3FN;
        size_t rb = tl_mx_code_bytes(f, cols), sb = tl_mx_num_blocks(cols, MX_BLOCK);
        const uint8_t *sc = w->e8m0 + (size_t)mat * w->mat_scales;
        for (size_t r = 0; r < rows; r++) {
            int rc = tl_mx_dequantize(f, MX_BLOCK, codes + r * rb, sc + r * sb, cols, y + r * cols);
            if (rc) return rc;
        }
        return 0;
    }
    default: return tl_error(TL_EUSAGE, "moe", "unknown dtype");
    }
}

float tl_moe_weight_at(const tl_moe_weights *w, int mat, int row, int col)
{
    const uint8_t *codes = w->codes + (size_t)mat * w->mat_code_bytes;
    size_t r = (size_t)row, c = (size_t)col, cols = (size_t)w->cols;
    switch (w->dtype) {
    case TL_MOE_BF16: {
        const uint8_t *p = codes + 2 * (r * cols + c);
        return tl_decode(TL_NF_BF16, (uint16_t)(p[0] | (p[1] << 8)));
    }
    case TL_MOE_FP8: {
        size_t nb = ceil_div(cols, BLOCK);
        float s = w->scales[(size_t)mat * w->mat_scales + (r / BLOCK) * nb + c / BLOCK];
        return tl_decode(TL_NF_E4M3FN, codes[r * cols + c]) * s;
    }
    case TL_MOE_A16W4: {
        uint8_t b = codes[r * tl_int4_row_bytes(cols) + c / 2];
        int u = (c % 2) ? b >> 4 : b & 15;
        float s = w->scales[(size_t)mat * w->mat_scales + r * ceil_div(cols, BLOCK) + c / BLOCK];
        return (float)(u - 8) * s;
    }
    case TL_MOE_MXFP4:
    case TL_MOE_MXFP8: {
        size_t nb = ceil_div(cols, MX_BLOCK);
        uint8_t sc = w->e8m0[(size_t)mat * w->mat_scales + r * nb + c / MX_BLOCK];
        float x;
        if (w->dtype == TL_MOE_MXFP4) {
            uint8_t b = codes[r * ceil_div(cols, 2) + c / 2];
            x = tl_decode(TL_NF_E2M1, (uint16_t)((c % 2) ? b >> 4 : b & 15));
        } else {
            x = tl_decode(TL_NF_E4M3FN, codes[r * cols + c]);
        }
        return x * tl_decode(TL_NF_E8M0, sc);
    }
    default: return NAN;
    }
}

/* ---- token-side inputs --------------------------------------------------------------------- */

static void free_tokens(tl_moe_inputs *in)
{
    free(in->x);
    free(in->xq);
    free(in->xs);
    free(in->xe);
    free(in->topk_ids);
    free(in->topk_w);
    in->x = NULL;
    in->xq = NULL;
    in->xs = NULL;
    in->xe = NULL;
    in->topk_ids = NULL;
    in->topk_w = NULL;
}

/* MXFP8 (E4M3FN, one E8M0 scale per 1 x 32, the floor rule) of each of `rows` rows of cols values
 * (blocks start at each row's first value; a row's last block may be short): codes [rows][cols],
 * scales [rows][ceil(cols/32)]. tl_mx_quantize is the quantizer the MX kernels' arithmetic
 * (contract/quant.h's tl_quant_mx_scale / tl_quant_mx_code, floor rule) equals. */
static int mx_quantize_rows(const float *x, size_t rows, size_t cols, uint8_t *codes, uint8_t *scales)
{
    const size_t nb = tl_mx_num_blocks(cols, MX_BLOCK);
    for (size_t r = 0; r < rows; r++) {
        int rc = tl_mx_quantize(TL_NF_E4M3FN, TL_SCALE_FLOOR, MX_BLOCK, x + r * cols, cols, codes + r * cols,
                                scales + r * nb);
        if (rc) return rc;
    }
    return 0;
}

/* Allocates in's token-side arrays for s and fills x (and xq with xs for fp8, xq with xe for the
 * MX types) from the float32 activations xf, which are rounded to bf16 in place (fp8 and the MX
 * types quantize the bf16 values). The routing arrays are allocated, not filled. On error the
 * arrays are freed. */
static int set_activations(tl_moe_inputs *in, const tl_moe_shape *s, float *xf)
{
    size_t n = (size_t)s->tokens * (size_t)s->hidden, edges = (size_t)s->tokens * (size_t)s->top_k;
    const int fp8 = s->dtype == TL_MOE_FP8, mx = tl_moe_mx_acts(s->dtype);
    in->x = malloc(n * sizeof(uint16_t));
    in->topk_ids = malloc(edges * sizeof(int32_t));
    in->topk_w = malloc(edges * sizeof(float));
    if (tl_moe_quantized_acts(s->dtype)) in->xq = malloc(n);
    if (fp8) in->xs = malloc((size_t)s->tokens * ceil_div((size_t)s->hidden, BLOCK) * sizeof(float));
    if (mx) in->xe = malloc((size_t)s->tokens * tl_mx_num_blocks((size_t)s->hidden, MX_BLOCK));
    if (!in->x || !in->topk_ids || !in->topk_w || (tl_moe_quantized_acts(s->dtype) && !in->xq) || (fp8 && !in->xs) || (mx && !in->xe)) {
        free_tokens(in);
        return tl_error(TL_EFAIL, "moe", "out of memory for %d tokens", s->tokens);
    }
    tl_encode_array16(TL_NF_BF16, xf, n, 1, in->x);
    tl_decode_array16(TL_NF_BF16, in->x, n, xf);
    int rc = 0;
    if (fp8)
        rc = tl_bfp8_quantize_act(TL_NF_E4M3FN, 0, BLOCK, xf, (size_t)s->tokens, (size_t)s->hidden, in->xq, in->xs);
    if (mx) rc = mx_quantize_rows(xf, (size_t)s->tokens, (size_t)s->hidden, in->xq, in->xe);
    if (rc) free_tokens(in);
    return rc;
}

int tl_moe_tokens_make(tl_moe_inputs *in, const tl_moe_shape *s, const tl_routing *r, uint64_t seed)
{
    int rc = tl_moe_shape_check(s);
    if (rc) return rc;
    free_tokens(in);
    in->s = *s;
    in->seed = seed;
    size_t n = (size_t)s->tokens * (size_t)s->hidden;
    float *xf = malloc(n * sizeof(float));
    if (!xf) return tl_error(TL_EFAIL, "moe", "out of memory for %d tokens", s->tokens);
    tl_rng g;
    tl_rng_seed(&g, seed ^ 0x70c3e5ull);
    for (size_t i = 0; i < n; i++) xf[i] = (float)tl_rng_normal(&g);
    rc = set_activations(in, s, xf);
    free(xf);
    if (!rc) rc = tl_route(r, s->tokens, s->n_experts, s->top_k, seed, in->topk_ids, in->topk_w);
    if (rc) free_tokens(in);
    return rc;
}

int tl_moe_tokens_set(tl_moe_inputs *in, const tl_moe_shape *s, const float *x, const int32_t *ids, const float *w)
{
    int rc = tl_moe_shape_check(s);
    if (rc) return rc;
    free_tokens(in);
    in->s = *s;
    size_t n = (size_t)s->tokens * (size_t)s->hidden, edges = (size_t)s->tokens * (size_t)s->top_k;
    float *xf = malloc(n * sizeof(float));
    if (!xf) return tl_error(TL_EFAIL, "moe", "out of memory for %d tokens", s->tokens);
    memcpy(xf, x, n * sizeof(float));
    rc = set_activations(in, s, xf);
    free(xf);
    if (!rc) {
        memcpy(in->topk_ids, ids, edges * sizeof(int32_t));
        memcpy(in->topk_w, w, edges * sizeof(float));
    }
    return rc;
}

int tl_moe_inputs_make(const tl_moe_shape *s, const tl_routing *r, uint64_t seed, tl_moe_inputs *in)
{
    memset(in, 0, sizeof *in);
    int rc = tl_moe_shape_check(s);
    if (rc) return rc;
    in->s = *s;
    uint64_t ws = mix64(seed ^ 0x3e16b75ull);
    rc = tl_moe_weights_make(s->dtype, s->n_experts, 2 * s->width, s->hidden, ws, &in->w1);
    if (!rc) rc = tl_moe_weights_make(s->dtype, s->n_experts, s->hidden, s->width, ws + 1, &in->w2);
    if (!rc) rc = tl_moe_weights_make(s->dtype, s->n_shared, 2 * s->width, s->hidden, ws + 2, &in->ws1);
    if (!rc) rc = tl_moe_weights_make(s->dtype, s->n_shared, s->hidden, s->width, ws + 3, &in->ws2);
    if (!rc) rc = tl_moe_tokens_make(in, s, r, seed);
    if (rc) tl_moe_inputs_free(in);
    return rc;
}

void tl_moe_inputs_free(tl_moe_inputs *in)
{
    if (!in) return;
    free_tokens(in);
    tl_moe_weights_free(&in->w1);
    tl_moe_weights_free(&in->w2);
    tl_moe_weights_free(&in->ws1);
    tl_moe_weights_free(&in->ws2);
}

/* ---- shared pieces of both paths ------------------------------------------------------------ */

static float silu(float g) { return g / (1.0f + expf(-g)); }

/* x of token t as the kernel reads it: bf16 values, or the dequantized block-FP8 (fp8) or MXFP8
 * (mxfp4, mxfp8) values. */
static void token_row(const tl_moe_inputs *in, int t, float *row)
{
    size_t H = (size_t)in->s.hidden;
    if (in->s.dtype == TL_MOE_FP8)
        tl_bfp8_dequantize_act(TL_NF_E4M3FN, BLOCK, in->xq + (size_t)t * H,
                               in->xs + (size_t)t * ceil_div(H, BLOCK), 1, H, row);
    else if (tl_moe_mx_acts(in->s.dtype))
        tl_mx_dequantize(TL_NF_E4M3FN, MX_BLOCK, in->xq + (size_t)t * H,
                         in->xe + (size_t)t * tl_mx_num_blocks(H, MX_BLOCK), H, row);
    else
        tl_decode_array16(TL_NF_BF16, in->x + (size_t)t * H, H, row);
}

int tl_moe_q2_row(tl_moe_dtype d, int width, const uint16_t *code, float *a)
{
    if (width < 1 || !code || !a) return tl_error(TL_EUSAGE, "moe q2", "empty row");
    tl_decode_array16(TL_NF_BF16, code, (size_t)width, a);
    if (!tl_moe_quantized_acts(d)) return 0;
    const int fp8 = d == TL_MOE_FP8;
    const size_t W = (size_t)width, blocks = fp8 ? ceil_div(W, BLOCK) : tl_mx_num_blocks(W, MX_BLOCK);
    uint8_t *q = malloc(W);
    void *s = malloc(blocks * (fp8 ? sizeof(float) : 1));
    int rc = q && s ? 0 : TL_EFAIL;
    if (!rc && fp8) {
        rc = tl_bfp8_quantize_act(TL_NF_E4M3FN, 0, BLOCK, a, 1, W, q, s);
        if (!rc) rc = tl_bfp8_dequantize_act(TL_NF_E4M3FN, BLOCK, q, s, 1, W, a);
    } else if (!rc) {
        rc = tl_mx_quantize(TL_NF_E4M3FN, TL_SCALE_FLOOR, MX_BLOCK, a, W, q, s);
        if (!rc) rc = tl_mx_dequantize(TL_NF_E4M3FN, MX_BLOCK, q, s, W, a);
    }
    free(q);
    free(s);
    if (rc)
        for (size_t j = 0; j < W; j++) a[j] = NAN; /* never passes a check */
    return rc == TL_EFAIL ? tl_error(TL_EFAIL, "moe q2", "out of memory for a row of %d", width) : rc;
}

/* Q2 on one row (tl_moe_q2_row); a failure leaves NaN in a, which no check passes. */
static void act_values(tl_moe_dtype d, int width, const uint16_t *code, float *a)
{
    (void)tl_moe_q2_row(d, width, code, a);
}

/* Stage 1's epilogue and Q2 on one row: h (2*width: gate then up, float32) -> the bf16 codes stage
 * 1 writes (code, width of them, required) and the values stage 2 reads (a, width floats). */
static void swiglu_q2(tl_moe_dtype d, int width, const float *h, float *a, uint16_t *code)
{
    for (int j = 0; j < width; j++) a[j] = silu(h[j]) * h[width + j];
    tl_encode_array16(TL_NF_BF16, a, (size_t)width, 0, code);
    act_values(d, width, code, a);
}

/* ---- the reference ---------------------------------------------------------------------------- */

typedef struct {
    float *w1, *w2;     /* dequantized weights of one expert */
    float *a, *h, *y;   /* gathered x rows, gate|up, output rows */
    int cap;            /* rows a/h/y can hold */
} ref_scratch;

static void scratch_free(ref_scratch *s)
{
    free(s->w1);
    free(s->w2);
    free(s->a);
    free(s->h);
    free(s->y);
    memset(s, 0, sizeof *s);
}

static int scratch_rows(ref_scratch *s, int rows, int H, int WI)
{
    if (rows <= s->cap) return 0;
    free(s->a);
    free(s->h);
    free(s->y);
    s->a = malloc((size_t)rows * (size_t)H * sizeof(float));
    s->h = malloc((size_t)rows * 2 * (size_t)WI * sizeof(float));
    s->y = malloc((size_t)rows * (size_t)H * sizeof(float));
    s->cap = (s->a && s->h && s->y) ? rows : 0;
    return s->cap ? 0 : TL_EFAIL;
}

/* One expert's MLP on `rows` gathered rows: a (rows x H) -> y (rows x H). act_rows[r]: row r's
 * stage-1 output (bf16 codes, width of them): written, or with from_act read instead of running
 * stage 1 (then a is not read). act_rows NULL: codes kept to this call (not with from_act). */
static int expert_mlp(const tl_moe_inputs *in, const tl_moe_weights *w1, const tl_moe_weights *w2,
                      int e, int rows, ref_scratch *s, uint16_t *const *act_rows, int from_act)
{
    const int H = in->s.hidden, WI = in->s.width;
    if ((!from_act && tl_moe_weights_dequant(w1, e, s->w1)) || tl_moe_weights_dequant(w2, e, s->w2)) return TL_EFAIL;
    if (!from_act)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, 2 * WI, H, 1.0f, s->a, H, s->w1, H, 0.0f,
                    s->h, 2 * WI);
    float *act = malloc((size_t)rows * (size_t)WI * sizeof(float));
    uint16_t *code = malloc((size_t)WI * sizeof(uint16_t));
    if (!act || !code) {
        free(act);
        free(code);
        return TL_EFAIL;
    }
    for (int r = 0; r < rows; r++) {
        float *a = act + (size_t)r * WI;
        if (from_act)
            act_values(in->s.dtype, WI, act_rows[r], a);
        else
            swiglu_q2(in->s.dtype, WI, s->h + (size_t)r * 2 * WI, a, act_rows ? act_rows[r] : code);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, H, WI, 1.0f, act, WI, s->w2, WI, 0.0f, s->y, H);
    free(act);
    free(code);
    return 0;
}

static int worklist_matches(const tl_moe_inputs *in, const tl_worklist *wl)
{
    const tl_moe_shape *s = &in->s;
    if (!wl || wl->n_experts != s->n_experts || wl->tile_m < 1 || !wl->sorted_ids)
        return tl_error(TL_EUSAGE, "moe reference", "the worklist was not built for these inputs");
    long long edges = (long long)s->tokens * s->top_k, seen = 0;
    for (int t = 0; t < wl->n_tiles; t++) {
        int e = wl->tile_expert[t];
        if (e < 0 || e >= s->n_experts) return tl_error(TL_EUSAGE, "moe reference", "tile %d has expert %d", t, e);
        for (int r = 0; r < wl->tile_m; r++) {
            int32_t id = wl->sorted_ids[(size_t)t * wl->tile_m + r];
            if (id == TL_WL_PAD) continue;
            if (id < 0 || id >= edges || in->topk_ids[id] != e)
                return tl_error(TL_EUSAGE, "moe reference", "worklist row %d of tile %d does not match the routing", r, t);
            seen++;
        }
    }
    if (seen != edges)
        return tl_error(TL_EUSAGE, "moe reference", "worklist holds %lld edges, routing %lld", seen, edges);
    return 0;
}

/* Shared experts: every token through each, weight 1, added after the routed combine. */
static int shared_experts(const tl_moe_inputs *in, float *out)
{
    const int H = in->s.hidden, M = in->s.tokens;
    ref_scratch s = {0};
    int rc = 0;
    s.w1 = malloc((size_t)2 * in->s.width * (size_t)H * sizeof(float));
    s.w2 = malloc((size_t)in->s.width * (size_t)H * sizeof(float));
    if (!s.w1 || !s.w2 || scratch_rows(&s, M, H, in->s.width)) rc = TL_EFAIL;
    for (int t = 0; !rc && t < M; t++) token_row(in, t, s.a + (size_t)t * H);
    for (int e = 0; !rc && e < in->s.n_shared; e++) {
        rc = expert_mlp(in, &in->ws1, &in->ws2, e, M, &s, NULL, 0);
        for (size_t i = 0; !rc && i < (size_t)M * H; i++) out[i] += s.y[i];
    }
    scratch_free(&s);
    return rc ? tl_error(TL_EFAIL, "moe reference", "out of memory (shared experts)") : 0;
}

/* The reference; from_act: stage 2 and the combine on the activations in act instead of stage 1's. */
static int run_reference(const tl_moe_inputs *in, const tl_worklist *wl, float *out, uint16_t *act, int from_act)
{
    int rc = worklist_matches(in, wl);
    if (rc) return rc;
    const int H = in->s.hidden, WI = in->s.width, k = in->s.top_k, M = in->s.tokens;
    const size_t edges = (size_t)M * (size_t)k;
    float *ybuf = malloc(edges * (size_t)H * sizeof(float));
    /* first tile of each expert (tiles of one expert are consecutive) */
    int *first = malloc(((size_t)in->s.n_experts + 1) * sizeof(int));
    if (!ybuf || !first) {
        free(ybuf);
        free(first);
        return tl_error(TL_EFAIL, "moe reference", "out of memory");
    }
    for (int e = 0; e <= in->s.n_experts; e++) first[e] = -1;
    for (int t = wl->n_tiles - 1; t >= 0; t--) first[wl->tile_expert[t]] = t;
    if (act && !from_act) memset(act, 0, (size_t)wl->n_rows_padded * (size_t)WI * sizeof(uint16_t));

    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1); /* parallel over experts instead */
    int failed = 0;
#pragma omp parallel
    {
        ref_scratch s = {0};
        s.w1 = malloc((size_t)2 * WI * (size_t)H * sizeof(float));
        s.w2 = malloc((size_t)WI * (size_t)H * sizeof(float));
        int ok = s.w1 && s.w2;
#pragma omp for schedule(dynamic, 1)
        for (int e = 0; e < in->s.n_experts; e++) {
            if (!ok || first[e] < 0) continue;
            int n = wl->expert_count[e], t0 = first[e];
            if (scratch_rows(&s, n, H, WI)) {
                ok = 0;
                continue;
            }
            int32_t *ids = malloc((size_t)n * sizeof(int32_t));
            uint16_t **act_rows = act ? malloc((size_t)n * sizeof(uint16_t *)) : NULL;
            if (!ids || (act && !act_rows)) {
                free(ids);
                ok = 0;
                continue;
            }
            int r = 0; /* gather in worklist order */
            for (int t = t0; t < wl->n_tiles && wl->tile_expert[t] == e; t++)
                for (int j = 0; j < wl->tile_m; j++) {
                    size_t row = (size_t)t * wl->tile_m + j;
                    int32_t id = wl->sorted_ids[row];
                    if (id == TL_WL_PAD || r >= n) continue;
                    ids[r] = id;
                    if (act_rows) act_rows[r] = act + row * (size_t)WI;
                    if (!from_act) token_row(in, id / k, s.a + (size_t)r * H);
                    r++;
                }
            if (r != n || expert_mlp(in, &in->w1, &in->w2, e, n, &s, act_rows, from_act)) ok = 0;
            for (int j = 0; ok && j < n; j++) {
                float wgt = in->topk_w[ids[j]];
                float *dst = ybuf + (size_t)ids[j] * H, *src = s.y + (size_t)j * H;
                for (int c = 0; c < H; c++) dst[c] = wgt * src[c];
            }
            free(ids);
            free(act_rows);
        }
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
        scratch_free(&s);
    }
    openblas_set_num_threads(blas_threads);
    free(first);
    if (failed) {
        free(ybuf);
        return tl_error(TL_EFAIL, "moe reference", "out of memory or a bad worklist");
    }
    /* the combine, in slot order: each token sums its own k rows (no two threads share a token) */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < M; t++) {
        float *o = out + (size_t)t * H;
        for (int c = 0; c < H; c++) o[c] = 0.0f;
        for (int sl = 0; sl < k; sl++) {
            const float *y = ybuf + ((size_t)t * k + sl) * H;
            for (int c = 0; c < H; c++) o[c] += y[c];
        }
    }
    free(ybuf);
    return in->s.n_shared ? shared_experts(in, out) : 0;
}

int tl_moe_reference(const tl_moe_inputs *in, const tl_worklist *wl, float *out, uint16_t *act)
{
    return run_reference(in, wl, out, act, 0);
}

int tl_moe_reference_from_act(const tl_moe_inputs *in, const tl_worklist *wl, const uint16_t *act, float *out)
{
    if (!act) return tl_error(TL_EUSAGE, "moe reference", "no activations");
    return run_reference(in, wl, out, (uint16_t *)act, 1); /* only read when from_act */
}

/* ---- the naive loop ------------------------------------------------------------------------ */

static int naive_expert(const tl_moe_inputs *in, const tl_moe_weights *w1, const tl_moe_weights *w2,
                        int e, const float *x, float *h, float *a, double *y)
{
    const int H = in->s.hidden, WI = in->s.width;
    for (int j = 0; j < 2 * WI; j++) {
        double acc = 0;
        for (int c = 0; c < H; c++) acc += (double)x[c] * tl_moe_weight_at(w1, e, j, c);
        h[j] = (float)acc;
    }
    uint16_t *code = malloc((size_t)WI * sizeof(uint16_t));
    if (!code) return TL_EFAIL;
    swiglu_q2(in->s.dtype, WI, h, a, code);
    free(code);
    for (int n = 0; n < H; n++) {
        double acc = 0;
        for (int j = 0; j < WI; j++) acc += (double)a[j] * tl_moe_weight_at(w2, e, n, j);
        y[n] = acc;
    }
    return 0;
}

int tl_moe_naive(const tl_moe_inputs *in, float *out)
{
    const int H = in->s.hidden, WI = in->s.width, k = in->s.top_k;
    float *x = malloc((size_t)H * sizeof(float)), *h = malloc((size_t)2 * WI * sizeof(float));
    float *a = malloc((size_t)WI * sizeof(float));
    double *y = malloc((size_t)H * sizeof(double)), *o = malloc((size_t)H * sizeof(double));
    int rc = (x && h && a && y && o) ? 0 : tl_error(TL_EFAIL, "moe naive", "out of memory");
    for (int t = 0; !rc && t < in->s.tokens; t++) {
        token_row(in, t, x);
        for (int c = 0; c < H; c++) o[c] = 0;
        for (int sl = 0; sl < k && !rc; sl++) {
            int e = in->topk_ids[(size_t)t * k + sl];
            double wgt = in->topk_w[(size_t)t * k + sl];
            if ((rc = naive_expert(in, &in->w1, &in->w2, e, x, h, a, y))) break;
            for (int c = 0; c < H; c++) o[c] += wgt * y[c];
        }
        for (int e = 0; e < in->s.n_shared && !rc; e++) {
            if ((rc = naive_expert(in, &in->ws1, &in->ws2, e, x, h, a, y))) break;
            for (int c = 0; c < H; c++) o[c] += y[c];
        }
        if (rc) rc = tl_error(TL_EFAIL, "moe naive", "out of memory");
        for (int c = 0; c < H; c++) out[(size_t)t * H + c] = (float)o[c];
    }
    free(x);
    free(h);
    free(a);
    free(y);
    free(o);
    return rc;
}

/* ---- tolerance ------------------------------------------------------------------------------ */

/* Both sides compute stage 1 from the same quantized inputs in float32 with different summation
 * orders, so its values differ by a relative e1 (numerics/metrics.h's accumulation model over
 * K = hidden). Each side then rounds them to the intermediate format(s) (bf16; then Q2's E4M3: in
 * 1x128 groups with float32 scales for fp8, in MXFP8's 1x32 blocks with E8M0 scales for mxfp4 and
 * mxfp8, tl_moe_act_format). Rounding the SAME value gives the same code, so the sides differ only
 * where a rounding midpoint falls between the two values: with relative spacing 2u that happens
 * with probability e1 / (2u) and costs 2u, a relative mean square of 2 u e1 per rounding (E4M3:
 * u = 2^-4 under either scale, whose elements are the same 3-bit-mantissa grid). MXFP8 adds one
 * flip fp8 lacks: a block whose largest bf16 value is one step apart on the two sides across a
 * power of two gets scales 2^s and 2^(s+1). A power-of-two scale only shifts the elements'
 * exponents, so both decode every element alike except the floor rule's saturated ones (|x| in
 * (464, 512) x 2^s, which give 448 x 2^s on one side) and those under 2^(s-5) (E4M3 subnormals
 * at the larger scale: under 2^-14 of the block's largest, negligible): the block's largest value
 * moves by up to two E4M3 steps, at about 1/128 of the rate of its bf16 flips, which the factor
 * below covers.
 * Stage 2 adds its own float32 accumulation over K = width (same inputs on both sides). The bound
 * is 4x the quadrature sum, the project's usual safety factor. */
/* The relative RMS difference of two float32 sums of K products in different orders (numerics'
 * accumulation model, before any safety factor): stage 1 has K = hidden, stage 2 K = width. */
static int fp32_sum_model(long k, double *e)
{
    tl_tol_spec sp = {TL_TOL_FP32, TL_TOL_FP32, TL_TOL_FP32, TL_TOL_FP32, k, 1, 4.0};
    tl_tolerance t;
    int rc = tl_tolerance_make(&sp, &t);
    *e = rc ? 0.0 : t.predicted;
    return rc;
}

/* fp32_sum_model for sums kept in an accumulator of acc_bits mantissa bits and promoted into
 * float32 every TL_MOE_ACC_BLOCK products (reference/moe.h, tl_moe_acc). */
static int sum_model(long k, int acc_bits, double *e)
{
    *e = 0.0;
    if (acc_bits < 8 || acc_bits > TL_MOE_ACC_FP32)
        return tl_error(TL_EUSAGE, "moe tolerance", "accumulator of %d mantissa bits outside [8, %d]", acc_bits,
                        TL_MOE_ACC_FP32);
    int rc = fp32_sum_model(k, e);
    if (rc || acc_bits == TL_MOE_ACC_FP32) return rc;
    const double ulp = ldexp(1.0, -acc_bits), blk = k < TL_MOE_ACC_BLOCK ? (double)k : TL_MOE_ACC_BLOCK;
    *e = sqrt(*e * *e + blk * ulp * ulp / 6.0);
    return 0;
}

int tl_moe_tolerance(const tl_moe_shape *s, tl_tolerance *t)
{
    const tl_moe_acc fp32 = {TL_MOE_ACC_FP32, TL_MOE_ACC_FP32};
    return tl_moe_tolerance_acc(s, fp32, t);
}

int tl_moe_tolerance_acc(const tl_moe_shape *s, tl_moe_acc acc, tl_tolerance *t)
{
    double e1, e2;
    int rc = sum_model(s->hidden, acc.s1, &e1);
    if (!rc) rc = sum_model(s->width, acc.s2, &e2);
    if (rc) return rc;
    double u_mid = tl_tol_unit_roundoff(TL_NF_BF16);
    tl_numfmt act = tl_moe_act_format(s->dtype);
    if (act != TL_NF_BF16) u_mid += tl_tol_unit_roundoff((int)act);
    double flips = 2.0 * u_mid * e1;
    t->predicted = sqrt(e1 * e1 + flips + e2 * e2);
    /* The mean above is right, but the error is heavy-tailed: a rounding flip of one intermediate
     * value (an activation one bf16 or E4M3 step apart on the two sides) moves a whole output row at
     * once, and one flip of a large SwiGLU output (5-8 sigma: a = silu(g) u has an exponential tail)
     * in a heavily weighted edge can carry most of a small case's error. So both bounds add the size
     * of one such flip, 2 u_act J of the activations' RMS spread over the width x tokens values it
     * is compared with: the whole output, sqrt(tokens x width), one token's row, sqrt(width). J is
     * the 1e-5 quantile of that flip (7 for bf16 activations, 3 for E4M3 with u = 2^-4), from a
     * simulation of the kernel's and the reference's float32 summation orders over 10^4-10^5 seeds
     * (DeepSeek-V3.2 full width and TP8, M = 1, 16, 256; E4M3 as fp8's 1x128 groups, whose
     * elements flip as MXFP8's do but for the block-scale flip above): false failures below 1e-4 per
     * case where the bound without it failed a correct kernel in 1-5% of cases at M = 1 and TP8 (and
     * did so on the H200: bf16 TP8 M = 1, rel_rms 8.6e-4 against 6.0e-4). The cost is detection at
     * small M x width: fp8, mxfp4 and mxfp8 (E4M3 activations all) at M = 1 TP8 allow 2.3e-2. The GPU check therefore also checks the stages
     * one at a time, without flip noise (tl_moe_compare_act, then tl_moe_reference_from_act under
     * tl_moe_tolerance_stage2): an error of 1e-5 in stage 2 or of two bf16 steps in one activation
     * shows there at every M. */
    const double u_act = tl_tol_unit_roundoff((int)act), j = act == TL_NF_BF16 ? 7.0 : 3.0;
    const double flip_whole = 2.0 * u_act * j / sqrt((double)s->tokens * s->width);
    const double flip_row = 2.0 * u_act * j / sqrt((double)s->width);
    const double base = 4.0 * t->predicted;
    t->rel_rms = sqrt(base * base + flip_whole * flip_whole);
    /* No max-abs bound: it assumes Gaussian errors, and the flips are not (measured on the H200:
     * max_abs / error-rms ratios of 30 to 60 at M = 256 and 1024 from correct kernels).
     * A wrong element still shows: NaN never passes, outputs are poisoned first. Every token's row
     * is held to 10x the Gaussian bound (a row that took a wrong expert or weight is off by ~1/k)
     * plus one flip within the row. */
    t->check_max_abs = 0;
    t->row_factor = sqrt(100.0 * base * base + flip_row * flip_row) / t->rel_rms;
    return 0;
}

/* bf16 code -> float, and the spacing of codes at a value (to the next code away from zero). */
static double bf16_value(uint16_t c)
{
    float f;
    tl_decode_array16(TL_NF_BF16, &c, 1, &f);
    return f;
}
static double bf16_step(double v)
{
    int e;
    double m = frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1) */
    if (m == 0.0) return 0x1p-133; /* the smallest bf16 subnormal */
    return ldexp(1.0, e - 8);      /* 8 significant bits */
}

int tl_moe_compare_act(const tl_moe_shape *s, const tl_worklist *wl, const uint16_t *ref, const uint16_t *got,
                       tl_moe_act_diff *d)
{
    return tl_moe_compare_act_acc(s, wl, ref, got, TL_MOE_ACC_FP32, d);
}

int tl_moe_compare_act_acc(const tl_moe_shape *s, const tl_worklist *wl, const uint16_t *ref, const uint16_t *got,
                           int acc1, tl_moe_act_diff *d)
{
    memset(d, 0, sizeof *d);
    if (!wl || !ref || !got || !wl->sorted_ids || s->width < 1)
        return tl_error(TL_EUSAGE, "moe activations", "nothing to compare");
    const size_t W = (size_t)s->width, rows = (size_t)wl->n_rows_padded;
    double e1;
    int rc = sum_model(s->hidden, acc1, &e1);
    if (rc) return rc;
    const double flip_rate = e1 / (2.0 * tl_tol_unit_roundoff(TL_NF_BF16));
    d->one_step_max = 4.0 * flip_rate > 0.05 ? (4.0 * flip_rate < 1.0 ? 4.0 * flip_rate : 1.0) : 0.05;
    double sum2 = 0.0;
    size_t n = 0;
    for (size_t r = 0; r < rows; r++) {
        if (wl->sorted_ids[r] == TL_WL_PAD) continue;
        for (size_t c = 0; c < W; c++) {
            double v = bf16_value(ref[r * W + c]);
            sum2 += v * v;
        }
        n += W;
    }
    const double rms = n ? sqrt(sum2 / (double)n) : 0.0;
    d->tau = 16.0 * e1 * rms;
    double worst = 0.0;
    for (size_t r = 0; r < rows; r++) {
        const int pad = wl->sorted_ids[r] == TL_WL_PAD;
        for (size_t c = 0; c < W; c++) {
            const uint16_t a = ref[r * W + c], b = got[r * W + c];
            if (pad) { /* padding rows hold zeros on both sides */
                if (b != 0 && !d->padding_bad++) d->first_pad_row = r;
                continue;
            }
            d->compared++;
            if (a == b) continue;
            const double va = bf16_value(a), vb = bf16_value(b), diff = fabs(va - vb);
            /* one step: neighbouring codes of one sign (bf16 codes of one sign are ordered like
             * their values), or values within tau (near zero, where silu(g) u magnifies g's
             * difference, and across zero) */
            const int same_sign = (a & 0x8000) == (b & 0x8000);
            const int codes_apart = abs((int)(a & 0x7FFF) - (int)(b & 0x7FFF));
            if (diff != diff || ((!same_sign || codes_apart > 1) && diff > d->tau)) { /* NaN, or further */
                d->far++;
                double x = diff != diff ? INFINITY : diff / (bf16_step(fabs(va) > fabs(vb) ? va : vb) + d->tau);
                if (x > worst || d->far == 1) {
                    worst = x;
                    d->worst_row = r, d->worst_col = c, d->worst_ref = a, d->worst_got = b;
                }
            } else {
                d->one_step++;
            }
        }
    }
    d->pass = d->far == 0 && d->padding_bad == 0 && (double)d->one_step <= d->one_step_max * (double)d->compared;
    return 0;
}

int tl_moe_tolerance_stage2(const tl_moe_shape *s, tl_tolerance *t)
{
    return tl_moe_tolerance_stage2_acc(s, TL_MOE_ACC_FP32, t);
}

int tl_moe_tolerance_stage2_acc(const tl_moe_shape *s, int acc2, tl_tolerance *t)
{
    int rc = sum_model(s->width, acc2, &t->predicted);
    if (rc) return rc;
    /* 4 sigma, times 4 for the matrix cores' accumulation (the H200's stage-1 differences looked
     * like 4x the float32 model: bench/tolerance/README.md) */
    t->rel_rms = 16.0 * t->predicted;
    t->check_max_abs = 0;
    t->row_factor = 10.0;
    return 0;
}
