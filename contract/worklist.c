/* Routing and the MoE worklist: the one definition of MoE tile order (see worklist.h). */
#include "worklist.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ZIPF_MAX_S 100.0
#define ZIPF_TRIES 64

int tl_routing_parse(const char *spec, tl_routing *out)
{
    memset(out, 0, sizeof *out);
    if (!spec) return tl_error(TL_EUSAGE, "--routing", "missing value");
    if (strcmp(spec, "balanced") == 0) {
        out->kind = TL_ROUTE_BALANCED;
        return 0;
    }
    if (strcmp(spec, "random") == 0) {
        out->kind = TL_ROUTE_RANDOM;
        return 0;
    }
    if (strncmp(spec, "zipf:", 5) == 0) {
        double s = -1;
        if (tl_scan_real(spec + 5, &s) || s < 0 || s > ZIPF_MAX_S)
            return tl_error(TL_EUSAGE, "--routing", "'%s': zipf:S needs a number S in [0, %g]", spec,
                            ZIPF_MAX_S);
        out->kind = TL_ROUTE_ZIPF;
        out->zipf_s = s;
        return 0;
    }
    if (strncmp(spec, "trace:", 6) == 0) {
        if (spec[6] == '\0') return tl_error(TL_EUSAGE, "--routing", "trace: needs a file name");
        if (strlen(spec + 6) >= sizeof out->path) return tl_error(TL_EUSAGE, "--routing", "trace path too long");
        out->kind = TL_ROUTE_TRACE;
        memcpy(out->path, spec + 6, strlen(spec + 6) + 1);
        return 0;
    }
    return tl_error(TL_EUSAGE, "--routing", "unknown routing '%s' (balanced, random, zipf:S, trace:FILE)", spec);
}

void tl_routing_describe(const tl_routing *r, char *buf, size_t len)
{
    switch (r->kind) {
    case TL_ROUTE_BALANCED: snprintf(buf, len, "balanced"); break;
    case TL_ROUTE_RANDOM: snprintf(buf, len, "random"); break;
    case TL_ROUTE_ZIPF: snprintf(buf, len, "zipf:%g", r->zipf_s); break;
    case TL_ROUTE_TRACE: snprintf(buf, len, "trace:%s", r->path); break;
    }
}

static void route_balanced(int tokens, int E, int k, int32_t *ids)
{
    int64_t n = (int64_t)tokens * k;
    int32_t e = 0;
    for (int64_t i = 0; i < n; i++) { /* (t*k + s) % E, incrementally */
        ids[i] = e;
        if (++e == E) e = 0;
    }
}

static int already(const int32_t *row, int s, int32_t e)
{
    for (int j = 0; j < s; j++)
        if (row[j] == e) return 1;
    return 0;
}

/* k distinct uniform experts per token: rejection while k is small against E, else a partial
 * Fisher-Yates shuffle of a scratch permutation. */
static int route_random(int tokens, int E, int k, tl_rng *rng, int32_t *ids)
{
    int use_shuffle = k > 16 || 2 * k > E;
    int32_t *perm = NULL;
    if (use_shuffle) {
        perm = malloc((size_t)E * sizeof *perm);
        if (!perm) return tl_error(TL_EFAIL, "route", "out of memory");
        for (int e = 0; e < E; e++) perm[e] = e;
    }
    for (int t = 0; t < tokens; t++) {
        int32_t *row = ids + (int64_t)t * k;
        if (use_shuffle) {
            for (int s = 0; s < k; s++) {
                int j = s + (int)tl_rng_below(rng, (uint64_t)(E - s));
                int32_t tmp = perm[s];
                perm[s] = perm[j];
                perm[j] = tmp;
                row[s] = perm[s];
            }
        } else {
            for (int s = 0; s < k; s++) {
                int32_t e;
                do e = (int32_t)tl_rng_below(rng, (uint64_t)E);
                while (already(row, s, e));
                row[s] = e;
            }
        }
    }
    free(perm);
    return 0;
}

