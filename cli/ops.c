/* cli/ops.c: the op table. One row per op (core/op.h says what each function promises); the
 * fused MoE is the first. A new op adds its problem struct and functions here (or in its own
 * cli/op_NAME.c) and one entry in tl_ops[]. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/op.h"
#include "../reference/moe.h"
#include "../simulator/model.h"
#include "../simulator/moe.h"
#include "../simulator/worklist.h"
#include "cli.h"
#ifdef TILELAB_HAVE_GPU
#include "../kernels/bench.h"
#include "../kernels/moe.h"
#include "../kernels/roofline.h"
#endif

/* =============================================================================================
 * Fused MoE
 * =========================================================================================== */
#define MOE_MAX_CASES 32

typedef struct {
    tl_model model;          /* the preset, with width = expert width / tp and any overrides */
    tl_moe_dtype dtype;
    long tokens[MOE_MAX_CASES];
    int n_tokens;
    int tp;
    tl_routing routing;
    uint64_t seed;
    int n_shared;
    int stage;               /* bench: 0 = both, 1, 2 */
    int flush_write;         /* bench: 1 = --flush write (dirty L2 lines left), 0 = the default read flush */
    char hw[256];            /* bench: the preset the model predicts on */
    const char *trace_path;  /* bench: --trace FILE, or NULL */
    tl_atomic trace;         /* the trace file while it is written (trace_f open) */
    FILE *trace_f;
    tl_moe_shape shape;      /* tokens = the current case's */
    /* state of the current case */
    tl_moe_inputs in;
    int have_weights;
    tl_worklist wl;
    float *ref, *other;      /* reference output, naive or GPU output */
    uint16_t *ref_act;       /* GPU builds: the reference's stage-1 output (worklist rows x width) */
#ifdef TILELAB_HAVE_GPU
    tl_moe_gpu *g;
#endif
} moe_problem;

static const char moe_check_usage[] =
    "usage: tilelab check moe [--model NAME|config.json] [--dtype bf16|fp8|a16w4|mxfp4|mxfp8]\n"
    "                         [--tokens LIST] [--tp N] [--routing balanced|random|zipf:S|trace:FILE]\n"
    "                         [--seed S] [--shared N] [--hidden H] [--width W] [--experts E] [--topk K]\n"
    "                         [--format table|csv|json]\n"
    "Runs the fused MoE kernel (sort, stage 1, stage 2) on seeded random inputs and compares it with\n"
    "the CPU reference under the tolerance derived from the formats, reduction lengths and size (the\n"
    "whole output's relative RMS error, and each token's row's, each bound allowing one rounding flip\n"
    "of a large activation between the two sides). The stages are also checked one at a time: every\n"
    "stage-1 activation equal to the reference's or one bf16 rounding step apart, and the output within\n"
    "16x the float32 model of the reference's stage 2 run on the GPU's own activations. The GPU's\n"
    "worklist must equal tl_worklist_build's exactly and two runs must agree bit for bit. Outputs are\n"
    "poisoned with NaN first. Without a GPU build, checks the reference against the naive loop on a\n"
    "small shape (and on the requested one when cheap) and says that the GPU part was skipped.\n"
    "Defaults: deepseek-v3.2, bf16, tokens 1,16,256, tp 1, random routing, a fresh seed (printed),\n"
    "no shared experts (--shared N adds N shared experts to the reference checks; not fused on GPU).\n"
    "Exit status: 0 all passed, 1 a check failed, 2 bad input.\n";

