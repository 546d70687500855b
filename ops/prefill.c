/* ops/prefill.c: causal prefill attention's row of the op table (core/op.h): the contract's shape
 * (contract/prefill.h), the reference and naive loop (reference/prefill.h), the tolerance
 * (numerics/softmax.h plus O's bf16 store), the model (simulator/prefill.h) and the kernel's
 * exported table (kernels/prefill.h; NULL without a GPU).
 *
 * Checking long sequences: the reference costs seq^2 / 2 x H x (dqk + dv) multiply-adds in double,
 * ~4e12 at 32K on Mistral-7B; above PF_FULL_MADDS the check compares three blocks of rows (all
 * heads): the first 128 rows, 128 rows from the middle and the last 256 (the longest rows, the last
 * partial tile), and scans every element of the kernel's O and LSE for NaN (poisoned first). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/op.h"
#include "../kernels/bench.h"
#include "../kernels/prefill.h"
#include "../numerics/codes.h"
#include "../numerics/formats.h"
#include "../numerics/softmax.h"
#include "../reference/prefill.h"
#include "../simulator/prefill.h"
#include "ops.h"

#define PF_MAX_LIST 16
#define PF_FULL_MADDS 4e10 /* the reference on every row up to this (seconds on 16 cores) */
#define PF_NAIVE_MADDS 2e8 /* the single-threaded naive loop up to this */
#define PF_MAX_RANGES 3

typedef struct {
    tl_op_mode mode;
    char shape_name[64];
    tl_prefill_shape base; /* heads, dims, dtype, scale; seq per case */
    long seq[PF_MAX_LIST];
    int ns;
    tl_rotation rot;
    tl_prefill_dist dist;
    uint64_t seed;
    char hw[1100];
    tl_prefill_tiling tile; /* --tile (bench): block_m 0 means the contract's */
    /* --input files (float32 after reading) */
    float *user_q, *user_k, *user_v;
    long user_seq;
    /* the current case */
    tl_prefill_shape shape;
    int cur_case;
    void *q, *k, *v;
    float *qs, *ks, *vs;
    float *o_full, *lse_full; /* the reference's (full-size, checked rows written) */
    uint16_t *o_gpu;
    float *lse_gpu;
    int nr;
    long lo[PF_MAX_RANGES], hi[PF_MAX_RANGES];
    long rows; /* rows checked */
    float *o_ref, *lse_ref, *o_other, *lse_other; /* the checked rows, compact: [rows][H][dv], [H][rows] */
    double s_rms;
    int other_gpu; /* the last comparison: 1 kernel, 0 naive */
    int acc_bits;  /* the kernel's Q.K accumulator (tl_prefill_gpu_acc_bits) */
    tl_prefill_gpu *g;
} pf_problem;

static const tl_op_input pf_inputs[] = {
    {"q", "queries [seq][H][dqk], float32, float16 or bfloat16 (quantized to --dtype here)", 1},
    {"k", "keys [seq][Hkv][dqk], as q", 1},
    {"v", "values [seq][Hkv][dv], as q", 1},
    {NULL, NULL, 0},
};

static const tl_op_target pf_targets[] = {
    {"sm_90", TL_OPS_SM90_COMPILED, "NVIDIA H200 2026-12-02, H100 2026-12-06 (sm_90a wgmma kernel: checks pass on both; timed beside SDPA)", NULL},
    TL_OPS_AMD_TARGETS,
    {NULL, NULL, NULL, NULL},
};

#define PF_COMMON_USAGE                                                                                      \
    "  --shape mistral-7b|qwen3-8b|deepseek-v2-lite|HxD|HxKVxD|HxKVxDQKxDV   heads and dims (default\n"    \
    "                  mistral-7b; HxKVxDQKxDV: q.k and value dims apart, as MLA's)\n"                          \
    "  --seq LIST      tokens (default 1024; 1..1M)   --dtype bf16|fp8 (default bf16; fp8: E4M3FN, one\n"     \
    "                  float32 scale per 128 tokens per head)\n"                                             \
    "  --rotate none|hadamard|random   rotate Q and K (the same orthogonal R) before quantizing\n"           \
    "  --dist normal|outliers          inputs (outliers: a few K channels x 10-100)   --seed S\n"            \
    "  --scale S       softmax scale (default 1/sqrt(dqk))\n"                                                 \
    "O[i, h] = sum_{j <= i} softmax_j(scale Q[i, h] . K[j, g]) V[j, g], g = h / (H / Hkv); LSE natural log.\n" \
    "See contract/prefill.h.\n"

static const char pf_check_usage[] =
    "usage: tilelab check prefill [options] [--input q=Q.npy --input k=K.npy --input v=V.npy]\n"
    "                             [--format table|csv|json]\n"
    "With a GPU: the kernel (outputs poisoned first; every element must be written) against the float64\n"
    "reference on the same quantized inputs, O (bf16) and LSE under the bound of numerics/softmax.h with\n"
    "P's rounding (bf16, or the FP8 rule's E4M3) and O's bf16 store added; above 4e10 multiply-adds the\n"
    "first 128, a middle 128 and the last 256 rows are compared. Without a GPU: the reference against\n"
    "the naive loop on a small problem.\n" PF_COMMON_USAGE;

static const char pf_run_usage[] =
    "usage: tilelab run prefill [--shape S] [--dtype bf16|fp8] [--rotate R] --input q=Q.npy --input k=K.npy\n"
    "                           --input v=V.npy --output o=O.npy --output lse=LSE.npy [--device cpu|gpu]\n"
    "Prefill attention on your tensors (quantized to --dtype): O float32 [seq][H][dv], LSE float32\n"
    "[H][seq]. --device cpu: the reference (P exact, softmax in double, O rounded once to float32);\n"
    "--device gpu: the kernel's bf16 O, widened exactly (contract/prefill.h: who computes what).\n";

