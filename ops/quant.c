/* ops/quant.c: fused activation quantization's row of the op table (core/op.h): the contract's
 * shape (contract/quant.h), the reference and the naive loop (reference/quant.h: numerics/'
 * quantizers), the model (simulator/quant.h) and the kernels' exported table (kernels/quant.h);
 * also `tilelab sim dispatch`, the payload model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/op.h"
#include "../kernels/bench.h"
#include "../kernels/quant.h"
#include "../reference/quant.h"
#include "../simulator/model.h"
#include "../simulator/quant.h"
#include "ops.h"

#define QUANT_MAX_LIST 16
/* The source rank dispatch records name when --src-rank is not given: 0 for run (one rank's own
 * tokens), 3 for check and bench, so that a record whose rank field was never written (zero) cannot
 * pass the compare. */
#define QUANT_SRC_RANK_RUN 0
#define QUANT_SRC_RANK_CHECK 3

typedef struct {
    tl_op_mode mode;
    long rows[QUANT_MAX_LIST], k[QUANT_MAX_LIST];
    int nr, nk;
    tl_quant_shape base;   /* scheme and options; rows and k per case */
    tl_quant_shape shape;  /* the current case's */
    tl_quant_dist dist;
    uint64_t seed;
    int src_rank;          /* dispatch: the source rank every record names (--src-rank) */
    char hw[1100];
    uint16_t *user_x;      /* --input x (NULL: random) */
    int32_t *user_ids;
    float *user_weights;
    /* the current case */
    uint16_t *x;
    int32_t *ids;
    float *weights;
    uint8_t *codes_ref, *codes_other;
    void *scales_ref, *scales_other;
    tl_quant_gpu *g;
} quant_problem;

static const tl_op_input quant_inputs[] = {
    {"x", "activations [rows][K]: bfloat16, or float32 / float16 rounded to bfloat16 (RNE)", 1},
    {"ids", "dispatch: routed experts [rows][topk], int32", 0},
    {"weights", "dispatch: router weights [rows][topk], float32", 0},
    {NULL, NULL, 0},
};

static const tl_op_target quant_targets[] = {
    {"sm_90", TL_OPS_SM90_COMPILED, "NVIDIA H200, 2026-12-02 (every check passes; timed beside torch)", NULL},
    TL_OPS_AMD_TARGETS,
    {NULL, NULL, NULL, NULL},
};

#define QUANT_COMMON_USAGE                                                                                     \
    "  --scheme fp8|fp8-fnuz|mxfp8|mxfp4|fp8-query|dispatch   (default fp8; contract/quant.h says each)\n"   \
    "  --rows LIST    tokens (default 1,4096,16384)     --k LIST  values a row (default 7168,4096;\n"        \
    "                 fp8-query: heads x 128)\n"                                                               \
    "  --ue8m0        fp8 family: power-of-two scales     --rule floor|up  MX scale rule (default floor)\n"  \
    "  --scale-layout row|col   fp8, fp8-fnuz: scales [rows][K/128] or [K/128][rows] (default row)\n"       \
    "  --hadamard     fp8-query: rotate each head first   --topk N  dispatch: experts a token (default 8)\n" \
    "  --dist normal|uniform|laplace|outliers|adversarial (default normal)   --seed S\n"        \
    "  --src-rank R   dispatch: the source rank each record names, int32 in [0, 2^31) (default: 0 for\n"   \
    "                 run, 3 for check and bench, so that a rank field left unwritten cannot pass)\n"

static const char quant_check_usage[] =
    "usage: tilelab check quant [options] [--input x=FILE.npy [--input ids=.. --input weights=..]]\n"
    "                           [--format table|csv|json]\n"
    "The GPU kernel's codes and scales against numerics' quantizer (the reference), exactly, outputs\n"
    "poisoned first, two runs identical; dispatch also unpacks its records on the device. Without a\n"
    "GPU: the reference against the naive scalar loop and the kernels' own arithmetic on the host,\n"
    "exactly, and the round trip (every element within its format's bound).\n" QUANT_COMMON_USAGE;

static const char quant_run_usage[] =
    "usage: tilelab run quant --input x=FILE.npy --output codes=FILE.npy [--output scales=FILE.npy]\n"
    "                         [--scheme fp8|fp8-fnuz|mxfp8|mxfp4|fp8-query] [options] [--device cpu|gpu]\n"
    "       tilelab run quant --scheme dispatch --input x=FILE.npy --input ids=FILE.npy\n"
    "                         --input weights=FILE.npy --output records=FILE.npy [--src-rank R] [options]\n"
    "Quantizes your own activations: codes uint8 [rows][K] (mxfp4 [rows][K/2]) and scales (float32,\n"
    "or uint8 E8M0 codes for MX). dispatch writes one output, records: uint8 [rows][stride], each\n"
    "record the codes, the scales, the routing and the token's return address (its row and the\n"
    "--src-rank), as contract/quant.h lays it out.\n" QUANT_COMMON_USAGE;

