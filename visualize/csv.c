/* The CSV reader and text-file loader of the pictures. See csv.h. */
#include "csv.h"

#include <ctype.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../core/tl.h"

/* "1.5 MiB" (or "512 bytes" below one KiB), for the size messages. */
static void size_str(double bytes, char *buf, size_t len)
{
    if (bytes < 1024) snprintf(buf, len, "%.0f bytes", bytes);
    else if (bytes < 1024.0 * 1024) snprintf(buf, len, "%.1f KiB", bytes / 1024);
    else snprintf(buf, len, "%.1f MiB", bytes / (1024.0 * 1024));
}

int tl_text_file_read(const char *path, const char *what, size_t max, char **text)
{
    *text = NULL;
    FILE *f;
    int rc = tl_open_regular(path, what, &f); /* a named pipe is refused, not waited on */
    if (rc) return rc;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        rc = tl_error(TL_EUSAGE, path, "cannot read %s: %s", what, strerror(errno));
    } else if ((uint64_t)st.st_size > max) { /* refused before a byte is read */
        char has[32], may[32];
        size_str((double)st.st_size, has, sizeof has);
        size_str((double)max, may, sizeof may);
        rc = tl_error(TL_EUSAGE, path, "%s is %s, more than the %s it may be", what, has, may);
    }
    size_t size = rc ? 0 : (size_t)st.st_size;
    char *buf = rc ? NULL : malloc(size + 1);
    if (!rc && !buf) rc = tl_error(TL_EFAIL, path, "out of memory for %s", what);
    size_t n = rc ? 0 : fread(buf, 1, size, f);
    if (!rc && ferror(f)) rc = tl_error(TL_EUSAGE, path, "cannot read %s: %s", what, strerror(errno));
    fclose(f);
    if (!rc && memchr(buf, '\0', n)) rc = tl_error(TL_EUSAGE, path, "%s is not a text file (a NUL byte)", what);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    if (n >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) memmove(buf, buf + 3, n - 2); /* the UTF-8 BOM */
    *text = buf;
    return TL_OK;
}

static int row_putc(tl_csv_row *r, char c)
{
    if (r->len + 1 >= r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 256;
        char *nb = realloc(r->buf, nc);
        if (!nb) return -1;
        r->buf = nb;
        r->cap = nc;
    }
    r->buf[r->len++] = c;
    return 0;
}

static int row_field(tl_csv_row *r)
{
    if (r->n == r->ncap) {
        int nc = r->ncap ? r->ncap * 2 : 32;
        size_t *no = realloc(r->off, nc * sizeof *no);
        if (!no) return -1;
        r->off = no;
        r->ncap = nc;
    }
    r->off[r->n++] = r->len;
    return 0;
}

const char *tl_csv_field(const tl_csv_row *r, int i) { return i >= 0 && i < r->n ? r->buf + r->off[i] : ""; }

void tl_csv_free(tl_csv_row *r)
{
    free(r->buf);
    free(r->off);
    memset(r, 0, sizeof *r);
}

int tl_csv_next(const char **pp, tl_csv_row *r, int *line)
{
    const char *p = *pp;
    if (!*p) return 0;
    r->len = 0;
    r->n = 0;
    r->line = *line;
    if (row_field(r)) return TL_CSV_NOMEM;
    int quoted = 0;
    for (;;) {
        char c = *p;
        if (quoted) {
            if (!c) return TL_CSV_QUOTE;
            p++;
            if (c == '"') {
                if (*p == '"') {
                    if (row_putc(r, '"')) return TL_CSV_NOMEM;
                    p++;
                } else {
                    quoted = 0;
                }
            } else {
                if (c == '\n') (*line)++;
                if (row_putc(r, c)) return TL_CSV_NOMEM;
            }
            continue;
        }
        if (!c || c == '\n' || (c == '\r' && (p[1] == '\n' || !p[1]))) {
            if (c == '\r') p++;
            if (*p == '\n') p++;
            (*line)++;
            break;
        }
        p++;
        if (c == '"') quoted = 1;
        else if (c == ',') {
            if (row_putc(r, '\0') || row_field(r)) return TL_CSV_NOMEM;
        } else if (row_putc(r, c)) return TL_CSV_NOMEM;
    }
    if (row_putc(r, '\0')) return TL_CSV_NOMEM;
    *pp = p;
    return 1;
}

int tl_csv_fail(const char *path, const tl_csv_row *r, int got)
{
    if (got == TL_CSV_QUOTE)
        return tl_error(TL_EUSAGE, path, "line %d: unterminated quote (a quoted field is never closed)", r->line);
    return tl_error(TL_EFAIL, path, "out of memory");
}

int tl_csv_col(const tl_csv_row *h, const char *name)
{
    for (int i = 0; i < h->n; i++)
        if (strcasecmp(tl_csv_field(h, i), name) == 0) return i;
    return -1;
}

int tl_csv_cols(const char *path, const tl_csv_row *h, const char *const *names, int n, int *col, const char *what)
{
    for (int i = 0; i < n; i++)
        if ((col[i] = tl_csv_col(h, names[i])) < 0)
            return tl_error(TL_EUSAGE, path, "line 1: no column '%s': not a %s file", names[i], what);
    return 0;
}

int tl_csv_blank(const tl_csv_row *r)
{
    for (int i = 0; i < r->n; i++)
        for (const char *s = tl_csv_field(r, i); *s; s++)
            if (!isspace((unsigned char)*s)) return 0;
    return 1;
}
