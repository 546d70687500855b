/* The MoE worklist and routing: invariants for every routing, the seed's padding numbers, a golden
 * small case, and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/worklist.h"

/* Checks every invariant of worklist.h against the routing it was built from. */
static void check_invariants(const int32_t *ids, int tokens, int k, int E, int tile_m, const tl_worklist *wl)
{
    int64_t edges = (int64_t)tokens * k;
    assert_int_equal(wl->tile_m, tile_m);
    assert_int_equal(wl->n_rows_padded, wl->n_tiles * tile_m);
    char *seen = calloc((size_t)edges, 1);
    int32_t *count = calloc((size_t)E, sizeof *count);
    assert_non_null(seen);
    assert_non_null(count);
    for (int64_t i = 0; i < edges; i++) count[ids[i]]++;
    int active = 0;
    for (int e = 0; e < E; e++) {
        assert_int_equal(wl->expert_count[e], count[e]);
        active += count[e] > 0;
    }
    assert_int_equal(wl->active_experts, active);
    int prev_expert = -1;
    int32_t prev_edge = -1;
    int64_t tiles_expected = 0;
    for (int e = 0; e < E; e++) tiles_expected += (count[e] + tile_m - 1) / tile_m;
    assert_int_equal(wl->n_tiles, tiles_expected);
    for (int t = 0; t < wl->n_tiles; t++) {
        int e = wl->tile_expert[t];
        assert_true(e >= prev_expert); /* experts ascending */
        if (e != prev_expert) prev_edge = -1;
        int real = 0, pad_started = 0;
        for (int r = 0; r < tile_m; r++) {
            int32_t id = wl->sorted_ids[(int64_t)t * tile_m + r];
            if (id == TL_WL_PAD) {
                pad_started = 1;
                continue;
            }
            assert_false(pad_started); /* padding only at the end of a tile */
            assert_true(id >= 0 && id < edges);
            assert_int_equal(ids[id], e); /* every row of a tile belongs to its expert */
            assert_true(id > prev_edge);  /* ascending edge ids within an expert */
            prev_edge = id;
            assert_int_equal(seen[id], 0); /* no edge twice */
            seen[id] = 1;
            real++;
        }
        assert_true(real >= 1); /* no empty tile */
        assert_int_equal(wl->tile_rows[t], real);
        /* only the last tile of an expert may be partial */
        if (real < tile_m && t + 1 < wl->n_tiles) assert_int_not_equal(wl->tile_expert[t + 1], e);
        prev_expert = e;
    }
    for (int64_t i = 0; i < edges; i++) assert_int_equal(seen[i], 1); /* every edge once */
    free(seen);
    free(count);
}

static void route_build_check(const char *spec, int tokens, int E, int k, int tile_m, uint64_t seed)
{
    tl_routing r;
    assert_int_equal(tl_routing_parse(spec, &r), 0);
    int32_t *ids = malloc((size_t)tokens * k * sizeof *ids);
    float *w = malloc((size_t)tokens * k * sizeof *w);
    assert_int_equal(tl_route(&r, tokens, E, k, seed, ids, w), 0);
    int *stamp = malloc((size_t)E * sizeof *stamp);
    for (int e = 0; e < E; e++) stamp[e] = -1;
    for (int t = 0; t < tokens; t++) { /* distinct experts per token, weights sum to 1 */
        double sum = 0;
        for (int s = 0; s < k; s++) {
            int e = ids[t * k + s];
            assert_true(e >= 0 && e < E);
            assert_int_not_equal(stamp[e], t);
            stamp[e] = t;
            assert_true(w[t * k + s] > 0);
            sum += w[t * k + s];
        }
        assert_true(fabs(sum - 1.0) < 1e-5);
    }
    free(stamp);
    tl_worklist wl;
    assert_int_equal(tl_worklist_build(ids, tokens, k, E, tile_m, &wl), 0);
    check_invariants(ids, tokens, k, E, tile_m, &wl);
    tl_worklist_free(&wl);
    free(ids);
    free(w);
}

static void test_invariants_every_routing(void **state)
{
    (void)state;
    const char *specs[] = {"balanced", "random", "zipf:0", "zipf:1.2", "zipf:50"};
    const int shapes[][3] = {{256, 8, 16}, {384, 8, 16}, {16, 1, 16}, {24, 1, 32}, {64, 6, 64}, {8, 8, 128}, {300, 257, 16}};
    const int tokens[] = {1, 3, 17, 100, 513};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
        for (size_t h = 0; h < sizeof shapes / sizeof *shapes; h++)
            for (size_t t = 0; t < sizeof tokens / sizeof *tokens; t++)
                route_build_check(specs[s], tokens[t], shapes[h][0], shapes[h][1], shapes[h][2], 7 + t);
}