static const char pf_bench_usage[] =
    "usage: tilelab bench prefill [options] [--tile BMxBNxW] [--hw PRESET] [--format table|csv|json]\n"
    "Times the kernel (L2 flushed, 20 warm-up, 200 timed, median) and reports TFLOP/s of the causal\n"
    "FLOPs (tl_prefill_flops: 2 (dqk + dv) per row, key and head with key <= row), the SM clock during\n"
    "the last timed run (work-group 0's cycles over ns), and the model's time and limiter on the preset\n"
    "(default: the GPU's own, h200 where no preset matches) with its error. --tile runs another tiling\n"
    "than the contract's (kernel experiments; the model columns stay the contract's).\n" PF_COMMON_USAGE;

static const char pf_sim_usage[] =
    "usage: tilelab sim prefill [options] [--hw PRESET] [--format table|csv|json]\n"
    "The model (simulator/prefill.h): tiling, instruction, work-groups and waves, tiles computed and\n"
    "skipped, the matrix, exp, vector, LDS, L2 and HBM times, tail, time, TFLOP/s and limiter.\n" PF_COMMON_USAGE;

static void pf_free_case(pf_problem *p)
{
    void *ptrs[] = {p->q, p->k, p->v, p->qs, p->ks, p->vs, p->o_full, p->lse_full, p->o_gpu, p->lse_gpu,
                    p->o_ref, p->lse_ref, p->o_other, p->lse_other};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
    p->q = p->k = p->v = NULL;
    p->qs = p->ks = p->vs = p->o_full = p->lse_full = p->lse_gpu = NULL;
    p->o_ref = p->lse_ref = p->o_other = p->lse_other = NULL;
    p->o_gpu = NULL;
    if (p->g) tl_prefill_gpu_kernels->close(p->g);
    p->g = NULL;
    p->cur_case = -1;
}

static void pf_free(void *vp)
{
    pf_problem *p = vp;
    if (!p) return;
    pf_free_case(p);
    free(p->user_q), free(p->user_k), free(p->user_v);
    free(p);
}

static int pf_n_cases(const void *vp)
{
    const pf_problem *p = vp;
    return p->user_q ? 1 : p->ns;
}

static tl_prefill_shape case_shape(const pf_problem *p, int c)
{
    tl_prefill_shape s = p->base;
    s.seq = p->user_q ? p->user_seq : p->seq[c];
    return s;
}

/* --tile BMxBNxW */
static int parse_tile(const char *s, tl_prefill_tiling *t)
{
    long long v[3];
    if (tl_scan_ints(s, 'x', v, 3) != 3 || v[0] < 16 || v[0] > 512 || v[1] < 16 || v[1] > 512 || v[2] < 1 || v[2] > 16)
        return tl_error(TL_EUSAGE, "--tile", "'%s' is not BMxBNxW (block_m, block_n 16..512, warps 1..16)", s);
    t->block_m = (int)v[0], t->block_n = (int)v[1], t->warps = (int)v[2];
    return 0;
}

