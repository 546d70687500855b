/* `tilelab tour`: the workbench's main job on embedded defaults. It runs a sequence of ordinary
 * tilelab commands, printing each one as a user would type it, so that the tour also teaches the
 * commands. Pictures go under one output folder (default tilelab-tour/). Grows as features land.
 *
 * A step's output longer than TOUR_SHOW_MAX lines shows its first TOUR_SHOW_HEAD and last
 * TOUR_SHOW_TAIL lines and names the command that prints all of it.
 *
 * Cost: well under a minute on one core; no GPU needed (GPU steps say when they were skipped). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TOUR_MAX_ARGS 32
#define TOUR_MAX_OUT 1024 /* length of the output folder's name */
#define TOUR_SHOW_MAX 20  /* lines of a step's output shown whole */
#define TOUR_SHOW_HEAD 8  /* of a longer one: its first lines (title, header, first rows) */
#define TOUR_SHOW_TAIL 3  /* and its last */

typedef struct {
    const char *out_dir;
    int failures;
    int steps;
    char unwritten[TOUR_MAX_OUT + 64]; /* a step's output file that could not be written ("": none) */
} tour;

/* Expands "{out}" in `line` into `expanded` (the text a user would type). */
static void expand_line(const tour *t, const char *line, char *expanded, size_t cap)
{
    size_t n = 0;
    for (const char *p = line; *p && n + 1 < cap;) {
        if (strncmp(p, "{out}", 5) == 0) {
            int w = snprintf(expanded + n, cap - n, "%s", t->out_dir);
            n = w < 0 ? n : (n + (size_t)w < cap ? n + (size_t)w : cap - 1);
            p += 5;
        } else {
            expanded[n++] = *p++;
        }
    }
    expanded[n] = '\0';
}

/* Flushes standard output. A write that failed, in this flush or an earlier one (the stream's
 * error flag stays set), becomes a write error on `where` (TL_EFAIL, tl_write_error) unless rc
 * already says the step failed; the flag is cleared. Returns rc or that error. */
static int flush_stdout(int rc, const char *where)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    int e = errno;
    clearerr(stdout);
    return rc ? rc : tl_write_error(where, NULL, e);
}

/* Splits a step's line at spaces, then expands "{out}" in each word, so that an output folder with
 * spaces in its name stays one argument; runs it with its standard output going to `where` (the
 * name used if that output cannot be written). Returns the step's status, its error recorded (the
 * tour's loop counts and prints it). */
static int run_line(tour *t, tl_cmd_fn fn, const char *line, const char *where)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", line);
    static char words[TOUR_MAX_ARGS][TOUR_MAX_OUT + 256];
    char *argv[TOUR_MAX_ARGS + 1];
    int argc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ", &save); tok && argc < TOUR_MAX_ARGS; tok = strtok_r(NULL, " ", &save)) {
        expand_line(t, tok, words[argc], sizeof words[argc]);
        argv[argc] = words[argc];
        argc++;
    }
    argv[argc] = NULL;
    optind = 0; /* commands may parse with getopt_long: reset its state between steps */
    tl_clear_error();
    return flush_stdout(fn(argc, argv), where);
}

/* Runs a step with its standard output sent to the open file descriptor fd (left open), named
 * `where` in a write error. A step that cannot be redirected fails: TL_EFAIL, recorded; so does
 * the tour's own standard output if it could not be written (then a write error). */
static int run_line_to_fd(tour *t, tl_cmd_fn fn, const char *line, int fd, const char *where)
{
    int rc = flush_stdout(TL_OK, "standard output");
    if (rc) return rc;
    int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fd, STDOUT_FILENO) < 0) {
        if (saved >= 0) close(saved);
        return tl_error(TL_EFAIL, where, "cannot send the step's output there: %s", strerror(errno));
    }
    rc = run_line(t, fn, line, where);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    return rc;
}

