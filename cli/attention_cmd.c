/* `tilelab numerics attention-error`: the FP8/BF16 error study of causal prefill attention
 * (reference/prefill.h). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "../core/npy.h"
#include "../core/table.h"
#include "../reference/prefill.h"

const char TL_ATTENTION_ERROR_USAGE[] =
    "usage: tilelab numerics attention-error [--shape mistral-7b|qwen3-8b|deepseek-v2-lite|HxD|HxKVxD]\n"
    "         [--seq N] [--kv-heads N] [--dist normal|outliers|qk-outliers] [--rotate none|hadamard|random]\n"
    "         [--input q=Q.npy --input k=K.npy --input v=V.npy] [--seed S] [--format table|csv|json]\n"
    "The error of causal prefill attention (contract/prefill.h) when Q, K and V are quantized: to bf16,\n"
    "to FP8 E4M3FN with one float32 scale per 128-row block per head (fp8), and the same with P rounded\n"
    "by the FP8 kernel's rule, E4M3FN of P x 448 (fp8+p8); with --rotate, also after\n"
    "rotating Q and K by the same orthogonal matrix (block Walsh-Hadamard over the binary pieces of the\n"
    "q.k dim, or a random orthogonal matrix from a LAPACKE QR), which leaves every q.k unchanged.\n"
    "Each row runs the float64 reference on the quantized inputs and compares its float32 output with\n"
    "the reference on the unquantized float32 inputs: relative RMS, max abs and max rel error, the\n"
    "ratio to bf16 at the same rotation (fp8_over_bf16) and what the rotation buys (rotation_gain =\n"
    "rel_rms without rotation / with). The bf16 rounding of the stored output is not part of it, nor\n"
    "P's rounding in the bf16 and fp8 rows. Defaults: mistral-7b, seq 1024, the first 2 KV heads (and their query\n"
    "heads; --kv-heads all for every head), normal, seed from the clock (printed).\n"
    "Inputs (--input, all three, float32/float16/bfloat16 .npy): q [seq][H][dqk], k [seq][Hkv][dqk],\n"
    "v [seq][Hkv][dv] of the --shape; seq is q's first dimension. Seeded inputs: normal (N(0,1)),\n"
    "outliers (in each KV head dqk/32 K channels times U[10,100]) or qk-outliers (the same, and those\n"
    "channels of its query heads times U[10,100] too: RoPE models' massive values in Q and K).\n"
    "Cost: 4 (7 with --rotate) references of seq^2/2 x H x (dqk + dv) multiply-adds in double.\n";

#define ATT_MAX_MADDS 0x1p38 /* the references' work this command takes on (minutes on a few cores) */

/* Reads --input NAME=FILE into the matching slot (q, k, v). */
static int read_inputs(const char **list, int n, tl_npy files[3])
{
    static const char *const names[3] = {"q", "k", "v"};
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(list[i], '=');
        int slot = -1;
        for (int j = 0; j < 3 && eq; j++)
            if ((size_t)(eq - list[i]) == 1 && list[i][0] == names[j][0]) slot = j;
        if (slot < 0) return tl_error(TL_EUSAGE, "--input", "'%s' is not q=FILE, k=FILE or v=FILE", list[i]);
        if (files[slot].data) return tl_error(TL_EUSAGE, "--input", "%s given twice", names[slot]);
        int rc = tl_npy_read(eq + 1, &files[slot]);
        if (rc) return rc;
    }
    for (int j = 0; j < 3; j++)
        if (!files[j].data) return tl_error(TL_EUSAGE, "--input", "q, k and v are all needed (%s missing)", names[j]);
    return TL_OK;
}

/* Checks one input's shape [seq][heads][dim]. */
static int expect3(const tl_npy *a, const char *name, long seq, int heads, int dim)
{
    if (a->ndim == 3 && a->shape[0] == (size_t)seq && a->shape[1] == (size_t)heads && a->shape[2] == (size_t)dim)
        return TL_OK;
    char got[128];
    tl_npy_shape_str(a, got, sizeof got);
    return tl_error(TL_EUSAGE, "--input", "%s has shape %s, the shape wants [%ld, %d, %d]", name, got, seq, heads, dim);
}

