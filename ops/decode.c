/* ops/decode.c: split-KV decode attention's row of the op table (core/op.h): the contract's shape
 * (contract/decode.h: paged GQA decode and dual-scope MLA sparse decode), the reference, sharded
 * reference and naive loop (reference/decode.h), the tolerance (numerics/softmax.h), the model
 * (simulator/decode.h, whose shard pick the launcher uses too) and the kernels' exported table
 * (kernels/decode.h; NULL without a GPU). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/op.h"
#include "../kernels/bench.h"
#include "../kernels/decode.h"
#include "../numerics/softmax.h"
#include "../reference/decode.h"
#include "../simulator/decode.h"
#include "ops.h"

#define DEC_MAX_LIST 16
#define DEC_CHECK_SHARDINGS 4 /* random shardings the no-GPU check merges */

typedef enum { DEC_OTHER_NAIVE, DEC_OTHER_SHARDED, DEC_OTHER_GPU } dec_other;

typedef struct {
    tl_op_mode mode;
    tl_decode_kind kind;
    tl_decode_kv kv;
    tl_decode_dist dist;
    long batch[DEC_MAX_LIST], seq[DEC_MAX_LIST], heads[DEC_MAX_LIST]; /* heads: gqa (paged) or H */
    int nb, ns, nh;
    int kv_heads, mtp, topk, mixed, shards;
    long window;
    float scale;
    int32_t lens_list[TL_DECODE_MAX_BATCH]; /* --lens */
    int n_lens;
    uint64_t seed;
    char hw[1100];
    /* --input files: the arrays and the shape they fix */
    tl_decode_buffers user;
    int32_t *user_lens;
    int have_user;
    long user_pages, user_max_len;
    int user_max_blocks;
    /* the current case */
    tl_decode_shape shape;
    int32_t *lens;
    int cur_case;
    tl_decode_buffers in;
    float *o_ref, *lse_ref, *o_other, *lse_other;
    tl_decode_stats stats, other_stats;
    dec_other other;
    int other_shards;
    tl_decode_gpu *g;
    tl_ops_trace trace; /* bench: --trace FILE (trace.path NULL: none) */
} dec_problem;

static const tl_op_input dec_inputs[] = {
    {"lens", "request lengths [B] int32 (both kinds)", 0},
    {"q", "queries, bfloat16: paged [B][H][128], dual-scope [B][T][H][576]", 0},
    {"k", "paged K pool [pages][16][kv_heads][128]; dual-scope latent cache [B][L][576]; bfloat16 or uint8 E4M3FN", 0},
    {"v", "paged V pool [pages][16][kv_heads][128], as k", 0},
    {"kscale", "float32 scales of an uint8 cache: paged [pages][16][kv_heads], dual-scope [B][L]", 0},
    {"vscale", "paged, uint8 cache: V scales [pages][16][kv_heads] float32", 0},
    {"block_table", "paged: [B][max_blocks] int32 pages (-1 past a request's last block)", 0},
    {"topk", "dual-scope: [B][T][k] int32 positions (-1: none)", 0},
    {NULL, NULL, 0},
};

static const tl_op_target dec_targets[] = {
    {"sm_90", TL_OPS_SM90_COMPILED, "NVIDIA H200 2026-12-02, H100 2026-12-06 (all 144 comparisons pass on both; timed beside SDPA)", NULL},
    TL_OPS_AMD_TARGETS,
    {NULL, NULL, NULL, NULL},
};

#define DEC_COMMON_USAGE                                                                                      \
    "  --kind paged|dual-scope   paged GQA decode (default) or CSA/DSA MLA sparse decode\n"                \
    "  --batch LIST    requests (paged default 8; dual-scope 4)   --seq LIST  positions of each (4096; 8192)\n" \
    "  --lens L1,L2,.. each request's length (0 allowed; replaces --batch and --seq)\n"                      \
    "  --mixed         lengths drawn in [1, seq] (one of them seq; from 4 requests on one 0 and one 1)\n"     \
    "  --kv bf16|fp8   the cache's format (paged default bf16; dual-scope fp8; fp8: E4M3FN, float32 scales)\n" \
    "  paged:       --kv-heads N (1-16, default 8)  --gqa LIST (1-16, default 8)\n"                          \
    "  dual-scope:  --heads LIST (16-128, multiple of 16, default 128)  --mtp T (1-4, default 1)\n"          \
    "               --window W (default 128; 0 none)  --topk K (0-4096, default 2048; 0 none)\n"            \
    "  --scale S       softmax scale (default 1/sqrt(128) or 1/sqrt(576))\n"                                 \
    "  --shards N      shards a row (1-256; default 0: the model's pick, tl_decode_auto_shards)\n"           \
    "  --dist normal|peaked|outliers|edges   inputs (edges: top-k lists of -1, window positions, repeats)\n" \
    "  --seed S\n"                                                                                            \
    "O[r, h] = sum_j softmax_j(scale q[r, h] . K_j) V_j over the row's keys, LSE = log sum_j exp(.); a row\n" \
    "with no key: O = 0, LSE = -inf. See contract/decode.h.\n"

static const char dec_check_usage[] =
    "usage: tilelab check decode [--kind paged|dual-scope] [options] [--input NAME=FILE.npy ...]\n"
    "                            [--format table|csv|json]\n"
    "With a GPU: the kernels (outputs poisoned first) against the one-pass reference in double, O and\n"
    "LSE under the tolerance derived in numerics/softmax.h. Without a GPU: the reference against the\n"
    "naive loop (full score rows), and the sharded reference (the contract's shards and merge) at\n"
    "random shard counts 1-64 against the one-pass reference under the merge's bound.\n" DEC_COMMON_USAGE;

static const char dec_run_usage[] =
    "usage: tilelab run decode [--kind paged|dual-scope] --input lens=L.npy --input q=Q.npy --input k=K.npy\n"
    "                          [--input v=V.npy --input block_table=T.npy] [--input kscale=.. vscale=..]\n"
    "                          [--input topk=I.npy] [--window W] [--mtp T] [--scale S]\n"
    "                          --output o=O.npy --output lse=LSE.npy [--device cpu|gpu]\n"
    "Decode attention on your own tensors (layouts: contract/decode.h): O float32 [B][H][dv] (paged) or\n"
    "[B][T][H][dv] (dual-scope: T = --mtp query tokens a request), LSE float32 [B][H] or [B][T][H].\n";

static const char dec_bench_usage[] =
    "usage: tilelab bench decode [--kind paged|dual-scope] [options] [--hw PRESET] [--format table|csv|json]\n"
    "Times the kernels (both launches; L2 flushed, 20 warm-up, 200 timed, median, graph replay) and\n"
    "reports TB/s of the contract's bytes (each cache position once) beside floor_us (a plain read of\n"
    "the same bytes) and the model's prediction on the preset (default: the GPU's own, h200 where no preset matches) with its error, both at\n"
    "the shard count the launcher ran (its shards column).\n"
    "--trace FILE.csv (dual-scope) also runs each case once more (direct launches, after the same flush),\n"
    "every shard group and merge block recording when it started, had its list and first positions\n"
    "ready, had its first tile in shared memory, finished its tiles and ended (contract/decode.h's\n"
    "TL_DECODE_TRACE_*).\n" DEC_COMMON_USAGE;