static const char moe_bench_usage[] =
    "usage: tilelab bench moe [--model NAME] [--dtype DTYPE] [--tokens LIST] [--stage 1|2] [--tp N]\n"
    "                         [--routing SPEC] [--seed S] [--hw PRESET] [--flush write|read]\n"
    "                         [--trace FILE.csv] [--format table|csv|json]\n"
    "Times each stage with the seed's method (256 MB L2 flush and a 20 us busy-wait before each\n"
    "iteration, 20 warm-up, 200 timed, median, graph replay) and prints weight bytes read per second,\n"
    "TFLOP/s and the simulator's prediction on the preset with its relative error. --flush read\n"
    "(default) loads the flush buffer, so the stage pays only for its own traffic; --flush write\n"
    "stores it, and the L2 lines it leaves dirty are written back during the timed stage (about 42 MB\n"
    "on the H200: ~9 us; the default of runs 1-11 under bench/results/).\n"
    "--trace FILE.csv also runs each stage once more as it is timed, with every GEMM block recording\n"
    "when it started and ended and on which SM (columns tokens,stage,dtype,block,tile,nblock,sm,\n"
    "start_us,end_us,source; times from the moment the stage could start; one row per stage with\n"
    "block -1 gives when its last kernel had ended): where a stage's time goes beyond its bytes;\n"
    "`tilelab draw timeline --trace FILE.csv` draws it.\n"
    "floor_us is the read floor: a plain streaming read of the stage's hbm_bytes on the same device\n"
    "with the same method (kernels/roofline.h), which no kernel that must read them beats by much;\n"
    "x_floor = time_us / floor_us. The preset defaults to h200. --format csv gives the columns\n"
    "`tilelab draw roofline --points` reads (name,flops,hbm_bytes,time_us,intensity,tflops,source).\n"
    "Defaults: deepseek-v3.2, fp8, tokens 1,8,64,256,1024, both stages, balanced routing, seed 1.\n";

static void moe_free_case(moe_problem *p)
{
    tl_worklist_free(&p->wl);
    free(p->ref);
    free(p->other);
    free(p->ref_act);
    p->ref = p->other = NULL;
    p->ref_act = NULL;
}

static void moe_free(void *vp)
{
    moe_problem *p = vp;
    if (!p) return;
    if (p->trace_f) { /* the run stopped before the last case: no half-written trace */
        fclose(p->trace_f);
        tl_atomic_abort(&p->trace);
    }
    moe_free_case(p);
    tl_moe_inputs_free(&p->in);
#ifdef TILELAB_HAVE_GPU
    tl_moe_gpu_close(p->g);
#endif
    free(p);
}

/* --trace FILE: its temporary file opened with the header (moe_bench fills it, commits it after
 * the last case; moe_free removes it if the run stops before). */
static int moe_trace_open(moe_problem *p)
{
    int rc = tl_atomic_begin(&p->trace, p->trace_path);
    if (rc) return rc;
    p->trace_f = fopen(p->trace.tmp, "w");
    if (!p->trace_f) return tl_error(TL_EUSAGE, p->trace_path, "cannot write the trace: %s", strerror(errno));
    fprintf(p->trace_f, "tokens,stage,dtype,block,tile,nblock,sm,start_us,end_us,source\n");
    return 0;
}

/* "--seed": an unsigned integer (decimal, 0x hex or 0 octal), no sign. */
static int parse_seed(const char *val, uint64_t *seed)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 0);
    if (!*val || *end || errno || val[0] == '-')
        return tl_error(TL_EUSAGE, "--seed", "'%s' is not a seed (an unsigned integer)", val);
    *seed = v;
    return TL_OK;
}

