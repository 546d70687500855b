/* Error metrics and the derived tolerance (see metrics.h for the model). */
#include "metrics.h"

#include <math.h>

#include "../core/tl.h"

int tl_compare(const float *ref, const float *out, size_t n, tl_err_metrics *m)
{
    if (!ref || !out || !m || n == 0) return tl_error(TL_EUSAGE, "compare", "empty or NULL arrays");
    double sr = 0, so = 0, sd = 0, sro = 0, max_abs = 0;
    size_t bad = 0, used = 0;
    for (size_t i = 0; i < n; i++) {
        float r = ref[i], o = out[i];
        if (isnan(o) || (isinf(o) && isfinite(r)) || (isnan(r) && !isnan(o))) {
            if (!(isnan(r) && isnan(o))) bad++;
            continue;
        }
        if (!isfinite(r)) { /* both NaN (agreed) or ref +-Inf: out must be the same Inf */
            if (!isnan(r) && o != r) bad++;
            continue;
        }
        double d = (double)o - (double)r;
        sr += (double)r * r, so += (double)o * o, sd += d * d, sro += (double)r * o;
        if (fabs(d) > max_abs) max_abs = fabs(d);
        used++;
    }
    m->n = n;
    m->nan_count = bad;
    m->worst_row = -1;
    m->max_abs = max_abs;
    m->ref_rms = used ? sqrt(sr / (double)used) : 0;
    double floor_ref = 1e-3 * m->ref_rms;
    double max_rel = 0;
    for (size_t i = 0; i < n; i++) {
        float r = ref[i], o = out[i];
        if (!isfinite(r) || !isfinite(o)) continue;
        double den = fabs((double)r) > floor_ref ? fabs((double)r) : floor_ref;
        double d = fabs((double)o - (double)r);
        double rel = den > 0 ? d / den : (d > 0 ? INFINITY : 0);
        if (rel > max_rel) max_rel = rel;
    }
    m->max_rel = max_rel;
    if (sr > 0) m->rel_rms = sqrt(sd / sr);
    else m->rel_rms = sd > 0 ? INFINITY : 0;
    m->nmse = m->rel_rms * m->rel_rms;
    m->sqnr_db = sd > 0 ? (sr > 0 ? 10.0 * log10(sr / sd) : -INFINITY) : 999.0;
    if (m->sqnr_db > 999.0) m->sqnr_db = 999.0;
    if (sr > 0 && so > 0) m->cosine = sro / sqrt(sr * so);
    else m->cosine = (sr == 0 && so == 0) ? 1.0 : 0.0;
    return TL_OK;
}

int tl_compare_rows(const float *ref, const float *out, size_t n, size_t row_len, tl_err_metrics *m)
{
    if (row_len == 0 || n % row_len)
        return tl_error(TL_EUSAGE, "compare", "%zu elements are not rows of %zu", n, row_len);
    int rc = tl_compare(ref, out, n, m);
    if (rc) return rc;
    double worst = 0;
    for (size_t r0 = 0; r0 < n; r0 += row_len) {
        double sd = 0;
        for (size_t i = r0; i < r0 + row_len; i++)
            if (isfinite(ref[i]) && isfinite(out[i])) {
                double d = (double)out[i] - (double)ref[i];
                sd += d * d;
            }
        double e = sqrt(sd / (double)row_len);
        if (e > worst) worst = e;
    }
    m->worst_row = m->ref_rms > 0 ? worst / m->ref_rms : (worst > 0 ? INFINITY : 0);
    return TL_OK;
}

double tl_tol_unit_roundoff(int kind)
{
    if (kind == TL_TOL_FP32) return 0x1p-24;
    if (kind < 0 || kind >= TL_NF_COUNT) return -1;
    return tl_numfmt_unit_roundoff((tl_numfmt)kind);
}

int tl_tolerance_make(const tl_tol_spec *s, tl_tolerance *t)
{
    if (!s || !t) return tl_error(TL_EUSAGE, "tolerance", "NULL spec");
    double ua = tl_tol_unit_roundoff(s->a_fmt), ub = tl_tol_unit_roundoff(s->b_fmt);
    double uacc = tl_tol_unit_roundoff(s->acc_fmt), uout = tl_tol_unit_roundoff(s->out_fmt);
    if (ua < 0 || ub < 0 || uacc < 0 || uout < 0)
        return tl_error(TL_EUSAGE, "tolerance", "unknown format kind in the spec");
    if (s->k < 1) return tl_error(TL_EUSAGE, "tolerance", "reduction length %ld < 1", s->k);
    double k = (double)s->k, uref = 0x1p-24;
    double e2 = (s->ref_same_inputs ? 0 : (ua * ua + ub * ub) / 3.0) + k * uacc * uacc / 6.0 +
                k * uref * uref / 6.0 + uout * uout / 3.0;
    double e = sqrt(e2);
    if (e < 0x1p-24) e = 0x1p-24;
    double safety = s->safety > 0 ? s->safety : 4.0;
    t->predicted = e;
    t->rel_rms = safety * e;
    t->check_max_abs = 1;
    t->row_factor = 0;
    return TL_OK;
}

double tl_tolerance_rel_rms(const tl_tol_spec *s)
{
    tl_tolerance t = {0};
    return tl_tolerance_make(s, &t) == TL_OK ? t.rel_rms : -1;
}

int tl_check_pass(const tl_err_metrics *m, const tl_tolerance *t)
{
    if (!m || !t || m->n == 0 || m->nan_count != 0) return 0;
    if (!(m->rel_rms <= t->rel_rms)) return 0;
    if (t->check_max_abs) {
        double n = m->n < 2 ? 2.0 : (double)m->n;
        double bound = t->rel_rms * m->ref_rms * (1.0 + sqrt(2.0 * log(n)));
        if (!(m->max_abs <= bound)) return 0;
    }
    if (t->row_factor > 0 && m->worst_row >= 0 && !(m->worst_row <= t->row_factor * t->rel_rms)) return 0;
    return 1;
}