static const char dec_sim_usage[] =
    "usage: tilelab sim decode [--kind paged|dual-scope] [options] [--hw mi355x] [--format table|csv|json]\n"
    "The model (simulator/decode.h): shards (picked or given), work-groups and waves, heads a group\n"
    "serves, cache and HBM bytes, the matrix, dequant, HBM and merge times, the longest group, the\n"
    "limiter, TB/s.\n" DEC_COMMON_USAGE;

static void dec_free_case(dec_problem *p)
{
    tl_decode_buffers_free(&p->in);
    free(p->o_ref), free(p->lse_ref), free(p->o_other), free(p->lse_other), free(p->lens);
    p->o_ref = p->lse_ref = p->o_other = p->lse_other = NULL;
    p->lens = NULL;
    if (p->g) tl_decode_gpu_kernels->close(p->g);
    p->g = NULL;
    p->cur_case = -1;
}

static void dec_free(void *vp)
{
    dec_problem *p = vp;
    if (!p) return;
    tl_ops_trace_abort(&p->trace); /* the run stopped before the last case: no half-written trace */
    dec_free_case(p);
    tl_decode_buffers_free(&p->user);
    free(p->user_lens);
    free(p);
}

static int dec_n_cases(const void *vp)
{
    const dec_problem *p = vp;
    return p->nb * p->ns * p->nh;
}

/* Case c's batch, length and heads (heads fastest, then seq, then batch). */
static void case_dims(const dec_problem *p, int c, int *batch, long *seq, int *heads)
{
    *heads = (int)p->heads[c % p->nh];
    *seq = p->seq[(c / p->nh) % p->ns];
    *batch = (int)p->batch[c / (p->nh * p->ns)];
}

/* Request b's length in case (batch, seq): --lens, --mixed (seeded), or seq. */
static int32_t case_len(const dec_problem *p, int batch, long seq, int b)
{
    if (p->have_user) return p->user_lens[b];
    if (p->n_lens) return p->lens_list[b];
    if (!p->mixed || b == 0) return (int32_t)seq;
    if (batch >= 4 && b == 1) return 0;
    if (batch >= 4 && b == 2) return seq > 0 ? 1 : 0;
    tl_rng r;
    tl_rng_seed(&r, p->seed ^ 0x5DEECE66Dull ^ ((uint64_t)b * 0x9E3779B97F4A7C15ull));
    return (int32_t)(1 + (long)tl_rng_below(&r, (uint64_t)(seq > 0 ? seq : 1)));
}

/* Case c's shape over `lens` (filled here, batch entries): the pools sized to the lengths. */
static tl_decode_shape case_shape(const dec_problem *p, int c, int32_t *lens)
{
    int batch, heads;
    long seq;
    case_dims(p, c, &batch, &seq, &heads);
    tl_decode_shape s;
    memset(&s, 0, sizeof s);
    s.kind = p->kind, s.kv = p->kv, s.batch = batch, s.lens = lens, s.scale = p->scale;
    long most = 1, blocks = 0;
    for (int b = 0; b < batch; b++) {
        lens[b] = case_len(p, batch, seq, b);
        if (lens[b] > most) most = lens[b];
        blocks += (lens[b] + TL_DECODE_PAGE - 1) / TL_DECODE_PAGE;
    }
    if (s.kind == TL_DECODE_PAGED) {
        s.kv_heads = p->kv_heads, s.gqa = heads;
        s.max_blocks = p->have_user ? p->user_max_blocks : (int)((most + TL_DECODE_PAGE - 1) / TL_DECODE_PAGE);
        s.pages = p->have_user ? p->user_pages : (blocks > 0 ? blocks : 1);
    } else {
        s.heads = heads, s.mtp = p->mtp, s.window = p->window, s.topk = p->topk;
        s.max_len = p->have_user ? p->user_max_len : most;
    }
    return s;
}

/* Case c's shape with its lengths in a new array (*lens, the caller's to free). TL_EFAIL when out
 * of memory. */
static int case_shape_new(const dec_problem *p, int c, tl_decode_shape *s, int32_t **lens)
{
    int batch, heads;
    long seq;
    case_dims(p, c, &batch, &seq, &heads);
    *lens = malloc((size_t)batch * sizeof **lens);
    if (!*lens) return tl_error(TL_EFAIL, "decode", "out of memory");
    *s = case_shape(p, c, *lens);
    return 0;
}

/* A case's shape checked, on a scratch copy of its lengths. */
static int check_case(const dec_problem *p, int c)
{
    tl_decode_shape s;
    int32_t *lens;
    int rc = case_shape_new(p, c, &s, &lens);
    if (rc) return rc;
    rc = tl_decode_shape_check(&s);
    free(lens);
    return rc;
}

/* The kind's defaults for the options not given. */
typedef struct {
    const char *kind, *batch, *seq, *lens, *kv, *kv_heads, *gqa, *heads, *mtp, *window, *topk, *scale, *shards,
        *dist, *seed, *hw, *trace;
    int mixed;
} dec_args;

static int parse_values(dec_problem *p, const dec_args *a, const char *cmd)
{
    int rc = a->kind ? tl_decode_kind_parse(a->kind, &p->kind) : 0;
    const int paged = p->kind == TL_DECODE_PAGED;
    p->kv = paged ? TL_DECODE_KV_BF16 : TL_DECODE_KV_FP8;
    if (!rc && a->kv) rc = tl_decode_kv_parse(a->kv, &p->kv);
    if (!rc && a->dist) rc = tl_decode_dist_parse(a->dist, &p->dist);
    if (!rc) rc = tl_parse_long_list(a->batch ? a->batch : paged ? "8" : "4", 1, TL_DECODE_MAX_BATCH, "--batch", p->batch,
                                     DEC_MAX_LIST, &p->nb);
    if (!rc) rc = tl_parse_long_list(a->seq ? a->seq : paged ? "4096" : "8192", 0, TL_DECODE_MAX_LEN, "--seq", p->seq,
                                     DEC_MAX_LIST, &p->ns);
    if (!rc && paged && a->heads) rc = tl_error(TL_EUSAGE, "--heads", "paged decode takes --kv-heads and --gqa");
    if (!rc && !paged && (a->gqa || a->kv_heads))
        rc = tl_error(TL_EUSAGE, "--gqa", "dual-scope decode takes --heads (its H heads share one latent KV)");
    if (!rc && paged) rc = tl_parse_long_list(a->gqa ? a->gqa : "8", 1, TL_DECODE_MAX_GQA, "--gqa", p->heads, DEC_MAX_LIST, &p->nh);
    if (!rc && !paged)
        rc = tl_parse_long_list(a->heads ? a->heads : "128", 16, TL_DECODE_MAX_HEADS, "--heads", p->heads, DEC_MAX_LIST, &p->nh);
    if (!rc) rc = tl_parse_int(a->kv_heads ? a->kv_heads : "8", 1, TL_DECODE_MAX_KV_HEADS, "--kv-heads", &p->kv_heads);
    if (!rc) rc = tl_parse_int(a->mtp ? a->mtp : "1", 1, TL_DECODE_MAX_MTP, "--mtp", &p->mtp);
    if (!rc) rc = tl_parse_int(a->topk ? a->topk : "2048", 0, TL_DECODE_MAX_TOPK, "--topk", &p->topk);
    long one[1];
    int n1;
    if (!rc) rc = tl_parse_long_list(a->window ? a->window : "128", 0, TL_DECODE_MAX_WINDOW, "--window", one, 1, &n1);
    if (!rc) p->window = one[0];
    if (!rc) rc = tl_parse_int(a->shards ? a->shards : "0", 0, TL_DECODE_MAX_SHARDS, "--shards", &p->shards);
    double scale = 0;
    if (!rc && a->scale) rc = tl_parse_double(a->scale, "--scale", &scale);
    if (!rc && a->scale && !(isfinite(scale) && scale > 0 && scale < 1e6))
        rc = tl_error(TL_EUSAGE, "--scale", "%s: the softmax scale must be finite and in (0, 1e6)", a->scale);
    p->scale = (float)scale;
    if (!rc && a->seed) rc = tl_ops_parse_seed(a->seed, &p->seed);
    if (!rc && (p->nb < 1 || p->ns < 1 || p->nh < 1)) rc = tl_error(TL_EUSAGE, cmd, "an empty list");
    p->mixed = a->mixed;
    return rc;
}

