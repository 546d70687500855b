/* contract/indexer.c: the indexer contract's host functions (contract/indexer.h). */
#include "indexer.h"

#include "../core/tl.h"

static int check_ranges(const tl_indexer_shape *s)
{
    if (s->rows < 1 || s->rows > TL_INDEXER_MAX_ROWS)
        return tl_error(TL_EUSAGE, "indexer", "rows = %ld outside [1, %ld]", s->rows, TL_INDEXER_MAX_ROWS);
    if (s->kv < 1 || s->kv > TL_INDEXER_MAX_KV)
        return tl_error(TL_EUSAGE, "indexer", "kv = %ld positions outside [1, %ld]", s->kv, TL_INDEXER_MAX_KV);
    if (s->heads < 16 || s->heads > TL_INDEXER_MAX_HEADS || s->heads % 16)
        return tl_error(TL_EUSAGE, "indexer", "heads = %d: must be a multiple of 16 in [16, %d] (32 GLM-5, 64 DeepSeek-V3.2)",
                        s->heads, TL_INDEXER_MAX_HEADS);
    if (s->dim != TL_INDEXER_DIM)
        return tl_error(TL_EUSAGE, "indexer", "head dimension %d: only D = %d is supported", s->dim, TL_INDEXER_DIM);
    if (s->block_q < 0 || s->block_q > TL_INDEXER_MAX_BLOCK_Q || (s->block_q & (s->block_q - 1)))
        return tl_error(TL_EUSAGE, "indexer", "block_q = %d: must be 1, 2, 4 or 8 (0: the model chooses)", s->block_q);
    if ((long long)s->rows * s->kv > TL_INDEXER_MAX_LOGITS)
        return tl_error(TL_EUSAGE, "indexer", "rows x kv = %lld logits, more than %lld (16 GiB of float32)",
                        (long long)s->rows * s->kv, TL_INDEXER_MAX_LOGITS);
    return TL_OK;
}

int tl_indexer_shape_check(const tl_indexer_shape *s)
{
    if (!s) return tl_error(TL_EUSAGE, "indexer", "no shape");
    int rc = check_ranges(s);
    if (rc) return rc;
    if ((s->starts == NULL) != (s->ends == NULL))
        return tl_error(TL_EUSAGE, "indexer", "window starts and ends must be given together");
    if (s->starts) {
        for (long i = 0; i < s->rows; i++)
            if (s->starts[i] < 0 || s->starts[i] > s->ends[i] || s->ends[i] > s->kv)
                return tl_error(TL_EUSAGE, "indexer", "row %ld: window [%d, %d) is not inside [0, %ld] with start <= end",
                                i, s->starts[i], s->ends[i], s->kv);
        return TL_OK;
    }
    if (s->rows > s->kv)
        return tl_error(TL_EUSAGE, "indexer", "rows = %ld > kv = %ld: the query rows are the last of the sequence", s->rows,
                        s->kv);
    if (s->prefix < 0 || s->prefix > s->kv - s->rows)
        return tl_error(TL_EUSAGE, "indexer",
                        "prefix %ld: the causal rule needs 0 <= prefix <= kv - rows = %ld (row i sees prefix + i + 1 positions)",
                        s->prefix, s->kv - s->rows);
    return TL_OK;
}

double tl_indexer_scores(const tl_indexer_shape *s)
{
    if (s->starts && s->ends) {
        double n = 0;
        for (long i = 0; i < s->rows; i++) n += (double)s->ends[i] - s->starts[i];
        return n;
    }
    const double r = (double)s->rows;
    return r * (double)s->prefix + r * (r + 1) / 2.0;
}

double tl_indexer_bytes(const tl_indexer_shape *s)
{
    long furthest = 0;
    if (s->starts && s->ends) {
        for (long i = 0; i < s->rows; i++)
            if (s->ends[i] > furthest) furthest = s->ends[i];
    } else {
        furthest = s->prefix + s->rows;
    }
    return tl_indexer_q_bytes(s) + tl_indexer_w_bytes(s) + (double)furthest * (s->dim + 4.0) +
           tl_indexer_logits_bytes(s);
}

void tl_indexer_block_window(const tl_indexer_shape *s, int block_q, long b, long *start, long *end)
{
    long lo = s->kv, hi = 0;
    const long first = b * block_q, last = first + block_q < s->rows ? first + block_q : s->rows;
    for (long i = first; i < last; i++) {
        long a, e;
        tl_indexer_window(s, i, &a, &e);
        if (a == e) continue;
        if (a < lo) lo = a;
        if (e > hi) hi = e;
    }
    if (hi <= lo) lo = hi = 0;
    *start = lo;
    *end = hi;
}

long tl_indexer_block_tiles(const tl_indexer_shape *s, int block_q, long b, int tile)
{
    long a, e;
    tl_indexer_block_window(s, block_q, b, &a, &e);
    if (a == e) return 0;
    const long first = a / tile;
    return (e + tile - 1) / tile - first;
}

/* Under the rule block b's union is [0, P + min(b q + q, rows)): its tiles are
 * ceil((P + last) / tile) with last = min((b + 1) q, rows). */
static double rule_computed(const tl_indexer_shape *s, int q, int tile)
{
    const long blocks = tl_indexer_blocks(s, q);
    double sum = 0;
    for (long b = 0; b < blocks; b++) {
        long last = (b + 1) * q < s->rows ? (b + 1) * q : s->rows;
        long rows_here = last - b * q;
        sum += (double)rows_here * (double)(((s->prefix + last) + tile - 1) / tile) * tile;
    }
    return sum;
}

double tl_indexer_computed_scores(const tl_indexer_shape *s, int block_q, int tile)
{
    if (block_q < 1 || tile < 1) return 0;
    if (!(s->starts && s->ends)) return rule_computed(s, block_q, tile);
    const long blocks = tl_indexer_blocks(s, block_q);
    double sum = 0;
    for (long b = 0; b < blocks; b++) {
        long last = (b + 1) * block_q < s->rows ? (b + 1) * block_q : s->rows;
        sum += (double)(last - b * block_q) * (double)tl_indexer_block_tiles(s, block_q, b, tile) * tile;
    }
    return sum;
}
