/* tilelab sim step | draw step: a whole model step from the ops' own models (simulator/step.h)
 * and its picture (visualize/step.c). */
#include "cli.h"
#include "../ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/table.h"
#include "../simulator/step.h"
#include "../visualize/step_figs.h"

#define STEP_MAX_LIST 1024
#define STEP_MAX_POINTS 16

#define STEP_COMMON_USAGE                                                                                     \
    "  --model NAME|config.json   (default glm-5)        --hw PRESET (default mi355x; base,overlay.json too)\n" \
    "  --phase decode|prefill      (default decode)\n"                                                        \
    "  --context L|L1,L2,..        positions each request holds (decode) or its prompt (prefill);\n"        \
    "                              one for all, or one per request (default 1024)\n"                         \
    "  --tokens-per-step T         decode: 1 + speculative tokens a request (default 1)\n"                   \
    "  --tp N --ep N               tensor- and expert-parallel GPUs (default 1; ep > 1 with tp 1 or tp = ep)\n" \
    "  --kv-dtype bf16|fp8         attention KV cache (default bf16)\n"                                      \
    "  --experts bf16|fp8|a16w4|mxfp4|mxfp8   routed experts (default fp8)\n"                                 \
    "  --dense bf16|fp8            projections, dense MLPs (default fp8; shared experts follow --experts)\n"

static const char sim_step_usage[] =
    "usage: tilelab sim step [options] [--batch B] [--rows kinds|layers|calls] [--format table|csv|json]\n"
    "One model step on one GPU of a serving instance, each kernel charged with its own op's model (the\n"
    "function `tilelab sim OP` calls for the same shape: the calls table names each command) and the\n"
    "projections with a dense-GEMM tile model (simulator/gemm.h, a vendor library's GEMM as the peer).\n"
    "Nothing is added between kernels: the total is the kernels' floor, and a measured step's excess\n"
    "over it is what the engine spends beyond them (launches of kernels not listed, host time, waits).\n"
    STEP_COMMON_USAGE
    "  --batch B                   requests in the step (default 1)\n"
    "  --rows kinds|layers|calls   the CSV's table (default kinds; the text and JSON forms give all):\n"
    "    kinds   op,calls,time_us,share_pct,limiter,fixed_us,hbm_bytes,flops, then rows 'step' and\n"
    "            'per token' (fixed_us: of time_us, the calls' launch and fixed terms)\n"
    "    layers  layer,layers,time_us,share_pct,per_layer_us\n"
    "    calls   layer,op,name,count,time_us,total_us,share_pct,limiter,hbm_bytes,flops,cmd\n"
    "hbm_bytes and flops are one GPU's, a step (calls: one call's). simulator/step.h says what is walked\n"
    "and what is not modelled; the output names what of the model's config is left out.\n";

/* The options both verbs share. */
typedef struct {
    const char *model, *hw, *phase, *context, *tps, *tp, *ep, *kv, *experts, *dense, *batch, *fmt, *rows, *out,
        *measured, *measured_on;
} step_args;

typedef struct {
    tl_hw hw;
    tl_model model;
    tl_step_problem p;
    long context[STEP_MAX_LIST];
    long batches[STEP_MAX_POINTS];
    int n_batches;
} step_setup;