static const char quant_bench_usage[] =
    "usage: tilelab bench quant [options] [--hw PRESET] [--format table|csv|json]\n"
    "Times the kernel with the seed's method (L2 flush, 20 warm-up, 200 timed, median, graph replay)\n"
    "beside floor_us, a plain read of the same bytes (read + write) timed the same way, and the\n"
    "model's prediction on the preset (default: the GPU's own, h200 where no preset matches) with its error. Inputs: --dist, seed 1.\n"
    QUANT_COMMON_USAGE;

static const char quant_sim_usage[] =
    "usage: tilelab sim quant [--hw mi355x] [options] [--format table|csv|json]\n"
    "The model (simulator/quant.h): blocks, bytes read and written, FLOPs, the launch-and-one-load\n"
    "floor, time and limiter. The CSV has flops, hbm_bytes and time_us: `tilelab draw roofline\n"
    "--points` places it. The dispatch payload: tilelab sim dispatch.\n" QUANT_COMMON_USAGE;

/* ---- the problem ---- */

static void quant_free_case(quant_problem *p)
{
    free(p->x), free(p->ids), free(p->weights);
    free(p->codes_ref), free(p->codes_other), free(p->scales_ref), free(p->scales_other);
    p->x = NULL, p->ids = NULL, p->weights = NULL;
    p->codes_ref = p->codes_other = NULL;
    p->scales_ref = p->scales_other = NULL;
    if (p->g) tl_quant_gpu_kernels->close(p->g);
    p->g = NULL;
}

static void quant_free(void *vp)
{
    quant_problem *p = vp;
    if (!p) return;
    quant_free_case(p);
    free(p->user_x), free(p->user_ids), free(p->user_weights);
    free(p);
}

/* Case c's shape: c runs over k fastest, then rows. */
static tl_quant_shape case_shape(const quant_problem *p, int c)
{
    tl_quant_shape s = p->base;
    s.rows = p->rows[c / p->nk];
    s.k = p->k[c % p->nk];
    return s;
}

static int parse_flags(quant_problem *p, const char *scheme_s, const char *rule_s, const char *layout_s,
                       const char *topk_s)
{
    int rc = scheme_s ? tl_quant_scheme_id_parse(scheme_s, &p->base.scheme) : 0;
    if (!rc && rule_s) {
        if (strcmp(rule_s, "floor") == 0) p->base.round_up = 0;
        else if (strcmp(rule_s, "up") == 0) p->base.round_up = 1;
        else rc = tl_error(TL_EUSAGE, "--rule", "'%s' is not floor or up", rule_s);
        if (!rc && !tl_quant_is_mx(p->base.scheme))
            rc = tl_error(TL_EUSAGE, "--rule", "only the MX schemes have a scale rule, not %s",
                          tl_quant_scheme_id_name(p->base.scheme));
    }
    if (!rc && layout_s) {
        if (strcmp(layout_s, "row") == 0) p->base.layout = TL_QUANT_SCALES_ROW;
        else if (strcmp(layout_s, "col") == 0) p->base.layout = TL_QUANT_SCALES_COL;
        else rc = tl_error(TL_EUSAGE, "--scale-layout", "'%s' is not row or col", layout_s);
    }
    if (!rc && topk_s) rc = tl_parse_int(topk_s, 1, TL_QUANT_MAX_TOPK, "--topk", &p->base.topk);
    return rc;
}

