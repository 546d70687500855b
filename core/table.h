/* A small result table that every command prints the same way: aligned text for people,
 * CSV (header row first) or JSON (an array of objects) for scripts.
 *
 * Cells are stored as strings; numeric columns are marked so that JSON writes them as numbers.
 * Cost: O(rows x cols) memory; printing is linear. */
#ifndef TL_TABLE_H
#define TL_TABLE_H

#include "tl.h"

typedef struct tl_table tl_table;

/* ncols columns named by the comma-separated `header` (e.g. "tokens,tiles,padding").
 * Returns NULL only on allocation failure. */
tl_table *tl_table_new(const char *header);
void tl_table_free(tl_table *t);
/* Starts a new row. */
void tl_table_row(tl_table *t);
/* Appends a text cell / a formatted numeric cell ("%.6g" by default) to the current row. */
void tl_table_str(tl_table *t, const char *s);
void tl_table_num(tl_table *t, double v);
void tl_table_int(tl_table *t, long long v);
/* Numeric cell with an explicit printf format (e.g. "%.3f"). */
void tl_table_numf(tl_table *t, const char *fmt, double v);
/* Prints the table to f in the given format. A title (may be NULL) is printed above the text
 * form only. */
void tl_table_print(const tl_table *t, tl_format fmt, const char *title, FILE *f);
/* Accessors for tests. */
int tl_table_rows(const tl_table *t);
int tl_table_cols(const tl_table *t);
const char *tl_table_cell(const tl_table *t, int row, int col);

#endif
