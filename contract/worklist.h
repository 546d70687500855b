/* The MoE worklist: THE one source of truth for the order in which a fused MoE kernel visits its
 * tiles. The simulator, the CPU reference and the host side of the GPU kernel call these
 * functions; the GPU sort kernel is tested against tl_worklist_build bit for bit.
 *
 * Vocabulary: a token's k routing choices are its slots; edge id = token * k + slot (0 <= edge <
 * tokens * k). The worklist buckets edges by expert and pads each bucket up to a whole number of
 * tiles of tile_m rows.
 */
#ifndef TL_CONTRACT_WORKLIST_H
#define TL_CONTRACT_WORKLIST_H

#include <stddef.h>
#include <stdint.h>

#include "../core/tl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_WL_PAD (-1)

typedef enum {
    TL_ROUTE_BALANCED, /* token t, slot s -> expert (t*k + s) % E (round robin; distinct when k <= E) */
    TL_ROUTE_RANDOM,   /* k distinct experts per token, uniform, seeded */
    TL_ROUTE_ZIPF,     /* k distinct experts per token, expert e drawn with weight 1/(rank+1)^s over a
                          seeded random permutation of ranks; s = 0 is uniform */
    TL_ROUTE_TRACE     /* read from a text file: one token a line, its k expert ids [and k weights] */
} tl_route_kind;

typedef struct {
    tl_route_kind kind;
    double zipf_s;    /* TL_ROUTE_ZIPF: exponent s >= 0 */
    char path[1024];  /* TL_ROUTE_TRACE: the file */
} tl_routing;

/* Parses "balanced" | "random" | "zipf:S" | "trace:FILE". TL_EUSAGE with a message on anything
 * else (unknown kind, S not a finite number >= 0 or > 100, empty FILE). Does not open the file. */
int tl_routing_parse(const char *spec, tl_routing *out);
/* Writes the spec back ("zipf:1.2") into buf. */
void tl_routing_describe(const tl_routing *r, char *buf, size_t len);

/* A routing trace file (--routing trace:FILE), text, e.g. for top-8:
 *     # DeepSeek-V3 layer 3, prompt 17          ('#' lines and blank lines are skipped)
 *     12 201 7 88 140 3 66 250  0.31 0.2 0.12 0.1 0.09 0.08 0.06 0.04
 *     5,17,230,88,9,41,102,64,0.4,0.2,0.1,0.1,0.05,0.05,0.05,0.05
 * or the k ids alone on every line (weights 1/k each).
 * One token a line, in token order; fields separated by spaces, tabs or commas. Ids are integers
 * in [0, E), distinct within a line; weights are finite numbers > 0, scaled to sum to 1 on each
 * line (the combine's contract, contract/moe.h); either every line has weights or none does.
 * At most TL_ROUTE_TRACE_MAX_TOKENS tokens; lines of at most 64 KiB. The trace's token count is
 * the problem's: M tokens route as its first M lines, M above its count is an error (a trace is
 * not repeated or invented). */
#define TL_ROUTE_TRACE_MAX_TOKENS (1 << 20)

/* Reads and checks the whole trace r (TL_ROUTE_TRACE) for E experts and top-k, and gives its token
 * count. TL_EUSAGE naming file:line on the first malformed line (field count, an id not an integer,
 * outside [0, E) or twice on a line, a weight not a finite number > 0, weights on some lines only,
 * more than TL_ROUTE_TRACE_MAX_TOKENS tokens, a NUL byte, a line over 64 KiB), on an empty trace,
 * a file that is not a readable regular file, or k outside [1, E]. Cost: O(file). */
int tl_routing_trace_tokens(const tl_routing *r, int n_experts, int k, int *tokens);

/* Routes tokens to experts: topk_ids[t*k + s] = expert of token t's slot s. The k experts of one
 * token are distinct (balanced needs k <= E, which is required anyway). topk_weights, if not NULL,
 * gets each token's combine weights (positive, summing to 1 per token): 1/k for balanced, random
 * and seeded for random and zipf, the file's (or 1/k) for a trace.
 * Trace: the first `tokens` tokens of the file (format above), every line of which is checked.
 * Errors (TL_EUSAGE): tokens < 1, E < 1, k < 1, k > E, an unreadable or malformed trace (file:line,
 * as tl_routing_trace_tokens), a trace of fewer than `tokens` tokens.
 * Deterministic for a seed. Cost: O(tokens * k) (zipf: O(tokens * k * log E) expected, plus O(E);
 * trace: O(file)). */
int tl_route(const tl_routing *r, int tokens, int n_experts, int k, uint64_t seed,
             int32_t *topk_ids, float *topk_weights);

typedef struct {
    int tile_m;          /* rows per tile */
    int n_tiles;
    int n_rows_padded;   /* n_tiles * tile_m */
    int active_experts;  /* experts with at least one edge */
    int32_t *sorted_ids; /* n_rows_padded entries: edge id, or TL_WL_PAD */
    int32_t *tile_expert;/* n_tiles: the expert of each tile */
    int32_t *tile_rows;  /* n_tiles: real (non-pad) rows of each tile, 1..tile_m */
    int32_t *expert_count; /* n_experts: edges per expert */
    int n_experts;
} tl_worklist;

/* Builds the worklist. Order: experts ascending; within an expert, edges in ascending edge id,
 * filling its tiles in order; the last tile of an expert is padded at its end with TL_WL_PAD; an
 * expert with no edge has no tile. So every edge appears exactly once, each tile holds edges of one
 * expert, and padding markers appear only at the end of a tile.
 * Errors (TL_EUSAGE): tokens < 1, k < 1, E < 1, k > E, tile_m < 1 or > 4096, an id outside [0, E),
 * tokens * k or the padded row count above INT32_MAX. TL_EFAIL on allocation failure. On error *out
 * is left zeroed (safe to free). Cost: O(tokens*k + E) time (a counting sort), O(rows + E) memory. */
int tl_worklist_build(const int32_t *topk_ids, int tokens, int k, int n_experts, int tile_m,
                      tl_worklist *out);
/* Frees the arrays and zeroes *wl; safe on a zeroed or already freed worklist. */
void tl_worklist_free(tl_worklist *wl);

/* Padding (rows computed / real rows) of the balanced worklist, computed without building it.
 * Round robin gives r = (M*k) % E experts q+1 edges and the others q = (M*k) / E, so the padded
 * rows are tile_m * (r * ceil((q+1)/tile_m) + (E - r) * ceil(q/tile_m)). When tile_m divides the
 * load (or the load is below one tile) this is the seed's min(tile_m * E / (M * k), tile_m).
 * NaN on a non-positive argument. O(1). */
double tl_worklist_balanced_padding(int tokens, int n_experts, int k, int tile_m);

#ifdef __cplusplus
}
#endif

#endif
