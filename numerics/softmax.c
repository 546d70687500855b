/* numerics/softmax.c: the split-KV decode tolerance (numerics/softmax.h gives the derivation). */
#include "softmax.h"

#include <math.h>
#include <string.h>

#include "../core/tl.h"

#define U 0x1p-24
#define SAFETY 4.0
#define RESCALE_TILE 16.0 /* the most often the running max can move: once a tile of 16 keys */

/* The score's absolute error^2 from the dot's accumulator and the two scale roundings. */
static double score_err2(const tl_softmax_tol_spec *s)
{
    const double p = ldexp(1.0, -s->acc_bits);
    return s->s_rms * s->s_rms * ((double)s->qk_dim * p * p / 6.0 + 2.0 * U * U / 3.0);
}

/* The merge's share of O's relative error^2: the partials' and lse's stores, the weights, the sum. */
static double merge_o_err2(const tl_softmax_tol_spec *s)
{
    if (s->shards <= 1) return 0;
    return U * U / 3.0 + s->lse_max * s->lse_max * U * U / 3.0 + 2.0 * U * U + s->shards * U * U / 6.0;
}

int tl_softmax_tolerance(const tl_softmax_tol_spec *s, tl_tolerance *o, tl_tolerance *lse)
{
    if (!s || s->qk_dim < 1 || s->shards < 1 || (s->acc_bits != 0 && (s->acc_bits < 8 || s->acc_bits > 52)) ||
        s->pv_bits < 0 || s->pv_bits > 52)
        return tl_error(TL_EUSAGE, "softmax tolerance",
                        "bad spec (D >= 1, shards >= 1, accumulator 0 or 8..52 bits, P.V 0..52 bits)");
    if (!(isfinite(s->s_rms) && s->s_rms >= 0 && isfinite(s->lse_rms) && s->lse_rms >= 0 && isfinite(s->lse_max) &&
          s->lse_max >= 0))
        return tl_error(TL_EUSAGE, "softmax tolerance", "score or LSE statistics must be finite and >= 0");
    const double n = s->keys > 1 ? (double)s->keys : 1.0;
    const double store = 2.0 * U * U / 3.0;
    double eo2 = store + merge_o_err2(s);
    double el2 = 3.0 * s->lse_max * s->lse_max * U * U / 3.0 + (s->shards > 1 ? U * U : 0.0); /* stores; log S */
    if (s->acc_bits) {
        const double kernel = score_err2(s) + 4.0 * U * U /* exp */ + (n / RESCALE_TILE) * U * U / 3.0;
        eo2 += kernel + n * U * U / 6.0;
        if (s->pv_bits > 0) eo2 += ldexp(1.0, -2 * s->pv_bits) / 3.0; /* P.V's operand rounding */
        el2 += score_err2(s) + n * U * U / 9.0 + U * U + (n / RESCALE_TILE) * U * U / 3.0;
    }
    memset(o, 0, sizeof *o);
    memset(lse, 0, sizeof *lse);
    o->predicted = sqrt(eo2);
    o->rel_rms = SAFETY * o->predicted;
    o->check_max_abs = 1;
    /* LSE: an absolute error, compared as a relative RMS over the array */
    const double lse_scale = s->lse_rms > 0 ? s->lse_rms : 1.0;
    lse->predicted = sqrt(el2) / lse_scale;
    lse->rel_rms = SAFETY * lse->predicted;
    lse->check_max_abs = 1;
    return TL_OK;
}