static int quant_parse(int argc, char **argv, tl_op_mode mode, void **out)
{
    *out = NULL;
    quant_problem *p = calloc(1, sizeof *p);
    if (!p) return tl_error(TL_EFAIL, "quant", "out of memory");
    p->mode = mode;
    p->seed = mode == TL_OP_CHECK ? tl_fresh_seed() : 1;
    p->base.topk = 8;
    const char *rows_s = mode == TL_OP_RUN ? "1" : "1,4096,16384", *k_s = mode == TL_OP_RUN ? "128" : "7168,4096",
               *scheme_s = NULL, *rule_s = NULL, *layout_s = NULL, *topk_s = NULL, *dist_s = NULL, *seed_s = NULL,
               *src_rank_s = NULL,
               *hw_s = mode == TL_OP_SIM ? "mi355x" : mode == TL_OP_BENCH ? tl_ops_bench_hw() : "h200";
    tl_opt opts[] = {TL_OPT_V("--scheme", &scheme_s), TL_OPT_V("--rows", &rows_s), TL_OPT_V("--k", &k_s),
                     TL_OPT_F("--ue8m0", &p->base.ue8m0, 1), TL_OPT_V("--rule", &rule_s),
                     TL_OPT_V("--scale-layout", &layout_s), TL_OPT_F("--hadamard", &p->base.hadamard, 1),
                     TL_OPT_V("--topk", &topk_s), TL_OPT_V("--dist", &dist_s), TL_OPT_V("--seed", &seed_s),
                     TL_OPT_V("--hw", &hw_s), TL_OPT_V("--src-rank", &src_rank_s), TL_OPT_END};
    static const char *const cmds[] = {"check quant", "bench quant", "sim quant", "run quant"};
    int rc = tl_opts_parse(argc, argv, opts, cmds[mode], NULL, 0, NULL);
    if (!rc) rc = tl_parse_long_list(rows_s, 1, TL_QUANT_MAX_ROWS, "--rows", p->rows, QUANT_MAX_LIST, &p->nr);
    if (!rc) rc = tl_parse_long_list(k_s, 1, TL_QUANT_MAX_K, "--k", p->k, QUANT_MAX_LIST, &p->nk);
    if (!rc) rc = parse_flags(p, scheme_s, rule_s, layout_s, topk_s);
    if (!rc && dist_s) rc = tl_quant_dist_parse(dist_s, &p->dist);
    if (!rc && seed_s) rc = tl_ops_parse_seed(seed_s, &p->seed);
    p->src_rank = mode == TL_OP_RUN ? QUANT_SRC_RANK_RUN : QUANT_SRC_RANK_CHECK;
    if (!rc && src_rank_s) rc = tl_parse_int(src_rank_s, 0, INT32_MAX, "--src-rank", &p->src_rank);
    if (!rc && src_rank_s && p->base.scheme != TL_QUANT_DISPATCH)
        rc = tl_error(TL_EUSAGE, "--src-rank", "only --scheme dispatch writes a source rank");
    if (!rc && (p->nr < 1 || p->nk < 1)) rc = tl_error(TL_EUSAGE, cmds[mode], "an empty list");
    snprintf(p->hw, sizeof p->hw, "%s", hw_s);
    tl_hw hw;
    if (!rc) rc = tl_hw_load(p->hw, &hw);
    for (int c = 0; !rc && c < p->nr * p->nk; c++) {
        tl_quant_shape s = case_shape(p, c);
        rc = tl_quant_shape_check(&s);
    }
    if (!rc) p->shape = case_shape(p, 0);
    if (rc) {
        quant_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* A .npy of shape [rows][cols] (cols = 0: any), int32 / float32 when `type` says so, or any float
 * type rounded to bf16 (type = TL_NPY_BF16). */
static int load_matrix(const char *path, tl_npy_type type, size_t rows, size_t cols, tl_npy *a)
{
    int rc = tl_npy_read(path, a);
    if (rc) return rc;
    char got[96];
    tl_npy_shape_str(a, got, sizeof got);
    const int floaty = a->type == TL_NPY_F32 || a->type == TL_NPY_F16 || a->type == TL_NPY_BF16;
    if (a->ndim != 2 || a->shape[0] < 1 || a->shape[1] < 1 || (rows && a->shape[0] != rows) || (cols && a->shape[1] != cols))
        rc = tl_error(TL_EUSAGE, path, "shape %s does not fit (expected [%zu][%zu]; 0: any)", got, rows, cols);
    else if (type == TL_NPY_BF16 ? !floaty : a->type != type)
        rc = tl_error(TL_EUSAGE, path, "type %s, expected %s", tl_npy_type_name(a->type),
                      type == TL_NPY_BF16 ? "a float type" : tl_npy_type_name(type));
    if (rc) tl_npy_free(a);
    return rc;
}

static int to_bf16(tl_npy *a, uint16_t **out)
{
    const size_t n = a->shape[0] * a->shape[1];
    *out = malloc(n * sizeof **out);
    if (!*out) return tl_error(TL_EFAIL, "quant", "out of memory");
    if (a->type == TL_NPY_BF16) {
        memcpy(*out, a->data, n * 2);
        return 0;
    }
    float *f = malloc(n * sizeof *f);
    int rc = f ? tl_npy_to_f32(a, "x", f) : tl_error(TL_EFAIL, "quant", "out of memory");
    for (size_t i = 0; !rc && i < n; i++) (*out)[i] = (uint16_t)tl_code_bf16_from_f32(f[i]);
    free(f);
    return rc;
}

static int quant_load_inputs(void *vp, const tl_op_file *files, int n)
{
    quant_problem *p = vp;
    const char *xp = NULL, *ip = NULL, *wp = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(files[i].name, "x") == 0) xp = files[i].path;
        if (strcmp(files[i].name, "ids") == 0) ip = files[i].path;
        if (strcmp(files[i].name, "weights") == 0) wp = files[i].path;
    }
    const int dispatch = p->base.scheme == TL_QUANT_DISPATCH;
    if (!xp) return tl_error(TL_EUSAGE, "--input", "quant needs x=FILE.npy");
    if (dispatch && (!ip || !wp)) return tl_error(TL_EUSAGE, "--input", "dispatch needs ids=FILE.npy and weights=FILE.npy");
    if (!dispatch && (ip || wp)) return tl_error(TL_EUSAGE, "--input", "only --scheme dispatch takes ids and weights");
    tl_npy a, ids, w;
    int rc = load_matrix(xp, TL_NPY_BF16, 0, 0, &a);
    if (rc) return rc;
    if (a.shape[0] > (size_t)TL_QUANT_MAX_ROWS || a.shape[1] > (size_t)TL_QUANT_MAX_K) {
        tl_npy_free(&a);
        return tl_error(TL_EUSAGE, xp, "[%zu][%zu] activations: at most %ld rows of %ld", a.shape[0], a.shape[1],
                        TL_QUANT_MAX_ROWS, TL_QUANT_MAX_K);
    }
    p->base.rows = (long)a.shape[0];
    p->base.k = (long)a.shape[1];
    rc = tl_quant_shape_check(&p->base);
    if (rc) rc = tl_error(TL_EUSAGE, xp, "%s", tl_last_error());
    if (!rc) rc = to_bf16(&a, &p->user_x);
    tl_npy_free(&a);
    if (!rc && dispatch) {
        rc = load_matrix(ip, TL_NPY_I32, (size_t)p->base.rows, (size_t)p->base.topk, &ids);
        if (!rc) {
            p->user_ids = ids.data;
            rc = load_matrix(wp, TL_NPY_F32, (size_t)p->base.rows, (size_t)p->base.topk, &w);
        }
        if (!rc) p->user_weights = w.data;
        for (size_t i = 0; !rc && i < (size_t)p->base.rows * p->base.topk; i++)
            if (!isfinite(p->user_weights[i])) rc = tl_error(TL_EUSAGE, wp, "weight %zu is not finite", i);
    }
    if (rc) return rc;
    p->rows[0] = p->base.rows, p->k[0] = p->base.k;
    p->nr = p->nk = 1;
    p->shape = case_shape(p, 0);
    return 0;
}

