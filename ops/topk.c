/* ops/topk.c: exact top-k selection's row of the op table (core/op.h): the contract's shape
 * (contract/topk.h), the reference (reference/topk.h), the model (simulator/topk.h, which also
 * chooses the path and split the kernel runs) and the kernel's exported table (kernels/topk.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/op.h"
#include "../kernels/bench.h"
#include "../kernels/topk.h"
#include "../reference/topk.h"
#include "../simulator/topk.h"
#include "ops.h"

#define TOPK_MAX_LIST 16

typedef struct {
    tl_op_mode mode;
    long n[TOPK_MAX_LIST], batch[TOPK_MAX_LIST], k[TOPK_MAX_LIST];
    int nn, nb, nk;
    int causal, sorted, split;
    int path;                /* tl_topk_path, or -1: the model's (with split 0, the model picks both) */
    tl_topk_dtype dtype;
    tl_topk_dist dist;
    uint64_t seed;
    char hw[1100];
    tl_topk_shape shape;     /* the current case's */
    int32_t *user_lens;      /* --input lens (NULL: the shape's rule) */
    void *user_scores;       /* --input scores (NULL: random) */
    /* the current case */
    int cur_case;
    void *scores;
    int32_t *idx_ref, *cnt_ref, *idx_other, *cnt_other;
    tl_topk_gpu *g;
    tl_ops_trace trace;      /* bench: --trace FILE (trace.path NULL: none) */
} topk_problem;

static const tl_op_input topk_inputs[] = {
    {"scores", "scores [batch][n]: float32, float16 or bfloat16 (as uint16); NaN ranks lowest", 1},
    {"lens", "valid positions of each row [batch]: int32 in [0, n] (default: every row n, or --causal)", 0},
    {NULL, NULL, 0},
};

static const tl_op_target topk_targets[] = {
    {"sm_90", TL_OPS_SM90_COMPILED, "NVIDIA H200, 2026-12-02 (every check passes on both paths; timed beside torch.topk)", NULL},
    TL_OPS_AMD_TARGETS,
    {NULL, NULL, NULL, NULL},
};

#define TOPK_PLAN_USAGE                                                                                 \
    "  --path resident|stream  the kernel's path (default: the model's; contract/topk.h says both)\n" \
    "  --split S      blocks per row (default 0: the model's choice)\n"

#define TOPK_COMMON_USAGE                                                                              \
    "  --n LIST       positions a row holds (1 to 4M; default 4096,65536,262144,1048576)\n"          \
    "  --batch LIST   rows (default 1,32)          --k LIST  how many to keep (1..4096; default 512,2048)\n" \
    "  --causal       row b of B sees n - (B - 1 - b) positions (a causal prefill's last B queries)\n" \
    "  --sorted       indices by score (ties by index); else the set in ascending index order\n"      \
    "  --dtype f32|bf16|f16 (default f32)          --seed S\n"                                        \
    "The answer is exact: the first k of a full sort by (score descending, index ascending), with\n"  \
    "-0 equal to +0, NaN below -inf; a row shorter than k returns all it has, then -1, and a count.\n"

static const char topk_check_usage[] =
    "usage: tilelab check topk [--n LIST] [--batch LIST] [--k LIST] [--causal] [--sorted] [--dtype D]\n"
    "                          [--dist normal|ties|few-distinct|nan|inf|sorted|reversed] [--seed S]\n"
    "                          [--path P] [--split S] [--input scores=FILE.npy [--input lens=FILE.npy]]\n"
    "                          [--format table|csv|json]\n"
    "The GPU kernel against the CPU reference: the index sets (and their order under --sorted) and\n"
    "the counts must be equal exactly, two runs identical, outputs poisoned first. Without a GPU: the\n"
    "reference against a full sort, and the cases too long for it are named.\n" TOPK_COMMON_USAGE
    TOPK_PLAN_USAGE;

