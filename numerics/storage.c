/* Exact storage sizes of block-scaled tensors (see storage.h). */
#include "storage.h"

#include "blockfp8.h"
#include "mx.h"

#define FP32_BITS 32
#define E8M0_BITS 8
#define INT4_GROUP 128

const tl_storage TL_STORAGE_BF16 = {"bf16", TL_QS_COUNT, TL_NF_BF16, 16, 0, 1, 1};
const tl_storage TL_STORAGE_FP8_BLOCK128X128 = {"fp8_block128x128", TL_QS_COUNT, TL_NF_E4M3FN, 8, FP32_BITS,
                                                TL_BFP8_GROUP, TL_BFP8_GROUP};
const tl_storage TL_STORAGE_FP8_BLOCK128 = {"fp8_block128", TL_QS_FP8_BLOCK128, TL_NF_E4M3FN, 8, FP32_BITS, 1,
                                            TL_BFP8_GROUP};
const tl_storage TL_STORAGE_INT4_G128 = {"int4_g128_sym", TL_QS_INT4_G128_SYM, TL_NF_COUNT, 4, FP32_BITS, 1,
                                         INT4_GROUP};
const tl_storage TL_STORAGE_MXFP4 = {"mxfp4", TL_QS_MXFP4, TL_NF_E2M1, 4, E8M0_BITS, 1, TL_MX_BLOCK};
const tl_storage TL_STORAGE_MXFP8_E4M3 = {"mxfp8_e4m3", TL_QS_MXFP8_E4M3, TL_NF_E4M3FN, 8, E8M0_BITS, 1,
                                          TL_MX_BLOCK};

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

double tl_storage_bits(const tl_storage *s)
{
    return s->elem_bits + (double)s->scale_bits / ((double)s->block_rows * s->block_cols);
}

size_t tl_storage_code_bytes(const tl_storage *s, size_t rows, size_t cols)
{
    if (rows < 1 || cols < 1) return 0;
    return rows * ceil_div(cols * (size_t)s->elem_bits, 8);
}

size_t tl_storage_scale_count(const tl_storage *s, size_t rows, size_t cols)
{
    if (rows < 1 || cols < 1 || s->scale_bits == 0) return 0;
    return ceil_div(rows, (size_t)s->block_rows) * ceil_div(cols, (size_t)s->block_cols);
}

size_t tl_storage_bytes(const tl_storage *s, size_t rows, size_t cols)
{
    return tl_storage_code_bytes(s, rows, cols) + tl_storage_scale_count(s, rows, cols) * (size_t)s->scale_bits / 8;
}