/* --lens: the lengths of one batch (replaces --batch and --seq). */
static int parse_lens(dec_problem *p, const char *lens_s, int batch_given, int seq_given)
{
    if (!lens_s) return 0;
    if (batch_given || seq_given || p->mixed)
        return tl_error(TL_EUSAGE, "--lens", "gives the batch and every length: not with --batch, --seq or --mixed");
    long tmp[TL_DECODE_MAX_BATCH];
    int rc = tl_parse_long_list(lens_s, 0, TL_DECODE_MAX_LEN, "--lens", tmp, TL_DECODE_MAX_BATCH, &p->n_lens);
    if (!rc && p->n_lens < 1) rc = tl_error(TL_EUSAGE, "--lens", "an empty list");
    if (rc) return rc;
    long most = 0;
    for (int b = 0; b < p->n_lens; b++) {
        p->lens_list[b] = (int32_t)tmp[b];
        if (tmp[b] > most) most = tmp[b];
    }
    p->batch[0] = p->n_lens, p->nb = 1;
    p->seq[0] = most, p->ns = 1;
    return 0;
}

static int dec_parse(int argc, char **argv, tl_op_mode mode, void **out)
{
    *out = NULL;
    dec_problem *p = calloc(1, sizeof *p);
    if (!p) return tl_error(TL_EFAIL, "decode", "out of memory");
    p->mode = mode;
    p->cur_case = -1;
    p->seed = mode == TL_OP_CHECK ? tl_fresh_seed() : 1;
    dec_args a;
    memset(&a, 0, sizeof a);
    a.hw = mode == TL_OP_SIM ? "mi355x" : mode == TL_OP_BENCH ? tl_ops_bench_hw() : "h200";
    tl_opt opts[] = {TL_OPT_V("--kind", &a.kind),     TL_OPT_V("--batch", &a.batch),     TL_OPT_V("--seq", &a.seq),
                     TL_OPT_V("--lens", &a.lens),     TL_OPT_F("--mixed", &a.mixed, 1),  TL_OPT_V("--kv", &a.kv),
                     TL_OPT_V("--kv-heads", &a.kv_heads), TL_OPT_V("--gqa", &a.gqa),     TL_OPT_V("--heads", &a.heads),
                     TL_OPT_V("--mtp", &a.mtp),       TL_OPT_V("--window", &a.window),   TL_OPT_V("--topk", &a.topk),
                     TL_OPT_V("--scale", &a.scale),   TL_OPT_V("--shards", &a.shards),   TL_OPT_V("--dist", &a.dist),
                     TL_OPT_V("--seed", &a.seed),     TL_OPT_V("--hw", &a.hw),           TL_OPT_V("--trace", &a.trace),
                     TL_OPT_END};
    static const char *const cmds[] = {"check decode", "bench decode", "sim decode", "run decode"};
    int rc = tl_opts_parse(argc, argv, opts, cmds[mode], NULL, 0, NULL);
    if (!rc) rc = parse_values(p, &a, cmds[mode]);
    if (!rc) rc = parse_lens(p, a.lens, a.batch != NULL, a.seq != NULL);
    if (!rc && dec_n_cases(p) > 64) rc = tl_error(TL_EUSAGE, cmds[mode], "more than 64 cases (batch x seq x heads)");
    snprintf(p->hw, sizeof p->hw, "%s", a.hw);
    tl_hw hw;
    if (!rc) rc = tl_hw_load(p->hw, &hw);
    for (int c = 0; !rc && c < dec_n_cases(p); c++) rc = check_case(p, c);
    if (!rc && a.trace && mode != TL_OP_BENCH) rc = tl_error(TL_EUSAGE, "--trace", "only bench decode traces a run");
    if (!rc && a.trace && !*a.trace) rc = tl_error(TL_EUSAGE, "--trace", "needs a file name");
    if (!rc && a.trace && p->kind != TL_DECODE_DUAL_SCOPE)
        rc = tl_error(TL_EUSAGE, "--trace", "records the dual-scope kernel only (--kind dual-scope)");
    p->trace.path = a.trace;
    if (!rc && a.trace) rc = tl_ops_trace_open(&p->trace, TL_DECODE_TRACE_HEADER); /* now, not after the timing */
    if (rc) {
        dec_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* ---- --input files ---- */

typedef struct {
    const char *path[8];
    tl_npy a[8];
} dec_files;

enum { F_LENS, F_Q, F_K, F_V, F_KSCALE, F_VSCALE, F_TABLE, F_TOPK };
static const char *const file_names[8] = {"lens", "q", "k", "v", "kscale", "vscale", "block_table", "topk"};

/* Reads file i when given; checks its rank and (for fixed-type ones) its type. */
static int read_file(dec_files *f, int i, int ndim, int type)
{
    if (!f->path[i]) return 0;
    int rc = tl_npy_read(f->path[i], &f->a[i]);
    if (rc) return rc;
    char got[96];
    tl_npy_shape_str(&f->a[i], got, sizeof got);
    if (f->a[i].ndim != ndim || (type >= 0 && f->a[i].type != (tl_npy_type)type))
        return tl_error(TL_EUSAGE, f->path[i], "%s %s: %s must be %s with %d dimensions", tl_npy_type_name(f->a[i].type),
                        got, file_names[i], type >= 0 ? tl_npy_type_name((tl_npy_type)type) : "an array", ndim);
    return 0;
}

static int need(const dec_files *f, int i, const char *kind)
{
    return f->path[i] ? 0 : tl_error(TL_EUSAGE, "--input", "%s decode needs %s=FILE.npy", kind, file_names[i]);
}

/* Whether file i has the given leading dims (-1: any) */
static int dims_are(const tl_npy *a, long d0, long d1, long d2, long d3)
{
    const long want[4] = {d0, d1, d2, d3};
    for (int i = 0; i < a->ndim && i < 4; i++)
        if (want[i] >= 0 && (long)a->shape[i] != want[i]) return 0;
    return 1;
}

static int shapes_disagree(const dec_files *f, int i, const char *want)
{
    char got[96];
    tl_npy_shape_str(&f->a[i], got, sizeof got);
    return tl_error(TL_EUSAGE, f->path[i], "%s has shape %s, expected %s", file_names[i], got, want);
}

/* The cache's format from k's type (bfloat16 or uint8), and scales needed with uint8. */
static int cache_format(dec_problem *p, dec_files *f)
{
    const tl_npy_type t = f->a[F_K].type;
    if (t != TL_NPY_BF16 && t != TL_NPY_U8)
        return tl_error(TL_EUSAGE, f->path[F_K], "the cache must be bfloat16 or uint8 E4M3FN codes, not %s", tl_npy_type_name(t));
    p->kv = t == TL_NPY_U8 ? TL_DECODE_KV_FP8 : TL_DECODE_KV_BF16;
    if (p->kind == TL_DECODE_PAGED && f->path[F_V] && f->a[F_V].type != t)
        return tl_error(TL_EUSAGE, f->path[F_V], "v must have k's type (%s)", tl_npy_type_name(t));
    if (p->kv == TL_DECODE_KV_FP8) {
        int rc = need(f, F_KSCALE, "an fp8 cache:");
        if (!rc && p->kind == TL_DECODE_PAGED) rc = need(f, F_VSCALE, "an fp8 cache:");
        return rc;
    }
    return 0;
}

static int load_paged(dec_problem *p, dec_files *f, long B)
{
    int rc = need(f, F_V, "paged");
    if (!rc) rc = need(f, F_TABLE, "paged");
    if (!rc) rc = read_file(f, F_Q, 3, TL_NPY_BF16);
    if (!rc) rc = read_file(f, F_K, 4, -1);
    if (!rc) rc = read_file(f, F_V, 4, -1);
    if (!rc) rc = read_file(f, F_TABLE, 2, TL_NPY_I32);
    if (!rc) rc = cache_format(p, f);
    if (!rc) rc = read_file(f, F_KSCALE, 3, TL_NPY_F32);
    if (!rc) rc = read_file(f, F_VSCALE, 3, TL_NPY_F32);
    if (rc) return rc;
    const tl_npy *k = &f->a[F_K], *q = &f->a[F_Q];
    const long pages = (long)k->shape[0], kvh = (long)k->shape[2];
    if (!dims_are(k, -1, TL_DECODE_PAGE, -1, TL_DECODE_PAGED_DIM) || kvh < 1 || kvh > TL_DECODE_MAX_KV_HEADS)
        return shapes_disagree(f, F_K, "[pages][16][kv_heads 1-16][128]");
    if (!dims_are(&f->a[F_V], pages, TL_DECODE_PAGE, kvh, TL_DECODE_PAGED_DIM)) return shapes_disagree(f, F_V, "k's shape");
    if (!dims_are(q, B, -1, TL_DECODE_PAGED_DIM, -1) || q->shape[1] % kvh || q->shape[1] / kvh > TL_DECODE_MAX_GQA ||
        q->shape[1] < 1)
        return shapes_disagree(f, F_Q, "[B][kv_heads x gqa (1-16)][128] for the lens' B");
    if (!dims_are(&f->a[F_TABLE], B, -1, -1, -1) || f->a[F_TABLE].shape[1] < 1 ||
        f->a[F_TABLE].shape[1] > (size_t)(TL_DECODE_MAX_LEN / TL_DECODE_PAGE))
        return shapes_disagree(f, F_TABLE, "[B][max_blocks 1-65536]");
    for (int i = F_KSCALE; i <= F_VSCALE; i++)
        if (f->path[i] && !dims_are(&f->a[i], pages, TL_DECODE_PAGE, kvh, -1)) return shapes_disagree(f, i, "[pages][16][kv_heads]");
    p->kv_heads = (int)kvh;
    p->heads[0] = (long)q->shape[1] / kvh;
    p->user_pages = pages;
    p->user_max_blocks = (int)f->a[F_TABLE].shape[1];
    return 0;
}

static int load_dual(dec_problem *p, dec_files *f, long B)
{
    int rc = read_file(f, F_Q, 4, TL_NPY_BF16);
    if (!rc) rc = read_file(f, F_K, 3, -1);
    if (!rc) rc = cache_format(p, f);
    if (!rc) rc = read_file(f, F_KSCALE, 2, TL_NPY_F32);
    if (!rc) rc = read_file(f, F_TOPK, 3, TL_NPY_I32);
    if (rc) return rc;
    const tl_npy *q = &f->a[F_Q], *k = &f->a[F_K];
    const long T = (long)q->shape[1], H = (long)q->shape[2];
    if (!dims_are(q, B, -1, -1, TL_DECODE_MLA_QK_DIM) || T < 1 || T > TL_DECODE_MAX_MTP || H < 16 ||
        H > TL_DECODE_MAX_HEADS || H % 16)
        return shapes_disagree(f, F_Q, "[B][T 1-4][H 16-128, a multiple of 16][576] for the lens' B");
    if (!dims_are(k, B, -1, TL_DECODE_MLA_QK_DIM, -1) || k->shape[1] < 1 || k->shape[1] > (size_t)TL_DECODE_MAX_LEN)
        return shapes_disagree(f, F_K, "[B][L 1-1048576][576]");
    if (f->path[F_KSCALE] && !dims_are(&f->a[F_KSCALE], B, (long)k->shape[1], -1, -1)) return shapes_disagree(f, F_KSCALE, "[B][L]");
    if (f->path[F_TOPK] && (!dims_are(&f->a[F_TOPK], B, T, -1, -1) || f->a[F_TOPK].shape[2] > TL_DECODE_MAX_TOPK))
        return shapes_disagree(f, F_TOPK, "[B][T][k <= 4096]");
    p->mtp = (int)T;
    p->heads[0] = H;
    p->topk = f->path[F_TOPK] ? (int)f->a[F_TOPK].shape[2] : 0;
    p->user_max_len = (long)k->shape[1];
    return 0;
}

/* Moves the arrays read into p->user (the files' memory changes owner). */
static void keep_arrays(dec_problem *p, dec_files *f)
{
    void **dst[8] = {(void **)&p->user_lens, (void **)&p->user.q, &p->user.k, &p->user.v, (void **)&p->user.k_scale,
                     (void **)&p->user.v_scale, (void **)&p->user.block_table, (void **)&p->user.topk};
    for (int i = 0; i < 8; i++)
        if (f->path[i]) *dst[i] = f->a[i].data, f->a[i].data = NULL;
}

static int dec_load_inputs(void *vp, const tl_op_file *files, int n)
{
    dec_problem *p = vp;
    dec_files f;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++)
            if (strcmp(files[i].name, file_names[j]) == 0) f.path[j] = files[i].path;
    const char *kind = tl_decode_kind_name(p->kind);
    int rc = need(&f, F_LENS, kind);
    if (!rc) rc = need(&f, F_Q, kind);
    if (!rc) rc = need(&f, F_K, kind);
    if (!rc) rc = read_file(&f, F_LENS, 1, TL_NPY_I32);
    const long B = rc ? 0 : (long)f.a[F_LENS].shape[0];
    if (!rc && (B < 1 || B > TL_DECODE_MAX_BATCH)) rc = shapes_disagree(&f, F_LENS, "[B] with B in [1, 1024]");
    if (!rc) rc = p->kind == TL_DECODE_PAGED ? load_paged(p, &f, B) : load_dual(p, &f, B);
    if (!rc) {
        keep_arrays(p, &f);
        p->have_user = 1;
        p->batch[0] = B, p->nb = 1, p->ns = 1, p->nh = 1, p->n_lens = 0, p->mixed = 0;
        p->seq[0] = 0;
        for (long b = 0; b < B; b++) p->seq[0] = p->user_lens[b] > p->seq[0] ? p->user_lens[b] : p->seq[0];
        p->lens = malloc((size_t)B * sizeof *p->lens);
        if (!p->lens) rc = tl_error(TL_EFAIL, "decode", "out of memory");
    }
    if (!rc) {
        p->shape = case_shape(p, 0, p->lens);
        rc = tl_decode_shape_check(&p->shape);
        tl_decode_inputs in = tl_decode_buffers_view(&p->user);
        if (!rc) rc = tl_decode_inputs_check(&p->shape, &in);
        if (!rc) {
            const char *bad = NULL;
            const size_t nq = tl_decode_q_elems(&p->shape);
            for (size_t i = 0; i < nq && !bad; i++)
                if ((p->user.q[i] & 0x7F80u) == 0x7F80u) bad = "q holds Inf or NaN";
            if (bad) rc = tl_error(TL_EUSAGE, f.path[F_Q], "%s (outside the contract)", bad);
        }
    }
    for (int i = 0; i < 8; i++) tl_npy_free(&f.a[i]);
    return rc;
}

/* ---- describing, cases, inputs ---- */

static void dec_describe(const void *vp, FILE *f)
{
    const dec_problem *p = vp;
    char sh[64], what[200];
    if (p->shards) snprintf(sh, sizeof sh, "%d shards a row", p->shards);
    else snprintf(sh, sizeof sh, "the shards the model picks on %.20s", p->hw);
    if (p->kind == TL_DECODE_PAGED)
        snprintf(what, sizeof what, "paged GQA decode, %d KV heads, head dim 128, pages of 16", p->kv_heads);
    else
        snprintf(what, sizeof what, "dual-scope MLA decode, 576/512 dims, T = %d, window %ld, top-%d", p->mtp, p->window,
                 p->topk);
    fprintf(f, "decode: %s; %s cache; lengths %s; %s; inputs %s; seed %llu\n", what, tl_decode_kv_name(p->kv),
            p->have_user ? "from the --input file" : p->n_lens ? "from --lens" : p->mixed ? "mixed in [1, seq]" : "all seq",
            sh, p->have_user ? "from the --input files" : tl_decode_dist_name(p->dist), (unsigned long long)p->seed);
}

static void dec_case_label(const void *vp, int c, char *label, size_t n)
{
    const dec_problem *p = vp;
    int batch, heads;
    long seq;
    case_dims(p, c, &batch, &seq, &heads);
    const char *L = p->mixed || p->n_lens || p->have_user ? "L<=" : "L=";
    if (p->kind == TL_DECODE_PAGED) snprintf(label, n, "B=%d %s%ld gqa=%d", batch, L, seq, heads);
    else snprintf(label, n, "B=%d %s%ld H=%d", batch, L, seq, heads);
}

static int alloc_outputs(dec_problem *p)
{
    const size_t no = tl_decode_o_elems(&p->shape), nl = tl_decode_lse_elems(&p->shape);
    p->o_ref = malloc(no * sizeof(float)), p->o_other = malloc(no * sizeof(float));
    p->lse_ref = malloc(nl * sizeof(float)), p->lse_other = malloc(nl * sizeof(float));
    return p->o_ref && p->o_other && p->lse_ref && p->lse_other
               ? 0
               : tl_error(TL_EFAIL, "decode", "out of memory for %zu outputs", no);
}

/* The user's arrays copied into the case's buffers. */
static void copy_user(dec_problem *p)
{
    const tl_decode_shape *s = &p->shape;
    const size_t e = (size_t)tl_decode_kv_bytes_per_elem(s), cache = tl_decode_cache_elems(s);
    memcpy(p->in.q, p->user.q, tl_decode_q_elems(s) * 2);
    memcpy(p->in.k, p->user.k, cache * e);
    if (p->user.v) memcpy(p->in.v, p->user.v, cache * e);
    if (p->user.k_scale) memcpy(p->in.k_scale, p->user.k_scale, tl_decode_scale_elems(s) * sizeof(float));
    if (p->user.v_scale) memcpy(p->in.v_scale, p->user.v_scale, tl_decode_scale_elems(s) * sizeof(float));
    if (p->user.block_table) memcpy(p->in.block_table, p->user.block_table, tl_decode_table_elems(s) * sizeof(int32_t));
    if (p->user.topk) memcpy(p->in.topk, p->user.topk, tl_decode_topk_elems(s) * sizeof(int32_t));
}

static int dec_make_inputs(void *vp, int c)
{
    dec_problem *p = vp;
    dec_free_case(p);
    int rc = case_shape_new(p, c, &p->shape, &p->lens);
    if (rc) return rc;
    rc = tl_decode_buffers_alloc(&p->shape, &p->in);
    if (!rc) rc = alloc_outputs(p);
    if (!rc && p->have_user) copy_user(p);
    else if (!rc) rc = tl_decode_make(&p->shape, p->dist, p->seed, &p->in);
    if (!rc) p->cur_case = c;
    return rc;
}

/* ---- outputs ---- */

static void set_outputs(const dec_problem *p, const float *o, const float *lse, tl_op_outputs *out, const char *note)
{
    const tl_decode_shape *s = &p->shape;
    memset(out, 0, sizeof *out);
    out->n = 2;
    const int paged = s->kind == TL_DECODE_PAGED, H = tl_decode_heads(s), dv = tl_decode_v_dim(s);
    tl_op_output *x = &out->o[0];
    x->name = "o";
    x->type = TL_NPY_F32;
    x->data = o;
    x->ndim = paged ? 3 : 4;
    size_t d = 0;
    x->shape[d++] = (size_t)s->batch;
    if (!paged) x->shape[d++] = (size_t)s->mtp;
    x->shape[d++] = (size_t)H;
    x->shape[d++] = (size_t)dv;
    x->n = tl_decode_o_elems(s);
    x->row_len = (size_t)dv;
    snprintf(x->note, sizeof x->note, "%s", note);
    x = &out->o[1];
    x->name = "lse";
    x->type = TL_NPY_F32;
    x->data = lse;
    x->ndim = paged ? 2 : 3;
    d = 0;
    x->shape[d++] = (size_t)s->batch;
    if (!paged) x->shape[d++] = (size_t)s->mtp;
    x->shape[d++] = (size_t)H;
    x->n = tl_decode_lse_elems(s);
    snprintf(x->note, sizeof x->note, "%s", note);
}

/* The reference's work: sum of keys x H x (qk + dv) multiply-adds. */
static double ref_work(const tl_decode_shape *s)
{
    return tl_decode_flops(s, NULL) / 2.0;
}

/* FP8 against bf16 (same values, same seed): O's relative RMS, a property of the format reported
 * beside the check (not in its bound). -1 when it is not measured (user inputs, big cases). */
static double fp8_vs_bf16(const dec_problem *p)
{
    if (p->kv != TL_DECODE_KV_FP8 || p->have_user || ref_work(&p->shape) > 1e9) return -1;
    tl_decode_shape s = p->shape;
    s.kv = TL_DECODE_KV_BF16;
    tl_decode_buffers b;
    float *o = malloc(tl_decode_o_elems(&s) * sizeof(float)), *lse = malloc(tl_decode_lse_elems(&s) * sizeof(float));
    double rel = -1;
    if (o && lse && !tl_decode_buffers_alloc(&s, &b)) {
        tl_decode_inputs in = tl_decode_buffers_view(&b);
        tl_err_metrics m;
        if (!tl_decode_make(&s, p->dist, p->seed, &b) && !tl_decode_reference(&s, &in, o, lse, NULL) &&
            !tl_compare(o, p->o_ref, tl_decode_o_elems(&s), &m))
            rel = m.rel_rms;
        tl_decode_buffers_free(&b);
    }
    tl_clear_error();
    free(o), free(lse);
    return rel;
}

static int dec_reference(void *vp, tl_op_outputs *out)
{
    dec_problem *p = vp;
    tl_decode_inputs in = tl_decode_buffers_view(&p->in);
    int rc = tl_decode_reference(&p->shape, &in, p->o_ref, p->lse_ref, &p->stats);
    char note[200];
    const double rel = rc ? -1 : fp8_vs_bf16(p);
    if (rel >= 0) snprintf(note, sizeof note, "one pass, double; fp8 KV vs bf16 KV of the same values: O rel RMS %.3g "
                           "(the format's error, not in the bound)", rel);
    else snprintf(note, sizeof note, "one pass, double");
    set_outputs(p, p->o_ref, p->lse_ref, out, note);
    return rc;
}

/* The RMS of the finite LSEs of the reference. */
static double lse_rms(const dec_problem *p)
{
    double s2 = 0, n = 0;
    for (size_t i = 0; i < tl_decode_lse_elems(&p->shape); i++)
        if (isfinite(p->lse_ref[i])) s2 += (double)p->lse_ref[i] * p->lse_ref[i], n++;
    return n > 0 ? sqrt(s2 / n) : 0;
}

/* The tolerances of O and LSE for the comparison last made (numerics/softmax.h). */
static int tolerances(const dec_problem *p, tl_tolerance *o, tl_tolerance *lse)
{
    const tl_decode_stats *st = p->other == DEC_OTHER_SHARDED ? &p->other_stats : &p->stats;
    tl_softmax_tol_spec spec = {tl_decode_qk_dim(&p->shape), p->stats.max_keys, 1, 0, p->stats.s_rms, lse_rms(p),
                                st->lse_max > p->stats.lse_max ? st->lse_max : p->stats.lse_max, 0};
    if (p->other != DEC_OTHER_NAIVE) spec.shards = p->other_shards;
    if (p->other == DEC_OTHER_GPU) spec.acc_bits = TL_SOFTMAX_ACC_FP32, spec.pv_bits = TL_SOFTMAX_PV_BF16X2;
    return tl_softmax_tolerance(&spec, o, lse);
}

/* One sharding of the reference against the one-pass reference: 1 when it passes. */
static int sharded_passes(dec_problem *p, int shards, double *worst)
{
    tl_decode_inputs in = tl_decode_buffers_view(&p->in);
    if (tl_decode_reference_sharded(&p->shape, &in, shards, p->o_other, p->lse_other, &p->other_stats)) return -1;
    p->other = DEC_OTHER_SHARDED;
    p->other_shards = shards;
    tl_tolerance to, tl;
    tl_err_metrics mo, ml;
    if (tolerances(p, &to, &tl) || tl_compare(p->o_ref, p->o_other, tl_decode_o_elems(&p->shape), &mo) ||
        tl_compare(p->lse_ref, p->lse_other, tl_decode_lse_elems(&p->shape), &ml))
        return -1;
    const double r = fmax(mo.rel_rms / to.rel_rms, ml.rel_rms / tl.rel_rms);
    if (r > *worst) *worst = r;
    return tl_check_pass(&mo, &to) && tl_check_pass(&ml, &tl);
}

/* The sharded reference at 1, 64 and random shard counts in between, against the one-pass
 * reference under the merge's bound; the list and the worst ratio to the bound go to note. */
static int check_shardings(dec_problem *p, char *note, size_t n)
{
    tl_rng r;
    tl_rng_seed(&r, p->seed ^ 0xC0FFEEull);
    int counts[DEC_CHECK_SHARDINGS] = {1, 64, 0, 0};
    for (int i = 2; i < DEC_CHECK_SHARDINGS; i++) counts[i] = 2 + (int)tl_rng_below(&r, 62);
    double worst = 0;
    char list[64] = "";
    for (int i = 0; i < DEC_CHECK_SHARDINGS; i++) {
        const int ok = sharded_passes(p, counts[i], &worst);
        if (ok < 0) return TL_EFAIL;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? ", " : "", counts[i]);
        if (!ok)
            return tl_error(TL_EFAIL, "decode", "the sharded reference at %d shards is outside the merge's bound "
                            "(%.2g x) against the one-pass reference", counts[i], worst);
    }
    snprintf(note, n, "sharded reference at %s shards within the merge's bound (worst %.2g x)", list, worst);
    return 0;
}

