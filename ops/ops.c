/* ops/ops.c: the op table (core/op.h), one row per op, and what the rows share. A new op adds its
 * file ops/OP.c and one entry below. */
#include "ops.h"
#include "../simulator/hw.h"
#include "../simulator/amd_code.h"
#include "../core/table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const tl_op *const tl_ops[] = {&tl_op_moe, &tl_op_topk, &tl_op_indexer, &tl_op_decode, &tl_op_quant, &tl_op_prefill, NULL};

const tl_op *tl_op_find(const char *name)
{
    for (int i = 0; tl_ops[i]; i++)
        if (strcmp(tl_ops[i]->name, name) == 0) return tl_ops[i];
    return NULL;
}

int tl_ops_parse_seed(const char *val, uint64_t *seed)
{
    int r = tl_scan_u64(val, seed);
    if (r == TL_NUM_RANGE) return tl_error(TL_EUSAGE, "--seed", "%s is out of range [0, %llu]", val, (unsigned long long)UINT64_MAX);
    if (r) return tl_error(TL_EUSAGE, "--seed", "'%s' is not a seed (an unsigned decimal integer)", val);
    return TL_OK;
}

int tl_ops_add_routed_rows(long tokens, int k, int passes, long long *total)
{
    const long long rows = (long long)tokens * k;
    if (rows > TL_OPS_MAX_EDGES)
        return tl_error(TL_EUSAGE, "--tokens", "%ld tokens x k = %d is %lld routed rows, more than the %ld one "
                        "worklist simulates", tokens, k, rows, TL_OPS_MAX_EDGES);
    *total += rows * passes;
    if (*total > TL_OPS_MAX_EDGES_TOTAL)
        return tl_error(TL_EUSAGE, "--tokens", "the token counts x k%s add up to more than the %ld routed rows "
                        "one command simulates", passes > 1 ? " x stages" : "", TL_OPS_MAX_EDGES_TOTAL);
    return TL_OK;
}

void tl_ops_work_set(tl_op_work *w, const char *part, double flops, double hbm_bytes, double model_flops,
                     double model_hbm_bytes, double model_us, const char *limiter)
{
    memset(w, 0, sizeof *w);
    snprintf(w->part, sizeof w->part, "%s", part);
    w->flops = flops, w->hbm_bytes = hbm_bytes;
    w->model_flops = model_flops, w->model_hbm_bytes = model_hbm_bytes, w->model_us = model_us;
    snprintf(w->limiter, sizeof w->limiter, "%s", limiter);
}

void tl_ops_code_cells(tl_table *t, const void *amd_loop_cost)
{
    const tl_amd_loop_cost *c = amd_loop_cost;
    if (!c || !c->k) {
        tl_table_str(t, "estimate");
        for (int i = 0; i < 4; i++) tl_table_str(t, "");
        return;
    }
    tl_table_str(t, "asm");
    tl_table_numf(t, "%.0f", c->cycles);
    tl_table_str(t, c->bound);
    tl_table_numf(t, "%.2f", c->waves_per_simd);
    tl_table_numf(t, "%.0f", c->k->loop.mca_cycles);
}

int tl_ops_need_output(const char *out, const char *cmd)
{
    if (!out) return tl_error(TL_EUSAGE, cmd, "missing -o FILE.png|svg|pdf");
    return TL_OK;
}

int tl_ops_output_not_input(const char *out, const char *in, const char *opt)
{
    if (in && out && tl_same_file(out, in))
        return tl_error(TL_EUSAGE, "-o", "'%s' is the %s file: the figure would replace what it draws", out, opt);
    return TL_OK;
}

int tl_ops_parse_int_list(const char *s, long lo, long hi, const char *what, int *out, int cap, int *n)
{
    long tmp[64];
    int rc = tl_parse_long_list(s, lo, hi, what, tmp, cap < 64 ? cap : 64, n);
    if (rc) return rc;
    for (int i = 0; i < *n; i++) out[i] = (int)tmp[i];
    return TL_OK;
}

int tl_ops_trace_open(tl_ops_trace *t, const char *header)
{
    int rc = tl_atomic_begin(&t->a, t->path);
    if (rc) return rc;
    t->f = tl_atomic_file(&t->a);
    if (!t->f) {
        rc = tl_error(TL_EFAIL, t->path, "cannot write the trace: %s", strerror(errno));
        tl_atomic_abort(&t->a);
        return rc;
    }
    fprintf(t->f, "%s\n", header);
    return 0;
}

int tl_ops_trace_commit(tl_ops_trace *t)
{
    if (!t->f) return 0;
    t->f = NULL; /* the atomic file's stream: closed (and its errors reported) by tl_atomic_close */
    int rc = tl_atomic_close(&t->a, "the trace");
    return rc ? rc : tl_atomic_commit(&t->a);
}

void tl_ops_trace_abort(tl_ops_trace *t)
{
    if (!t->f) return;
    t->f = NULL;
    tl_atomic_abort(&t->a);
}

int tl_ops_measured_where(char *where, size_t n)
{
    tl_gpu_info info;
    char date[64];
    int rc = tl_gpu_kernels->query(0, &info);
    if (rc) return rc;
    tl_gpu_kernels->date(date, sizeof date);
    snprintf(where, n, "%.200s %.63s", info.name, date);
    for (char *ch = where; *ch; ch++)
        if (*ch == ',') *ch = ' ';
    return 0;
}

const char *tl_ops_bench_hw(void)
{
    static const char *hw;
    if (hw) return hw;
    hw = "h200";
    tl_gpu_info info;
    if (tl_gpu_kernels && tl_gpu_kernels->count() > 0 && tl_gpu_kernels->query(0, &info) == 0) {
        const char *p = tl_hw_for_device(info.name);
        if (p) hw = p;
    }
    tl_clear_error();
    return hw;
}

double tl_ops_read_floor_us(double bytes, const tl_bench_opts *opts)
{
    double us = NAN;
    if (tl_gpu_kernels->read_floor(bytes, opts, &us)) {
        tl_clear_error();
        us = NAN;
    }
    return us;
}
