/* cmake/amd_asm_costs.c: the build step that turns the AMD kernels' assembly into the C table the
 * models read (simulator/amd_code.h). Not part of the library: CMake builds and runs it.
 *
 * usage: amd_asm_costs --out FILE.c [--mca LLVM_MCA] ARCH:SOURCE:FILE.s...
 *   ARCH gfx950 | gfx942; SOURCE the kernel file it came from (kernels/prefill.hip), recorded in
 *   the table; FILE.s the device assembly clang wrote. For every kernel with a hot loop, LLVM_MCA
 *   (llvm-mca-22) is run on the loop's instructions (labels and branches left out: llvm-mca reads
 *   one straight block) for 100 iterations, -mcpu=ARCH; its cycles per iteration and Block
 *   RThroughput go into the table. Writes FILE.c through FILE.c.tmp (renamed when complete).
 * Output is byte-reproducible: no paths of this machine, no dates. Exit 1 with one line on stderr
 * on any failure (unreadable file, metadata it cannot read, llvm-mca failing). Cost: one pass over
 * each file and one llvm-mca run per hot loop (milliseconds each). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tl.h"
#include "simulator/amd_code.h"

/* amd_code.c's lookups read the build's table; this tool writes it and has none */
const tl_amd_kernel tl_amd_code_table[1];
const int tl_amd_code_count = 0;

#define MAX_KERNELS 256