static int dec_naive(void *vp, tl_op_outputs *out)
{
    dec_problem *p = vp;
    char note[300], shard_note[200];
    int rc = check_shardings(p, shard_note, sizeof shard_note);
    tl_decode_inputs in = tl_decode_buffers_view(&p->in);
    if (!rc) rc = tl_decode_naive(&p->shape, &in, p->o_other, p->lse_other);
    p->other = DEC_OTHER_NAIVE;
    snprintf(note, sizeof note, "naive full score rows, double; %s", rc ? "" : shard_note);
    set_outputs(p, p->o_other, p->lse_other, out, note);
    return rc;
}

/* The naive loop decodes every element of every key per head: about 2^27 of them in a few seconds
 * (and the check runs the sharded reference 4 times). */
static int dec_naive_cheap(const void *vp, int c)
{
    const dec_problem *p = vp;
    tl_decode_shape s;
    int32_t *lens;
    if (case_shape_new(p, c, &s, &lens)) {
        tl_clear_error(); /* out of memory: not cheap */
        return 0;
    }
    const double work = ref_work(&s);
    free(lens);
    return work <= 134217728.0;
}

static int dec_small(const void *vp, void **out)
{
    const dec_problem *p = vp;
    dec_problem *q = calloc(1, sizeof *q);
    if (!q) return tl_error(TL_EFAIL, "decode", "out of memory");
    *q = *p;
    memset(&q->user, 0, sizeof q->user);
    memset(&q->in, 0, sizeof q->in);
    q->user_lens = q->lens = NULL;
    q->o_ref = q->lse_ref = q->o_other = q->lse_other = NULL;
    q->g = NULL;
    q->have_user = 0;
    q->cur_case = -1;
    q->nb = q->ns = q->nh = 1;
    q->heads[0] = p->heads[0];
    q->mixed = 0;
    /* lengths 0, 1, under a page, a few pages and over the window; neither a multiple of a tile */
    static const int32_t paged_lens[] = {0, 1, 17, 100, 333};
    static const int32_t dual_lens[] = {0, 1, 150, 700};
    if (p->kind == TL_DECODE_PAGED) {
        q->n_lens = 5;
        memcpy(q->lens_list, paged_lens, sizeof paged_lens);
        q->kv_heads = p->kv_heads < 2 ? p->kv_heads : 2;
    } else {
        q->n_lens = 4;
        memcpy(q->lens_list, dual_lens, sizeof dual_lens);
        q->heads[0] = 16;
        q->topk = p->topk < 200 ? p->topk : 200;
    }
    q->batch[0] = q->n_lens;
    q->seq[0] = q->n_lens == 5 ? 333 : 700;
    *out = q;
    return 0;
}

