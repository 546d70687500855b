/* ops/decode_figs.c: the decode row's figure (`tilelab draw decode-shards`): one query row's key
 * scopes over its context, cut into the contract's shards, each shard's work-group time and the
 * merge from the model (simulator/decode.h), drawn by visualize/decode_figs.c; with --trace, the
 * same shards' measured times from `bench decode --trace`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../reference/decode.h"
#include "../simulator/decode.h"
#include "../visualize/decode_figs.h"
#include "ops.h"

static const char shards_usage[] =
    "usage: tilelab draw decode-shards [--kind dual-scope|paged] [--hw h200] [--seq 65536] [--window 128]\n"
    "                                  [--topk 2048] [--heads 128] [--kv fp8|bf16] [--kv-heads 8] [--gqa 8]\n"
    "                                  [--shards N] [--dist normal|edges] [--seed S] -o FILE\n"
    "       tilelab draw decode-shards --trace FILE.csv [--batch B] [--topk K] -o FILE\n"
    "  One query row (batch 1) of split-KV decode over its context: dual-scope, the window (the last W\n"
    "  positions) as a band and the top-k selected positions as ticks; paged, the request's positions\n"
    "  as one band. Below, the contract's shards (tl_decode_shard_range over the row's slots; default\n"
    "  the model's pick on the preset, at most 64 lanes), each lane holding its keys, each shard's\n"
    "  work-group time in the model, and the merge tree into O and LSE with the merge launch's time.\n"
    "  Simulated on the preset (simulator/decode.h).\n"
    "  With --trace (a `tilelab bench decode --trace` file): the measured run of its first case (of batch\n"
    "  B and k K when given): row 0's shard groups of head block 0 as lanes on one time axis, each\n"
    "  split into its phases (list and positions ready, first tile's loads, tiles, O and LSE written),\n"
    "  the merge blocks' span and the run's end, and each phase's median over every group.\n";

typedef struct {
    const char *kind, *hw, *seq, *window, *topk, *heads, *kv, *kv_heads, *gqa, *shards, *dist, *seed, *out, *trace,
        *batch;
} shards_args;

static int parse_shape(const shards_args *a, tl_decode_shape *s, int32_t *len, int *shards, tl_decode_dist *dist,
                       uint64_t *seed)
{
    memset(s, 0, sizeof *s);
    long seq;
    int rc = tl_decode_kind_parse(a->kind, &s->kind);
    if (!rc) rc = tl_parse_long(a->seq, 1, TL_DECODE_MAX_LEN, "--seq", &seq);
    const int paged = s->kind == TL_DECODE_PAGED;
    if (!rc) rc = tl_decode_kv_parse(a->kv ? a->kv : paged ? "bf16" : "fp8", &s->kv);
    if (!rc) rc = tl_parse_long(a->window, 0, TL_DECODE_MAX_WINDOW, "--window", &s->window);
    if (!rc) rc = tl_parse_int(a->topk, 0, TL_DECODE_MAX_TOPK, "--topk", &s->topk);
    if (!rc) rc = tl_parse_int(a->heads, 16, TL_DECODE_MAX_HEADS, "--heads", &s->heads);
    if (!rc) rc = tl_parse_int(a->kv_heads, 1, TL_DECODE_MAX_KV_HEADS, "--kv-heads", &s->kv_heads);
    if (!rc) rc = tl_parse_int(a->gqa, 1, TL_DECODE_MAX_GQA, "--gqa", &s->gqa);
    if (!rc) rc = tl_parse_int(a->shards, 0, TL_DECODE_FIG_MAX_SHARDS, "--shards", shards);
    if (!rc) rc = tl_decode_dist_parse(a->dist, dist);
    if (!rc && a->seed) rc = tl_ops_parse_seed(a->seed, seed);
    if (rc) return rc;
    *len = (int32_t)seq;
    s->batch = 1, s->lens = len, s->mtp = 1, s->max_len = seq;
    s->max_blocks = (int)((seq + TL_DECODE_PAGE - 1) / TL_DECODE_PAGE), s->pages = s->max_blocks;
    if (!paged) s->kv_heads = s->gqa = 0, s->max_blocks = 0, s->pages = 0;
    else s->heads = 0, s->window = 0, s->topk = 0;
    return tl_decode_shape_check(s);
}

/* The row's slots dealt to the shards: the window part of each and the counted top-k entries'
 * shards (by the contract's definition of the union). */
