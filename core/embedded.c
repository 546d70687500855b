#include "embedded.h"

#include <string.h>

const tl_embedded_file *tl_embedded_find(const char *name)
{
    for (const tl_embedded_file *f = tl_embedded_files; f->name; f++)
        if (strcmp(f->name, name) == 0) return f;
    return NULL;
}