static int pf_parse(int argc, char **argv, tl_op_mode mode, void **out)
{
    *out = NULL;
    pf_problem *p = calloc(1, sizeof *p);
    if (!p) return tl_error(TL_EFAIL, "prefill", "out of memory");
    p->mode = mode;
    p->cur_case = -1;
    p->seed = mode == TL_OP_CHECK ? tl_fresh_seed() : 1;
    const char *shape = "mistral-7b", *seq = "1024", *dtype = NULL, *rot = NULL, *dist = NULL, *seed = NULL,
               *scale = NULL, *tile = NULL, *hw = mode == TL_OP_BENCH ? tl_ops_bench_hw() : "h200";
    tl_opt opts[] = {TL_OPT_V("--shape", &shape), TL_OPT_V("--seq", &seq),   TL_OPT_V("--dtype", &dtype),
                     TL_OPT_V("--rotate", &rot),  TL_OPT_V("--dist", &dist), TL_OPT_V("--seed", &seed),
                     TL_OPT_V("--scale", &scale), TL_OPT_V("--tile", &tile), TL_OPT_V("--hw", &hw),
                     TL_OPT_END};
    static const char *const cmds[] = {"check prefill", "bench prefill", "sim prefill", "run prefill"};
    int rc = tl_opts_parse(argc, argv, opts, cmds[mode], NULL, 0, NULL);
    if (!rc) rc = tl_prefill_shape_parse(shape, &p->base);
    if (!rc && dtype) rc = tl_prefill_dtype_parse(dtype, &p->base.dtype);
    if (!rc && rot) rc = tl_rotation_parse(rot, &p->rot);
    if (!rc && dist) rc = tl_prefill_dist_parse(dist, &p->dist);
    if (!rc && seed) rc = tl_ops_parse_seed(seed, &p->seed);
    if (!rc && tile && mode != TL_OP_BENCH) rc = tl_error(TL_EUSAGE, "--tile", "only bench prefill takes a tiling");
    if (!rc && tile) rc = parse_tile(tile, &p->tile);
    double sc = 0;
    if (!rc && scale) rc = tl_parse_double(scale, "--scale", &sc);
    if (!rc && scale && !(isfinite(sc) && sc > 0 && sc < 1e6))
        rc = tl_error(TL_EUSAGE, "--scale", "%s: the softmax scale must be finite and in (0, 1e6)", scale);
    p->base.scale = (float)sc;
    if (!rc) rc = tl_parse_long_list(seq, 1, TL_PREFILL_MAX_SEQ, "--seq", p->seq, PF_MAX_LIST, &p->ns);
    if (!rc && p->ns < 1) rc = tl_error(TL_EUSAGE, "--seq", "an empty list");
    snprintf(p->shape_name, sizeof p->shape_name, "%s", shape);
    snprintf(p->hw, sizeof p->hw, "%s", hw);
    tl_hw h;
    if (!rc) rc = tl_hw_load(p->hw, &h);
    for (int c = 0; !rc && c < p->ns; c++) {
        tl_prefill_shape s = case_shape(p, c);
        rc = tl_prefill_shape_check(&s);
    }
    if (rc) {
        pf_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* ---- --input files ---- */

static int expect3(const tl_npy *a, const char *name, long seq, int heads, int dim)
{
    if (a->ndim == 3 && a->shape[0] == (size_t)seq && a->shape[1] == (size_t)heads && a->shape[2] == (size_t)dim)
        return 0;
    char got[128];
    tl_npy_shape_str(a, got, sizeof got);
    return tl_error(TL_EUSAGE, "--input", "%s has shape %s; --shape wants [%ld, %d, %d]", name, got, seq, heads, dim);
}

static int pf_load_inputs(void *vp, const tl_op_file *files, int n)
{
    pf_problem *p = vp;
    static const char *const names[3] = {"q", "k", "v"};
    tl_npy a[3];
    memset(a, 0, sizeof a);
    int rc = 0;
    for (int j = 0; j < 3 && !rc; j++) {
        const char *path = NULL;
        for (int i = 0; i < n; i++)
            if (strcmp(files[i].name, names[j]) == 0) path = files[i].path;
        if (!path) rc = tl_error(TL_EUSAGE, "--input", "q, k and v are all needed (%s missing)", names[j]);
        else rc = tl_npy_read(path, &a[j]);
    }
    tl_prefill_shape s = p->base;
    if (!rc && a[0].ndim != 3) rc = expect3(&a[0], "q", 1, s.heads, s.dqk);
    if (!rc) {
        s.seq = (long)a[0].shape[0];
        rc = tl_prefill_shape_check(&s);
    }
    if (!rc && !(rc = expect3(&a[0], "q", s.seq, s.heads, s.dqk)) && !(rc = expect3(&a[1], "k", s.seq, s.kv_heads, s.dqk)))
        rc = expect3(&a[2], "v", s.seq, s.kv_heads, s.dv);
    if (!rc) {
        p->user_q = malloc(tl_prefill_q_elems(&s) * sizeof(float));
        p->user_k = malloc(tl_prefill_k_elems(&s) * sizeof(float));
        p->user_v = malloc(tl_prefill_v_elems(&s) * sizeof(float));
        if (!p->user_q || !p->user_k || !p->user_v) rc = tl_error(TL_EFAIL, "prefill", "out of memory");
    }
    if (!rc && !(rc = tl_npy_to_f32(&a[0], "q", p->user_q)) && !(rc = tl_npy_to_f32(&a[1], "k", p->user_k)))
        rc = tl_npy_to_f32(&a[2], "v", p->user_v);
    for (int j = 0; j < 3; j++) tl_npy_free(&a[j]);
    if (rc) {
        free(p->user_q), free(p->user_k), free(p->user_v);
        p->user_q = p->user_k = p->user_v = NULL;
        return rc;
    }
    p->user_seq = s.seq;
    return 0;
}

static void pf_describe(const void *vp, FILE *f)
{
    const pf_problem *p = vp;
    const tl_prefill_shape *s = &p->base;
    fprintf(f, "prefill: %s, %d query heads on %d KV heads, dqk %d, dv %d, causal, scale %g; %s (%s); rotation %s; "
            "inputs %s; seed %llu\n",
            p->shape_name, s->heads, s->kv_heads, s->dqk, s->dv, (double)tl_prefill_scale(s), tl_prefill_dtype_name(s->dtype),
            s->dtype == TL_PREFILL_FP8 ? "E4M3FN, a float32 scale per 128 tokens per head; P as E4M3 of P x 448"
                                       : "P rounded to bf16",
            tl_rotation_name(p->rot), p->user_q ? "from the --input files" : tl_prefill_dist_name(p->dist),
            (unsigned long long)p->seed);
    if (p->mode != TL_OP_SIM && p->mode != TL_OP_BENCH) return; /* the modelled kernel: sim and bench's model */
    tl_hw hw;
    if (tl_hw_load(p->hw, &hw) != 0) {
        tl_clear_error(); /* pf_parse loaded it already: cannot fail here */
        return;
    }
    fprintf(f, "prefill kernel on %s (%s): %s\n", hw.name, hw.arch,
            strncmp(hw.arch, "sm_90", 5) == 0
                ? "FlashAttention-3's shape on sm_90a: warp-specialized, a producer warpgroup loading K/V tiles by "
                  "TMA (three buffers; two for bf16 dqk 192) and two consumer warpgroups of 64 query rows each on wgmma m64n128 "
                  "(without FA-3's ping-pong between them); kernels/prefill.hip pf_body_ws"
                : "FlashAttention-2's shape: one work-group per block of query rows and head, K/V tiles through "
                  "LDS, S and P.V on the MFMA 16x16 matrix cores, the online softmax in registers; kernels/prefill.hip");
}

static void pf_case_label(const void *vp, int c, char *label, size_t n)
{
    const pf_problem *p = vp;
    tl_prefill_shape s = case_shape(p, c);
    snprintf(label, n, "%s %s seq=%ld", p->shape_name, tl_prefill_dtype_name(s.dtype), s.seq);
}

/* The rows a check compares: all, or three blocks (PF_FULL_MADDS above). */
static void choose_rows(pf_problem *p)
{
    const tl_prefill_shape *s = &p->shape;
    const double madds = tl_prefill_flops(s) / 2;
    if (p->mode == TL_OP_RUN || madds <= PF_FULL_MADDS || s->seq < 1024) {
        p->nr = 1, p->lo[0] = 0, p->hi[0] = s->seq;
    } else {
        const long mid = s->seq / 2 / 64 * 64;
        p->nr = 3;
        p->lo[0] = 0, p->hi[0] = 128;
        p->lo[1] = mid, p->hi[1] = mid + 128;
        p->lo[2] = s->seq - 256, p->hi[2] = s->seq;
    }
    p->rows = 0;
    for (int r = 0; r < p->nr; r++) p->rows += p->hi[r] - p->lo[r];
}

/* The decoded value of element i of a quantized tensor [seq][heads][dim] (for the score statistics). */
static double value_at(const pf_problem *p, const void *x, const float *sc, int heads, int dim, size_t i)
{
    if (p->shape.dtype == TL_PREFILL_BF16) return tl_code_bf16_to_f32(((const uint16_t *)x)[i]);
    const long row = (long)(i / ((size_t)heads * dim));
    const int h = (int)(i / dim % heads);
    return tl_code_e4m3_to_f32(((const uint8_t *)x)[i]) * sc[(size_t)h * tl_prefill_nblk(p->shape.seq) + row / TL_PREFILL_BLOCK];
}

/* RMS of the scaled scores over 4096 seeded (row, key <= row, head) triples: numerics/softmax.h's s_rms. */
static double score_rms(const pf_problem *p)
{
    const tl_prefill_shape *s = &p->shape;
    uint64_t st = p->seed ^ 0x5c0eULL;
    double s2 = 0;
    const int n = 4096, gqa = s->heads / s->kv_heads;
    for (int t = 0; t < n; t++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        const long i = (long)((st >> 33) % (uint64_t)s->seq);
        const long j = (long)((st >> 13) % (uint64_t)(i + 1));
        const int h = (int)((st >> 5) % (uint64_t)s->heads);
        double dot = 0;
        for (int d = 0; d < s->dqk; d++)
            dot += value_at(p, p->q, p->qs, s->heads, s->dqk, ((size_t)i * s->heads + h) * s->dqk + d) *
                   value_at(p, p->k, p->ks, s->kv_heads, s->dqk, ((size_t)j * s->kv_heads + h / gqa) * s->dqk + d);
        dot *= tl_prefill_scale(s);
        s2 += dot * dot;
    }
    return sqrt(s2 / n);
}

/* Quantizes x [seq][heads][dim] to the shape's dtype into *codes (and *scales for fp8). */
static int quantize(const tl_prefill_shape *s, const float *x, int heads, int dim, void **codes, float **scales)
{
    const size_t n = (size_t)s->seq * heads * dim;
    if (s->dtype == TL_PREFILL_BF16) {
        *codes = malloc(n * sizeof(uint16_t));
        if (!*codes) return tl_error(TL_EFAIL, "prefill", "out of memory");
        tl_encode_array16(TL_NF_BF16, x, n, 1, *codes);
        return 0;
    }
    *codes = malloc(n);
    *scales = malloc((size_t)heads * tl_prefill_nblk(s->seq) * sizeof(float));
    if (!*codes || !*scales) return tl_error(TL_EFAIL, "prefill", "out of memory");
    return tl_prefill_quantize_fp8(x, s->seq, heads, dim, *codes, *scales);
}

static int pf_make_inputs(void *vp, int c)
{
    pf_problem *p = vp;
    pf_free_case(p);
    p->shape = case_shape(p, c);
    const tl_prefill_shape *s = &p->shape;
    const size_t nq = tl_prefill_q_elems(s), nk = tl_prefill_k_elems(s), nv = tl_prefill_v_elems(s);
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nv * sizeof *v);
    int rc = q && k && v ? 0 : tl_error(TL_EFAIL, "prefill", "out of memory for %zu inputs", nq + nk + nv);
    if (!rc && p->user_q) {
        memcpy(q, p->user_q, nq * sizeof *q), memcpy(k, p->user_k, nk * sizeof *k), memcpy(v, p->user_v, nv * sizeof *v);
    } else if (!rc) {
        tl_prefill_make(s, p->dist, p->seed, q, k, v);
    }
    if (!rc) rc = tl_prefill_rotate(p->rot, p->seed ^ 0x707ULL, q, (size_t)s->seq * s->heads, s->dqk);
    if (!rc) rc = tl_prefill_rotate(p->rot, p->seed ^ 0x707ULL, k, (size_t)s->seq * s->kv_heads, s->dqk);
    if (!rc) rc = quantize(s, q, s->heads, s->dqk, &p->q, &p->qs);
    if (!rc) rc = quantize(s, k, s->kv_heads, s->dqk, &p->k, &p->ks);
    if (!rc) rc = quantize(s, v, s->kv_heads, s->dv, &p->v, &p->vs);
    free(q), free(k), free(v);
    if (!rc && p->mode != TL_OP_BENCH && p->mode != TL_OP_SIM) {
        choose_rows(p);
        const size_t no = tl_prefill_o_elems(s), nl = tl_prefill_lse_elems(s);
        const size_t co = (size_t)p->rows * s->heads * s->dv, cl = (size_t)s->heads * p->rows;
        p->o_full = malloc(no * sizeof(float)), p->lse_full = malloc(nl * sizeof(float));
        p->o_ref = malloc(co * sizeof(float)), p->o_other = malloc(co * sizeof(float));
        p->lse_ref = malloc(cl * sizeof(float)), p->lse_other = malloc(cl * sizeof(float));
        if (!p->o_full || !p->lse_full || !p->o_ref || !p->o_other || !p->lse_ref || !p->lse_other)
            rc = tl_error(TL_EFAIL, "prefill", "out of memory for the outputs");
    }
    if (!rc) p->cur_case = c;
    return rc;
}

/* ---- outputs ---- */

/* The checked rows of full-size o [seq][H][dv] and lse [H][seq] into compact co, cl. */
static void gather(const pf_problem *p, const float *o, const uint16_t *o16, const float *lse, float *co, float *cl)
{
    const tl_prefill_shape *s = &p->shape;
    const size_t row = (size_t)s->heads * s->dv;
    long at = 0;
    for (int r = 0; r < p->nr; r++)
        for (long i = p->lo[r]; i < p->hi[r]; i++, at++) {
            for (size_t e = 0; e < row; e++)
                co[at * row + e] = o ? o[i * row + e] : tl_code_bf16_to_f32(o16[i * row + e]);
            for (int h = 0; h < s->heads; h++) cl[(size_t)h * p->rows + at] = lse[(size_t)h * s->seq + i];
        }
}

static void set_outputs(const pf_problem *p, const float *o, const float *lse, tl_op_outputs *out, const char *note)
{
    const tl_prefill_shape *s = &p->shape;
    memset(out, 0, sizeof *out);
    out->n = 2;
    tl_op_output *x = &out->o[0];
    x->name = "o";
    x->type = TL_NPY_F32;
    x->data = o;
    x->ndim = 3;
    x->shape[0] = (size_t)p->rows, x->shape[1] = (size_t)s->heads, x->shape[2] = (size_t)s->dv;
    x->n = (size_t)p->rows * s->heads * s->dv;
    x->row_len = (size_t)s->dv;
    snprintf(x->note, sizeof x->note, "%s", note);
    x = &out->o[1];
    x->name = "lse";
    x->type = TL_NPY_F32;
    x->data = lse;
    x->ndim = 2;
    x->shape[0] = (size_t)s->heads, x->shape[1] = (size_t)p->rows;
    x->n = (size_t)s->heads * p->rows;
    snprintf(x->note, sizeof x->note, "%s", note);
}

static void rows_note(const pf_problem *p, const char *what, char *note, size_t n)
{
    if (p->nr == 1) snprintf(note, n, "%s; every row", what);
    else
        snprintf(note, n, "%s; rows [%ld,%ld) [%ld,%ld) [%ld,%ld) of %ld", what, p->lo[0], p->hi[0], p->lo[1], p->hi[1],
                 p->lo[2], p->hi[2], p->shape.seq);
}

static int pf_reference(void *vp, tl_op_outputs *out)
{
    pf_problem *p = vp;
    tl_prefill_inputs in = {p->q, p->k, p->v, p->qs, p->ks, p->vs};
    int rc = tl_prefill_reference_rows(&p->shape, &in, p->nr, p->lo, p->hi, p->o_full, p->lse_full);
    if (!rc) {
        gather(p, p->o_full, NULL, p->lse_full, p->o_ref, p->lse_ref);
        p->s_rms = score_rms(p);
    }
    char note[200];
    rows_note(p, "float64 online softmax", note, sizeof note);
    set_outputs(p, p->o_ref, p->lse_ref, out, note);
    return rc;
}

/* The naive loop on the decoded inputs (all rows: the naive check runs on cases where the
 * reference covers every row). */
static int pf_naive(void *vp, tl_op_outputs *out)
{
    pf_problem *p = vp;
    const tl_prefill_shape *s = &p->shape;
    const size_t nq = tl_prefill_q_elems(s), nk = tl_prefill_k_elems(s), nv = tl_prefill_v_elems(s);
    double *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nv * sizeof *v);
    float *o = malloc(tl_prefill_o_elems(s) * sizeof *o), *lse = malloc(tl_prefill_lse_elems(s) * sizeof *lse);
    int rc = q && k && v && o && lse && p->nr == 1 ? 0 : tl_error(TL_EFAIL, "prefill naive", "out of memory");
    if (!rc) {
        for (size_t i = 0; i < nq; i++) q[i] = value_at(p, p->q, p->qs, s->heads, s->dqk, i);
        for (size_t i = 0; i < nk; i++) k[i] = value_at(p, p->k, p->ks, s->kv_heads, s->dqk, i);
        for (size_t i = 0; i < nv; i++) v[i] = value_at(p, p->v, p->vs, s->kv_heads, s->dv, i);
        rc = tl_prefill_naive(s, q, k, v, o, lse);
    }
    if (!rc) gather(p, o, NULL, lse, p->o_other, p->lse_other);
    free(q), free(k), free(v), free(o), free(lse);
    p->other_gpu = 0;
    set_outputs(p, p->o_other, p->lse_other, out, "naive two-pass rows, double");
    return rc;
}