static int parse_setup(const step_args *a, step_setup *s, int many_batches)
{
    memset(s, 0, sizeof *s);
    tl_step_problem *p = &s->p;
    int rc = tl_hw_load(a->hw, &s->hw);
    if (!rc) rc = tl_model_load(a->model, &s->model);
    if (!rc) rc = tl_step_phase_parse(a->phase, &p->phase);
    if (!rc) rc = tl_parse_long_list(a->context, 1, 1L << 20, "--context", s->context, STEP_MAX_LIST, &p->n_context);
    if (!rc && p->n_context < 1) rc = tl_error(TL_EUSAGE, "--context", "no length given");
    if (!rc) rc = tl_parse_int(a->tps, 1, 64, "--tokens-per-step", &p->tokens_per_step);
    if (!rc) rc = tl_parse_int(a->tp, 1, 64, "--tp", &p->tp);
    if (!rc) rc = tl_parse_int(a->ep, 1, 64, "--ep", &p->ep);
    if (!rc && strcmp(a->kv, "bf16") != 0 && strcmp(a->kv, "fp8") != 0)
        rc = tl_error(TL_EUSAGE, "--kv-dtype", "'%s' is not bf16 or fp8", a->kv);
    p->kv_fp8 = strcmp(a->kv, "fp8") == 0;
    if (!rc) rc = tl_moe_dtype_parse(a->experts, &p->experts);
    if (!rc) rc = tl_gemm_dtype_parse(a->dense, &p->dense);
    if (!rc) rc = tl_parse_long_list(a->batch, 1, 1024, "--batch", s->batches, many_batches ? STEP_MAX_POINTS : 1,
                                     &s->n_batches);
    if (!rc && s->n_batches < 1) rc = tl_error(TL_EUSAGE, "--batch", "no batch given");
    if (rc) return rc;
    p->hw = &s->hw, p->model = &s->model, p->hw_spec = a->hw, p->model_spec = a->model;
    p->context = s->context;
    p->batch = (int)s->batches[0];
    return TL_OK;
}

static void step_defaults(step_args *a)
{
    memset(a, 0, sizeof *a);
    a->model = "glm-5", a->hw = "mi355x", a->phase = "decode", a->context = "1024", a->tps = "1", a->tp = "1";
    a->ep = "1", a->kv = "bf16", a->experts = "fp8", a->dense = "fp8", a->batch = "1";
}

static int step_opts(int argc, char **argv, const char *cmd, step_args *a, int draw)
{
    tl_opt opts[24];
    int n = 0;
#define ADD(name, field) opts[n++] = (tl_opt)TL_OPT_V(name, &a->field)
    ADD("--model", model);
    ADD("--hw", hw);
    ADD("--phase", phase);
    ADD("--context", context);
    ADD("--tokens-per-step", tps);
    ADD("--tp", tp);
    ADD("--ep", ep);
    ADD("--kv-dtype", kv);
    ADD("--experts", experts);
    ADD("--dense", dense);
    ADD("--batch", batch);
    if (draw) {
        ADD("-o", out);
        ADD("--measured", measured);
        ADD("--measured-on", measured_on);
    } else {
        ADD("--format", fmt);
        ADD("--rows", rows);
    }
#undef ADD
    opts[n] = (tl_opt)TL_OPT_END;
    return tl_opts_parse(argc, argv, opts, cmd, NULL, 0, NULL);
}

/* ---- the tables ---- */

static double share(double us, double total) { return total > 0 ? 100.0 * us / total : 0; }

static tl_table *kinds_table(const tl_step_result *r)
{
    tl_table *t = tl_table_new("op,calls,time_us,share_pct,limiter,fixed_us,hbm_bytes,flops");
    for (int k = 0; k < TL_STEP_NOPS; k++) {
        if (r->op_calls[k] == 0) continue;
        tl_table_row(t);
        tl_table_str(t, tl_step_op_name((tl_step_op)k));
        tl_table_int(t, r->op_calls[k]);
        tl_table_numf(t, "%.2f", r->op_us[k]);
        tl_table_numf(t, "%.1f", share(r->op_us[k], r->step_us));
        tl_table_str(t, r->op_limiter[k] ? r->op_limiter[k] : "-");
        tl_table_numf(t, "%.2f", r->op_fixed_us[k]);
        tl_table_numf(t, "%.0f", r->op_bytes[k]);
        tl_table_numf(t, "%.0f", r->op_flops[k]);
    }
    tl_table_row(t);
    tl_table_str(t, "step");
    tl_table_int(t, r->kernels);
    tl_table_numf(t, "%.2f", r->step_us);
    tl_table_numf(t, "%.1f", 100.0);
    tl_table_str(t, "-");
    tl_table_numf(t, "%.2f", r->fixed_us);
    tl_table_numf(t, "%.0f", r->hbm_bytes);
    tl_table_numf(t, "%.0f", r->flops);
    tl_table_row(t);
    tl_table_str(t, "per token");
    tl_table_none(t);
    tl_table_numf(t, "%.2f", r->per_token_us);
    tl_table_none(t);
    tl_table_str(t, "-");
    tl_table_numf(t, "%.2f", r->fixed_us / (double)r->tokens);
    tl_table_numf(t, "%.0f", r->hbm_bytes / (double)r->tokens);
    tl_table_numf(t, "%.0f", r->flops / (double)r->tokens);
    return t;
}

