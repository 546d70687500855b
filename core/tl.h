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
 * Writers never leave a half-written file: tl_atomic_begin creates a new temporary file beside the
 * file, "<path>.tmp.XXXXXX" with six random characters (mkostemp: O_CREAT | O_EXCL, so it never
 * opens a name that exists, a planted symbolic link included, and its name cannot be guessed), mode
 * 0600 while it is written; the writer writes through a->fd or tl_atomic_file(a); tl_atomic_close
 * flushes, syncs and closes it, reporting any write error; tl_atomic_commit renames it over the
 * file; tl_atomic_abort removes it. What the name given may already be, decided by tl_atomic_begin
 * before any work:
 *   - nothing: a new file (mode from the umask);
 *   - a regular file: replaced, and the new file keeps its permission bits (rwx for user, group,
 *     other; set-id bits are dropped) but not its owner; refused (TL_EUSAGE "is read-only") when
 *     it has no write bit or this process may not write it, as `cp` would not overwrite it;
 *   - a symbolic link (to a link, ...) to a regular file: followed on purpose: the target's
 *     contents are replaced (the temporary file lies beside the target, so the rename stays on
 *     one file system) and the link is kept; a link to nothing is refused (TL_EUSAGE);
 *   - a character device (/dev/null, /dev/full, a terminal): opened and written straight through,
 *     a->tmp is the name itself (a->direct = 1): nothing is renamed or removed, a failed write is
 *     reported and whatever reached the device stays there;
 *   - anything else (a folder, a named pipe, a block device, a socket): refused (TL_EUSAGE "is a
 *     named pipe: an output must be a regular file or a character device").
 * Between begin and commit/abort the temporary name is registered (up to 8 writers at once):
 * every signal whose default action ends the process (INT, TERM, HUP, QUIT, ALRM, USR1, USR2,
 * PIPE, XCPU, PROF, VTALRM, the real-time ones, and the faults ABRT, SEGV, BUS, FPE, ILL, TRAP,
 * SYS where still at their default) removes it, then ends the process as the signal would have.
 * SIGXFSZ (a file size limit, `ulimit -f`) is ignored from tl_ignore_sigxfsz (the command calls it
 * at startup) and while a temporary file is registered, so that a write fails with EFBIG and its
 * writer reports "File too large". */
typedef struct {
    char path[4096]; /* the file written: the name given, or the target its symbolic link names */
    char tmp[4200];  /* the temporary file ("<path>.tmp.XXXXXX" made unique), or path when direct */
    int direct;      /* 1 when path is a character device written straight through */
    int mode;        /* permission bits of the file replaced, -1 for a new file or a device */
    int fd;          /* the open temporary file (or device); -1 once closed */
    FILE *f;         /* tl_atomic_file's stream over fd, NULL until asked for */
    int err;         /* the first write error's errno of that stream (0: none) */
} tl_atomic;
/* Decides as above and opens the file written (the temporary file, or the device). TL_EUSAGE (one
 * message naming the path) if path is empty, too long, a link to nothing, read-only or of a kind
 * refused; TL_EFAIL (with the reason) if the temporary file or the device cannot be opened. */
int tl_atomic_begin(tl_atomic *a, const char *path);
/* A stdio stream over a->fd (made once, owned by a: tl_atomic_close closes it; a must stay where it
 * is while the stream is open). NULL when it cannot be made (errno set). */
FILE *tl_atomic_file(tl_atomic *a);
/* Flushes and closes the file written (fsync too for a temporary file, so a full disk or a quota
 * is seen here rather than after the rename), giving a new file the umask's mode and a replaced
 * one its mode. Any failure, or a write error the stream recorded earlier, is tl_write_error(path,
 * what, errno) and TL_EFAIL, and the temporary file is removed (abort). Once closed, TL_OK. */
int tl_atomic_close(tl_atomic *a, const char *what);
/* Closes the file if still open (as tl_atomic_close(a, NULL)), then renames it onto path; on
 * failure removes tmp and returns TL_EFAIL. Direct: closes the device, nothing else. */
int tl_atomic_commit(tl_atomic *a);
/* Closes and removes tmp if it exists (direct: closes the device and leaves it alone). */
void tl_atomic_abort(tl_atomic *a);
/* Sets SIGXFSZ to be ignored when it is at its default, so that a write past `ulimit -f` fails
 * with EFBIG (reported as "File too large") instead of killing the process without a word. */
void tl_ignore_sigxfsz(void);

/* 1 when paths a and b name one file: the same inode where both exist, else the same name once
 * the folders' symbolic links are resolved (the last component as given). For refusing an output
 * that aliases another output or an input. */
int tl_same_file(const char *a, const char *b);

/* Records "<path>: cannot write <what>: <reason>" and returns TL_EFAIL, for an output that could
 * not be written. reason is strerror(err) ("No space left on device", "File too large") when err
 * is set, else "write error" (a library that reports no errno). `what` may be NULL:
 * "<path>: cannot write: <reason>". tl_last_error_is_write() is 1 after it, until the next
 * tl_error or tl_clear_error. */
int tl_write_error(const char *path, const char *what, int err);
/* 1 when the last error recorded came from tl_write_error: a full disk or a size limit, which
 * the next output to the same place would meet too. */
int tl_last_error_is_write(void);

/* Opens `path` for reading only if it is a regular file: a folder, a named pipe (which would block
 * the open until a writer came), a device or a socket is TL_EUSAGE "<path>: not a regular file
 * (<kind>)", and so is a file that cannot be opened (with the reason); `what` names the input in
 * that message ("model config"). The open never blocks. *f is the caller's to fclose. */
int tl_open_regular(const char *path, const char *what, FILE **f);

/* Creates a directory and its parents (like mkdir -p). TL_EUSAGE if it exists as a non-folder. */
int tl_mkdirs(const char *dir);

/* ---- the number reader: one rule for every option value and every CSV / trace / text field ----
 * A number is decimal text and nothing else: an optional '-', digits, for a real an optional
 * fraction ('.' digits) and exponent ('e' or 'E', an optional sign, digits); the whole string is
 * consumed. Refused: blanks anywhere (leading or trailing), a leading '+', hex ("0x10", "0x1p3"),
 * "inf", "nan", an empty string, a thousands separator. Results: TL_NUM_OK, TL_NUM_SYNTAX (not of
 * that form), TL_NUM_RANGE (of that form but too large for the type: an integer beyond long long
 * or u64, a real beyond double's finite range). Nothing is printed. Cost: one pass of the string. */
enum { TL_NUM_OK = 0, TL_NUM_SYNTAX = 1, TL_NUM_RANGE = 2 };
int tl_scan_int(const char *s, long long *out);
/* An unsigned integer: no '-' either (a seed). */
int tl_scan_u64(const char *s, uint64_t *out);
int tl_scan_real(const char *s, double *out);
/* Splits s at sep into at most max integers, each read by tl_scan_int ("64x128x4" with 'x'); returns
 * how many, or 0 when a piece is empty, not a number, or there are more than max. */
int tl_scan_ints(const char *s, char sep, long long *v, int max);
/* s past a leading UTF-8 byte-order mark (EF BB BF), which editors hide: every text reader calls it
 * on its first line so that the mark never shows as an invisible character in a message. */
const char *tl_skip_bom(const char *s);

/* ---- small parsing helpers for the command line (all return TL_EUSAGE with a message), on the
 * number reader above ---- */
/* Parses a whole decimal integer in [lo, hi]; `what` names the option in the message. */
int tl_parse_long(const char *s, long lo, long hi, const char *what, long *out);
/* The same into an int (lo and hi within int's range). */
int tl_parse_int(const char *s, int lo, int hi, const char *what, int *out);
/* Parses a comma-separated list of integers in [lo, hi]; at most cap values. */
int tl_parse_long_list(const char *s, long lo, long hi, const char *what, long *out, int cap,
                       int *count);
/* Parses a finite real (tl_scan_real's form). */
int tl_parse_double(const char *s, const char *what, double *out);

/* Output formats shared by every command that prints a table. */
typedef enum { TL_FMT_TABLE, TL_FMT_CSV, TL_FMT_JSON } tl_format;
/* "table", "csv" or "json"; NULL (the option not given) is table. TL_EUSAGE otherwise. */
int tl_parse_format(const char *s, tl_format *out);

#endif
