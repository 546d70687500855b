/* The CSV reader and text-file loader of the pictures. See csv.h. */
#include "csv.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../core/tl.h"

int tl_text_file_read(const char *path, const char *what, size_t max, char **text)
{
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tl_error(TL_EUSAGE, path, "cannot read %s: %s", what, strerror(errno));
    struct stat fst;
    if (fstat(fileno(f), &fst) != 0 || !S_ISREG(fst.st_mode)) { /* a folder, a pipe, a device */
        fclose(f);
        return tl_error(TL_EUSAGE, path, "not a regular file");
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || (size_t)size > max || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        if (size >= 0 && (size_t)size > max)
            return tl_error(TL_EUSAGE, path, "file larger than %zu MiB", max >> 20);
        return tl_error(TL_EUSAGE, path, "not a regular file");
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return tl_error(TL_EFAIL, path, "out of memory");
    }
    size_t n = fread(buf, 1, (size_t)size, f);
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return tl_error(TL_EUSAGE, path, "read error");
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        free(buf);
        return tl_error(TL_EUSAGE, path, "not a text file");
    }
    *text = buf;
    return 0;
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
    if (row_field(r)) return -1;
    int quoted = 0;
    for (;;) {
        char c = *p;
        if (quoted) {
            if (!c) return -1;
            p++;
            if (c == '"') {
                if (*p == '"') {
                    if (row_putc(r, '"')) return -1;
                    p++;
                } else {
                    quoted = 0;
                }
            } else {
                if (c == '\n') (*line)++;
                if (row_putc(r, c)) return -1;
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
            if (row_putc(r, '\0') || row_field(r)) return -1;
        } else if (row_putc(r, c)) return -1;
    }
    if (row_putc(r, '\0')) return -1;
    *pp = p;
    return 1;
}

int tl_csv_col(const tl_csv_row *h, const char *name)
{
    for (int i = 0; i < h->n; i++)
        if (strcasecmp(tl_csv_field(h, i), name) == 0) return i;
    return -1;
}

int tl_csv_blank(const tl_csv_row *r)
{
    for (int i = 0; i < r->n; i++)
        for (const char *s = tl_csv_field(r, i); *s; s++)
            if (!isspace((unsigned char)*s)) return 0;
    return 1;
}
