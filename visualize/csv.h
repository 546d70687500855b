/* visualize/csv.h: reading the CSV and text files the pictures draw from (tilelab's own CSVs,
 * ncu --csv, rocprofv3 counters, `tilelab bench moe --trace`).
 *
 * tl_text_file_read: a whole regular text file into memory, at most `max` bytes (a larger file is
 * refused before it is read, the message giving both sizes); a leading UTF-8 byte-order mark is
 * dropped (as editors hide it), so *text starts with the first visible character. Errors are one
 * line naming the file and `what` (TL_EUSAGE: missing, not a regular file (a named pipe is refused,
 * never waited on), too large, holds NUL bytes; TL_EFAIL: out of memory). *text is the caller's to
 * free. Cost: one read of the file; memory = its size.
 * tl_csv_next: an RFC 4180 reader (quoted fields may hold commas, "" and newlines) over text at
 * *pp: returns 1 with the next record in *r, 0 at the end, TL_CSV_QUOTE on an unterminated quote,
 * TL_CSV_NOMEM when out of memory; *line counts lines: the caller starts it at 1 (lines are numbered
 * from 1 in every message) and r->line is the record's first. A row is
 * reused from call to call; tl_csv_free releases it (also after an error).
 * tl_csv_fail: records the error line for such a negative result ("<path>: line N: unterminated
 * quote ..." TL_EUSAGE, or out of memory TL_EFAIL) and returns its status. */
#ifndef TL_VISUALIZE_CSV_H
#define TL_VISUALIZE_CSV_H

#include <stddef.h>

typedef struct {
    char *buf;      /* the row's fields, NUL-separated */
    size_t len, cap;
    size_t *off;    /* field start offsets into buf */
    int n, ncap;
    int line;       /* line number of the row's first line (1-based) */
} tl_csv_row;

int tl_text_file_read(const char *path, const char *what, size_t max, char **text);
#define TL_CSV_QUOTE (-1)
#define TL_CSV_NOMEM (-2)
int tl_csv_next(const char **pp, tl_csv_row *r, int *line);
int tl_csv_fail(const char *path, const tl_csv_row *r, int got);
/* Field i, or "" past the last one. */
const char *tl_csv_field(const tl_csv_row *r, int i);
/* The index of the column named `name` (case-insensitive) in header h, or -1. */
int tl_csv_col(const tl_csv_row *h, const char *name);
/* The indexes of the n columns `names` in header h, into col; TL_EUSAGE naming the first one
 * missing ("<path>: line 1: no column 'x': not a <what> file"). */
int tl_csv_cols(const char *path, const tl_csv_row *h, const char *const *names, int n, int *col, const char *what);
/* 1 when every field is empty or white space. */
int tl_csv_blank(const tl_csv_row *r);
void tl_csv_free(tl_csv_row *r);

#endif