static int pf_naive_cheap(const void *vp, int c)
{
    const pf_problem *p = vp;
    tl_prefill_shape s = case_shape(p, c);
    return tl_prefill_flops(&s) / 2 <= PF_NAIVE_MADDS;
}

static int pf_small(const void *vp, void **out)
{
    const pf_problem *p = vp;
    pf_problem *q = calloc(1, sizeof *q);
    if (!q) return tl_error(TL_EFAIL, "prefill", "out of memory");
    *q = *p;
    q->user_q = q->user_k = q->user_v = NULL;
    q->q = q->k = q->v = NULL;
    q->qs = q->ks = q->vs = q->o_full = q->lse_full = q->lse_gpu = NULL;
    q->o_ref = q->lse_ref = q->o_other = q->lse_other = NULL;
    q->o_gpu = NULL;
    q->g = NULL;
    q->cur_case = -1;
    /* two KV heads (GQA kept), 300 tokens: three scale blocks, the last one partial */
    const int gqa = p->base.heads / p->base.kv_heads;
    q->base.kv_heads = p->base.kv_heads < 2 ? p->base.kv_heads : 2;
    q->base.heads = q->base.kv_heads * (gqa < 2 ? gqa : 2);
    q->ns = 1, q->seq[0] = 300;
    *out = q;
    return 0;
}

