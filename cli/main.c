/* tilelab: the command's entry point and its dispatch tables. */
#include "cli.h"
#include "../core/op.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifndef TILELAB_VERSION
#define TILELAB_VERSION "0.0.0"
#endif

static const tl_command bench_table[] = {
    {"numerics", tl_bench_numerics, "encode, decode and MX-quantize throughput on this CPU", ""},
    {"sim", tl_bench_sim, "time the simulator over every preset, model, dtype and token count", ""},
    {"roofline", tl_bench_roofline, "measure the GPU's matrix-core and HBM ceilings", ""},
    {NULL, NULL, NULL, NULL},
};

static const tl_command draw_table[] = {
    {"roofline", tl_draw_roofline, "ceilings of a preset with kernels as points", ""},
    {"mfma", tl_draw_mfma, "an MFMA instruction's operands coloured by lane", ""},
    {"step", tl_draw_step, "a model step's time by op kind at serving points, and against tokens a step", ""},
    {NULL, NULL, NULL, NULL},
};

/* `bench OP` for the ops of the op table, else the benchmarks above */
int tl_cmd_bench(int argc, char **argv) { return tl_dispatch_ops(bench_table, "bench", tl_bench_op, argc, argv); }
/* `draw FIGURE`: the ops' figures (each row's `figures`), then the pictures above */
int tl_cmd_draw(int argc, char **argv)
{
    enum { MAX_FIGURES = 64 };
    tl_command all[MAX_FIGURES + 1];
    int n = 0;
    for (int i = 0; tl_ops[i]; i++)
        for (const tl_op_figure *f = tl_ops[i]->figures; f && f->name && n < MAX_FIGURES; f++)
            all[n++] = (tl_command){f->name, f->draw, f->summary, ""};
    for (const tl_command *c = draw_table; c->name && n < MAX_FIGURES; c++) all[n++] = *c;
    all[n] = (tl_command){NULL, NULL, NULL, NULL};
    return tl_dispatch(all, "draw", argc, argv);
}

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv)
{
    if (argc > 1) return tl_error(TL_EUSAGE, "version", "unexpected argument '%s'", argv[1]);
    printf("tilelab %s\n", TILELAB_VERSION);
    return 0;
}

static const tl_command top_table[] = {
    {"tour", tl_cmd_tour, "show what the workbench does, on embedded defaults",
     "usage: tilelab tour [--out DIR]\n"
     "Prints the format tables, quantization error reports and the MoE model, and writes the\n"
     "pictures under DIR (default tilelab-tour).\n"},
    {"numerics", tl_cmd_numerics, "number formats: convert, table, quantize, attention-error",
     "usage: tilelab numerics convert|table|quantize|attention-error ...  (tilelab numerics SUB --help)\n"},
    {"hw", tl_cmd_hw, "hardware presets: list, show NAME", "usage: tilelab hw list | tilelab hw show NAME|FILE\n"},
    {"models", tl_cmd_models, "model presets and config.json files as the simulator reads them",
     "usage: tilelab models [NAME|CONFIG.json ...] [--format table|csv|json]\n"},
    {"sim", tl_cmd_sim, "tile-scheduling model of an op on a hardware preset",
     "usage: tilelab sim OP|paged-decode ...  (tilelab sim SUB --help; tilelab ops lists the ops)\n"},
    {"draw", tl_cmd_draw, "pictures: each op's figures (tilelab draw --help lists them), roofline, mfma",
     "usage: tilelab draw FIGURE|roofline|mfma ... -o FILE.png|svg|pdf  (tilelab draw --help: the figures)\n"},
    {"mfma", tl_cmd_mfma, "matrix-core instructions: list, layout",
     "usage: tilelab mfma list --arch gfx942|gfx950\n"
     "       tilelab mfma layout --arch ARCH --instr NAME --matrix A|B|C|D [--format csv]\n"},
    {"ops", tl_cmd_ops, "the op table: ops, dtypes, where each kernel was compiled and run",
     "usage: tilelab ops [--format table|csv|json]\n"},
    {"check", tl_cmd_check, "an op's GPU kernel against its CPU reference",
     "usage: tilelab check OP [options] [--input NAME=FILE.npy ...]  (tilelab check OP --help)\n"},
    {"run", tl_cmd_run, "an op's reference or kernel on your own .npy tensors",
     "usage: tilelab run OP --input NAME=FILE.npy ... --output FILE.npy [--device cpu|gpu]\n"},
    {"bench", tl_cmd_bench, "benchmarks: numerics, sim, roofline, and each op",
     "usage: tilelab bench numerics|sim|roofline|OP ...  (tilelab ops lists the ops)\n"},
    {"help", cmd_help, "help on a command", "usage: tilelab help COMMAND\n"},
    {"version", cmd_version, "print the version", "usage: tilelab version\n"},
    {NULL, NULL, NULL, NULL},
};

