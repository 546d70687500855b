/* ops/indexer.c: the DSA lightning indexer's row of the op table (core/op.h): the contract's shape
 * (contract/indexer.h), the reference and tolerance (reference/indexer.h), the model
 * (simulator/indexer.h, which also picks BLOCK_Q) and the kernel's exported table (kernels/indexer.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/op.h"
#include "../kernels/bench.h"
#include "../kernels/indexer.h"
#include "../reference/indexer.h"
#include "../simulator/indexer.h"
#include "ops.h"

#define IDX_MAX_LIST 16

typedef struct {
    tl_op_mode mode;
    long rows[IDX_MAX_LIST], kv[IDX_MAX_LIST], heads[IDX_MAX_LIST];
    int nr, nk, nh;
    long prefix;              /* -1: kv - rows (the query rows are the sequence's last) */
    int block_q;              /* 0: the model's choice */
    long sample;              /* check: compare this many rows, evenly spaced, first and last (0: all) */
    int ragged;               /* check: --windows ragged (caller windows, ragged_window) instead of causal */
    int32_t *wstart, *wend;   /* the current case's ragged windows (rows of it), or NULL */
    int32_t *user_wstart, *user_wend; /* --input windows: the caller's windows (rows of the inputs), or NULL */
    uint64_t seed;
    char hw[1100];
    tl_indexer_inputs user;   /* --input files (q == NULL: random inputs) */
    tl_indexer_shape shape;   /* the current case's */
    int cur_case;
    tl_indexer_inputs in;
    float *ref, *other;
    tl_indexer_gpu *g;
} idx_problem;

static const tl_op_input idx_inputs[] = {
    {"q", "queries [rows][heads][128]: uint8 E4M3FN codes (no NaN codes)", 1},
    {"k", "index keys [kv][128]: uint8 E4M3FN codes (no NaN codes)", 1},
    {"kscale", "key scales [kv]: float32", 1},
    {"w", "head weights [rows][heads]: float32", 1},
    {"windows", "caller windows [rows][2]: int32 start, end with 0 <= start <= end <= kv (start = end: an empty "
                "window, its row all -inf); replaces the causal rule", 0},
    {NULL, NULL, 0},
};

static const tl_op_target idx_targets[] = {
    {"sm_90", TL_OPS_SM90_COMPILED, "NVIDIA H200, 2026-12-02 (sm_90a wgmma: checked on every appendix A2 shape; 484-792 TFLOP/s, 28-46% of the E4M3 wgmma ceiling)", NULL},
    TL_OPS_AMD_TARGETS,
    {NULL, NULL, NULL, NULL},
};

#define IDX_COMMON_USAGE                                                                                   \
    "  --rows LIST    query rows (default 4096)        --kv LIST  KV positions (default 4096)\n"          \
    "  --heads LIST   indexer heads, multiples of 16 (32 GLM-5, 64 DeepSeek-V3.2; default 64)\n"         \
    "  --prefix P     cached positions before the first query row (default kv - rows): row i sees\n"     \
    "                 positions [0, P + i + 1); the rest of its logits are -inf\n"                       \
    "  --block-q N    query rows a block (1, 2, 4 or 8; default 0: the model's choice) --seed S\n"        \
    "logits[i, j] = sum_h w[i, h] relu((Q[i, h, :] . K[j, :]) k_scale[j]), Q and K E4M3 codes, D = 128.\n"

static const char idx_check_usage[] =
    "usage: tilelab check indexer [--rows LIST] [--kv LIST] [--heads LIST] [--prefix P] [--block-q N]\n"
    "                             [--seed S] [--input q=Q.npy --input k=K.npy --input kscale=S.npy\n"
    "                             --input w=W.npy] [--sample-rows N] [--windows causal|ragged]\n"
    "                             [--format table|csv|json]\n"
    "The GPU kernel against the CPU reference (exact dot products, double epilogue) under the tolerance\n"
    "derived from E4M3 inputs, D and H and the kernel's accumulator (float32; 13 mantissa bits on\n"
    "Hopper's FP8 wgmma); -inf outside the windows must match exactly, outputs are poisoned first.\n"
    "Without a GPU: the reference against the naive loop. --sample-rows N compares N rows (evenly\n"
    "spaced, the first and the last among them; the kernel still computes all): the reference of a\n"
    "64K square takes hours, of 256 of its rows seconds. --windows ragged gives row i a window of\n"
    "length 0, 1, 2, 63, 64, 65, 127 or kv (i mod 8) at a spread start instead of the causal one.\n" IDX_COMMON_USAGE;

