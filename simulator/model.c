/* Model presets in the shape of a Hugging Face config.json. */
#include "model.h"

#include <jansson.h>
#include <string.h>

#include "presets.h"

#define BIG 100000000L

/* Reads the first of several alias keys that is present; required applies to the group. */
static int get_alias_int(json_t *root, const char *const *keys, const char *label, int required,
                         long lo, long hi, int *out)
{
    for (const char *const *k = keys; *k; k++)
        if (json_object_get(root, *k)) return tl_json_get_int(root, *k, label, 1, lo, hi, out);
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
static const char *const topk_keys[] = {"num_experts_per_tok", "moe_topk", "moe_router_topk", NULL};
/* Every key model_from_json reads (quantization_config's method is recorded, not used). */
static const char *const read_keys[] = {
    "tilelab_name", "tilelab_source", "hidden_size", "num_hidden_layers", "intermediate_size", "n_shared_experts",
    "first_k_dense_replace", "num_attention_heads", "num_key_value_heads", "head_dim", "index_n_heads",
    "index_head_dim", "index_topk", "moe_intermediate_size", "quantization_config", NULL};

static int listed(const char *key, const char *const *keys)
{
    for (; *keys; keys++)
        if (strcmp(key, *keys) == 0) return 1;
    return 0;
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

/* Records quantization_config's method and the top-level keys not read. */
static void record_unread(json_t *root, tl_model *m)
{
    json_t *q = json_object_get(root, "quantization_config");
    const char *method = json_string_value(json_object_get(q, "quant_method"));
    if (q) snprintf(m->quant_method, sizeof m->quant_method, "%s", method ? method : "?");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (listed(key, read_keys) || listed(key, experts_keys) || listed(key, topk_keys)) continue;
        m->n_unused++;
        append_name(m->unused, sizeof m->unused, key);
    }
}

static int model_from_json(json_t *root, const char *label, const char *fallback_name, tl_model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", fallback_name);
    if (tl_json_get_str(root, "tilelab_name", label, 0, m->name, sizeof m->name) ||
        tl_json_get_str(root, "tilelab_source", label, 0, m->source, sizeof m->source) ||
        tl_json_get_int(root, "hidden_size", label, 1, 1, BIG, &m->hidden) ||
        tl_json_get_int(root, "num_hidden_layers", label, 1, 1, 100000, &m->n_layers) ||
        get_alias_int(root, experts_keys, label, 0, 0, 1000000, &m->n_experts) ||
        tl_json_get_int(root, "intermediate_size", label, 0, 1, BIG, &m->dense_width) ||
        tl_json_get_int(root, "n_shared_experts", label, 0, 0, 1000, &m->n_shared) ||
        tl_json_get_int(root, "first_k_dense_replace", label, 0, 0, 100000, &m->first_k_dense) ||
        tl_json_get_int(root, "num_attention_heads", label, 0, 1, 100000, &m->n_heads) ||
        tl_json_get_int(root, "num_key_value_heads", label, 0, 1, 100000, &m->n_kv_heads) ||
        tl_json_get_int(root, "head_dim", label, 0, 1, 100000, &m->head_dim) ||
        tl_json_get_int(root, "index_n_heads", label, 0, 0, 100000, &m->index_n_heads) ||
        tl_json_get_int(root, "index_head_dim", label, 0, 0, 100000, &m->index_head_dim) ||
        tl_json_get_int(root, "index_topk", label, 0, 0, BIG, &m->index_topk))
        return TL_EUSAGE;
    if (m->n_experts > 0) {
        if (tl_json_get_int(root, "moe_intermediate_size", label, 1, 1, BIG, &m->moe_width) ||
            get_alias_int(root, topk_keys, label, 1, 1, 1000000, &m->top_k))
            return TL_EUSAGE;
        if (m->top_k > m->n_experts)
            return tl_error(TL_EUSAGE, label, "num_experts_per_tok = %d is larger than the %d experts",
                            m->top_k, m->n_experts);
        if (m->first_k_dense >= m->n_layers)
            return tl_error(TL_EUSAGE, label, "first_k_dense_replace = %d leaves no MoE layer of %d",
                            m->first_k_dense, m->n_layers);
        m->moe_layers = m->n_layers - m->first_k_dense;
    } else if (positive_alias(root, topk_keys)) {
        /* 0 routed experts, yet each token picks some: neither a MoE nor a dense model */
        return tl_error(TL_EUSAGE, label, "num_experts_per_tok is set, but the model has 0 routed experts");
    } else if (m->dense_width <= 0) {
        return tl_error(TL_EUSAGE, label,
                        "missing field 'intermediate_size' (a model without n_routed_experts/num_experts is dense)");
    }
    if (!m->name[0]) snprintf(m->name, sizeof m->name, "%s", fallback_name); /* "tilelab_name": "" */
    if (m->n_kv_heads == 0) m->n_kv_heads = m->n_heads;
    if (m->head_dim == 0 && m->n_heads > 0) m->head_dim = m->hidden / m->n_heads;
    record_unread(root, m);
    return 0;
}

int tl_model_unused(const tl_model *m, char *buf, size_t n)
{
    if (n == 0) return m->n_unused + (m->quant_method[0] != 0);
    buf[0] = '\0';
    if (m->quant_method[0]) {
        char q[128];
        snprintf(q, sizeof q, "quantization_config (quant_method %s: not modelled, choose --dtype)", m->quant_method);
        append_name(buf, n, q);
    }
    if (m->unused[0]) append_name(buf, n, m->unused);
    return m->n_unused + (m->quant_method[0] != 0);
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
