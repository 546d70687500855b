/* ops/moe.c: the fused MoE's row of the op table (core/op.h says what each function promises).
 * It joins the op's parts: the contract's shape, the reference (reference/moe.h), the model
 * (simulator/moe.h: one function, moe_model, that sim, bench and the figures all use) and the
 * kernel's exported launcher table (kernels/moe.h: NULL in a build without a GPU). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/op.h"
#include "../kernels/bench.h"
#include "../kernels/moe.h"
#include "../reference/moe.h"
#include "../simulator/model.h"
#include "../simulator/moe.h"
#include "../contract/worklist.h"
#include "ops.h"

#define MOE_MAX_CASES 256

typedef struct {
    tl_op_mode mode;
    tl_model model;          /* the preset, with width = expert width / tp and any overrides */
    tl_moe_dtype dtype;
    long tokens[MOE_MAX_CASES];
    int n_tokens;
    int tp;
    tl_routing routing;
    int trace_tokens;        /* a trace routing: the file's token count */
    uint64_t seed;
    int n_shared;
    int stage;               /* bench and sim: 0 = both, 1, 2 */
    int flush_write;         /* bench: 1 = --flush write (dirty L2 lines left), 0 = the default read flush */
    char hw[1100];           /* bench and sim: the preset the model predicts on */
    int tile_m, tile_n;      /* sim: the modelled kernel's tile (generic kernel) */
    double cu_gbps;          /* sim: --cu-gbps (0 = the preset's) */
    int tilelab_kernel;      /* sim: 1 = this project's kernel's geometry (bench and check always) */
    tl_ops_trace trace;      /* bench: --trace FILE (trace.path NULL: none) */
    tl_moe_shape shape;      /* tokens = the current case's */
    /* the user's tensors (load_inputs): x as float32, the routing; NULL when random */
    float *user_x;
    int32_t *user_ids;
    float *user_w;
    /* state of the current case */
    int cur_case;            /* -1: none made */
    tl_moe_inputs in;
    int have_weights;
    tl_worklist wl;
    float *ref, *other;      /* reference output, naive or GPU output */
    uint16_t *ref_act;       /* with a GPU: the reference's stage-1 output (worklist rows x width) */
    tl_moe_gpu *g;
    tl_moe_acc acc;          /* the accumulators of the output compared next: the GPU's (its run), else float32 */
} moe_problem;

static const tl_op_input moe_inputs[] = {
    {"x", "activations [tokens][hidden]: float32, float16 or bfloat16 (fp8: quantized in 1x128 groups; mxfp4, mxfp8: to MXFP8, 1x32 blocks)", 1},
    {"topk_ids", "routed experts [tokens][top_k]: int32 in [0, experts)", 1},
    {"topk_weights", "routing weights [tokens][top_k]: float32, finite", 1},
    {NULL, NULL, 0},
};

static const tl_op_target moe_targets[] = {
    {"sm_90", TL_OPS_SM90_COMPILED, "NVIDIA H200 2026-12-01 (all five dtypes), H100 2026-12-06 (every dtype to M = 4096; the bf16 wgmma prefill kernels)", NULL},
    TL_OPS_AMD_TARGETS,
    {NULL, NULL, NULL, NULL},
};

/* The routing paragraph of check, bench and sim's help (contract/worklist.h has the format). */
#define MOE_ROUTING_HELP                                                                                  \
    "--routing: random (default: k distinct experts a token, uniform, seeded by --seed), balanced (round\n" \
    "robin: the easy case), zipf:S (skewed by a Zipf law of exponent S), or trace:FILE, a text file of\n"  \
    "one token a line: its k expert ids in [0, E), distinct, then optionally k weights > 0 (scaled to\n"  \
    "sum 1; without them 1/k each; every line or none), separated by spaces, tabs or commas; '#' lines\n" \
    "and blank lines skipped; at most 2^20 tokens. A trace sets the token count (one case); --tokens\n"  \
    "M routes its first M tokens and may not exceed its count.\n"

static const char moe_check_usage[] =
    "usage: tilelab check moe [--model NAME|config.json] [--dtype bf16|fp8|a16w4|mxfp4|mxfp8]\n"
    "                         [--tokens LIST] [--tp N] [--routing balanced|random|zipf:S|trace:FILE]\n"
    "                         [--seed S] [--shared N] [--hidden H] [--width W] [--experts E] [--topk K]\n"
    "                         [--input x=FILE.npy --input topk_ids=FILE.npy --input topk_weights=FILE.npy]\n"
    "                         [--format table|csv|json]\n"
    "Runs the fused MoE kernel (sort, stage 1, stage 2) on seeded random inputs and compares it with\n"
    "the CPU reference under the tolerance derived from the formats, reduction lengths and size (the\n"
    "whole output's relative RMS error, and each token's row's, each bound allowing one rounding flip\n"
    "of a large activation between the two sides). The stages are also checked one at a time: every\n"
    "stage-1 activation equal to the reference's or one bf16 rounding step apart, and the output within\n"
    "16x the float32 model of the reference's stage 2 run on the GPU's own activations. The GPU's\n"
    "worklist must equal tl_worklist_build's exactly and two runs must agree bit for bit. Outputs are\n"
    "poisoned with NaN first. Without a GPU build, checks the reference against the naive loop on a\n"
    "small shape (and on the requested one when cheap) and names the requested cases not checked.\n"
    "--input: your own activations and routing (.npy; all three together) replace the random ones:\n"
    "one case of their token count; the weights stay seeded random codes of --dtype.\n"
    MOE_ROUTING_HELP
    "Defaults: deepseek-v3.2, bf16, tokens 1,16,256, tp 1, random routing, a fresh seed (printed),\n"
    "no shared experts (--shared N adds N shared experts to the reference checks; not fused on GPU).\n"
    "Exit status: 0 all passed, 1 a check failed, 2 bad input.\n";

static const char moe_run_usage[] =
    "usage: tilelab run moe --input x=FILE.npy --input topk_ids=FILE.npy --input topk_weights=FILE.npy\n"
    "                       --output FILE.npy [--device cpu|gpu] [--model NAME|config.json]\n"
    "                       [--dtype DTYPE] [--tp N] [--seed S] [--hidden H] [--width W] [--experts E]\n"
    "Runs the fused MoE layer on your tensors: the CPU reference (--device cpu, the default) or the\n"
    "GPU kernel (--device gpu), and writes its output out [tokens][hidden] float32 to --output.\n"
    "x must be [tokens][hidden] of the model; topk_ids and topk_weights [tokens][top_k]. The weights\n"
    "are seeded random codes of --dtype (--seed; printed), the same ones `check moe --seed` uses.\n";