static const char idx_run_usage[] =
    "usage: tilelab run indexer --input q=Q.npy --input k=K.npy --input kscale=S.npy --input w=W.npy\n"
    "                           [--input windows=W.npy | --prefix P] --output logits=FILE.npy\n"
    "                           [--device cpu|gpu]\n"
    "The indexer's logits [rows][kv] float32 on your own inputs: causal windows after prefix P (default\n"
    "kv - rows), or the caller's windows: --input windows=W.npy, int32 [rows][2], row i's start and end\n"
    "(its logits are -inf outside [start, end); start = end is an empty window, the row all -inf).\n";

static const char idx_bench_usage[] =
    "usage: tilelab bench indexer [--rows LIST] [--kv LIST] [--heads LIST] [--prefix P] [--block-q N]\n"
    "                             [--hw PRESET] [--format table|csv|json]\n"
    "Times the kernel with the seed's method (L2 flush, 20 warm-up, 200 timed, median) and reports\n"
    "TFLOP/s counting only in-window work, beside floor_us (a plain read of the op's bytes) and the\n"
    "model's prediction on the preset (default: the GPU's own, h200 where no preset matches) with its error.\n" IDX_COMMON_USAGE;

static const char idx_sim_usage[] =
    "usage: tilelab sim indexer [--hw mi355x] [--rows LIST] [--kv LIST] [--heads LIST] [--prefix P]\n"
    "                           [--block-q N] [--format table|csv|json]\n"
    "The model of the kernel (simulator/indexer.h): BLOCK_Q (picked or given), instruction and\n"
    "K-depth, blocks and how many a CU holds, whether K fits an XCD's L2, the matrix, epilogue,\n"
    "K-stream and HBM times, the limiter, TFLOP/s.\n" IDX_COMMON_USAGE;

static void idx_free_case(idx_problem *p)
{
    tl_indexer_inputs_free(&p->in);
    free(p->wstart);
    free(p->wend);
    p->wstart = p->wend = NULL;
    free(p->ref);
    free(p->other);
    p->ref = p->other = NULL;
    if (p->g) tl_indexer_gpu_kernels->close(p->g);
    p->g = NULL;
    p->cur_case = -1;
}

static void idx_free(void *vp)
{
    idx_problem *p = vp;
    if (!p) return;
    idx_free_case(p);
    tl_indexer_inputs_free(&p->user);
    free(p->user_wstart);
    free(p->user_wend);
    free(p);
}

static int idx_n_cases(const void *vp)
{
    const idx_problem *p = vp;
    return p->nr * p->nk * p->nh;
}

/* Row i's window under --windows ragged: lengths cycle through 0, 1, 2, 63, 64, 65, 127 and kv
 * (empty, one position, and either side of the 64-position tile), clamped to kv, at starts spread
 * over the positions by a stride prime to most kv. */
static void ragged_window(long i, long kv, int32_t *start, int32_t *end)
{
    static const long lens[] = {0, 1, 2, 63, 64, 65, 127, -1};
    long len = lens[i % 8] < 0 ? kv : lens[i % 8];
    if (len > kv) len = kv;
    const long a = (i * 977) % (kv - len + 1);
    *start = (int32_t)a, *end = (int32_t)(a + len);
}

/* Case c's shape: heads fastest, then kv, then rows; the ragged windows when the case's are made. */
static tl_indexer_shape case_shape(const idx_problem *p, int c)
{
    tl_indexer_shape s;
    memset(&s, 0, sizeof s);
    s.heads = (int)p->heads[c % p->nh];
    s.kv = p->kv[(c / p->nh) % p->nk];
    s.rows = p->rows[c / (p->nh * p->nk)];
    s.dim = TL_INDEXER_DIM;
    s.prefix = p->prefix >= 0 ? p->prefix : s.kv - s.rows;
    s.block_q = p->block_q;
    if (p->user_wstart) s.starts = p->user_wstart, s.ends = p->user_wend; /* one case: the inputs' */
    else if (p->ragged && p->wstart && c == p->cur_case) s.starts = p->wstart, s.ends = p->wend;
    return s;
}