static int deal(const tl_decode_shape *s, const tl_hw *hw, const int32_t *list, int shards, tl_decode_fig_shard *sh,
                int32_t *sel, int *sel_shard, long *n_sel)
{
    const long slots = tl_decode_row_slots(s, 0);
    long wlo = 0, whi = s->lens[0];
    if (s->kind == TL_DECODE_DUAL_SCOPE) tl_decode_window(tl_decode_visible(s->lens[0], 1, 0), s->window, &wlo, &whi);
    const long wn = whi - wlo;
    *n_sel = 0;
    for (int k = 0; k < shards; k++) {
        tl_decode_fig_shard *x = &sh[k];
        tl_decode_shard_range(slots, shards, tl_decode_granule(s->kind), k, &x->slot_lo, &x->slot_hi);
        x->win_lo = wlo + (x->slot_lo < wn ? x->slot_lo : wn);
        x->win_hi = wlo + (x->slot_hi < wn ? x->slot_hi : wn);
        x->keys = x->win_hi - x->win_lo;
        for (long slot = x->slot_lo > wn ? x->slot_lo : wn; slot < x->slot_hi; slot++) {
            const int i = (int)(slot - wn);
            if (!tl_decode_topk_counts(list, i, wlo, whi)) continue;
            sel[*n_sel] = list[i], sel_shard[*n_sel] = k, (*n_sel)++;
            x->keys++;
        }
        x->us = x->keys ? tl_decode_model_group_us(hw, s, x->keys, shards) : 0;
    }
    return 0;
}

/* --trace: the measured run of the file's first (matching) case. */
static int draw_trace(const shards_args *a)
{
    int batch = -1, topk = -1, rc = 0;
    if (a->batch) rc = tl_parse_int(a->batch, 1, TL_DECODE_MAX_BATCH, "--batch", &batch);
    if (!rc && a->topk) rc = tl_parse_int(a->topk, 0, TL_DECODE_MAX_TOPK, "--topk", &topk);
    if (rc) return rc;
    tl_decode_trace_rec *rec = malloc(sizeof *rec * TL_DECODE_TRACE_MAX_RECORDS);
    if (!rec) return tl_error(TL_EFAIL, "decode-shards", "out of memory");
    tl_decode_trace_case tc;
    int n = 0;
    rc = tl_decode_trace_read(a->trace, batch, topk, &tc, rec, TL_DECODE_TRACE_MAX_RECORDS, &n);
    if (!rc) {
        char foot[400];
        snprintf(foot, sizeof foot, "measured on %.200s (bench decode --trace %.100s)", tc.source, a->trace);
        rc = tl_fig_decode_trace(a->out, foot, &tc, rec, n);
    }
    free(rec);
    return rc;
}