static void quant_describe(const void *vp, FILE *f)
{
    const quant_problem *p = vp;
    const tl_quant_shape *s = &p->base;
    char opts[128] = "";
    if (tl_quant_is_mx(s->scheme)) snprintf(opts, sizeof opts, ", %s rule", s->round_up ? "round-up" : "floor");
    if (s->ue8m0) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ", ue8m0 scales");
    if (s->layout == TL_QUANT_SCALES_COL) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ", column-major scales");
    if (s->hadamard) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ", Hadamard-rotated heads");
    if (s->scheme == TL_QUANT_DISPATCH)
        snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ", top-%d routing in the record", s->topk);
    fprintf(f, "quant: bf16 -> %s (%s codes)%s; inputs %s; seed %llu\n", tl_quant_scheme_id_name(s->scheme),
            tl_numfmt_name(tl_quant_elem(s)), opts, p->user_x ? "from the --input file" : tl_quant_dist_name(p->dist),
            (unsigned long long)p->seed);
}

static int quant_n_cases(const void *vp)
{
    const quant_problem *p = vp;
    return p->nr * p->nk;
}

static void quant_case_label(const void *vp, int c, char *label, size_t n)
{
    tl_quant_shape s = case_shape(vp, c);
    snprintf(label, n, "%ld x %ld", s.rows, s.k);
}

static size_t scales_bytes(const tl_quant_shape *s) { return tl_quant_scale_count(s) * tl_quant_scale_size(s); }

static int quant_make_inputs(void *vp, int c)
{
    quant_problem *p = vp;
    quant_free_case(p);
    p->shape = case_shape(p, c);
    const tl_quant_shape *s = &p->shape;
    const size_t n = (size_t)s->rows * (size_t)s->k, t = (size_t)s->rows * (size_t)s->topk;
    const size_t cb = tl_quant_code_bytes(s), sb = scales_bytes(s) + 16;
    const int dispatch = s->scheme == TL_QUANT_DISPATCH;
    p->x = malloc(n * 2);
    p->codes_ref = malloc(cb), p->codes_other = malloc(cb);
    p->scales_ref = malloc(sb), p->scales_other = malloc(sb);
    if (dispatch) p->ids = malloc(t * 4), p->weights = malloc(t * 4);
    if (!p->x || !p->codes_ref || !p->codes_other || !p->scales_ref || !p->scales_other || (dispatch && (!p->ids || !p->weights)))
        return tl_error(TL_EFAIL, "quant", "out of memory for %ld x %ld", s->rows, s->k);
    if (!p->user_x) return tl_quant_inputs_make(s, p->dist, p->seed + (uint64_t)c, p->x, p->ids, p->weights);
    memcpy(p->x, p->user_x, n * 2);
    if (dispatch) memcpy(p->ids, p->user_ids, t * 4), memcpy(p->weights, p->user_weights, t * 4);
    return 0;
}

/* Outputs: codes (or the records) and scales, both compared bit for bit. */
static void set_outputs(const quant_problem *p, const uint8_t *codes, const void *scales, tl_op_outputs *out,
                        const char *note)
{
    const tl_quant_shape *s = &p->shape;
    memset(out, 0, sizeof *out);
    tl_op_output *o = &out->o[0];
    const int dispatch = s->scheme == TL_QUANT_DISPATCH;
    o->name = dispatch ? "records" : "codes";
    o->type = TL_NPY_U8;
    o->data = codes;
    o->ndim = 2;
    o->shape[0] = (size_t)s->rows;
    o->shape[1] = tl_quant_code_bytes(s) / (size_t)s->rows;
    o->n = tl_quant_code_bytes(s);
    o->exact = 1;
    snprintf(o->note, sizeof o->note, "%s", note);
    out->n = 1;
    if (dispatch) return;
    o = &out->o[1];
    o->name = "scales";
    o->type = tl_quant_is_mx(s->scheme) ? TL_NPY_U8 : TL_NPY_F32;
    o->data = scales;
    o->ndim = 2;
    const size_t count = tl_quant_scale_count(s);
    if (s->scheme == TL_QUANT_FP8_QUERY) o->shape[0] = (size_t)(s->rows + TL_QUANT_QUERY_ROWS - 1) / TL_QUANT_QUERY_ROWS;
    else if (s->layout == TL_QUANT_SCALES_COL) o->shape[0] = (size_t)s->k / TL_QUANT_GROUP;
    else o->shape[0] = (size_t)s->rows;
    o->shape[1] = count / o->shape[0];
    o->n = count;
    o->exact = 1;
    snprintf(o->note, sizeof o->note, "%s", note);
    out->n = 2;
}