static int dec_tolerance(const void *vp, int o, tl_tolerance *t)
{
    const dec_problem *p = vp;
    tl_tolerance to, tl;
    int rc = tolerances(p, &to, &tl);
    if (!rc) *t = o == 0 ? to : tl;
    return rc;
}

/* ---- the model ---- */

/* The model on the row's preset at `shards` (0: its pick). */
static int dec_model_at(const dec_problem *p, const tl_decode_shape *s, const int32_t *topk, int shards,
                        tl_decode_model_result *r)
{
    tl_hw hw;
    int rc = tl_hw_load(p->hw, &hw);
    return rc ? rc : tl_decode_model(&hw, s, topk, shards, r);
}

static int dec_model(const dec_problem *p, const tl_decode_shape *s, const int32_t *topk, tl_decode_model_result *r)
{
    return dec_model_at(p, s, topk, p->shards, r);
}

/* ---- the GPU ---- */

static int dec_gpu_built(void) { return tl_decode_gpu_kernels != NULL && tl_gpu_kernels != NULL; }

/* The shard count to run: --shards, or 0 (the launcher's own pick on its device). */
static int dec_gpu(void *vp, tl_op_outputs *out)
{
    dec_problem *p = vp;
    const tl_decode_gpu_api *G = tl_decode_gpu_kernels;
    if (!G) return tl_error(TL_EFAIL, "decode", "this build has no decode kernels");
    tl_decode_inputs in = tl_decode_buffers_view(&p->in);
    int used = 0, rc = 0;
    if (!p->g) rc = G->open(&p->shape, &p->g);
    if (!rc) rc = G->upload(p->g, &in);
    if (!rc) rc = G->poison(p->g);
    if (!rc) rc = G->run(p->g, p->shards, &used);
    if (!rc) rc = G->read(p->g, p->o_other, p->lse_other);
    p->other = DEC_OTHER_GPU;
    p->other_shards = used > 0 ? used : 1;
    char note[96];
    snprintf(note, sizeof note, "%d shard%s, float32 online softmax%s", p->other_shards, p->other_shards == 1 ? "" : "s",
             p->other_shards > 1 ? " and merge" : "");
    set_outputs(p, p->o_other, p->lse_other, out, note);
    return rc;
}

