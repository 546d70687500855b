/* reference/quant.c: the quant reference, the naive loop, the kernels' arithmetic on the host, the
 * dispatch unpack, the round trip and the inputs (reference/quant.h). */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"
#include "../numerics/dist.h"
#include "../numerics/mx.h"
#include "../numerics/rotate.h"

/* ---- inputs ---- */

static const char *const dist_names[TL_QDIST_N] = {"normal", "uniform", "laplace", "outliers", "adversarial"};

int tl_quant_dist_parse(const char *s, tl_quant_dist *out)
{
    for (int i = 0; i < TL_QDIST_N; i++)
        if (s && strcmp(s, dist_names[i]) == 0) {
            *out = (tl_quant_dist)i;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--dist", "unknown distribution '%s' (normal, uniform, laplace, outliers or adversarial)",
                    s ? s : "");
}

const char *tl_quant_dist_name(tl_quant_dist d) { return (unsigned)d < TL_QDIST_N ? dist_names[d] : "?"; }

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One 128-run of a row made adversarial by its kind (the run's hash picks it), in bf16 bits. */
static void adversarial_run(uint64_t h, uint16_t *v, size_t n)
{
    const int kind = (int)(h % 8);
    const size_t at = (size_t)((h >> 8) % n);
    switch (kind) {
    case 0: /* all zeros, signs mixed */
        for (size_t i = 0; i < n; i++) v[i] = (uint16_t)(((h >> (i % 61)) & 1) ? 0x8000u : 0u);
        break;
    case 1: /* tiny: around 1e-6 (under the 1e-4 clamp), a few bf16 subnormals */
        for (size_t i = 0; i < n; i++) v[i] = (uint16_t)tl_code_bf16_from_f32(tl_code_bf16_to_f32(v[i]) * 1e-6f);
        v[at] = (uint16_t)(0x0001u + (h >> 20) % 0x7Fu);
        break;
    case 2: /* huge: near bf16's largest finite value */
        for (size_t i = 0; i < n; i++) v[i] = (uint16_t)tl_code_bf16_from_f32(tl_code_bf16_to_f32(v[i]) * 1e37f);
        v[at] = 0x7F7Fu;
        break;
    case 3: v[at] = (uint16_t)(((h >> 40) & 1 ? 0xFFC0u : 0x7FC0u) | ((h >> 41) & 0x3Fu)); break; /* NaN */
    case 4: v[at] = 0x7F80u; break; /* +Inf */
    case 5: /* -Inf and a NaN */
        v[at] = 0xFF80u;
        v[(at + 1) % n] = 0x7FC1u;
        break;
    case 6: /* amax 448 with values on E4M3 ties (4.25 x ..., 464 / 448 steps) and E2M1 ties */
        for (size_t i = 0; i < n; i++) {
            static const float ties[] = {448.0f, 4.25f, -4.75f, 0.25f, 0.75f, -1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, 0.0f};
            v[i] = (uint16_t)tl_code_bf16_from_f32(ties[(i + (h >> 16)) % 12]);
        }
        break;
    default: break; /* ordinary */
    }
}

int tl_quant_inputs_make(const tl_quant_shape *s, tl_quant_dist d, uint64_t seed, uint16_t *x, int32_t *ids,
                         float *weights)
{
    if (tl_quant_shape_check(s)) return TL_EUSAGE;
    const size_t rows = (size_t)s->rows, k = (size_t)s->k;
    const tl_dist base = d == TL_QDIST_UNIFORM ? TL_DIST_UNIFORM : d == TL_QDIST_LAPLACE ? TL_DIST_LAPLACE
                         : d == TL_QDIST_OUTLIERS ? TL_DIST_OUTLIERS : TL_DIST_NORMAL;
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        float *row = malloc(k * sizeof *row);
        fail |= !row;
#pragma omp for schedule(static)
        for (size_t r = 0; r < rows; r++) {
            if (!row) continue;
            tl_dist_fill(base, mix64(seed ^ (0xA5A5ull + r)), row, k, 128); /* per row: any thread count */
            for (size_t i = 0; i < k; i++) x[r * k + i] = (uint16_t)tl_code_bf16_from_f32(row[i]);
            if (d == TL_QDIST_ADVERSARIAL)
                for (size_t g = 0; g < k; g += 128)
                    adversarial_run(mix64(seed * 31 + r * 1000003ull + g), x + r * k + g, k - g < 128 ? k - g : 128);
        }
        free(row);
    }
    if (fail) return tl_error(TL_EFAIL, "quant", "out of memory");
    if (!ids) return TL_OK;
    for (size_t r = 0; r < rows; r++) {
        uint64_t h = mix64(seed + 77 * r);
        float sum = 0;
        for (int j = 0; j < s->topk; j++) {
            int32_t id;
            int dup;
            do { /* distinct experts */
                h = mix64(h);
                id = (int32_t)(h % 256);
                dup = 0;
                for (int i = 0; i < j; i++) dup |= ids[r * s->topk + i] == id;
            } while (dup);
            ids[r * s->topk + j] = id;
            weights[r * s->topk + j] = 0.05f + (float)((h >> 32) % 1000) / 1000.0f;
            sum += weights[r * s->topk + j];
        }
        for (int j = 0; j < s->topk; j++) weights[r * s->topk + j] /= sum;
    }
    return TL_OK;
}