static int idx_parse(int argc, char **argv, tl_op_mode mode, void **out)
{
    *out = NULL;
    idx_problem *p = calloc(1, sizeof *p);
    if (!p) return tl_error(TL_EFAIL, "indexer", "out of memory");
    p->mode = mode;
    p->cur_case = -1;
    p->prefix = -1;
    p->seed = mode == TL_OP_CHECK ? tl_fresh_seed() : 1;
    const char *rows_s = "4096", *kv_s = "4096", *heads_s = "64", *prefix_s = NULL, *bq_s = NULL, *seed_s = NULL,
               *hw_s = mode == TL_OP_SIM ? "mi355x" : mode == TL_OP_BENCH ? tl_ops_bench_hw() : "h200", *sample_s = NULL, *windows_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--rows", &rows_s),     TL_OPT_V("--kv", &kv_s),   TL_OPT_V("--heads", &heads_s),
                     TL_OPT_V("--prefix", &prefix_s), TL_OPT_V("--block-q", &bq_s), TL_OPT_V("--seed", &seed_s),
                     TL_OPT_V("--hw", &hw_s),         TL_OPT_V("--sample-rows", &sample_s),
                     TL_OPT_V("--windows", &windows_s), TL_OPT_END};
    static const char *const cmds[] = {"check indexer", "bench indexer", "sim indexer", "run indexer"};
    int rc = tl_opts_parse(argc, argv, opts, cmds[mode], NULL, 0, NULL);
    if (!rc) rc = tl_parse_long_list(rows_s, 1, TL_INDEXER_MAX_ROWS, "--rows", p->rows, IDX_MAX_LIST, &p->nr);
    if (!rc) rc = tl_parse_long_list(kv_s, 1, TL_INDEXER_MAX_KV, "--kv", p->kv, IDX_MAX_LIST, &p->nk);
    if (!rc) rc = tl_parse_long_list(heads_s, 16, TL_INDEXER_MAX_HEADS, "--heads", p->heads, IDX_MAX_LIST, &p->nh);
    long one[1];
    int n1 = 0;
    if (!rc && prefix_s) rc = tl_parse_long_list(prefix_s, 0, TL_INDEXER_MAX_KV, "--prefix", one, 1, &n1);
    if (!rc && prefix_s) p->prefix = one[0];
    if (!rc && bq_s) rc = tl_parse_int(bq_s, 0, TL_INDEXER_MAX_BLOCK_Q, "--block-q", &p->block_q);
    if (!rc && seed_s) rc = tl_ops_parse_seed(seed_s, &p->seed);
    if (!rc && sample_s && mode != TL_OP_CHECK) rc = tl_error(TL_EUSAGE, cmds[mode], "--sample-rows is for check only");
    if (!rc && sample_s) rc = tl_parse_long_list(sample_s, 2, TL_INDEXER_MAX_ROWS, "--sample-rows", &p->sample, 1, &n1);
    if (!rc && windows_s && mode != TL_OP_CHECK) rc = tl_error(TL_EUSAGE, cmds[mode], "--windows is for check only");
    if (!rc && windows_s && strcmp(windows_s, "causal") && strcmp(windows_s, "ragged"))
        rc = tl_error(TL_EUSAGE, cmds[mode], "--windows %.40s: causal or ragged", windows_s);
    if (!rc && windows_s && prefix_s && !strcmp(windows_s, "ragged"))
        rc = tl_error(TL_EUSAGE, cmds[mode], "--prefix sets causal windows; --windows ragged replaces them");
    if (!rc && windows_s) p->ragged = !strcmp(windows_s, "ragged");
    if (!rc && (p->nr < 1 || p->nk < 1 || p->nh < 1)) rc = tl_error(TL_EUSAGE, cmds[mode], "an empty list");
    if (!rc && p->nr * p->nk * p->nh > 64) rc = tl_error(TL_EUSAGE, cmds[mode], "more than 64 cases (rows x kv x heads)");
    snprintf(p->hw, sizeof p->hw, "%s", hw_s);
    tl_hw hw;
    if (!rc) rc = tl_hw_load(p->hw, &hw);
    if (!rc) p->shape = case_shape(p, 0); /* the cases are checked by idx_check_cases */
    if (rc) {
        idx_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* Reads one input file into *a, checking its type and rank. */
static int read_input(const char *path, tl_npy_type type, int ndim, tl_npy *a)
{
    int rc = tl_npy_read(path, a);
    if (rc) return rc;
    char got[96];
    tl_npy_shape_str(a, got, sizeof got);
    if (a->type != type || a->ndim != ndim) {
        rc = tl_error(TL_EUSAGE, path, "%s %s, expected %s with %d dimensions", tl_npy_type_name(a->type), got,
                      tl_npy_type_name(type), ndim);
        tl_npy_free(a);
    }
    return rc;
}

/* --input windows: int32 [rows][2] (start, end a row) into p->user_wstart / user_wend; the shape
 * check (tl_indexer_shape_check) then holds each inside [0, kv] with start <= end. */
static int load_windows(idx_problem *p, const char *path, size_t rows)
{
    if (p->prefix >= 0) return tl_error(TL_EUSAGE, "--prefix", "sets causal windows; --input windows replaces them");
    if (p->ragged) return tl_error(TL_EUSAGE, "--windows", "ragged makes its own windows; --input windows gives them");
    tl_npy win;
    int rc = read_input(path, TL_NPY_I32, 2, &win);
    if (rc) return rc;
    if (win.shape[0] != rows || win.shape[1] != 2) {
        char got[96];
        tl_npy_shape_str(&win, got, sizeof got);
        rc = tl_error(TL_EUSAGE, path, "windows %s, expected [%zu][2] (a start and an end for each of q's rows)", got, rows);
    }
    p->user_wstart = rc ? NULL : malloc(rows * sizeof *p->user_wstart);
    p->user_wend = rc ? NULL : malloc(rows * sizeof *p->user_wend);
    if (!rc && (!p->user_wstart || !p->user_wend)) rc = tl_error(TL_EFAIL, "indexer", "out of memory for %zu windows", rows);
    const int32_t *w = win.data;
    for (size_t i = 0; !rc && i < rows; i++) p->user_wstart[i] = w[2 * i], p->user_wend[i] = w[2 * i + 1];
    tl_npy_free(&win);
    return rc;
}

/* Every case's shape, once final: the command line's, or the --input files' (whose rows and kv
 * bound --prefix: it is not checked against the default 4096 x 4096 before they are read). */
static int idx_check_cases(void *vp)
{
    const idx_problem *p = vp;
    int rc = 0;
    for (int c = 0; !rc && c < idx_n_cases(p); c++) {
        tl_indexer_shape s = case_shape(p, c);
        rc = tl_indexer_shape_check(&s);
    }
    return rc;
}

static int idx_load_inputs(void *vp, const tl_op_file *files, int n)
{
    idx_problem *p = vp;
    const char *path[5] = {NULL, NULL, NULL, NULL, NULL};
    static const char *const names[5] = {"q", "k", "kscale", "w", "windows"};
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 5; j++)
            if (strcmp(files[i].name, names[j]) == 0) path[j] = files[i].path;
    for (int j = 0; j < 4; j++)
        if (!path[j]) return tl_error(TL_EUSAGE, "--input", "indexer needs q, k, kscale and w (missing %s=FILE.npy)", names[j]);
    tl_npy q, k, ks, w;
    memset(&k, 0, sizeof k), memset(&ks, 0, sizeof ks), memset(&w, 0, sizeof w);
    int rc = read_input(path[0], TL_NPY_U8, 3, &q);
    if (!rc) rc = read_input(path[1], TL_NPY_U8, 2, &k);
    if (!rc) rc = read_input(path[2], TL_NPY_F32, 1, &ks);
    if (!rc) rc = read_input(path[3], TL_NPY_F32, 2, &w);
    if (!rc && (q.shape[2] != TL_INDEXER_DIM || k.shape[1] != TL_INDEXER_DIM))
        rc = tl_error(TL_EUSAGE, "--input", "q's and k's last dimension must be D = %d (got %zu and %zu)", TL_INDEXER_DIM,
                      q.shape[2], k.shape[1]);
    if (!rc && (ks.shape[0] != k.shape[0] || w.shape[0] != q.shape[0] || w.shape[1] != q.shape[1]))
        rc = tl_error(TL_EUSAGE, "--input", "shapes disagree: kscale [%zu] for k [%zu], w [%zu][%zu] for q [%zu][%zu]",
                      ks.shape[0], k.shape[0], w.shape[0], w.shape[1], q.shape[0], q.shape[1]);
    if (!rc && (q.shape[0] > (size_t)TL_INDEXER_MAX_ROWS || k.shape[0] > (size_t)TL_INDEXER_MAX_KV ||
                q.shape[1] > TL_INDEXER_MAX_HEADS))
        rc = tl_error(TL_EUSAGE, "--input", "q [%zu][%zu], k [%zu]: too large", q.shape[0], q.shape[1], k.shape[0]);
    if (!rc && path[4]) rc = load_windows(p, path[4], q.shape[0]);
    if (!rc) {
        p->rows[0] = (long)q.shape[0], p->kv[0] = (long)k.shape[0], p->heads[0] = (long)q.shape[1];
        p->nr = p->nk = p->nh = 1;
        p->shape = case_shape(p, 0);
        rc = tl_indexer_shape_check(&p->shape);
    }
    const char *bad = NULL;
    if (!rc) {
        p->user = (tl_indexer_inputs){q.data, k.data, ks.data, w.data};
        q.data = k.data = ks.data = w.data = NULL;
        if (!tl_indexer_inputs_valid(&p->shape, &p->user, &bad))
            rc = tl_error(TL_EUSAGE, "--input", "%s holds a NaN code or a non-finite value (outside the contract)", bad);
    }
    tl_npy_free(&q), tl_npy_free(&k), tl_npy_free(&ks), tl_npy_free(&w);
    return rc;
}

