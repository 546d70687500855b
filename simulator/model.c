/* Model presets in the shape of a Hugging Face config.json. */
#include "model.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "presets.h"

#define BIG 100000000L

static int present(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v);
}

/* Reads a group of alias keys (one quantity under the names of several families): the present (not
 * null) ones must agree, as gpt-oss's num_experts_per_tok and experts_per_token do; two that differ
 * are an error naming both keys and values, never resolved by the order of the list. required applies
 * to the group. */
static int get_alias_int(json_t *root, const char *const *keys, const char *label, int required,
                         long lo, long hi, int *out)
{
    const char *first = NULL;
    int value = 0;
    for (const char *const *k = keys; *k; k++) {
        if (!present(root, *k)) continue;
        int v = 0;
        if (tl_json_get_int(root, *k, label, 1, lo, hi, &v)) return TL_EUSAGE;
        if (first && v != value)
            return tl_error(TL_EUSAGE, label, "'%s' = %d and '%s' = %d name one quantity with two values: "
                            "keep one of them", first, value, *k, v);
        if (!first) first = *k, value = v;
    }
    if (first) {
        *out = value;
        return 0;
    }
    if (required) return tl_error(TL_EUSAGE, label, "missing field '%s'", keys[0]);
    return 0;
}

/* True if one of the alias keys holds a number > 0. */
static int positive_alias(json_t *root, const char *const *keys)
{
    for (const char *const *k = keys; *k; k++) {
        json_t *v = json_object_get(root, *k);
        if (json_is_number(v) && json_number_value(v) > 0) return 1;
    }
    return 0;
}

static const char *const experts_keys[] = {"n_routed_experts", "num_experts", "num_local_experts", NULL};
static const char *const topk_keys[] = {"num_experts_per_tok", "moe_topk", "moe_router_topk", "experts_per_token", NULL};
static const char *const shared_width_keys[] = {"shared_expert_intermediate_size", "shared_intermediate_size", NULL};
/* Keys read at the top level of the file, wherever the model's own fields are. */
static const char *const top_keys[] = {"tilelab_name", "tilelab_source", "quantization_config", NULL};
/* The other keys model_from_json reads, from the model's fields (the aliases above too). */
static const char *const read_keys[] = {
    "hidden_size", "num_hidden_layers", "intermediate_size", "intermediate_size_mlp", "moe_intermediate_size",
    "n_shared_experts", "model_type", "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step",
    "mlp_only_layers", "interleave_moe_layer_step", "moe_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "index_n_heads", "index_head_dim", "index_topk", NULL};
/* The attention and LM-head keys (q_lora_rank ... sliding_window) are read for the whole step
 * (simulator/step.h) but stay in the unused list: no op's own model reads them. */

static int listed(const char *key, const char *const *keys)
{
    for (; *keys; keys++)
        if (strcmp(key, *keys) == 0) return 1;
    return 0;
}

static int is_read_key(const char *key)
{
    return listed(key, read_keys) || listed(key, experts_keys) || listed(key, topk_keys) ||
           listed(key, shared_width_keys);
}

/* Appends ", " (but first) and s to buf (size n); a piece that does not fit ends the list with "...". */
static void append_name(char *buf, size_t n, const char *s)
{
    size_t len = strlen(buf);
    if (len >= 3 && strcmp(buf + len - 3, "...") == 0) return;
    const char *sep = len ? ", " : "";
    if (len + strlen(sep) + strlen(s) + 4 < n) snprintf(buf + len, n - len, "%s%s", sep, s);
    else if (len + 4 < n) snprintf(buf + len, n - len, "%s...", len ? " " : "");
}

static void note_unused(tl_model *m, const char *key)
{
    m->n_unused++;
    append_name(m->unused, sizeof m->unused, key);
}

/* Calls fn(ctx, key) for each key not read, in file order: the top level's, then (when the model's
 * fields sit under text_config) that object's. */
static void each_unread(json_t *root, json_t *fields, void (*fn)(void *, const char *), void *ctx)
{
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        int read = listed(key, top_keys) || (fields == root ? is_read_key(key) : strcmp(key, "text_config") == 0);
        if (!read) fn(ctx, key);
    }
    if (fields == root) return;
    json_object_foreach(fields, key, v)
    {
        if (!is_read_key(key)) fn(ctx, key);
    }
}

static void note_unused_cb(void *m, const char *key) { note_unused(m, key); }