/* Copies the lines of f to standard output; of more than TOUR_SHOW_MAX, only the first and last
 * few, with a line between them that names the command (`expanded`) which prints them all. */
static void show_cut(FILE *f, const char *expanded)
{
    char line[4096];
    long n = 0, i = 0;
    rewind(f);
    while (fgets(line, sizeof line, f))
        n += strchr(line, '\n') != NULL;
    rewind(f);
    const int cut = n > TOUR_SHOW_MAX;
    while (fgets(line, sizeof line, f)) {
        if (!cut || i < TOUR_SHOW_HEAD || i >= n - TOUR_SHOW_TAIL) fputs(line, stdout);
        if (cut && i == TOUR_SHOW_HEAD)
            printf("   ... %ld more lines; all of them: tilelab %s\n", n - TOUR_SHOW_HEAD - TOUR_SHOW_TAIL, expanded);
        i += strchr(line, '\n') != NULL;
    }
}

/* Prints a step's title and command, then runs it and shows its output (cut when long). */
static int tour_step(tour *t, tl_cmd_fn fn, const char *title, const char *line)
{
    char expanded[2048];
    expand_line(t, line, expanded, sizeof expanded);
    printf("\n=== %s\n$ tilelab %s\n", title, expanded);
    FILE *out = tmpfile();
    if (!out) return run_line(t, fn, line, "standard output"); /* nowhere to hold it: shown whole */
    int rc = run_line_to_fd(t, fn, line, fileno(out), "the tour's temporary file");
    show_cut(out, expanded);
    fclose(out);
    return rc;
}

/* Runs a step with its standard output sent to `path` (written atomically), e.g. a CSV that a
 * later step reads. A refused output (read-only, a folder) fails the step before it runs. */
static int tour_step_to_file(tour *t, tl_cmd_fn fn, const char *title, const char *line, const char *path)
{
    char expanded[2048];
    expand_line(t, line, expanded, sizeof expanded);
    printf("\n=== %s\n$ tilelab %s > %s\n", title, expanded, path);
    tl_atomic a;
    int rc = tl_atomic_begin(&a, path);
    if (!rc) rc = run_line_to_fd(t, fn, line, a.fd, path);
    if (!rc) rc = tl_atomic_close(&a, NULL);
    if (!rc) rc = tl_atomic_commit(&a);
    if (rc) {
        tl_atomic_abort(&a);
        snprintf(t->unwritten, sizeof t->unwritten, "%s", path);
    }
    return rc;
}

/* The tour, in order: each step is an ordinary command line ("{out}" = the output folder). A
 * step with to_file sends its standard output to that file under the output folder. */
typedef struct {
    tl_cmd_fn fn;
    const char *title;
    const char *line;
    const char *to_file;
    const char *reads; /* a file an earlier step's to_file wrote, which this step reads (or NULL) */
} tour_entry;