static void idx_describe(const void *vp, FILE *f)
{
    const idx_problem *p = vp;
    char bq[64];
    if (p->block_q) snprintf(bq, sizeof bq, "BLOCK_Q %d", p->block_q);
    else snprintf(bq, sizeof bq, "the BLOCK_Q the model picks on %.20s", p->hw);
    char pre[96];
    if (p->user_wstart) snprintf(pre, sizeof pre, "the caller's windows (--input windows)");
    else if (p->ragged) snprintf(pre, sizeof pre, "ragged windows (lengths 0, 1, 2, 63, 64, 65, 127, kv in turn)");
    else if (p->prefix >= 0) snprintf(pre, sizeof pre, "causal windows after prefix %ld", p->prefix);
    else snprintf(pre, sizeof pre, "causal windows after prefix kv - rows");
    fprintf(f, "indexer: E4M3 Q and K, D = %d, %s; %s; inputs %s; seed %llu\n", TL_INDEXER_DIM, pre,
            bq, p->user.q ? "from the --input files" : "random (per-row E4M3 scales, an outlier channel)",
            (unsigned long long)p->seed);
}

static void idx_case_label(const void *vp, int c, char *label, size_t n)
{
    tl_indexer_shape s = case_shape(vp, c);
    if (((const idx_problem *)vp)->user_wstart) snprintf(label, n, "%ldx%ld H=%d windows", s.rows, s.kv, s.heads);
    else if (((const idx_problem *)vp)->ragged) snprintf(label, n, "%ldx%ld H=%d ragged", s.rows, s.kv, s.heads);
    else snprintf(label, n, "%ldx%ld H=%d P=%ld", s.rows, s.kv, s.heads, s.prefix);
}

