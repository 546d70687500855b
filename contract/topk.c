/* contract/topk.c: the top-k contract's host functions (contract/topk.h). */
#include "topk.h"

#include <string.h>

#include "../core/tl.h"

static const char *const dtype_names[TL_TOPK_NDTYPES] = {"f32", "bf16", "f16"};

int tl_topk_dtype_parse(const char *s, tl_topk_dtype *out)
{
    for (int d = 0; d < TL_TOPK_NDTYPES; d++)
        if (s && strcmp(s, dtype_names[d]) == 0) {
            *out = (tl_topk_dtype)d;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--dtype", "unknown score type '%s' (f32, bf16 or f16)", s ? s : "");
}

const char *tl_topk_dtype_name(tl_topk_dtype d) { return d < TL_TOPK_NDTYPES ? dtype_names[d] : "?"; }

static const char *const path_names[TL_TOPK_NPATHS] = {"resident", "stream"};

int tl_topk_path_parse(const char *s, tl_topk_path *out)
{
    for (int p = 0; p < TL_TOPK_NPATHS; p++)
        if (s && strcmp(s, path_names[p]) == 0) {
            *out = (tl_topk_path)p;
            return TL_OK;
        }
    return tl_error(TL_EUSAGE, "--path", "unknown path '%s' (resident or stream)", s ? s : "");
}

const char *tl_topk_path_name(tl_topk_path p) { return p < TL_TOPK_NPATHS ? path_names[p] : "?"; }

int tl_topk_shape_check(const tl_topk_shape *s)
{
    if (s->batch < 1 || s->batch > TL_TOPK_MAX_BATCH)
        return tl_error(TL_EUSAGE, "topk", "batch %d outside [1, %d]", s->batch, TL_TOPK_MAX_BATCH);
    if (s->n < 1 || s->n > TL_TOPK_MAX_N)
        return tl_error(TL_EUSAGE, "topk", "n = %ld outside [1, %ld]", s->n, TL_TOPK_MAX_N);
    if (s->k < 1 || s->k > TL_TOPK_MAX_K)
        return tl_error(TL_EUSAGE, "topk", "k = %d outside [1, %d]", s->k, TL_TOPK_MAX_K);
    if ((long long)s->batch * s->n > TL_TOPK_MAX_ELEMS)
        return tl_error(TL_EUSAGE, "topk", "batch x n = %lld scores, more than %lld", (long long)s->batch * s->n,
                        TL_TOPK_MAX_ELEMS);
    if (s->dtype >= TL_TOPK_NDTYPES) return tl_error(TL_EUSAGE, "topk", "unknown score type");
    for (int b = 0; s->lens && b < s->batch; b++)
        if (s->lens[b] < 0 || s->lens[b] > s->n)
            return tl_error(TL_EUSAGE, "topk", "row %d: length %d outside [0, %ld]", b, s->lens[b], s->n);
    return TL_OK;
}
