#include "table.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tl_table {
    int ncols, nrows, cap_rows;
    char **names;
    char **cells;     /* nrows x ncols, row-major; NULL = empty */
    unsigned char *kind; /* per cell: one of the cell_kind values */
    int cur_col;
};

enum cell_kind { CELL_TEXT, CELL_NUMBER, CELL_NONE };

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

tl_table *tl_table_new(const char *header)
{
    tl_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    char *h = dup_str(header);
    int n = 1;
    for (const char *p = header; *p; p++) n += (*p == ',');
    t->names = calloc((size_t)n, sizeof *t->names);
    char *save = NULL;
    for (char *tok = strtok_r(h, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        t->names[t->ncols++] = dup_str(tok);
    free(h);
    t->cur_col = t->ncols;
    return t;
}

void tl_table_free(tl_table *t)
{
    if (!t) return;
    for (int i = 0; i < t->ncols; i++) free(t->names[i]);
    for (int i = 0; i < t->nrows * t->ncols; i++) free(t->cells[i]);
    free(t->names);
    free(t->cells);
    free(t->kind);
    free(t);
}

void tl_table_row(tl_table *t)
{
    if (t->nrows == t->cap_rows) {
        int cap = t->cap_rows ? 2 * t->cap_rows : 16;
        t->cells = realloc(t->cells, (size_t)cap * (size_t)t->ncols * sizeof *t->cells);
        t->kind = realloc(t->kind, (size_t)cap * (size_t)t->ncols);
        t->cap_rows = cap;
    }
    for (int c = 0; c < t->ncols; c++) {
        t->cells[t->nrows * t->ncols + c] = NULL;
        t->kind[t->nrows * t->ncols + c] = CELL_TEXT;
    }
    t->nrows++;
    t->cur_col = 0;
}

static void put(tl_table *t, const char *s, enum cell_kind kind)
{
    if (t->nrows == 0 || t->cur_col >= t->ncols) return; /* contract violation: ignored */
    int i = (t->nrows - 1) * t->ncols + t->cur_col++;
    t->cells[i] = dup_str(s);
    t->kind[i] = (unsigned char)kind;
}

void tl_table_str(tl_table *t, const char *s) { put(t, s ? s : "", CELL_TEXT); }

void tl_table_none(tl_table *t) { put(t, "", CELL_NONE); }

void tl_table_numf(tl_table *t, const char *fmt, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, fmt, v);
    put(t, buf, CELL_NUMBER);
}

void tl_table_num(tl_table *t, double v) { tl_table_numf(t, "%.6g", v); }

void tl_table_int(tl_table *t, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    put(t, buf, CELL_NUMBER);
}

static const char *cell(const tl_table *t, int r, int c)
{
    const char *s = t->cells[r * t->ncols + c];
    return s ? s : "";
}

/* The text form's cell: a cell with no value shows as "-", so that a row's columns stay readable. */
static const char *text_cell(const tl_table *t, int r, int c)
{
    return t->kind[r * t->ncols + c] == CELL_NONE ? "-" : cell(t, r, c);
}

static void print_text(const tl_table *t, const char *title, FILE *f)
{
    int *w = calloc((size_t)t->ncols, sizeof *w);
    for (int c = 0; c < t->ncols; c++) {
        w[c] = (int)strlen(t->names[c]);
        for (int r = 0; r < t->nrows; r++) {
            int n = (int)strlen(text_cell(t, r, c));
            if (n > w[c]) w[c] = n;
        }
    }
    if (title) fprintf(f, "%s\n", title);
    for (int c = 0; c < t->ncols; c++) fprintf(f, "%s%*s", c ? "  " : "", w[c], t->names[c]);
    fputc('\n', f);
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) fprintf(f, "%s%*s", c ? "  " : "", w[c], text_cell(t, r, c));
        fputc('\n', f);
    }
    free(w);
}

static void print_csv_field(const char *s, FILE *f)
{
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void print_csv(const tl_table *t, FILE *f)
{
    for (int c = 0; c < t->ncols; c++) {
        if (c) fputc(',', f);
        print_csv_field(t->names[c], f);
    }
    fputc('\n', f);
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            if (c) fputc(',', f);
            print_csv_field(cell(t, r, c), f);
        }
        fputc('\n', f);
    }
}

json_t *tl_table_to_json(const tl_table *t)
{
    json_t *arr = json_array();
    for (int r = 0; r < t->nrows; r++) {
        json_t *o = json_object();
        for (int c = 0; c < t->ncols; c++) {
            const char *s = cell(t, r, c);
            json_t *v;
            const int kind = t->kind[r * t->ncols + c];
            if (kind == CELL_NONE) {
                v = json_null();
            } else if (kind == CELL_NUMBER) {
                char *end;
                double d = strtod(s, &end);
                if (*end) v = json_string(s); /* inf/nan are not JSON numbers */
                else if (strchr(s, '.') || strchr(s, 'e')) v = json_real(d);
                else v = json_integer((json_int_t)strtoll(s, NULL, 10));
                if (!isfinite(d)) { json_decref(v); v = json_string(s); }
            } else {
                v = json_string(s);
            }
            json_object_set_new(o, t->names[c], v);
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

void tl_json_print(json_t *v, FILE *f)
{
    json_dumpf(v, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    fputc('\n', f);
}

static void print_json(const tl_table *t, FILE *f)
{
    json_t *arr = tl_table_to_json(t);
    tl_json_print(arr, f);
    json_decref(arr);
}

void tl_table_print(const tl_table *t, tl_format fmt, const char *title, FILE *f)
{
    if (fmt == TL_FMT_CSV) print_csv(t, f);
    else if (fmt == TL_FMT_JSON) print_json(t, f);
    else print_text(t, title, f);
}

int tl_table_rows(const tl_table *t) { return t->nrows; }
int tl_table_cols(const tl_table *t) { return t->ncols; }
const char *tl_table_cell(const tl_table *t, int row, int col)
{
    if (row < 0 || row >= t->nrows || col < 0 || col >= t->ncols) return NULL;
    return cell(t, row, col);
}