static long compared_rows(const idx_problem *p);

static int idx_make_inputs(void *vp, int c)
{
    idx_problem *p = vp;
    idx_free_case(p);
    p->shape = case_shape(p, c);
    if (p->ragged) {
        p->wstart = malloc((size_t)p->shape.rows * sizeof *p->wstart);
        p->wend = malloc((size_t)p->shape.rows * sizeof *p->wend);
        if (!p->wstart || !p->wend) return tl_error(TL_EFAIL, "indexer", "out of memory for %ld windows", p->shape.rows);
        for (long i = 0; i < p->shape.rows; i++) ragged_window(i, p->shape.kv, &p->wstart[i], &p->wend[i]);
        p->cur_case = c;
        p->shape = case_shape(p, c);
    }
    int rc = tl_indexer_inputs_alloc(&p->shape, &p->in);
    const size_t n = (size_t)compared_rows(p) * p->shape.kv; /* the compared rows' logits only */
    p->ref = malloc(n * sizeof(float));
    p->other = malloc(n * sizeof(float));
    if (!rc && (!p->ref || !p->other)) rc = tl_error(TL_EFAIL, "indexer", "out of memory for %zu logits", n);
    if (!rc && p->user.q) {
        memcpy(p->in.q, p->user.q, (size_t)tl_indexer_q_bytes(&p->shape));
        memcpy(p->in.k, p->user.k, (size_t)tl_indexer_k_bytes(&p->shape));
        memcpy(p->in.k_scale, p->user.k_scale, (size_t)p->shape.kv * sizeof(float));
        memcpy(p->in.w, p->user.w, (size_t)p->shape.rows * p->shape.heads * sizeof(float));
    } else if (!rc) {
        rc = tl_indexer_inputs_make(&p->shape, p->seed, &p->in);
    }
    if (!rc) p->cur_case = c;
    return rc;
}

/* Rows compared: all, or --sample-rows of them (row k of the sample is k (rows - 1) / (n - 1)). */
static long compared_rows(const idx_problem *p)
{
    return p->sample > 0 && p->sample < p->shape.rows ? p->sample : p->shape.rows;
}

static long sampled_row(const idx_problem *p, long k)
{
    const long n = compared_rows(p);
    return n == p->shape.rows ? k : (long)((double)k * (p->shape.rows - 1) / (n - 1));
}

static void set_output(const idx_problem *p, const float *logits, tl_op_outputs *out, const char *note)
{
    memset(out, 0, sizeof *out);
    out->n = 1;
    tl_op_output *o = &out->o[0];
    o->name = "logits";
    o->type = TL_NPY_F32;
    o->data = logits;
    o->ndim = 2;
    o->shape[0] = (size_t)compared_rows(p);
    o->shape[1] = (size_t)p->shape.kv;
    o->n = o->shape[0] * o->shape[1];
    o->row_len = o->shape[1];
    snprintf(o->note, sizeof o->note, "%s", note);
}

/* The reference of the compared rows: all rows, or the sampled ones as a problem of their own (their
 * Q and w rows, their windows as a list, the same K). */