/* ---- shared pieces ---- */

static size_t row_code_bytes(const tl_quant_shape *s) { return s->scheme == TL_QUANT_MXFP4 ? (size_t)s->k / 2 : (size_t)s->k; }

static void bf16_row(const uint16_t *x, size_t k, float *out)
{
    for (size_t i = 0; i < k; i++) out[i] = tl_code_bf16_to_f32(x[i]);
}

/* Where row r's group g scale goes (fp8 family: row or column layout). */
static size_t scale_at(const tl_quant_shape *s, size_t r, size_t g)
{
    const size_t ng = (size_t)s->k / TL_QUANT_GROUP;
    return s->layout == TL_QUANT_SCALES_COL ? g * (size_t)s->rows + r : r * ng + g;
}

/* The routing fields of row r's record. */
static void write_routing(const tl_quant_shape *s, size_t r, const int32_t *ids, const float *weights, int src_rank,
                          uint8_t *rec)
{
    const tl_quant_record L = tl_quant_record_layout(s->k, s->topk);
    const int32_t src[2] = {(int32_t)r, src_rank};
    memcpy(rec + L.ids, ids + r * (size_t)s->topk, 4 * (size_t)s->topk);
    memcpy(rec + L.weights, weights + r * (size_t)s->topk, 4 * (size_t)s->topk);
    memcpy(rec + L.source, src, 8);
    memset(rec + L.pad, 0, L.bytes - L.pad);
}

static int check_args(const tl_quant_shape *s, const void *x, const void *ids, const void *w, const void *codes,
                      const void *scales)
{
    int rc = tl_quant_shape_check(s);
    if (rc) return rc;
    if (!x || !codes || (s->scheme == TL_QUANT_DISPATCH ? !ids || !w : !scales))
        return tl_error(TL_EUSAGE, "quant", "NULL buffer");
    return TL_OK;
}

/* Every NaN code of a rotated query as 0x7F (contract/quant.h). */
static void canon_nan(uint8_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((c[i] & 0x7F) == 0x7F) c[i] = 0x7F;
}

/* ---- the reference ---- */

/* One 128-token block of the query: bf16 -> float, rotate each head, numerics' 128 x 128 tiles. */
static int reference_query_block(const tl_quant_shape *s, const uint16_t *x, size_t rb, float *tmp, uint8_t *codes,
                                 float *scales)
{
    const size_t k = (size_t)s->k, heads = k / TL_QUANT_HEAD_DIM, r0 = rb * TL_QUANT_QUERY_ROWS;
    const size_t nr = (size_t)s->rows - r0 < TL_QUANT_QUERY_ROWS ? (size_t)s->rows - r0 : TL_QUANT_QUERY_ROWS;
    bf16_row(x + r0 * k, nr * k, tmp);
    if (s->hadamard && tl_fwht_rows(tmp, nr * heads, TL_QUANT_HEAD_DIM)) return TL_EFAIL;
    int rc = tl_bfp8_quantize_weight(TL_NF_E4M3FN, s->ue8m0, TL_QUANT_QUERY_ROWS, tmp, nr, k, codes + r0 * k,
                                     scales + rb * heads);
    if (!rc && s->hadamard) canon_nan(codes + r0 * k, nr * k);
    return rc;
}