static tl_table *layers_table(const tl_step_result *r)
{
    tl_table *t = tl_table_new("layer,layers,time_us,share_pct,per_layer_us");
    for (int l = 0; l < TL_STEP_NLAYERS; l++) {
        if (r->layers[l] == 0) continue;
        tl_table_row(t);
        tl_table_str(t, tl_step_layer_name((tl_step_layer)l));
        tl_table_int(t, r->layers[l]);
        tl_table_numf(t, "%.2f", r->layer_us[l]);
        tl_table_numf(t, "%.1f", share(r->layer_us[l], r->step_us));
        tl_table_numf(t, "%.2f", r->layer_us[l] / r->layers[l]);
    }
    return t;
}

static tl_table *calls_table(const tl_step_result *r)
{
    tl_table *t = tl_table_new("layer,op,name,count,time_us,total_us,share_pct,limiter,hbm_bytes,flops,cmd");
    for (int i = 0; i < r->n_calls; i++) {
        const tl_step_call *c = &r->calls[i];
        tl_table_row(t);
        tl_table_str(t, tl_step_layer_name(c->layer));
        tl_table_str(t, tl_step_op_name(c->op));
        tl_table_str(t, c->name);
        tl_table_int(t, c->count);
        tl_table_numf(t, "%.3f", c->time_us);
        tl_table_numf(t, "%.2f", c->time_us * (double)c->count);
        tl_table_numf(t, "%.1f", share(c->time_us * (double)c->count, r->step_us));
        tl_table_str(t, c->limiter);
        tl_table_numf(t, "%.0f", c->hbm_bytes);
        tl_table_numf(t, "%.0f", c->flops);
        if (c->cmd[0]) tl_table_str(t, c->cmd);
        else tl_table_str(t, "(no command: the step's own term)");
    }
    return t;
}

static void describe(const tl_step_problem *p, char *buf, size_t n)
{
    snprintf(buf, n, "%s %s on %s: batch %d, context %ld%s, %d token%s a request, tp %d, ep %d, kv %s, experts %s, "
             "dense %s", p->model->name, p->phase == TL_STEP_DECODE ? "decode step" : "prefill", p->hw->name, p->batch,
             p->context[0], p->n_context > 1 ? " (first of a list)" : "", p->tokens_per_step,
             p->tokens_per_step == 1 ? "" : "s", p->tp, p->ep, p->kv_fp8 ? "fp8" : "bf16",
             tl_moe_dtype_name(p->experts), tl_gemm_dtype_name(p->dense));
}

static void print_text(const tl_step_problem *p, const tl_step_result *r, const char *about, const char *left)
{
    char title[600];
    snprintf(title, sizeof title, "%s; simulated (the ops' own models), one GPU of %d", about, r->gpus);
    tl_table *t = kinds_table(r);
    tl_table_print(t, TL_FMT_TABLE, title, stdout);
    tl_table_free(t);
    printf("\n");
    t = layers_table(r);
    tl_table_print(t, TL_FMT_TABLE, "per layer type", stdout);
    tl_table_free(t);
    printf("\nstep %.3f ms for %ld token%s (%.3f ms a token); %.3g GB and %.3g TFLOP a GPU; %ld kernels a GPU\n",
           r->step_us / 1e3, r->tokens, r->tokens == 1 ? "" : "s", r->per_token_us / 1e3, r->hbm_bytes / 1e9,
           r->flops / 1e12, r->kernels);
    printf("of which the calls' launch and fixed terms (the presets' launch_us, next_kernel_us, item_fixed_us, "
           "allreduce_us): %.3f ms; the kernels' work beside them: %.3f ms\n", r->fixed_us / 1e3,
           (r->step_us - r->fixed_us) / 1e3);
    if (r->expert_bytes > 0)
        printf("expert weights read a step: %.2f GB over %d GPU%s, %.3f ms at their HBM read ceiling together\n",
               r->expert_bytes / 1e9, r->gpus, r->gpus == 1 ? "" : "s", r->expert_floor_us / 1e3);
    printf("not modelled: %s\n", left);
    printf("each call and its `tilelab sim OP` command: --rows calls --format csv\n");
}