static int draw_shards(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, shards_usage)) return 0;
    shards_args a = {"dual-scope", "h200", "65536", "128", NULL, "128", NULL, "8", "8", "0", "normal", NULL, NULL, NULL, NULL};
    tl_opt opts[] = {TL_OPT_V("--kind", &a.kind),     TL_OPT_V("--hw", &a.hw),         TL_OPT_V("--seq", &a.seq),
                     TL_OPT_V("--window", &a.window), TL_OPT_V("--topk", &a.topk),     TL_OPT_V("--heads", &a.heads),
                     TL_OPT_V("--kv", &a.kv),         TL_OPT_V("--kv-heads", &a.kv_heads), TL_OPT_V("--gqa", &a.gqa),
                     TL_OPT_V("--shards", &a.shards), TL_OPT_V("--dist", &a.dist),     TL_OPT_V("--seed", &a.seed),
                     TL_OPT_V("-o", &a.out),          TL_OPT_V("--trace", &a.trace),   TL_OPT_V("--batch", &a.batch),
                     TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw decode-shards", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(a.out, "decode-shards")) || (rc = tl_ops_output_not_input(a.out, a.trace, "--trace")))
        return rc;
    if (a.trace) return draw_trace(&a);
    if (a.batch) return tl_error(TL_EUSAGE, "--batch", "picks a case of a --trace file (the simulated picture is batch 1)");
    if (!a.topk) a.topk = "2048";
    tl_decode_shape s;
    int32_t len;
    int shards = 0;
    tl_decode_dist dist = TL_DECODE_DIST_NORMAL;
    uint64_t seed = 1;
    tl_hw hw;
    if ((rc = parse_shape(&a, &s, &len, &shards, &dist, &seed)) || (rc = tl_hw_load(a.hw, &hw))) return rc;
    int32_t *list = calloc((size_t)s.topk + 1, sizeof *list), *sel = calloc((size_t)s.topk + 1, sizeof *sel);
    int *sel_shard = calloc((size_t)s.topk + 1, sizeof *sel_shard);
    tl_decode_fig_shard sh[TL_DECODE_FIG_MAX_SHARDS];
    tl_decode_model_result m;
    long n_sel = 0;
    if (!list || !sel || !sel_shard) rc = tl_error(TL_EFAIL, "decode-shards", "out of memory");
    if (!rc && s.topk) tl_decode_make_topk(&s, dist, seed, list);
    if (!rc) rc = tl_decode_model(&hw, &s, s.topk ? list : NULL, shards, &m);
    if (!rc && m.shards > TL_DECODE_FIG_MAX_SHARDS)
        rc = tl_error(TL_EUSAGE, "decode-shards", "the model picks %d shards on %s: more lanes than the picture's %d "
                      "(give --shards)", m.shards, hw.name, TL_DECODE_FIG_MAX_SHARDS);
    if (!rc) rc = deal(&s, &hw, list, m.shards, sh, sel, sel_shard, &n_sel);
    if (!rc) {
        const int paged = s.kind == TL_DECODE_PAGED;
        char title[200], sub[400], scope[96], foot[300];
        if (paged) {
            snprintf(title, sizeof title, "Paged decode: one request's pages cut into %d shard%s, merged by their LSEs",
                     m.shards, m.shards == 1 ? "" : "s");
            snprintf(sub, sizeof sub, "%s KV, %d KV heads x gqa %d, %ld positions in pages of 16; a work-group a (KV head, "
                     "shard): %ld of them, %.2f waves; model %.2f us (limiter %s)", tl_decode_kv_name(s.kv), s.kv_heads,
                     s.gqa, (long)len, m.groups, m.waves, m.time_us, m.limiter);
            snprintf(scope, sizeof scope, "the request's %ld positions", (long)len);
        } else {
            snprintf(title, sizeof title, "Dual-scope decode: window and top-%d in one softmax, cut into %d shard%s, "
                     "merged by their LSEs", s.topk, m.shards, m.shards == 1 ? "" : "s");
            snprintf(sub, sizeof sub, "%s latent KV (576 = 512 + 64 dims), H = %d in blocks of %d, context %ld; "
                     "%ld keys after the union; %ld work-groups, %.2f waves; model %.2f us (limiter %s); inputs %s, seed %llu",
                     tl_decode_kv_name(s.kv), s.heads, m.group_heads, (long)len, m.longest_keys, m.groups, m.waves,
                     m.time_us, m.limiter, tl_decode_dist_name(dist), (unsigned long long)seed);
            snprintf(scope, sizeof scope, "the window, the last %ld positions", s.window);
        }
        snprintf(foot, sizeof foot, "simulated on preset %s (simulator/decode.h); shards by the contract "
                 "(contract/decode.h, tl_decode_shard_range)", hw.name);
        tl_decode_fig f = {title, sub, foot, scope, len, paged ? 0 : sh[0].win_lo, paged ? len : sh[m.shards - 1].win_hi,
                           sel, sel_shard, n_sel, sh, m.shards, m.merge_us, m.time_us};
        if (!paged) { /* the whole window, whichever shards hold it */
            long lo, hi;
            tl_decode_window(tl_decode_visible(len, 1, 0), s.window, &lo, &hi);
            f.win_lo = lo, f.win_hi = hi;
        }
        rc = tl_fig_decode_shards(a.out, &f);
    }
    free(list), free(sel), free(sel_shard);
    return rc;
}

const tl_op_figure tl_decode_figures[] = {
    {"decode-shards", "one decode row's scopes over its context, its shards' times and the merge (simulated; or measured, --trace)",
     draw_shards},
    {NULL, NULL, NULL},
};
