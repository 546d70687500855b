/* Preset files compiled into the binary (generated from presets/ at build time). */
#ifndef TL_EMBEDDED_H
#define TL_EMBEDDED_H

#include <stddef.h>

typedef struct {
    const char *name; /* path under presets/, e.g. "hw/mi355x.json" */
    const char *data; /* NUL-terminated contents */
    size_t size;
} tl_embedded_file;

/* NULL-terminated table, sorted by name. */
extern const tl_embedded_file tl_embedded_files[];

/* The embedded file with this name, or NULL. */
const tl_embedded_file *tl_embedded_find(const char *name);

#endif