static int die(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "amd_asm_costs: error: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

/* The hot loop's instructions of kernel name (tl_amd_code_loop_text) into path. */
static int write_region(const char *text, const char *arch, const char *name, const char *path)
{
    char *body = tl_amd_code_loop_text(text, arch, name);
    if (!body) return -1;
    FILE *f = fopen(path, "w");
    if (!f) return free(body), -1;
    /* llvm-mca-22 never finishes a loop where v_cvt_pk_fp8_f32 writes a half (op_sel) that an MFMA
     * then reads (prefill's FP8 P fragment): each such line goes to it as v_add_f32_e64 with the same
     * destination and sources, one full-rate VALU as LLVM's model counts the conversion */
    for (char *line = body, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        const char *cvt = strstr(line, "v_cvt_pk_fp8_f32");
        if (cvt) {
            char ops[256];
            snprintf(ops, sizeof ops, "%s", cvt + strlen("v_cvt_pk_fp8_f32"));
            char *opsel = strstr(ops, " op_sel");
            if (opsel) *opsel = '\0';
            fprintf(f, "\tv_add_f32_e64%s\n", ops);
        } else {
            fprintf(f, "%s\n", line);
        }
    }
    free(body);
    return fclose(f);
}

/* llvm-mca's cycles per iteration and Block RThroughput of the region */
static int run_mca(const char *mca, const char *arch, const char *path, double *cycles, double *rthr)
{
    char cmd[8400];
    /* (timeout: a loop llvm-mca cannot finish gives the build an error, not a hang) */
    snprintf(cmd, sizeof cmd, "timeout 120 '%s' -mtriple=amdgcn-amd-amdhsa -mcpu=%s -iterations=100 '%s' 2>&1", mca, arch, path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[1024];
    double total = -1, iters = -1;
    *rthr = -1;
    while (fgets(line, sizeof line, p)) {
        if (strncmp(line, "Iterations:", 11) == 0) iters = atof(line + 11);
        else if (strncmp(line, "Total Cycles:", 13) == 0) total = atof(line + 13);
        else if (strncmp(line, "Block RThroughput:", 18) == 0) *rthr = atof(line + 18);
    }
    const int rc = pclose(p);
    if (rc != 0 || total < 0 || iters <= 0 || *rthr < 0) return -1;
    *cycles = total / iters;
    return 0;
}

static void emit(FILE *f, const tl_amd_kernel *k)
{
    const tl_amd_loop *l = &k->loop;
    fprintf(f, "    {.arch = \"%s\", .name = \"%s\", .file = \"%s\",\n", k->arch, k->name, k->file);
    fprintf(f, "     .vgpr = %d, .agpr = %d, .accum_offset = %d, .sgpr = %d, .vgpr_file = %d, .lds = %d, .scratch = %d, .wg_max = %d,\n",
            k->vgpr, k->agpr, k->accum_offset, k->sgpr, k->vgpr_file, k->lds, k->scratch, k->wg_max);
    fprintf(f, "     .loop = {.found = %d, .first_line = %d, .last_line = %d, .instrs = %d, .inner_loops = %d, .n_mfma = %d,\n",
            l->found, l->first_line, l->last_line, l->instrs, l->inner_loops, l->n_mfma);
    fprintf(f, "              .mfma = {");
    for (int i = 0; i < l->n_mfma; i++)
        fprintf(f, "%s{\"%s\", \"%s\", %d}", i ? ", " : "", l->mfma[i].name, l->mfma[i].format, l->mfma[i].count);
    fprintf(f, "},\n");
    fprintf(f, "              .valu = %d, .valu_packed = %d, .trans = %d, .salu = %d, .branch = %d, .waitcnt = %d, .barrier = %d, .nop_cycles = %d,\n",
            l->valu, l->valu_packed, l->trans, l->salu, l->branch, l->waitcnt, l->barrier, l->nop_cycles);
    fprintf(f, "              .lds = %d, .lds_read_bytes = %d, .lds_write_bytes = %d, .vmem_load = %d, .vmem_store = %d, .vmem_load_bytes = %d, .smem = %d,\n",
            l->lds, l->lds_read_bytes, l->lds_write_bytes, l->vmem_load, l->vmem_store, l->vmem_load_bytes, l->smem);
    fprintf(f, "              .mca_cycles = %.2f, .mca_rthroughput = %.2f}},\n", l->mca_cycles, l->mca_rthroughput);
}

int main(int argc, char **argv)
{
    const char *out = NULL, *mca = NULL;
    int first = 1;
    for (; first < argc && strncmp(argv[first], "--", 2) == 0; first += 2) {
        if (first + 1 >= argc) return die("%s needs a value%s", argv[first], "");
        if (strcmp(argv[first], "--out") == 0) out = argv[first + 1];
        else if (strcmp(argv[first], "--mca") == 0) mca = argv[first + 1];
        else return die("unknown option %s%s", argv[first], "");
    }
    if (!out || first >= argc) return die("usage: amd_asm_costs --out FILE.c [--mca LLVM_MCA] ARCH:SOURCE:FILE.s...%s%s", "", "");
    static tl_amd_kernel all[MAX_KERNELS];
    int total = 0;
    char tmp_s[4200], tmp_c[4200];
    snprintf(tmp_s, sizeof tmp_s, "%s.loop.s", out);
    snprintf(tmp_c, sizeof tmp_c, "%s.tmp", out);
    for (int a = first; a < argc; a++) {
        char spec[4000];
        snprintf(spec, sizeof spec, "%s", argv[a]);
        char *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) return die("%s: want ARCH:SOURCE:FILE.s%s", argv[a], "");
        *c1 = *c2 = '\0';
        const char *arch = spec, *source = c1 + 1, *path = c2 + 1;
        char *text = slurp(path);
        if (!text) return die("%s: %s", path, strerror(errno));
        int n = 0;
        if (tl_amd_code_parse(text, arch, strdup(source), all + total, MAX_KERNELS - total, &n))
            return die("%s: %s", path, tl_last_error());
        for (int i = total; i < total + n; i++) {
            tl_amd_loop *l = &all[i].loop;
            if (!mca || !l->found) continue;
            if (write_region(text, arch, all[i].name, tmp_s) ||
                run_mca(mca, arch, tmp_s, &l->mca_cycles, &l->mca_rthroughput))
                return die("llvm-mca failed on the hot loop of %s (%s)", all[i].name, path);
        }
        total += n;
        free(text);
    }
    remove(tmp_s);
    FILE *f = fopen(tmp_c, "w");
    if (!f) return die("%s: %s", tmp_c, strerror(errno));
    fprintf(f, "/* generated by cmake/amd_asm_costs.c from the kernels' gfx950 / gfx942 assembly: do not edit */\n");
    fprintf(f, "#include \"simulator/amd_code.h\"\n\nconst tl_amd_kernel tl_amd_code_table[] = {\n");
    for (int i = 0; i < total; i++) emit(f, &all[i]);
    if (total == 0) fprintf(f, "    {.arch = \"\"},\n");
    fprintf(f, "};\nconst int tl_amd_code_count = %d;\n", total);
    if (fclose(f) || rename(tmp_c, out)) return die("%s: %s", out, strerror(errno));
    return 0;
}
