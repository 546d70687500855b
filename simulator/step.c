/* simulator/step.c: a whole model step from the ops' own models (simulator/step.h says what it
 * walks and charges). Each call_* function sets one kernel's shape exactly as the op row's `sim`
 * builds it from the command the call records (ops/OP.c: case_shape and its model function), runs
 * that op's model, and keeps its time, bytes, FLOPs and limiter. */
#include "step.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../contract/decode.h"
#include "../contract/indexer.h"
#include "../contract/prefill.h"
#include "../contract/quant.h"
#include "../contract/topk.h"
#include "../contract/worklist.h"
#include "decode.h"
#include "indexer.h"
#include "prefill.h"
#include "quant.h"
#include "topk.h"

#define STEP_MAX_PREFILL_LENGTHS 8 /* distinct prompt lengths a prefill step takes */

static const char *const op_names[TL_STEP_NOPS] = {"attention", "indexer", "topk",     "moe",
                                                   "quant",     "gemm",    "dispatch", "all-reduce"};
static const char *const layer_names[TL_STEP_NLAYERS] = {"dense layer", "moe layer", "lm head"};

const char *tl_step_op_name(tl_step_op op) { return op >= 0 && op < TL_STEP_NOPS ? op_names[op] : "?"; }
const char *tl_step_layer_name(tl_step_layer l) { return l >= 0 && l < TL_STEP_NLAYERS ? layer_names[l] : "?"; }

int tl_step_phase_parse(const char *s, tl_step_phase *out)
{
    if (s && strcmp(s, "decode") == 0) *out = TL_STEP_DECODE;
    else if (s && strcmp(s, "prefill") == 0) *out = TL_STEP_PREFILL;
    else return tl_error(TL_EUSAGE, "--phase", "'%s' is not decode or prefill", s ? s : "(null)");
    return TL_OK;
}

/* ---- the walk's state ---- */

typedef struct {
    const tl_step_problem *p;
    const tl_hw *hw;
    const tl_model *m;
    int heads;          /* query heads a GPU (attention TP) */
    int kv_heads;       /* KV heads a GPU (GQA; at least 1) */
    int batch;          /* requests a GPU's attention serves */
    long tokens;        /* tokens a GPU's attention and projections see a step */
    long moe_tokens;    /* tokens the MoE model of a GPU routes */
    tl_model moe_model; /* the model the MoE calls run: the config's, or E / ep experts */
    int moe_local;      /* 1: moe_model is the EP-local copy (no `sim moe` command gives it) */
    int moe_tp;         /* the expert width's split */
    int32_t *lens;      /* [batch] each request's positions (decode) or prompt (prefill) */
    long most;          /* the longest of them */
} walk;

static void set_cmd(tl_step_call *c, const char *op_row, int part, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->cmd, sizeof c->cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof c->cmd) c->cmd[0] = '\0'; /* too long to give (a long --lens list) */
    snprintf(c->op_row, sizeof c->op_row, "%s", c->cmd[0] ? op_row : "");
    c->part = part;
}

static void fill(tl_step_call *c, tl_step_op op, const char *name, double us, double fixed_us, double bytes,
                 double flops, const char *limiter, int kernels)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->fixed_us = fixed_us;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->time_us = us, c->hbm_bytes = bytes, c->flops = flops, c->kernels = kernels;
    snprintf(c->limiter, sizeof c->limiter, "%s", limiter ? limiter : "?");
}

static int push(tl_step_result *r, tl_step_layer layer, long count, const tl_step_call *c)
{
    if (r->n_calls >= TL_STEP_MAX_CALLS) return tl_error(TL_EFAIL, "sim step", "more than %d calls", TL_STEP_MAX_CALLS);
    tl_step_call *d = &r->calls[r->n_calls++];
    *d = *c;
    d->layer = layer;
    d->count = count;
    return TL_OK;
}

/* ---- one call per op kind ---- */

static int call_gemm(const walk *w, const char *name, long m, long n, long k, int batch, tl_gemm_dtype d,
                     tl_step_call *c)
{
    tl_gemm_problem gp = {w->hw, m, n, k, batch, d};
    tl_gemm_result g;
    int rc = tl_gemm_sim(&gp, &g);
    if (rc) return rc;
    fill(c, TL_STEP_GEMM, name, g.time_us, g.fixed_us, g.hbm_bytes, g.flops_useful, g.limiter, g.kernels);
    /* no op row: the shape, for the torch peer that times it (bench/torch_step_gemm.py) */
    set_cmd(c, "", 0, "gemm m=%ld n=%ld k=%ld batch=%d dtype=%s", m, n, k, batch, tl_gemm_dtype_name(d));
    return TL_OK;
}

/* The fused quantization of `rows` x k activations (ops/quant.c's shape: row scales, no UE8M0, the
 * floor rule, top-k 8); k rounded up to the scheme's group where the width is not a multiple. */