static const char topk_run_usage[] =
    "usage: tilelab run topk --input scores=FILE.npy [--input lens=FILE.npy] --output idx=FILE.npy\n"
    "                        [--output count=FILE.npy] --k K [--sorted] [--device cpu|gpu]\n"
    "Top-k of your own scores: idx [batch][k] int32 and count [batch] int32.\n";

static const char topk_bench_usage[] =
    "usage: tilelab bench topk [--n LIST] [--batch LIST] [--k LIST] [--causal] [--dtype D] [--path P] [--split S]\n"
    "                          [--hw PRESET] [--trace FILE.csv] [--format table|csv|json]\n"
    "Times the kernel with the seed's method (L2 flush, 20 warm-up, 200 timed, median, graph replay)\n"
    "beside floor_us, a plain read of the valid scores timed the same way, and the model's prediction\n"
    "on the preset (default: the GPU's own, h200 where no preset matches) with its error. Scores: normal, seed 1.\n"
    "--trace FILE.csv also runs each case once more (direct launch, after the same flush), every\n"
    "block recording when it started (device clock) and, by its SM's cycle counter, when it had\n"
    "loaded its chunk, passed each radix pass's histogram and barrier, exchanged its counts, placed\n"
    "its keys and ended (the resident path only); `tilelab draw topk-split --trace FILE.csv` draws it.\n"
    TOPK_COMMON_USAGE TOPK_PLAN_USAGE;

static const char topk_sim_usage[] =
    "usage: tilelab sim topk [--hw mi355x] [--n LIST] [--batch LIST] [--k LIST] [--causal] [--dtype D]\n"
    "                        [--path P] [--split S] [--format table|csv|json]\n"
    "The model of the kernel (simulator/topk.h): the path and split it picks (or --path, --split),\n"
    "radix passes (resident) or its buffer's cuts (stream), blocks and waves, a block's shared\n"
    "memory, a block's life (load, one pass, barriers and dependent loads, sort), time and limiter.\n"
    TOPK_COMMON_USAGE TOPK_PLAN_USAGE;

static void topk_free_case(topk_problem *p)
{
    free(p->scores);
    free(p->idx_ref);
    free(p->cnt_ref);
    free(p->idx_other);
    free(p->cnt_other);
    p->scores = p->idx_ref = p->cnt_ref = p->idx_other = p->cnt_other = NULL;
    if (p->g) tl_topk_gpu_kernels->close(p->g);
    p->g = NULL;
    p->cur_case = -1;
}

static void topk_free(void *vp)
{
    topk_problem *p = vp;
    if (!p) return;
    tl_ops_trace_abort(&p->trace); /* the run stopped before the last case: no half-written trace */
    topk_free_case(p);
    free(p->user_lens);
    free(p->user_scores);
    free(p);
}

/* One traced run of the current case at `split`, its blocks appended to the trace file. */
static int topk_trace_case(topk_problem *p, const tl_topk_plan *plan, const tl_bench_opts *o, const char *source)
{
    tl_topk_trace_block *b = NULL;
    int n = 0;
    double end_us = 0;
    const int split = plan->split;
    if (plan->path != TL_TOPK_RESIDENT) {
        fprintf(stderr, "bench topk: B=%d n=%ld k=%d runs the stream path, which --trace does not record (the resident "
                "path's: --path resident --split S)\n", p->shape.batch, p->shape.n, p->shape.k);
        return 0;
    }
    int rc = tl_topk_gpu_kernels->trace(p->g, plan, o, &b, &n, &end_us);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        fprintf(p->trace.f, "%s,%d,%ld,%d,%d,%d,%d,%d,%d", tl_topk_dtype_name(p->shape.dtype), p->shape.batch,
                p->shape.n, p->shape.k, split, b[i].row, b[i].chunk, b[i].sm, b[i].passes);
        for (int t = 0; t < TL_TOPK_TRACE_POINTS; t++) fprintf(p->trace.f, ",%.3f", b[i].t_us[t]);
        fprintf(p->trace.f, ",%.3f,%s\n", end_us, source);
    }
    free(b);
    return ferror(p->trace.f) ? tl_error(TL_EFAIL, p->trace.path, "write failed") : 0;
}

