/* The fused MoE contract's host functions: dtype names, the shape check, the storages and their
 * sizes (see moe.h). */
#include "moe.h"

#include <string.h>

static const char *const dtype_names[TL_MOE_NDTYPES] = {
    [TL_MOE_BF16] = "bf16", [TL_MOE_FP8] = "fp8", [TL_MOE_A16W4] = "a16w4", [TL_MOE_MXFP4] = "mxfp4",
    [TL_MOE_MXFP8] = "mxfp8",
};

static int known(tl_moe_dtype d) { return (int)d >= 0 && d < TL_MOE_NDTYPES; }

int tl_moe_dtype_parse(const char *s, tl_moe_dtype *out)
{
    for (int d = 0; d < TL_MOE_NDTYPES; d++)
        if (s && strcmp(s, dtype_names[d]) == 0) {
            *out = (tl_moe_dtype)d;
            return 0;
        }
    return tl_error(TL_EUSAGE, "--dtype", "unknown dtype '%s' (bf16, fp8, a16w4, mxfp4, mxfp8)", s ? s : "");
}

const char *tl_moe_dtype_name(tl_moe_dtype d) { return known(d) ? dtype_names[d] : "?"; }

int tl_moe_shape_check(const tl_moe_shape *s)
{
    if (!s) return tl_error(TL_EUSAGE, "moe", "no shape");
    if (s->tokens < 1 || s->tokens > (1 << 20))
        return tl_error(TL_EUSAGE, "moe", "tokens %d outside [1, 1048576]", s->tokens);
    if (s->hidden < 1 || s->hidden > 65536)
        return tl_error(TL_EUSAGE, "moe", "hidden size %d outside [1, 65536]", s->hidden);
    if (s->width < 1 || s->width > 65536)
        return tl_error(TL_EUSAGE, "moe", "expert width %d outside [1, 65536]", s->width);
    if (s->n_experts < 1 || s->n_experts > 4096)
        return tl_error(TL_EUSAGE, "moe", "experts %d outside [1, 4096]", s->n_experts);
    if (s->top_k < 1 || s->top_k > s->n_experts)
        return tl_error(TL_EUSAGE, "moe", "top-k %d outside [1, experts = %d]", s->top_k, s->n_experts);
    if (s->n_shared < 0 || s->n_shared > 16)
        return tl_error(TL_EUSAGE, "moe", "shared experts %d outside [0, 16]", s->n_shared);
    if (!known(s->dtype)) return tl_error(TL_EUSAGE, "moe", "unknown dtype %d", (int)s->dtype);
    return 0;
}

const tl_storage *tl_moe_weight_storage(tl_moe_dtype d)
{
    switch (d) {
    case TL_MOE_FP8: return &TL_STORAGE_FP8_BLOCK128X128;
    case TL_MOE_A16W4: return &TL_STORAGE_INT4_G128;
    case TL_MOE_MXFP4: return &TL_STORAGE_MXFP4;
    case TL_MOE_MXFP8: return &TL_STORAGE_MXFP8_E4M3;
    default: return &TL_STORAGE_BF16;
    }
}

const tl_storage *tl_moe_act_storage(tl_moe_dtype d)
{
    switch (d) {
    case TL_MOE_FP8: return &TL_STORAGE_FP8_BLOCK128;
    case TL_MOE_MXFP4:
    case TL_MOE_MXFP8: return &TL_STORAGE_MXFP8_E4M3;
    default: return &TL_STORAGE_BF16;
    }
}

size_t tl_moe_code_bytes(tl_moe_dtype d, int rows, int cols)
{
    return known(d) && rows > 0 && cols > 0 ? tl_storage_code_bytes(tl_moe_weight_storage(d), (size_t)rows, (size_t)cols) : 0;
}

size_t tl_moe_scale_count(tl_moe_dtype d, int rows, int cols)
{
    return known(d) && rows > 0 && cols > 0 ? tl_storage_scale_count(tl_moe_weight_storage(d), (size_t)rows, (size_t)cols) : 0;
}

size_t tl_moe_weight_matrix_bytes(tl_moe_dtype d, int rows, int cols)
{
    return known(d) && rows > 0 && cols > 0 ? tl_storage_bytes(tl_moe_weight_storage(d), (size_t)rows, (size_t)cols) : 0;
}

size_t tl_moe_act_bytes(tl_moe_dtype d, size_t rows, int cols)
{
    return known(d) && cols > 0 ? tl_storage_bytes(tl_moe_act_storage(d), rows, (size_t)cols) : 0;
}

double tl_moe_weight_bytes_per_elem(tl_moe_dtype d) { return known(d) ? tl_storage_bits(tl_moe_weight_storage(d)) / 8 : 0; }

double tl_moe_act_bytes_per_elem(tl_moe_dtype d) { return known(d) ? tl_storage_bits(tl_moe_act_storage(d)) / 8 : 0; }

tl_numfmt tl_moe_act_format(tl_moe_dtype d) { return tl_moe_act_storage(d)->elem; }
