/* simulator/amd_code.c: an AMD kernel's resources and hot loop from its assembly (simulator/amd_code.h). */
#include "amd_code.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tl.h"

/* ---- the lines ---- */

typedef struct {
    char **line; /* NUL-terminated, without the newline; line[i] is line i + 1 */
    int n;
    char *buf;
} lines_t;

static int split_lines(const char *text, lines_t *L)
{
    memset(L, 0, sizeof *L);
    size_t len = strlen(text);
    L->buf = malloc(len + 1);
    int cap = 1;
    for (size_t i = 0; i < len; i++) cap += text[i] == '\n';
    L->line = malloc(sizeof *L->line * (size_t)cap);
    if (!L->buf || !L->line) {
        free(L->buf), free(L->line);
        return tl_error(TL_EFAIL, "amd code", "out of memory");
    }
    memcpy(L->buf, text, len + 1);
    char *p = L->buf;
    while (*p) {
        L->line[L->n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    return TL_OK;
}

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

/* The mnemonic of an instruction line into m (cap bytes), else 0 (a label, directive, comment). */
static int mnemonic_of(const char *line, char *m, size_t cap)
{
    const char *s = skip_space(line);
    if (!islower((unsigned char)*s)) return 0;
    size_t k = 0;
    while (s[k] && !isspace((unsigned char)s[k]) && k + 1 < cap) k++;
    if (s[k - 1] == ':') return 0; /* a label */
    memcpy(m, s, k);
    m[k] = '\0';
    return 1;
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* ---- classes ---- */

/* bytes a lane moves: the width suffix of a memory mnemonic */
static int width_bytes(const char *m)
{
    const char *x;
    if ((x = strstr(m, "dwordx"))) return 4 * atoi(x + 6);
    if (strstr(m, "dword")) return 4;
    if (strstr(m, "short")) return 2;
    if (strstr(m, "byte")) return 1;
    const char *best = NULL;
    for (const char *p = m; (p = strchr(p, '_')); p++) {
        if ((p[1] == 'b' || p[1] == 'u' || p[1] == 'i') && isdigit((unsigned char)p[2])) {
            best = p + 2;
            break;
        }
    }
    return best ? atoi(best) / 8 : 0;
}

static int is_trans(const char *m)
{
    static const char *const t[] = {"v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_"};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (starts(m, t[i])) return 1;
    return 0;
}

/* an f8f6f4 operand format from its cbsz / blgp field value */
static int field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? atoi(p + strlen(key)) : 0;
}

static const char *f8f6f4_format(const char *line)
{
    const int a = field(line, "cbsz:"), b = field(line, "blgp:");
    if (a <= 1 || b <= 1) return "fp8";
    if (a <= 3 || b <= 3) return "fp6";
    return "fp4";
}

static int add_mfma(tl_amd_loop *l, const char *m, const char *line)
{
    const char *fmt = strstr(m, "f8f6f4") ? f8f6f4_format(line) : "";
    for (int i = 0; i < l->n_mfma; i++)
        if (strcmp(l->mfma[i].name, m) == 0 && strcmp(l->mfma[i].format, fmt) == 0) return l->mfma[i].count++, TL_OK;
    if (l->n_mfma >= TL_AMD_MAX_MFMA) return tl_error(TL_EUSAGE, "amd code", "more than %d matrix instruction kinds in one loop", TL_AMD_MAX_MFMA);
    tl_amd_mfma_count *c = &l->mfma[l->n_mfma++];
    snprintf(c->name, sizeof c->name, "%.47s", m);
    snprintf(c->format, sizeof c->format, "%s", fmt);
    c->count = 1;
    return TL_OK;
}

static int count_instr(tl_amd_loop *l, const char *m, const char *line)
{
    l->instrs++;
    if (starts(m, "v_mfma")) return add_mfma(l, m, line);
    if (m[0] == 'v' && m[1] == '_') {
        if (is_trans(m)) l->trans++;
        else l->valu++, l->valu_packed += starts(m, "v_pk_");
    } else if (starts(m, "ds_")) {
        const int w = width_bytes(m) * (strstr(m, "2st64") || strstr(m, "read2") || strstr(m, "write2") ? 2 : 1);
        l->lds++;
        if (strstr(m, "read") || starts(m, "ds_bpermute") || starts(m, "ds_permute") || starts(m, "ds_swizzle")) l->lds_read_bytes += w ? w : 4;
        else if (strstr(m, "write")) l->lds_write_bytes += w;
    } else if (starts(m, "global_") || starts(m, "buffer_") || starts(m, "flat_")) {
        if (strstr(m, "load")) l->vmem_load++, l->vmem_load_bytes += width_bytes(m);
        else l->vmem_store++;
    } else if (starts(m, "s_waitcnt")) {
        l->waitcnt++;
    } else if (starts(m, "s_barrier")) {
        l->barrier++;
    } else if (starts(m, "s_nop")) {
        l->nop_cycles += atoi(skip_space(line + (strstr(line, "s_nop") - line) + 5)) + 1;
    } else if (starts(m, "s_branch") || starts(m, "s_cbranch") || starts(m, "s_setpc")) {
        l->branch++;
    } else if (starts(m, "s_load") || starts(m, "s_buffer_load")) {
        l->smem++;
    } else if (m[0] == 's' && m[1] == '_') {
        l->salu++;
    }
    return TL_OK;
}

/* ---- functions and their loops ----
 * The loops are LLVM's own (MachineLoopInfo), as its assembly printer writes them beside each basic
 * block: "; =>This Loop Header: Depth=1" (or "=>  This Inner Loop Header") on a header's label,
 * "Parent Loop BBp Depth=d" lines above it, and "in Loop: Header=BBh Depth=d" on every other block
 * of loop BBh. A loop is all its blocks, wherever the layout put them (an out-of-line block of the
 * loop body counts), its inner loops' included. */

#define MAX_LOOPS 256

typedef struct {
    char name[32];  /* "BB6_12" */
    int parent;     /* index of the enclosing loop, -1 at depth 1 */
    int mfma, instrs;
} loop_t;

static int loop_index(loop_t *loop, int *nl, const char *name)
{
    for (int x = 0; x < *nl; x++)
        if (strcmp(loop[x].name, name) == 0) return x;
    if (*nl >= MAX_LOOPS) return -1;
    memset(&loop[*nl], 0, sizeof loop[*nl]);
    snprintf(loop[*nl].name, sizeof loop[*nl].name, "%.31s", name);
    loop[*nl].parent = -1;
    return (*nl)++;
}

/* the word after key in s ("Header=BB6_12 Depth=1" -> "BB6_12") into out */
static int word_after(const char *s, const char *key, char *out, size_t cap)
{
    const char *p = strstr(s, key);
    if (!p) return 0;
    p += strlen(key);
    size_t k = 0;
    while (p[k] && !isspace((unsigned char)p[k]) && k + 1 < cap) out[k] = p[k], k++;
    out[k] = '\0';
    return k > 0;
}

/* Per line of [a, b): the innermost loop its block is in (-1: none) into in_loop[]. */
static int find_loops(const lines_t *L, int a, int b, loop_t *loop, int *nl, int *in_loop)
{
    *nl = 0;
    int cur = -1;
    char w[64], parent[64] = "";
    for (int i = a; i < b; i++) {
        const char *s = L->line[i];
        const int block = starts(s, ".LBB") || starts(skip_space(s), "; %bb.");
        if (block) {
            cur = -1;
            parent[0] = '\0';
        }
        if (block || (skip_space(s)[0] == ';' && strstr(s, "Loop"))) {
            if (word_after(s, "Parent Loop ", w, sizeof w)) snprintf(parent, sizeof parent, "%s", w);
            if (strstr(s, "Loop Header:")) {
                /* this block's own label is the header: the nearest label line at or above */
                int j = i;
                while (j >= a && !starts(L->line[j], ".LBB")) j--;
                if (j < a) return tl_error(TL_EUSAGE, "amd code", "line %d: a loop header without a label", i + 1);
                const char *c = strchr(L->line[j], ':');
                snprintf(w, sizeof w, "%.*s", (int)(c - L->line[j] - 2), L->line[j] + 2); /* ".LBB6_12:" -> "BB6_12" */
                cur = loop_index(loop, nl, w);
                if (cur < 0) return tl_error(TL_EUSAGE, "amd code", "line %d: more than %d loops", i + 1, MAX_LOOPS);
                if (parent[0]) loop[cur].parent = loop_index(loop, nl, parent);
            } else if (word_after(s, "in Loop: Header=", w, sizeof w)) {
                cur = loop_index(loop, nl, w);
                if (cur < 0) return tl_error(TL_EUSAGE, "amd code", "line %d: more than %d loops", i + 1, MAX_LOOPS);
            }
        }
        in_loop[i] = cur;
        char m[64];
        if (cur >= 0 && mnemonic_of(s, m, sizeof m))
            for (int x = cur; x >= 0; x = loop[x].parent) loop[x].instrs++, loop[x].mfma += starts(m, "v_mfma");
    }
    return TL_OK;
}

static int within(const loop_t *loop, int x, int outer)
{
    for (; x >= 0; x = loop[x].parent)
        if (x == outer) return 1;
    return 0;
}

/* The hot loop (simulator/amd_code.h) of the function in lines [a, b) into *l; marks its lines in
 * mark[] (when not NULL). */
static int hot_loop(const lines_t *L, int a, int b, tl_amd_loop *l, unsigned char *mark)
{
    static loop_t loop[MAX_LOOPS];
    int nl;
    int *in_loop = malloc(sizeof *in_loop * (size_t)(b - a + 1));
    if (!in_loop) return tl_error(TL_EFAIL, "amd code", "out of memory");
    int rc = find_loops(L, a, b, loop, &nl, in_loop - a);
    memset(l, 0, sizeof *l);
    if (rc || nl == 0) return free(in_loop), rc;
    int any_mfma = 0;
    for (int x = 0; x < nl; x++) any_mfma |= loop[x].mfma > 0;
    int best = -1;
    for (int x = 0; x < nl; x++) {
        if (any_mfma && !loop[x].mfma) continue;
        int innermost = 1;
        for (int y = 0; y < nl && innermost; y++)
            if (y != x && within(loop, y, x) && (!any_mfma || loop[y].mfma)) innermost = 0;
        if (!innermost) continue;
        const int size = any_mfma ? loop[x].mfma : loop[x].instrs;
        const int bsize = best < 0 ? -1 : any_mfma ? loop[best].mfma : loop[best].instrs;
        if (size > bsize) best = x;
    }
    l->found = 1;
    for (int y = 0; y < nl; y++) l->inner_loops += y != best && within(loop, y, best);
    char m[64];
    for (int i = a; i < b && !rc; i++) {
        if (in_loop[i - a] < 0 || !within(loop, in_loop[i - a], best)) continue;
        if (!l->first_line) l->first_line = i + 1;
        l->last_line = i + 1;
        if (mnemonic_of(L->line[i], m, sizeof m)) {
            rc = count_instr(l, m, L->line[i]);
            if (mark) mark[i] = 1;
        }
    }
    free(in_loop);
    return rc;
}

/* ---- the metadata ---- */

static int yaml_int(const char *line, const char *key, int *out)
{
    const char *s = skip_space(line);
    if (s[0] == '-') s = skip_space(s + 1);
    if (!starts(s, key)) return 0;
    s = skip_space(s + strlen(key));
    *out = atoi(s);
    return 1;
}

static tl_amd_kernel *by_name(tl_amd_kernel *k, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(k[i].name, name) == 0) return &k[i];
    return NULL;
}

/* The amdhsa.kernels YAML: one entry a kernel, its keys at the entry's own indentation (4 spaces:
 * the "  - " of its first key); .args' nested entries are deeper and skipped. */
static int read_yaml(const lines_t *L, const char *arch, const char *file, tl_amd_kernel *k, int cap, int *n)
{
    int i = 0;
    while (i < L->n && !strstr(L->line[i], "amdhsa.kernels:")) i++;
    if (i == L->n) return tl_error(TL_EUSAGE, "amd code", "no amdhsa.kernels metadata");
    tl_amd_kernel cur;
    int open = 0;
    for (i++; i < L->n && !starts(skip_space(L->line[i]), ".end_amdgpu_metadata"); i++) {
        const char *s = L->line[i];
        const int item = starts(s, "  - ."), key = starts(s, "    .") && s[5] != ' ';
        if (!item && !key) {
            if (s[0] != ' ' && open) break; /* the next top-level key */
            continue;
        }
        if (item) {
            if (open) {
                if (*n >= cap) return tl_error(TL_EUSAGE, "amd code", "more than %d kernels", cap);
                k[(*n)++] = cur;
            }
            memset(&cur, 0, sizeof cur);
            snprintf(cur.arch, sizeof cur.arch, "%s", arch);
            cur.file = file;
            open = 1;
        }
        int v;
        const char *t = skip_space(s);
        if (t[0] == '-') t = skip_space(t + 1);
        if (starts(t, ".name:")) snprintf(cur.name, sizeof cur.name, "%s", skip_space(t + 6));
        else if (yaml_int(s, ".vgpr_count:", &v)) cur.vgpr = v;
        else if (yaml_int(s, ".agpr_count:", &v)) cur.agpr = v;
        else if (yaml_int(s, ".sgpr_count:", &v)) cur.sgpr = v;
        else if (yaml_int(s, ".group_segment_fixed_size:", &v)) cur.lds = v;
        else if (yaml_int(s, ".private_segment_fixed_size:", &v)) cur.scratch = v;
        else if (yaml_int(s, ".max_flat_workgroup_size:", &v)) cur.wg_max = v;
    }
    if (open) {
        if (*n >= cap) return tl_error(TL_EUSAGE, "amd code", "more than %d kernels", cap);
        k[(*n)++] = cur;
    }
    return TL_OK;
}

/* The parse of tl_amd_code_parse; mark (L.n bytes, when not NULL) gets 1 on every line of the hot
 * loop of kernel `only` (NULL: none). */
static int parse(const char *text, const char *arch, const char *file, tl_amd_kernel *k, int cap, int *n,
                 const char *only, unsigned char **mark, int *nlines)
{
    *n = 0;
    lines_t L;
    int rc = split_lines(text, &L);
    if (rc) return rc;
    if (mark) {
        *nlines = L.n;
        *mark = calloc((size_t)L.n + 1, 1);
        if (!*mark) return free(L.buf), free(L.line), tl_error(TL_EFAIL, "amd code", "out of memory");
    }
    rc = read_yaml(&L, arch, file, k, cap, n);
    tl_amd_kernel *cur = NULL;
    int fn_start = -1;
    char fn[TL_AMD_NAME_LEN];
    for (int i = 0; !rc && i < L.n; i++) {
        const char *s = skip_space(L.line[i]);
        int v;
        if (starts(s, ".amdhsa_kernel ")) cur = by_name(k, *n, skip_space(s + 15));
        else if (cur && yaml_int(s, ".amdhsa_accum_offset", &v)) cur->accum_offset = v;
        else if (starts(s, ".end_amdhsa_kernel")) cur = NULL;
        else if (starts(s, ".type") && strstr(s, ",@function")) {
            const char *a = skip_space(s + 5);
            size_t len = (size_t)(strchr(a, ',') - a);
            if (len >= sizeof fn) len = sizeof fn - 1;
            memcpy(fn, a, len);
            fn[len] = '\0';
            fn_start = i;
        } else if (fn_start >= 0 && starts(s, ".Lfunc_end")) {
            tl_amd_kernel *kk = by_name(k, *n, fn);
            if (kk) rc = hot_loop(&L, fn_start, i, &kk->loop, mark && only && strcmp(fn, only) == 0 ? *mark : NULL);
            if (rc) {
                char why[256];
                snprintf(why, sizeof why, "%s", tl_last_error());
                rc = tl_error(rc, "amd code", "%s: %s", fn, why);
            }
            fn_start = -1;
        }
    }
    for (int j = 0; j < *n; j++) {
        tl_amd_kernel *x = &k[j];
        x->vgpr_file = x->agpr > 0 && x->accum_offset > 0 ? x->accum_offset + x->agpr : x->vgpr;
        if (!x->name[0]) rc = rc ? rc : tl_error(TL_EUSAGE, "amd code", "a kernel entry without .name");
    }
    free(L.buf), free(L.line);
    return rc;
}

int tl_amd_code_parse(const char *text, const char *arch, const char *file, tl_amd_kernel *k, int cap, int *n)
{
    return parse(text, arch, file, k, cap, n, NULL, NULL, NULL);
}

char *tl_amd_code_loop_text(const char *text, const char *arch, const char *name)
{
    static tl_amd_kernel k[256];
    int n, nlines = 0;
    unsigned char *mark = NULL;
    if (parse(text, arch, "", k, 256, &n, name, &mark, &nlines)) return free(mark), NULL;
    size_t len = strlen(text);
    char *out = malloc(len + 1), *o = out;
    if (!out) return free(mark), NULL;
    int line = 0;
    for (const char *p = text; *p && line < nlines; line++) {
        const char *nl = strchr(p, '\n');
        const size_t w = nl ? (size_t)(nl - p) : strlen(p);
        char m[64];
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%.*s", (int)(w < 63 ? w : 63), p);
        if (mark[line] && mnemonic_of(tmp, m, sizeof m) && !starts(m, "s_branch") && !starts(m, "s_cbranch")) {
            memcpy(o, p, w);
            o += w;
            *o++ = '\n';
        }
        if (!nl) break;
        p = nl + 1;
    }
    *o = '\0';
    free(mark);
    return out;
}

/* ---- the table ---- */

static const tl_amd_kernel *used;
static int used_n;

void tl_amd_code_use(const tl_amd_kernel *k, int n)
{
    used = k;
    used_n = k ? n : 0;
}

const tl_amd_kernel *tl_amd_code_find(const char *arch, const char *name)
{
    const tl_amd_kernel *t = used ? used : tl_amd_code_table;
    const int n = used ? used_n : tl_amd_code_count;
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].arch, arch) == 0 && strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

