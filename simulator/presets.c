/* Preset JSON reading: embedded presets or files, with errors that name file, line and column. */
#include "presets.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/embedded.h"

#define MAX_NAMES 64

static int is_path(const char *spec)
{
    size_t n = strlen(spec);
    return strchr(spec, '/') != NULL || (n > 5 && strcmp(spec + n - 5, ".json") == 0);
}

static void list_names(const char *kind, char *buf, size_t len)
{
    buf[0] = '\0';
    for (const char *const *n = tl_preset_names(kind); *n; n++) {
        if (buf[0]) strncat(buf, ", ", len - strlen(buf) - 1);
        strncat(buf, *n, len - strlen(buf) - 1);
    }
}

/* The most a preset or config file may hold: the presets are a few KiB, a model's config.json with
 * long layer lists a few hundred. */
#define MAX_JSON_BYTES (16u << 20)

/* The size of an open file for a message: "17.0 MiB, " ("" when unknown). */
static const char *size_text(FILE *f, char *buf, size_t n)
{
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0) snprintf(buf, n, "%.1f MiB, ", st.st_size / 1048576.0);
    else buf[0] = '\0';
    return buf;
}

/* Reads the JSON file at path (at most MAX_JSON_BYTES): a named pipe, a device or a folder is
 * refused without blocking (tl_open_regular), and so is a larger file, before anything is parsed;
 * `noun` names the input in messages. A leading UTF-8 byte-order mark is skipped. A key given twice is refused (which value did the author
 * mean?). Malformed JSON gives TL_OK with *root NULL and err saying where. Cost: one read of the
 * file, in a buffer that grows to its size. */
static int read_json_file(const char *path, const char *noun, json_t **root, json_error_t *err)
{
    *root = NULL;
    FILE *f;
    if (tl_open_regular(path, noun, &f)) return TL_EUSAGE;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap), sizebuf[64];
    int rc = buf ? 0 : tl_error(TL_EFAIL, path, "out of memory");
    while (!rc) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap || len > MAX_JSON_BYTES) break; /* the end, or one byte past the cap */
        size_t next = cap * 2 > MAX_JSON_BYTES + 1 ? MAX_JSON_BYTES + 1 : cap * 2;
        char *more = realloc(buf, next);
        if (!more) rc = tl_error(TL_EFAIL, path, "out of memory");
        else buf = more, cap = next;
    }
    if (!rc && ferror(f)) rc = tl_error(TL_EUSAGE, path, "cannot read %s: %s", noun, strerror(errno));
    else if (!rc && len > MAX_JSON_BYTES)
        rc = tl_error(TL_EUSAGE, path, "%s: %sover the %u MiB a JSON input may hold", noun,
                      size_text(f, sizebuf, sizeof sizebuf), MAX_JSON_BYTES >> 20);
    fclose(f);
    /* a leading UTF-8 byte-order mark is skipped, as the editors that write it hide it */
    size_t bom = len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    if (!rc) *root = json_loadb(buf + bom, len - bom, JSON_REJECT_DUPLICATES, err);
    free(buf);
    return rc;
}

int tl_preset_read(const char *kind, const char *spec, const char *what, json_t **out, char *label,
                   size_t label_len)
{
    *out = NULL;
    if (!spec || !spec[0]) return tl_error(TL_EUSAGE, what, "empty name");
    json_error_t err;
    json_t *root;
    if (is_path(spec)) {
        snprintf(label, label_len, "%s", spec);
        if (read_json_file(spec, strcmp(kind, "hw") == 0 ? "hardware preset" : "model config", &root, &err))
            return TL_EUSAGE;
    } else {
        char name[256];
        snprintf(name, sizeof name, "%s/%s.json", kind, spec);
        snprintf(label, label_len, "presets/%s", name);
        const tl_embedded_file *e = tl_embedded_find(name);
        if (!e) {
            char names[1024];
            list_names(kind, names, sizeof names);
            return tl_error(TL_EUSAGE, what, "unknown preset '%s' (one of %s, or a path to a .json file)",
                            spec, names);
        }
        root = json_loadb(e->data, e->size, JSON_REJECT_DUPLICATES, &err);
    }
    if (!root)
        return tl_error(TL_EUSAGE, what, "%s:%d:%d: malformed JSON: %s", label, err.line, err.column,
                        err.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return tl_error(TL_EUSAGE, what, "%s: the top level must be a JSON object", label);
    }
    *out = root;
    return 0;
}