/* Records quantization_config's method and the keys not read. */
static void record_unread(json_t *root, json_t *fields, tl_model *m)
{
    json_t *q = json_object_get(root, "quantization_config");
    const char *method = json_string_value(json_object_get(q, "quant_method"));
    if (q) snprintf(m->quant_method, sizeof m->quant_method, "%s", method ? method : "?");
    each_unread(root, fields, note_unused_cb, m);
}

/* The object holding the model's fields: the top level, or "text_config" when the top level has no
 * hidden_size (Llama-4's multimodal configs). */
static json_t *model_fields(json_t *root)
{
    json_t *text = json_object_get(root, "text_config");
    return !present(root, "hidden_size") && json_is_object(text) ? text : root;
}

/* Marks the layer indices listed under key (moe_layers, mlp_only_layers) in marks[0, n_layers);
 * *given says whether the key is there. An entry that is not an index of a layer is an error. */
static int read_layer_list(json_t *fields, const char *key, const char *label, int n_layers,
                           unsigned char *marks, int *given)
{
    json_t *list = json_object_get(fields, key);
    *given = present(fields, key);
    if (!*given) return 0;
    if (!json_is_array(list)) return tl_error(TL_EUSAGE, label, "field '%s' must be a list of layer indices", key);
    size_t i;
    json_t *it;
    json_array_foreach(list, i, it)
    {
        json_int_t layer = json_is_integer(it) ? json_integer_value(it) : -1;
        if (layer < 0 || layer >= n_layers)
            return tl_error(TL_EUSAGE, label, "%s[%zu] is not a layer index in [0, %d)", key, i, n_layers);
        marks[layer] = 1;
    }
    return 0;
}

/* Counts the MoE layers by the rules model.h lists (each family's keys, as transformers reads them). */
static int count_moe_layers(json_t *fields, const char *label, tl_model *m)
{
    int freq = 1, sparse_step = 1, interleave = 1, moe_given = 0, dense_given = 0;
    if (tl_json_get_int(fields, "moe_layer_freq", label, 0, 1, 100000, &freq) ||
        tl_json_get_int(fields, "decoder_sparse_step", label, 0, 1, 100000, &sparse_step) ||
        tl_json_get_int(fields, "interleave_moe_layer_step", label, 0, 1, 100000, &interleave))
        return TL_EUSAGE;
    unsigned char *moe = calloc((size_t)m->n_layers, 1), *dense = calloc((size_t)m->n_layers, 1);
    int rc = moe && dense ? 0 : tl_error(TL_EFAIL, label, "out of memory");
    if (!rc) rc = read_layer_list(fields, "moe_layers", label, m->n_layers, moe, &moe_given);
    if (!rc) rc = read_layer_list(fields, "mlp_only_layers", label, m->n_layers, dense, &dense_given);
    m->moe_layers = 0;
    for (int i = 0; !rc && i < m->n_layers; i++) {
        int by_rules = i >= m->first_k_dense && i % freq == 0 && (i + 1) % sparse_step == 0 &&
                       (i + 1) % interleave == 0 && !dense[i];
        m->moe_layers += moe_given ? moe[i] : by_rules; /* moe_layers decides alone, as in transformers */
    }
    free(moe);
    free(dense);
    if (rc) return rc;
    if (m->first_k_dense >= m->n_layers)
        return tl_error(TL_EUSAGE, label, "first_k_dense_replace = %d leaves no MoE layer of %d",
                        m->first_k_dense, m->n_layers);
    if (m->moe_layers == 0)
        return tl_error(TL_EUSAGE, label, "no MoE layer among the %d: see moe_layers, moe_layer_freq, "
                        "decoder_sparse_step, mlp_only_layers and interleave_moe_layer_step", m->n_layers);
    return 0;
}

/* The expert width: moe_intermediate_size, else intermediate_size (then the dense width is
 * intermediate_size_mlp, or 0). */
static int read_expert_width(json_t *fields, const char *label, tl_model *m)
{
    if (present(fields, "moe_intermediate_size"))
        return tl_json_get_int(fields, "moe_intermediate_size", label, 1, 1, BIG, &m->moe_width);
    if (m->dense_width <= 0)
        return tl_error(TL_EUSAGE, label, "missing field 'moe_intermediate_size' (or intermediate_size, "
                        "the expert width of Mixtral-style configs)");
    m->moe_width = m->dense_width;
    m->dense_width = 0;
    return tl_json_get_int(fields, "intermediate_size_mlp", label, 0, 1, BIG, &m->dense_width);
}

/* The shared experts: n_shared_experts of the expert width, one of shared_expert_intermediate_size,
 * or Llama-4's implicit one; their total width must be a whole number of routed experts (so that
 * tl_model_shared_experts is exact). */