/* The bounds of numerics/softmax.h for the comparison last made, O's with the bf16 store added
 * (a kernel's O; relative RMS 2^-8 / sqrt 3) when it is the kernel's. */
static int tolerances(const pf_problem *p, tl_tolerance *o, tl_tolerance *lse)
{
    const tl_prefill_shape *s = &p->shape;
    double l2 = 0, lmax = 0, n = 0;
    for (size_t i = 0; i < (size_t)s->heads * p->rows; i++)
        if (isfinite(p->lse_ref[i])) {
            l2 += (double)p->lse_ref[i] * p->lse_ref[i], n++;
            if (fabs(p->lse_ref[i]) > lmax) lmax = fabs(p->lse_ref[i]);
        }
    tl_softmax_tol_spec spec = {s->dqk, s->seq, 1, 0, p->s_rms, n > 0 ? sqrt(l2 / n) : 0, lmax, 0};
    if (p->other_gpu) {
        /* the kernel's Q.K accumulator: float32, or 13 bits for Hopper's E4M3 wgmma (whose P.V sums
         * one 128-key tile in those bits too: 32 additions of 2^-13, far below the pv_bits term) */
        spec.acc_bits = p->acc_bits > 0 ? p->acc_bits : TL_SOFTMAX_ACC_FP32;
        /* P's unit roundoff into P.V: bf16 2^-8; the FP8 rule's E4M3 (3 mantissa bits) 2^-4 */
        spec.pv_bits = s->dtype == TL_PREFILL_FP8 ? 4 : 8;
    }
    int rc = tl_softmax_tolerance(&spec, o, lse);
    /* O's magnitude falls along the causal rows (row 0 is one V row, row i an average of i + 1 of
     * them), and every error term above is relative to the element: metrics.h's max_abs bound,
     * which takes one magnitude (the array's RMS) for all, does not apply to O; its relative RMS
     * does, and NaN still fails. */
    o->check_max_abs = 0;
    if (!rc && p->other_gpu) {
        const double store = ldexp(1.0, -8) / sqrt(3.0), e = sqrt(o->predicted * o->predicted + store * store);
        o->rel_rms *= e / o->predicted;
        o->predicted = e;
    }
    return rc;
}