int tl_quant_reference(const tl_quant_shape *s, const uint16_t *x, const int32_t *ids, const float *weights,
                       int src_rank, uint8_t *codes, void *scales)
{
    int rc = check_args(s, x, ids, weights, codes, scales);
    if (rc) return rc;
    const size_t k = (size_t)s->k, ng = k / TL_QUANT_GROUP, rows = (size_t)s->rows;
    const tl_quant_record L = tl_quant_record_layout(s->k, s->topk);
    const int query = s->scheme == TL_QUANT_FP8_QUERY;
    const size_t units = query ? (rows + TL_QUANT_QUERY_ROWS - 1) / TL_QUANT_QUERY_ROWS : rows;
    const size_t tmp_len = query ? TL_QUANT_QUERY_ROWS * k : k;
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        float *tmp = malloc(tmp_len * sizeof *tmp), *srow = malloc((ng + 1) * sizeof *srow);
        fail |= !tmp || !srow;
#pragma omp for schedule(dynamic, 16)
        for (size_t r = 0; r < units; r++) {
            if (!tmp || !srow) continue;
            if (query) {
                fail |= reference_query_block(s, x, r, tmp, codes, scales) != 0;
                continue;
            }
            bf16_row(x + r * k, k, tmp);
            if (tl_quant_is_mx(s->scheme)) {
                const tl_scale_rule rule = s->round_up ? TL_SCALE_RCEIL : TL_SCALE_FLOOR;
                fail |= tl_mx_quantize(tl_quant_elem(s), rule, TL_QUANT_MX_BLOCK, tmp, k, codes + r * row_code_bytes(s),
                                       (uint8_t *)scales + r * (k / TL_QUANT_MX_BLOCK)) != 0;
                continue;
            }
            uint8_t *out = s->scheme == TL_QUANT_DISPATCH ? codes + r * L.bytes : codes + r * k;
            fail |= tl_bfp8_quantize_act(tl_quant_elem(s), s->ue8m0, TL_QUANT_GROUP, tmp, 1, k, out, srow) != 0;
            if (s->scheme == TL_QUANT_DISPATCH) {
                memcpy(out + L.scales, srow, ng * sizeof *srow);
                write_routing(s, r, ids, weights, src_rank, out);
            } else {
                for (size_t g = 0; g < ng; g++) ((float *)scales)[scale_at(s, r, g)] = srow[g];
            }
        }
        free(tmp);
        free(srow);
    }
    return fail ? tl_error(TL_EFAIL, "quant reference", "a quantizer failed (out of memory?)") : TL_OK;
}

/* ---- the naive loop: numerics' scalar functions, one value at a time ---- */

/* Quantizes one 1x128 group: its codes and its scale (the naive loop's or the kernels' arithmetic). */
typedef void (*group128_fn)(const tl_quant_shape *s, const float *v, uint8_t *codes, float *scale);

/* Row r's 1x128 groups (v: the row's values) by quantize, placed where the scheme puts them: the
 * codes and scale arrays, or row r's dispatch record with its routing. */
static void group_row(const tl_quant_shape *s, size_t r, const float *v, group128_fn quantize, const int32_t *ids,
                      const float *weights, int src_rank, uint8_t *codes, void *scales)
{
    const size_t k = (size_t)s->k, ng = k / TL_QUANT_GROUP;
    const int dispatch = s->scheme == TL_QUANT_DISPATCH;
    const tl_quant_record L = tl_quant_record_layout(s->k, s->topk);
    uint8_t *out = dispatch ? codes + r * L.bytes : codes + r * k;
    for (size_t g = 0; g < ng; g++) {
        float sc;
        quantize(s, v + g * TL_QUANT_GROUP, out + g * TL_QUANT_GROUP, &sc);
        if (dispatch) memcpy(out + L.scales + 4 * g, &sc, 4);
        else ((float *)scales)[scale_at(s, r, g)] = sc;
    }
    if (dispatch) write_routing(s, r, ids, weights, src_rank, out);
}