static const char moe_bench_usage[] =
    "usage: tilelab bench moe [--model NAME] [--dtype DTYPE] [--tokens LIST] [--stage 1|2] [--tp N]\n"
    "                         [--routing SPEC] [--seed S] [--hw PRESET] [--flush write|read]\n"
    "                         [--trace FILE.csv] [--format table|csv|json]\n"
    "Times each stage with the seed's method (256 MB L2 flush and a 20 us busy-wait before each\n"
    "iteration, 20 warm-up, 200 timed, median, graph replay) and prints weight bytes read per second,\n"
    "TFLOP/s and the simulator's prediction on the preset with its relative error. --flush read\n"
    "(default) loads the flush buffer, so the stage pays only for its own traffic; --flush write\n"
    "stores it, and the L2 lines it leaves dirty are written back during the timed stage (about 42 MB\n"
    "on the H200: ~9 us).\n"
    "--trace FILE.csv also runs each stage once more as it is timed, with every GEMM block recording\n"
    "when it started and ended and on which SM (columns tokens,stage,dtype,block,tile,nblock,sm,\n"
    "start_us,end_us,source; times from the moment the stage could start; one row per stage with\n"
    "block -1 gives when its last kernel had ended): where a stage's time goes beyond its bytes;\n"
    "`tilelab draw timeline --trace FILE.csv` draws it.\n"
    "floor_us is the read floor: a plain streaming read of the stage's hbm_bytes on the same device\n"
    "with the same method (kernels/roofline.h), which no kernel that must read them beats by much;\n"
    "x_floor = time_us / floor_us. The preset defaults to h200. --format csv gives the columns\n"
    "`tilelab draw roofline --points` reads (name,flops,hbm_bytes,time_us,intensity,tflops,source).\n"
    MOE_ROUTING_HELP
    "Defaults: deepseek-v3.2, fp8, tokens 1,8,64,256,1024, both stages, random routing, seed 1 (both\n"
    "printed with the table).\n";

static const char moe_sim_usage[] =
    "usage: tilelab sim moe [--hw mi355x] [--model deepseek-v3.2] [--dtype fp8]\n"
    "         [--tokens 1,8,32,64,256,512,1024] [--stage 1|2|both] [--routing random]\n"
    "         [--tp 1] [--shared N] [--seed S] [--kernel tilelab|generic]\n"
    "         [--kernel generic --tile-m 16 --tile-n 128 --cu-gbps G]\n"
    "         [--format table|csv|json]\n"
    "The fused MoE kernel's tile schedule on a hardware preset: one row per token count and stage.\n"
    "  --hw       preset, JSON file, or base,overlay.json,... (measured ceilings)\n"
    "  --model    preset or a model's config.json\n"
    "  --dtype    bf16 | fp8 (block-scaled) | a16w4 | mxfp4 | mxfp8\n"
    "  --routing  random (default) | balanced | zipf:S | trace:FILE (below)\n"
    "  --tp       tensor-parallel split of the expert width\n"
    "  --shared   shared experts every token also routes to (default: the model's n_shared_experts;\n"
    "             the tilelab kernel fuses none, so it models none)\n"
    "  --seed     routing seed for random and zipf (default 1)\n"
    "  --kernel   tilelab (default): the kernels tilelab ships (kernels/moe*.hip as built for the preset's arch:\n"
    "             their tiles, bytes in flight, extra kernels and the weights' dequantization), timed\n"
    "             as `tilelab bench moe` times them (after a read flush): the bench's sim_us column;\n"
    "             the MX types' MXFP8 activations and weights on the scaled f8f6f4 instruction\n"
    "             on gfx950 (E8M0 scales fed to it), elsewhere the weights converted to BF16;\n"
    "             bf16 / fp8 on an sm_90 preset: moe_prefill_s1 / moe_prefill_s2 / moe_prefill_fp8 (wgmma)\n"
    "             where the kernel picks it\n"
    "             (contract/moe.h, tl_moe_uses_prefill), else moe_gemm; TILELAB_MOE_PREFILL=1 or 0\n"
    "             forces one, as it does for the GPU kernel (A/B timing);\n"
    "             generic: the kernel simulator/moe.h describes (mxfp4 / mxfp8 on the scaled f8f6f4\n"
    "             instruction where the arch has it, E8M0 scales fed to it: the seed's MX path,\n"
    "             activations quantized to MX), with these knobs:\n"
    "  --tile-m   rows per tile (16, 32, 64, 128: a multiple of the instruction's M; generic only)\n"
    "  --tile-n   output columns per work item (generic only)\n"
    "  --cu-gbps  the modelled kernel's per-CU HBM stream in GB/s (bytes in flight / latency;\n"
    "             default: the preset's hbm_per_cu_gbps; generic only)\n"
    MOE_ROUTING_HELP
    "Columns: geometry = --kernel; kernel = the kernel the row models (moe_gemm, moe_gemv_down,\n"
    "moe_prefill_s1; generic); padding = rows computed / real rows; k_padding = K rounded to the\n"
    "instruction's K-depth / K;\n"
    "bytes are exact counts; rates are TB/s (hbm_tbps) and TFLOP/s;\n"
    "limiter: hbm (the stream of weights and activations from HBM), loads (memory-bound, and in most\n"
    "of those waves each CU's own load path, not HBM, caps the stream), matrix, padding (issued\n"
    "FLOPs >= 2 x useful), dequant, fixed (launch, prologue, epilogue) or tail (a last wave under\n"
    "half full); see simulator/moe.h for the model and what it ignores.\n";

/* ---- problem lifetime ------------------------------------------------------------------------ */

static void moe_free_case(moe_problem *p)
{
    tl_worklist_free(&p->wl);
    free(p->ref);
    free(p->other);
    free(p->ref_act);
    p->ref = p->other = NULL;
    p->ref_act = NULL;
    p->cur_case = -1;
}

static void moe_free(void *vp)
{
    moe_problem *p = vp;
    if (!p) return;
    tl_ops_trace_abort(&p->trace); /* the run stopped before the last case: no half-written trace */
    moe_free_case(p);
    tl_moe_inputs_free(&p->in);
    if (p->g) tl_moe_gpu_kernels->close(p->g);
    free(p->user_x);
    free(p->user_ids);
    free(p->user_w);
    free(p);
}

/* ---- parse ----------------------------------------------------------------------------------- */

typedef struct {
    const char *model, *tokens, *routing, *fmt, *dtype, *tp, *shared, *hidden, *width, *experts, *topk, *seed,
        *stage, *hw, *flush, *trace, *tile_m, *tile_n, *cu, *kernel;
} moe_args;

/* The option table of one verb: check and run take the shape; bench adds timing; sim the model's. */
static int moe_read_args(int argc, char **argv, tl_op_mode mode, moe_args *a)
{
    static const char *const cmds[] = {"check moe", "bench moe", "sim moe", "run moe"};
    tl_opt opts[32];
    int n = 0;
#define ADD(name, field) opts[n++] = (tl_opt)TL_OPT_V(name, &a->field)
    ADD("--model", model);
    ADD("--dtype", dtype);
    ADD("--tp", tp);
    ADD("--seed", seed);
    if (mode != TL_OP_RUN) {
        ADD("--tokens", tokens);
        ADD("--routing", routing);
    }
    if (mode != TL_OP_SIM) {
        ADD("--hidden", hidden);
        ADD("--width", width);
        ADD("--experts", experts);
        ADD("--topk", topk);
    }
    if (mode == TL_OP_CHECK || mode == TL_OP_SIM) ADD("--shared", shared);
    if (mode == TL_OP_BENCH || mode == TL_OP_SIM) {
        ADD("--stage", stage);
        ADD("--hw", hw);
    }
    if (mode == TL_OP_BENCH) {
        ADD("--flush", flush);
        ADD("--trace", trace);
    }
    if (mode == TL_OP_SIM) {
        ADD("--tile-m", tile_m);
        ADD("--tile-n", tile_n);
        ADD("--cu-gbps", cu);
        ADD("--kernel", kernel);
    }
#undef ADD
    opts[n] = (tl_opt)TL_OPT_END;
    return tl_opts_parse(argc, argv, opts, cmds[mode], NULL, 0, NULL);
}