static int pf_tolerance(const void *vp, int o, tl_tolerance *t)
{
    tl_tolerance to, tl;
    int rc = tolerances(vp, &to, &tl);
    if (!rc) *t = o == 0 ? to : tl;
    return rc;
}

/* ---- the GPU ---- */

static int pf_gpu_built(void) { return tl_prefill_gpu_kernels != NULL && tl_gpu_kernels != NULL; }

static int gpu_open(pf_problem *p)
{
    const tl_prefill_gpu_api *G = tl_prefill_gpu_kernels;
    if (!G) return tl_error(TL_EFAIL, "prefill", "this build has no prefill kernel");
    int rc = p->g ? 0 : G->open(&p->shape, p->tile.block_m ? &p->tile : NULL, &p->g);
    if (!rc) p->acc_bits = G->acc_bits(p->g);
    if (!rc) rc = G->upload(p->g, p->q, p->k, p->v, p->qs, p->ks, p->vs);
    return rc;
}

static int pf_gpu(void *vp, tl_op_outputs *out)
{
    pf_problem *p = vp;
    const tl_prefill_gpu_api *G = tl_prefill_gpu_kernels;
    const tl_prefill_shape *s = &p->shape;
    const size_t no = tl_prefill_o_elems(s), nl = tl_prefill_lse_elems(s);
    int rc = gpu_open(p);
    if (!rc && !p->o_gpu) {
        p->o_gpu = malloc(no * sizeof *p->o_gpu), p->lse_gpu = malloc(nl * sizeof *p->lse_gpu);
        if (!p->o_gpu || !p->lse_gpu) rc = tl_error(TL_EFAIL, "prefill", "out of memory");
    }
    if (!rc) rc = G->poison(p->g);
    if (!rc) rc = G->run(p->g);
    if (!rc) rc = G->read(p->g, p->o_gpu, p->lse_gpu);
    size_t bad = 0;
    for (size_t i = 0; !rc && i < no; i++) bad += (p->o_gpu[i] & 0x7F80u) == 0x7F80u;
    for (size_t i = 0; !rc && i < nl; i++) bad += !isfinite(p->lse_gpu[i]);
    if (!rc && bad) rc = tl_error(TL_EFAIL, "prefill", "%zu elements of O and LSE are NaN or Inf (unwritten or overflowed)", bad);
    if (!rc) gather(p, NULL, p->o_gpu, p->lse_gpu, p->o_other, p->lse_other);
    p->other_gpu = 1;
    char note[200];
    snprintf(note, sizeof note, "every element of O and LSE finite (%zu)", no + nl);
    if (rc) snprintf(note, sizeof note, "kernel failed");
    set_outputs(p, p->o_other, p->lse_other, out, note);
    return rc;
}