static int print_json(const tl_step_problem *p, const tl_step_result *r, const char *about, const char *left)
{
    json_t *o = json_object();
    int rc = o ? 0 : tl_error(TL_EFAIL, "sim step", "out of memory");
    if (!rc) {
        json_object_set_new(o, "about", json_string(about));
        json_object_set_new(o, "source", json_string("simulated"));
        json_object_set_new(o, "hw", json_string(p->hw->name));
        json_object_set_new(o, "model", json_string(p->model->name));
        json_object_set_new(o, "gpus", json_integer(r->gpus));
        json_object_set_new(o, "step_us", json_real(r->step_us));
        json_object_set_new(o, "tokens", json_integer(r->tokens));
        json_object_set_new(o, "per_token_us", json_real(r->per_token_us));
        json_object_set_new(o, "hbm_bytes", json_real(r->hbm_bytes));
        json_object_set_new(o, "flops", json_real(r->flops));
        json_object_set_new(o, "kernels", json_integer(r->kernels));
        json_object_set_new(o, "fixed_us", json_real(r->fixed_us));
        json_object_set_new(o, "expert_bytes_all_gpus", json_real(r->expert_bytes));
        json_object_set_new(o, "expert_floor_us", json_real(r->expert_floor_us));
        tl_table *t = kinds_table(r);
        json_object_set_new(o, "kinds", tl_table_to_json(t));
        tl_table_free(t);
        t = layers_table(r);
        json_object_set_new(o, "layers", tl_table_to_json(t));
        tl_table_free(t);
        t = calls_table(r);
        json_object_set_new(o, "calls", tl_table_to_json(t));
        tl_table_free(t);
        json_object_set_new(o, "not_modelled", json_string(left));
        tl_json_print(o, stdout);
    }
    json_decref(o);
    return rc;
}

int tl_sim_step(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, sim_step_usage)) return 0;
    step_args a;
    step_defaults(&a);
    a.rows = "kinds";
    tl_format fmt;
    step_setup *s = malloc(sizeof *s);
    if (!s) return tl_error(TL_EFAIL, "sim step", "out of memory");
    int rc = step_opts(argc, argv, "sim step", &a, 0);
    if (!rc) rc = tl_parse_format(a.fmt, &fmt);
    if (!rc && strcmp(a.rows, "kinds") != 0 && strcmp(a.rows, "layers") != 0 && strcmp(a.rows, "calls") != 0)
        rc = tl_error(TL_EUSAGE, "--rows", "'%s' is not kinds, layers or calls", a.rows);
    if (!rc) rc = parse_setup(&a, s, 0);
    tl_step_result *r = rc ? NULL : malloc(sizeof *r);
    if (!rc && !r) rc = tl_error(TL_EFAIL, "sim step", "out of memory");
    if (!rc) rc = tl_step_sim(&s->p, r);
    if (!rc) {
        char about[400], left[1024];
        describe(&s->p, about, sizeof about);
        tl_step_not_modelled(&s->p, left, sizeof left);
        if (fmt == TL_FMT_JSON) rc = print_json(&s->p, r, about, left);
        else if (fmt == TL_FMT_TABLE) print_text(&s->p, r, about, left);
        else {
            tl_table *t = strcmp(a.rows, "kinds") == 0 ? kinds_table(r) : strcmp(a.rows, "layers") == 0 ? layers_table(r)
                                                                                                           : calls_table(r);
            tl_table_print(t, fmt, NULL, stdout);
            tl_table_free(t);
        }
    }
    free(r);
    free(s);
    return rc;
}