/* Case c's shape: c runs over k fastest, then batch, then n. */
static tl_topk_shape case_shape(const topk_problem *p, int c)
{
    tl_topk_shape s = {(int)p->batch[(c / p->nk) % p->nb], p->n[c / (p->nk * p->nb)], (int)p->k[c % p->nk],
                       p->causal, p->user_lens, p->sorted, p->dtype};
    return s;
}

static int topk_parse(int argc, char **argv, tl_op_mode mode, void **out)
{
    *out = NULL;
    topk_problem *p = calloc(1, sizeof *p);
    if (!p) return tl_error(TL_EFAIL, "topk", "out of memory");
    p->mode = mode;
    p->cur_case = -1;
    p->seed = mode == TL_OP_CHECK ? tl_fresh_seed() : 1;
    const char *n_s = mode == TL_OP_RUN ? "1" : "4096,65536,262144,1048576", *b_s = mode == TL_OP_RUN ? "1" : "1,32",
               *k_s = "512,2048", *dtype_s = NULL, *dist_s = NULL, *seed_s = NULL, *split_s = NULL,
               *path_s = NULL, *hw_s = mode == TL_OP_SIM ? "mi355x" : mode == TL_OP_BENCH ? tl_ops_bench_hw() : "h200", *trace_s = NULL;
    int causal = 0, sorted = 0;
    tl_opt opts[] = {TL_OPT_V("--n", &n_s),         TL_OPT_V("--batch", &b_s),     TL_OPT_V("--k", &k_s),
                     TL_OPT_F("--causal", &causal, 1), TL_OPT_F("--sorted", &sorted, 1), TL_OPT_V("--dtype", &dtype_s),
                     TL_OPT_V("--dist", &dist_s),   TL_OPT_V("--seed", &seed_s),   TL_OPT_V("--split", &split_s),
                     TL_OPT_V("--path", &path_s),   TL_OPT_V("--hw", &hw_s),       TL_OPT_V("--trace", &trace_s), TL_OPT_END};
    static const char *const cmds[] = {"check topk", "bench topk", "sim topk", "run topk"};
    int rc = tl_opts_parse(argc, argv, opts, cmds[mode], NULL, 0, NULL);
    if (!rc) rc = tl_parse_long_list(n_s, 1, TL_TOPK_MAX_N, "--n", p->n, TOPK_MAX_LIST, &p->nn);
    if (!rc) rc = tl_parse_long_list(b_s, 1, TL_TOPK_MAX_BATCH, "--batch", p->batch, TOPK_MAX_LIST, &p->nb);
    if (!rc) rc = tl_parse_long_list(k_s, 1, TL_TOPK_MAX_K, "--k", p->k, TOPK_MAX_LIST, &p->nk);
    if (!rc && dtype_s) rc = tl_topk_dtype_parse(dtype_s, &p->dtype);
    if (!rc && dist_s) rc = tl_topk_dist_parse(dist_s, &p->dist);
    if (!rc && seed_s) rc = tl_ops_parse_seed(seed_s, &p->seed);
    if (!rc && split_s) rc = tl_parse_int(split_s, 0, TL_TOPK_MAX_SPLIT, "--split", &p->split);
    p->path = -1;
    tl_topk_path path;
    if (!rc && path_s && !(rc = tl_topk_path_parse(path_s, &path))) p->path = (int)path;
    if (!rc && p->split && p->path < 0) p->path = TL_TOPK_RESIDENT; /* --split alone: the resident path's */
    if (!rc && path_s && !p->split) rc = tl_error(TL_EUSAGE, "--path", "needs --split too (or neither: the model picks both)");
    if (!rc && (p->nn < 1 || p->nb < 1 || p->nk < 1)) rc = tl_error(TL_EUSAGE, cmds[mode], "an empty list");
    if (!rc && p->nn * p->nb * p->nk > 64) rc = tl_error(TL_EUSAGE, cmds[mode], "more than 64 cases (n x batch x k)");
    snprintf(p->hw, sizeof p->hw, "%s", hw_s);
    tl_hw hw;
    if (!rc) rc = tl_hw_load(p->hw, &hw);
    p->causal = causal;
    p->sorted = sorted;
    for (int c = 0; !rc && c < p->nn * p->nb * p->nk; c++) {
        tl_topk_shape s = case_shape(p, c);
        rc = tl_topk_shape_check(&s);
    }
    if (!rc) p->shape = case_shape(p, 0);
    if (!rc && trace_s && mode != TL_OP_BENCH) rc = tl_error(TL_EUSAGE, "--trace", "only bench topk traces a run");
    if (!rc && trace_s && !*trace_s) rc = tl_error(TL_EUSAGE, "--trace", "needs a file name");
    p->trace.path = trace_s;
    if (!rc && trace_s) rc = tl_ops_trace_open(&p->trace, TL_TOPK_TRACE_HEADER); /* now, not after the timing */
    if (rc) {
        topk_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

static int topk_load_inputs(void *vp, const tl_op_file *files, int n)
{
    topk_problem *p = vp;
    const char *sp = NULL, *lp = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(files[i].name, "scores") == 0) sp = files[i].path;
        if (strcmp(files[i].name, "lens") == 0) lp = files[i].path;
    }
    if (!sp) return tl_error(TL_EUSAGE, "--input", "topk needs scores=FILE.npy");
    tl_npy a, l;
    memset(&l, 0, sizeof l);
    int rc = tl_npy_read(sp, &a);
    char got[96];
    if (!rc) tl_npy_shape_str(&a, got, sizeof got);
    if (!rc && (a.ndim != 2 || a.shape[0] < 1 || a.shape[1] < 1))
        rc = tl_error(TL_EUSAGE, sp, "shape %s, expected [batch, n]", got);
    if (!rc && a.type != TL_NPY_F32 && a.type != TL_NPY_F16 && a.type != TL_NPY_BF16)
        rc = tl_error(TL_EUSAGE, sp, "needs float32, float16 or bfloat16 scores, not %s", tl_npy_type_name(a.type));
    if (!rc && (a.shape[0] > TL_TOPK_MAX_BATCH || a.shape[1] > (size_t)TL_TOPK_MAX_N))
        rc = tl_error(TL_EUSAGE, sp, "shape %s: at most %d rows of %ld", got, TL_TOPK_MAX_BATCH, TL_TOPK_MAX_N);
    if (!rc && lp) rc = tl_npy_read(lp, &l);
    if (!rc && lp && (l.type != TL_NPY_I32 || l.ndim != 1 || l.shape[0] != a.shape[0]))
        rc = tl_error(TL_EUSAGE, lp, "needs int32 lengths [%zu]", a.shape[0]);
    if (rc) {
        tl_npy_free(&a);
        tl_npy_free(&l);
        return rc;
    }
    p->dtype = a.type == TL_NPY_F32 ? TL_TOPK_F32 : a.type == TL_NPY_F16 ? TL_TOPK_F16 : TL_TOPK_BF16;
    p->user_scores = a.data;
    p->user_lens = l.data;
    p->n[0] = (long)a.shape[1];
    p->batch[0] = (long)a.shape[0];
    p->nn = p->nb = p->nk = 1;
    p->shape = case_shape(p, 0);
    return tl_topk_shape_check(&p->shape); /* lengths in [0, n] */
}