static void print_top_help(FILE *f)
{
    fprintf(f, "tilelab %s: a workbench for GPU kernels of LLM inference (AMD MI355X, MI300X; NVIDIA H100, H200)\n\n"
               "usage: tilelab COMMAND [options]\n\ncommands:\n", TILELAB_VERSION);
    for (const tl_command *c = top_table; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f, "\n`tilelab help COMMAND` or `tilelab COMMAND --help` for a command's options.\n");
}

static const tl_command *find(const tl_command *table, const char *name)
{
    for (const tl_command *c = table; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        print_top_help(stdout);
        return 0;
    }
    const tl_command *c = find(top_table, argv[1]);
    if (!c) return tl_error(TL_EUSAGE, "help", "unknown command '%s'", argv[1]);
    if (argc > 3) return tl_error(TL_EUSAGE, "help", "unexpected argument '%s'", argv[3]);
    if (argc == 3) { /* `help CMD SUB` is `CMD SUB --help`: the command checks SUB and prints its usage */
        char *args[] = {argv[1], argv[2], "--help", NULL};
        return c->fn(3, args);
    }
    printf("tilelab %s: %s\n", c->name, c->summary);
    if (c->fn == cmd_help || c->fn == cmd_version) { /* the two without a --help of their own */
        fputs(c->usage, stdout);
        return 0;
    }
    char *args[] = {argv[1], "--help", NULL}; /* one text: `help CMD` is `CMD --help` */
    return c->fn(2, args);
}


/* "a, b, c": the names of a table, for messages. */
static void table_names(const tl_command *table, char *names, size_t cap)
{
    names[0] = '\0';
    for (const tl_command *t = table; t->name; t++) {
        if (names[0]) strncat(names, ", ", cap - strlen(names) - 1);
        strncat(names, t->name, cap - strlen(names) - 1);
    }
}

int tl_dispatch(const tl_command *table, const char *group, int argc, char **argv)
{
    return tl_dispatch_ops(table, group, NULL, argc, argv);
}

int tl_dispatch_ops(const tl_command *table, const char *group, tl_cmd_fn op_fn, int argc, char **argv)
{
    char names[512];
    table_names(table, names, sizeof names);
    for (int i = 0; op_fn && tl_ops[i]; i++) {
        strncat(names, ", ", sizeof names - strlen(names) - 1);
        strncat(names, tl_ops[i]->name, sizeof names - strlen(names) - 1);
    }
    if (op_fn && argc >= 2 && tl_op_find(argv[1])) return op_fn(argc - 1, argv + 1);
    if (argc < 2) /* a usage error: one line, like every other */
        return tl_error(TL_EUSAGE, group, "missing subcommand (one of %s; tilelab %s --help)", names, group);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        printf("usage: tilelab %s SUBCOMMAND [options]\n\n", group);
        for (const tl_command *c = table; c->name; c++) printf("  %-16s %s\n", c->name, c->summary);
        for (int i = 0; op_fn && tl_ops[i]; i++) printf("  %-16s %s (an op: tilelab ops)\n", tl_ops[i]->name, tl_ops[i]->summary);
        return 0;
    }
    const tl_command *c = find(table, argv[1]);
    if (!c) return tl_error(TL_EUSAGE, group, "unknown subcommand '%s' (one of %s)", argv[1], names);
    return c->fn(argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
    tl_ignore_sigxfsz(); /* past `ulimit -f` a write fails with EFBIG and says so, instead of a silent kill */
    if (argc < 2) {
        char names[512];
        table_names(top_table, names, sizeof names);
        tl_error(TL_EUSAGE, "command", "missing command (one of %s; tilelab --help)", names);
        tl_report_error();
        return TL_EUSAGE;
    }
    const tl_command *c = find(top_table, argv[1]);
    int rc;
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) rc = cmd_help(1, argv);
    else if (strcmp(argv[1], "--version") == 0) rc = cmd_version(argc - 1, argv + 1);
    else if (c) rc = c->fn(argc - 1, argv + 1);
    else rc = tl_error(TL_EUSAGE, "command", "unknown command '%s' (try tilelab --help)", argv[1]);
    /* output that could not be written (a full disk, a closed pipe) is a failure, not success;
     * the reason is the errno of this last flush, which retries what an earlier write left */
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) rc = tl_write_error("standard output", NULL, errno);
    if (rc != 0) tl_report_error();
    return rc;
}