static int call_quant(const walk *w, const char *name, long rows, long k, tl_quant_scheme_id scheme, tl_step_call *c)
{
    const long group = scheme == TL_QUANT_MXFP8 || scheme == TL_QUANT_MXFP4 ? TL_QUANT_MX_BLOCK : TL_QUANT_GROUP;
    tl_quant_shape s = {scheme, rows, (k + group - 1) / group * group, 0, 0, TL_QUANT_SCALES_ROW, 0, 8};
    tl_quant_result q;
    int rc = tl_quant_sim(w->hw, &s, &q);
    if (rc) return rc;
    fill(c, TL_STEP_QUANT, name, q.time_us, q.launch_us, q.bytes, q.flops, q.limiter, 1);
    set_cmd(c, "quant", 0, "sim quant --hw %s --scheme %s --rows %ld --k %ld", w->p->hw_spec,
            tl_quant_scheme_id_name(scheme), s.rows, s.k);
    return TL_OK;
}

/* One stage of the fused MoE as `sim moe` models it (ops/moe.c, moe_modelled with the tilelab
 * kernel: random routing, seed 1, no shared expert fused; TILELAB_MOE_PREFILL honoured alike). */
static int moe_tilelab(tl_moe_problem *sp)
{
    const int forced = tl_moe_prefill_forced();
    if (forced == 0) return tl_moe_tilelab_kernel_gemm(sp);
    if (forced == 1 && sp->dtype == TL_MOE_BF16 && sp->hw && strncmp(sp->hw->arch, "sm_90", 5) == 0) {
        tl_moe_problem t = *sp;
        if (tl_moe_tilelab_kernel_prefill(&t) == 0) {
            *sp = t;
            return 0;
        }
        tl_clear_error();
    }
    return tl_moe_tilelab_kernel(sp);
}

static int call_moe(const walk *w, int stage, tl_step_call *c, double *weight_bytes)
{
    if (w->moe_tokens > 2147483647L) return tl_error(TL_EUSAGE, "sim step", "%ld MoE tokens a GPU", w->moe_tokens);
    tl_moe_problem sp;
    memset(&sp, 0, sizeof sp);
    sp.hw = w->hw;
    sp.model = &w->moe_model;
    sp.dtype = w->p->experts;
    sp.tokens = (int)w->moe_tokens;
    sp.stage = stage;
    int rc = tl_routing_parse("random", &sp.routing);
    sp.seed = 1;
    sp.tp = w->moe_tp;
    sp.tile_m = TL_MOE_TILE_M;
    sp.tile_n = 128;
    if (!rc) rc = moe_tilelab(&sp);
    tl_moe_result m;
    if (!rc) rc = tl_moe_sim(&sp, &m);
    if (rc) return rc;
    char name[32];
    snprintf(name, sizeof name, "moe stage %d", stage);
    fill(c, TL_STEP_MOE, name, m.time_us, m.fixed_us, m.hbm_bytes, m.flops_useful, m.limiter, m.kernels > 0 ? m.kernels : 1);
    *weight_bytes = m.weight_bytes;
    tl_moe_result_free(&m);
    if (!w->moe_local)
        set_cmd(c, "moe", stage - 1, "sim moe --hw %s --model %s --dtype %s --tokens %ld --tp %d --stage %d",
                w->p->hw_spec, w->p->model_spec, tl_moe_dtype_name(w->p->experts), w->moe_tokens, w->moe_tp, stage);
    else /* not a command as it stands: `sim moe` of a copy of the config with these experts and routes */
        set_cmd(c, "", stage - 1, "sim moe --hw %s --model %s --dtype %s --tokens %ld --tp 1 --stage %d (EP-local: "
                "n_routed_experts %d, num_experts_per_tok %d)", w->p->hw_spec, w->p->model_spec,
                tl_moe_dtype_name(w->p->experts), w->moe_tokens, stage, w->moe_model.n_experts, w->moe_model.top_k);
    return TL_OK;
}