/* ---- draw step ---- */

static const char draw_step_usage[] =
    "usage: tilelab draw step [options] [--batch B1,B2,..] [--measured T:MS,.. --measured-on TEXT] -o FILE\n"
    "Left: one stacked bar per serving point of --batch (up to 6; default 1,32): the step's time by op\n"
    "kind, each segment labelled with its limiter. Right: the step's time against the tokens a step\n"
    "serves (batch x tokens-per-step): batch 1 to 64 and the bars' points, and (decode) the first bar's\n"
    "batch at 1, 2, .. tokens a request as far as its attention kernel takes them, simulated; --measured adds\n"
    "measured steps (tokens:milliseconds) drawn as points, --measured-on says where they come from.\n"
    STEP_COMMON_USAGE;

/* One serving point's bar from a step result. */
static void bar_of(const tl_step_result *r, long tokens, tl_step_bar *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->label, sizeof b->label, "%ld token%s", tokens, tokens == 1 ? "" : "s");
    for (int k = 0; k < TL_STEP_NOPS; k++) {
        b->op_ms[k] = r->op_us[k] / 1e3;
        snprintf(b->limiter[k], sizeof b->limiter[k], "%s", r->op_limiter[k] ? r->op_limiter[k] : "");
    }
    b->total_ms = r->step_us / 1e3;
    b->expert_floor_ms = r->expert_floor_us / 1e3;
    b->fixed_ms = r->fixed_us / 1e3;
}

static int parse_measured(const char *s, tl_step_fig *f)
{
    char buf[512];
    if (strlen(s) >= sizeof buf) return tl_error(TL_EUSAGE, "--measured", "too long");
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon || f->n_measured >= TL_STEP_FIG_MAX_POINTS)
            return tl_error(TL_EUSAGE, "--measured", "expected up to %d TOKENS:MS pairs, got '%s'",
                            TL_STEP_FIG_MAX_POINTS, s);
        *colon = '\0';
        long tok_n;
        double ms;
        if (tl_parse_long(tok, 1, 1L << 24, "--measured tokens", &tok_n) || tl_parse_double(colon + 1, "--measured ms", &ms))
            return TL_EUSAGE;
        if (!(ms > 0 && ms < 1e7)) return tl_error(TL_EUSAGE, "--measured", "%g ms is not a step time", ms);
        f->measured_tokens[f->n_measured] = (double)tok_n;
        f->measured_ms[f->n_measured++] = ms;
    }
    return TL_OK;
}

