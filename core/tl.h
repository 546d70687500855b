/* tilelab core: errors, exit codes, seeded random numbers, atomic output files.
 *
 * Error contract (every module follows it): a function that can fail returns an int status,
 * 0 on success, TL_EUSAGE (2) when the caller's input is bad (unknown name, malformed number,
 * absurd shape), TL_EFAIL (1) when something outside the input failed (I/O, GPU, a check that did
 * not pass). Before returning non-zero it records one line with tl_error(); the command line
 * prints it as "tilelab: error: <what>: <why>" and uses the status as the exit code.
 * Library code never calls exit() and never prints errors itself.
 */
#ifndef TL_H
#define TL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TL_OK 0
#define TL_EFAIL 1
#define TL_EUSAGE 2

#if defined(__GNUC__)
#define TL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TL_PRINTF(a, b)
#endif

/* Records "<what>: <why>" as the last error and returns status (TL_EUSAGE or TL_EFAIL).
 * Thread-local; the message is truncated at 511 bytes. */
int tl_error(int status, const char *what, const char *fmt, ...) TL_PRINTF(3, 4);
/* The last recorded message, or "" when none. */
const char *tl_last_error(void);
/* Clears the last error. */
void tl_clear_error(void);
/* Prints "tilelab: error: <last error>" on stderr as one line, control characters (a newline or an
 * escape from the input) shown as '?' (nothing if none was recorded). */
void tl_report_error(void);

/* ---- seeded random numbers (xoshiro256**, seeded through splitmix64) ----
 * Deterministic for a given seed on every platform; not for cryptography. */
typedef struct { uint64_t s[4]; } tl_rng;
void tl_rng_seed(tl_rng *r, uint64_t seed);
uint64_t tl_rng_u64(tl_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double tl_rng_uniform(tl_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t tl_rng_below(tl_rng *r, uint64_t n);
/* Standard normal N(0, 1) (Box-Muller; one value per call). */
double tl_rng_normal(tl_rng *r);
/* Laplace with scale b = 1/sqrt(2) (unit variance). */
double tl_rng_laplace(tl_rng *r);
/* A seed from the clock and pid, for "fresh random inputs"; always print it so runs can be repeated. */
uint64_t tl_fresh_seed(void);

/* qsort comparator of doubles, ascending (medians and quantiles of timings). */
int tl_cmp_double(const void *a, const void *b);

/* ---- atomic output files ----
 * Writers never leave a half-written file: they write to "<path>.tmp.<pid>" and rename it over
 * <path> on success, or remove it on failure. Between begin and commit/abort the tmp name is
 * registered, and SIGINT, SIGTERM or SIGHUP (when left at their default action) remove it before
 * ending the process (up to 8 writers at once are watched). */
typedef struct {
    char path[4096];
    char tmp[4200];
} tl_atomic;
/* Prepares tmp; returns TL_EUSAGE if path is empty or too long. Creates nothing yet. */
int tl_atomic_begin(tl_atomic *a, const char *path);
/* Renames tmp onto path; on failure removes tmp and returns TL_EFAIL. */
int tl_atomic_commit(tl_atomic *a);
/* Removes tmp if it exists. */
void tl_atomic_abort(tl_atomic *a);

/* Opens `path` for reading only if it is a regular file: a folder, a named pipe (which would block
 * the open until a writer came), a device or a socket is TL_EUSAGE "<path>: not a regular file
 * (<kind>)", and so is a file that cannot be opened (with the reason); `what` names the input in
 * that message ("model config"). The open never blocks. *f is the caller's to fclose. */
int tl_open_regular(const char *path, const char *what, FILE **f);

/* Creates a directory and its parents (like mkdir -p). TL_EUSAGE if it exists as a non-folder. */
int tl_mkdirs(const char *dir);

/* ---- small parsing helpers for the command line (all return TL_EUSAGE with a message) ---- */
/* Parses a whole decimal integer in [lo, hi]; `what` names the option in the message. */
int tl_parse_long(const char *s, long lo, long hi, const char *what, long *out);
/* The same into an int (lo and hi within int's range). */
int tl_parse_int(const char *s, int lo, int hi, const char *what, int *out);
/* Parses a comma-separated list of integers in [lo, hi]; at most cap values. */
int tl_parse_long_list(const char *s, long lo, long hi, const char *what, long *out, int cap,
                       int *count);
/* Parses a finite double. */
int tl_parse_double(const char *s, const char *what, double *out);

/* Output formats shared by every command that prints a table. */
typedef enum { TL_FMT_TABLE, TL_FMT_CSV, TL_FMT_JSON } tl_format;
/* "table", "csv" or "json"; NULL (the option not given) is table. TL_EUSAGE otherwise. */
int tl_parse_format(const char *s, tl_format *out);

#endif