static int dec_n_parts(const void *vp) { return 1; }

/* The counted work (the contract's) beside the model's, on case c (random top-k lists taken as the
 * estimate: the bench's inputs are made after). */
static int dec_work(void *vp, int c, int part, tl_op_work *w)
{
    dec_problem *p = vp;
    memset(w, 0, sizeof *w);
    tl_decode_shape s;
    int32_t *lens;
    int rc = case_shape_new(p, c, &s, &lens);
    if (rc) return rc;
    const int32_t *topk = p->cur_case == c && s.kind == TL_DECODE_DUAL_SCOPE ? p->in.topk : NULL;
    tl_decode_model_result r;
    rc = dec_model(p, &s, topk, &r);
    if (!rc) /* both launches: the merge writes O and LSE (the partials are in r.hbm_bytes when they leave the caches) */
        tl_ops_work_set(w, "decode", tl_decode_flops(&s, topk), tl_decode_bytes(&s, topk), r.flops,
                        r.hbm_bytes + (r.shards > 1 ? 4.0 * (tl_decode_o_elems(&s) + tl_decode_lse_elems(&s)) : 0),
                        r.time_us, r.limiter);
    free(lens);
    return rc;
}

static double mean_len(const tl_decode_shape *s)
{
    double n = 0;
    for (int b = 0; b < s->batch; b++) n += s->lens[b];
    return n / s->batch;
}

