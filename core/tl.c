#include "tl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char last_error[512];

int tl_error(int status, const char *what, const char *fmt, ...)
{
    int n = snprintf(last_error, sizeof last_error, "%s: ", what ? what : "tilelab");
    if (n < 0 || (size_t)n >= sizeof last_error) return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

const char *tl_last_error(void) { return last_error; }
void tl_clear_error(void) { last_error[0] = '\0'; }

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

/* Temporary files of writers in progress. If SIGINT, SIGTERM or SIGHUP ends the process (Ctrl-C,
 * `timeout`), the handler removes them before the signal's default action, so that no
 * "<path>.tmp.<pid>" outlives an interrupted run. Handlers are installed on the first
 * tl_atomic_begin, only for signals still at their default disposition. */
#define PENDING_MAX 8
static char pending[PENDING_MAX][sizeof(((tl_atomic *)0)->tmp)];
static volatile sig_atomic_t pending_used[PENDING_MAX];

static void remove_pending_and_reraise(int sig)
{
    for (int i = 0; i < PENDING_MAX; i++)
        if (pending_used[i]) unlink(pending[i]); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void watch_signals(void)
{
    static int installed = 0;
    if (installed) return;
    installed = 1;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = remove_pending_and_reraise;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

static void pending_add(const char *tmp)
{
    watch_signals();
    for (int i = 0; i < PENDING_MAX; i++)
        if (!pending_used[i]) {
            memcpy(pending[i], tmp, strlen(tmp) + 1);
            pending_used[i] = 1;
            return;
        }
}

static void pending_drop(const char *tmp)
{
    for (int i = 0; i < PENDING_MAX; i++)
        if (pending_used[i] && strcmp(pending[i], tmp) == 0) pending_used[i] = 0;
}

int tl_atomic_begin(tl_atomic *a, const char *path)
{
    if (!path || !*path) return tl_error(TL_EUSAGE, "output", "empty file name");
    if (strlen(path) >= sizeof a->path) return tl_error(TL_EUSAGE, "output", "file name too long");
    strcpy(a->path, path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    pending_add(a->tmp);
    return TL_OK;
}

int tl_atomic_commit(tl_atomic *a)
{
    if (rename(a->tmp, a->path) != 0) {
        int e = errno;
        remove(a->tmp);
        pending_drop(a->tmp);
        return tl_error(TL_EFAIL, a->path, "cannot write: %s", strerror(e));
    }
    pending_drop(a->tmp);
    return TL_OK;
}

void tl_atomic_abort(tl_atomic *a)
{
    remove(a->tmp);
    pending_drop(a->tmp);
}

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a named pipe" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a plain file";
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

int tl_parse_long(const char *s, long lo, long hi, const char *what, long *out)
{
    if (!s || !*s) return tl_error(TL_EUSAGE, what, "missing value");
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0') return tl_error(TL_EUSAGE, what, "'%s' is not an integer", s);
    if (errno == ERANGE || v < lo || v > hi)
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
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v)) return tl_error(TL_EUSAGE, what, "'%s' is not a finite number", s);
    *out = v;
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