static void naive_group128(const tl_quant_shape *s, const float *v, uint8_t *codes, float *scale)
{
    const tl_numfmt f = tl_quant_elem(s);
    float amax = 0;
    for (int i = 0; i < TL_QUANT_GROUP; i++) amax = tl_code_max_no_nan(amax, fabsf(v[i]));
    *scale = tl_bfp8_scale(f, amax, s->ue8m0);
    for (int i = 0; i < TL_QUANT_GROUP; i++) codes[i] = (uint8_t)tl_encode(f, v[i] / *scale, 1);
}

static void naive_mx_block(const tl_quant_shape *s, const float *v, size_t b, uint8_t *codes, uint8_t *scale)
{
    const tl_numfmt f = tl_quant_elem(s);
    float amax = 0;
    for (int i = 0; i < TL_QUANT_MX_BLOCK; i++) amax = isfinite(v[i]) && isfinite(amax) ? fmaxf(amax, fabsf(v[i])) : NAN;
    *scale = tl_mx_scale_code(f, s->round_up ? TL_SCALE_RCEIL : TL_SCALE_FLOOR, amax);
    for (int i = 0; i < TL_QUANT_MX_BLOCK; i++) {
        const uint8_t c = *scale == 0xFF ? 0 : (uint8_t)tl_encode(f, v[i] * ldexpf(1.0f, 127 - *scale), 1);
        const size_t e = b * TL_QUANT_MX_BLOCK + (size_t)i;
        if (f != TL_NF_E2M1) codes[e] = c;
        else codes[e / 2] = (uint8_t)(e % 2 ? (codes[e / 2] & 0x0F) | (c << 4) : c);
    }
}

static void naive_query(const tl_quant_shape *s, float *v, uint8_t *codes, float *scales)
{
    const size_t k = (size_t)s->k, rows = (size_t)s->rows, heads = k / TL_QUANT_HEAD_DIM;
    if (s->hadamard)
        for (size_t r = 0; r < rows; r++)
            for (size_t h = 0; h < heads; h++) tl_fwht(v + r * k + h * TL_QUANT_HEAD_DIM, TL_QUANT_HEAD_DIM);
    for (size_t r0 = 0; r0 < rows; r0 += TL_QUANT_QUERY_ROWS)
        for (size_t h = 0; h < heads; h++) {
            const size_t r1 = r0 + TL_QUANT_QUERY_ROWS < rows ? r0 + TL_QUANT_QUERY_ROWS : rows;
            float amax = 0;
            for (size_t r = r0; r < r1; r++)
                for (size_t i = 0; i < TL_QUANT_HEAD_DIM; i++) amax = tl_code_max_no_nan(amax, fabsf(v[r * k + h * TL_QUANT_HEAD_DIM + i]));
            const float sc = tl_bfp8_scale(TL_NF_E4M3FN, amax, s->ue8m0);
            scales[r0 / TL_QUANT_QUERY_ROWS * heads + h] = sc;
            for (size_t r = r0; r < r1; r++)
                for (size_t i = 0; i < TL_QUANT_HEAD_DIM; i++) {
                    const size_t e = r * k + h * TL_QUANT_HEAD_DIM + i;
                    codes[e] = (uint8_t)tl_encode(TL_NF_E4M3FN, v[e] / sc, 1);
                }
        }
    if (s->hadamard) canon_nan(codes, rows * k);
}

