/* visualize/step_figs.h: the whole-step picture (`tilelab draw step`): stacked bars of a model
 * step's time by op kind at a few serving points, and the step's time against the tokens a step
 * serves, from data the command builds with simulator/step.h (cli/step_cmd.c). Files and errors as
 * visualize/figures.h says. */
#ifndef TL_STEP_FIGS_H
#define TL_STEP_FIGS_H

#include "../simulator/step.h"

#define TL_STEP_FIG_MAX_BARS 6
#define TL_STEP_FIG_MAX_POINTS 16

typedef struct {
    char label[32];                  /* "1 token" */
    double op_ms[TL_STEP_NOPS];      /* each op kind's share of the step, ms */
    char limiter[TL_STEP_NOPS][24];  /* each kind's limiter ("" when none) */
    double total_ms;
    double expert_floor_ms;          /* the expert weights at the GPUs' HBM ceiling (0: none) */
    double fixed_ms;                 /* of total_ms: the calls' launch and fixed terms */
} tl_step_bar;

typedef struct {
    char title[200], subtitle[400], footer[600];
    tl_step_bar bars[TL_STEP_FIG_MAX_BARS];
    int n_bars;                      /* 1..TL_STEP_FIG_MAX_BARS */
    double curve_tokens[TL_STEP_FIG_MAX_POINTS], curve_ms[TL_STEP_FIG_MAX_POINTS];
    int n_curve;                     /* simulated points, tokens ascending (2..) */
    double spec_tokens[TL_STEP_FIG_MAX_POINTS], spec_ms[TL_STEP_FIG_MAX_POINTS];
    int n_spec;                      /* 0, or 2.. points of one batch with 1, 2, .. tokens a request */
    char spec_label[96];             /* that curve's key ("batch 1, 1-4 tokens a request") */
    char curve_label[96];            /* the first curve's key */
    double measured_tokens[TL_STEP_FIG_MAX_POINTS], measured_ms[TL_STEP_FIG_MAX_POINTS];
    int n_measured;                  /* 0: none */
    char measured_label[200];        /* the measured points' key */
} tl_step_fig;

/* Left: one vertical bar per serving point, op kinds stacked bottom up in the order of
 * tl_step_op (Okabe-Ito colours, a key), a segment tall enough labelled "kind  ms  limiter", the
 * total above the bar, the expert weights' HBM floor as a dashed tick, and a bracket on the bar's
 * left over the share that is launch and fixed terms. Right: step time (ms)
 * against tokens a step (log x), the simulated curve with markers (more requests of the same tokens
 * each) and, when given, a dashed second one (one batch, more speculative tokens a request),
 * measured points as orange
 * diamonds with their values. TL_EUSAGE for a count out of range or a negative or non-finite
 * value. */
int tl_fig_step(const char *out, const tl_step_fig *f);

#endif