static int quant_reference(void *vp, tl_op_outputs *out)
{
    quant_problem *p = vp;
    set_outputs(p, p->codes_ref, p->scales_ref, out, "numerics' quantizer, OpenMP over rows");
    const tl_quant_shape *s = &p->shape;
    return tl_quant_reference(s, p->x, p->ids, p->weights, p->src_rank, p->codes_ref,
                              s->scheme == TL_QUANT_DISPATCH ? NULL : p->scales_ref);
}

/* "round trip: N values within their bounds (worst .. x bound; rel RMS ..), M NaN kept, ..." */
static void roundtrip_note(const tl_quant_roundtrip *r, char *note, size_t n)
{
    snprintf(note, n, "round trip: %zu values within their bounds (worst %.2f x bound; rel RMS %.3g), %zu NaN kept, "
             "%zu in Inf groups, %zu past float32 on the way back", r->bounded, r->worst, r->rel_rms, r->nan_ok,
             r->inf_groups, r->overflow);
}

static int quant_naive(void *vp, tl_op_outputs *out)
{
    quant_problem *p = vp;
    const tl_quant_shape *s = &p->shape;
    void *sc = s->scheme == TL_QUANT_DISPATCH ? NULL : p->scales_other;
    const size_t cb = tl_quant_code_bytes(s), sb = scales_bytes(s);
    uint8_t *kc = malloc(cb);
    void *ks = malloc(sb + 16);
    int rc = kc && ks ? 0 : tl_error(TL_EFAIL, "quant", "out of memory");
    if (!rc) rc = tl_quant_naive(s, p->x, p->ids, p->weights, p->src_rank, p->codes_other, sc);
    if (!rc) rc = tl_quant_host_kernel(s, p->x, p->ids, p->weights, p->src_rank, kc, sc ? ks : NULL);
    if (!rc && (memcmp(kc, p->codes_other, cb) || (sc && memcmp(ks, sc, sb))))
        rc = tl_error(TL_EFAIL, "quant", "the kernels' arithmetic on the host differs from numerics' scalar path");
    free(kc);
    free(ks);
    tl_quant_roundtrip r;
    if (!rc) rc = tl_quant_roundtrip_check(s, p->x, p->ids, p->weights, p->src_rank, p->codes_other, sc, &r);
    char note[256] = "";
    if (!rc) {
        char rt[200];
        roundtrip_note(&r, rt, sizeof rt);
        snprintf(note, sizeof note, "scalar loop; kernels' arithmetic on the host identical; %s", rt);
    }
    set_outputs(p, p->codes_other, p->scales_other, out, note);
    return rc;
}

/* The scalar loop runs about 30 M values/s on one core; the Hadamard query a little slower. */
static int quant_naive_cheap(const void *vp, int c)
{
    tl_quant_shape s = case_shape(vp, c);
    return (double)s.rows * (double)s.k <= 32.0 * 1048576.0;
}

static int quant_small(const void *vp, void **out)
{
    const quant_problem *p = vp;
    quant_problem *q = calloc(1, sizeof *q);
    if (!q) return tl_error(TL_EFAIL, "quant", "out of memory");
    *q = *p;
    q->user_x = NULL, q->user_ids = NULL, q->user_weights = NULL;
    q->x = NULL, q->ids = NULL, q->weights = NULL;
    q->codes_ref = q->codes_other = NULL;
    q->scales_ref = q->scales_other = NULL;
    q->g = NULL;
    q->rows[0] = 1, q->rows[1] = 3, q->rows[2] = 130, q->nr = 3; /* 130: a partial 128-token block */
    q->k[0] = 256, q->k[1] = 1152, q->nk = 2; /* 1152 = 128 x 9: an odd group count (the record's padding) */
    q->shape = case_shape(q, 0);
    *out = q;
    return 0;
}

static int quant_tolerance(const void *vp, int o, tl_tolerance *t)
{
    memset(t, 0, sizeof *t); /* every output is compared bit for bit */
    return 0;
}

static int quant_gpu_built(void) { return tl_quant_gpu_kernels != NULL && tl_gpu_kernels != NULL; }