/* ---- the model ---- */

static int pf_model(const pf_problem *p, const tl_prefill_shape *s, tl_prefill_model_result *r)
{
    tl_hw hw;
    int rc = tl_hw_load(p->hw, &hw);
    return rc ? rc : tl_prefill_model(&hw, s, r);
}

static int pf_n_parts(const void *vp) { return 1; }

/* The counted work: causal FLOPs (tl_prefill_flops) and the fewest bytes (Q, K, V and scales read,
 * O bf16 and LSE written once), beside the model's. */
static double pf_bytes(const tl_prefill_shape *s)
{
    const double e = s->dtype == TL_PREFILL_FP8 ? 1 : 2;
    const double scales = s->dtype == TL_PREFILL_FP8 ? 4.0 * (s->heads + 2.0 * s->kv_heads) * tl_prefill_nblk(s->seq) : 0;
    return e * (tl_prefill_q_elems(s) + tl_prefill_k_elems(s) + tl_prefill_v_elems(s)) + scales +
           2.0 * tl_prefill_o_elems(s) + 4.0 * tl_prefill_lse_elems(s);
}

static int pf_work(void *vp, int c, int part, tl_op_work *w)
{
    pf_problem *p = vp;
    tl_prefill_shape s = case_shape(p, c);
    tl_prefill_model_result r;
    int rc = pf_model(p, &s, &r);
    if (rc) return rc;
    tl_ops_work_set(w, "prefill", tl_prefill_flops(&s), pf_bytes(&s), r.flops, r.hbm_bytes, r.time_us, r.limiter);
    return 0;
}

static int pf_sim_rows(void *vp, int c, tl_table *t)
{
    pf_problem *p = vp;
    tl_prefill_shape s = case_shape(p, c);
    tl_prefill_model_result r;
    int rc = pf_model(p, &s, &r);
    if (rc) return rc;
    char tile[48];
    snprintf(tile, sizeof tile, "%dx%dx%d", r.tile.block_m, r.tile.block_n, r.tile.warps);
    tl_table_row(t);
    tl_table_str(t, p->hw);
    tl_table_str(t, p->shape_name);
    tl_table_str(t, tl_prefill_dtype_name(s.dtype));
    tl_table_int(t, s.seq);
    tl_table_int(t, s.heads);
    tl_table_int(t, s.kv_heads);
    tl_table_int(t, s.dqk);
    tl_table_int(t, s.dv);
    tl_table_str(t, tile);
    tl_table_str(t, r.instr);
    tl_table_int(t, r.blocks);
    tl_table_numf(t, "%.2f", r.waves);
    tl_table_int(t, r.tiles_computed);
    tl_table_int(t, r.tiles_total - r.tiles_computed);
    tl_table_numf(t, "%.0f", r.flops);
    tl_table_numf(t, "%.0f", r.hbm_bytes);
    tl_table_numf(t, "%.2f", r.mma_us);
    tl_table_numf(t, "%.2f", r.exp_us);
    tl_table_numf(t, "%.2f", r.hbm_us);
    tl_table_numf(t, "%.2f", r.fixed_us);
    tl_table_numf(t, "%.2f", r.time_us);
    tl_table_numf(t, "%.1f", r.tflops);
    tl_table_str(t, r.limiter);
    tl_ops_code_cells(t, &r.code);
    return 0;
}

static int pf_bench(void *vp, int c, tl_table *t)
{
    pf_problem *p = vp;
    const tl_gpu_api *D = tl_gpu_kernels;
    const tl_prefill_gpu_api *G = tl_prefill_gpu_kernels;
    if (!G || !D) return tl_error(TL_EFAIL, "bench prefill", "this build has no prefill kernel");
    int rc = gpu_open(p);
    char where[300], label[512];
    if (!rc) rc = tl_ops_measured_where(where, sizeof where);
    if (rc) return rc;
    snprintf(label, sizeof label, "measured on %s; sim_us simulated on preset %.100s", where, p->hw);
    tl_bench_opts o;
    D->default_opts(&o);
    tl_bench_result r;
    tl_op_work w;
    double mhz = 0;
    if ((rc = G->run(p->g)) || (rc = G->time(p->g, &o, &r, &mhz)) || (rc = pf_work(p, c, 0, &w))) return rc;
    const tl_prefill_tiling tile = p->tile.block_m ? p->tile : tl_prefill_tiling_for("sm_90", &p->shape);
    const double us = r.median_ms * 1e3;
    char name[96], ts[48];
    pf_case_label(p, c, name, sizeof name);
    snprintf(ts, sizeof ts, "%dx%dx%d", tile.block_m, tile.block_n, tile.warps);
    tl_table_row(t);
    tl_table_str(t, name);
    tl_table_str(t, p->shape_name);
    tl_table_str(t, tl_prefill_dtype_name(p->shape.dtype));
    tl_table_int(t, p->shape.seq);
    tl_table_int(t, p->shape.heads);
    tl_table_int(t, p->shape.kv_heads);
    tl_table_int(t, p->shape.dqk);
    tl_table_str(t, p->tile.block_m ? ts : "contract");
    tl_table_numf(t, "%.0f", w.flops);
    tl_table_numf(t, "%.0f", w.hbm_bytes);
    tl_table_numf(t, "%.2f", us);
    tl_table_numf(t, "%.1f", w.flops / (us * 1e6));
    tl_table_numf(t, "%.0f", mhz);
    tl_table_numf(t, "%.2f", w.model_us);
    tl_table_numf(t, "%.1f", 100.0 * (w.model_us - us) / us);
    tl_table_str(t, w.limiter);
    tl_table_numf(t, "%.2f", r.p10_ms * 1e3);
    tl_table_numf(t, "%.2f", r.p90_ms * 1e3);
    tl_table_str(t, label);
    return 0;
}