/* The lengths as `sim decode` takes them: --batch B --seq L when all alike, else --lens. */
static void lens_args(const walk *w, int batch, char *buf, size_t n)
{
    int same = 1;
    for (int b = 1; b < batch; b++) same &= w->lens[b % w->batch] == w->lens[0];
    if (same) {
        snprintf(buf, n, "--batch %d --seq %d", batch, w->lens[0]);
        return;
    }
    size_t used = (size_t)snprintf(buf, n, "--lens ");
    for (int b = 0; b < batch && used < n; b++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", b ? "," : "", w->lens[b % w->batch]);
    if (used >= n) buf[0] = '\0';
}

/* The decode op's shape over `batch` requests (lens[b % w->batch]; ops/decode.c's case_shape: the
 * pools sized to the lengths, the latent cache's stride the longest). */
static int call_decode(const walk *w, tl_decode_shape *s, int batch, const char *name, const char *kind_args,
                       tl_step_call *c)
{
    int32_t *lens = malloc((size_t)batch * sizeof *lens);
    if (!lens) return tl_error(TL_EFAIL, "sim step", "out of memory");
    long most = 1, blocks = 0;
    for (int b = 0; b < batch; b++) {
        lens[b] = w->lens[b % w->batch];
        if (lens[b] > most) most = lens[b];
        blocks += (lens[b] + TL_DECODE_PAGE - 1) / TL_DECODE_PAGE;
    }
    s->batch = batch, s->lens = lens, s->kv = w->p->kv_fp8 ? TL_DECODE_KV_FP8 : TL_DECODE_KV_BF16;
    if (s->kind == TL_DECODE_PAGED) {
        s->max_blocks = (int)((most + TL_DECODE_PAGE - 1) / TL_DECODE_PAGE);
        s->pages = blocks > 0 ? blocks : 1;
    } else {
        s->max_len = most;
    }
    tl_decode_model_result d;
    int rc = tl_decode_shape_check(s);
    if (!rc) rc = tl_decode_model(w->hw, s, NULL, 0, &d);
    if (!rc) {
        fill(c, TL_STEP_ATTENTION, name, d.time_us, d.fixed_us, d.hbm_bytes, d.flops, d.limiter, d.shards > 1 ? 2 : 1);
        char la[TL_STEP_CMD_LEN];
        lens_args(w, batch, la, sizeof la);
        if (la[0])
            set_cmd(c, "decode", 0, "sim decode --hw %s %s --kv %s %s", w->p->hw_spec, kind_args,
                    w->p->kv_fp8 ? "fp8" : "bf16", la);
    }
    free(lens);
    return rc;
}

static int call_indexer(const walk *w, long rows, long kv, long prefix, tl_step_call *c)
{
    tl_indexer_problem ip;
    memset(&ip, 0, sizeof ip);
    ip.hw = w->hw;
    ip.shape.rows = rows, ip.shape.kv = kv, ip.shape.heads = w->m->index_n_heads, ip.shape.dim = TL_INDEXER_DIM;
    ip.shape.prefix = prefix;
    tl_indexer_result x;
    int rc = tl_indexer_shape_check(&ip.shape);
    if (!rc) rc = tl_indexer_sim(&ip, &x);
    if (rc) return rc;
    fill(c, TL_STEP_INDEXER, "indexer", x.time_us, x.fixed_us, x.hbm_bytes, x.flops, x.limiter, 1);
    set_cmd(c, "indexer", 0, "sim indexer --hw %s --rows %ld --kv %ld --heads %d --prefix %ld", w->p->hw_spec, rows,
            kv, ip.shape.heads, prefix);
    return TL_OK;
}

static int call_topk(const walk *w, int batch, long n, int causal, tl_step_call *c)
{
    tl_topk_problem tp = {w->hw, {batch, n, w->m->index_topk, causal, NULL, 0, TL_TOPK_F32}, 0, TL_TOPK_RESIDENT};
    tl_topk_result t;
    int rc = tl_topk_shape_check(&tp.shape);
    if (!rc) rc = tl_topk_sim(&tp, &t);
    if (rc) return rc;
    fill(c, TL_STEP_TOPK, "top-k", t.time_us, t.launch_us, t.hbm_bytes, 0, t.limiter, 1);
    set_cmd(c, "topk", 0, "sim topk --hw %s --n %ld --batch %d --k %d%s", w->p->hw_spec, n, batch, w->m->index_topk,
            causal ? " --causal" : "");
    return TL_OK;
}

static int call_prefill(const walk *w, long seq, int heads, int kv_heads, int dqk, int dv, tl_step_call *c)
{
    tl_prefill_shape s = {heads, kv_heads, dqk, dv, seq, 1, 0, w->p->kv_fp8 ? TL_PREFILL_FP8 : TL_PREFILL_BF16};
    tl_prefill_model_result f;
    int rc = tl_prefill_shape_check(&s);
    if (!rc) rc = tl_prefill_model(w->hw, &s, &f);
    if (rc) return rc;
    fill(c, TL_STEP_ATTENTION, "prefill attention", f.time_us, f.fixed_us, f.hbm_bytes, f.flops, f.limiter, 1);
    set_cmd(c, "prefill", 0, "sim prefill --hw %s --shape %dx%dx%dx%d --seq %ld --dtype %s", w->p->hw_spec, heads,
            kv_heads, dqk, dv, seq, tl_prefill_dtype_name(s.dtype));
    return TL_OK;
}

static int call_dispatch(const walk *w, const char *name, tl_payload_kind kind, tl_step_call *c)
{
    tl_dispatch_result d;
    int rc = tl_dispatch_sim(w->hw, kind, w->m->hidden, w->m->top_k, w->p->ep, w->tokens, &d);
    if (rc) return rc;
    fill(c, TL_STEP_DISPATCH, name, d.time_us, 0, d.sent_bytes, 0, "link", 0);
    snprintf(c->cmd, sizeof c->cmd, "sim dispatch --hw %s --model %s --ep %d --tokens %ld (payload %s)",
             w->p->hw_spec, w->p->model_spec, w->p->ep, w->tokens, tl_payload_name(kind));
    return TL_OK;
}

/* A small all-reduce of the tokens' hidden states in bf16 over the TP group: the preset's latency
 * and the ring's 2 (tp - 1) / tp of the bytes over one GPU's links. */
static void call_allreduce(const walk *w, const char *name, tl_step_call *c)
{
    const int tp = w->p->tp;
    const double bytes = (double)w->tokens * w->m->hidden * 2.0;
    const double link = w->hw->link_gbps > 0 ? w->hw->link_gbps : 1e-3;
    const double wire_us = 2.0 * (tp - 1) / tp * bytes / (link * 1e3);
    const double us = w->hw->allreduce_us + wire_us;
    fill(c, TL_STEP_ALLREDUCE, name, us, w->hw->allreduce_us, 0, 0, wire_us > w->hw->allreduce_us ? "link" : "latency", 1);
}

/* ---- the layers ---- */

typedef struct {
    tl_step_call c[32];
    int n;
} call_list;

static tl_step_call *next_call(call_list *l) { return l->n < 32 ? &l->c[l->n++] : NULL; }

static int add_gemm(const walk *w, call_list *l, const char *name, long m, long n, long k, int batch, tl_gemm_dtype d)
{
    tl_step_call *c = next_call(l);
    return c ? call_gemm(w, name, m, n, k, batch, d, c) : tl_error(TL_EFAIL, "sim step", "too many calls");
}

static int add_quant(const walk *w, call_list *l, const char *name, long rows, long k, tl_quant_scheme_id s)
{
    tl_step_call *c = next_call(l);
    return c ? call_quant(w, name, rows, k, s, c) : tl_error(TL_EFAIL, "sim step", "too many calls");
}

/* A dense projection's input quantization (dense fp8 only). */
static int add_dense_quant(const walk *w, call_list *l, const char *name, long rows, long k)
{
    return w->p->dense == TL_GEMM_FP8 ? add_quant(w, l, name, rows, k, TL_QUANT_FP8) : TL_OK;
}

static int add_allreduce(const walk *w, call_list *l, const char *name)
{
    if (w->p->tp < 2) return TL_OK;
    tl_step_call *c = next_call(l);
    if (!c) return tl_error(TL_EFAIL, "sim step", "too many calls");
    call_allreduce(w, name, c);
    return TL_OK;
}

static int is_mla(const tl_model *m) { return m->kv_lora_rank > 0; }
static int is_dsa(const tl_model *m) { return m->kv_lora_rank > 0 && m->index_topk > 0 && m->index_n_heads > 0; }

/* The attention of a decode step: DSA, MLA or GQA (step.h). */
static int decode_attention(const walk *w, call_list *l)
{
    const tl_model *m = w->m;
    const int T = w->p->tokens_per_step, B = w->batch;
    tl_step_call *c;
    tl_decode_shape s;
    memset(&s, 0, sizeof s);
    char kind[160];
    if (is_mla(m)) {
        if (T > TL_DECODE_MAX_MTP)
            return tl_error(TL_EUSAGE, "--tokens-per-step", "%d: the dual-scope decode takes at most %d query tokens a "
                            "request (contract/decode.h)", T, TL_DECODE_MAX_MTP);
        const int heads = w->heads < 16 ? 16 : (w->heads + 15) / 16 * 16;
        int rc = TL_OK;
        if (is_dsa(m)) {
            /* the batch's rows as one launch: row i sees the request's positions before the step and
             * i + 1 more (step.h), one request's K */
            const long rows = (long)B * T, prefix = w->most > T ? w->most - T : 0, kv = prefix + rows;
            if (!(c = next_call(l)) || (rc = call_indexer(w, rows, kv, prefix, c))) return rc ? rc : TL_EFAIL;
            if (!(c = next_call(l)) || (rc = call_topk(w, B * T, w->most, 0, c))) return rc ? rc : TL_EFAIL;
        }
        s.kind = TL_DECODE_DUAL_SCOPE, s.heads = heads, s.mtp = T;
        s.window = is_dsa(m) ? 0 : w->most;
        s.topk = is_dsa(m) ? m->index_topk : 0;
        if (s.topk > TL_DECODE_MAX_TOPK) s.topk = TL_DECODE_MAX_TOPK;
        snprintf(kind, sizeof kind, "--kind dual-scope --heads %d --mtp %d --window %ld --topk %d", heads, T, s.window,
                 s.topk);
        if (!(c = next_call(l))) return tl_error(TL_EFAIL, "sim step", "too many calls");
        return call_decode(w, &s, B, is_dsa(m) ? "sparse MLA decode" : "MLA decode", kind, c);
    }
    /* GQA: the paged kernel's heads are 128 wide; pairs of narrower KV heads count as one */
    const int gqa = w->heads / w->kv_heads;
    int kvh = w->kv_heads;
    if (m->head_dim != TL_DECODE_PAGED_DIM && (long)kvh * m->head_dim % TL_DECODE_PAGED_DIM == 0)
        kvh = (int)((long)kvh * m->head_dim / TL_DECODE_PAGED_DIM);
    int g = gqa, batch = B;
    if ((long)gqa * T <= TL_DECODE_MAX_GQA) g = gqa * T; /* the speculative queries share their KV head */
    else batch = B * T;                                 /* else each is a request of its own */
    if (batch > TL_DECODE_MAX_BATCH)
        return tl_error(TL_EUSAGE, "sim step", "%d decode rows a GPU (the paged decode takes %d)", batch,
                        TL_DECODE_MAX_BATCH);
    s.kind = TL_DECODE_PAGED, s.kv_heads = kvh, s.gqa = g;
    snprintf(kind, sizeof kind, "--kind paged --kv-heads %d --gqa %d", kvh, g);
    if (!(c = next_call(l))) return tl_error(TL_EFAIL, "sim step", "too many calls");
    return call_decode(w, &s, batch, "paged decode", kind, c);
}

/* The attention of a prefill: per distinct prompt length, its own call (count: its requests). */
static int prefill_attention(const walk *w, call_list *l, long *counts)
{
    const tl_model *m = w->m;
    const int mla = is_mla(m);
    const int dqk = mla ? m->qk_nope_head_dim + m->qk_rope_head_dim : m->head_dim;
    const int dv = mla ? m->v_head_dim : m->head_dim;
    long seen[STEP_MAX_PREFILL_LENGTHS];
    int n = 0, rc = TL_OK;
    for (int b = 0; b < w->batch && !rc; b++) {
        int j = 0;
        while (j < n && seen[j] != w->lens[b]) j++;
        if (j < n) continue;
        if (n == STEP_MAX_PREFILL_LENGTHS)
            return tl_error(TL_EUSAGE, "--context", "more than %d distinct prompt lengths in one prefill step",
                            STEP_MAX_PREFILL_LENGTHS);
        seen[n++] = w->lens[b];
        long reqs = 0;
        for (int q = 0; q < w->batch; q++) reqs += w->lens[q] == w->lens[b];
        const long L = w->lens[b];
        tl_step_call *c;
        if (is_dsa(m)) {
            if (!(c = next_call(l)) || (rc = call_indexer(w, L, L, 0, c))) return rc ? rc : TL_EFAIL;
            counts[l->n - 1] = reqs;
            if (L > TL_TOPK_MAX_BATCH)
                return tl_error(TL_EUSAGE, "--context", "%ld prompt tokens: the top-k model takes %d rows a call", L,
                                TL_TOPK_MAX_BATCH);
            if (!(c = next_call(l)) || (rc = call_topk(w, (int)L, L, 1, c))) return rc ? rc : TL_EFAIL;
            counts[l->n - 1] = reqs;
        }
        if (!(c = next_call(l))) return tl_error(TL_EFAIL, "sim step", "too many calls");
        rc = call_prefill(w, L, w->heads, mla ? w->heads : w->kv_heads, dqk, dv, c);
        counts[l->n - 1] = reqs;
    }
    return rc;
}

/* Every layer's attention block: projections, attention, o, all-reduce. counts[i]: the calls of
 * l->c[i] a layer (1 unless set). */
static int attention_block(const walk *w, call_list *l, long *counts)
{
    const tl_model *m = w->m;
    const tl_gemm_dtype d = w->p->dense;
    const long M = w->tokens;
    const int decode = w->p->phase == TL_STEP_DECODE;
    int rc = add_dense_quant(w, l, "quant: attention input", M, m->hidden);
    if (!rc && is_mla(m)) {
        const int nope = m->qk_nope_head_dim, rope = m->qk_rope_head_dim, v = m->v_head_dim, h = w->heads;
        if (m->q_lora_rank > 0) {
            rc = add_gemm(w, l, "q_a + kv_a proj", M, m->q_lora_rank + m->kv_lora_rank + rope, m->hidden, 1, d);
            if (!rc) rc = add_dense_quant(w, l, "quant: q_b input", M, m->q_lora_rank);
            if (!rc) rc = add_gemm(w, l, "q_b proj", M, (long)h * (nope + rope), m->q_lora_rank, 1, d);
        } else {
            rc = add_gemm(w, l, "q + kv_a proj", M, (long)h * (nope + rope) + m->kv_lora_rank + rope, m->hidden, 1, d);
        }
        if (!rc && is_dsa(m)) {
            const long qin = m->q_lora_rank > 0 ? m->q_lora_rank : m->hidden;
            rc = add_gemm(w, l, "indexer wq_b", M, (long)m->index_n_heads * m->index_head_dim, qin, 1, d);
            if (!rc) rc = add_gemm(w, l, "indexer wk + weights", M, m->index_head_dim + m->index_n_heads, m->hidden, 1, d);
        }
        if (!rc && decode) rc = add_gemm(w, l, "W_UK (absorbed, per head)", M, m->kv_lora_rank, nope, h, TL_GEMM_BF16);
        if (!rc && !decode) rc = add_gemm(w, l, "kv_b proj", M, (long)h * (nope + v), m->kv_lora_rank, 1, d);
        if (!rc) rc = decode ? decode_attention(w, l) : prefill_attention(w, l, counts);
        if (!rc && decode) rc = add_gemm(w, l, "W_UV (absorbed, per head)", M, v, m->kv_lora_rank, h, TL_GEMM_BF16);
        if (!rc) rc = add_dense_quant(w, l, "quant: o_proj input", M, (long)h * v);
        if (!rc) rc = add_gemm(w, l, "o_proj", M, m->hidden, (long)h * v, 1, d);
    } else if (!rc) {
        const long D = m->head_dim;
        rc = add_gemm(w, l, "qkv proj", M, (w->heads + 2L * w->kv_heads) * D, m->hidden, 1, d);
        if (!rc) rc = decode ? decode_attention(w, l) : prefill_attention(w, l, counts);
        if (!rc) rc = add_dense_quant(w, l, "quant: o_proj input", M, w->heads * D);
        if (!rc) rc = add_gemm(w, l, "o_proj", M, m->hidden, w->heads * D, 1, d);
    }
    if (!rc) rc = add_allreduce(w, l, "all-reduce after attention");
    return rc;
}

static int dense_mlp(const walk *w, call_list *l)
{
    const tl_model *m = w->m;
    const long M = w->tokens, I = m->dense_width / w->p->tp;
    int rc = add_dense_quant(w, l, "quant: mlp input", M, m->hidden);
    if (!rc) rc = add_gemm(w, l, "mlp gate+up", M, 2 * I, m->hidden, 1, w->p->dense);
    if (!rc) rc = add_dense_quant(w, l, "quant: mlp down input", M, I);
    if (!rc) rc = add_gemm(w, l, "mlp down", M, m->hidden, I, 1, w->p->dense);
    if (!rc) rc = add_allreduce(w, l, "all-reduce after mlp");
    return rc;
}

static tl_payload_kind payload_of(tl_moe_dtype d)
{
    return d == TL_MOE_FP8 ? TL_PAYLOAD_FP8 : tl_moe_mx_acts(d) ? TL_PAYLOAD_MXFP8 : TL_PAYLOAD_BF16;
}

/* The MoE block; *expert_bytes gets one layer's expert weight bytes on this GPU. */
static int moe_block(const walk *w, call_list *l, double *expert_bytes)
{
    const tl_model *m = w->m;
    const long M = w->tokens;
    const int dp = w->p->ep > 1 && w->p->tp == 1;
    tl_step_call *c;
    int rc = add_gemm(w, l, "router", M, m->n_experts, m->hidden, 1, TL_GEMM_BF16);
    if (!rc && w->p->experts == TL_MOE_FP8) rc = add_quant(w, l, "quant: moe input (fp8)", M, m->hidden, TL_QUANT_FP8);
    if (!rc && tl_moe_mx_acts(w->p->experts))
        rc = add_quant(w, l, "quant: moe input (mxfp8)", M, m->hidden, TL_QUANT_MXFP8);
    if (!rc && dp) {
        if (!(c = next_call(l))) return tl_error(TL_EFAIL, "sim step", "too many calls");
        rc = call_dispatch(w, "ep dispatch", payload_of(w->p->experts), c);
    }
    *expert_bytes = 0;
    for (int s = 1; s <= 2 && !rc; s++) {
        double wb = 0;
        if (!(c = next_call(l))) return tl_error(TL_EFAIL, "sim step", "too many calls");
        rc = call_moe(w, s, c, &wb);
        *expert_bytes += wb;
    }
    const long shared = (long)m->n_shared * m->shared_width / (dp ? 1 : w->p->tp);
    const tl_gemm_dtype sd = w->p->experts == TL_MOE_FP8 || tl_moe_mx_acts(w->p->experts) ? TL_GEMM_FP8 : TL_GEMM_BF16;
    if (!rc && shared > 0) {
        rc = add_gemm(w, l, "shared expert gate+up", M, 2 * shared, m->hidden, 1, sd);
        if (!rc && sd == TL_GEMM_FP8) rc = add_quant(w, l, "quant: shared down input", M, shared, TL_QUANT_FP8);
        if (!rc) rc = add_gemm(w, l, "shared expert down", M, m->hidden, shared, 1, sd);
        if (!rc) *expert_bytes += 3.0 * m->hidden * shared * tl_gemm_weight_bytes(sd); /* both GEMMs' weights */
    }
    if (!rc && dp) {
        if (!(c = next_call(l))) return tl_error(TL_EFAIL, "sim step", "too many calls");
        rc = call_dispatch(w, "ep combine", TL_PAYLOAD_BF16, c);
    }
    if (!rc) rc = add_allreduce(w, l, "all-reduce after moe");
    return rc;
}

/* ---- the problem ---- */

static int check_problem(const tl_step_problem *p)
{
    if (!p || !p->hw || !p->model) return tl_error(TL_EUSAGE, "sim step", "no preset or model");
    if (p->batch < 1 || p->batch > TL_DECODE_MAX_BATCH)
        return tl_error(TL_EUSAGE, "--batch", "%d is outside 1..%d", p->batch, TL_DECODE_MAX_BATCH);
    if (!p->context || (p->n_context != 1 && p->n_context != p->batch))
        return tl_error(TL_EUSAGE, "--context", "give one length or one per request (%d)", p->batch);
    for (int i = 0; i < p->n_context; i++)
        if (p->context[i] < 1 || p->context[i] > TL_DECODE_MAX_LEN)
            return tl_error(TL_EUSAGE, "--context", "%ld is outside 1..%ld", p->context[i], TL_DECODE_MAX_LEN);
    if (p->tokens_per_step < 1 || p->tokens_per_step > 64)
        return tl_error(TL_EUSAGE, "--tokens-per-step", "%d is outside 1..64", p->tokens_per_step);
    if (p->phase == TL_STEP_PREFILL && p->tokens_per_step != 1)
        return tl_error(TL_EUSAGE, "--tokens-per-step", "a prefill takes each request's whole context (leave it 1)");
    if (p->tp < 1 || p->ep < 1 || p->tp > 64 || p->ep > 64)
        return tl_error(TL_EUSAGE, "--tp", "tp %d and ep %d must be in 1..64", p->tp, p->ep);
    if (p->ep > 1 && p->tp != 1 && p->tp != p->ep)
        return tl_error(TL_EUSAGE, "--ep", "ep %d with tp %d: the step models tp = 1 (data-parallel attention) or "
                        "tp = ep", p->ep, p->tp);
    const tl_model *m = p->model;
    if (m->n_heads < 1) return tl_error(TL_EUSAGE, "sim step", "model %s has no num_attention_heads", m->name);
    if (m->n_heads % p->tp) return tl_error(TL_EUSAGE, "--tp", "%d does not divide the %d heads", p->tp, m->n_heads);
    if (m->n_kv_heads >= p->tp && m->n_kv_heads % p->tp)
        return tl_error(TL_EUSAGE, "--tp", "%d does not divide the %d KV heads", p->tp, m->n_kv_heads);
    if (m->kv_lora_rank > 0 && (m->qk_nope_head_dim < 1 || m->qk_rope_head_dim < 1 || m->v_head_dim < 1))
        return tl_error(TL_EUSAGE, "sim step", "model %s is MLA (kv_lora_rank) but lacks qk_nope_head_dim, "
                        "qk_rope_head_dim or v_head_dim", m->name);
    if (m->n_experts > 0 && m->n_experts % p->ep)
        return tl_error(TL_EUSAGE, "--ep", "%d does not divide the %d experts", p->ep, m->n_experts);
    if (m->n_experts == 0 && p->ep > 1) return tl_error(TL_EUSAGE, "--ep", "model %s has no experts", m->name);
    const int moe_tp = p->ep > 1 ? 1 : p->tp;
    if (m->n_experts > 0 && m->moe_width % moe_tp)
        return tl_error(TL_EUSAGE, "--tp", "%d does not divide the expert width %d", moe_tp, m->moe_width);
    if (m->dense_width > 0 && m->dense_width % p->tp)
        return tl_error(TL_EUSAGE, "--tp", "%d does not divide the dense width %d", p->tp, m->dense_width);
    if (m->n_shared * m->shared_width % (p->ep > 1 && p->tp == 1 ? 1 : p->tp))
        return tl_error(TL_EUSAGE, "--tp", "%d does not divide the shared experts' width", p->tp);
    return TL_OK;
}

/* The walk's shapes a GPU sees (step.h: tokens, heads, the MoE's model). */
static int walk_init(const tl_step_problem *p, walk *w)
{
    memset(w, 0, sizeof *w);
    w->p = p, w->hw = p->hw, w->m = p->model;
    const tl_model *m = p->model;
    const int dp = p->ep > 1 && p->tp == 1;
    w->heads = m->n_heads / p->tp;
    w->kv_heads = m->n_kv_heads >= p->tp ? m->n_kv_heads / p->tp : 1;
    w->batch = dp ? (p->batch + p->ep - 1) / p->ep : p->batch;
    w->lens = malloc((size_t)w->batch * sizeof *w->lens);
    if (!w->lens) return tl_error(TL_EFAIL, "sim step", "out of memory");
    w->tokens = 0;
    w->most = 1;
    for (int b = 0; b < w->batch; b++) {
        w->lens[b] = (int32_t)p->context[p->n_context == 1 ? 0 : b];
        if (w->lens[b] > w->most) w->most = w->lens[b];
        w->tokens += p->phase == TL_STEP_DECODE ? p->tokens_per_step : w->lens[b];
    }
    w->moe_model = *m;
    w->moe_tp = p->ep > 1 ? 1 : p->tp;
    w->moe_tokens = w->tokens;
    if (p->ep > 1 && m->n_experts > 0) {
        const long group_tokens = dp ? w->tokens * p->ep : w->tokens; /* every GPU's rows come to its experts */
        w->moe_local = 1;
        w->moe_model.n_experts = m->n_experts / p->ep;
        if (m->top_k % p->ep == 0) {
            w->moe_model.top_k = m->top_k / p->ep;
            w->moe_tokens = group_tokens;
        } else {
            w->moe_model.top_k = 1;
            w->moe_tokens = (group_tokens * m->top_k + p->ep - 1) / p->ep;
        }
    }
    return TL_OK;
}

/* Appends a block's calls for `layers` layers of type `layer`. */
static int push_block(tl_step_result *r, tl_step_layer layer, int layers, const call_list *l, const long *counts)
{
    int rc = TL_OK;
    for (int i = 0; i < l->n && !rc; i++) rc = push(r, layer, (long)layers * (counts ? counts[i] : 1), &l->c[i]);
    return rc;
}

static void totals(const tl_step_problem *p, tl_step_result *r, long tokens)
{
    double best[TL_STEP_NOPS] = {0};
    for (int i = 0; i < r->n_calls; i++) {
        const tl_step_call *c = &r->calls[i];
        const double us = (double)c->count * c->time_us;
        r->step_us += us;
        r->op_us[c->op] += us;
        r->op_bytes[c->op] += (double)c->count * c->hbm_bytes;
        r->op_flops[c->op] += (double)c->count * c->flops;
        r->op_calls[c->op] += c->count;
        if (us > best[c->op]) best[c->op] = us, r->op_limiter[c->op] = r->calls[i].limiter;
        r->layer_us[c->layer] += us;
        r->hbm_bytes += (double)c->count * c->hbm_bytes;
        r->flops += (double)c->count * c->flops;
        r->kernels += c->count * c->kernels;
        r->fixed_us += (double)c->count * c->fixed_us;
        r->op_fixed_us[c->op] += (double)c->count * c->fixed_us;
    }
    r->tokens = p->phase == TL_STEP_DECODE ? (long)p->batch * p->tokens_per_step : tokens;
    r->per_token_us = r->step_us / (double)r->tokens;
}

int tl_step_sim(const tl_step_problem *p, tl_step_result *r)
{
    memset(r, 0, sizeof *r);
    int rc = check_problem(p);
    walk w;
    if (rc || (rc = walk_init(p, &w))) return rc;
    const tl_model *m = p->model;
    r->gpus = p->tp > p->ep ? p->tp : p->ep;
    r->layers[TL_STEP_LAYER_MOE] = m->n_experts > 0 ? m->moe_layers : 0;
    r->layers[TL_STEP_LAYER_DENSE] = m->n_layers - r->layers[TL_STEP_LAYER_MOE];
    r->layers[TL_STEP_LAYER_HEAD] = m->vocab_size > 0 ? 1 : 0;
    call_list attn = {0}, ffn;
    long counts[32];
    for (int i = 0; i < 32; i++) counts[i] = 1;
    rc = attention_block(&w, &attn, counts);
    double expert_layer = 0;
    for (int t = TL_STEP_LAYER_DENSE; t <= TL_STEP_LAYER_MOE && !rc; t++) {
        if (r->layers[t] == 0) continue;
        ffn.n = 0;
        rc = push_block(r, (tl_step_layer)t, r->layers[t], &attn, counts);
        if (!rc) rc = t == TL_STEP_LAYER_DENSE ? dense_mlp(&w, &ffn) : moe_block(&w, &ffn, &expert_layer);
        if (!rc) rc = push_block(r, (tl_step_layer)t, r->layers[t], &ffn, NULL);
    }
    if (!rc && r->layers[TL_STEP_LAYER_HEAD]) {
        ffn.n = 0;
        const long rows = p->phase == TL_STEP_DECODE ? w.tokens : w.batch; /* prefill: each request's last token */
        rc = add_gemm(&w, &ffn, "lm head", rows, m->vocab_size / p->tp, m->hidden, 1, TL_GEMM_BF16);
        if (!rc) rc = push_block(r, TL_STEP_LAYER_HEAD, 1, &ffn, NULL);
    }
    if (!rc) {
        long tokens = 0;
        for (int b = 0; b < p->batch; b++) tokens += p->context[p->n_context == 1 ? 0 : b];
        totals(p, r, tokens);
        r->expert_bytes = expert_layer * r->layers[TL_STEP_LAYER_MOE] * r->gpus;
        r->expert_floor_us = r->expert_bytes / (r->gpus * tl_ceiling_value(p->hw->ceilings.hbm_read_gbps) * 1e3);
    }
    free(w.lens);
    return rc;
}

/* m->unused without the keys the step reads (model.h: the MLA, vocab and window keys). */
static void unread_keys(const tl_model *m, char *out, size_t n)
{
    static const char *const step_keys[] = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                            "v_head_dim", "vocab_size", "sliding_window", NULL};
    char list[sizeof m->unused];
    snprintf(list, sizeof list, "%s", m->unused);
    size_t used = 0;
    out[0] = '\0';
    for (char *save = NULL, *k = strtok_r(list, ", ", &save); k; k = strtok_r(NULL, ", ", &save)) {
        int skip = 0;
        for (const char *const *s = step_keys; *s; s++) skip |= strcmp(*s, k) == 0;
        if (!skip && used < n) used += (size_t)snprintf(out + used, n - used, "%s%s", used ? ", " : "", k);
    }
}