static int dec_sim_rows(void *vp, int c, tl_table *t)
{
    dec_problem *p = vp;
    tl_decode_shape s;
    int32_t *lens;
    int rc = case_shape_new(p, c, &s, &lens);
    if (rc) return rc;
    tl_decode_model_result r;
    rc = dec_model(p, &s, NULL, &r);
    if (!rc) {
        tl_table_row(t);
        tl_table_str(t, p->hw);
        tl_table_str(t, tl_decode_kind_name(s.kind));
        tl_table_str(t, tl_decode_kv_name(s.kv));
        tl_table_int(t, s.batch);
        tl_table_numf(t, "%.0f", mean_len(&s));
        tl_table_int(t, tl_decode_heads(&s));
        tl_table_int(t, r.group_heads);
        tl_table_int(t, r.shards);
        tl_table_int(t, r.groups);
        tl_table_numf(t, "%.2f", r.waves);
        tl_table_numf(t, "%.0f", r.flops);
        tl_table_numf(t, "%.0f", r.kv_bytes);
        tl_table_numf(t, "%.0f", r.hbm_bytes);
        tl_table_numf(t, "%.0f", r.partial_bytes);
        tl_table_numf(t, "%.2f", r.hbm_us);
        tl_table_numf(t, "%.2f", r.mma_us);
        tl_table_numf(t, "%.2f", r.dequant_us);
        tl_table_numf(t, "%.2f", r.group_us);
        tl_table_numf(t, "%.2f", r.merge_us);
        tl_table_numf(t, "%.2f", r.fixed_us);
        tl_table_numf(t, "%.2f", r.time_us);
        tl_table_numf(t, "%.3f", r.tbps);
        tl_table_str(t, r.limiter);
    }
    free(lens);
    return rc;
}

/* One traced run of the current case at `shards`, its blocks appended to the trace file. */
static int dec_trace_case(dec_problem *p, int shards, const tl_bench_opts *o, const char *source)
{
    tl_decode_trace_block *b = NULL;
    long n = 0;
    double end_us = 0.0;
    int rc = tl_decode_gpu_kernels->trace(p->g, shards, o, &b, &n, &end_us);
    if (rc) return rc;
    const tl_decode_shape *s = &p->shape;
    for (long i = 0; i < n; i++) {
        fprintf(p->trace.f, "%s,%s,%d,%d,%ld,%d,%d,%s,%ld,%ld,%d,%d,%d", tl_decode_kind_name(s->kind),
                tl_decode_kv_name(s->kv), s->batch, tl_decode_heads(s), s->window, s->topk, shards,
                b[i].merge ? "merge" : "shard", b[i].block, b[i].row, b[i].hblock, b[i].shard, b[i].sm);
        for (int k = 0; k < TL_DECODE_TRACE_POINTS; k++) fprintf(p->trace.f, ",%.3f", b[i].t_us[k]);
        fprintf(p->trace.f, ",%.3f,%s\n", end_us, source);
    }
    free(b);
    return ferror(p->trace.f) ? tl_error(TL_EFAIL, p->trace.path, "write failed") : 0;
}

