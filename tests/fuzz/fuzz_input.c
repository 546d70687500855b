/* The fuzz targets' scratch file and contract checks (fuzz_input.h). */
#include "fuzz_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tl.h"

static char scratch_path[4096];
static int scratch_fd = -1;

static void remove_scratch(void)
{
    if (scratch_fd >= 0) unlink(scratch_path);
}

static void die(const char *what)
{
    fprintf(stderr, "fuzz: %s\n", what);
    abort();
}

static void open_scratch(const char *suffix)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    int n = snprintf(scratch_path, sizeof scratch_path, "%s/tilelab-fuzz-XXXXXX%s", dir, suffix);
    if (n < 0 || (size_t)n >= sizeof scratch_path || strchr(scratch_path, ','))
        die("TMPDIR is too long or holds a comma");
    scratch_fd = mkstemps(scratch_path, (int)strlen(suffix));
    if (scratch_fd < 0) die("cannot create the scratch file in TMPDIR");
    atexit(remove_scratch);
}

const char *tl_fuzz_file(const uint8_t *data, size_t size, const char *suffix)
{
    if (scratch_fd < 0) open_scratch(suffix);
    if (ftruncate(scratch_fd, 0) != 0) die("cannot truncate the scratch file");
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(scratch_fd, data + done, size - done, (off_t)done);
        if (w <= 0) die("cannot write the scratch file");
        done += (size_t)w;
    }
    return scratch_path;
}

void tl_fuzz_check(int rc, const char *call)
{
    if (rc != TL_OK && rc != TL_EFAIL && rc != TL_EUSAGE) {
        fprintf(stderr, "fuzz: %s returned %d, not 0, 1 or 2\n", call, rc);
        abort();
    }
    if (rc != TL_OK && !tl_last_error()[0]) {
        fprintf(stderr, "fuzz: %s returned %d without an error message\n", call, rc);
        abort();
    }
}

void tl_fuzz_require(int cond, const char *call, const char *what)
{
    if (cond) return;
    fprintf(stderr, "fuzz: %s: %s\n", call, what);
    abort();
}