static void test_golden_small(void **state)
{
    (void)state;
    /* 3 tokens, k = 2, E = 4, tile_m = 2; edges 0..5 */
    const int32_t ids[] = {1, 3, 1, 0, 2, 1};
    tl_worklist wl;
    assert_int_equal(tl_worklist_build(ids, 3, 2, 4, 2, &wl), 0);
    const int32_t sorted[] = {3, -1, 0, 2, 5, -1, 4, -1, 1, -1};
    const int32_t texp[] = {0, 1, 1, 2, 3}, trows[] = {1, 2, 1, 1, 1}, cnt[] = {1, 3, 1, 1};
    assert_int_equal(wl.n_tiles, 5);
    assert_int_equal(wl.n_rows_padded, 10);
    assert_int_equal(wl.active_experts, 4);
    assert_memory_equal(wl.sorted_ids, sorted, sizeof sorted);
    assert_memory_equal(wl.tile_expert, texp, sizeof texp);
    assert_memory_equal(wl.tile_rows, trows, sizeof trows);
    assert_memory_equal(wl.expert_count, cnt, sizeof cnt);
    tl_worklist_free(&wl);
    tl_worklist_free(&wl); /* safe twice */
}

/* Builds the balanced worklist and returns its padding. */
static double balanced_padding(int tokens, int E, int k, int tile_m, int *tiles, int *active)
{
    tl_routing r;
    tl_routing_parse("balanced", &r);
    int32_t *ids = malloc((size_t)tokens * k * sizeof *ids);
    assert_int_equal(tl_route(&r, tokens, E, k, 0, ids, NULL), 0);
    for (int i = 0; i < tokens * k; i++) assert_int_equal(ids[i], i % E); /* (t*k + s) % E */
    tl_worklist wl;
    assert_int_equal(tl_worklist_build(ids, tokens, k, E, tile_m, &wl), 0);
    double p = (double)wl.n_rows_padded / ((double)tokens * k);
    if (tiles) *tiles = wl.n_tiles;
    if (active) *active = wl.active_experts;
    tl_worklist_free(&wl);
    free(ids);
    return p;
}

static void test_seed_padding(void **state)
{
    (void)state;
    int tiles, active;
    /* DeepSeek-V3.2: E = 256, k = 8 */
    assert_true(balanced_padding(1, 256, 8, 16, &tiles, &active) == 16.0);
    assert_int_equal(tiles, 8);
    assert_int_equal(active, 8);
    balanced_padding(31, 256, 8, 16, NULL, &active);
    assert_int_equal(active, 248);
    balanced_padding(32, 256, 8, 16, NULL, &active);
    assert_int_equal(active, 256); /* every expert active from M = 32 */
    assert_true(balanced_padding(512, 256, 8, 16, NULL, NULL) == 1.0);
    assert_true(balanced_padding(511, 256, 8, 16, NULL, NULL) > 1.0);
    /* Kimi: E = 384 fills at M = 768 */
    assert_true(balanced_padding(768, 384, 8, 16, NULL, NULL) == 1.0);
    assert_true(balanced_padding(512, 384, 8, 16, NULL, NULL) > 1.0);
    /* the closed form min(16 E / (M k), 16) at powers of two (never below 1 once tiles are full),
     * and the O(1) formula everywhere */
    for (int M = 1; M <= 8192; M *= 2) {
        double closed = fmax(1.0, fmin(16.0 * 256 / (M * 8.0), 16.0));
        assert_true(fabs(balanced_padding(M, 256, 8, 16, NULL, NULL) - closed) < 1e-12);
        closed = fmax(1.0, fmin(16.0 * 384 / (M * 8.0), 16.0));
        if (M * 8 < 384 || (M * 8) % (384 * 16) == 0)
            assert_true(fabs(balanced_padding(M, 384, 8, 16, NULL, NULL) - closed) < 1e-12);
    }
    for (int M = 1; M <= 1200; M += 7)
        for (int tm = 16; tm <= 128; tm *= 2)
            assert_true(fabs(balanced_padding(M, 384, 8, tm, NULL, NULL) - tl_worklist_balanced_padding(M, 384, 8, tm)) <
                        1e-12);
}

static void test_random_is_seeded(void **state)
{
    (void)state;
    tl_routing r;
    tl_routing_parse("random", &r);
    int32_t a[4096], b[4096], c[4096];
    assert_int_equal(tl_route(&r, 512, 256, 8, 42, a, NULL), 0);
    assert_int_equal(tl_route(&r, 512, 256, 8, 42, b, NULL), 0);
    assert_int_equal(tl_route(&r, 512, 256, 8, 43, c, NULL), 0);
    assert_memory_equal(a, b, sizeof a);
    assert_true(memcmp(a, c, sizeof a) != 0);
    /* roughly uniform: every expert gets some of the 4096 edges (expected 16 each) */
    int cnt[256] = {0};
    for (int i = 0; i < 4096; i++) cnt[a[i]]++;
    for (int e = 0; e < 256; e++) assert_true(cnt[e] > 0 && cnt[e] < 48);
}

