/* Model presets, read in the shape of a model's own Hugging Face config.json, so a user can pass
 * theirs: `--model deepseek-v3.2` or `--model path/to/config.json`.
 *
 * Keys read (aliases in brackets):
 *   hidden_size                                   required
 *   num_hidden_layers                             required
 *   moe_intermediate_size                         required for MoE models (expert width)
 *   n_routed_experts [num_experts, num_local_experts]   routed experts E; absent or 0 = dense model (then a top-k > 0 is an error)
 *   num_experts_per_tok [moe_topk, moe_router_topk]               top-k, required when E > 0
 *   n_shared_experts                              default 0
 *   first_k_dense_replace                         leading dense layers, default 0
 *   intermediate_size                             dense FFN width (required for dense models)
 *   num_attention_heads, num_key_value_heads, head_dim (default hidden/heads)
 *   index_n_heads, index_head_dim, index_topk     DSA indexer (0 when absent)
 *   "tilelab_name", "tilelab_source"              the preset's short name and where the values come
 *                                                 from (presets only; a user's file may omit them)
 *   quantization_config.quant_method              recorded (quant_method), not modelled: the data
 *                                                 type of a simulation is chosen on its own (--dtype)
 * Every other top-level key is recorded as unused (tl_model_unused names them).
 * A dense model (mistral-7b, qwen3-8b) is treated by the MoE simulator as one expert that every
 * token uses: E = 1, k = 1, width = intermediate_size (see tl_model_moe_shape).
 */
#ifndef TL_SIM_MODEL_H
#define TL_SIM_MODEL_H

#include "../core/tl.h"

typedef struct {
    char name[64];
    char source[256];
    int hidden;          /* hidden_size */
    int moe_width;       /* moe_intermediate_size; 0 for dense models */
    int n_experts;       /* routed experts; 0 for dense models */
    int top_k;           /* num_experts_per_tok; 0 for dense models */
    int n_shared;        /* shared experts */
    int n_layers;        /* num_hidden_layers */
    int first_k_dense;   /* first_k_dense_replace */
    int moe_layers;      /* n_layers - first_k_dense for MoE models, 0 for dense ones */
    int dense_width;     /* intermediate_size (dense layers / dense models); 0 when absent */
    int n_heads, n_kv_heads, head_dim;
    int index_n_heads, index_head_dim, index_topk;
    char quant_method[32]; /* quantization_config.quant_method ("fp8", "mxfp4", ...); "" when absent */
    int n_unused;          /* top-level keys of the config this loader did not use */
    char unused[512];      /* their names in file order, ", "-separated; "..." ends a list cut short */
} tl_model;

/* Loads a preset by name or a config.json by path (a name containing '/' or ending in ".json" is
 * a path). Errors (TL_EUSAGE, one line): unknown name (lists the presets), unreadable file,
 * malformed JSON ("FILE:LINE:COLUMN: why"), missing required field (names it), a value that is
 * not a positive integer where one is needed, top_k > E. Plain data: nothing to free. */
int tl_model_load(const char *name_or_path, tl_model *out);

/* What of the config the model does not use, for a printer: writes "quantization_config
 * (quant_method fp8: not modelled, choose --dtype)" when the config has one, then the unused keys
 * (m->unused), into buf (always terminated when n > 0; cut short to fit). Returns the number of keys
 * not used, quantization_config included (0: everything was read; buf gets ""). */
int tl_model_unused(const tl_model *m, char *buf, size_t n);

/* Preset names compiled into the binary, NULL-terminated, sorted. Static storage. */
const char *const *tl_model_list(void);

/* The MoE FFN shape the simulator uses: E, k and the expert width. Dense models give 1, 1 and
 * intermediate_size. */
void tl_model_moe_shape(const tl_model *m, int *n_experts, int *top_k, int *width);

#endif