static const tour_entry tour_steps[] = {
    /* 1. number formats */
    {tl_cmd_numerics, "FP4 (E2M1): every code, its value and class", "numerics table e2m1", NULL, NULL},
    {tl_cmd_numerics, "FP8 E4M3FN: every code, its value and class", "numerics table e4m3fn", NULL, NULL},
    {tl_cmd_numerics, "FP8 E4M3FNUZ (gfx942): the same bits mean half as much", "numerics table e4m3fnuz", NULL, NULL},
    /* 2. quantization error on N(0,1) and on outlier channels */
    {tl_cmd_numerics, "MXFP4 on N(0,1) data (FACTS anchor: rel RMS about 0.115)",
     "numerics quantize --scheme mxfp4 --dist normal --n 1048576 --seed 1", NULL, NULL},
    {tl_cmd_numerics, "MXFP8 E4M3 on N(0,1) data (anchor: about 0.029)",
     "numerics quantize --scheme mxfp8_e4m3 --dist normal --n 1048576 --seed 1", NULL, NULL},
    {tl_cmd_numerics, "Per-tensor FP8 on data with outlier channels",
     "numerics quantize --scheme fp8_e4m3_tensor --dist outliers --n 1048576 --seed 1", NULL, NULL},
    {tl_cmd_numerics, "... and after a Hadamard rotation (incoherent processing)",
     "numerics quantize --scheme fp8_e4m3_tensor --dist outliers --n 1048576 --seed 1 --rotate hadamard", NULL, NULL},
    /* 3. the MoE tile model on the MI355X preset */
    {tl_cmd_sim, "Fused MoE on MI355X, DeepSeek-V3.2 FP8, stage 1 (simulated)",
     "sim moe --hw mi355x --model deepseek-v3.2 --dtype fp8 --tokens 1,8,32,64,256,512,1024 --stage 1", NULL, NULL},
    {tl_cmd_sim, "Split-KV decode attention, seed Table 2's first configuration (simulated)",
     "sim paged-decode --hw mi355x --kv-dtype bf16 --gqa 1 --batch 32 --seq 16384 --kv-heads 16", NULL, NULL},
    /* 4. the first op with all five parts: its check (the GPU part where a GPU build finds one) */
    {tl_cmd_check, "Fused MoE, FP8 block-scaled: the kernel against its CPU reference",
     "check moe --model deepseek-v3.2 --dtype fp8 --tokens 1,16 --tp 8 --seed 1", NULL, NULL},
    /* 5. the other ops: their models, and their checks (the CPU reference against a naive loop
     * without a GPU) */
    {tl_cmd_sim, "Exact top-k on the H200 preset: the path and split the model picks (simulated)",
     "sim topk --hw h200 --n 4096,1048576 --batch 1,32 --k 512", NULL, NULL},
    {tl_cmd_check, "Exact top-k: the kernel (or, without a GPU, the reference) against a full sort",
     "check topk --n 300,5000 --batch 1,4 --k 64 --seed 1", NULL, NULL},
    {tl_cmd_sim, "DSA lightning indexer on MI355X: a causal square against a skinny shape (simulated)",
     "sim indexer --hw mi355x --rows 4096,2048 --kv 4096,32768 --heads 64", NULL, NULL},
    {tl_cmd_sim, "CSA dual-scope decode on the H200 preset: shards and merge (simulated)",
     "sim decode --kind dual-scope --hw h200 --batch 1,8 --seq 65536", NULL, NULL},
    {tl_cmd_check, "Dual-scope decode: window + top-k in one softmax, merged shards against one pass",
     "check decode --kind dual-scope --batch 2 --seq 300 --heads 16 --topk 64 --seed 1", NULL, NULL},
    {tl_cmd_sim, "The MoE dispatch payload: bytes a token crosses the fabric, GLM-5 over 8 GPUs",
     "sim dispatch --model glm-5 --ep 8 --tokens 1,4096", NULL, NULL},
    {tl_cmd_sim, "FP8 causal prefill attention on MI355X: matrix work against the exponentials (simulated)",
     "sim prefill --hw mi355x --shape mistral-7b --seq 4096,16384 --dtype fp8", NULL, NULL},
    /* 6. pictures */
    {tl_cmd_draw, "Tiles of the fused MoE at 1, 32 and 512 tokens (seed Figure 6)",
     "draw moe-tiles --hw mi355x --model deepseek-v3.2 --tokens 1,32,512 -o {out}/moe-tiles.png", NULL, NULL},
    {tl_cmd_draw, "Padding factor against tokens", "draw padding --hw mi355x -o {out}/padding.png", NULL, NULL},
    {tl_cmd_draw, "Work items over CUs in time, DeepSeek-V3.2 FP8 stage 1 at 64 tokens",
     "draw timeline --hw mi355x --model deepseek-v3.2 --dtype fp8 --tokens 64 -o {out}/timeline.png", NULL, NULL},
    {tl_cmd_sim, "Both MoE stages as CSV, for the roofline",
     "sim moe --hw mi355x --model deepseek-v3.2 --dtype fp8 --tokens 1,8,64,256,1024 --stage both --format csv",
     "moe-sim.csv", NULL},
    {tl_cmd_draw, "The MI355X roofline with the simulated MoE points",
     "draw roofline --hw mi355x --points {out}/moe-sim.csv -o {out}/roofline.png", NULL, "moe-sim.csv"},
    {tl_cmd_draw, "Which lane holds which element: gfx950's 16x16x32 BF16 MFMA",
     "draw mfma --arch gfx950 --instr v_mfma_f32_16x16x32_bf16 -o {out}/mfma.png", NULL, NULL},
    {tl_cmd_draw, "Top-k at 1M: one block against the row split over many (seed Figure 8, simulated)",
     "draw topk-split --hw mi355x --n 1048576 --k 512 -o {out}/topk-split.png", NULL, NULL},
    {tl_cmd_draw, "One dual-scope decode row: its scopes, shards and the merge (simulated)",
     "draw decode-shards --hw h200 -o {out}/decode-shards.png", NULL, NULL},
    {tl_cmd_draw, "Bytes a token crosses the fabric in a MoE dispatch, by format",
     "draw dispatch-bytes -o {out}/dispatch-bytes.png", NULL, NULL},
    {tl_cmd_draw, "Causal prefill: the tiles skipped above the diagonal and the blocks over CUs (simulated)",
     "draw prefill-tiles --hw mi355x --shape mistral-7b --seq 4096 -o {out}/prefill-tiles.png", NULL, NULL},
};