static void topk_describe(const void *vp, FILE *f)
{
    const topk_problem *p = vp;
    char split[64];
    if (p->split) snprintf(split, sizeof split, "%s path, split %d", tl_topk_path_name((tl_topk_path)p->path), p->split);
    else snprintf(split, sizeof split, "the path and split the model picks on %.20s", p->hw);
    fprintf(f, "topk: %s scores, %s%s; scores %s; %s; seed %llu\n", tl_topk_dtype_name(p->dtype),
            p->user_lens ? "lengths from the --input file" : p->causal ? "causal lengths" : "full rows",
            p->sorted ? ", sorted" : "", p->user_scores ? "from the --input file" : tl_topk_dist_name(p->dist), split,
            (unsigned long long)p->seed);
}

static int topk_n_cases(const void *vp)
{
    const topk_problem *p = vp;
    return p->nn * p->nb * p->nk;
}

static void topk_case_label(const void *vp, int c, char *label, size_t n)
{
    tl_topk_shape s = case_shape(vp, c);
    snprintf(label, n, "B=%d n=%ld k=%d", s.batch, s.n, s.k);
}

static int alloc_outputs(topk_problem *p)
{
    size_t kk = (size_t)p->shape.batch * p->shape.k, b = (size_t)p->shape.batch;
    p->idx_ref = malloc(kk * sizeof(int32_t));
    p->idx_other = malloc(kk * sizeof(int32_t));
    p->cnt_ref = malloc(b * sizeof(int32_t));
    p->cnt_other = malloc(b * sizeof(int32_t));
    return p->idx_ref && p->idx_other && p->cnt_ref && p->cnt_other ? 0 : tl_error(TL_EFAIL, "topk", "out of memory");
}

