/* A small result table that every command prints the same way: aligned text for people,
 * CSV (header row first) or JSON (an array of objects) for scripts. The CSV and JSON forms hold
 * the table and nothing else (the title is for people: text only), so that a script can parse
 * standard output whole.
 *
 * Cells are stored as strings; numeric cells are marked so that JSON writes them as numbers
 * (inf and nan, which JSON lacks, as strings).
 * Cost: O(rows x cols) memory; printing is linear. */
#ifndef TL_TABLE_H
#define TL_TABLE_H

#include <jansson.h>

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
/* A cell with no value (a number that is not known or does not apply): "-" in the text form,
 * empty in CSV, null in JSON. */
void tl_table_none(tl_table *t);
/* Prints the table to f in the given format. A title (may be NULL) is printed above the text
 * form only. */
void tl_table_print(const tl_table *t, tl_format fmt, const char *title, FILE *f);
/* The JSON form as a new array of objects (the caller owns it: json_decref), for a command that
 * prints one table inside a larger JSON object. NULL only on allocation failure. */
json_t *tl_table_to_json(const tl_table *t);
/* Prints a JSON value the way every table's JSON form is printed (indented, keys in order,
 * 10 significant digits), then a newline. */
void tl_json_print(json_t *v, FILE *f);
/* Accessors for tests. */
int tl_table_rows(const tl_table *t);
int tl_table_cols(const tl_table *t);
const char *tl_table_cell(const tl_table *t, int row, int col);

#endif