static int idx_reference(void *vp, tl_op_outputs *out)
{
    idx_problem *p = vp;
    const long n = compared_rows(p);
    char note[128];
    if (n == p->shape.rows) {
        set_output(p, p->ref, out, "exact int64 dot products, double epilogue");
        return tl_indexer_reference(&p->shape, &p->in, p->ref);
    }
    snprintf(note, sizeof note, "exact int64 dot products, double epilogue; %ld of %ld rows, evenly spaced", n,
             p->shape.rows);
    set_output(p, p->ref, out, note);
    const size_t qrow = (size_t)p->shape.heads * TL_INDEXER_DIM;
    tl_indexer_shape sub = p->shape;
    sub.rows = n;
    int32_t *starts = malloc((size_t)n * sizeof *starts), *ends = malloc((size_t)n * sizeof *ends);
    uint8_t *q = malloc((size_t)n * qrow);
    float *w = malloc((size_t)n * p->shape.heads * sizeof *w);
    int rc = starts && ends && q && w ? 0 : tl_error(TL_EFAIL, "indexer", "out of memory for %ld sampled rows", n);
    for (long k = 0; !rc && k < n; k++) {
        const long i = sampled_row(p, k);
        long a, e;
        tl_indexer_window(&p->shape, i, &a, &e);
        starts[k] = (int32_t)a, ends[k] = (int32_t)e;
        memcpy(q + (size_t)k * qrow, p->in.q + (size_t)i * qrow, qrow);
        memcpy(w + (size_t)k * p->shape.heads, p->in.w + (size_t)i * p->shape.heads, (size_t)p->shape.heads * sizeof *w);
    }
    if (!rc) {
        sub.starts = starts, sub.ends = ends;
        tl_indexer_inputs in = {q, p->in.k, p->in.k_scale, w};
        rc = tl_indexer_reference(&sub, &in, p->ref);
    }
    free(starts), free(ends), free(q), free(w);
    return rc;
}

static int idx_naive(void *vp, tl_op_outputs *out)
{
    idx_problem *p = vp;
    set_output(p, p->other, out, "naive loop, double");
    const long n = compared_rows(p);
    if (n == p->shape.rows) return tl_indexer_naive(&p->shape, &p->in, p->other);
    /* sampled: the naive loop writes every row (it runs on small shapes only: idx_naive_cheap) */
    float *all = malloc((size_t)p->shape.rows * p->shape.kv * sizeof(float));
    int rc = all ? tl_indexer_naive(&p->shape, &p->in, all) : tl_error(TL_EFAIL, "indexer", "out of memory");
    for (long k = 0; !rc && k < n; k++)
        memcpy(p->other + (size_t)k * p->shape.kv, all + (size_t)sampled_row(p, k) * p->shape.kv,
               (size_t)p->shape.kv * sizeof(float));
    free(all);
    return rc;
}

/* The naive loop decodes every value through tl_decode: about 2^29 multiply-adds in a few seconds. */
static int idx_naive_cheap(const void *vp, int c)
{
    tl_indexer_shape s = case_shape(vp, c);
    return (double)s.rows * s.kv * s.heads * s.dim <= 536870912.0;
}

static int idx_small(const void *vp, void **out)
{
    const idx_problem *p = vp;
    idx_problem *q = calloc(1, sizeof *q);
    if (!q) return tl_error(TL_EFAIL, "indexer", "out of memory");
    *q = *p;
    memset(&q->user, 0, sizeof q->user);
    memset(&q->in, 0, sizeof q->in);
    q->ref = q->other = NULL;
    q->wstart = q->wend = NULL; /* made again for the small case's own rows */
    q->user_wstart = q->user_wend = NULL;
    q->g = NULL;
    q->cur_case = -1;
    q->prefix = -1;
    q->rows[0] = 37, q->kv[0] = 100, q->nr = q->nk = 1; /* neither a multiple of a tile */
    q->shape = case_shape(q, 0);
    *out = q;
    return 0;
}

/* The accumulator of the kernel that ran: float32 on AMD's FP8 MFMA and sm_90's bf16 mma.sync,
 * 13 mantissa bits on Hopper's E4M3 wgmma; float32 when no GPU ran (reference against naive). */
static int idx_acc_bits(const idx_problem *p)
{
    return p->g && tl_indexer_gpu_kernels ? tl_indexer_gpu_kernels->acc_bits(p->g) : TL_INDEXER_ACC_FP32;
}

static int idx_tolerance(const void *vp, int o, tl_tolerance *t)
{
    const idx_problem *p = vp;
    return tl_indexer_tolerance(&p->shape, idx_acc_bits(p), t);
}

static int idx_gpu_built(void) { return tl_indexer_gpu_kernels != NULL && tl_gpu_kernels != NULL; }

static int idx_model(const idx_problem *p, const tl_indexer_shape *s, tl_indexer_result *r)
{
    tl_hw hw;
    int rc = tl_hw_load(p->hw, &hw);
    tl_indexer_problem ip = {&hw, *s};
    return rc ? rc : tl_indexer_sim(&ip, r);
}

static int idx_block_q(const idx_problem *p, int *bq)
{
    tl_indexer_result r;
    int rc = idx_model(p, &p->shape, &r);
    if (!rc) *bq = r.block_q;
    return rc;
}

