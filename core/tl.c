#include "tl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char last_error[512];
static _Thread_local int last_is_write; /* the last error came from tl_write_error */

int tl_error(int status, const char *what, const char *fmt, ...)
{
    last_is_write = 0;
    int n = snprintf(last_error, sizeof last_error, "%s: ", what ? what : "tilelab");
    if (n < 0 || (size_t)n >= sizeof last_error) return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

const char *tl_last_error(void) { return last_error; }
void tl_clear_error(void)
{
    last_error[0] = '\0';
    last_is_write = 0;
}

int tl_write_error(const char *path, const char *what, int err)
{
    const char *reason = err ? strerror(err) : "write error";
    if (what) tl_error(TL_EFAIL, path, "cannot write %s: %s", what, reason);
    else tl_error(TL_EFAIL, path, "cannot write: %s", reason);
    last_is_write = 1;
    return TL_EFAIL;
}

int tl_last_error_is_write(void) { return last_is_write; }

void tl_report_error(void)
{
    if (!last_error[0]) return;
    char line[sizeof last_error]; /* one line: a newline or escape from the input shows as '?' */
    size_t n = 0;
    for (; last_error[n]; n++) {
        unsigned char c = (unsigned char)last_error[n];
        line[n] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    line[n] = '\0';
    fprintf(stderr, "tilelab: error: %s\n", line);
}

/* ---- random numbers ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void tl_rng_seed(tl_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tl_rng_u64(tl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tl_rng_uniform(tl_rng *r) { return (double)(tl_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t tl_rng_below(tl_rng *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = tl_rng_u64(r);
    while (x >= limit);
    return x % n;
}

double tl_rng_normal(tl_rng *r)
{
    double u1 = 1.0 - tl_rng_uniform(r); /* (0, 1] so log is finite */
    double u2 = tl_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double tl_rng_laplace(tl_rng *r)
{
    double u = tl_rng_uniform(r) - 0.5;
    double b = 0.7071067811865476;
    double a = 1.0 - 2.0 * fabs(u);
    if (a <= 0) a = 0x1.0p-53;
    return (u < 0 ? b : -b) * log(a);
}

int tl_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

uint64_t tl_fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    return splitmix64(&x) & 0xffffffffULL; /* short enough to type back */
}

/* ---- atomic files ---- */

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a named pipe" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a plain file";
}

/* Temporary files of writers in progress, removed by the handler of every signal that would end
 * the process, before the signal's default action; see tl.h. Handlers are installed on the first
 * tl_atomic_begin, only for signals still at their default disposition (a sanitizer's or a
 * caller's own handler, or an inherited SIG_IGN, is left as it is). */
#define PENDING_MAX 8
static char pending[PENDING_MAX][sizeof(((tl_atomic *)0)->tmp)];
static volatile sig_atomic_t pending_used[PENDING_MAX];
static int pending_count;  /* entries in use (changed outside signal handlers only) */
static int xfsz_toggled;   /* 1: SIGXFSZ was at its default, so it is ignored while pending_count > 0 */

/* The signals whose default action is to end the process (or end it with a core), other than
 * SIGKILL and SIGSTOP, which cannot be caught, and SIGXFSZ, which is ignored instead. */
static const int ending_signals[] = {
    SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGUSR1, SIGSEGV, SIGUSR2,
    SIGPIPE, SIGALRM, SIGTERM, SIGXCPU, SIGVTALRM, SIGPROF, SIGSYS,
#ifdef SIGSTKFLT
    SIGSTKFLT,
#endif
#ifdef SIGIO
    SIGIO,
#endif
#ifdef SIGPWR
    SIGPWR,
#endif
};

static void remove_pending_and_reraise(int sig)
{
    for (int i = 0; i < PENDING_MAX; i++)
        if (pending_used[i]) unlink(pending[i]); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns (a fault: when the instruction runs again) */
}

/* Installs the handler for sig if sig is at its default disposition. */
static void watch_signal(int sig)
{
    struct sigaction old, sa;
    if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL) return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = remove_pending_and_reraise;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

static void watch_signals(void)
{
    static int installed = 0;
    if (installed) return;
    installed = 1;
    for (size_t i = 0; i < sizeof ending_signals / sizeof ending_signals[0]; i++)
        watch_signal(ending_signals[i]);
#ifdef SIGRTMIN
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++) watch_signal(sig);
#endif
    struct sigaction old;
    xfsz_toggled = sigaction(SIGXFSZ, NULL, &old) == 0 && old.sa_handler == SIG_DFL;
}