/* dispatch: the device's unpack against the host's, field by field. */
static int check_gpu_unpack(quant_problem *p, char *note, size_t n)
{
    const tl_quant_shape *s = &p->shape;
    const size_t rows = (size_t)s->rows, k = (size_t)s->k, t = rows * (size_t)s->topk, ng = k / TL_QUANT_GROUP;
    const size_t bytes = rows * k + rows * ng * 4 + t * 8 + rows * 8;
    uint8_t *a = malloc(bytes), *b = malloc(bytes);
    int rc = a && b ? 0 : tl_error(TL_EFAIL, "quant", "out of memory");
    for (int side = 0; side < 2 && !rc; side++) {
        uint8_t *m = side ? b : a;
        float *sc = (float *)(m + rows * k);
        int32_t *ids = (int32_t *)(sc + rows * ng);
        float *w = (float *)(ids + t);
        int32_t *row = (int32_t *)(w + t), *rank = row + rows;
        rc = side ? tl_quant_unpack(s, p->codes_ref, m, sc, ids, w, row, rank)
                  : tl_quant_gpu_kernels->unpack(p->g, m, sc, ids, w, row, rank);
    }
    if (!rc && memcmp(a, b, bytes))
        rc = tl_error(TL_EFAIL, "quant", "the device's unpack of its records differs from the host's");
    if (!rc) snprintf(note, n, "; device unpack identical");
    free(a);
    free(b);
    return rc;
}

static int quant_gpu(void *vp, tl_op_outputs *out)
{
    quant_problem *p = vp;
    const tl_quant_gpu_api *G = tl_quant_gpu_kernels;
    const tl_quant_shape *s = &p->shape;
    const int dispatch = s->scheme == TL_QUANT_DISPATCH;
    const size_t cb = tl_quant_code_bytes(s), sb = scales_bytes(s);
    int rc = p->g ? 0 : G->open(s, &p->g);
    if (!rc) rc = G->upload(p->g, p->x, p->ids, p->weights);
    uint8_t *again = malloc(cb);
    void *again_s = malloc(sb + 16);
    if (!rc && (!again || !again_s)) rc = tl_error(TL_EFAIL, "quant", "out of memory");
    const int runs = p->mode == TL_OP_CHECK ? 2 : 1;
    for (int run = 0; run < runs && !rc; run++) { /* different poison each run: an unwritten byte differs */
        rc = G->poison(p->g, run ? 0x5A : 0xA5);
        if (!rc) rc = G->run(p->g, p->src_rank);
        if (!rc) rc = G->read(p->g, run ? again : p->codes_other, dispatch ? NULL : run ? again_s : p->scales_other);
    }
    if (!rc && runs == 2 && (memcmp(again, p->codes_other, cb) || (!dispatch && memcmp(again_s, p->scales_other, sb))))
        rc = tl_error(TL_EFAIL, "quant", "two runs differ (or a byte was left unwritten: the poison shows)");
    free(again);
    free(again_s);
    char note[160];
    snprintf(note, sizeof note, "%s", runs == 2 ? "2 runs (two poisons) identical" : "one run");
    if (!rc && dispatch && p->mode == TL_OP_CHECK) rc = check_gpu_unpack(p, note + strlen(note), sizeof note - strlen(note));
    set_outputs(p, p->codes_other, p->scales_other, out, note);
    return rc;
}

/* ---- model, work, sim, bench ---- */

static int quant_n_parts(const void *vp) { return 1; }

static int quant_model(const quant_problem *p, const tl_quant_shape *s, tl_quant_result *r)
{
    tl_hw hw;
    int rc = tl_hw_load(p->hw, &hw);
    return rc ? rc : tl_quant_sim(&hw, s, r);
}

/* The work as counted: x read once, codes and scales (or records) written once; the model counts
 * the same bytes. */
static int quant_work(void *vp, int c, int part, tl_op_work *w)
{
    quant_problem *p = vp;
    tl_quant_shape s = case_shape(p, c);
    tl_quant_result r;
    int rc = quant_model(p, &s, &r);
    if (rc) return rc;
    tl_ops_work_set(w, "quantize", r.flops, tl_quant_read_bytes(&s) + tl_quant_write_bytes(&s), r.flops, r.bytes,
                    r.time_us, r.limiter);
    return 0;
}

/* "quant fp8 ue8m0 col 4096x7168": the scheme, its options and the shape (sim and bench rows). */
static void row_name(const tl_quant_shape *s, char *name, size_t n)
{
    snprintf(name, n, "quant %s%s%s%s%s %ldx%ld", tl_quant_scheme_id_name(s->scheme), s->ue8m0 ? " ue8m0" : "",
             s->layout == TL_QUANT_SCALES_COL ? " col" : "", s->round_up ? " up" : "", s->hadamard ? " hadamard" : "",
             s->rows, s->k);
}

static int quant_sim_rows(void *vp, int c, tl_table *t)
{
    quant_problem *p = vp;
    tl_quant_shape s = case_shape(p, c);
    tl_quant_result r;
    int rc = quant_model(p, &s, &r);
    if (rc) return rc;
    char name[96];
    row_name(&s, name, sizeof name);
    tl_table_row(t);
    tl_table_str(t, name);
    tl_table_str(t, p->hw);
    tl_table_str(t, tl_quant_scheme_id_name(s.scheme));
    tl_table_int(t, s.rows);
    tl_table_int(t, s.k);
    tl_table_int(t, r.blocks);
    tl_table_numf(t, "%.0f", r.read_bytes);
    tl_table_numf(t, "%.0f", r.write_bytes);
    tl_table_numf(t, "%.0f", r.bytes);
    tl_table_numf(t, "%.0f", r.flops);
    tl_table_numf(t, "%.2f", r.floor_us);
    tl_table_numf(t, "%.2f", r.time_us);
    tl_table_numf(t, "%.1f", r.bytes / (r.time_us * 1e3));
    tl_table_str(t, r.limiter);
    char src[1200];
    snprintf(src, sizeof src, "simulated on preset %s", p->hw);
    tl_table_str(t, src);
    return 0;
}