static int topk_make_inputs(void *vp, int c)
{
    topk_problem *p = vp;
    topk_free_case(p);
    p->shape = case_shape(p, c);
    size_t bytes = (size_t)p->shape.batch * p->shape.n * tl_topk_score_bytes(p->dtype);
    p->scores = malloc(bytes);
    int rc = p->scores ? alloc_outputs(p) : tl_error(TL_EFAIL, "topk", "out of memory for %zu bytes of scores", bytes);
    if (!rc && p->user_scores) memcpy(p->scores, p->user_scores, bytes);
    else if (!rc) rc = tl_topk_scores_make(&p->shape, p->dist, p->seed, p->scores);
    if (!rc) p->cur_case = c;
    return rc;
}

/* The two outputs: idx [B][k] and count [B], int32, compared exactly. */
static void set_outputs(const topk_problem *p, const int32_t *idx, const int32_t *cnt, tl_op_outputs *out,
                        const char *note)
{
    memset(out, 0, sizeof *out);
    out->n = 2;
    tl_op_output *o = &out->o[0];
    o->name = "idx";
    o->type = TL_NPY_I32;
    o->data = idx;
    o->ndim = 2;
    o->shape[0] = (size_t)p->shape.batch;
    o->shape[1] = (size_t)p->shape.k;
    o->n = o->shape[0] * o->shape[1];
    o->exact = 1;
    snprintf(o->note, sizeof o->note, "%s", note);
    o = &out->o[1];
    o->name = "count";
    o->type = TL_NPY_I32;
    o->data = cnt;
    o->ndim = 1;
    o->shape[0] = (size_t)p->shape.batch;
    o->n = o->shape[0];
    o->exact = 1;
    snprintf(o->note, sizeof o->note, "%s", note);
}

static int topk_reference(void *vp, tl_op_outputs *out)
{
    topk_problem *p = vp;
    set_outputs(p, p->idx_ref, p->cnt_ref, out, p->shape.sorted ? "quickselect, sorted by rank" : "quickselect");
    return tl_topk_reference(&p->shape, p->scores, p->idx_ref, p->cnt_ref);
}

static int topk_naive(void *vp, tl_op_outputs *out)
{
    topk_problem *p = vp;
    set_outputs(p, p->idx_other, p->cnt_other, out, "full sort");
    return tl_topk_naive(&p->shape, p->scores, p->idx_other, p->cnt_other);
}