static void test_zipf_is_skewed(void **state)
{
    (void)state;
    tl_routing r;
    assert_int_equal(tl_routing_parse("zipf:1.2", &r), 0);
    assert_true(r.zipf_s == 1.2);
    int32_t *ids = malloc(1024 * 8 * sizeof *ids);
    assert_int_equal(tl_route(&r, 1024, 256, 8, 5, ids, NULL), 0);
    int cnt[256] = {0}, mx = 0;
    for (int i = 0; i < 1024 * 8; i++) cnt[ids[i]]++;
    for (int e = 0; e < 256; e++) mx = cnt[e] > mx ? cnt[e] : mx;
    assert_true(mx > 4 * 32); /* the hottest expert has far more than the uniform 32 */
    /* s = 0 is uniform (worklist.h): the same draw leaves no expert far above 32 */
    assert_int_equal(tl_routing_parse("zipf:0", &r), 0);
    assert_int_equal(tl_route(&r, 1024, 256, 8, 5, ids, NULL), 0);
    memset(cnt, 0, sizeof cnt);
    mx = 0;
    for (int i = 0; i < 1024 * 8; i++) cnt[ids[i]]++;
    for (int e = 0; e < 256; e++) mx = cnt[e] > mx ? cnt[e] : mx;
    assert_true(mx < 2 * 32);
    free(ids);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_trace(void **state)
{
    (void)state;
    const char *path = TL_BINARY_DIR "/test_worklist_trace.txt";
    write_text(path, "# token experts\n3,1\n\n0, 2\n1 3\n");
    char spec[1200];
    snprintf(spec, sizeof spec, "trace:%s", path);
    tl_routing r;
    assert_int_equal(tl_routing_parse(spec, &r), 0);
    int n = 0;
    assert_int_equal(tl_routing_trace_tokens(&r, 4, 2, &n), 0);
    assert_int_equal(n, 3);
    int32_t ids[10];
    float w[10];
    assert_int_equal(tl_route(&r, 3, 4, 2, 0, ids, w), 0);
    const int32_t want[] = {3, 1, 0, 2, 1, 3};
    assert_memory_equal(ids, want, sizeof want);
    for (int i = 0; i < 6; i++) assert_true(w[i] == 0.5f); /* no weights in the file: 1/k */
    assert_int_equal(tl_route(&r, 2, 4, 2, 0, ids, NULL), 0); /* the first 2 tokens */
    assert_memory_equal(ids, want, 4 * sizeof *ids);
    assert_int_equal(tl_route(&r, 5, 4, 2, 0, ids, w), TL_EUSAGE); /* more than the trace holds: not repeated */
    assert_non_null(strstr(tl_last_error(), "holds 3 tokens"));
    /* weights: scaled to sum 1 per token */
    write_text(path, "3 1 0.75 0.25\n0,2,2,6\n");
    assert_int_equal(tl_route(&r, 2, 4, 2, 0, ids, w), 0);
    assert_true(w[0] == 0.75f && w[1] == 0.25f && w[2] == 0.25f && w[3] == 0.75f);
    /* every malformation: TL_EUSAGE naming the file's line 2 and what is wrong */
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"0,1\n1,2,3\n", "3 fields"},                      /* k + 1 fields */
        {"0,1\n1\n", "1 fields"},                          /* k - 1 */
        {"0 1 .5 .5\n1 2 0.5 0.5 0.5\n", "more than 4"},   /* more than 2k */
        {"0,1\n1,9\n", "outside [0, 4)"},                  /* id out of range */
        {"0,1\n1,-1\n", "outside [0, 4)"},                 /* negative id */
        {"0,1\n2,2\n", "appears twice"},                   /* duplicate */
        {"0,1\n1,x\n", "not an integer"},                  /* not an id */
        {"0,1\n1.5 2\n", "not an integer"},
        {"0,1\n+1,2\n", "not an integer"},                 /* the one number rule: no '+', hex or blanks */
        {"0,1\n0x1,2\n", "not an integer"},
        {"0 1 .5 .5\n1 2 0x1p-1 1\n", "not a number"},
        {"0 1 .5 .5\n1 2 +0.5 1\n", "not a number"},
        {"0,1\n1,99999999999999999999\n", "outside [0, 4)"},
        {"0 1 .5 .5\n1 2 nan 1\n", "not a number"},        /* NaN weight */
        {"0 1 .5 .5\n1 2 -0.5 1\n", "finite and > 0"},     /* negative weight */
        {"0 1 .5 .5\n1 2 0 1\n", "finite and > 0"},        /* zero weight */
        {"0 1 .5 .5\n1 2 inf 1\n", "not a number"},        /* infinite weight */
        {"0 1 .5 .5\n1 2 1e999 1\n", "finite and > 0"},    /* beyond double */
        {"0 1 .5 .5\n1 2 1e-300 1e300\n", "float32"},      /* a weight float32 cannot hold against its row */
        {"0 1 .5 .5\n1 2 0.5 w\n", "not a number"},
        {"0 1 .5 .5\n2 3\n", "has no weights"},            /* weights on some lines only */
        {"0 1\n2 3 .5 .5\n", "has weights"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text(path, bad[i].text);
        assert_int_equal(tl_route(&r, 2, 4, 2, 0, ids, w), TL_EUSAGE);
        if (!strstr(tl_last_error(), ":2:") || !strstr(tl_last_error(), bad[i].says))
            fail_msg("case %zu: %s", i, tl_last_error());
        assert_int_equal(tl_routing_trace_tokens(&r, 4, 2, &n), TL_EUSAGE); /* the whole file is checked */
        assert_int_equal(tl_route(&r, 1, 4, 2, 0, ids, w), TL_EUSAGE);     /* whatever M is asked */
    }
    write_text(path, "# only a comment\n\n");
    assert_int_equal(tl_routing_trace_tokens(&r, 4, 2, &n), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "no tokens"));
    FILE *f = fopen(path, "w"); /* one token more than the limit */
    assert_non_null(f);
    for (int t = 0; t <= TL_ROUTE_TRACE_MAX_TOKENS; t++) fputs("0 1\n", f);
    fclose(f);
    assert_int_equal(tl_routing_trace_tokens(&r, 4, 2, &n), TL_EUSAGE);
    assert_non_null(strstr(tl_last_error(), "more than"));
    remove(path);
    assert_int_equal(tl_route(&r, 1, 4, 2, 0, ids, NULL), TL_EUSAGE); /* missing file */
    assert_int_equal(tl_routing_trace_tokens(&r, 4, 2, &n), TL_EUSAGE);
    snprintf(spec, sizeof spec, "trace:%s", TL_BINARY_DIR); /* a folder */
    assert_int_equal(tl_routing_parse(spec, &r), 0);
    assert_int_equal(tl_routing_trace_tokens(&r, 4, 2, &n), TL_EUSAGE);
}