/* ---- the cost of a loop on a preset ---- */

static int round_up_int(int x, int to) { return (x + to - 1) / to * to; }

/* The preset's cycles for one matrix instruction of the loop (its f8f6f4 format), -1 if it lacks it. */
static int instr_cycles(const tl_hw *hw, const tl_amd_mfma_count *m)
{
    for (int i = 0; i < hw->n_instr; i++) {
        const tl_instr *in = &hw->instr[i];
        if (strcmp(in->name, m->name) != 0) continue;
        if (m->format[0] && strcmp(in->a, m->format) != 0) continue;
        return in->cycles;
    }
    return -1;
}

int tl_amd_loop_cost_of(const tl_hw *hw, const char *name, int wg_waves, double lds_dynamic, long wgs_cap,
                        tl_amd_loop_cost *c)
{
    memset(c, 0, sizeof *c);
    if (hw->vgprs_per_simd <= 0 || hw->sgprs_per_simd <= 0 || hw->waves_per_simd <= 0)
        return tl_error(TL_EUSAGE, "amd code", "preset %s has no vgprs_per_simd, sgprs_per_simd or waves_per_simd", hw->name);
    const tl_amd_kernel *k = tl_amd_code_find(hw->arch, name);
    if (!k) return tl_error(TL_EUSAGE, "amd code", "no %s kernel %s in the build's assembly", hw->arch, name);
    if (!k->loop.found) return tl_error(TL_EUSAGE, "amd code", "%s kernel %s has no loop", hw->arch, name);
    c->k = k;
    const int simds = hw->matrix_cores_per_cu > 0 ? hw->matrix_cores_per_cu : 4;
    const int vg = round_up_int(k->vgpr_file > 0 ? k->vgpr_file : 1, 8), sg = round_up_int(k->sgpr + 6, 16);
    c->waves_by_vgpr = hw->vgprs_per_simd / vg;
    c->waves_by_sgpr = hw->sgprs_per_simd / sg;
    int w = hw->waves_per_simd;
    if (c->waves_by_vgpr < w) w = c->waves_by_vgpr;
    if (c->waves_by_sgpr < w) w = c->waves_by_sgpr;
    const int waves = wg_waves > 0 ? wg_waves : 1;
    c->wgs_by_regs = simds * w / waves;
    const double lds = k->lds + lds_dynamic;
    c->wgs_by_lds = lds > 0 ? (int)(hw->lds_kib * 1024.0 / lds) : 0;
    int wgs = c->wgs_by_regs;
    if (lds > 0 && c->wgs_by_lds < wgs) wgs = c->wgs_by_lds;
    if (wgs_cap > 0 && wgs_cap < wgs) wgs = (int)wgs_cap;
    c->wgs = wgs > 0 ? wgs : 1;
    c->waves_per_simd = (double)c->wgs * waves / simds;
    if (c->waves_per_simd < 1) c->waves_per_simd = 1; /* a wave alone on its SIMD */
    const tl_amd_loop *l = &k->loop;
    for (int i = 0; i < l->n_mfma; i++) {
        const int cy = instr_cycles(hw, &l->mfma[i]);
        if (cy < 0) return tl_error(TL_EUSAGE, "amd code", "preset %s lacks %s (%s) of kernel %s", hw->name, l->mfma[i].name,
                                    l->mfma[i].format[0] ? l->mfma[i].format : "its format", name);
        c->matrix_cycles += (double)cy * l->mfma[i].count;
    }
    const double lanes = (hw->vector_lanes_per_cu > 0 ? hw->vector_lanes_per_cu : hw->wave_size * simds) / (double)simds;
    const double cadence = hw->wave_size / lanes;
    const double trans = hw->transcendental_per_cu_clk > 0 ? hw->wave_size / (hw->transcendental_per_cu_clk / simds) : cadence;
    c->valu_cycles = l->valu * cadence + l->trans * trans;
    c->lds_cycles = hw->lds_bytes_per_cu_clk > 0
                        ? (double)hw->wave_size * (l->lds_read_bytes + l->lds_write_bytes) / (hw->lds_bytes_per_cu_clk / simds)
                        : 0.0;
    c->issue_cycles = (l->instrs - l->trans) * cadence + l->trans * trans + l->nop_cycles;
    const double issue = c->issue_cycles / c->waves_per_simd;
    c->cycles = fmax(fmax(c->matrix_cycles, c->valu_cycles), fmax(c->lds_cycles, issue));
    c->bound = c->cycles == c->matrix_cycles ? "matrix" : c->cycles == c->valu_cycles ? "valu" : c->cycles == c->lds_cycles ? "lds" : "issue";
    return TL_OK;
}