static int idx_gpu(void *vp, tl_op_outputs *out)
{
    idx_problem *p = vp;
    const tl_indexer_gpu_api *G = tl_indexer_gpu_kernels;
    int bq = 1, rc = idx_block_q(p, &bq);
    if (!rc && !p->g) rc = G->open(&p->shape, &p->g);
    if (!rc) rc = G->upload(p->g, p->in.q, p->in.k, p->in.k_scale, p->in.w);
    if (!rc) rc = G->poison(p->g);
    if (!rc) rc = G->run(p->g, bq);
    /* the compared rows only: a 64K square's logits are 17 GB, its 256 sampled rows 64 MB */
    const long n = compared_rows(p);
    if (!rc && n == p->shape.rows) rc = G->read(p->g, 0, n, p->other);
    for (long k = 0; !rc && n < p->shape.rows && k < n; k++)
        rc = G->read(p->g, sampled_row(p, k), 1, p->other + (size_t)k * p->shape.kv);
    char note[96];
    const int bits = idx_acc_bits(p);
    snprintf(note, sizeof note, "BLOCK_Q %d, %s accumulation", bq,
             bits == TL_INDEXER_ACC_FP32 ? "float32" : "E4M3 wgmma (13-bit mantissa)");
    set_output(p, p->other, out, note);
    return rc;
}

static int idx_n_parts(const void *vp) { return 1; }

static int idx_work(void *vp, int c, int part, tl_op_work *w)
{
    idx_problem *p = vp;
    tl_indexer_shape s = case_shape(p, c);
    tl_indexer_result r;
    int rc = idx_model(p, &s, &r);
    if (rc) return rc;
    tl_ops_work_set(w, "logits", tl_indexer_flops(&s), tl_indexer_bytes(&s), r.flops, r.hbm_bytes, r.time_us, r.limiter);
    return 0;
}

static int idx_sim_rows(void *vp, int c, tl_table *t)
{
    idx_problem *p = vp;
    tl_indexer_shape s = case_shape(p, c);
    tl_indexer_result r;
    int rc = idx_model(p, &s, &r);
    if (rc) return rc;
    tl_table_row(t);
    tl_table_str(t, p->hw);
    tl_table_int(t, s.rows);
    tl_table_int(t, s.kv);
    tl_table_int(t, s.heads);
    tl_table_int(t, s.prefix);
    tl_table_int(t, r.block_q);
    tl_table_int(t, r.tile);
    tl_table_str(t, r.instr);
    tl_table_int(t, r.k_steps);
    tl_table_int(t, r.blocks);
    tl_table_int(t, r.resident);
    tl_table_int(t, r.fits_l2);
    tl_table_numf(t, "%.0f", r.kv_bytes);
    tl_table_numf(t, "%.0f", r.flops);
    tl_table_numf(t, "%.0f", tl_indexer_bytes(&s));
    tl_table_numf(t, "%.2f", r.mma_us);
    tl_table_numf(t, "%.2f", r.smem_us);
    tl_table_numf(t, "%.2f", r.epi_us);
    tl_table_numf(t, "%.2f", r.kv_us);
    tl_table_numf(t, "%.2f", r.hbm_us);
    tl_table_numf(t, "%.2f", r.time_us);
    tl_table_numf(t, "%.1f", r.tflops);
    tl_table_str(t, r.limiter);
    tl_table_numf(t, "%.2f", r.l2_hits);
    tl_table_numf(t, "%.2f", r.code_us);
    tl_ops_code_cells(t, &r.code);
    return 0;
}

static int idx_bench(void *vp, int c, tl_table *t)
{
    idx_problem *p = vp;
    const tl_gpu_api *D = tl_gpu_kernels;
    const tl_indexer_gpu_api *G = tl_indexer_gpu_kernels;
    int bq = 1, rc = idx_block_q(p, &bq);
    if (!rc && !p->g) rc = G->open(&p->shape, &p->g);
    if (!rc) rc = G->upload(p->g, p->in.q, p->in.k, p->in.k_scale, p->in.w);
    char where[300], label[512];
    if (!rc) rc = tl_ops_measured_where(where, sizeof where);
    if (rc) return rc;
    snprintf(label, sizeof label, "measured on %s; sim_us simulated on preset %.100s", where, p->hw);
    tl_bench_opts o;
    D->default_opts(&o);
    tl_bench_result r;
    tl_op_work w;
    if ((rc = G->time(p->g, bq, &o, &r)) || (rc = idx_work(p, c, 0, &w))) return rc;
    const double floor_us = tl_ops_read_floor_us(w.hbm_bytes, &o), us = r.median_ms * 1e3;
    char name[96];
    snprintf(name, sizeof name, "indexer %ldx%ld H=%d", p->shape.rows, p->shape.kv, p->shape.heads);
    tl_table_row(t);
    tl_table_str(t, name);
    tl_table_int(t, p->shape.rows);
    tl_table_int(t, p->shape.kv);
    tl_table_int(t, p->shape.heads);
    tl_table_int(t, p->shape.prefix);
    tl_table_int(t, bq);
    tl_table_numf(t, "%.0f", w.flops);
    tl_table_numf(t, "%.0f", w.hbm_bytes);
    tl_table_numf(t, "%.2f", us);
    tl_table_numf(t, "%.1f", w.flops / (us * 1e6));
    tl_table_numf(t, "%.2f", floor_us);
    tl_table_numf(t, "%.2f", w.model_us);
    tl_table_numf(t, "%.1f", 100.0 * (w.model_us - us) / us);
    tl_table_str(t, w.limiter);
    tl_table_numf(t, "%.2f", r.p10_ms * 1e3);
    tl_table_numf(t, "%.2f", r.p90_ms * 1e3);
    tl_table_str(t, label);
    return 0;
}