int tl_quant_naive(const tl_quant_shape *s, const uint16_t *x, const int32_t *ids, const float *weights, int src_rank,
                   uint8_t *codes, void *scales)
{
    int rc = check_args(s, x, ids, weights, codes, scales);
    if (rc) return rc;
    const size_t k = (size_t)s->k, rows = (size_t)s->rows;
    const int query = s->scheme == TL_QUANT_FP8_QUERY;
    float *v = malloc((query ? rows * k : k) * sizeof *v);
    if (!v) return tl_error(TL_EFAIL, "quant naive", "out of memory");
    if (query) {
        bf16_row(x, rows * k, v);
        naive_query(s, v, codes, scales);
        free(v);
        return TL_OK;
    }
    for (size_t r = 0; r < rows; r++) {
        bf16_row(x + r * k, k, v);
        if (tl_quant_is_mx(s->scheme)) {
            for (size_t b = 0; b < k / TL_QUANT_MX_BLOCK; b++)
                naive_mx_block(s, v + b * TL_QUANT_MX_BLOCK, b, codes + r * row_code_bytes(s),
                               (uint8_t *)scales + r * (k / TL_QUANT_MX_BLOCK) + b);
            continue;
        }
        group_row(s, r, v, naive_group128, ids, weights, src_rank, codes, scales);
    }
    free(v);
    return TL_OK;
}

/* ---- the kernels' arithmetic on the host ---- */

/* The query kernel's butterfly on one head's 128 values, in its order: stages 1, 2, 4 inside a
 * thread's 8 values, 8 .. 64 between lanes (lower: own + partner; upper: partner - own), then the
 * scale. */
static void kernel_fwht128(float *v, float scale)
{
    for (int h = 1; h < TL_QUANT_HEAD_DIM; h *= 2)
        for (int lane = 0; lane < TL_QUANT_HEAD_DIM; lane++) {
            if (lane & h) continue;
            const float a = v[lane], b = v[lane + h];
            v[lane] = a + b;
            v[lane + h] = a - b;
        }
    for (int i = 0; i < TL_QUANT_HEAD_DIM; i++) v[i] *= scale;
}

static void kernel_group128(const tl_quant_shape *s, const float *v, uint8_t *codes, float *scale)
{
    const int fnuz = s->scheme == TL_QUANT_FP8_FNUZ;
    uint32_t m = 0;
    for (int i = 0; i < TL_QUANT_GROUP; i++) {
        const uint32_t a = tl_quant_abs_bits_no_nan(v[i]);
        m = a > m ? a : m;
    }
    *scale = tl_quant_fp8_scale(tl_code_bits_f32(m), fnuz, s->ue8m0);
    for (int i = 0; i < TL_QUANT_GROUP; i++) codes[i] = (uint8_t)tl_quant_fp8_code(v[i], *scale, fnuz);
}

int tl_quant_host_kernel(const tl_quant_shape *s, const uint16_t *x, const int32_t *ids, const float *weights,
                         int src_rank, uint8_t *codes, void *scales)
{
    int rc = check_args(s, x, ids, weights, codes, scales);
    if (rc) return rc;
    const size_t k = (size_t)s->k, rows = (size_t)s->rows;
    float *v = malloc(k * sizeof *v);
    if (!v) return tl_error(TL_EFAIL, "quant", "out of memory");
    if (s->scheme == TL_QUANT_FP8_QUERY) {
        const size_t heads = k / TL_QUANT_HEAD_DIM;
        const float hs = tl_quant_hadamard_scale();
        for (size_t r0 = 0; r0 < rows; r0 += TL_QUANT_QUERY_ROWS)
            for (size_t h = 0; h < heads; h++) {
                const size_t r1 = r0 + TL_QUANT_QUERY_ROWS < rows ? r0 + TL_QUANT_QUERY_ROWS : rows;
                uint32_t m = 0;
                for (int pass = 0; pass < 2; pass++) { /* amax, then codes: the rotation is redone */
                    const float sc = tl_quant_fp8_scale(tl_code_bits_f32(m), 0, s->ue8m0);
                    for (size_t r = r0; r < r1; r++) {
                        bf16_row(x + r * k + h * TL_QUANT_HEAD_DIM, TL_QUANT_HEAD_DIM, v);
                        if (s->hadamard) kernel_fwht128(v, hs);
                        for (int i = 0; i < TL_QUANT_HEAD_DIM; i++) {
                            const uint32_t a = tl_quant_abs_bits_no_nan(v[i]);
                            if (!pass) m = a > m ? a : m;
                            else codes[r * k + h * TL_QUANT_HEAD_DIM + i] =
                                     (uint8_t)(s->hadamard ? tl_quant_fp8_code_canon_nan(v[i], sc, 0)
                                                           : tl_quant_fp8_code(v[i], sc, 0));
                        }
                    }
                    if (pass) ((float *)scales)[r0 / TL_QUANT_QUERY_ROWS * heads + h] = sc;
                }
            }
        free(v);
        return TL_OK;
    }
    for (size_t r = 0; r < rows; r++) {
        bf16_row(x + r * k, k, v);
        if (tl_quant_is_mx(s->scheme)) {
            const int fp4 = s->scheme == TL_QUANT_MXFP4;
            uint8_t *c = codes + r * row_code_bytes(s);
            for (size_t b = 0; b < k / TL_QUANT_MX_BLOCK; b++) {
                uint32_t m = 0;
                for (int i = 0; i < TL_QUANT_MX_BLOCK; i++) {
                    const uint32_t a = tl_quant_abs_bits(v[b * TL_QUANT_MX_BLOCK + i]);
                    m = a > m ? a : m;
                }
                const uint32_t sc = tl_quant_mx_scale(m, fp4, s->round_up);
                ((uint8_t *)scales)[r * (k / TL_QUANT_MX_BLOCK) + b] = (uint8_t)sc;
                for (int i = 0; i < TL_QUANT_MX_BLOCK; i += 2) {
                    const size_t e = b * TL_QUANT_MX_BLOCK + (size_t)i;
                    const uint32_t c0 = tl_quant_mx_code(v[e], sc, fp4), c1 = tl_quant_mx_code(v[e + 1], sc, fp4);
                    if (fp4) c[e / 2] = (uint8_t)(c0 | c1 << 4);
                    else c[e] = (uint8_t)c0, c[e + 1] = (uint8_t)c1;
                }
            }
            continue;
        }
        group_row(s, r, v, kernel_group128, ids, weights, src_rank, codes, scales);
    }
    free(v);
    return TL_OK;
}