static int parse_stage(const char *s, int *stage)
{
    if (!s || strcmp(s, "both") == 0) *stage = 0;
    else if (strcmp(s, "1") == 0) *stage = 1;
    else if (strcmp(s, "2") == 0) *stage = 2;
    else return tl_error(TL_EUSAGE, "--stage", "'%s' is not 1, 2 or both", s);
    return 0;
}

/* Defaults per verb: every verb routes at random (k distinct experts a token, uniform, seeded; the
 * realistic case, DESIGN.md), balanced and zipf:S are options; check bf16 with a fresh seed; bench
 * fp8, seed 1; sim fp8 on mi355x, seed 1, modelling the kernel tilelab ships (--kernel tilelab);
 * run bf16, seed 1. The routing and seed are printed with every figure (describe, and sim's and
 * bench's rows). */
static void moe_defaults(tl_op_mode mode, moe_args *a, moe_problem *p)
{
    a->model = "deepseek-v3.2";
    a->routing = "random";
    p->seed = mode == TL_OP_CHECK ? tl_fresh_seed() : 1;
    p->dtype = mode == TL_OP_CHECK || mode == TL_OP_RUN ? TL_MOE_BF16 : TL_MOE_FP8;
    a->hw = mode == TL_OP_SIM ? "mi355x" : mode == TL_OP_BENCH ? tl_ops_bench_hw() : "h200";
    p->tile_m = TL_MOE_TILE_M;
    p->tile_n = 128;
    p->tilelab_kernel = 1;
}

static int moe_parse_sim(const moe_args *a, moe_problem *p)
{
    long shared = tl_model_shared_experts(&p->model); /* the config's (in experts of the routed width), unless --shared */
    int rc = a->shared ? tl_parse_long(a->shared, 0, 16, "--shared", &shared) : 0;
    p->n_shared = (int)shared;
    if (!rc && a->tile_m) rc = tl_parse_int(a->tile_m, 1, 4096, "--tile-m", &p->tile_m);
    if (!rc && a->tile_n) rc = tl_parse_int(a->tile_n, 1, 65536, "--tile-n", &p->tile_n);
    /* the lower bound is a preset's hbm_per_cu_gbps's: below it times overflow to inf */
    if (!rc && a->cu && (tl_parse_double(a->cu, "--cu-gbps", &p->cu_gbps) || p->cu_gbps < 1e-3 || p->cu_gbps > 1e6))
        rc = tl_error(TL_EUSAGE, "--cu-gbps", "'%s' is not a rate in [0.001, 1e6] GB/s", a->cu);
    if (!rc && a->kernel) {
        p->tilelab_kernel = strcmp(a->kernel, "tilelab") == 0;
        if (!p->tilelab_kernel && strcmp(a->kernel, "generic") != 0)
            rc = tl_error(TL_EUSAGE, "--kernel", "'%s' is not tilelab or generic", a->kernel);
    }
    /* the shipped kernel has its own tile and stream: the generic kernel's knobs would be ignored */
    const char *generic_only = a->tile_m ? "--tile-m" : a->tile_n ? "--tile-n" : a->cu ? "--cu-gbps" : NULL;
    if (!rc && p->tilelab_kernel && generic_only)
        rc = tl_error(TL_EUSAGE, generic_only, "sets the generic kernel's geometry; the default kernel (tilelab's "
                      "own) has its own: add --kernel generic");
    if (rc) return rc;
    int E, k, width;
    tl_model_moe_shape(&p->model, &E, &k, &width); /* dense models: one expert every token uses */
    if (width % p->tp) return tl_error(TL_EUSAGE, "--tp", "%d does not divide the expert width %d", p->tp, width);
    long long total_edges = 0;
    for (int i = 0; i < p->n_tokens && !rc; i++)
        rc = tl_ops_add_routed_rows(p->tokens[i], k, p->stage ? 1 : 2, &total_edges);
    return rc;
}

/* check, bench and run: the kernel's shape, with overrides, checked against its contract. */
static int moe_parse_shape(const moe_args *a, moe_problem *p)
{
    long shared = 0, hidden = 0, width = 0, experts = 0, topk = 0;
    int rc = 0;
    if (a->shared) rc = tl_parse_long(a->shared, 0, 16, "--shared", &shared);
    if (!rc && a->hidden) rc = tl_parse_long(a->hidden, 1, 65536, "--hidden", &hidden);
    if (!rc && a->width) rc = tl_parse_long(a->width, 1, 65536, "--width", &width);
    if (!rc && a->experts) rc = tl_parse_long(a->experts, 1, 4096, "--experts", &experts);
    if (!rc && a->topk) rc = tl_parse_long(a->topk, 1, 4096, "--topk", &topk);
    if (!rc && p->model.n_experts < 1)
        rc = tl_error(TL_EUSAGE, "moe", "model '%s' has no routed experts", p->model.name);
    if (rc) return rc;
    if (hidden) p->model.hidden = (int)hidden;
    if (width) p->model.moe_width = (int)width;
    if (experts) p->model.n_experts = (int)experts;
    if (topk) p->model.top_k = (int)topk;
    if (p->model.moe_width % p->tp)
        return tl_error(TL_EUSAGE, "--tp", "%d does not divide the expert width %d", p->tp, p->model.moe_width);
    p->n_shared = (int)shared;
    tl_moe_shape s = {(int)p->tokens[0], p->model.hidden, p->model.moe_width / p->tp, p->model.n_experts,
                      p->model.top_k, (int)shared, p->dtype};
    for (int c = 0; c < p->n_tokens && !rc; c++) {
        s.tokens = (int)p->tokens[c];
        rc = tl_moe_shape_check(&s);
    }
    s.tokens = (int)p->tokens[0];
    p->shape = s;
    return rc;
}

/* --tokens, or the verb's default list (a trace without --tokens: its own count, moe_trace_tokens). */
static int moe_parse_tokens(const moe_args *a, tl_op_mode mode, moe_problem *p)
{
    const char *list = a->tokens ? a->tokens : mode == TL_OP_CHECK ? "1,16,256" : mode == TL_OP_BENCH ?
                       "1,8,64,256,1024" : mode == TL_OP_SIM ? "1,8,32,64,256,512,1024" : "1";
    int rc = tl_parse_long_list(list, 1, mode == TL_OP_SIM ? 2147483647L : 1 << 20, "--tokens", p->tokens,
                                MOE_MAX_CASES, &p->n_tokens);
    if (!rc && p->n_tokens < 1) rc = tl_error(TL_EUSAGE, "--tokens", "no token counts given");
    return rc;
}

/* A trace routing: reads and checks the whole file now (not after minutes of work) for the shape's E
 * and k; its token count is the one case unless --tokens was given, whose counts must not exceed it
 * (M tokens route as the trace's first M lines). */
static int moe_trace_tokens(moe_problem *p, int from_trace)
{
    int E, k, width, n;
    if (p->mode == TL_OP_SIM) tl_model_moe_shape(&p->model, &E, &k, &width);
    else E = p->shape.n_experts, k = p->shape.top_k;
    int rc = tl_routing_trace_tokens(&p->routing, E, k, &n);
    if (rc) return rc;
    p->trace_tokens = n;
    if (from_trace) {
        p->tokens[0] = n;
        p->n_tokens = 1;
        p->shape.tokens = n;
        return 0;
    }
    for (int c = 0; c < p->n_tokens; c++)
        if (p->tokens[c] > n)
            return tl_error(TL_EUSAGE, "--tokens", "%ld tokens, but the trace %s holds %d (M tokens route as its "
                            "first M lines; leave --tokens out to use the whole trace)", p->tokens[c],
                            p->routing.path, n);
    return 0;
}