/* The full sort is single-threaded: about 4M positions take a few seconds. */
static int topk_naive_cheap(const void *vp, int c)
{
    tl_topk_shape s = case_shape(vp, c);
    return (double)s.batch * (double)s.n <= 4194304.0;
}

static int topk_small(const void *vp, void **out)
{
    const topk_problem *p = vp;
    topk_problem *q = calloc(1, sizeof *q);
    if (!q) return tl_error(TL_EFAIL, "topk", "out of memory");
    *q = *p;
    q->user_scores = NULL;
    q->user_lens = NULL;
    q->scores = q->idx_ref = q->cnt_ref = q->idx_other = q->cnt_other = NULL;
    q->g = NULL;
    q->cur_case = -1;
    q->n[0] = 1000, q->n[1] = 5000, q->nn = 2;
    q->batch[0] = 3, q->nb = 1;
    q->k[0] = 100, q->k[1] = 2048, q->nk = 2; /* k > n for the first row */
    q->shape = case_shape(q, 0);
    *out = q;
    return 0;
}

static int topk_tolerance(const void *vp, int o, tl_tolerance *t)
{
    memset(t, 0, sizeof *t); /* integer outputs: compared exactly, never under a tolerance */
    return 0;
}

static int topk_gpu_built(void) { return tl_topk_gpu_kernels != NULL && tl_gpu_kernels != NULL; }

/* The plan the kernel runs: --path and --split, else the model's on the preset. */
static int topk_plan(const topk_problem *p, tl_topk_plan *plan)
{
    tl_hw hw;
    int rc = tl_hw_load(p->hw, &hw);
    if (rc) return rc;
    if (p->split) {
        plan->path = (tl_topk_path)p->path;
        plan->split = p->split;
        return 0;
    }
    return tl_topk_best_plan(&hw, &p->shape, plan);
}

static int topk_gpu(void *vp, tl_op_outputs *out)
{
    topk_problem *p = vp;
    const tl_topk_gpu_api *G = tl_topk_gpu_kernels;
    tl_topk_plan plan;
    int rc = topk_plan(p, &plan);
    if (!rc && !p->g) rc = G->open(&p->shape, &p->g);
    if (!rc) rc = G->upload(p->g, p->scores);
    const size_t kk = (size_t)p->shape.batch * p->shape.k;
    int32_t *again = malloc(kk * sizeof(int32_t)), *again_c = malloc((size_t)p->shape.batch * sizeof(int32_t));
    if (!rc && (!again || !again_c)) rc = tl_error(TL_EFAIL, "topk", "out of memory");
    const int runs = p->mode == TL_OP_CHECK ? 2 : 1;
    for (int run = 0; run < runs && !rc; run++) {
        rc = G->poison(p->g);
        if (!rc) rc = G->run(p->g, &plan);
        if (!rc) rc = G->read(p->g, run ? again : p->idx_other, run ? again_c : p->cnt_other);
    }
    if (!rc && runs == 2 && (memcmp(again, p->idx_other, kk * sizeof(int32_t)) ||
                             memcmp(again_c, p->cnt_other, (size_t)p->shape.batch * sizeof(int32_t))))
        rc = tl_error(TL_EFAIL, "topk", "two runs on the same scores differ (the selection must be deterministic)");
    free(again);
    free(again_c);
    char note[96];
    snprintf(note, sizeof note, "%s split %d%s", tl_topk_path_name(plan.path), plan.split,
             runs == 2 ? "; 2 runs identical" : "");
    set_outputs(p, p->idx_other, p->cnt_other, out, note);
    return rc;
}

static int topk_n_parts(const void *vp) { return 1; }

static int topk_model(const topk_problem *p, const tl_topk_shape *s, tl_topk_result *r)
{
    tl_hw hw;
    int rc = tl_hw_load(p->hw, &hw);
    tl_topk_problem tp = {&hw, *s, p->split, p->path < 0 ? TL_TOPK_RESIDENT : (tl_topk_path)p->path};
    return rc ? rc : tl_topk_sim(&tp, r);
}