static int dec_bench(void *vp, int c, tl_table *t)
{
    dec_problem *p = vp;
    const tl_gpu_api *D = tl_gpu_kernels;
    const tl_decode_gpu_api *G = tl_decode_gpu_kernels;
    if (!G || !D) return tl_error(TL_EFAIL, "bench decode", "this build has no decode kernels");
    tl_decode_inputs in = tl_decode_buffers_view(&p->in);
    int rc = 0;
    if (!p->g) rc = G->open(&p->shape, &p->g);
    if (!rc) rc = G->upload(p->g, &in);
    char where[300], label[512];
    if (!rc) rc = tl_ops_measured_where(where, sizeof where);
    if (rc) return rc;
    snprintf(label, sizeof label, "measured on %s; sim_us simulated on preset %.100s", where, p->hw);
    tl_bench_opts o;
    D->default_opts(&o);
    o.use_graph = 1; /* two small launches: graph replay, as the figures are taken */
    tl_bench_result r;
    tl_op_work w;
    tl_decode_model_result m;
    int used = 0; /* the shards the launcher runs (its own pick on this device when --shards is 0) */
    if ((rc = G->run(p->g, p->shards, &used)) || (rc = G->time(p->g, p->shards, &o, &r)) || (rc = dec_work(p, c, 0, &w)) ||
        (rc = dec_model_at(p, &p->shape, p->in.topk, used > 0 ? used : p->shards, &m)))
        return rc;
    const double floor_us = tl_ops_read_floor_us(w.hbm_bytes, &o), us = r.median_ms * 1e3;
    char name[96];
    dec_case_label(p, c, name, sizeof name);
    tl_table_row(t);
    tl_table_str(t, name);
    tl_table_str(t, tl_decode_kind_name(p->shape.kind));
    tl_table_str(t, tl_decode_kv_name(p->shape.kv));
    tl_table_int(t, p->shape.batch);
    tl_table_numf(t, "%.0f", mean_len(&p->shape));
    tl_table_int(t, tl_decode_heads(&p->shape));
    tl_table_int(t, m.shards); /* what ran; the model is asked at the same count */
    tl_table_numf(t, "%.0f", w.flops);
    tl_table_numf(t, "%.0f", w.hbm_bytes);
    tl_table_numf(t, "%.2f", us);
    tl_table_numf(t, "%.3f", w.hbm_bytes / (us * 1e6));
    tl_table_numf(t, "%.2f", floor_us);
    tl_table_numf(t, "%.2f", m.time_us);
    tl_table_numf(t, "%.1f", 100.0 * (m.time_us - us) / us);
    tl_table_str(t, m.limiter);
    tl_table_numf(t, "%.2f", r.p10_ms * 1e3);
    tl_table_numf(t, "%.2f", r.p90_ms * 1e3);
    tl_table_str(t, label);
    if (!p->trace.f) return 0;
    rc = dec_trace_case(p, m.shards, &o, where);
    if (!rc && c == dec_n_cases(p) - 1) rc = tl_ops_trace_commit(&p->trace);
    return rc;
}

static const char *const dec_test_args[] = {"--batch", "3", "--seq", "40", "--gqa", "1,4", "--kv-heads", "2",
                                            "--kv", "fp8", "--mixed", "--seed", "7", NULL};
static const char *const dec_bad_kind[] = {"--kind", "ragged", NULL};
static const char *const dec_bad_gqa[] = {"--gqa", "17", NULL};
static const char *const dec_bad_batch[] = {"--batch", "0", NULL};
static const char *const dec_bad_seq[] = {"--seq", "-5", NULL};
static const char *const dec_bad_kv[] = {"--kv", "fp4", NULL};
static const char *const dec_bad_heads[] = {"--kind", "dual-scope", "--heads", "24", NULL};
static const char *const dec_bad_mtp[] = {"--kind", "dual-scope", "--mtp", "5", NULL};
static const char *const dec_bad_topk[] = {"--kind", "dual-scope", "--topk", "9999", NULL};
static const char *const dec_bad_mix[] = {"--kind", "dual-scope", "--gqa", "4", NULL};
static const char *const dec_bad_lens[] = {"--lens", "10,-1", NULL};
static const char *const dec_bad_lens2[] = {"--lens", "10", "--batch", "2", NULL};
static const char *const dec_bad_shards[] = {"--shards", "257", NULL};
static const char *const dec_bad_scale[] = {"--scale", "nan", NULL};
static const char *const dec_bad_huge[] = {"--batch", "1024", "--seq", "1048576", "--kv-heads", "16", NULL};
static const char *const dec_bad_seed[] = {"--seed", "-1", NULL};
static const char *const *const dec_bad_args[] = {dec_bad_kind,  dec_bad_gqa,   dec_bad_batch, dec_bad_seq,   dec_bad_kv,
                                                  dec_bad_heads, dec_bad_mtp,   dec_bad_topk,  dec_bad_mix,   dec_bad_lens,
                                                  dec_bad_lens2, dec_bad_shards, dec_bad_scale, dec_bad_huge, dec_bad_seed,
                                                  NULL};
static const char *const dec_bench_args[] = {"--batch", "1,32", "--seq", "16384", "--kv-heads", "16", "--gqa", "1", NULL};

const tl_op tl_op_decode = {
    .name = "decode",
    .summary = "split-KV decode attention: paged GQA and dual-scope MLA sparse, one exact LSE merge",
    .dtypes = "bf16,fp8",
    .targets = dec_targets,
    .check_usage = dec_check_usage,
    .bench_usage = dec_bench_usage,
    .sim_usage = dec_sim_usage,
    .run_usage = dec_run_usage,
    .inputs = dec_inputs,
    .parse = dec_parse,
    .free_problem = dec_free,
    .load_inputs = dec_load_inputs,
    .describe = dec_describe,
    .n_cases = dec_n_cases,
    .case_label = dec_case_label,
    .make_inputs = dec_make_inputs,
    .reference = dec_reference,
    .naive = dec_naive,
    .naive_cheap = dec_naive_cheap,
    .small_problem = dec_small,
    .gpu_built = dec_gpu_built,
    .gpu = dec_gpu,
    .tolerance = dec_tolerance,
    .n_parts = dec_n_parts,
    .work = dec_work,
    .sim = dec_sim_rows,
    .sim_header = "hw,kind,kv,batch,mean_len,heads,group_heads,shards,groups,waves,flops,kv_bytes,hbm_bytes,partial_bytes,"
                  "hbm_us,mma_us,dequant_us,group_us,merge_us,fixed_us,time_us,tbps,limiter",
    .bench = dec_bench,
    .bench_header = "name,kind,kv,batch,mean_len,heads,shards,flops,hbm_bytes,time_us,tbps,floor_us,sim_us,sim_err_pct,"
                    "sim_limiter,p10_us,p90_us,source",
    .figures = tl_decode_figures,
    .test_args = dec_test_args,
    .bad_args = dec_bad_args,
    .bench_args = dec_bench_args,
};
