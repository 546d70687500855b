/* contract/decode.c: the decode contract's host functions (contract/decode.h). */
#include "decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"

static const char *const kind_names[TL_DECODE_NKINDS] = {"paged", "dual-scope"};
static const char *const kv_names[TL_DECODE_NKV] = {"bf16", "fp8"};

int tl_decode_kind_parse(const char *s, tl_decode_kind *out)
{
    for (int k = 0; k < TL_DECODE_NKINDS; k++)
        if (s && strcmp(s, kind_names[k]) == 0) {
            *out = (tl_decode_kind)k;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--kind", "unknown decode kind '%s' (paged or dual-scope)", s ? s : "");
}

const char *tl_decode_kind_name(tl_decode_kind k) { return (unsigned)k < TL_DECODE_NKINDS ? kind_names[k] : "?"; }

int tl_decode_kv_parse(const char *s, tl_decode_kv *out)
{
    for (int k = 0; k < TL_DECODE_NKV; k++)
        if (s && strcmp(s, kv_names[k]) == 0) {
            *out = (tl_decode_kv)k;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--kv", "unknown KV cache format '%s' (bf16 or fp8)", s ? s : "");
}

const char *tl_decode_kv_name(tl_decode_kv k) { return (unsigned)k < TL_DECODE_NKV ? kv_names[k] : "?"; }

float tl_decode_scale(const tl_decode_shape *s)
{
    return s->scale != 0 ? s->scale : (float)(1.0 / sqrt((double)tl_decode_qk_dim(s)));
}

static int check_paged(const tl_decode_shape *s)
{
    if (s->kv_heads < 1 || s->kv_heads > TL_DECODE_MAX_KV_HEADS)
        return tl_error(TL_EUSAGE, "decode", "kv-heads = %d outside [1, %d]", s->kv_heads, TL_DECODE_MAX_KV_HEADS);
    if (s->gqa < 1 || s->gqa > TL_DECODE_MAX_GQA)
        return tl_error(TL_EUSAGE, "decode", "gqa = %d outside [1, %d]", s->gqa, TL_DECODE_MAX_GQA);
    const long max_blocks = TL_DECODE_MAX_LEN / TL_DECODE_PAGE;
    if (s->max_blocks < 1 || s->max_blocks > max_blocks)
        return tl_error(TL_EUSAGE, "decode", "max-blocks = %d outside [1, %ld]", s->max_blocks, max_blocks);
    if (s->pages < 1 || (long long)s->pages * TL_DECODE_PAGE * s->kv_heads * TL_DECODE_PAGED_DIM > TL_DECODE_MAX_POOL_ELEMS)
        return tl_error(TL_EUSAGE, "decode", "%ld pages of %d positions x %d KV heads x %d: outside [1 page, %lld elements]",
                        s->pages, TL_DECODE_PAGE, s->kv_heads, TL_DECODE_PAGED_DIM, TL_DECODE_MAX_POOL_ELEMS);
    const long cap = (long)s->max_blocks * TL_DECODE_PAGE;
    for (int b = 0; b < s->batch; b++)
        if (s->lens[b] < 0 || s->lens[b] > cap)
            return tl_error(TL_EUSAGE, "decode", "request %d: length %d outside [0, %ld] (max-blocks x %d)", b, s->lens[b],
                            cap, TL_DECODE_PAGE);
    return TL_OK;
}

static int check_dual_scope(const tl_decode_shape *s)
{
    if (s->heads < 16 || s->heads > TL_DECODE_MAX_HEADS || s->heads % 16)
        return tl_error(TL_EUSAGE, "decode", "heads = %d: must be a multiple of 16 in [16, %d] (128 DeepSeek-V3.2)",
                        s->heads, TL_DECODE_MAX_HEADS);
    if (s->mtp < 1 || s->mtp > TL_DECODE_MAX_MTP)
        return tl_error(TL_EUSAGE, "decode", "mtp = %d query tokens outside [1, %d]", s->mtp, TL_DECODE_MAX_MTP);
    if (s->max_len < 1 || s->max_len > TL_DECODE_MAX_LEN)
        return tl_error(TL_EUSAGE, "decode", "max-len = %ld outside [1, %ld]", s->max_len, TL_DECODE_MAX_LEN);
    if ((long long)s->batch * s->max_len * TL_DECODE_MLA_QK_DIM > TL_DECODE_MAX_LATENT_ELEMS)
        return tl_error(TL_EUSAGE, "decode", "batch x max-len x %d = %lld latent elements, more than %lld",
                        TL_DECODE_MLA_QK_DIM, (long long)s->batch * s->max_len * TL_DECODE_MLA_QK_DIM,
                        TL_DECODE_MAX_LATENT_ELEMS);
    if (s->window < 0 || s->window > TL_DECODE_MAX_WINDOW)
        return tl_error(TL_EUSAGE, "decode", "window = %ld outside [0, %ld]", s->window, TL_DECODE_MAX_WINDOW);
    if (s->topk < 0 || s->topk > TL_DECODE_MAX_TOPK)
        return tl_error(TL_EUSAGE, "decode", "topk = %d outside [0, %d]", s->topk, TL_DECODE_MAX_TOPK);
    for (int b = 0; b < s->batch; b++)
        if (s->lens[b] < 0 || s->lens[b] > s->max_len)
            return tl_error(TL_EUSAGE, "decode", "request %d: length %d outside [0, %ld] (max-len)", b, s->lens[b],
                            s->max_len);
    return TL_OK;
}

int tl_decode_shape_check(const tl_decode_shape *s)
{
    if (!s) return tl_error(TL_EUSAGE, "decode", "no shape");
    if ((unsigned)s->kind >= TL_DECODE_NKINDS) return tl_error(TL_EUSAGE, "decode", "unknown kind");
    if ((unsigned)s->kv >= TL_DECODE_NKV) return tl_error(TL_EUSAGE, "decode", "unknown KV cache format");
    if (s->batch < 1 || s->batch > TL_DECODE_MAX_BATCH)
        return tl_error(TL_EUSAGE, "decode", "batch = %d outside [1, %d]", s->batch, TL_DECODE_MAX_BATCH);
    if (!s->lens) return tl_error(TL_EUSAGE, "decode", "no request lengths");
    if (!(isfinite(s->scale) && s->scale >= 0))
        return tl_error(TL_EUSAGE, "decode", "softmax scale %g: must be finite and > 0 (0: the default)", (double)s->scale);
    return s->kind == TL_DECODE_PAGED ? check_paged(s) : check_dual_scope(s);
}

static int scales_finite(const float *x, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return tl_error(TL_EUSAGE, "decode", "%s[%zu] = %g is not finite", name, i, (double)x[i]);
    return TL_OK;
}

static int check_block_table(const tl_decode_shape *s, const int32_t *table)
{
    for (int b = 0; b < s->batch; b++) {
        const long used = (s->lens[b] + TL_DECODE_PAGE - 1) / TL_DECODE_PAGE;
        for (long i = 0; i < used; i++) {
            const int32_t p = table[(size_t)b * s->max_blocks + i];
            if (p < 0 || p >= s->pages)
                return tl_error(TL_EUSAGE, "decode", "block_table[%d][%ld] = %d: outside [0, %ld pages)", b, i, p, s->pages);
        }
    }
    return TL_OK;
}

static int check_topk(const tl_decode_shape *s, const int32_t *topk)
{
    for (long r = 0; r < tl_decode_rows(s); r++) {
        const int32_t len = s->lens[r / s->mtp];
        for (int i = 0; i < s->topk; i++) {
            const int32_t p = topk[(size_t)r * s->topk + i];
            if (p < -1 || p >= len)
                return tl_error(TL_EUSAGE, "decode",
                                "topk[%ld][%ld][%d] = %d: must be -1 (none) or a position in [0, %d) of request %ld",
                                r / s->mtp, r % s->mtp, i, p, len, r / s->mtp);
        }
    }
    return TL_OK;
}

int tl_decode_inputs_check(const tl_decode_shape *s, const tl_decode_inputs *in)
{
    const int fp8 = s->kv == TL_DECODE_KV_FP8;
    if (!in || !in->q || !in->k) return tl_error(TL_EUSAGE, "decode", "missing Q or the KV cache");
    if (s->kind == TL_DECODE_PAGED) {
        if (!in->v || !in->block_table) return tl_error(TL_EUSAGE, "decode", "paged: missing V or the block table");
        if (fp8 && !(in->k_scale && in->v_scale)) return tl_error(TL_EUSAGE, "decode", "fp8 KV: missing the K or V scales");
        int rc = check_block_table(s, in->block_table);
        if (!rc && fp8) rc = scales_finite(in->k_scale, tl_decode_scale_elems(s), "k_scale");
        if (!rc && fp8) rc = scales_finite(in->v_scale, tl_decode_scale_elems(s), "v_scale");
        return rc;
    }
    if (s->topk > 0 && !in->topk) return tl_error(TL_EUSAGE, "decode", "dual-scope: missing the top-k indices");
    if (fp8 && !in->k_scale) return tl_error(TL_EUSAGE, "decode", "fp8 KV: missing the latent scales");
    int rc = s->topk > 0 ? check_topk(s, in->topk) : TL_OK;
    if (!rc && fp8) rc = scales_finite(in->k_scale, tl_decode_scale_elems(s), "k_scale");
    return rc;
}

int tl_decode_auto_shards(const tl_decode_shape *s, int compute_units)
{
    const long groups = tl_decode_groups(s, 1);
    if (compute_units < 1 || groups >= compute_units) return 1;
    long longest = 0;
    for (long r = 0; r < tl_decode_rows(s); r++) {
        const long n = tl_decode_row_slots(s, r);
        if (n > longest) longest = n;
    }
    const int g = tl_decode_granule(s->kind);
    long by_len = (longest + g - 1) / g / tl_decode_min_shard_granules(s->kind);
    long want = 2L * compute_units / groups;
    long n = want < by_len ? want : by_len;
    if (n > TL_DECODE_MAX_SHARDS) n = TL_DECODE_MAX_SHARDS;
    if (n <= 1) return 1;
    /* as few shards as deal the longest row's granules in the same runs: none of them left empty */
    const long granules = (longest + g - 1) / g, per = (granules + n - 1) / n;
    return (int)((granules + per - 1) / per);
}

static int cmp_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Distinct entries of list[0..n) in [0, visible) and outside [wlo, whi); scratch holds n. */
static long distinct_outside(const int32_t *list, int n, long visible, long wlo, long whi, int32_t *scratch)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (list[i] >= 0 && list[i] < visible && !(list[i] >= wlo && list[i] < whi)) scratch[m++] = list[i];
    qsort(scratch, (size_t)m, sizeof *scratch, cmp_i32);
    long count = 0;
    for (int i = 0; i < m; i++) count += i == 0 || scratch[i] != scratch[i - 1];
    return count;
}

/* Dual-scope: row r's window [*lo, *hi). */
static void row_window(const tl_decode_shape *s, long r, long *lo, long *hi)
{
    tl_decode_window(tl_decode_visible(s->lens[r / s->mtp], s->mtp, (int)(r % s->mtp)), s->window, lo, hi);
}

long tl_decode_row_keys(const tl_decode_shape *s, long r, const int32_t *topk)
{
    if (s->kind == TL_DECODE_PAGED) return s->lens[r];
    long lo, hi;
    row_window(s, r, &lo, &hi);
    if (s->topk == 0) return hi - lo;
    if (!topk) { /* the estimate: every entry counted, up to the positions left outside the window */
        return hi - lo + (s->topk < lo ? s->topk : lo);
    }
    int32_t *scratch = malloc((size_t)s->topk * sizeof *scratch);
    if (!scratch) return hi - lo + s->topk;
    const long n = distinct_outside(topk, s->topk, hi, lo, hi, scratch);
    free(scratch);
    return hi - lo + n;
}

double tl_decode_flops(const tl_decode_shape *s, const int32_t *topk)
{
    double keys = 0;
    for (long r = 0; r < tl_decode_rows(s); r++)
        keys += (double)tl_decode_row_keys(s, r, topk ? topk + (size_t)r * s->topk : NULL);
    return keys * tl_decode_heads(s) * 2.0 * (tl_decode_qk_dim(s) + tl_decode_v_dim(s));
}

/* Dual-scope: the positions request b's queries read, the union of their key sets. */
static double request_positions(const tl_decode_shape *s, int b, const int32_t *topk, int32_t *scratch)
{
    const long len = s->lens[b];
    const long v_first = tl_decode_visible(len, s->mtp, 0), v_last = tl_decode_visible(len, s->mtp, s->mtp - 1);
    /* the windows of consecutive queries end one position apart: their union is one range */
    long ulo = 0, uhi = 0;
    if (s->window > 0) {
        ulo = v_first > s->window ? v_first - s->window : 0;
        uhi = v_last;
    }
    double n = (double)(uhi - ulo);
    if (s->topk == 0) return n;
    if (!topk) { /* the estimate: the T lists disjoint and outside the windows */
        const double rest = (double)v_last - n, sel = (double)s->topk * s->mtp;
        return n + (sel < rest ? sel : rest);
    }
    int m = 0;
    for (int t = 0; t < s->mtp; t++) {
        const long vis = tl_decode_visible(len, s->mtp, t);
        const int32_t *list = topk + ((size_t)b * s->mtp + t) * s->topk;
        for (int i = 0; i < s->topk; i++)
            if (list[i] >= 0 && list[i] < vis && !(list[i] >= ulo && list[i] < uhi)) scratch[m++] = list[i];
    }
    qsort(scratch, (size_t)m, sizeof *scratch, cmp_i32);
    for (int i = 0; i < m; i++) n += i == 0 || scratch[i] != scratch[i - 1];
    return n;
}

double tl_decode_bytes(const tl_decode_shape *s, const int32_t *topk)
{
    const double e = tl_decode_kv_bytes_per_elem(s), fp8 = s->kv == TL_DECODE_KV_FP8;
    const double io = 2.0 * tl_decode_q_elems(s) + 4.0 * tl_decode_o_elems(s) + 4.0 * tl_decode_lse_elems(s);
    double cache = 0;
    if (s->kind == TL_DECODE_PAGED) {
        const double per_position = s->kv_heads * (2.0 * TL_DECODE_PAGED_DIM * e + (fp8 ? 8.0 : 0.0));
        for (int b = 0; b < s->batch; b++)
            cache += s->lens[b] * per_position + 4.0 * ((s->lens[b] + TL_DECODE_PAGE - 1) / TL_DECODE_PAGE);
        return io + cache;
    }
    int32_t *scratch = topk ? malloc((size_t)s->topk * s->mtp * sizeof *scratch + 1) : NULL;
    const double per_position = TL_DECODE_MLA_QK_DIM * e + (fp8 ? 4.0 : 0.0);
    for (int b = 0; b < s->batch; b++)
        cache += per_position * request_positions(s, b, scratch ? topk : NULL, scratch);
    free(scratch);
    return io + cache + 4.0 * tl_decode_topk_elems(s);
}