/* The work as counted: no FLOPs; the valid scores read once, the indices and counts written once.
 * The model's bytes beside it are the same (the kernel reads the scores once). */
static int topk_work(void *vp, int c, int part, tl_op_work *w)
{
    topk_problem *p = vp;
    tl_topk_shape s = case_shape(p, c);
    tl_topk_result r;
    int rc = topk_model(p, &s, &r);
    if (rc) return rc;
    double valid = 0;
    for (int b = 0; b < s.batch; b++) valid += (double)tl_topk_row_len(&s, b);
    const double outs = ((double)s.batch * s.k + s.batch) * 4.0;
    tl_ops_work_set(w, "select", 0, valid * (double)tl_topk_score_bytes(s.dtype) + outs, 0, r.scores_bytes + outs,
                    r.time_us, r.limiter);
    return 0;
}

static int topk_sim_rows(void *vp, int c, tl_table *t)
{
    topk_problem *p = vp;
    tl_topk_shape s = case_shape(p, c);
    tl_topk_result r;
    int rc = topk_model(p, &s, &r);
    if (rc) return rc;
    tl_table_row(t);
    tl_table_str(t, p->hw);
    tl_table_str(t, tl_topk_dtype_name(s.dtype));
    tl_table_int(t, s.batch);
    tl_table_int(t, s.n);
    tl_table_int(t, s.k);
    tl_table_int(t, s.causal);
    tl_table_str(t, tl_topk_path_name(r.path));
    tl_table_int(t, r.split);
    tl_table_int(t, r.passes);
    tl_table_int(t, r.blocks);
    tl_table_numf(t, "%.2f", r.waves);
    tl_table_numf(t, "%.0f", r.smem_bytes);
    tl_table_numf(t, "%.0f", r.scores_bytes);
    tl_table_numf(t, "%.2f", r.load_us);
    tl_table_numf(t, "%.2f", r.pass_us);
    tl_table_numf(t, "%.2f", r.sync_us);
    tl_table_numf(t, "%.2f", r.sort_us);
    tl_table_numf(t, "%.2f", r.block_us);
    tl_table_numf(t, "%.2f", r.time_us);
    tl_table_numf(t, "%.3f", r.scores_bytes / (r.time_us * 1e6));
    tl_table_str(t, r.limiter);
    return 0;
}

static int topk_bench(void *vp, int c, tl_table *t)
{
    topk_problem *p = vp;
    const tl_gpu_api *D = tl_gpu_kernels;
    const tl_topk_gpu_api *G = tl_topk_gpu_kernels;
    tl_topk_plan plan;
    int rc = topk_plan(p, &plan);
    if (!rc && !p->g) rc = G->open(&p->shape, &p->g);
    if (!rc) rc = G->upload(p->g, p->scores);
    char where[300], label[512];
    if (!rc) rc = tl_ops_measured_where(where, sizeof where);
    if (rc) return rc;
    snprintf(label, sizeof label, "measured on %s; sim_us simulated on preset %.100s", where, p->hw);
    tl_bench_opts o;
    D->default_opts(&o);
    o.use_graph = 1;
    tl_bench_result r;
    tl_op_work w;
    if ((rc = G->time(p->g, &plan, &o, &r)) || (rc = topk_work(p, c, 0, &w))) return rc;
    const double floor_us = tl_ops_read_floor_us(w.hbm_bytes, &o), us = r.median_ms * 1e3;
    char name[96];
    snprintf(name, sizeof name, "topk %s B=%d n=%ld k=%d%s", tl_topk_dtype_name(p->dtype), p->shape.batch, p->shape.n,
             p->shape.k, p->causal ? " causal" : "");
    tl_table_row(t);
    tl_table_str(t, name);
    tl_table_int(t, p->shape.batch);
    tl_table_int(t, p->shape.n);
    tl_table_int(t, p->shape.k);
    tl_table_str(t, tl_topk_path_name(plan.path));
    tl_table_int(t, plan.split);
    tl_table_numf(t, "%.0f", w.hbm_bytes);
    tl_table_numf(t, "%.2f", us);
    tl_table_numf(t, "%.2f", floor_us);
    tl_table_numf(t, "%.3f", us / floor_us);
    tl_table_numf(t, "%.2f", w.model_us);
    tl_table_numf(t, "%.1f", 100.0 * (w.model_us - us) / us);
    tl_table_numf(t, "%.2f", r.p10_ms * 1e3);
    tl_table_numf(t, "%.2f", r.p90_ms * 1e3);
    tl_table_str(t, label);
    if (!p->trace.f) return 0;
    rc = topk_trace_case(p, &plan, &o, where);
    if (!rc && c == topk_n_cases(p) - 1) rc = tl_ops_trace_commit(&p->trace);
    return rc;
}