/* Registers tmp; returns its slot's buffer, where the name is kept (NULL when all 8 are in use). */
static char *pending_add(const char *tmp)
{
    watch_signals();
    for (int i = 0; i < PENDING_MAX; i++)
        if (!pending_used[i]) {
            memcpy(pending[i], tmp, strlen(tmp) + 1);
            pending_used[i] = 1;
            if (pending_count++ == 0 && xfsz_toggled) signal(SIGXFSZ, SIG_IGN);
            return pending[i];
        }
    return NULL;
}

static void pending_drop(const char *tmp)
{
    for (int i = 0; i < PENDING_MAX; i++)
        if (pending_used[i] && strcmp(pending[i], tmp) == 0) {
            pending_used[i] = 0;
            if (--pending_count == 0 && xfsz_toggled) signal(SIGXFSZ, SIG_DFL);
        }
}

/* Sets a->path to the regular file at the end of the symbolic link(s) `link`. */
static int follow_link(tl_atomic *a, const char *link)
{
    char target[PATH_MAX];
    if (!realpath(link, target)) return tl_error(TL_EUSAGE, link, "cannot follow the symbolic link: %s", strerror(errno));
    if (strlen(target) >= sizeof a->path) return tl_error(TL_EUSAGE, link, "the link's target's name is too long");
    strcpy(a->path, target);
    return TL_OK;
}

/* What an existing output name is, and whether it may be written (see tl.h): TL_OK with a's path,
 * direct and mode set, or TL_EUSAGE. A name that does not exist yet (or cannot be examined) is
 * left for the writer's open to report. */
static int check_target(tl_atomic *a, const char *path)
{
    strcpy(a->path, path);
    a->direct = 0;
    a->mode = -1;
    struct stat st, lst;
    if (stat(path, &st) != 0) {
        int e = errno;
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
            return tl_error(TL_EUSAGE, path, "symbolic link to no file (%s): not followed", strerror(e));
        return TL_OK;
    }
    if (S_ISCHR(st.st_mode)) {
        a->direct = 1;
        return TL_OK;
    }
    if (!S_ISREG(st.st_mode))
        return tl_error(TL_EUSAGE, path, "is %s: an output must be a regular file or a character device",
                        file_kind(st.st_mode));
    if ((st.st_mode & 0222) == 0 || access(path, W_OK) != 0)
        return tl_error(TL_EUSAGE, path, "is read-only: not replaced");
    a->mode = (int)(st.st_mode & 0777);
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) return follow_link(a, path);
    return TL_OK;
}

/* The permission bits a new file gets: 0666 less the umask (read once; umask has no query). */
static mode_t new_file_mode(void)
{
    static mode_t mode = (mode_t)-1;
    if (mode == (mode_t)-1) {
        const mode_t m = umask(077);
        umask(m);
        mode = 0666 & ~m;
    }
    return mode;
}

/* The stream tl_atomic_file makes (cookie: the tl_atomic): writes go to a->fd in full, and the
 * first failure's errno is kept in a->err for tl_atomic_close's message (stdio keeps only its
 * error flag). */