/* The inputs of the study: from the user's files (shape checked, seq from q) or seeded. */
/* Refuses a study whose references would take more than ATT_MAX_MADDS (before anything is allocated). */
static int check_work(const tl_prefill_shape *s, tl_rotation rot)
{
    const double madds = (double)s->seq * (s->seq + 1) / 2 * s->heads * (s->dqk + s->dv) * (rot ? 7 : 4);
    if (madds <= ATT_MAX_MADDS) return TL_OK;
    return tl_error(TL_EUSAGE, "numerics attention-error", "%.3g multiply-adds is more than the %.3g allowed: give "
                    "a smaller --seq or --kv-heads", madds, ATT_MAX_MADDS);
}

static int load_or_make(tl_prefill_shape *s, const tl_npy f[3], int have_files, long seq_given, tl_rotation rot,
                        tl_prefill_dist dist, uint64_t seed, float **q, float **k, float **v)
{
    int rc;
    if (have_files) {
        if (f[0].ndim != 3) return expect3(&f[0], "q", seq_given > 0 ? seq_given : 1, s->heads, s->dqk);
        s->seq = (long)f[0].shape[0];
        if (seq_given > 0 && seq_given != s->seq)
            return tl_error(TL_EUSAGE, "--seq", "%ld, but q holds %ld tokens", seq_given, s->seq);
    }
    if ((rc = tl_prefill_shape_check(s)) || (rc = check_work(s, rot))) return rc;
    if (have_files && ((rc = expect3(&f[0], "q", s->seq, s->heads, s->dqk)) ||
                       (rc = expect3(&f[1], "k", s->seq, s->kv_heads, s->dqk)) ||
                       (rc = expect3(&f[2], "v", s->seq, s->kv_heads, s->dv))))
        return rc;
    *q = malloc(tl_prefill_q_elems(s) * sizeof **q);
    *k = malloc(tl_prefill_k_elems(s) * sizeof **k);
    *v = malloc(tl_prefill_v_elems(s) * sizeof **v);
    if (!*q || !*k || !*v) return tl_error(TL_EFAIL, "numerics attention-error", "out of memory");
    if (!have_files) {
        tl_prefill_make(s, dist, seed, *q, *k, *v);
        return TL_OK;
    }
    if ((rc = tl_npy_to_f32(&f[0], "q", *q)) || (rc = tl_npy_to_f32(&f[1], "k", *k)) ||
        (rc = tl_npy_to_f32(&f[2], "v", *v)))
        return rc;
    return TL_OK;
}

static int print_study(const tl_prefill_shape *s, const char *shape_name, int full_kv, const char *src,
                        long long seed, const tl_prefill_err_row *rows, int n, tl_format fmt)
{
    tl_table *t = tl_table_new("shape,seq,heads,kv_heads,dqk,dv,inputs,seed,format,rotate,rel_rms,max_abs,max_rel,"
                               "fp8_over_bf16,rotation_gain");
    if (!t) return tl_error(TL_EFAIL, "numerics attention-error", "out of memory");
    for (int i = 0; i < n; i++) {
        const tl_prefill_err_row *r = &rows[i];
        const int nf = TL_PREFILL_STUDY_FORMATS;
        const tl_err_metrics *bf = &rows[i / nf * nf].m; /* bf16 at the same rotation */
        const tl_err_metrics *un = &rows[i % nf].m;      /* the same format without rotation */
        tl_table_row(t);
        tl_table_str(t, shape_name);
        tl_table_int(t, s->seq);
        tl_table_int(t, s->heads);
        tl_table_int(t, s->kv_heads);
        tl_table_int(t, s->dqk);
        tl_table_int(t, s->dv);
        tl_table_str(t, src);
        if (seed >= 0) tl_table_int(t, seed); else tl_table_none(t);
        tl_table_str(t, r->format);
        tl_table_str(t, tl_rotation_name(r->rot));
        tl_table_numf(t, "%.4e", r->m.rel_rms);
        tl_table_numf(t, "%.4e", r->m.max_abs);
        tl_table_numf(t, "%.4e", r->m.max_rel);
        tl_table_numf(t, "%.2f", bf->rel_rms > 0 ? r->m.rel_rms / bf->rel_rms : 0);
        tl_table_numf(t, "%.3f", r->m.rel_rms > 0 ? un->rel_rms / r->m.rel_rms : 0);
    }
    char title[400];
    snprintf(title, sizeof title,
             "prefill attention error vs the float64 reference on unquantized inputs: %s, %d query heads on %d KV "
             "heads%s, seq %ld causal, %s inputs; float32 O (bf16 storage excluded)",
             shape_name, s->heads, s->kv_heads, full_kv ? "" : " (a subset of the model's heads: --kv-heads)",
             s->seq, src);
    tl_table_print(t, fmt, title, stdout);
    tl_table_free(t);
    return TL_OK;
}