/* ---- unpack ---- */

int tl_quant_unpack(const tl_quant_shape *s, const uint8_t *records, uint8_t *codes, float *scales, int32_t *ids,
                    float *weights, int32_t *src_row, int32_t *src_rank)
{
    if (s->scheme != TL_QUANT_DISPATCH || tl_quant_shape_check(s))
        return tl_error(TL_EUSAGE, "quant unpack", "needs a dispatch shape");
    const tl_quant_record L = tl_quant_record_layout(s->k, s->topk);
    const size_t k = (size_t)s->k, ng = k / TL_QUANT_GROUP, t = (size_t)s->topk;
    for (size_t r = 0; r < (size_t)s->rows; r++) {
        const uint8_t *rec = records + r * L.bytes;
        memcpy(codes + r * k, rec, k);
        memcpy(scales + r * ng, rec + L.scales, 4 * ng);
        memcpy(ids + r * t, rec + L.ids, 4 * t);
        memcpy(weights + r * t, rec + L.weights, 4 * t);
        memcpy(src_row + r, rec + L.source, 4);
        memcpy(src_rank + r, rec + L.source + 4, 4);
        for (size_t i = L.pad; i < L.bytes; i++)
            if (rec[i]) return tl_error(TL_EFAIL, "quant unpack", "record %zu: padding byte %zu is %d, not 0", r, i, rec[i]);
    }
    return TL_OK;
}

/* ---- the round trip ---- */

typedef struct {
    double err2, ref2, worst;
    size_t bounded, nan_ok, inf_groups, overflow;
    long bad; /* first element off its bound, or -1 */
    double bad_x, bad_y, bad_bound;
} rt_acc;

/* One element: y (dequantized) against x (the quantizer's input) under its group's scale. */
static void rt_element(rt_acc *a, long at, float x, float y, double u, double half_sub, double clamp_max, double scale)
{
    if (isnan(x) || isnan(scale)) {
        if (isnan(y)) a->nan_ok++;
        else if (a->bad < 0) a->bad = at, a->bad_x = x, a->bad_y = y, a->bad_bound = NAN;
        return;
    }
    if (isinf(x)) { /* an infinity comes back saturated (ue8m0: scale 1) or NaN: not bounded */
        a->inf_groups++;
        return;
    }
    const double ax = fabs((double)x), clamp = clamp_max > 0 && ax > clamp_max * scale ? ax - clamp_max * scale : 0;
    const double bound = u * ax + half_sub * scale + clamp + 0x1p-22 * ax, err = fabs((double)y - (double)x);
    if (isinf(y) && ax + bound > FLT_MAX) { /* code x scale rounded past float32's range: Inf */
        a->overflow++;
        return;
    }
    if (!(err <= bound)) {
        if (a->bad < 0) a->bad = at, a->bad_x = x, a->bad_y = y, a->bad_bound = bound;
        return;
    }
    a->worst = bound > 0 && err / bound > a->worst ? err / bound : a->worst;
    a->err2 += err * err;
    a->ref2 += ax * ax;
    a->bounded++;
}