static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
    tl_atomic *a = cookie;
    size_t done = 0;
    while (done < n) {
        const ssize_t w = write(a->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!a->err) a->err = w < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

int tl_atomic_begin(tl_atomic *a, const char *path)
{
    a->fd = -1;
    a->f = NULL;
    a->err = 0;
    a->tmp[0] = '\0';
    if (!path || !*path) return tl_error(TL_EUSAGE, "output", "empty file name");
    if (strlen(path) >= sizeof a->path) return tl_error(TL_EUSAGE, "output", "file name too long");
    int rc = check_target(a, path);
    if (rc) return rc;
    if (a->direct) {
        strcpy(a->tmp, path);
        a->fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (a->fd < 0) return tl_error(TL_EFAIL, path, "cannot open for writing: %s", strerror(errno));
        return TL_OK;
    }
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.XXXXXX", a->path);
    /* The template is registered first and mkostemp fills in the registered copy itself, so a
     * signal (in any thread) never finds the file created but not yet registered. */
    char *slot = pending_add(a->tmp);
    a->fd = mkostemp(slot ? slot : a->tmp, O_CLOEXEC); /* O_CREAT | O_EXCL, 0600: never an existing name */
    const int e = errno;
    if (slot) {
        if (a->fd >= 0) memcpy(a->tmp, slot, strlen(slot) + 1);
        else pending_drop(slot);
    }
    if (a->fd < 0) {
        a->tmp[0] = '\0';
        if (e == ENOSPC || e == EDQUOT) return tl_write_error(a->path, NULL, e); /* the tour stops on it */
        return tl_error(TL_EFAIL, a->path, "cannot create the file: %s", strerror(e));
    }
    return TL_OK;
}

FILE *tl_atomic_file(tl_atomic *a)
{
    if (a->f || a->fd < 0) {
        if (!a->f) errno = EBADF;
        return a->f;
    }
    cookie_io_functions_t io = {NULL, sink_write, NULL, NULL}; /* no close: the fd is tl_atomic_close's */
    a->f = fopencookie(a, "w", io);
    return a->f;
}

int tl_atomic_close(tl_atomic *a, const char *what)
{
    if (a->fd < 0) return a->err || (!a->direct && !a->tmp[0]) ? TL_EFAIL : TL_OK; /* closed before */
    if (a->f) {
        if (fflush(a->f) != 0 && !a->err) a->err = EIO; /* sends the buffer through sink_write */
        fclose(a->f);
        a->f = NULL;
    }
    int err = a->err;
    if (!err && !a->direct) {
        const mode_t mode = a->mode >= 0 ? (mode_t)a->mode : new_file_mode();
        if (fchmod(a->fd, mode) != 0 || fsync(a->fd) != 0) err = errno;
    }
    if (close(a->fd) != 0 && !err && errno != EINTR) err = errno;
    a->fd = -1;
    if (!err) return TL_OK;
    a->err = err;
    tl_write_error(a->path, what, err);
    if (!a->direct) {
        unlink(a->tmp);
        pending_drop(a->tmp);
        a->tmp[0] = '\0';
    }
    return TL_EFAIL;
}

int tl_atomic_commit(tl_atomic *a)
{
    if (tl_atomic_close(a, NULL)) return TL_EFAIL; /* a close that failed before: reported then */
    if (a->direct) return TL_OK;
    if (rename(a->tmp, a->path) != 0) {
        int e = errno;
        unlink(a->tmp);
        pending_drop(a->tmp);
        return tl_error(TL_EFAIL, a->path, "cannot write: %s", strerror(e));
    }
    pending_drop(a->tmp);
    a->tmp[0] = '\0'; /* renamed: a later abort removes nothing */
    return TL_OK;
}

void tl_atomic_abort(tl_atomic *a)
{
    if (a->f) fclose(a->f);
    a->f = NULL;
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    if (a->direct || !a->tmp[0]) return;
    unlink(a->tmp);
    pending_drop(a->tmp);
    a->tmp[0] = '\0';
}

void tl_ignore_sigxfsz(void)
{
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGXFSZ, SIG_IGN);
}

/* path's folder resolved (symbolic links, "..") joined to its last component, in out[n]. 0 when the
 * folder cannot be resolved. */
static int canonical_name(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    char dir[4096], real[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    if (!realpath(dir, real)) return 0;
    return snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path) < (int)n;
}

int tl_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) return 0;
    char ca[PATH_MAX + 256], cb[PATH_MAX + 256];
    return canonical_name(a, ca, sizeof ca) && canonical_name(b, cb, sizeof cb) && strcmp(ca, cb) == 0;
}

int tl_open_regular(const char *path, const char *what, FILE **f)
{
    *f = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* O_NONBLOCK: a pipe's open returns at once */
    if (fd < 0) return tl_error(TL_EUSAGE, path, "cannot read %s: %s", what, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const char *kind = fstat(fd, &st) == 0 ? file_kind(st.st_mode) : strerror(errno);
        close(fd);
        return tl_error(TL_EUSAGE, path, "%s: not a regular file (%s)", what, kind);
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || !(*f = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        return tl_error(TL_EFAIL, path, "cannot read %s: %s", what, strerror(e));
    }
    return TL_OK;
}

int tl_mkdirs(const char *dir)
{
    char buf[4096];
    if (!dir || !*dir || strlen(dir) >= sizeof buf)
        return tl_error(TL_EUSAGE, "output folder", "bad folder name");
    strcpy(buf, dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return tl_error(TL_EFAIL, buf, "cannot create folder: %s", strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return tl_error(TL_EFAIL, buf, "cannot create folder: %s", strerror(errno));
    struct stat st; /* EEXIST also means "a file of that name": it must be a folder */
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return tl_error(TL_EUSAGE, buf, "exists and is not a folder");
    return TL_OK;
}

/* ---- parsing ---- */

/* The digits at s: how many (0 when none). */
static size_t digit_run(const char *s)
{
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9') n++;
    return n;
}

/* 1 when s is "-"? digits, all of it. */
static int int_form(const char *s)
{
    if (*s == '-') s++;
    size_t n = digit_run(s);
    return n > 0 && s[n] == '\0';
}

/* 1 when s is "-"? (digits ["." digits*] | "." digits) [("e"|"E") ["+"|"-"] digits], all of it. */
static int real_form(const char *s)
{
    if (*s == '-') s++;
    size_t whole = digit_run(s), frac = 0;
    s += whole;
    if (*s == '.') {
        frac = digit_run(s + 1);
        s += 1 + frac;
    }
    if (whole + frac == 0) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        size_t e = digit_run(s);
        if (e == 0) return 0;
        s += e;
    }
    return *s == '\0';
}

int tl_scan_int(const char *s, long long *out)
{
    if (!s || !int_form(s)) return TL_NUM_SYNTAX;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE) return TL_NUM_RANGE;
    *out = v;
    return TL_NUM_OK;
}

int tl_scan_u64(const char *s, uint64_t *out)
{
    if (!s || *s == '-' || !int_form(s)) return TL_NUM_SYNTAX;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno == ERANGE || v > UINT64_MAX) return TL_NUM_RANGE;
    *out = (uint64_t)v;
    return TL_NUM_OK;
}