static int read_shared_experts(json_t *fields, const char *label, tl_model *m)
{
    int width = 0;
    if (get_alias_int(fields, shared_width_keys, label, 0, 0, BIG, &width)) return TL_EUSAGE;
    const char *type = json_string_value(json_object_get(fields, "model_type"));
    if (width > 0) {
        if (m->n_shared == 0) m->n_shared = 1;
        m->shared_width = width;
    } else if (type && strcmp(type, "llama4_text") == 0 && !present(fields, "n_shared_experts")) {
        m->n_shared = 1;
        m->shared_width = m->moe_width;
    } else {
        m->shared_width = m->n_shared > 0 ? m->moe_width : 0;
    }
    long long total = (long long)m->n_shared * m->shared_width;
    if (total % m->moe_width != 0 || total / m->moe_width > 1000)
        return tl_error(TL_EUSAGE, label, "%d shared expert(s) of width %d are not a whole number (up to 1000) of "
                        "experts of the routed width %d, which the simulator models", m->n_shared,
                        m->shared_width, m->moe_width);
    return 0;
}

static int model_from_json(json_t *root, const char *label, const char *fallback_name, tl_model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", fallback_name);
    json_t *f = model_fields(root);
    if (tl_json_get_str(root, "tilelab_name", label, 0, m->name, sizeof m->name) ||
        tl_json_get_str(root, "tilelab_source", label, 0, m->source, sizeof m->source) ||
        tl_json_get_int(f, "hidden_size", label, 1, 1, BIG, &m->hidden) ||
        tl_json_get_int(f, "num_hidden_layers", label, 1, 1, 100000, &m->n_layers) ||
        get_alias_int(f, experts_keys, label, 0, 0, 1000000, &m->n_experts) ||
        tl_json_get_int(f, "intermediate_size", label, 0, 1, BIG, &m->dense_width) ||
        tl_json_get_int(f, "n_shared_experts", label, 0, 0, 1000, &m->n_shared) ||
        tl_json_get_int(f, "first_k_dense_replace", label, 0, 0, 100000, &m->first_k_dense) ||
        tl_json_get_int(f, "num_attention_heads", label, 0, 1, 100000, &m->n_heads) ||
        tl_json_get_int(f, "num_key_value_heads", label, 0, 1, 100000, &m->n_kv_heads) ||
        tl_json_get_int(f, "head_dim", label, 0, 1, 100000, &m->head_dim) ||
        tl_json_get_int(f, "index_n_heads", label, 0, 0, 100000, &m->index_n_heads) ||
        tl_json_get_int(f, "index_head_dim", label, 0, 0, 100000, &m->index_head_dim) ||
        tl_json_get_int(f, "index_topk", label, 0, 0, BIG, &m->index_topk) ||
        tl_json_get_int(f, "q_lora_rank", label, 0, 0, BIG, &m->q_lora_rank) ||
        tl_json_get_int(f, "kv_lora_rank", label, 0, 0, BIG, &m->kv_lora_rank) ||
        tl_json_get_int(f, "qk_nope_head_dim", label, 0, 0, 100000, &m->qk_nope_head_dim) ||
        tl_json_get_int(f, "qk_rope_head_dim", label, 0, 0, 100000, &m->qk_rope_head_dim) ||
        tl_json_get_int(f, "v_head_dim", label, 0, 0, 100000, &m->v_head_dim) ||
        tl_json_get_int(f, "vocab_size", label, 0, 0, BIG, &m->vocab_size) ||
        (present(f, "sliding_window") && tl_json_get_int(f, "sliding_window", label, 0, 0, BIG, &m->sliding_window)))
        return TL_EUSAGE;
    if (m->n_experts > 0) {
        if (read_expert_width(f, label, m) || get_alias_int(f, topk_keys, label, 1, 1, 1000000, &m->top_k))
            return TL_EUSAGE;
        if (m->top_k > m->n_experts)
            return tl_error(TL_EUSAGE, label, "num_experts_per_tok = %d is larger than the %d experts",
                            m->top_k, m->n_experts);
        if (count_moe_layers(f, label, m) || read_shared_experts(f, label, m)) return TL_EUSAGE;
    } else if (positive_alias(f, topk_keys)) {
        /* 0 routed experts, yet each token picks some: neither a MoE nor a dense model */
        return tl_error(TL_EUSAGE, label, "num_experts_per_tok is set, but the model has 0 routed experts");
    } else if (m->n_shared > 0 || positive_alias(f, shared_width_keys)) {
        return tl_error(TL_EUSAGE, label, "shared experts are set, but the model has 0 routed experts");
    } else if (m->dense_width <= 0) {
        return tl_error(TL_EUSAGE, label,
                        "missing field 'intermediate_size' (a model without n_routed_experts/num_experts is dense)");
    }
    if (!m->name[0]) snprintf(m->name, sizeof m->name, "%s", fallback_name); /* "tilelab_name": "" */
    if (m->n_kv_heads == 0) m->n_kv_heads = m->n_heads;
    if (m->head_dim == 0 && m->n_heads > 0) m->head_dim = m->hidden / m->n_heads;
    record_unread(root, f, m);
    return 0;
}