static int rt_report(const rt_acc *a, tl_quant_roundtrip *r)
{
    r->bounded = a->bounded, r->nan_ok = a->nan_ok, r->inf_groups = a->inf_groups, r->overflow = a->overflow;
    r->worst = a->worst;
    r->rel_rms = a->ref2 > 0 ? sqrt(a->err2 / a->ref2) : 0;
    if (a->bad >= 0)
        return tl_error(TL_EFAIL, "quant round trip", "element %ld: %g came back as %g, off its bound %g", a->bad,
                        a->bad_x, a->bad_y, a->bad_bound);
    return TL_OK;
}

/* The round trip of the fp8 family and the query: per element with its group's float scale. A
 * group holding an infinity has scale Inf (or, ue8m0, 1.0, where everything beyond 448 saturates):
 * its elements are counted, not bounded. */
static size_t rt_scale_index(const tl_quant_shape *s, size_t r, size_t i)
{
    const size_t k = (size_t)s->k;
    if (s->scheme == TL_QUANT_FP8_QUERY) return r / TL_QUANT_QUERY_ROWS * (k / TL_QUANT_HEAD_DIM) + i / TL_QUANT_HEAD_DIM;
    return r * (k / TL_QUANT_GROUP) + i / TL_QUANT_GROUP;
}

static int rt_fp8(const tl_quant_shape *s, const float *in, const float *y, const float *scales, rt_acc *a)
{
    const tl_numfmt f = tl_quant_elem(s);
    const double u = tl_numfmt_unit_roundoff(f), half_sub = tl_numfmt_min_subnormal(f) / 2;
    const size_t k = (size_t)s->k, rows = (size_t)s->rows;
    uint8_t *has_inf = calloc(tl_quant_scale_count(s) + 1, 1);
    if (!has_inf) return tl_error(TL_EFAIL, "quant round trip", "out of memory");
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < k; i++)
            if (isinf(in[r * k + i])) has_inf[rt_scale_index(s, r, i)] = 1;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < k; i++) {
            const size_t e = r * k + i, si = rt_scale_index(s, r, i);
            if (has_inf[si] || isinf(scales[si])) {
                a->inf_groups++;
                continue;
            }
            rt_element(a, (long)e, in[e], y[e], u, half_sub, 0, scales[si]);
        }
    free(has_inf);
    return TL_OK;
}

static int roundtrip_fp8_family(const tl_quant_shape *s, const float *in, const uint8_t *codes, const float *scales_in,
                                rt_acc *a)
{
    const size_t k = (size_t)s->k, rows = (size_t)s->rows, ng = k / TL_QUANT_GROUP;
    float *y = malloc(rows * k * sizeof *y), *sc = malloc((ng * rows + 1) * sizeof *sc);
    int rc = y && sc ? 0 : tl_error(TL_EFAIL, "quant round trip", "out of memory");
    const int query = s->scheme == TL_QUANT_FP8_QUERY;
    if (!rc && query) {
        rc = tl_bfp8_dequantize_weight(TL_NF_E4M3FN, TL_QUANT_QUERY_ROWS, codes, scales_in, rows, k, y);
    } else if (!rc) {
        for (size_t r = 0; r < rows; r++) /* numerics reads row-major scales */
            for (size_t g = 0; g < ng; g++) sc[r * ng + g] = scales_in[scale_at(s, r, g)];
        rc = tl_bfp8_dequantize_act(tl_quant_elem(s), TL_QUANT_GROUP, codes, sc, rows, k, y);
    }
    if (!rc) rc = rt_fp8(s, in, y, query ? scales_in : sc, a);
    free(y);
    free(sc);
    return rc;
}