/* The curve's batches: 1, 2, 4 .. 64 and the bars' own, sorted, distinct. */
static int curve_batches(const step_setup *s, long *out)
{
    int n = 0;
    for (long b = 1; b <= 64; b *= 2) out[n++] = b;
    for (int i = 0; i < s->n_batches; i++) {
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= out[j] == s->batches[i];
        if (!seen && n < TL_STEP_FIG_MAX_POINTS) out[n++] = s->batches[i];
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            long t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    return n;
}

int tl_draw_step(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, draw_step_usage)) return 0;
    step_args a;
    step_defaults(&a);
    a.batch = "1,32";
    step_setup *s = malloc(sizeof *s);
    tl_step_fig *f = calloc(1, sizeof *f);
    tl_step_result *r = malloc(sizeof *r);
    int rc = s && f && r ? 0 : tl_error(TL_EFAIL, "draw step", "out of memory");
    if (!rc) rc = step_opts(argc, argv, "draw step", &a, 1);
    if (!rc) rc = tl_ops_need_output(a.out, "step");
    if (!rc) rc = parse_setup(&a, s, 1);
    if (!rc && s->n_batches > TL_STEP_FIG_MAX_BARS)
        rc = tl_error(TL_EUSAGE, "--batch", "draw up to %d serving points", TL_STEP_FIG_MAX_BARS);
    if (!rc && s->p.n_context > 1) rc = tl_error(TL_EUSAGE, "--context", "draw step takes one length for all requests");
    if (!rc && a.measured) rc = parse_measured(a.measured, f);
    if (!rc && a.measured && !a.measured_on)
        rc = tl_error(TL_EUSAGE, "--measured-on", "say where the measured steps come from (device, engine, source)");
    for (int i = 0; !rc && i < s->n_batches; i++) {
        s->p.batch = (int)s->batches[i];
        rc = tl_step_sim(&s->p, r);
        if (!rc) bar_of(r, r->tokens, &f->bars[f->n_bars++]);
    }
    long cb[TL_STEP_FIG_MAX_POINTS];
    const int nc = rc ? 0 : curve_batches(s, cb);
    for (int i = 0; !rc && i < nc; i++) {
        s->p.batch = (int)cb[i];
        rc = tl_step_sim(&s->p, r);
        if (!rc) {
            f->curve_tokens[f->n_curve] = (double)r->tokens;
            f->curve_ms[f->n_curve++] = r->step_us / 1e3;
        }
    }
    /* the second curve: the first bar's batch with 1, 2, .. tokens a request, as far as the
     * attention kernel takes them (the MLA decode: 4) */
    if (!rc && s->p.phase == TL_STEP_DECODE) {
        const int t0 = s->p.tokens_per_step;
        s->p.batch = (int)s->batches[0];
        for (int t = 1; t <= 8 && f->n_spec < TL_STEP_FIG_MAX_POINTS; t++) {
            s->p.tokens_per_step = t;
            if (tl_step_sim(&s->p, r)) {
                tl_clear_error(); /* past the kernel's speculative tokens: the curve ends */
                break;
            }
            f->spec_tokens[f->n_spec] = (double)r->tokens;
            f->spec_ms[f->n_spec++] = r->step_us / 1e3;
        }
        s->p.tokens_per_step = t0;
        if (f->n_spec < 2) f->n_spec = 0;
        snprintf(f->spec_label, sizeof f->spec_label, "simulated: batch %ld, 1-%d tokens a request", s->batches[0],
                 f->n_spec);
    }
    if (!rc) {
        snprintf(f->curve_label, sizeof f->curve_label, "simulated: 1-64 requests, %d token%s each",
                 s->p.tokens_per_step, s->p.tokens_per_step == 1 ? "" : "s");
        s->p.batch = (int)s->batches[0];
        char about[400];
        describe(&s->p, about, sizeof about);
        snprintf(f->title, sizeof f->title, "%s %s on %d x %s: where the step's time goes", s->model.name,
                 s->p.phase == TL_STEP_DECODE ? "decode" : "prefill", s->p.tp > s->p.ep ? s->p.tp : s->p.ep,
                 s->hw.name);
        char point[96];
        if (s->p.phase == TL_STEP_DECODE)
            snprintf(point, sizeof point, "context %ld, %d token%s a request", s->context[0], s->p.tokens_per_step,
                     s->p.tokens_per_step == 1 ? "" : "s");
        else snprintf(point, sizeof point, "prompts of %ld tokens", s->context[0]);
        snprintf(f->subtitle, sizeof f->subtitle, "%s, tp %d, ep %d; kv %s, experts %s, dense %s; each kernel charged "
                 "with its own op's model, nothing between kernels", point, s->p.tp, s->p.ep,
                 s->p.kv_fp8 ? "fp8" : "bf16", tl_moe_dtype_name(s->p.experts), tl_gemm_dtype_name(s->p.dense));
        if (a.measured)
            snprintf(f->measured_label, sizeof f->measured_label, "measured (the footer says where)");
        snprintf(f->footer, sizeof f->footer, "bars and curve simulated on preset %s, model %s (tilelab sim step)%s%.200s",
                 s->hw.name, s->model.name, a.measured ? "; points measured: " : "", a.measured ? a.measured_on : "");
        rc = tl_fig_step(a.out, f);
    }
    free(s);
    free(f);
    free(r);
    return rc;
}