static void test_bad_input(void **state)
{
    (void)state;
    tl_routing r;
    const char *bad[] = {"", "foo", "zipf:", "zipf:-1", "zipf:abc", "zipf:1e9", "zipf:nan", "trace:", "Balanced"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(tl_routing_parse(bad[i], &r), TL_EUSAGE);
    tl_routing_parse("balanced", &r);
    int32_t ids[64];
    assert_int_equal(tl_route(&r, 0, 8, 2, 0, ids, NULL), TL_EUSAGE);  /* tokens 0 */
    assert_int_equal(tl_route(&r, 4, 0, 2, 0, ids, NULL), TL_EUSAGE);  /* E = 0 */
    assert_int_equal(tl_route(&r, 4, 8, 0, 0, ids, NULL), TL_EUSAGE);  /* k = 0 */
    assert_int_equal(tl_route(&r, 4, 8, 9, 0, ids, NULL), TL_EUSAGE);  /* k > E */
    assert_int_equal(tl_route(&r, 1 << 30, 8, 8, 0, ids, NULL), TL_EUSAGE); /* edges > 2^31 - 1 */
    tl_worklist wl;
    assert_int_equal(tl_route(&r, 4, 8, 2, 0, ids, NULL), 0);
    assert_int_equal(tl_worklist_build(ids, 4, 2, 8, 0, &wl), TL_EUSAGE);
    assert_int_equal(tl_worklist_build(ids, 4, 2, 0, 16, &wl), TL_EUSAGE);
    assert_int_equal(tl_worklist_build(ids, 4, 0, 8, 16, &wl), TL_EUSAGE);
    assert_int_equal(tl_worklist_build(ids, 4, 9, 8, 16, &wl), TL_EUSAGE);
    ids[3] = 8;
    assert_int_equal(tl_worklist_build(ids, 4, 2, 8, 16, &wl), TL_EUSAGE);
    ids[3] = -2;
    assert_int_equal(tl_worklist_build(ids, 4, 2, 8, 16, &wl), TL_EUSAGE);
    assert_null(wl.sorted_ids);
    tl_worklist_free(&wl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariants_every_routing), cmocka_unit_test(test_golden_small),
        cmocka_unit_test(test_seed_padding),             cmocka_unit_test(test_random_is_seeded),
        cmocka_unit_test(test_zipf_is_skewed),           cmocka_unit_test(test_trace),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
