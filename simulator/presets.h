/* Reading preset JSON files (internal to the simulator, used by hw.c and model.c).
 *
 * A spec is a preset name (looked up as "<kind>/<name>.json" among the embedded presets) or a path
 * (anything containing '/' or ending in ".json"). Errors are recorded with tl_error and name the
 * file, and for malformed JSON its line and column. */
#ifndef TL_SIM_PRESETS_H
#define TL_SIM_PRESETS_H

#include <jansson.h>

#include "../core/tl.h"

/* Parses spec into *out (a new reference the caller releases with json_decref). label gets a name
 * for messages (the path, or "presets/<kind>/<name>.json"). `what` is the option for messages
 * ("--hw"). The root must be an object; a path must be a regular file; a key given twice in one
 * object is an error. TL_EUSAGE on any error. */
int tl_preset_read(const char *kind, const char *spec, const char *what, json_t **out, char *label,
                   size_t label_len);

/* Names of the embedded presets of a kind ("hw", "models"), sorted, NULL-terminated; at most 63.
 * Static storage per kind (computed once; the embedded table never changes). */
const char *const *tl_preset_names(const char *kind);

/* Field readers: a missing field is an error when `required` (the message names it and the file),
 * otherwise *out keeps its value. A wrong type or a value outside [lo, hi] is an error; so is a
 * string with a control character, or an empty one when required. */
int tl_json_get_int(json_t *obj, const char *key, const char *label, int required, long lo, long hi,
                    int *out);
int tl_json_get_num(json_t *obj, const char *key, const char *label, int required, double lo,
                    double hi, double *out);
int tl_json_get_str(json_t *obj, const char *key, const char *label, int required, char *out,
                    size_t len);

#endif
