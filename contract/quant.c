/* contract/quant.c: the quant contract's host functions (contract/quant.h). */
#include "quant.h"

#include <math.h>
#include <string.h>

#include "../core/tl.h"

static const char *const scheme_names[TL_QUANT_NSCHEMES] = {"fp8", "fp8-fnuz", "mxfp8", "mxfp4", "fp8-query",
                                                             "dispatch"};

int tl_quant_scheme_id_parse(const char *s, tl_quant_scheme_id *out)
{
    for (int i = 0; i < TL_QUANT_NSCHEMES; i++)
        if (s && strcmp(s, scheme_names[i]) == 0) {
            *out = (tl_quant_scheme_id)i;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--scheme", "unknown scheme '%s' (fp8, fp8-fnuz, mxfp8, mxfp4, fp8-query or dispatch)",
                    s ? s : "");
}

const char *tl_quant_scheme_id_name(tl_quant_scheme_id s)
{
    return (unsigned)s < TL_QUANT_NSCHEMES ? scheme_names[s] : "?";
}

int tl_quant_is_group128(tl_quant_scheme_id s)
{
    return s == TL_QUANT_FP8 || s == TL_QUANT_FP8_FNUZ || s == TL_QUANT_DISPATCH;
}

int tl_quant_is_mx(tl_quant_scheme_id s) { return s == TL_QUANT_MXFP8 || s == TL_QUANT_MXFP4; }

tl_numfmt tl_quant_elem(const tl_quant_shape *s)
{
    return s->scheme == TL_QUANT_FP8_FNUZ ? TL_NF_E4M3FNUZ : s->scheme == TL_QUANT_MXFP4 ? TL_NF_E2M1 : TL_NF_E4M3FN;
}

static long group_of(tl_quant_scheme_id s) { return tl_quant_is_mx(s) ? TL_QUANT_MX_BLOCK : TL_QUANT_GROUP; }

int tl_quant_shape_check(const tl_quant_shape *s)
{
    const char *name = tl_quant_scheme_id_name(s->scheme);
    if ((unsigned)s->scheme >= TL_QUANT_NSCHEMES) return tl_error(TL_EUSAGE, "quant", "unknown scheme");
    if (s->rows < 1 || s->rows > TL_QUANT_MAX_ROWS)
        return tl_error(TL_EUSAGE, "--rows", "%ld rows is not in [1, %ld]", s->rows, TL_QUANT_MAX_ROWS);
    if (s->k < 1 || s->k > TL_QUANT_MAX_K)
        return tl_error(TL_EUSAGE, "--k", "K = %ld is not in [1, %ld]", s->k, TL_QUANT_MAX_K);
    const long g = group_of(s->scheme);
    if (s->k % g != 0)
        return tl_error(TL_EUSAGE, "--k", "K = %ld is not a multiple of %s's %s of %ld", s->k, name,
                        s->scheme == TL_QUANT_FP8_QUERY ? "head dimension" : "group", g);
    if ((long long)s->rows * s->k > TL_QUANT_MAX_ELEMS)
        return tl_error(TL_EUSAGE, "--rows", "%ld x %ld values is more than %lld", s->rows, s->k, TL_QUANT_MAX_ELEMS);
    if (s->ue8m0 && tl_quant_is_mx(s->scheme))
        return tl_error(TL_EUSAGE, "--ue8m0", "MX scales are powers of two already (%s takes --rule)", name);
    if (s->round_up && !tl_quant_is_mx(s->scheme))
        return tl_error(TL_EUSAGE, "--rule", "only the MX schemes have a scale rule, not %s", name);
    if (s->layout != TL_QUANT_SCALES_ROW && s->scheme != TL_QUANT_FP8 && s->scheme != TL_QUANT_FP8_FNUZ)
        return tl_error(TL_EUSAGE, "--scale-layout", "only fp8 and fp8-fnuz take a column-major layout, not %s", name);
    if (s->hadamard && s->scheme != TL_QUANT_FP8_QUERY)
        return tl_error(TL_EUSAGE, "--hadamard", "only fp8-query rotates, not %s", name);
    if (s->scheme == TL_QUANT_DISPATCH && (s->topk < 1 || s->topk > TL_QUANT_MAX_TOPK))
        return tl_error(TL_EUSAGE, "--topk", "top-k %d is not in [1, %d]", s->topk, TL_QUANT_MAX_TOPK);
    return TL_OK;
}