static int moe_parse(int argc, char **argv, tl_op_mode mode, void **out)
{
    *out = NULL;
    moe_problem *p = calloc(1, sizeof *p);
    if (!p) return tl_error(TL_EFAIL, "moe", "out of memory");
    const char *model = "deepseek-v3.2", *tokens = mode == TL_OP_CHECK ? "1,16,256" : "1,8,64,256,1024";
    const char *routing = mode == TL_OP_CHECK ? "random" : "balanced";
    long tp = 1, shared = 0, stage = 0, hidden = 0, width = 0, experts = 0, topk = 0;
    p->seed = mode == TL_OP_BENCH ? 1 : tl_fresh_seed();
    p->dtype = mode == TL_OP_CHECK ? TL_MOE_BF16 : TL_MOE_FP8;
    snprintf(p->hw, sizeof p->hw, "h200");
    const char *fmt_s = NULL, *dtype_s = NULL, *tp_s = NULL, *shared_s = NULL, *hidden_s = NULL, *width_s = NULL,
               *experts_s = NULL, *topk_s = NULL, *seed_s = NULL, *stage_s = NULL, *hw_s = NULL, *flush_s = NULL,
               *trace_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--format", &fmt_s), /* the harness reads it (op_cmd.c) */
                     TL_OPT_V("--model", &model), TL_OPT_V("--dtype", &dtype_s), TL_OPT_V("--tokens", &tokens),
                     TL_OPT_V("--routing", &routing), TL_OPT_V("--tp", &tp_s), TL_OPT_V("--shared", &shared_s),
                     TL_OPT_V("--hidden", &hidden_s), TL_OPT_V("--width", &width_s),
                     TL_OPT_V("--experts", &experts_s), TL_OPT_V("--topk", &topk_s), TL_OPT_V("--seed", &seed_s),
                     TL_OPT_V("--stage", &stage_s), TL_OPT_V("--hw", &hw_s), TL_OPT_V("--flush", &flush_s),
                     TL_OPT_V("--trace", &trace_s), TL_OPT_END};
    /* --stage, --hw, --flush, --trace are the bench's alone: the check's table ends before them */
    if (mode != TL_OP_BENCH)
        opts[sizeof opts / sizeof opts[0] - 5] = (tl_opt)TL_OPT_END;
    int rc = tl_opts_parse(argc, argv, opts, mode == TL_OP_CHECK ? "check moe" : "bench moe", NULL, 0, NULL);
    if (!rc && dtype_s) rc = tl_moe_dtype_parse(dtype_s, &p->dtype);
    if (!rc && tp_s) rc = tl_parse_long(tp_s, 1, 64, "--tp", &tp);
    if (!rc && shared_s) rc = tl_parse_long(shared_s, 0, 16, "--shared", &shared);
    if (!rc && hidden_s) rc = tl_parse_long(hidden_s, 1, 65536, "--hidden", &hidden);
    if (!rc && width_s) rc = tl_parse_long(width_s, 1, 65536, "--width", &width);
    if (!rc && experts_s) rc = tl_parse_long(experts_s, 1, 4096, "--experts", &experts);
    if (!rc && topk_s) rc = tl_parse_long(topk_s, 1, 4096, "--topk", &topk);
    if (!rc && stage_s) rc = tl_parse_long(stage_s, 1, 2, "--stage", &stage);
    p->trace_path = trace_s;
    if (!rc && trace_s && !*trace_s) rc = tl_error(TL_EUSAGE, "--trace", "needs a file name");
    p->flush_write = 0;
    if (!rc && flush_s) {
        if (strcmp(flush_s, "write") == 0) p->flush_write = 1;
        else if (strcmp(flush_s, "read") != 0)
            rc = tl_error(TL_EUSAGE, "--flush", "unknown flush '%s' (write or read)", flush_s);
    }
    if (!rc && seed_s) rc = parse_seed(seed_s, &p->seed);
    if (!rc && hw_s) snprintf(p->hw, sizeof p->hw, "%s", hw_s);
    if (!rc && mode == TL_OP_BENCH) { /* bad input is exit 2 before "no GPU" is exit 1 */
        tl_hw hw;
        rc = tl_hw_load(p->hw, &hw);
    }
    if (!rc) rc = tl_model_load(model, &p->model);
    if (!rc && p->model.n_experts < 1) rc = tl_error(TL_EUSAGE, "moe", "model '%s' has no routed experts", model);
    if (!rc) rc = tl_routing_parse(routing, &p->routing);
    if (!rc) rc = tl_parse_long_list(tokens, 1, 1 << 20, "--tokens", p->tokens, MOE_MAX_CASES, &p->n_tokens);
    if (!rc && p->n_tokens < 1) rc = tl_error(TL_EUSAGE, "--tokens", "no token counts given");
    if (!rc) {
        if (hidden) p->model.hidden = (int)hidden;
        if (width) p->model.moe_width = (int)width;
        if (experts) p->model.n_experts = (int)experts;
        if (topk) p->model.top_k = (int)topk;
        if (p->model.moe_width % tp)
            rc = tl_error(TL_EUSAGE, "--tp", "%ld does not divide the expert width %d", tp, p->model.moe_width);
    }
    if (!rc) {
        p->tp = (int)tp;
        p->n_shared = (int)shared;
        p->stage = (int)stage;
        tl_moe_shape s = {(int)p->tokens[0], p->model.hidden, p->model.moe_width / (int)tp, p->model.n_experts,
                          p->model.top_k, (int)shared, p->dtype};
        for (int c = 0; c < p->n_tokens && !rc; c++) {
            s.tokens = (int)p->tokens[c];
            rc = tl_moe_shape_check(&s);
        }
        s.tokens = (int)p->tokens[0];
        p->shape = s;
    }
    if (!rc && p->trace_path) rc = moe_trace_open(p); /* now, not after minutes of timing */
    if (rc) {
        moe_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

static void moe_describe(const void *vp, FILE *f)
{
    const moe_problem *p = vp;
    char r[1100];
    tl_routing_describe(&p->routing, r, sizeof r);
    fprintf(f, "moe: %s, hidden %d, expert width %d / tp %d = %d, %d experts, top-%d, %d shared; dtype %s; "
               "routing %s; seed %llu\n",
            p->model.name, p->shape.hidden, p->model.moe_width, p->tp, p->shape.width, p->shape.n_experts,
            p->shape.top_k, p->shape.n_shared, tl_moe_dtype_name(p->dtype), r, (unsigned long long)p->seed);
}

static int moe_n_cases(const void *vp) { return ((const moe_problem *)vp)->n_tokens; }

static int moe_make_inputs(void *vp, int c, char *label, size_t n)
{
    moe_problem *p = vp;
    moe_free_case(p);
    p->shape.tokens = (int)p->tokens[c];
    snprintf(label, n, "M=%d", p->shape.tokens);
    int rc = 0;
    if (!p->have_weights) {
        rc = tl_moe_inputs_make(&p->shape, &p->routing, p->seed, &p->in);
        if (rc) return rc;
        p->have_weights = 1;
    } else {
        rc = tl_moe_tokens_make(&p->in, &p->shape, &p->routing, p->seed);
        if (rc) return rc;
    }
    return tl_worklist_build(p->in.topk_ids, p->shape.tokens, p->shape.top_k, p->shape.n_experts, 16, &p->wl);
}

static int moe_reference(void *vp, tl_op_output *out)
{
    moe_problem *p = vp;
    size_t n = (size_t)p->shape.tokens * p->shape.hidden;
    free(p->ref);
    p->ref = malloc(n * sizeof(float));
    if (!p->ref) return tl_error(TL_EFAIL, "moe", "out of memory");
    uint16_t *act = NULL;
#ifdef TILELAB_HAVE_GPU /* the GPU check compares stage 1's output too */
    free(p->ref_act);
    act = p->ref_act = malloc(((size_t)p->wl.n_rows_padded + 1) * (size_t)p->shape.width * sizeof(uint16_t));
    if (!act) return tl_error(TL_EFAIL, "moe", "out of memory");
#endif
    int rc = tl_moe_reference(&p->in, &p->wl, p->ref, act);
    out->data = p->ref;
    out->n = n;
    out->row_len = (size_t)p->shape.hidden;
    snprintf(out->note, sizeof out->note, "%d tiles, %d active experts", p->wl.n_tiles, p->wl.active_experts);
    return rc;
}

static int moe_naive(void *vp, tl_op_output *out)
{
    moe_problem *p = vp;
    size_t n = (size_t)p->shape.tokens * p->shape.hidden;
    free(p->other);
    p->other = malloc(n * sizeof(float));
    if (!p->other) return tl_error(TL_EFAIL, "moe", "out of memory");
    out->data = p->other;
    out->n = n;
    out->row_len = (size_t)p->shape.hidden;
    snprintf(out->note, sizeof out->note, "naive loop (double, per-element decode)");
    return tl_moe_naive(&p->in, p->other);
}

/* The naive loop costs about tokens*k*3*H*I element decodes; the weights of every expert must fit
 * comfortably in memory too. */
static int moe_naive_cheap(const void *vp, int c)
{
    const moe_problem *p = vp;
    const tl_moe_shape *s = &p->shape;
    double macs = (double)p->tokens[c] * (s->top_k + s->n_shared) * 3.0 * s->hidden * s->width;
    double bytes = (double)(s->n_experts + s->n_shared) * 3.0 * s->hidden * s->width *
                   tl_moe_weight_bytes_per_elem(s->dtype);
    return macs <= 3e8 && bytes <= 1.5e9;
}

static int moe_small(const void *vp, void **out)
{
    const moe_problem *p = vp;
    moe_problem *q = calloc(1, sizeof *q);
    if (!q) return tl_error(TL_EFAIL, "moe", "out of memory");
    q->model = p->model;
    snprintf(q->model.name, sizeof q->model.name, "small");
    q->model.hidden = 256;
    q->model.moe_width = 192; /* not a multiple of 128: exercises the partial blocks and groups */
    /* A trace names real expert ids with the model's k: keep E and k then, and cut the rest. */
    int trace = p->routing.kind == TL_ROUTE_TRACE;
    q->model.n_experts = trace ? p->model.n_experts : 8;
    q->model.top_k = trace ? p->model.top_k : 2;
    q->dtype = p->dtype;
    q->tokens[0] = 1;
    q->tokens[1] = 7;
    q->n_tokens = 2;
    q->tp = 1;
    q->routing = p->routing;
    q->seed = p->seed;
    q->n_shared = p->n_shared ? 1 : 0;
    tl_moe_shape s = {1, 256, 192, q->model.n_experts, q->model.top_k, q->n_shared, p->dtype};
    q->shape = s;
    *out = q;
    return 0;
}

static int moe_tolerance(const void *vp, tl_tolerance *t) { return tl_moe_tolerance(&((const moe_problem *)vp)->shape, t); }

#ifdef TILELAB_HAVE_GPU
/* The GPU's worklist against tl_worklist_build's, entry by entry. */
static int moe_compare_worklist(moe_problem *p)
{
    const tl_worklist *wl = &p->wl;
    size_t rows = (size_t)wl->n_rows_padded;
    int32_t *ids = malloc((rows ? rows : 1) * sizeof(int32_t));
    int32_t *te = malloc(((size_t)wl->n_tiles + 1) * sizeof(int32_t)), *tr = malloc(((size_t)wl->n_tiles + 1) * sizeof(int32_t));
    int nt = -1, rc = (ids && te && tr) ? 0 : tl_error(TL_EFAIL, "moe", "out of memory");
    if (!rc) rc = tl_moe_gpu_read(p->g, NULL, ids, rows, te, tr, (size_t)wl->n_tiles, &nt);
    if (!rc && nt != wl->n_tiles) rc = tl_error(TL_EFAIL, "moe sort", "GPU made %d tiles, the worklist %d", nt, wl->n_tiles);
    for (size_t i = 0; !rc && i < rows; i++)
        if (ids[i] != wl->sorted_ids[i])
            rc = tl_error(TL_EFAIL, "moe sort", "sorted_ids[%zu]: GPU %d, worklist %d", i, ids[i], wl->sorted_ids[i]);
    for (int t = 0; !rc && t < nt; t++)
        if (te[t] != wl->tile_expert[t] || tr[t] != wl->tile_rows[t])
            rc = tl_error(TL_EFAIL, "moe sort", "tile %d: GPU expert %d rows %d, worklist expert %d rows %d", t, te[t],
                          tr[t], wl->tile_expert[t], wl->tile_rows[t]);
    free(ids);
    free(te);
    free(tr);
    return rc;
}

/* The GPU's stages one at a time, beside the final comparison the harness makes: stage 1's
 * activations against the reference's (equal or one rounding step apart, tl_moe_compare_act), then
 * the GPU's output against the reference's stage 2 run on the GPU's own activations (no rounding
 * flips left: tl_moe_tolerance_stage2). TL_EFAIL with the first difference when either fails;
 * else a note of both. Cost: the reference's stage 2 once more. */
static int moe_check_stages(moe_problem *p, char *note, size_t cap)
{
    const size_t rows = (size_t)p->wl.n_rows_padded, W = (size_t)p->shape.width;
    const size_t n = (size_t)p->shape.tokens * p->shape.hidden;
    uint16_t *act = malloc((rows + 1) * W * sizeof(uint16_t));
    float *ref2 = malloc(n * sizeof(float));
    int rc = act && ref2 && p->ref_act ? 0 : tl_error(TL_EFAIL, "moe", "out of memory");
    if (!rc) rc = tl_moe_gpu_read_act(p->g, act, rows);
    tl_moe_act_diff d;
    if (!rc) rc = tl_moe_compare_act(&p->shape, &p->wl, p->ref_act, act, &d);
    if (!rc && !d.pass) {
        if (d.padding_bad)
            rc = tl_error(TL_EFAIL, "moe", "stage 1 wrote %zu nonzero values into padding rows (first: row %zu)",
                          d.padding_bad, d.first_pad_row);
        else if (d.far)
            rc = tl_error(TL_EFAIL, "moe", "stage 1: %zu of %zu activations differ by more than a rounding step "
                          "(worst: row %zu column %zu, GPU bf16 0x%04x, reference 0x%04x)", d.far, d.compared,
                          d.worst_row, d.worst_col, d.worst_got, d.worst_ref);
        else
            rc = tl_error(TL_EFAIL, "moe", "stage 1: %zu of %zu activations one rounding step apart (at most 1 in 20)",
                          d.one_step, d.compared);
    }
    tl_err_metrics m;
    tl_tolerance t2;
    if (!rc) rc = tl_moe_reference_from_act(&p->in, &p->wl, act, ref2);
    if (!rc) rc = tl_compare_rows(ref2, p->other, n, (size_t)p->shape.hidden, &m);
    if (!rc) rc = tl_moe_tolerance_stage2(&p->shape, &t2);
    if (!rc && !tl_check_pass(&m, &t2))
        rc = tl_error(TL_EFAIL, "moe", "stage 2 on the GPU's own activations: rel_rms %.3g, worst row %.3g, nan %zu "
                      "(bound %.3g, rows %.3g)", m.rel_rms, m.worst_row, m.nan_count, t2.rel_rms,
                      t2.rel_rms * t2.row_factor);
    if (!rc)
        snprintf(note, cap, "stage 1: %zu of %zu activations a rounding step apart; stage 2 on them: rel_rms %.2g "
                 "(bound %.2g)", d.one_step, d.compared, m.rel_rms, t2.rel_rms);
    free(act);
    free(ref2);
    return rc;
}

static int moe_gpu(void *vp, tl_op_output *out)
{
    moe_problem *p = vp;
    int rc = 0;
    if (!p->g) {
        long max_tokens = 0;
        for (int c = 0; c < p->n_tokens; c++) max_tokens = p->tokens[c] > max_tokens ? p->tokens[c] : max_tokens;
        rc = tl_moe_gpu_open(&p->in, (int)max_tokens, &p->g);
        if (rc) return rc;
    }
    size_t n = (size_t)p->shape.tokens * p->shape.hidden;
    float *again = malloc(n * sizeof(float));
    free(p->other);
    p->other = malloc(n * sizeof(float));
    if (!again || !p->other) rc = tl_error(TL_EFAIL, "moe", "out of memory");
    if (!rc) rc = tl_moe_gpu_set_tokens(p->g, &p->in);
    for (int run = 0; run < 2 && !rc; run++) { /* twice: deterministic means bit-identical */
        rc = tl_moe_gpu_poison(p->g);
        if (!rc) rc = tl_moe_gpu_run(p->g, TL_MOE_PART_ALL);
        if (!rc) rc = tl_moe_gpu_read(p->g, run ? again : p->other, NULL, 0, NULL, NULL, 0, NULL);
        if (!rc && run == 0) rc = moe_compare_worklist(p);
    }
    if (!rc && memcmp(again, p->other, n * sizeof(float)) != 0)
        rc = tl_error(TL_EFAIL, "moe", "two runs on the same inputs differ (the combine must be deterministic)");
    free(again);
    char stages[200] = "";
    if (!rc) rc = moe_check_stages(p, stages, sizeof stages);
    out->data = p->other;
    out->n = n;
    out->row_len = (size_t)p->shape.hidden;
    snprintf(out->note, sizeof out->note, "worklist identical (%d tiles); %s; 2 runs bit-identical", p->wl.n_tiles,
             stages);
    return rc;
}

/* bytes of one expert's matrix (codes + scales) */
static double moe_mat_bytes(const tl_moe_weights *w)
{
    double sb = w->scales ? 4.0 : w->e8m0 ? 1.0 : 0.0;
    return (double)w->mat_code_bytes + sb * (double)w->mat_scales;
}

/* --trace: one cold run of `stage` block by block, appended to the trace file (opened at the first
 * call; moe_bench commits it after the last case). */
static int moe_trace_stage(moe_problem *p, int stage, const tl_bench_opts *o, const char *source)
{
    int rc;
    if (!p->trace_f) return tl_error(TL_EFAIL, p->trace_path, "the trace file is not open");
    tl_moe_trace_block *b = NULL;
    int n = 0;
    double end_us = 0.0;
    rc = tl_moe_gpu_trace(p->g, stage == 1 ? TL_MOE_PART_STAGE1 : TL_MOE_PART_STAGE2, o, &b, &n, &end_us);
    if (rc) return rc;
    const char *dt = tl_moe_dtype_name(p->shape.dtype);
    fprintf(p->trace_f, "%d,%d,%s,-1,-1,-1,-1,0,%.3f,%s\n", p->shape.tokens, stage, dt, end_us, source);
    for (int i = 0; i < n; i++)
        fprintf(p->trace_f, "%d,%d,%s,%d,%d,%d,%d,%.3f,%.3f,%s\n", p->shape.tokens, stage, dt, b[i].block, b[i].tile,
                b[i].nblock, b[i].sm, b[i].start_us, b[i].end_us, source);
    free(b);
    return ferror(p->trace_f) ? tl_error(TL_EFAIL, p->trace_path, "write failed") : 0;
}

static int moe_trace_commit(moe_problem *p)
{
    if (!p->trace_f) return 0;
    int bad = fclose(p->trace_f) != 0;
    p->trace_f = NULL;
    if (bad) {
        tl_atomic_abort(&p->trace);
        return tl_error(TL_EFAIL, p->trace_path, "write failed");
    }
    return tl_atomic_commit(&p->trace);
}

static int moe_bench(void *vp, int c, tl_table *t)
{
    moe_problem *p = vp;
    int rc = 0;
    if (!p->g) {
        long max_tokens = 0;
        for (int i = 0; i < p->n_tokens; i++) max_tokens = p->tokens[i] > max_tokens ? p->tokens[i] : max_tokens;
        rc = tl_moe_gpu_open(&p->in, (int)max_tokens, &p->g);
        if (rc) return rc;
    }
    tl_gpu_info info;
    char where[300], label[640], date[64];
    if ((rc = tl_gpu_query(0, &info))) return rc;
    tl_bench_date(date, sizeof date);
    /* device, date and method, without commas (the trace's source is one CSV field) */
    snprintf(where, sizeof where, "%.200s %.63s (%s flush)", info.name, date, p->flush_write ? "write" : "read");
    for (char *ch = where; *ch; ch++)
        if (*ch == ',') *ch = ' ';
    /* the row mixes both kinds: time_us and the rates are measured, sim_us and sim_limiter simulated */
    snprintf(label, sizeof label, "measured on %s; sim_us simulated on preset %.200s", where, p->hw);
    tl_hw hw;
    if ((rc = tl_hw_load(p->hw, &hw))) return rc;
    if ((rc = tl_moe_gpu_set_tokens(p->g, &p->in))) return rc;
    if ((rc = tl_moe_gpu_run(p->g, TL_MOE_PART_ALL))) return rc;
    const tl_moe_shape *s = &p->shape;
    const double edges = (double)s->tokens * s->top_k, abytes = tl_moe_act_bytes_per_elem(s->dtype);
    for (int stage = 1; stage <= 2; stage++) {
        if (p->stage && p->stage != stage) continue;
        tl_bench_opts o;
        tl_bench_default_opts(&o);
        o.use_graph = 1;
        o.flush_l2 = p->flush_write ? TL_BENCH_FLUSH_WRITE : TL_BENCH_FLUSH_READ;
        tl_bench_result r;
        rc = tl_moe_gpu_time(p->g, stage == 1 ? TL_MOE_PART_STAGE1 : TL_MOE_PART_STAGE2, &o, &r);
        if (!rc && p->trace_path) rc = moe_trace_stage(p, stage, &o, where);
        if (rc) return rc;
        double us = r.median_ms * 1e3;
        double wbytes = p->wl.active_experts * moe_mat_bytes(stage == 1 ? &p->in.w1 : &p->in.w2);
        double flops = 2.0 * edges * s->hidden * (stage == 1 ? 2.0 * s->width : s->width);
        double io = stage == 1 ? s->tokens * s->hidden * abytes + edges * s->width * 2.0
                               : edges * s->width * abytes + edges * s->hidden * 4.0 * 2 + s->tokens * s->hidden * 4.0;
        double hbm = wbytes + io;
        /* the read floor: a plain read of the stage's bytes, same method (NaN if it cannot run) */
        double floor_us = NAN;
        if (tl_roofline_read_floor(hbm, &o, &floor_us)) {
            fprintf(stderr, "tilelab: note: no read floor for %s s%d M=%d: %s\n", tl_moe_dtype_name(s->dtype), stage,
                    s->tokens, tl_last_error());
            tl_clear_error();
            floor_us = NAN;
        }
        tl_model m = p->model;
        tl_moe_problem sp = {0};
        sp.hw = &hw;
        sp.model = &m;
        sp.dtype = s->dtype;
        sp.tokens = s->tokens;
        sp.stage = stage;
        sp.routing = p->routing;
        sp.seed = p->seed;
        sp.tp = p->tp;
        /* the kernel's own geometry (tiles, n-block width, blocks per SM, stage 2's extra kernels)
         * and the bench's method: timed right after its L2 flush (a write flush leaves dirty lines) */
        int src = tl_moe_tilelab_kernel(&sp);
        sp.after_flush = p->flush_write;
        tl_moe_result sr;
        memset(&sr, 0, sizeof sr);
        if (!src) src = tl_moe_sim(&sp, &sr);
        char name[96];
        snprintf(name, sizeof name, "moe %s s%d M=%d%s", tl_moe_dtype_name(s->dtype), stage, s->tokens,
                 p->tp > 1 ? " tp" : "");
        tl_table_row(t);
        tl_table_str(t, name);
        tl_table_int(t, stage);
        tl_table_int(t, s->tokens);
        tl_table_str(t, tl_moe_dtype_name(s->dtype));
        tl_table_numf(t, "%.4g", flops);
        tl_table_numf(t, "%.4g", hbm);
        tl_table_numf(t, "%.2f", us);
        tl_table_numf(t, "%.3g", flops / hbm);
        tl_table_numf(t, "%.2f", flops / (us * 1e-6) / 1e12);
        tl_table_numf(t, "%.3f", wbytes / (us * 1e-6) / 1e12);
        tl_table_numf(t, "%.3f", hbm / (us * 1e-6) / 1e12);
        tl_table_numf(t, "%.2f", src ? NAN : sr.time_us);
        tl_table_numf(t, "%.1f", src ? NAN : 100.0 * (sr.time_us - us) / us);
        tl_table_str(t, src ? "?" : sr.limiter);
        tl_table_numf(t, "%.2f", r.p10_ms * 1e3);
        tl_table_numf(t, "%.2f", r.p90_ms * 1e3);
        tl_table_numf(t, "%.2f", floor_us);
        tl_table_numf(t, "%.3f", us / floor_us);
        tl_table_str(t, label);
        if (src) tl_clear_error();
        tl_moe_result_free(&sr);
    }
    return c == p->n_tokens - 1 ? moe_trace_commit(p) : 0;
}
#endif

static const tl_op moe_op = {
    .name = "moe",
    .summary = "fused MoE: sort, gate+up+SwiGLU, down+weighted combine",
    .check_usage = moe_check_usage,
    .bench_usage = moe_bench_usage,
    .parse = moe_parse,
    .free_problem = moe_free,
    .describe = moe_describe,
    .n_cases = moe_n_cases,
    .make_inputs = moe_make_inputs,
    .reference = moe_reference,
    .naive = moe_naive,
    .naive_cheap = moe_naive_cheap,
    .small_problem = moe_small,
#ifdef TILELAB_HAVE_GPU
    .gpu = moe_gpu,
    .bench = moe_bench,
#endif
    .tolerance = moe_tolerance,
    .bench_header = "name,stage,tokens,dtype,flops,hbm_bytes,time_us,intensity,tflops,weight_tbps,hbm_tbps,"
                    "sim_us,sim_err_pct,sim_limiter,p10_us,p90_us,floor_us,x_floor,source",
};

/* =============================================================================================
 * The table
 * =========================================================================================== */
const tl_op *const tl_ops[] = {&moe_op, NULL};

const tl_op *tl_op_find(const char *name)
{
    for (int i = 0; tl_ops[i]; i++)
        if (strcmp(tl_ops[i]->name, name) == 0) return tl_ops[i];
    return NULL;
}