static int quant_bench(void *vp, int c, tl_table *t)
{
    quant_problem *p = vp;
    const tl_gpu_api *D = tl_gpu_kernels;
    const tl_quant_gpu_api *G = tl_quant_gpu_kernels;
    int rc = p->g ? 0 : G->open(&p->shape, &p->g);
    if (!rc) rc = G->upload(p->g, p->x, p->ids, p->weights);
    char where[300], label[512];
    if (!rc) rc = tl_ops_measured_where(where, sizeof where);
    if (rc) return rc;
    snprintf(label, sizeof label, "measured on %s; sim_us simulated on preset %.100s", where, p->hw);
    tl_bench_opts o;
    D->default_opts(&o);
    o.use_graph = 1;
    tl_bench_result r;
    tl_op_work w;
    if ((rc = G->time(p->g, p->src_rank, &o, &r)) || (rc = quant_work(p, c, 0, &w))) return rc;
    const double floor_us = tl_ops_read_floor_us(w.hbm_bytes, &o), us = r.median_ms * 1e3;
    char name[96];
    row_name(&p->shape, name, sizeof name);
    tl_table_row(t);
    tl_table_str(t, name);
    tl_table_int(t, p->shape.rows);
    tl_table_int(t, p->shape.k);
    tl_table_numf(t, "%.0f", w.hbm_bytes);
    tl_table_numf(t, "%.0f", w.flops);
    tl_table_numf(t, "%.2f", us);
    tl_table_numf(t, "%.1f", w.hbm_bytes / (us * 1e3));
    tl_table_numf(t, "%.2f", floor_us);
    tl_table_numf(t, "%.3f", us / floor_us);
    tl_table_numf(t, "%.2f", w.model_us);
    tl_table_numf(t, "%.1f", 100.0 * (w.model_us - us) / us);
    tl_table_numf(t, "%.2f", r.p10_ms * 1e3);
    tl_table_numf(t, "%.2f", r.p90_ms * 1e3);
    tl_table_str(t, label);
    return 0;
}

/* ---- tilelab sim dispatch ---- */

static const char dispatch_usage[] =
    "usage: tilelab sim dispatch [--model glm-5] [--ep 8] [--tokens LIST] [--topk K] [--hw mi355x]\n"
    "                            [--format table|csv|json]\n"
    "The MoE dispatch payload (contract/quant.h, simulator/quant.h): bytes a token crosses the fabric\n"
    "as -- BF16 hidden state, or FP8 1x128 / MXFP8 / MXFP4 values + scales + the routing record --\n"
    "and the all-gather's time over the preset's GPU links for an expert-parallel group of --ep GPUs,\n"
    "each sending --tokens tokens (default 1,256,4096). --topk: the model's unless given.\n";

int tl_quant_sim_dispatch(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, dispatch_usage)) return 0;
    const char *model_s = "glm-5", *ep_s = "8", *tok_s = "1,256,4096", *topk_s = NULL, *hw_s = "mi355x", *fmt_s = NULL;
    tl_opt opts[] = {TL_OPT_V("--model", &model_s), TL_OPT_V("--ep", &ep_s), TL_OPT_V("--tokens", &tok_s),
                     TL_OPT_V("--topk", &topk_s), TL_OPT_V("--hw", &hw_s), TL_OPT_V("--format", &fmt_s), TL_OPT_END};
    tl_format fmt;
    long tokens[QUANT_MAX_LIST];
    int nt = 0, ep = 0, topk = 0;
    tl_model m;
    tl_hw hw;
    if (tl_opts_parse(argc, argv, opts, "sim dispatch", NULL, 0, NULL) || tl_parse_format(fmt_s, &fmt) ||
        tl_parse_int(ep_s, 2, 1024, "--ep", &ep) ||
        tl_parse_long_list(tok_s, 1, TL_QUANT_MAX_ROWS, "--tokens", tokens, QUANT_MAX_LIST, &nt) ||
        tl_model_load(model_s, &m) || tl_hw_load(hw_s, &hw))
        return TL_EUSAGE;
    topk = m.top_k;
    if (topk_s && tl_parse_int(topk_s, 1, TL_QUANT_MAX_TOPK, "--topk", &topk)) return TL_EUSAGE;
    if (topk < 1 || topk > TL_QUANT_MAX_TOPK)
        return tl_error(TL_EUSAGE, "sim dispatch", "model %s routes %d experts a token (1..%d; --topk)", m.name, topk,
                        TL_QUANT_MAX_TOPK);
    tl_table *t = tl_table_new("model,hidden,topk,ep,tokens,payload,value_bytes,scale_bytes,routing_bytes,bytes_per_token,"
                               "vs_bf16,sent_bytes,link_gbps,time_us,hw");
    for (int i = 0; i < nt; i++)
        for (int k = 0; k < TL_PAYLOAD_N; k++) {
            tl_dispatch_result r;
            int rc = tl_dispatch_sim(&hw, (tl_payload_kind)k, m.hidden, topk, ep, tokens[i], &r);
            if (rc) {
                tl_table_free(t);
                return rc;
            }
            tl_table_row(t);
            tl_table_str(t, m.name);
            tl_table_int(t, m.hidden);
            tl_table_int(t, topk);
            tl_table_int(t, ep);
            tl_table_int(t, tokens[i]);
            tl_table_str(t, tl_payload_name((tl_payload_kind)k));
            tl_table_numf(t, "%.0f", r.per_token.values);
            tl_table_numf(t, "%.0f", r.per_token.scales);
            tl_table_numf(t, "%.0f", r.per_token.routing);
            tl_table_numf(t, "%.0f", r.per_token.total);
            tl_table_numf(t, "%.3f", r.vs_bf16);
            tl_table_numf(t, "%.0f", r.sent_bytes);
            tl_table_numf(t, "%.1f", hw.link_gbps);
            tl_table_numf(t, "%.2f", r.time_us);
            tl_table_str(t, hw.name);
        }
    char title[300];
    snprintf(title, sizeof title, "MoE dispatch payload, %s (hidden %d, top-%d), all-gather over %d GPUs, simulated on "
             "preset %s (datasheet link bandwidth)", m.name, m.hidden, topk, ep, hw.name);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    return 0;
}