static const char tour_usage[] =
    "usage: tilelab tour [--out DIR]\n"
    "Runs the workbench's main commands on embedded defaults (MI355X preset, DeepSeek-V3.2) and\n"
    "writes the pictures under DIR (default tilelab-tour).\n";

int tl_cmd_tour(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, tour_usage)) return 0;
    tour t = {.out_dir = "tilelab-tour"};
    tl_opt opts[] = {TL_OPT_V("--out", &t.out_dir), TL_OPT_END};
    if (tl_opts_parse(argc, argv, opts, "tour", NULL, 0, NULL)) return TL_EUSAGE;
    if (strlen(t.out_dir) >= TOUR_MAX_OUT)
        return tl_error(TL_EUSAGE, "--out", "folder name longer than %d characters", TOUR_MAX_OUT - 1);
    int rc = tl_mkdirs(t.out_dir);
    if (rc) return rc;

    printf("tilelab tour: every step below is an ordinary command; pictures go to %s/\n", t.out_dir);

    for (size_t i = 0; i < sizeof tour_steps / sizeof tour_steps[0]; i++) {
        const tour_entry *e = &tour_steps[i];
        char path[TOUR_MAX_OUT + 64], reads[TOUR_MAX_OUT + 64];
        snprintf(path, sizeof path, "%s/%s", t.out_dir, e->to_file ? e->to_file : "");
        snprintf(reads, sizeof reads, "%s/%s", t.out_dir, e->reads ? e->reads : "");
        if (e->reads && strcmp(reads, t.unwritten) == 0) {
            printf("\n=== %s\n(skipped: it reads %s, which the step before could not write)\n", e->title, reads);
            rc = tl_error(TL_EFAIL, reads, "not written by this tour: step skipped");
        } else {
            rc = e->to_file ? tour_step_to_file(&t, e->fn, e->title, e->line, path)
                            : tour_step(&t, e->fn, e->title, e->line);
        }
        /* every step is counted once, and a failed one prints its error line there */
        t.steps++;
        if (!rc) continue;
        if (tl_last_error_is_write()) return rc; /* a full disk: every later step would fail too */
        fflush(stdout);
        tl_report_error();
        t.failures++;
    }

    printf("\ntilelab tour: %d steps, %d failed; pictures in %s/\n", t.steps, t.failures, t.out_dir);
    if (t.failures) return tl_error(TL_EFAIL, "tour", "%d of %d steps failed", t.failures, t.steps);
    return TL_OK;
}