static int moe_parse(int argc, char **argv, tl_op_mode mode, void **out)
{
    *out = NULL;
    moe_problem *p = calloc(1, sizeof *p);
    if (!p) return tl_error(TL_EFAIL, "moe", "out of memory");
    p->mode = mode;
    p->cur_case = -1;
    moe_args a;
    memset(&a, 0, sizeof a);
    moe_defaults(mode, &a, p);
    long tp = 1;
    int rc = moe_read_args(argc, argv, mode, &a);
    if (!rc && a.dtype) rc = tl_moe_dtype_parse(a.dtype, &p->dtype);
    if (!rc && a.tp) rc = tl_parse_long(a.tp, 1, 1024, "--tp", &tp);
    if (!rc) rc = parse_stage(a.stage, &p->stage);
    p->tp = (int)tp;
    p->trace.path = a.trace;
    if (!rc && a.trace && !*a.trace) rc = tl_error(TL_EUSAGE, "--trace", "needs a file name");
    if (!rc && a.flush) {
        if (strcmp(a.flush, "write") == 0) p->flush_write = 1;
        else if (strcmp(a.flush, "read") != 0)
            rc = tl_error(TL_EUSAGE, "--flush", "unknown flush '%s' (write or read)", a.flush);
    }
    if (!rc && a.seed) rc = tl_ops_parse_seed(a.seed, &p->seed);
    snprintf(p->hw, sizeof p->hw, "%s", a.hw);
    if (!rc && (mode == TL_OP_BENCH || mode == TL_OP_SIM)) { /* bad input is exit 2 before "no GPU" is exit 1 */
        tl_hw hw;
        rc = tl_hw_load(p->hw, &hw);
    }
    if (!rc) rc = tl_model_load(a.model, &p->model);
    if (!rc) rc = tl_routing_parse(a.routing, &p->routing);
    if (!rc) rc = moe_parse_tokens(&a, mode, p);
    if (!rc) rc = mode == TL_OP_SIM ? moe_parse_sim(&a, p) : moe_parse_shape(&a, p);
    if (!rc && p->routing.kind == TL_ROUTE_TRACE) rc = moe_trace_tokens(p, !a.tokens);
    if (!rc && p->trace.path) /* now, not after minutes of timing */
        rc = tl_ops_trace_open(&p->trace, "tokens,stage,dtype,block,tile,nblock,sm,start_us,end_us,source");
    if (rc) {
        moe_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* ---- the user's tensors ---------------------------------------------------------------------- */

/* a must be [rows][cols] (cols 0: any); TL_EUSAGE naming the file otherwise. */
static int expect_shape(const tl_npy *a, const char *path, size_t rows, size_t cols, const char *want)
{
    char got[128];
    tl_npy_shape_str(a, got, sizeof got);
    if (a->ndim != 2 || (rows && a->shape[0] != rows) || (cols && a->shape[1] != cols))
        return tl_error(TL_EUSAGE, path, "shape %s, expected %s", got, want);
    return 0;
}

static int first_nonfinite(const float *v, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return tl_error(TL_EUSAGE, path, "element %zu is %g: inputs must be finite", i, v[i]);
    return 0;
}

static const char *file_of(const tl_op_file *f, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(f[i].name, name) == 0) return f[i].path;
    return NULL;
}

static int load_x(moe_problem *p, const char *path, tl_npy *a)
{
    char want[200];
    snprintf(want, sizeof want, "[tokens, %d] (the hidden size of %s; --hidden to change)", p->model.hidden,
             p->model.name);
    int rc = tl_npy_read(path, a);
    if (!rc) rc = expect_shape(a, path, 0, (size_t)p->model.hidden, want);
    if (!rc && (a->shape[0] < 1 || a->shape[0] > (1u << 20)))
        rc = tl_error(TL_EUSAGE, path, "%zu tokens: 1 to 2^20 are supported", a->shape[0]);
    if (!rc) {
        p->user_x = malloc(a->count * sizeof(float));
        rc = p->user_x ? tl_npy_to_f32(a, path, p->user_x) : tl_error(TL_EFAIL, path, "out of memory");
    }
    if (!rc) rc = first_nonfinite(p->user_x, a->count, path);
    return rc;
}

static int load_routing(moe_problem *p, const char *ids_path, const char *w_path, size_t tokens)
{
    char want[200];
    snprintf(want, sizeof want, "[%zu, %d] (tokens of x, top_k of %s; --topk to change)", tokens, p->model.top_k,
             p->model.name);
    tl_npy ids, w;
    memset(&w, 0, sizeof w);
    int rc = tl_npy_read(ids_path, &ids);
    if (!rc) rc = expect_shape(&ids, ids_path, tokens, (size_t)p->model.top_k, want);
    if (!rc && ids.type != TL_NPY_I32)
        rc = tl_error(TL_EUSAGE, ids_path, "needs int32 expert ids, not %s", tl_npy_type_name(ids.type));
    for (size_t i = 0; !rc && i < ids.count; i++) {
        int32_t e = ((const int32_t *)ids.data)[i];
        if (e < 0 || e >= p->model.n_experts)
            rc = tl_error(TL_EUSAGE, ids_path, "element %zu is expert %d, outside [0, %d)", i, e, p->model.n_experts);
    }
    if (!rc) rc = tl_npy_read(w_path, &w);
    if (!rc) rc = expect_shape(&w, w_path, tokens, (size_t)p->model.top_k, want);
    if (!rc) {
        p->user_w = malloc(w.count * sizeof(float));
        rc = p->user_w ? tl_npy_to_f32(&w, w_path, p->user_w) : tl_error(TL_EFAIL, w_path, "out of memory");
    }
    if (!rc) rc = first_nonfinite(p->user_w, w.count, w_path);
    if (!rc) {
        p->user_ids = ids.data;
        ids.data = NULL;
    }
    tl_npy_free(&ids);
    tl_npy_free(&w);
    return rc;
}

static int moe_load_inputs(void *vp, const tl_op_file *files, int n)
{
    moe_problem *p = vp;
    const char *xp = file_of(files, n, "x"), *ip = file_of(files, n, "topk_ids"), *wp = file_of(files, n, "topk_weights");
    if (!xp || !ip || !wp)
        return tl_error(TL_EUSAGE, "--input", "moe needs x, topk_ids and topk_weights together (tilelab run moe --help)");
    tl_npy x;
    int rc = load_x(p, xp, &x);
    size_t tokens = rc ? 0 : x.shape[0];
    tl_npy_free(&x);
    if (!rc) rc = load_routing(p, ip, wp, tokens);
    if (rc) return rc;
    p->tokens[0] = (long)tokens;
    p->n_tokens = 1;
    p->shape.tokens = (int)tokens;
    return tl_moe_shape_check(&p->shape);
}

/* ---- the cases ------------------------------------------------------------------------------- */

static void moe_describe(const void *vp, FILE *f)
{
    const moe_problem *p = vp;
    char r[1100];
    tl_routing_describe(&p->routing, r, sizeof r);
    if (p->user_x) snprintf(r, sizeof r, "from the --input files");
    if (p->mode == TL_OP_SIM) {
        char ffn[160];
        tl_model_describe(&p->model, p->n_shared, ffn, sizeof ffn);
        fprintf(f, "moe (model): %s, hidden %d, %s / tp %d%s; dtype %s; routing %s; "
                   "seed %llu; preset %s; kernel %s\n", p->model.name, p->model.hidden, ffn, p->tp,
                p->tilelab_kernel && p->n_shared ? " (the shared experts are not in tilelab's kernel: left out)" : "",
                tl_moe_dtype_name(p->dtype), r, (unsigned long long)p->seed, p->hw,
                p->tilelab_kernel ? "tilelab (the kernels tilelab ships: kernels/moe*.hip as built for the preset's arch, "
                                    "dequantization included (the MX types on gfx950: the scaled f8f6f4 MFMA); bf16 / fp8 on an sm_90 preset: moe_prefill_s1 / _s2 / _fp8 where "
                                    "tl_moe_uses_prefill picks it, or as TILELAB_MOE_PREFILL=1/0 forces; column "
                                    "kernel names each row's)"
                                  : "generic (simulator/moe.h, --tile-m/--tile-n/--cu-gbps)");
        char unused[700];
        if (tl_model_unused(&p->model, unused, sizeof unused) > 0 || p->model.quant_method[0])
            fprintf(f, "moe (model): from the config, not modelled: %s\n", unused);
        return;
    }
    fprintf(f, "moe: %s, hidden %d, expert width %d / tp %d = %d, %d experts, top-%d, %d shared; dtype %s; "
               "routing %s; seed %llu\n",
            p->model.name, p->shape.hidden, p->model.moe_width, p->tp, p->shape.width, p->shape.n_experts,
            p->shape.top_k, p->shape.n_shared, tl_moe_dtype_name(p->dtype), r, (unsigned long long)p->seed);
}

static int moe_n_cases(const void *vp) { return ((const moe_problem *)vp)->n_tokens; }

static void moe_case_label(const void *vp, int c, char *label, size_t n)
{
    snprintf(label, n, "M=%ld", ((const moe_problem *)vp)->tokens[c]);
}

static int moe_make_inputs(void *vp, int c)
{
    moe_problem *p = vp;
    moe_free_case(p);
    p->shape.tokens = (int)p->tokens[c];
    int rc = 0;
    if (!p->have_weights) {
        rc = tl_moe_inputs_make(&p->shape, &p->routing, p->seed, &p->in);
        if (rc) return rc;
        p->have_weights = 1;
    } else if (!p->user_x) {
        rc = tl_moe_tokens_make(&p->in, &p->shape, &p->routing, p->seed);
        if (rc) return rc;
    }
    if (p->user_x && (rc = tl_moe_tokens_set(&p->in, &p->shape, p->user_x, p->user_ids, p->user_w))) return rc;
    rc = tl_worklist_build(p->in.topk_ids, p->shape.tokens, p->shape.top_k, p->shape.n_experts, TL_MOE_TILE_M, &p->wl);
    if (!rc) p->cur_case = c;
    return rc;
}

/* The one output: out [tokens][hidden] float32. */
static void moe_set_output(const moe_problem *p, const float *data, tl_op_outputs *out, const char *note)
{
    memset(out, 0, sizeof *out);
    out->n = 1;
    tl_op_output *o = &out->o[0];
    o->name = "out";
    o->type = TL_NPY_F32;
    o->data = data;
    o->ndim = 2;
    o->shape[0] = (size_t)p->shape.tokens;
    o->shape[1] = (size_t)p->shape.hidden;
    o->n = o->shape[0] * o->shape[1];
    o->row_len = (size_t)p->shape.hidden;
    snprintf(o->note, sizeof o->note, "%s", note);
}

static int alloc_out(float **dst, size_t n)
{
    free(*dst);
    *dst = malloc(n * sizeof(float));
    return *dst ? 0 : tl_error(TL_EFAIL, "moe", "out of memory");
}

static int moe_reference(void *vp, tl_op_outputs *out)
{
    moe_problem *p = vp;
    size_t n = (size_t)p->shape.tokens * p->shape.hidden;
    int rc = alloc_out(&p->ref, n);
    if (rc) return rc;
    uint16_t *act = NULL;
    if (tl_moe_gpu_kernels && p->mode == TL_OP_CHECK) { /* the GPU check compares stage 1's output too */
        free(p->ref_act);
        act = p->ref_act = malloc(((size_t)p->wl.n_rows_padded + 1) * (size_t)p->shape.width * sizeof(uint16_t));
        if (!act) return tl_error(TL_EFAIL, "moe", "out of memory");
    }
    rc = tl_moe_reference(&p->in, &p->wl, p->ref, act);
    char note[96];
    snprintf(note, sizeof note, "%d tiles, %d active experts", p->wl.n_tiles, p->wl.active_experts);
    moe_set_output(p, p->ref, out, note);
    return rc;
}

static int moe_naive(void *vp, tl_op_outputs *out)
{
    moe_problem *p = vp;
    int rc = alloc_out(&p->other, (size_t)p->shape.tokens * p->shape.hidden);
    if (rc) return rc;
    moe_set_output(p, p->other, out, "naive loop (double, per-element decode)");
    p->acc = (tl_moe_acc){TL_MOE_ACC_FP32, TL_MOE_ACC_FP32};
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
    q->mode = p->mode;
    q->cur_case = -1;
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
    q->tokens[1] = trace && p->trace_tokens < 7 ? p->trace_tokens : 7;
    q->n_tokens = q->tokens[1] > 1 ? 2 : 1;
    q->trace_tokens = p->trace_tokens;
    q->tp = 1;
    q->routing = p->routing;
    q->seed = p->seed;
    q->n_shared = p->n_shared ? 1 : 0;
    snprintf(q->hw, sizeof q->hw, "%s", p->hw);
    q->tile_m = TL_MOE_TILE_M;
    q->tile_n = 128;
    q->tilelab_kernel = 1;
    tl_moe_shape s = {1, 256, 192, q->model.n_experts, q->model.top_k, q->n_shared, p->dtype};
    q->shape = s;
    *out = q;
    return 0;
}

static int moe_tolerance(const void *vp, int o, tl_tolerance *t)
{
    const moe_problem *p = vp;
    const tl_moe_acc fp32 = {TL_MOE_ACC_FP32, TL_MOE_ACC_FP32};
    return tl_moe_tolerance_acc(&p->shape, p->acc.s1 ? p->acc : fp32, t);
}

/* ---- the model: one function for sim, bench, work and the figures ---------------------------- */

/* The tilelab kernel of sp as kernels/moe.hip runs it: its own pick (tl_moe_tilelab_kernel), or the
 * path TILELAB_MOE_PREFILL=1 / 0 forces where the prefill kernel exists and fits the shape (an
 * sm_90 preset; bf16 or fp8 stage 1 or 2, tl_moe_prefill_fits), as the launcher honours it (moe_prefill_asked),
 * so that the model column of an A/B bench models the kernel that ran. */
static int moe_tilelab_kernel(tl_moe_problem *sp)
{
    const int forced = tl_moe_prefill_forced();
    if (forced == 0) return tl_moe_tilelab_kernel_gemm(sp);
    if (forced == 1 && (sp->dtype == TL_MOE_BF16 || sp->dtype == TL_MOE_FP8) && sp->hw &&
        strncmp(sp->hw->arch, "sm_90", 5) == 0) {
        tl_moe_problem t = *sp;
        if (tl_moe_tilelab_kernel_prefill(&t) == 0) {
            *sp = t;
            return 0;
        }
        tl_clear_error(); /* the shape does not fit it: the launcher runs moe_gemm */
    }
    return tl_moe_tilelab_kernel(sp);
}

/* The problem the model runs on preset hw for `tokens` tokens and `stage` (*sp, whose model is *m,
 * a copy of the problem's): this project's kernel geometry (tilelab_kernel; bench's read or write
 * flush) or the generic kernel with the problem's tile and stream. */
static int moe_modelled(const moe_problem *p, const tl_hw *hw, int tokens, int stage, tl_moe_problem *sp, tl_model *m)
{
    memset(sp, 0, sizeof *sp);
    *m = p->model;
    sp->hw = hw;
    sp->model = m;
    sp->dtype = p->dtype;
    sp->tokens = tokens;
    sp->stage = stage;
    sp->routing = p->routing;
    sp->seed = p->seed;
    sp->tp = p->tp;
    sp->tile_m = p->tile_m;
    sp->tile_n = p->tile_n;
    sp->cu_gbps = p->cu_gbps;
    sp->n_shared = p->tilelab_kernel ? 0 : p->n_shared; /* this project's kernel fuses no shared expert */
    if (!p->tilelab_kernel) return tl_moe_generic_kernel(sp);
    sp->after_flush = p->mode == TL_OP_BENCH && p->flush_write;
    return moe_tilelab_kernel(sp);
}

/* Runs the model of moe_modelled's problem; want_schedule fills r->items (the timeline). r is the
 * caller's to free. */
static int moe_model(const moe_problem *p, const tl_hw *hw, int tokens, int stage, int want_schedule,
                     tl_moe_result *r)
{
    tl_moe_problem sp;
    tl_model m;
    memset(r, 0, sizeof *r);
    int rc = moe_modelled(p, hw, tokens, stage, &sp, &m);
    if (rc) return rc;
    sp.want_schedule = want_schedule;
    return tl_moe_sim(&sp, r);
}

static int moe_n_parts(const void *vp) { return 2; }

/* Stage `stage`'s bytes as the bench counts them for case c: the active experts' weights once
 * (*wbytes), and the activations in and the outputs out (*io; stage 2: the fp32 partials written
 * and read, and the output). Active experts come from the current worklist when case c is made,
 * else from the model's routing (the same routing and seed): `active`. */
static void moe_counted(const moe_problem *p, int c, int stage, int active, double *flops, double *wbytes, double *io)
{
    int E, k, width;
    tl_model_moe_shape(&p->model, &E, &k, &width);
    const int H = p->model.hidden, W = width / p->tp;
    const double M = (double)p->tokens[c], edges = M * k, abytes = tl_moe_act_bytes_per_elem(p->dtype);
    if (p->cur_case == c) active = p->wl.active_experts;
    *wbytes = active * (stage == 1 ? (double)tl_moe_weight_matrix_bytes(p->dtype, 2 * W, H)
                                  : (double)tl_moe_weight_matrix_bytes(p->dtype, H, W));
    *io = stage == 1 ? M * H * abytes + edges * W * 2.0 : edges * W * abytes + edges * H * 4.0 * 2 + M * H * 4.0;
    *flops = 2.0 * edges * H * (stage == 1 ? 2.0 * W : W);
}

/* The kernel the model of `stage` at `tokens` models (its geometry's, without running it; "?"
 * where it cannot be set up, which the row's sim_us has already reported). */
static const char *moe_model_kernel(const moe_problem *p, int tokens, int stage)
{
    tl_hw hw;
    tl_moe_problem sp;
    tl_model m;
    if (tl_hw_load(p->hw, &hw) || moe_modelled(p, &hw, tokens, stage, &sp, &m)) {
        tl_clear_error();
        return "?";
    }
    return sp.kernel ? sp.kernel : "generic"; /* a static string */
}

/* Part `part` (stage part + 1) of case c: the counted work and the model's prediction of it. */
static int moe_work(void *vp, int c, int part, tl_op_work *w)
{
    moe_problem *p = vp;
    const int stage = part + 1;
    tl_hw hw;
    int rc = tl_hw_load(p->hw, &hw);
    tl_moe_result r;
    if (!rc) rc = moe_model(p, &hw, (int)p->tokens[c], stage, 0, &r);
    if (rc) return rc;
    double flops, wbytes, io;
    char part_name[32]; /* tl_op_work.part's size */
    moe_counted(p, c, stage, r.active_experts, &flops, &wbytes, &io);
    snprintf(part_name, sizeof part_name, "stage %d", stage);
    tl_ops_work_set(w, part_name, flops, wbytes + io, r.flops_useful, r.hbm_bytes, r.time_us, r.limiter);
    tl_moe_result_free(&r);
    return 0;
}

static int moe_sim_rows(void *vp, int c, tl_table *t)
{
    moe_problem *p = vp;
    tl_hw hw;
    int rc = tl_hw_load(p->hw, &hw);
    char routing[1100];
    tl_routing_describe(&p->routing, routing, sizeof routing);
    for (int s = 1; s <= 2 && !rc; s++) {
        if (p->stage && p->stage != s) continue;
        tl_moe_result r;
        if ((rc = moe_model(p, &hw, (int)p->tokens[c], s, 0, &r))) break;
        tl_table_row(t);
        tl_table_int(t, s);
        tl_table_str(t, hw.name);
        tl_table_str(t, p->model.name);
        tl_table_str(t, tl_moe_dtype_name(p->dtype));
        tl_table_int(t, r.tokens);
        tl_table_int(t, p->tp);
        tl_table_str(t, routing);
        tl_table_int(t, (long long)p->seed);
        tl_table_str(t, p->tilelab_kernel ? "tilelab" : "generic");
        tl_table_int(t, r.tile_m);
        tl_table_int(t, r.tile_n);
        tl_table_int(t, r.n_shared);
        tl_table_int(t, r.active_experts);
        tl_table_int(t, r.tiles);
        tl_table_numf(t, "%.4g", r.padding);
        tl_table_numf(t, "%.4g", r.k_padding);
        tl_table_numf(t, "%.0f", r.flops_useful);
        tl_table_numf(t, "%.0f", r.flops_issued);
        tl_table_numf(t, "%.0f", r.hbm_bytes);
        tl_table_numf(t, "%.0f", r.weight_bytes);
        tl_table_numf(t, "%.4g", r.intensity);
        tl_table_numf(t, "%.2f", r.time_us);
        tl_table_str(t, r.limiter);
        tl_table_int(t, r.waves);
        tl_table_int(t, r.work_items);
        tl_table_str(t, r.instr.name);
        tl_table_numf(t, "%.2f", r.compute_us);
        tl_table_numf(t, "%.2f", r.memory_us);
        tl_table_numf(t, "%.2f", r.fixed_us);
        tl_table_numf(t, "%.1f", r.flops_useful / (r.time_us * 1e6));
        tl_table_numf(t, "%.3f", r.hbm_bytes / (r.time_us * 1e6));
        tl_table_str(t, r.kernel);
        tl_moe_result_free(&r);
    }
    return rc;
}

/* ---- the GPU side ---------------------------------------------------------------------------- */

static int moe_gpu_built(void) { return tl_moe_gpu_kernels != NULL && tl_gpu_kernels != NULL; }

static int moe_gpu_open(moe_problem *p)
{
    if (p->g) return 0;
    long max_tokens = 0;
    for (int c = 0; c < p->n_tokens; c++) max_tokens = p->tokens[c] > max_tokens ? p->tokens[c] : max_tokens;
    return tl_moe_gpu_kernels->open(&p->in, (int)max_tokens, &p->g);
}

/* The GPU's worklist against tl_worklist_build's, entry by entry. */
static int moe_compare_worklist(moe_problem *p)
{
    const tl_worklist *wl = &p->wl;
    size_t rows = (size_t)wl->n_rows_padded;
    int32_t *ids = malloc((rows ? rows : 1) * sizeof(int32_t));
    int32_t *te = malloc(((size_t)wl->n_tiles + 1) * sizeof(int32_t)), *tr = malloc(((size_t)wl->n_tiles + 1) * sizeof(int32_t));
    int nt = -1, rc = (ids && te && tr) ? 0 : tl_error(TL_EFAIL, "moe", "out of memory");
    if (!rc) rc = tl_moe_gpu_kernels->read(p->g, NULL, ids, rows, te, tr, (size_t)wl->n_tiles, &nt);
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

/* Stage 1's activations against the reference's: TL_EFAIL naming the first difference. */
static int moe_check_act(moe_problem *p, const uint16_t *act, tl_moe_act_diff *d)
{
    int rc = tl_moe_compare_act_acc(&p->shape, &p->wl, p->ref_act, act, p->acc.s1, d);
    if (rc || d->pass) return rc;
    if (d->padding_bad)
        return tl_error(TL_EFAIL, "moe", "stage 1 wrote %zu nonzero values into padding rows (first: row %zu)",
                        d->padding_bad, d->first_pad_row);
    if (d->far)
        return tl_error(TL_EFAIL, "moe", "stage 1: %zu of %zu activations differ by more than a rounding step "
                        "(worst: row %zu column %zu, GPU bf16 0x%04x, reference 0x%04x)", d->far, d->compared,
                        d->worst_row, d->worst_col, d->worst_got, d->worst_ref);
    return tl_error(TL_EFAIL, "moe", "stage 1: %zu of %zu activations one rounding step apart (at most %.3g of them)",
                    d->one_step, d->compared, d->one_step_max);
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
    if (!rc) rc = tl_moe_gpu_kernels->read_act(p->g, act, rows);
    tl_moe_act_diff d;
    if (!rc) rc = moe_check_act(p, act, &d);
    tl_err_metrics m;
    tl_tolerance t2;
    if (!rc) rc = tl_moe_reference_from_act(&p->in, &p->wl, act, ref2);
    if (!rc) rc = tl_compare_rows(ref2, p->other, n, (size_t)p->shape.hidden, &m);
    if (!rc) rc = tl_moe_tolerance_stage2_acc(&p->shape, p->acc.s2, &t2);
    if (!rc && !tl_check_pass(&m, &t2))
        rc = tl_error(TL_EFAIL, "moe", "stage 2 on the GPU's own activations: rel_rms %.3g, worst row %.3g, nan %zu "
                      "(bound %.3g, rows %.3g)", m.rel_rms, m.worst_row, m.nan_count, t2.rel_rms,
                      t2.rel_rms * t2.row_factor);
    if (!rc)
        snprintf(note, cap, "stage 1%s: %zu of %zu activations a rounding step apart (at most %.2g of them); stage 2%s "
                 "on them: rel_rms %.2g (bound %.2g)", p->acc.s1 < TL_MOE_ACC_FP32 ? " (E4M3 wgmma)" : "", d.one_step,
                 d.compared, d.one_step_max, p->acc.s2 < TL_MOE_ACC_FP32 ? " (E4M3 wgmma)" : "", m.rel_rms, t2.rel_rms);
    free(act);
    free(ref2);
    return rc;
}

/* check: two runs (bit-identical), the worklist and the stages checked; run: one run. */
static int moe_gpu(void *vp, tl_op_outputs *out)
{
    moe_problem *p = vp;
    const tl_moe_gpu_api *G = tl_moe_gpu_kernels;
    int rc = moe_gpu_open(p);
    if (rc) return rc;
    size_t n = (size_t)p->shape.tokens * p->shape.hidden;
    const int runs = p->mode == TL_OP_CHECK ? 2 : 1;
    float *again = malloc(n * sizeof(float));
    rc = alloc_out(&p->other, n);
    if (!rc && !again) rc = tl_error(TL_EFAIL, "moe", "out of memory");
    if (!rc) rc = G->set_tokens(p->g, &p->in);
    if (!rc) p->acc = (tl_moe_acc){G->acc_bits(p->g, 1), G->acc_bits(p->g, 2)};
    for (int run = 0; run < runs && !rc; run++) { /* twice: deterministic means bit-identical */
        rc = G->poison(p->g);
        if (!rc) rc = G->run(p->g, TL_MOE_PART_ALL);
        if (!rc) rc = G->read(p->g, run ? again : p->other, NULL, 0, NULL, NULL, 0, NULL);
        if (!rc && run == 0) rc = moe_compare_worklist(p);
    }
    if (!rc && runs == 2 && memcmp(again, p->other, n * sizeof(float)) != 0)
        rc = tl_error(TL_EFAIL, "moe", "two runs on the same inputs differ (the combine must be deterministic)");
    free(again);
    char stages[200] = "", note[256];
    if (!rc && p->mode == TL_OP_CHECK) rc = moe_check_stages(p, stages, sizeof stages);
    snprintf(note, sizeof note, "worklist identical (%d tiles)%s%s%s", p->wl.n_tiles, stages[0] ? "; " : "", stages,
             runs == 2 ? "; 2 runs bit-identical" : "");
    moe_set_output(p, p->other, out, note);
    return rc;
}

/* --trace: one cold run of `stage` block by block, appended to the trace file (opened at parse;
 * moe_bench commits it after the last case). */
static int moe_trace_stage(moe_problem *p, int stage, const tl_bench_opts *o, const char *source)
{
    if (!p->trace.f) return tl_error(TL_EFAIL, p->trace.path, "the trace file is not open");
    tl_moe_trace_block *b = NULL;
    int n = 0;
    double end_us = 0.0;
    int rc = tl_moe_gpu_kernels->trace(p->g, stage == 1 ? TL_MOE_PART_STAGE1 : TL_MOE_PART_STAGE2, o, &b, &n, &end_us);
    if (rc) return rc;
    const char *dt = tl_moe_dtype_name(p->shape.dtype);
    fprintf(p->trace.f, "%d,%d,%s,-1,-1,-1,-1,0,%.3f,%s\n", p->shape.tokens, stage, dt, end_us, source);
    for (int i = 0; i < n; i++)
        fprintf(p->trace.f, "%d,%d,%s,%d,%d,%d,%d,%.3f,%.3f,%s\n", p->shape.tokens, stage, dt, b[i].block, b[i].tile,
                b[i].nblock, b[i].sm, b[i].start_us, b[i].end_us, source);
    free(b);
    return ferror(p->trace.f) ? tl_error(TL_EFAIL, p->trace.path, "write failed") : 0;
}

/* device, date and method, without commas (the trace's source is one CSV field) */
static int moe_bench_where(const moe_problem *p, char *where, size_t n)
{
    int rc = tl_ops_measured_where(where, n);
    if (rc) return rc;
    const size_t len = strlen(where);
    snprintf(where + len, n - len, " (%s flush)", p->flush_write ? "write" : "read");
    return 0;
}

static int moe_bench(void *vp, int c, tl_table *t)
{
    moe_problem *p = vp;
    const tl_gpu_api *D = tl_gpu_kernels;
    char where[300], label[2600], routing[1100];
    int rc = moe_gpu_open(p);
    if (!rc) rc = moe_bench_where(p, where, sizeof where);
    if (rc) return rc;
    /* the row mixes both kinds: time_us and the rates are measured, sim_us and sim_limiter simulated;
     * and it names its routing (a CSV row is read without the description) */
    tl_routing_describe(&p->routing, routing, sizeof routing);
    if (p->user_x) snprintf(routing, sizeof routing, "from the --input files");
    if ((rc = tl_moe_gpu_kernels->set_tokens(p->g, &p->in))) return rc;
    if ((rc = tl_moe_gpu_kernels->run(p->g, TL_MOE_PART_ALL))) return rc;
    const tl_moe_shape *s = &p->shape;
    for (int stage = 1; stage <= 2; stage++) {
        if (p->stage && p->stage != stage) continue;
        tl_bench_opts o;
        D->default_opts(&o);
        o.use_graph = 1;
        o.flush_l2 = p->flush_write ? TL_BENCH_FLUSH_WRITE : TL_BENCH_FLUSH_READ;
        tl_bench_result r;
        rc = tl_moe_gpu_kernels->time(p->g, stage == 1 ? TL_MOE_PART_STAGE1 : TL_MOE_PART_STAGE2, &o, &r);
        if (!rc && p->trace.path) rc = moe_trace_stage(p, stage, &o, where);
        tl_op_work w;
        if (!rc) rc = moe_work(p, c, stage - 1, &w);
        if (rc) return rc;
        double us = r.median_ms * 1e3;
        double wbytes, io, flops; /* flops and wbytes + io are w's: the rates need the weights alone */
        moe_counted(p, c, stage, 0, &flops, &wbytes, &io);
        /* the read floor: a plain read of the stage's bytes, same method (NaN if it cannot run) */
        double floor_us = NAN;
        if (D->read_floor(w.hbm_bytes, &o, &floor_us)) {
            fprintf(stderr, "tilelab: note: no read floor for %s s%d M=%d: %s\n", tl_moe_dtype_name(s->dtype), stage,
                    s->tokens, tl_last_error());
            tl_clear_error();
            floor_us = NAN;
        }
        /* the label names the kernel the model column models (the launcher's pick, or forced) */
        snprintf(label, sizeof label, "measured on %s; routing %s; seed %llu; sim_us simulated on preset %s (%s)", where,
                 routing, (unsigned long long)p->seed, p->hw, moe_model_kernel(p, s->tokens, stage));
        char name[96];
        snprintf(name, sizeof name, "moe %s s%d M=%d%s", tl_moe_dtype_name(s->dtype), stage, s->tokens,
                 p->tp > 1 ? " tp" : "");
        tl_table_row(t);
        tl_table_str(t, name);
        tl_table_int(t, stage);
        tl_table_int(t, s->tokens);
        tl_table_str(t, tl_moe_dtype_name(s->dtype));
        tl_table_numf(t, "%.4g", flops);
        tl_table_numf(t, "%.4g", w.hbm_bytes);
        tl_table_numf(t, "%.2f", us);
        tl_table_numf(t, "%.3g", w.flops / w.hbm_bytes);
        tl_table_numf(t, "%.2f", w.flops / (us * 1e-6) / 1e12);
        tl_table_numf(t, "%.3f", wbytes / (us * 1e-6) / 1e12);
        tl_table_numf(t, "%.3f", w.hbm_bytes / (us * 1e-6) / 1e12);
        tl_table_numf(t, "%.2f", w.model_us);
        tl_table_numf(t, "%.1f", 100.0 * (w.model_us - us) / us);
        tl_table_str(t, w.limiter);
        tl_table_numf(t, "%.2f", r.p10_ms * 1e3);
        tl_table_numf(t, "%.2f", r.p90_ms * 1e3);
        tl_table_numf(t, "%.2f", floor_us);
        tl_table_numf(t, "%.3f", us / floor_us);
        tl_table_str(t, label);
    }
    return c == p->n_tokens - 1 ? tl_ops_trace_commit(&p->trace) : 0;
}

/* ---- the row --------------------------------------------------------------------------------- */

static const char *const moe_test_args[] = {"--hidden", "256", "--width", "192", "--experts", "8", "--topk", "2",
                                            "--tokens", "1,5", "--seed", "7", NULL};
static const char *const moe_bad_tokens[] = {"--tokens", "0", NULL};
static const char *const moe_bad_hidden[] = {"--hidden", "-4", NULL};
static const char *const moe_bad_tp[] = {"--tp", "3", NULL}; /* does not divide the width 2048 */
static const char *const moe_bad_topk[] = {"--experts", "4", "--topk", "5", NULL};
static const char *const moe_bad_dtype[] = {"--dtype", "fp7", NULL};
static const char *const moe_bad_huge[] = {"--tokens", "99999999999", NULL};
static const char *const moe_bench_args[] = {"--tokens", "1,8,64,256,1024", NULL};
static const char *const *const moe_bad_args[] = {moe_bad_tokens, moe_bad_hidden, moe_bad_tp, moe_bad_topk,
                                                   moe_bad_dtype, moe_bad_huge, NULL};

const tl_op tl_op_moe = {
    .name = "moe",
    .summary = "fused MoE: sort, gate+up+SwiGLU, down+weighted combine",
    .dtypes = "bf16,fp8,a16w4,mxfp4,mxfp8",
    .targets = moe_targets,
    .check_usage = moe_check_usage,
    .bench_usage = moe_bench_usage,
    .sim_usage = moe_sim_usage,
    .run_usage = moe_run_usage,
    .inputs = moe_inputs,
    .parse = moe_parse,
    .free_problem = moe_free,
    .load_inputs = moe_load_inputs,
    .describe = moe_describe,
    .n_cases = moe_n_cases,
    .case_label = moe_case_label,
    .make_inputs = moe_make_inputs,
    .reference = moe_reference,
    .naive = moe_naive,
    .naive_cheap = moe_naive_cheap,
    .small_problem = moe_small,
    .gpu_built = moe_gpu_built,
    .gpu = moe_gpu,
    .tolerance = moe_tolerance,
    .n_parts = moe_n_parts,
    .work = moe_work,
    .sim = moe_sim_rows,
    .sim_header = "stage,hw,model,dtype,tokens,tp,routing,seed,geometry,tile_m,tile_n,shared,active_experts,tiles,padding,"
                  "k_padding,flops_useful,flops_issued,hbm_bytes,weight_bytes,intensity,time_us,limiter,waves,"
                  "work_items,instruction,compute_us,memory_us,fixed_us,tflops,hbm_tbps,kernel",
    .bench = moe_bench,
    .bench_header = "name,stage,tokens,dtype,flops,hbm_bytes,time_us,intensity,tflops,weight_tbps,hbm_tbps,"
                    "sim_us,sim_err_pct,sim_limiter,p10_us,p90_us,floor_us,x_floor,source",
    .figures = tl_moe_figures,
    .test_args = moe_test_args,
    .bad_args = moe_bad_args,
    .bench_args = moe_bench_args,
};