static const char *const pf_test_args[] = {"--shape", "4x2x128", "--seq", "70,129", "--dtype", "fp8", "--rotate",
                                           "hadamard", "--seed", "7", NULL};
static const char *const pf_bad_shape[] = {"--shape", "llama", NULL};
static const char *const pf_bad_gqa[] = {"--shape", "6x4x128", NULL};
static const char *const pf_bad_seq[] = {"--seq", "0", NULL};
static const char *const pf_bad_seq2[] = {"--seq", "2000000", NULL};
static const char *const pf_bad_dtype[] = {"--dtype", "fp4", NULL};
static const char *const pf_bad_rot[] = {"--rotate", "spin", NULL};
static const char *const pf_bad_dist[] = {"--dist", "zipf", NULL};
static const char *const pf_bad_scale[] = {"--scale", "nan", NULL};
static const char *const pf_bad_tile[] = {"--tile", "128x64", NULL};
static const char *const pf_bad_seed[] = {"--seed", "-1", NULL};
static const char *const pf_bad_huge[] = {"--shape", "256x512", "--seq", "1048576", NULL};
static const char *const *const pf_bad_args[] = {pf_bad_shape, pf_bad_gqa,   pf_bad_seq,  pf_bad_seq2, pf_bad_dtype,
                                                 pf_bad_rot,   pf_bad_dist,  pf_bad_scale, pf_bad_tile, pf_bad_seed,
                                                 pf_bad_huge,  NULL};
/* lengths whose K and V fit the H200's caches: beyond (~12K on mistral-7b) the model charges the
 * re-reads of K and V from HBM (its kv_passes) on top of the bytes counted here */
static const char *const pf_bench_args[] = {"--shape", "mistral-7b", "--seq", "1024,4096", NULL};

/* check all: Mistral-7B at 1K and 4K in both dtypes, DeepSeek-V2-Lite's 192-dim MLA with the
 * Hadamard rotation, Qwen3-8B with outlier channels in bf16 (about 2 s without a GPU: small problems). */
static const char *const pf_all_bf16[] = {"--shape", "mistral-7b", "--seq", "1024,4096", "--dtype", "bf16", NULL};
static const char *const pf_all_fp8[] = {"--shape", "mistral-7b", "--seq", "1024,4096", "--dtype", "fp8", NULL};
static const char *const pf_all_mla[] = {"--shape", "deepseek-v2-lite", "--seq", "256,1024", "--dtype", "fp8",
                                         "--rotate", "hadamard", NULL};
static const char *const pf_all_outliers[] = {"--shape", "qwen3-8b", "--seq", "200,2048", "--dtype", "bf16",
                                              "--rotate", "random", "--dist", "outliers", NULL};
static const char *const *const pf_check_all_args[] = {pf_all_bf16, pf_all_fp8, pf_all_mla, pf_all_outliers, NULL};
const tl_op tl_op_prefill = {
    .name = "prefill",
    .summary = "causal prefill attention (FlashAttention-2 style; FA-3's warp-specialized shape on sm_90a): bf16 or FP8 "
               "with per-block scales, GQA, MLA 192/128",
    .dtypes = "bf16,fp8",
    .targets = pf_targets,
    .check_usage = pf_check_usage,
    .bench_usage = pf_bench_usage,
    .sim_usage = pf_sim_usage,
    .run_usage = pf_run_usage,
    .inputs = pf_inputs,
    .parse = pf_parse,
    .free_problem = pf_free,
    .load_inputs = pf_load_inputs,
    .describe = pf_describe,
    .n_cases = pf_n_cases,
    .case_label = pf_case_label,
    .make_inputs = pf_make_inputs,
    .reference = pf_reference,
    .naive = pf_naive,
    .naive_cheap = pf_naive_cheap,
    .small_problem = pf_small,
    .gpu_built = pf_gpu_built,
    .gpu = pf_gpu,
    .tolerance = pf_tolerance,
    .n_parts = pf_n_parts,
    .work = pf_work,
    .sim = pf_sim_rows,
    .sim_header = "hw,shape,dtype,seq,heads,kv_heads,dqk,dv,tile,instr,blocks,waves,tiles_computed,tiles_skipped,flops,"
                  "hbm_bytes,mma_us,exp_us,hbm_us,fixed_us,time_us,tflops,limiter," TL_OPS_CODE_COLUMNS,
    .bench = pf_bench,
    .bench_header = "name,shape,dtype,seq,heads,kv_heads,dqk,tile,flops,hbm_bytes,time_us,tflops,sm_mhz,sim_us,sim_err_pct,"
                    "sim_limiter,p10_us,p90_us,source",
    .figures = tl_prefill_figures,
    .test_args = pf_test_args,
    .bad_args = pf_bad_args,
    .bench_args = pf_bench_args,
    .check_all_args = pf_check_all_args,
};