int tl_scan_real(const char *s, double *out)
{
    if (!s || !real_form(s)) return TL_NUM_SYNTAX;
    double v = strtod(s, NULL); /* underflow gives 0 or a subnormal: kept */
    if (!isfinite(v)) return TL_NUM_RANGE;
    *out = v;
    return TL_NUM_OK;
}

int tl_scan_ints(const char *s, char sep, long long *v, int max)
{
    char buf[256];
    if (!s || strlen(s) >= sizeof buf) return 0;
    int n = 0;
    for (const char *p = s;;) {
        const char *e = strchr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (n == max) return 0;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (tl_scan_int(buf, &v[n])) return 0;
        n++;
        if (!e) return n;
        p = e + 1;
    }
}

const char *tl_skip_bom(const char *s)
{
    return s && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF ? s + 3 : s;
}

int tl_parse_long(const char *s, long lo, long hi, const char *what, long *out)
{
    if (!s || !*s) return tl_error(TL_EUSAGE, what, "missing value");
    long long v = 0;
    int r = tl_scan_int(s, &v);
    if (r == TL_NUM_SYNTAX) return tl_error(TL_EUSAGE, what, "'%s' is not an integer (decimal digits only)", s);
    if (r == TL_NUM_RANGE || v < lo || v > hi)
        return tl_error(TL_EUSAGE, what, "%s is out of range [%ld, %ld]", s, lo, hi);
    *out = (long)v;
    return TL_OK;
}

int tl_parse_int(const char *s, int lo, int hi, const char *what, int *out)
{
    long v = 0;
    int rc = tl_parse_long(s, lo, hi, what, &v);
    if (!rc) *out = (int)v;
    return rc;
}

int tl_parse_long_list(const char *s, long lo, long hi, const char *what, long *out, int cap,
                       int *count)
{
    if (!s || !*s) return tl_error(TL_EUSAGE, what, "missing value");
    char buf[4096];
    if (strlen(s) >= sizeof buf) return tl_error(TL_EUSAGE, what, "list too long");
    size_t len = strlen(s);
    if (s[0] == ',' || s[len - 1] == ',' || strstr(s, ",,"))
        return tl_error(TL_EUSAGE, what, "'%s' has an empty item", s);
    strcpy(buf, s);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n >= cap) return tl_error(TL_EUSAGE, what, "more than %d values", cap);
        int rc = tl_parse_long(tok, lo, hi, what, &out[n]);
        if (rc) return rc;
        n++;
    }
    if (n == 0) return tl_error(TL_EUSAGE, what, "empty list");
    *count = n;
    return TL_OK;
}

int tl_parse_double(const char *s, const char *what, double *out)
{
    if (!s || !*s) return tl_error(TL_EUSAGE, what, "missing value");
    if (tl_scan_real(s, out)) return tl_error(TL_EUSAGE, what, "'%s' is not a finite decimal number", s);
    return TL_OK;
}

int tl_parse_format(const char *s, tl_format *out)
{
    if (!s || strcmp(s, "table") == 0) *out = TL_FMT_TABLE;
    else if (s && strcmp(s, "csv") == 0) *out = TL_FMT_CSV;
    else if (s && strcmp(s, "json") == 0) *out = TL_FMT_JSON;
    else return tl_error(TL_EUSAGE, "--format", "unknown format '%s' (table, csv or json)", s ? s : "");
    return TL_OK;
}