/* Index of the first cdf entry > u (cdf ascending, last entry = total). */
static int cdf_find(const double *cdf, int n, double u)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cdf[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Zipf: rank r has weight 1/(r+1)^s; ranks are dealt to experts by a seeded permutation. Distinct
 * per token: a draw of a rank the token already holds is rejected; after ZIPF_TRIES rejections the
 * draw is exact over the remaining mass (O(E)), so a very skewed S never loops for long. */
static int route_zipf(int tokens, int E, int k, double s, tl_rng *rng, int32_t *ids)
{
    double *w = malloc((size_t)E * sizeof *w), *cdf = malloc((size_t)E * sizeof *cdf);
    int32_t *expert_of_rank = malloc((size_t)E * sizeof *expert_of_rank);
    int *taken = malloc((size_t)E * sizeof *taken); /* taken[rank] = the last token that drew it */
    if (!w || !cdf || !expert_of_rank || !taken) {
        free(w);
        free(cdf);
        free(expert_of_rank);
        free(taken);
        return tl_error(TL_EFAIL, "route", "out of memory");
    }
    for (int r = 0; r < E; r++) {
        expert_of_rank[r] = r;
        taken[r] = -1;
    }
    for (int r = E - 1; r > 0; r--) {
        int j = (int)tl_rng_below(rng, (uint64_t)r + 1);
        int32_t tmp = expert_of_rank[r];
        expert_of_rank[r] = expert_of_rank[j];
        expert_of_rank[j] = tmp;
    }
    double total = 0;
    for (int r = 0; r < E; r++) {
        w[r] = pow((double)r + 1.0, -s);
        total += w[r];
        cdf[r] = total;
    }
    for (int t = 0; t < tokens; t++) {
        int32_t *row = ids + (int64_t)t * k;
        double left = total; /* mass of the ranks this token has not drawn */
        for (int si = 0; si < k; si++) {
            int r = -1;
            for (int tries = 0; tries < ZIPF_TRIES; tries++) {
                int c = cdf_find(cdf, E, tl_rng_uniform(rng) * total);
                if (taken[c] != t) {
                    r = c;
                    break;
                }
            }
            if (r < 0) { /* exact draw over the ranks not yet taken */
                double u = tl_rng_uniform(rng) * left, acc = 0;
                for (int q = 0; q < E; q++) {
                    if (taken[q] == t) continue;
                    acc += w[q];
                    r = q;
                    if (acc > u) break;
                }
            }
            taken[r] = t;
            left -= w[r];
            row[si] = expert_of_rank[r];
        }
    }
    free(w);
    free(cdf);
    free(expert_of_rank);
    free(taken);
    return 0;
}

/* The trace format (worklist.h): one token a line, k expert ids, then optionally k weights. */
#define TRACE_LINE_MAX 65536

static int is_sep(char c) { return c == ' ' || c == '\t' || c == ',' || c == '\r'; }

/* Splits a trace line into at most `max` fields (separators: spaces, tabs, commas); returns the
 * field count, or max + 1 when there are more. The line is cut in place. */
static int trace_fields(char *line, char **field, int max)
{
    int n = 0;
    for (char *s = line;;) {
        while (is_sep(*s)) s++;
        if (*s == '\0' || *s == '\n') return n;
        if (n == max) return max + 1;
        field[n++] = s;
        while (*s && *s != '\n' && !is_sep(*s)) s++;
        if (*s == '\0') return n;
        *s++ = '\0';
    }
}

typedef struct {
    const char *path;
    int n_experts, k;
    int want;        /* rows to store (into ids / w) */
    int32_t *ids;    /* want x k, or NULL */
    float *w;        /* want x k (weights scaled to sum 1; 1/k without weights), or NULL */
    int tokens;      /* out: the file's token count */
    int has_weights; /* out: 1 when its lines carry weights */
} trace_read;

/* One line's fields into row ids / weights; TL_EUSAGE naming file:line otherwise. */
static int trace_line(trace_read *t, int lineno, char **field, int n, int32_t *ids, double *w)
{
    const int k = t->k;
    if (n != k && n != 2 * k)
        return tl_error(TL_EUSAGE, "--routing", "%s:%d: %s%d fields, expected k = %d expert ids, or %d ids then "
                        "%d weights", t->path, lineno, n > 2 * k ? "more than " : "", n > 2 * k ? 2 * k : n, k, k, k);
    const int weighted = n == 2 * k;
    if (t->tokens == 0) t->has_weights = weighted;
    else if (weighted != t->has_weights)
        return tl_error(TL_EUSAGE, "--routing", "%s:%d: %s weights, the lines before %s", t->path, lineno,
                        weighted ? "has" : "has no", weighted ? "have none" : "have them");
    for (int s = 0; s < k; s++) {
        long long v = -1;
        const int got = tl_scan_int(field[s], &v);
        if (got == TL_NUM_SYNTAX)
            return tl_error(TL_EUSAGE, "--routing", "%s:%d: expert id '%.40s' is not an integer", t->path, lineno,
                            field[s]);
        if (got == TL_NUM_RANGE || v < 0 || v >= t->n_experts)
            return tl_error(TL_EUSAGE, "--routing", "%s:%d: expert id %.40s outside [0, %d)", t->path, lineno,
                            field[s], t->n_experts);
        if (already(ids, s, (int32_t)v))
            return tl_error(TL_EUSAGE, "--routing", "%s:%d: expert %lld appears twice", t->path, lineno, v);
        ids[s] = (int32_t)v;
    }
    double sum = 0;
    for (int s = 0; s < k; s++) {
        if (!weighted) {
            w[s] = 1.0;
            sum += 1.0;
            continue;
        }
        const char *f = field[k + s];
        double v = 0;
        const int got = tl_scan_real(f, &v);
        if (got == TL_NUM_SYNTAX)
            return tl_error(TL_EUSAGE, "--routing", "%s:%d: weight '%.40s' is not a number", t->path, lineno, f);
        if (got == TL_NUM_RANGE || v <= 0)
            return tl_error(TL_EUSAGE, "--routing", "%s:%d: weight %.40s of expert %d: weights must be finite and "
                            "> 0", t->path, lineno, f, (int)ids[s]);
        w[s] = v;
        sum += v;
    }
    for (int s = 0; s < k; s++) { /* the combine's weights: each row's scaled to sum 1, all > 0 */
        w[s] /= sum;
        if (!isfinite(sum) || !((float)w[s] > 0))
            return tl_error(TL_EUSAGE, "--routing", "%s:%d: weight of expert %d is %g of its row's sum, which "
                            "float32 cannot hold", t->path, lineno, (int)ids[s], w[s]);
    }
    return 0;
}

/* Reads and checks every line of the trace; stores its first t->want rows. */
static int trace_read_file(trace_read *t)
{
    /* a regular file only: a named pipe would block until a writer came, a device such as
     * /dev/zero would be one endless line */
    FILE *f;
    if (tl_open_regular(t->path, "the --routing trace", &f)) return TL_EUSAGE;
    const int k = t->k;
    char *line = NULL, **field = malloc((size_t)(2 * k + 1) * sizeof *field);
    int32_t *row = malloc((size_t)k * sizeof *row);
    double *w = malloc((size_t)k * sizeof *w);
    size_t cap = 0;
    ssize_t got;
    int lineno = 0, rc = field && row && w ? 0 : tl_error(TL_EFAIL, "route", "out of memory");
    t->tokens = 0;
    t->has_weights = 0;
    while (!rc && (got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (got > TRACE_LINE_MAX || memchr(line, '\0', (size_t)got)) { /* a NUL would hide the rest */
            rc = tl_error(TL_EUSAGE, "--routing", "%s:%d: %s", t->path, lineno,
                          got > TRACE_LINE_MAX ? "line too long" : "not text (a NUL byte)");
            break;
        }
        char *p = lineno == 1 ? (char *)tl_skip_bom(line) : line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0') continue;
        if (t->tokens == TL_ROUTE_TRACE_MAX_TOKENS) {
            rc = tl_error(TL_EUSAGE, "--routing", "%s:%d: more than %d tokens in the trace", t->path, lineno,
                          TL_ROUTE_TRACE_MAX_TOKENS);
            break;
        }
        int n = trace_fields(p, field, 2 * k);
        rc = trace_line(t, lineno, field, n, row, w);
        if (!rc && t->tokens < t->want) {
            if (t->ids) memcpy(t->ids + (int64_t)t->tokens * k, row, (size_t)k * sizeof *row);
            if (t->w)
                for (int s = 0; s < k; s++) t->w[(int64_t)t->tokens * k + s] = (float)w[s];
        }
        t->tokens++;
    }
    if (!rc && ferror(f)) rc = tl_error(TL_EUSAGE, "--routing", "cannot read trace '%s'", t->path);
    if (!rc && t->tokens == 0)
        rc = tl_error(TL_EUSAGE, "--routing", "%s: no tokens in the trace (only blank or '#' lines)", t->path);
    free(line);
    free(field);
    free(row);
    free(w);
    fclose(f);
    return rc;
}

int tl_routing_trace_tokens(const tl_routing *r, int n_experts, int k, int *tokens)
{
    *tokens = 0;
    if (r->kind != TL_ROUTE_TRACE) return tl_error(TL_EUSAGE, "--routing", "not a trace");
    if (n_experts < 1 || k < 1 || k > n_experts)
        return tl_error(TL_EUSAGE, "--routing", "E = %d and k = %d: need 1 <= k <= E", n_experts, k);
    trace_read t = {.path = r->path, .n_experts = n_experts, .k = k};
    int rc = trace_read_file(&t);
    if (!rc) *tokens = t.tokens;
    return rc;
}

static int route_trace(const char *path, int tokens, int E, int k, int32_t *ids, float *w)
{
    trace_read t = {.path = path, .n_experts = E, .k = k, .want = tokens, .ids = ids, .w = w};
    int rc = trace_read_file(&t);
    if (!rc && t.tokens < tokens)
        rc = tl_error(TL_EUSAGE, "--routing", "%s holds %d token%s, fewer than the %d asked (--tokens at most the "
                      "trace's count; a trace is not repeated)", path, t.tokens, t.tokens == 1 ? "" : "s", tokens);
    return rc;
}

static int check_shape(int tokens, int E, int k, const char *what)
{
    if (tokens < 1) return tl_error(TL_EUSAGE, what, "tokens = %d must be at least 1", tokens);
    if (E < 1) return tl_error(TL_EUSAGE, what, "number of experts E = %d must be at least 1", E);
    if (k < 1) return tl_error(TL_EUSAGE, what, "top-k = %d must be at least 1", k);
    if (k > E) return tl_error(TL_EUSAGE, what, "top-k = %d is larger than the %d experts", k, E);
    if ((int64_t)tokens * k > INT32_MAX)
        return tl_error(TL_EUSAGE, what, "tokens x k = %lld edges exceed 2^31 - 1", (long long)tokens * k);
    return 0;
}

int tl_route(const tl_routing *r, int tokens, int n_experts, int k, uint64_t seed, int32_t *topk_ids,
             float *topk_weights)
{
    if (check_shape(tokens, n_experts, k, "route")) return TL_EUSAGE;
    tl_rng rng;
    tl_rng_seed(&rng, seed);
    int rc = 0;
    switch (r->kind) {
    case TL_ROUTE_BALANCED: route_balanced(tokens, n_experts, k, topk_ids); break;
    case TL_ROUTE_RANDOM: rc = route_random(tokens, n_experts, k, &rng, topk_ids); break;
    case TL_ROUTE_ZIPF: rc = route_zipf(tokens, n_experts, k, r->zipf_s, &rng, topk_ids); break;
    case TL_ROUTE_TRACE: rc = route_trace(r->path, tokens, n_experts, k, topk_ids, topk_weights); break;
    default: return tl_error(TL_EUSAGE, "route", "unknown routing kind");
    }
    if (rc || !topk_weights || r->kind == TL_ROUTE_TRACE) return rc; /* a trace's weights are its own */
    int random_weights = r->kind == TL_ROUTE_RANDOM || r->kind == TL_ROUTE_ZIPF;
    for (int t = 0; t < tokens; t++) {
        float *w = topk_weights + (int64_t)t * k;
        double sum = 0;
        for (int s = 0; s < k; s++) {
            w[s] = random_weights ? (float)(0.05 + tl_rng_uniform(&rng)) : 1.0f;
            sum += w[s];
        }
        for (int s = 0; s < k; s++) w[s] = (float)(w[s] / sum);
    }
    return 0;
}

void tl_worklist_free(tl_worklist *wl)
{
    if (!wl) return;
    free(wl->sorted_ids);
    free(wl->tile_expert);
    free(wl->tile_rows);
    free(wl->expert_count);
    memset(wl, 0, sizeof *wl);
}

int tl_worklist_build(const int32_t *topk_ids, int tokens, int k, int n_experts, int tile_m,
                      tl_worklist *out)
{
    memset(out, 0, sizeof *out);
    if (check_shape(tokens, n_experts, k, "worklist")) return TL_EUSAGE;
    if (tile_m < 1 || tile_m > 4096) return tl_error(TL_EUSAGE, "worklist", "tile height %d outside [1, 4096]", tile_m);
    int64_t edges = (int64_t)tokens * k;
    int32_t *count = calloc((size_t)n_experts, sizeof *count);
    if (!count) return tl_error(TL_EFAIL, "worklist", "out of memory");
    for (int64_t i = 0; i < edges; i++) {
        int32_t e = topk_ids[i];
        if (e < 0 || e >= n_experts) {
            free(count);
            return tl_error(TL_EUSAGE, "worklist", "expert id %d at edge %lld outside [0, %d)", (int)e,
                            (long long)i, n_experts);
        }
        count[e]++;
    }
    int64_t tiles = 0;
    int active = 0;
    for (int e = 0; e < n_experts; e++) {
        tiles += (count[e] + tile_m - 1) / tile_m;
        active += count[e] > 0;
    }
    if (tiles * tile_m > INT32_MAX) {
        free(count);
        return tl_error(TL_EUSAGE, "worklist", "%lld padded rows exceed 2^31 - 1", (long long)(tiles * tile_m));
    }
    int64_t rows = tiles * tile_m;
    out->sorted_ids = malloc((size_t)rows * sizeof *out->sorted_ids);
    out->tile_expert = malloc((size_t)tiles * sizeof *out->tile_expert);
    out->tile_rows = malloc((size_t)tiles * sizeof *out->tile_rows);
    int64_t *next = malloc((size_t)n_experts * sizeof *next);
    out->expert_count = count;
    if (!out->sorted_ids || !out->tile_expert || !out->tile_rows || !next) {
        free(next);
        tl_worklist_free(out);
        return tl_error(TL_EFAIL, "worklist", "out of memory");
    }
    int64_t tile = 0;
    for (int e = 0; e < n_experts; e++) {
        next[e] = tile * tile_m;
        int32_t left = count[e];
        while (left > 0) {
            out->tile_expert[tile] = e;
            out->tile_rows[tile] = left < tile_m ? left : tile_m;
            left -= out->tile_rows[tile];
            tile++;
        }
    }
    for (int64_t i = 0; i < rows; i++) out->sorted_ids[i] = TL_WL_PAD;
    for (int64_t i = 0; i < edges; i++) out->sorted_ids[next[topk_ids[i]]++] = (int32_t)i;
    free(next);
    out->tile_m = tile_m;
    out->n_tiles = (int)tiles;
    out->n_rows_padded = (int)rows;
    out->active_experts = active;
    out->n_experts = n_experts;
    return 0;
}

double tl_worklist_balanced_padding(int tokens, int n_experts, int k, int tile_m)
{
    if (tokens < 1 || n_experts < 1 || k < 1 || tile_m < 1) return NAN;
    int64_t mk = (int64_t)tokens * k;
    int64_t q = mk / n_experts, r = mk % n_experts;
    int64_t tiles = r * ((q + 1 + tile_m - 1) / tile_m) + (n_experts - r) * ((q + tile_m - 1) / tile_m);
    return (double)(tiles * tile_m) / (double)mk;
}