static const char *const topk_test_args[] = {"--n", "1,300,5000", "--batch", "1,4", "--k", "1,64,400", "--causal",
                                             "--sorted", "--seed", "5", NULL};
static const char *const topk_bad_k[] = {"--k", "0", NULL};
static const char *const topk_bad_k2[] = {"--k", "4097", NULL};
static const char *const topk_bad_n[] = {"--n", "-3", NULL};
static const char *const topk_bad_huge[] = {"--n", "4194304", "--batch", "65536", NULL};
static const char *const topk_bad_dtype[] = {"--dtype", "fp32", NULL};
static const char *const topk_bad_dist[] = {"--dist", "uniform", NULL};
static const char *const topk_bad_split[] = {"--split", "1025", NULL};
static const char *const topk_bad_path[] = {"--path", "stream2", "--split", "4", NULL};
static const char *const topk_bench_args[] = {"--n", "4096,65536,262144,1048576,4194304", "--batch", "1,32",
                                              "--k", "512,2048", NULL};
static const char *const *const topk_bad_args[] = {topk_bad_k,    topk_bad_k2,   topk_bad_n,     topk_bad_huge,
                                                    topk_bad_dtype, topk_bad_dist, topk_bad_split,
                                                    topk_bad_path, NULL};

const tl_op tl_op_topk = {
    .name = "topk",
    .summary = "exact top-k of each row's scores (radix select, rows split over many CUs)",
    .dtypes = "f32,bf16,f16",
    .targets = topk_targets,
    .check_usage = topk_check_usage,
    .bench_usage = topk_bench_usage,
    .sim_usage = topk_sim_usage,
    .run_usage = topk_run_usage,
    .inputs = topk_inputs,
    .parse = topk_parse,
    .free_problem = topk_free,
    .load_inputs = topk_load_inputs,
    .describe = topk_describe,
    .n_cases = topk_n_cases,
    .case_label = topk_case_label,
    .make_inputs = topk_make_inputs,
    .reference = topk_reference,
    .naive = topk_naive,
    .naive_cheap = topk_naive_cheap,
    .small_problem = topk_small,
    .gpu_built = topk_gpu_built,
    .gpu = topk_gpu,
    .tolerance = topk_tolerance,
    .n_parts = topk_n_parts,
    .work = topk_work,
    .sim = topk_sim_rows,
    .sim_header = "hw,dtype,batch,n,k,causal,path,split,passes,blocks,waves,smem_bytes,scores_bytes,load_us,pass_us,"
                  "sync_us,sort_us,block_us,time_us,scores_tbps,limiter",
    .bench = topk_bench,
    .bench_header = "name,batch,n,k,path,split,hbm_bytes,time_us,floor_us,x_floor,sim_us,sim_err_pct,p10_us,p90_us,source",
    .figures = tl_topk_figures,
    .test_args = topk_test_args,
    .bad_args = topk_bad_args,
    .bench_args = topk_bench_args,
};