static int roundtrip_mx(const tl_quant_shape *s, const float *in, const uint8_t *codes, const uint8_t *scales, rt_acc *a)
{
    const size_t k = (size_t)s->k, n = (size_t)s->rows * k;
    const tl_numfmt f = tl_quant_elem(s);
    float *y = malloc(n * sizeof *y);
    if (!y) return tl_error(TL_EFAIL, "quant round trip", "out of memory");
    int rc = tl_mx_dequantize(f, TL_QUANT_MX_BLOCK, codes, scales, n, y); /* rows are whole blocks: one run */
    const double u = tl_numfmt_unit_roundoff(f), half_sub = tl_numfmt_min_subnormal(f) / 2, mx = tl_numfmt_max(f);
    for (size_t e = 0; !rc && e < n; e++) {
        const uint8_t c = scales[e / TL_QUANT_MX_BLOCK];
        rt_element(a, (long)e, in[e], y[e], u, half_sub, s->round_up ? 0 : mx, c == 0xFF ? NAN : ldexp(1.0, c - 127));
    }
    free(y);
    return rc;
}

static int roundtrip_routing(const tl_quant_shape *s, const int32_t *ids, const float *weights, int src_rank,
                             const uint8_t *records, rt_acc *a, const float *in)
{
    const size_t rows = (size_t)s->rows, k = (size_t)s->k, t = (size_t)s->topk;
    uint8_t *c = malloc(rows * k);
    float *sc = malloc(rows * (k / TL_QUANT_GROUP) * sizeof *sc), *w = malloc(rows * t * sizeof *w);
    int32_t *id = malloc(rows * t * sizeof *id), *row = malloc(rows * sizeof *row), *rank = malloc(rows * sizeof *rank);
    int rc = c && sc && w && id && row && rank ? 0 : tl_error(TL_EFAIL, "quant round trip", "out of memory");
    if (!rc) rc = tl_quant_unpack(s, records, c, sc, id, w, row, rank);
    if (!rc && (memcmp(id, ids, rows * t * 4) || memcmp(w, weights, rows * t * 4)))
        rc = tl_error(TL_EFAIL, "quant round trip", "the unpacked ids or weights differ from the router's");
    for (size_t r = 0; !rc && r < rows; r++)
        if (row[r] != (int32_t)r || rank[r] != src_rank)
            rc = tl_error(TL_EFAIL, "quant round trip", "record %zu names row %d of rank %d", r, row[r], rank[r]);
    if (!rc) {
        tl_quant_shape f = *s;
        f.scheme = TL_QUANT_FP8;
        rc = roundtrip_fp8_family(&f, in, c, sc, a);
    }
    free(c), free(sc), free(w), free(id), free(row), free(rank);
    return rc;
}

int tl_quant_roundtrip_check(const tl_quant_shape *s, const uint16_t *x, const int32_t *ids, const float *weights,
                             int src_rank, const uint8_t *codes, const void *scales, tl_quant_roundtrip *r)
{
    int rc = check_args(s, x, ids, weights, codes, scales);
    if (rc) return rc;
    memset(r, 0, sizeof *r);
    const size_t k = (size_t)s->k, n = (size_t)s->rows * k;
    float *in = malloc(n * sizeof *in);
    if (!in) return tl_error(TL_EFAIL, "quant round trip", "out of memory");
    bf16_row(x, n, in);
    if (s->hadamard) tl_fwht_rows(in, n / TL_QUANT_HEAD_DIM, TL_QUANT_HEAD_DIM);
    rt_acc a;
    memset(&a, 0, sizeof a);
    a.bad = -1;
    if (s->scheme == TL_QUANT_DISPATCH) rc = roundtrip_routing(s, ids, weights, src_rank, codes, &a, in);
    else if (tl_quant_is_mx(s->scheme)) rc = roundtrip_mx(s, in, codes, scales, &a);
    else rc = roundtrip_fp8_family(s, in, codes, scales, &a);
    free(in);
    return rc ? rc : rt_report(&a, r);
}