tl_quant_record tl_quant_record_layout(long k, int topk)
{
    tl_quant_record r;
    r.codes = 0;
    r.scales = (size_t)k;
    r.ids = r.scales + 4 * (size_t)(k / TL_QUANT_GROUP);
    r.weights = r.ids + 4 * (size_t)topk;
    r.source = r.weights + 4 * (size_t)topk;
    r.pad = r.source + 8;
    r.bytes = (r.pad + 7) & ~(size_t)7;
    return r;
}

size_t tl_quant_code_bytes(const tl_quant_shape *s)
{
    const size_t n = (size_t)s->rows * (size_t)s->k;
    if (s->scheme == TL_QUANT_DISPATCH) return (size_t)s->rows * tl_quant_record_layout(s->k, s->topk).bytes;
    return s->scheme == TL_QUANT_MXFP4 ? n / 2 : n;
}

size_t tl_quant_scale_count(const tl_quant_shape *s)
{
    const size_t rows = (size_t)s->rows, k = (size_t)s->k;
    if (s->scheme == TL_QUANT_FP8_QUERY)
        return (rows + TL_QUANT_QUERY_ROWS - 1) / TL_QUANT_QUERY_ROWS * (k / TL_QUANT_HEAD_DIM);
    if (s->scheme == TL_QUANT_DISPATCH) return 0; /* inside the records */
    return rows * (k / (size_t)group_of(s->scheme));
}

size_t tl_quant_scale_size(const tl_quant_shape *s) { return tl_quant_is_mx(s->scheme) ? 1 : 4; }

double tl_quant_read_bytes(const tl_quant_shape *s)
{
    double b = 2.0 * (double)s->rows * (double)s->k;
    if (s->scheme == TL_QUANT_DISPATCH) b += 8.0 * (double)s->rows * s->topk;
    return b;
}

double tl_quant_write_bytes(const tl_quant_shape *s)
{
    return (double)tl_quant_code_bytes(s) + (double)tl_quant_scale_count(s) * (double)tl_quant_scale_size(s);
}

static const char *const payload_names[TL_PAYLOAD_N] = {"bf16", "fp8 1x128", "mxfp8", "mxfp4"};

const char *tl_payload_name(tl_payload_kind k) { return (unsigned)k < TL_PAYLOAD_N ? payload_names[k] : "?"; }

tl_payload_bytes tl_payload_of(tl_payload_kind kind, long hidden, int topk)
{
    tl_payload_bytes p = {0, 0, 0, 0};
    const tl_quant_record r = tl_quant_record_layout(hidden, topk);
    const double routing = (double)(r.bytes - r.ids), h = (double)hidden;
    switch (kind) {
    case TL_PAYLOAD_BF16: p.values = 2 * h; break;
    case TL_PAYLOAD_FP8: p.values = h, p.scales = 4 * h / TL_QUANT_GROUP, p.routing = routing; break;
    case TL_PAYLOAD_MXFP8: p.values = h, p.scales = h / TL_QUANT_MX_BLOCK, p.routing = routing; break;
    case TL_PAYLOAD_MXFP4: p.values = h / 2, p.scales = h / TL_QUANT_MX_BLOCK, p.routing = routing; break;
    default: break;
    }
    p.total = p.values + p.scales + p.routing;
    return p;
}

float tl_quant_hadamard_scale(void) { return (float)(1.0 / sqrt((double)TL_QUANT_HEAD_DIM)); }

long tl_quant_blocks(const tl_quant_shape *s)
{
    const long per_block = (long)TL_QUANT_THREADS * TL_QUANT_VECS * TL_QUANT_VALUES_PER_THREAD; /* 4096 values */
    if (s->scheme == TL_QUANT_FP8_QUERY)
        return (s->rows + TL_QUANT_QUERY_ROWS - 1) / TL_QUANT_QUERY_ROWS * (s->k / TL_QUANT_HEAD_DIM);
    const long long n = (long long)s->rows * s->k;
    return (long)((n + per_block - 1) / per_block);
}