void tl_step_not_modelled(const tl_step_problem *p, char *buf, size_t n)
{
    if (n == 0) return;
    const tl_model *m = p->model;
    size_t used = (size_t)snprintf(buf, n, "norms, rotary, residual adds, activations, sampling and the embedding "
                                           "gather (no kernels charged); compute-communication overlap");
#define ADD(...)                                                                                                       \
    do {                                                                                                               \
        if (used < n) used += (size_t)snprintf(buf + used, n - used, __VA_ARGS__);                                    \
    } while (0)
    if (m->sliding_window > 0) ADD("; sliding_window %d (every layer attends its whole context)", m->sliding_window);
    if (!is_mla(m) && m->head_dim != TL_DECODE_PAGED_DIM && p->phase == TL_STEP_DECODE)
        ADD("; head_dim %d (the paged decode's heads are 128: narrower KV heads paired where they pair up, else "
            "charged as 128)", m->head_dim);
    if (is_mla(m) && m->n_heads / p->tp < 16 && p->phase == TL_STEP_DECODE)
        ADD("; %d heads a GPU (the dual-scope decode charged at its 16-head block)", m->n_heads / p->tp);
    if (is_dsa(m) && p->phase == TL_STEP_PREFILL)
        ADD("; DSA's sparse prefill attention (charged as the dense causal prefill)");
    if (!is_mla(m) && (long)(m->n_heads / p->tp) / (m->n_kv_heads >= p->tp ? m->n_kv_heads / p->tp : 1) *
                              p->tokens_per_step > TL_DECODE_MAX_GQA && p->phase == TL_STEP_DECODE)
        ADD("; speculative queries beyond 16 a KV head (charged as requests of their own)");
    if (p->ep > 1 && m->top_k % p->ep)
        ADD("; EP routes (top-%d over %d GPUs: tokens x k / ep single routes)", m->top_k, p->ep);
    if (m->quant_method[0]) ADD("; quantization_config %s (the step's formats are its options)", m->quant_method);
    char keys[sizeof m->unused];
    unread_keys(m, keys, sizeof keys);
    if (keys[0]) ADD("; config keys no model reads: %s", keys);
#undef ADD
    if (used >= n && n > 4) memcpy(buf + n - 4, "...", 4);
}