/* The note on quantization_config that every list of what is not modelled starts with. */
static void quant_note(const tl_model *m, char *q, size_t n)
{
    snprintf(q, n, "quantization_config (quant_method %s: not modelled, choose --dtype)", m->quant_method);
}

int tl_model_unused(const tl_model *m, char *buf, size_t n)
{
    if (n == 0) return m->n_unused + (m->quant_method[0] != 0);
    buf[0] = '\0';
    if (m->quant_method[0]) {
        char q[128];
        quant_note(m, q, sizeof q);
        append_name(buf, n, q);
    }
    if (m->unused[0]) append_name(buf, n, m->unused);
    return m->n_unused + (m->quant_method[0] != 0);
}

/* A growing ", "-separated string (NULL after an allocation failure). */
typedef struct {
    char *s;
    size_t len, cap;
} name_list;

static void list_add(void *vl, const char *name)
{
    name_list *l = vl;
    if (!l->s) return;
    size_t need = l->len + 2 + strlen(name) + 1;
    if (need > l->cap) {
        size_t cap = need * 2;
        char *ns = realloc(l->s, cap);
        if (!ns) {
            free(l->s);
            l->s = NULL;
            return;
        }
        l->s = ns, l->cap = cap;
    }
    l->len += (size_t)sprintf(l->s + l->len, "%s%s", l->len ? ", " : "", name);
}

static void base_name(const char *spec, char *out, size_t len)
{
    const char *slash = strrchr(spec, '/');
    snprintf(out, len, "%s", slash ? slash + 1 : spec);
    size_t n = strlen(out);
    if (n > 5 && strcmp(out + n - 5, ".json") == 0) out[n - 5] = '\0';
}

int tl_model_load(const char *name_or_path, tl_model *out)
{
    memset(out, 0, sizeof *out);
    json_t *root;
    char label[1100];
    if (tl_preset_read("models", name_or_path, "--model", &root, label, sizeof label)) return TL_EUSAGE;
    char fallback[64];
    base_name(name_or_path, fallback, sizeof fallback);
    int rc = model_from_json(root, label, fallback, out);
    json_decref(root);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

int tl_model_unused_all(const char *name_or_path, char **names)
{
    *names = NULL;
    json_t *root;
    char label[1100], fallback[64];
    tl_model m;
    if (tl_preset_read("models", name_or_path, "--model", &root, label, sizeof label)) return TL_EUSAGE;
    base_name(name_or_path, fallback, sizeof fallback);
    int rc = model_from_json(root, label, fallback, &m);
    name_list l = {calloc(1, 64), 0, 64};
    if (!rc && m.quant_method[0]) {
        char q[128];
        quant_note(&m, q, sizeof q);
        list_add(&l, q);
    }
    if (!rc) each_unread(root, model_fields(root), list_add, &l);
    json_decref(root);
    if (!rc && !l.s) rc = tl_error(TL_EFAIL, label, "out of memory");
    if (rc) free(l.s);
    else *names = l.s;
    return rc;
}

const char *const *tl_model_list(void) { return tl_preset_names("models"); }

void tl_model_moe_shape(const tl_model *m, int *n_experts, int *top_k, int *width)
{
    if (m->n_experts > 0) {
        *n_experts = m->n_experts;
        *top_k = m->top_k;
        *width = m->moe_width;
    } else {
        *n_experts = 1;
        *top_k = 1;
        *width = m->dense_width;
    }
}

int tl_model_shared_experts(const tl_model *m)
{
    if (m->n_experts <= 0 || m->moe_width <= 0) return 0;
    return (int)((long long)m->n_shared * m->shared_width / m->moe_width);
}

void tl_model_describe(const tl_model *m, int n_shared, char *buf, size_t n)
{
    int E, k, width;
    tl_model_moe_shape(m, &E, &k, &width);
    snprintf(buf, n, "E %d + %d shared, top-%d, width %d", E, n_shared < 0 ? tl_model_shared_experts(m) : n_shared,
             k, width);
}