/* ---- the row ---- */

static const char *const quant_test_args[] = {"--scheme", "mxfp4", "--rows", "1,5", "--k", "256", "--rule", "up",
                                              "--dist", "adversarial", "--seed", "5", NULL};
static const char *const quant_bad_scheme[] = {"--scheme", "fp7", NULL};
static const char *const quant_bad_k[] = {"--k", "100", NULL};
static const char *const quant_bad_k0[] = {"--k", "0", NULL};
static const char *const quant_bad_rows[] = {"--rows", "-3", NULL};
static const char *const quant_bad_huge[] = {"--rows", "16777216", "--k", "131072", NULL};
static const char *const quant_bad_rule[] = {"--scheme", "mxfp8", "--rule", "even", NULL};
static const char *const quant_bad_rule_fp8[] = {"--rule", "up", NULL};
static const char *const quant_bad_had[] = {"--scheme", "fp8", "--hadamard", NULL};
static const char *const quant_bad_layout[] = {"--scheme", "mxfp4", "--scale-layout", "col", NULL};
static const char *const quant_bad_ue8m0[] = {"--scheme", "mxfp4", "--ue8m0", NULL};
static const char *const quant_bad_topk[] = {"--scheme", "dispatch", "--topk", "17", NULL};
static const char *const quant_bad_dist[] = {"--dist", "zipf", NULL};
static const char *const *const quant_bad_args[] = {quant_bad_scheme, quant_bad_k,       quant_bad_k0,     quant_bad_rows,
                                                     quant_bad_huge,   quant_bad_rule,    quant_bad_rule_fp8, quant_bad_had,
                                                     quant_bad_layout, quant_bad_ue8m0,   quant_bad_topk,   quant_bad_dist,
                                                     NULL};
static const char *const quant_bench_args[] = {"--rows", "1,4096,16384", "--k", "7168,4096", NULL};

const tl_op tl_op_quant = {
    .name = "quant",
    .summary = "fused bf16 -> FP8 1x128 / MXFP8 / MXFP4 / rotated FP8 query quantization and the MoE dispatch record",
    .dtypes = "fp8,fp8-fnuz,mxfp8,mxfp4,fp8-query,dispatch",
    .targets = quant_targets,
    .check_usage = quant_check_usage,
    .bench_usage = quant_bench_usage,
    .sim_usage = quant_sim_usage,
    .run_usage = quant_run_usage,
    .inputs = quant_inputs,
    .parse = quant_parse,
    .free_problem = quant_free,
    .load_inputs = quant_load_inputs,
    .describe = quant_describe,
    .n_cases = quant_n_cases,
    .case_label = quant_case_label,
    .make_inputs = quant_make_inputs,
    .reference = quant_reference,
    .naive = quant_naive,
    .naive_cheap = quant_naive_cheap,
    .small_problem = quant_small,
    .gpu_built = quant_gpu_built,
    .gpu = quant_gpu,
    .tolerance = quant_tolerance,
    .n_parts = quant_n_parts,
    .work = quant_work,
    .sim = quant_sim_rows,
    .sim_header = "name,hw,scheme,rows,k,blocks,read_bytes,write_bytes,hbm_bytes,flops,floor_us,time_us,gbps,limiter,source",
    .bench = quant_bench,
    .bench_header = "name,rows,k,hbm_bytes,flops,time_us,gbps,floor_us,x_floor,sim_us,sim_err_pct,p10_us,p90_us,source",
    .figures = tl_quant_figures,
    .test_args = quant_test_args,
    .bad_args = quant_bad_args,
    .bench_args = quant_bench_args,
};