int tl_cmd_attention_error(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, TL_ATTENTION_ERROR_USAGE)) return 0;
    const char *shape_s = "mistral-7b", *seq_s = NULL, *kv_s = NULL, *dist_s = NULL, *rot_s = NULL, *seed_s = NULL,
               *fmt_s = NULL, *inputs[3];
    int ninputs = 0;
    tl_opt opts[] = {TL_OPT_V("--shape", &shape_s), TL_OPT_V("--seq", &seq_s),   TL_OPT_V("--kv-heads", &kv_s),
                     TL_OPT_V("--dist", &dist_s),   TL_OPT_V("--rotate", &rot_s), TL_OPT_V("--seed", &seed_s),
                     TL_OPT_V("--format", &fmt_s),  TL_OPT_L("--input", inputs, 3, &ninputs), TL_OPT_END};
    tl_prefill_shape s;
    tl_prefill_dist dist = TL_PREFILL_DIST_NORMAL;
    tl_rotation rot = TL_ROT_NONE;
    tl_format fmt = TL_FMT_TABLE;
    long seq = -1, kv = 2, seedv = -1;
    int rc = tl_opts_parse(argc, argv, opts, "numerics attention-error", NULL, 0, NULL);
    if (rc || (rc = tl_prefill_shape_parse(shape_s, &s)) || (rc = tl_prefill_shape_check(&s)) ||
        (seq_s && (rc = tl_parse_long(seq_s, 1, TL_PREFILL_MAX_SEQ, "--seq", &seq))) ||
        (kv_s && strcmp(kv_s, "all") != 0 && (rc = tl_parse_long(kv_s, 1, TL_PREFILL_MAX_HEADS, "--kv-heads", &kv))) ||
        (dist_s && (rc = tl_prefill_dist_parse(dist_s, &dist))) || (rot_s && (rc = tl_rotation_parse(rot_s, &rot))) ||
        (fmt_s && (rc = tl_parse_format(fmt_s, &fmt))) ||
        (seed_s && (rc = tl_parse_long(seed_s, 0, 0x7FFFFFFFFFFFFFFFL, "--seed", &seedv))))
        return rc;
    if (ninputs && (kv_s || dist_s))
        return tl_error(TL_EUSAGE, "--input", "takes the heads and values from the files: no --kv-heads or --dist");
    int full_kv = 1; /* every KV head of the shape */
    if (ninputs == 0 && !(kv_s && strcmp(kv_s, "all") == 0)) {
        const int gqa = s.heads / s.kv_heads;
        if (kv_s && kv > s.kv_heads)
            return tl_error(TL_EUSAGE, "--kv-heads", "%ld, but %s has %d", kv, shape_s, s.kv_heads);
        if (kv < s.kv_heads) s.kv_heads = (int)kv, s.heads = (int)kv * gqa, full_kv = 0;
    }
    s.seq = seq > 0 ? seq : 1024;
    tl_npy files[3];
    memset(files, 0, sizeof files);
    float *q = NULL, *k = NULL, *v = NULL;
    const uint64_t seed = seedv >= 0 ? (uint64_t)seedv : tl_fresh_seed();
    if (ninputs) rc = read_inputs(inputs, ninputs, files);
    if (!rc) rc = load_or_make(&s, files, ninputs > 0, seq, rot, dist, seed, &q, &k, &v);
    tl_prefill_err_row rows[TL_PREFILL_STUDY_MAX_ROWS];
    int n = 0;
    if (!rc) rc = tl_prefill_error_study(&s, q, k, v, rot, seed ^ 0x707ULL, rows, &n);
    if (!rc)
        rc = print_study(&s, shape_s, full_kv, ninputs ? "user" : tl_prefill_dist_name(dist), ninputs ? -1 : (long long)seed,
                    rows, n, fmt);
    for (int j = 0; j < 3; j++) tl_npy_free(&files[j]);
    free(q), free(k), free(v);
    return rc;
}