typedef struct {
    const char *names[MAX_NAMES];
    char store[MAX_NAMES][64];
    int done;
} name_cache;

static name_cache hw_cache, model_cache;

const char *const *tl_preset_names(const char *kind)
{
    name_cache *c = strcmp(kind, "hw") == 0 ? &hw_cache : &model_cache;
    if (c->done) return c->names;
    size_t plen = strlen(kind);
    int n = 0;
    for (const tl_embedded_file *e = tl_embedded_files; e->name && n < MAX_NAMES - 1; e++) {
        if (strncmp(e->name, kind, plen) != 0 || e->name[plen] != '/') continue;
        const char *base = e->name + plen + 1;
        size_t bl = strlen(base);
        if (bl <= 5 || strcmp(base + bl - 5, ".json") != 0 || strchr(base, '/')) continue;
        if (bl - 5 >= sizeof c->store[0]) continue;
        memcpy(c->store[n], base, bl - 5);
        c->store[n][bl - 5] = '\0';
        c->names[n] = c->store[n];
        n++;
    }
    c->names[n] = NULL;
    c->done = 1; /* the embedded table is sorted by name, so names come out sorted */
    return c->names;
}

int tl_json_get_int(json_t *obj, const char *key, const char *label, int required, long lo, long hi,
                    int *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) return tl_error(TL_EUSAGE, label, "missing field '%s'", key);
        return 0;
    }
    double d = json_number_value(v);
    if (!json_is_integer(v) && !(json_is_real(v) && d == floor(d)))
        return tl_error(TL_EUSAGE, label, "field '%s' must be an integer", key);
    if (json_is_real(v) && (d < (double)lo || d > (double)hi)) /* 1e300 is not cast to an integer */
        return tl_error(TL_EUSAGE, label, "field '%s' = %g is outside [%ld, %ld]", key, d, lo, hi);
    json_int_t i = json_is_integer(v) ? json_integer_value(v) : (json_int_t)d; /* not through a double */
    if (i < lo || i > hi)
        return tl_error(TL_EUSAGE, label, "field '%s' = %lld is outside [%ld, %ld]", key, (long long)i, lo, hi);
    *out = (int)i;
    return 0;
}

int tl_json_get_num(json_t *obj, const char *key, const char *label, int required, double lo,
                    double hi, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) return tl_error(TL_EUSAGE, label, "missing field '%s'", key);
        return 0;
    }
    if (!json_is_number(v)) return tl_error(TL_EUSAGE, label, "field '%s' must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi)
        return tl_error(TL_EUSAGE, label, "field '%s' = %g is outside [%g, %g]", key, d, lo, hi);
    *out = d;
    return 0;
}

int tl_json_get_str(json_t *obj, const char *key, const char *label, int required, char *out,
                    size_t len)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) return tl_error(TL_EUSAGE, label, "missing field '%s'", key);
        return 0;
    }
    if (!json_is_string(v)) return tl_error(TL_EUSAGE, label, "field '%s' must be a string", key);
    const char *s = json_string_value(v);
    if (strlen(s) >= len) return tl_error(TL_EUSAGE, label, "field '%s' is too long", key);
    if (required && !s[0]) return tl_error(TL_EUSAGE, label, "field '%s' is empty", key);
    for (const char *c = s; *c; c++) /* names go into table cells, titles and one-line errors */
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return tl_error(TL_EUSAGE, label, "field '%s' holds a control character", key);
    memcpy(out, s, strlen(s) + 1);
    return 0;
}