static const char *const idx_test_args[] = {"--rows", "1,37", "--kv", "70", "--heads", "32,64", "--seed", "7", NULL};
static const char *const idx_bad_heads[] = {"--heads", "24", NULL};
static const char *const idx_bad_heads2[] = {"--heads", "256", NULL};
static const char *const idx_bad_rows[] = {"--rows", "0", NULL};
static const char *const idx_bad_kv[] = {"--rows", "4096", "--kv", "1000", NULL}; /* rows > kv */
static const char *const idx_bad_prefix[] = {"--rows", "100", "--kv", "200", "--prefix", "101", NULL};
static const char *const idx_bad_bq[] = {"--block-q", "3", NULL};
static const char *const idx_bad_huge[] = {"--rows", "1048576", "--kv", "4194304", NULL};
static const char *const idx_bad_seed[] = {"--seed", "-1", NULL};
static const char *const idx_bad_sample[] = {"--sample-rows", "1", NULL};
static const char *const *const idx_bad_args[] = {idx_bad_heads,  idx_bad_heads2, idx_bad_rows, idx_bad_kv,    idx_bad_prefix,
                                                  idx_bad_bq,     idx_bad_huge,   idx_bad_seed, idx_bad_sample, NULL};
static const char *const idx_bench_args[] = {"--rows", "2048,4096,65536", "--kv", "65536", "--heads", "32,64", NULL};

/* check all: DeepSeek-V3.2's 64 heads (a decode row whole without a GPU, a 4096-row prefill
 * chunk sampled with one) and GLM-5's 32 on ragged windows (about 4 s without a GPU). */
static const char *const idx_all_dsv32[] = {"--rows", "1,4096", "--kv", "8192", "--heads", "64", "--sample-rows",
                                            "256", NULL};
static const char *const idx_all_glm5[] = {"--rows", "8", "--kv", "8192", "--heads", "32", "--windows", "ragged",
                                           NULL};
static const char *const *const idx_check_all_args[] = {idx_all_dsv32, idx_all_glm5, NULL};
const tl_op tl_op_indexer = {
    .name = "indexer",
    .summary = "DSA lightning indexer: FP8 scores of every causal position, relu, weighted head sum",
    .dtypes = "e4m3",
    .targets = idx_targets,
    .check_usage = idx_check_usage,
    .bench_usage = idx_bench_usage,
    .sim_usage = idx_sim_usage,
    .run_usage = idx_run_usage,
    .inputs = idx_inputs,
    .parse = idx_parse,
    .free_problem = idx_free,
    .load_inputs = idx_load_inputs,
    .check_cases = idx_check_cases,
    .describe = idx_describe,
    .n_cases = idx_n_cases,
    .case_label = idx_case_label,
    .make_inputs = idx_make_inputs,
    .reference = idx_reference,
    .naive = idx_naive,
    .naive_cheap = idx_naive_cheap,
    .small_problem = idx_small,
    .gpu_built = idx_gpu_built,
    .gpu = idx_gpu,
    .tolerance = idx_tolerance,
    .n_parts = idx_n_parts,
    .work = idx_work,
    .sim = idx_sim_rows,
    .sim_header = "hw,rows,kv,heads,prefix,block_q,tile,instr,k_steps,blocks,resident,fits_l2,kv_bytes,flops,hbm_bytes,mma_us,smem_us,epi_us,"
                  "kv_us,hbm_us,time_us,tflops,limiter,l2_hits,code_us," TL_OPS_CODE_COLUMNS,
    .bench = idx_bench,
    .bench_header = "name,rows,kv,heads,prefix,block_q,flops,hbm_bytes,time_us,tflops,floor_us,sim_us,sim_err_pct,"
                    "sim_limiter,p10_us,p90_us,source",
    .figures = tl_indexer_figures,
    .test_args = idx_test_args,
    .bad_args = idx_bad_args,
    .bench_args = idx_bench_args,
    .check_all_args = idx_check_all_args,
};
