/* NumPy .npy reading and writing (core/npy.h). */
#include "npy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
    const char *descr, *name;
    size_t size;
} npy_types[TL_NPY_NTYPES] = {
    [TL_NPY_F32] = {"<f4", "float32", 4},
    [TL_NPY_F16] = {"<f2", "float16", 2},
    [TL_NPY_BF16] = {"<u2", "bfloat16 (uint16 bits)", 2},
    [TL_NPY_I32] = {"<i4", "int32", 4},
    [TL_NPY_U8] = {"|u1", "uint8", 1},
};

const char *tl_npy_type_name(tl_npy_type t) { return t < TL_NPY_NTYPES ? npy_types[t].name : "?"; }
size_t tl_npy_type_size(tl_npy_type t) { return t < TL_NPY_NTYPES ? npy_types[t].size : 0; }

void tl_npy_free(tl_npy *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

void tl_npy_shape_str(const tl_npy *a, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < a->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%zu", i ? ", " : "", a->shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

/* ---- the header: a Python dict literal with exactly the keys 'descr' (a string),
 * 'fortran_order' (True or False) and 'shape' (a tuple of integers), in any order, each once, an
 * optional trailing comma; then blanks and the newline that pads it. numpy's reader refuses the same
 * things (other keys, a missing one, a value of another type). ---- */

static void skip_blanks(const char **p)
{
    while (**p == ' ' || **p == '\t') (*p)++;
}

/* A quoted Python string ('...' or "...", no escapes) into out (cap bytes); 0 when malformed. */
static int read_quoted(const char **p, char *out, size_t cap)
{
    const char q = **p;
    if (q != '\'' && q != '"') return 0;
    const char *end = strchr(*p + 1, q);
    if (!end || memchr(*p + 1, '\\', (size_t)(end - *p - 1)) || (size_t)(end - *p - 1) >= cap) return 0;
    memcpy(out, *p + 1, (size_t)(end - *p - 1));
    out[end - *p - 1] = '\0';
    *p = end + 1;
    return 1;
}

static int parse_descr(const char *path, char *descr, tl_npy *a)
{
    int t = -1;
    for (int i = 0; i < TL_NPY_NTYPES; i++)
        if (strcmp(descr, npy_types[i].descr) == 0) t = i;
    if (t < 0)
        return tl_error(TL_EUSAGE, path, "dtype '%s' is not supported (float32 '<f4', float16 '<f2', bfloat16 as "
                        "uint16 '<u2', int32 '<i4' or uint8 '|u1', little-endian)", descr);
    a->type = (tl_npy_type)t;
    return 0;
}

/* fortran_order's value: exactly True or False (a Python bool; 'no', 0 or "False" are malformed). */
static int parse_fortran(const char *path, const char **p)
{
    if (strncmp(*p, "False", 5) == 0 && !isalnum((unsigned char)(*p)[5])) {
        *p += 5;
        return 0;
    }
    if (strncmp(*p, "True", 4) == 0 && !isalnum((unsigned char)(*p)[4]))
        return tl_error(TL_EUSAGE, path, "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
    return tl_error(TL_EUSAGE, path, "malformed header: 'fortran_order' must be True or False");
}

/* shape's value: "()" , "(N,)", "(N, M)" or "(N, M,)" of decimal integers. */
static int parse_shape(const char *path, const char **pp, tl_npy *a)
{
    const char *p = *pp;
    if (*p != '(') return tl_error(TL_EUSAGE, path, "malformed shape in the header (not a tuple)");
    p++;
    a->ndim = 0;
    a->count = 1;
    for (;;) {
        skip_blanks(&p);
        if (*p == ')') break;
        if (*p < '0' || *p > '9') return tl_error(TL_EUSAGE, path, "malformed shape in the header");
        if (a->ndim == TL_NPY_MAX_DIM)
            return tl_error(TL_EUSAGE, path, "more than %d dimensions", TL_NPY_MAX_DIM);
        char *e;
        errno = 0;
        unsigned long long v = strtoull(p, &e, 10); /* p is at a digit: decimal digits only */
        if (errno || v > TL_NPY_MAX_BYTES) return tl_error(TL_EUSAGE, path, "absurd dimension in the shape");
        if (v && a->count > TL_NPY_MAX_BYTES / v) return tl_error(TL_EUSAGE, path, "the shape is absurdly large");
        a->shape[a->ndim++] = (size_t)v;
        a->count *= (size_t)v;
        p = e;
        skip_blanks(&p);
        if (*p == ',') p++;
        else if (*p != ')') return tl_error(TL_EUSAGE, path, "malformed shape in the header");
        else if (a->ndim == 1) return tl_error(TL_EUSAGE, path, "malformed shape in the header ((N) is not a tuple: (N,))");
    }
    *pp = p + 1;
    return 0;
}

/* Parses the header dict into a's type, ndim and shape; TL_EUSAGE naming path otherwise. */
static int parse_header(const char *path, const char *hdr, tl_npy *a)
{
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    int seen[3] = {0, 0, 0};
    const char *p = hdr;
    skip_blanks(&p);
    if (*p++ != '{') return tl_error(TL_EUSAGE, path, "not a .npy header (needs descr, fortran_order and shape)");
    for (;;) {
        skip_blanks(&p);
        if (*p == '}') break;
        char key[32];
        if (!read_quoted(&p, key, sizeof key)) return tl_error(TL_EUSAGE, path, "malformed header (a key is not a string)");
        int k = 0;
        while (k < 3 && strcmp(key, keys[k]) != 0) k++;
        if (k == 3) return tl_error(TL_EUSAGE, path, "malformed header: unexpected key '%s' (only descr, fortran_order and shape)", key);
        if (seen[k]++) return tl_error(TL_EUSAGE, path, "malformed header: key '%s' given twice", key);
        skip_blanks(&p);
        if (*p++ != ':') return tl_error(TL_EUSAGE, path, "malformed header (no ':' after '%s')", key);
        skip_blanks(&p);
        int rc = 0;
        if (k == 0) {
            char descr[16];
            if (!read_quoted(&p, descr, sizeof descr)) return tl_error(TL_EUSAGE, path, "malformed dtype in the header");
            rc = parse_descr(path, descr, a);
        } else if (k == 1) {
            rc = parse_fortran(path, &p);
        } else {
            rc = parse_shape(path, &p, a);
        }
        if (rc) return rc;
        skip_blanks(&p);
        if (*p == ',') p++;
        else if (*p != '}') return tl_error(TL_EUSAGE, path, "malformed header (no ',' or '}' after '%s')", key);
    }
    for (int k = 0; k < 3; k++)
        if (!seen[k]) return tl_error(TL_EUSAGE, path, "not a .npy header (needs descr, fortran_order and shape)");
    p++;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p) return tl_error(TL_EUSAGE, path, "malformed header (text after the dict)");
    if (a->count > TL_NPY_MAX_BYTES / npy_types[a->type].size)
        return tl_error(TL_EUSAGE, path, "the array is larger than %llu GiB", TL_NPY_MAX_BYTES >> 30);
    return 0;
}

static int read_header(FILE *f, const char *path, tl_npy *a)
{
    unsigned char pre[10];
    if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return tl_error(TL_EUSAGE, path, "not a .npy file (no \\x93NUMPY magic)");
    int major = pre[6];
    size_t hlen;
    if (major == 1) {
        if (fread(pre + 8, 1, 2, f) != 2) return tl_error(TL_EUSAGE, path, "truncated header");
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (major == 2 || major == 3) {
        unsigned char l[4];
        if (fread(l, 1, 4, f) != 4) return tl_error(TL_EUSAGE, path, "truncated header");
        hlen = (size_t)l[0] | (size_t)l[1] << 8 | (size_t)l[2] << 16 | (size_t)l[3] << 24;
    } else {
        return tl_error(TL_EUSAGE, path, ".npy format version %d is not supported (1, 2 or 3)", major);
    }
    if (hlen > 1 << 20) return tl_error(TL_EUSAGE, path, "header of %zu bytes is absurd", hlen);
    char *hdr = malloc(hlen + 1);
    if (!hdr) return tl_error(TL_EFAIL, path, "out of memory");
    int rc = fread(hdr, 1, hlen, f) == hlen ? 0 : tl_error(TL_EUSAGE, path, "truncated header");
    if (!rc) {
        hdr[hlen] = '\0';
        if (memchr(hdr, '\0', hlen)) rc = tl_error(TL_EUSAGE, path, "malformed header (a NUL byte)");
    }
    if (!rc) rc = parse_header(path, hdr, a);
    free(hdr);
    return rc;
}

/* TL_EUSAGE when the rest of the file, from f's position, is shorter than the `bytes` the shape
 * needs: checked before the body is allocated, so a small file cannot claim gigabytes. */
static int body_fits(FILE *f, const char *path, size_t bytes)
{
    struct stat st;
    long at = ftell(f);
    if (at < 0 || fstat(fileno(f), &st) != 0) return tl_error(TL_EUSAGE, path, "cannot read: %s", strerror(errno));
    size_t left = (size_t)st.st_size > (size_t)at ? (size_t)st.st_size - (size_t)at : 0;
    if (left < bytes)
        return tl_error(TL_EUSAGE, path, "truncated: the shape needs %zu bytes of data, the file holds %zu", bytes, left);
    return TL_OK;
}

int tl_npy_read(const char *path, tl_npy *a)
{
    memset(a, 0, sizeof *a);
    FILE *f;
    int rc = tl_open_regular(path, "the .npy file", &f); /* a named pipe would block until a writer came */
    if (rc) return rc;
    rc = read_header(f, path, a);
    size_t bytes = rc ? 0 : a->count * npy_types[a->type].size;
    if (!rc) rc = body_fits(f, path, bytes);
    if (!rc) {
        a->data = malloc(bytes ? bytes : 1);
        if (!a->data) rc = tl_error(TL_EFAIL, path, "out of memory (%zu bytes)", bytes);
    }
    if (!rc && fread(a->data, 1, bytes, f) != bytes)
        rc = tl_error(TL_EUSAGE, path, "truncated: the shape needs %zu bytes of data", bytes);
    if (!rc && fgetc(f) != EOF) rc = tl_error(TL_EUSAGE, path, "more data than the shape holds");
    fclose(f);
    if (rc) tl_npy_free(a);
    return rc;
}

int tl_npy_write(const char *path, tl_npy_type type, int ndim, const size_t *shape, const void *data)
{
    if (type >= TL_NPY_NTYPES || ndim < 0 || ndim > TL_NPY_MAX_DIM)
        return tl_error(TL_EUSAGE, path, "cannot write an array of this type or rank");
    char dict[512];
    size_t count = 1, used = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                                              npy_types[type].descr);
    for (int i = 0; i < ndim; i++) {
        used += (size_t)snprintf(dict + used, sizeof dict - used, "%zu%s", shape[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
        count *= shape[i];
    }
    used += (size_t)snprintf(dict + used, sizeof dict - used, "), }");
    /* magic (6) + version (2) + length (2) + dict + spaces + '\n', a multiple of 64 */
    size_t total = (10 + used + 1 + 63) / 64 * 64, hlen = total - 10;
    tl_atomic at;
    int rc = tl_atomic_begin(&at, path);
    if (rc) return rc;
    FILE *f = tl_atomic_file(&at);
    if (!f) {
        int e = errno;
        tl_atomic_abort(&at);
        return tl_write_error(path, "the .npy file", e);
    }
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xFF), (unsigned char)(hlen >> 8)};
    fwrite(pre, 1, 10, f);
    fwrite(dict, 1, used, f);
    for (size_t i = used; i + 1 < hlen; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, npy_types[type].size, count, f);
    rc = tl_atomic_close(&at, "the .npy file"); /* every write's error, the flush's and the sync's */
    return rc ? rc : tl_atomic_commit(&at);
}

static float half_to_f32(uint16_t h)
{
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

int tl_npy_to_f32(const tl_npy *a, const char *what, float *out)
{
    if (a->type == TL_NPY_F32) {
        memcpy(out, a->data, a->count * sizeof(float));
    } else if (a->type == TL_NPY_F16 || a->type == TL_NPY_BF16) {
        const uint16_t *s = a->data;
        for (size_t i = 0; i < a->count; i++) {
            if (a->type == TL_NPY_F16) {
                out[i] = half_to_f32(s[i]);
            } else {
                uint32_t b = (uint32_t)s[i] << 16;
                memcpy(&out[i], &b, sizeof b);
            }
        }
    } else {
        return tl_error(TL_EUSAGE, what, "needs a floating-point array (float32, float16 or bfloat16), not %s",
                        tl_npy_type_name(a->type));
    }
    return 0;
}
