/* Model presets, read in the shape of a model's own Hugging Face config.json, so a user can pass
 * theirs: `--model deepseek-v3.2` or `--model path/to/config.json`.
 *
 * A config whose top level has no hidden_size but a "text_config" object (Llama-4's multimodal
 * configs) is read from that object; tilelab_name, tilelab_source and quantization_config stay at the
 * top level.
 *
 * Keys read (aliases in brackets):
 *   hidden_size                                   required
 *   num_hidden_layers                             required
 * Keys in brackets are aliases: where a config carries several of one group they must hold one value
 * (gpt-oss gives num_experts_per_tok and experts_per_token both 4); two values are refused, naming both.
 *   n_routed_experts [num_experts, num_local_experts]   routed experts E; absent or 0 = dense model (then a top-k > 0 is an error)
 *   num_experts_per_tok [moe_topk, moe_router_topk, experts_per_token]   top-k, required when E > 0
 *   moe_intermediate_size                         expert width; when absent, a MoE model's expert width is
 *                                                 intermediate_size (Mixtral, gpt-oss, MiniMax, Llama-4)
 *   intermediate_size                             dense FFN width (required for dense models); for a MoE model
 *                                                 without moe_intermediate_size it is the expert width and the
 *                                                 dense width is intermediate_size_mlp (Llama-4; 0 when absent)
 *   n_shared_experts                              shared experts, each of the expert width (DeepSeek); default 0
 *   shared_expert_intermediate_size [shared_intermediate_size]   one shared expert of that width
 *                                                 (Qwen2-MoE, MiniMax; 0 = none; n_shared_experts of that width
 *                                                 when both are given)
 *   model_type "llama4_text"                      one shared expert of the expert width (Llama-4's layers
 *                                                 always have one; its config does not say so)
 *   Which layers are MoE (each key as transformers reads it; a layer is MoE when every rule admits it):
 *   first_k_dense_replace                         layers i < this are dense (DeepSeek), default 0
 *   moe_layer_freq                                MoE only where i % freq == 0 (DeepSeek), default 1
 *   decoder_sparse_step                           MoE only where (i + 1) % step == 0 (Qwen2/3-MoE), default 1
 *   mlp_only_layers                               list of dense layer indices (Qwen2/3-MoE), default []
 *   interleave_moe_layer_step                     MoE only where (i + 1) % step == 0 (Llama-4), default 1
 *   moe_layers                                    list of MoE layer indices (Llama-4); when given it decides
 *                                                 alone, as in transformers
 *   num_attention_heads, num_key_value_heads, head_dim (default hidden/heads)
 *   index_n_heads, index_head_dim, index_topk     DSA indexer (0 when absent)
 *   q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim   MLA attention (DeepSeek,
 *                                                 GLM-5, Kimi-K2; 0 when absent: kv_lora_rank > 0 means MLA)
 *   vocab_size                                    the LM head's rows (0 when absent)
 *   sliding_window                                recorded (0 when absent or null); simulator/step.h says
 *                                                 what of it the step charges
 *   (these MLA, vocab and window keys are read for the step but still listed as unused below: no
 *   op's own model reads them)
 *   "tilelab_name", "tilelab_source"              the preset's short name and where the values come
 *                                                 from (presets only; a user's file may omit them)
 *   quantization_config.quant_method              recorded (quant_method), not modelled: the data
 *                                                 type of a simulation is chosen on its own (--dtype)
 * Every other key is recorded as unused (tl_model_unused names them).
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
    int n_shared;        /* shared experts (0 for dense models) */
    int shared_width;    /* the width of each shared expert; 0 when there is none */
    int n_layers;        /* num_hidden_layers */
    int first_k_dense;   /* first_k_dense_replace */
    int moe_layers;      /* layers with a MoE FFN (the layer rules above); 0 for dense models */
    int dense_width;     /* the dense FFN width (dense layers / dense models); 0 when absent */
    int n_heads, n_kv_heads, head_dim;
    int index_n_heads, index_head_dim, index_topk;
    int q_lora_rank, kv_lora_rank;        /* MLA: 0 when absent (q_lora_rank 0: a plain q projection) */
    int qk_nope_head_dim, qk_rope_head_dim, v_head_dim; /* MLA head dims; 0 when absent */
    int vocab_size;                       /* 0 when absent */
    int sliding_window;                   /* 0 when absent or null */
    char quant_method[32]; /* quantization_config.quant_method ("fp8", "mxfp4", ...); "" when absent */
    int n_unused;          /* top-level keys of the config this loader did not use */
    char unused[512];      /* their names in file order, ", "-separated; "..." ends a list cut short */
} tl_model;

/* Loads a preset by name or a config.json by path (a name containing '/' or ending in ".json" is
 * a path). Errors (TL_EUSAGE, one line): unknown name (lists the presets), unreadable file,
 * malformed JSON ("FILE:LINE:COLUMN: why"), missing required field (names it), a value that is
 * not a positive integer where one is needed, top_k > E, a layer list holding a non-index, layer
 * rules that leave no MoE layer, shared experts on a dense model or whose total width is not a
 * multiple of the expert width (see tl_model_shared_experts). Plain data: nothing to free. */
int tl_model_load(const char *name_or_path, tl_model *out);

/* What of the config the model does not use, for a printer: writes "quantization_config
 * (quant_method fp8: not modelled, choose --dtype)" when the config has one, then the unused keys
 * (m->unused), into buf (always terminated when n > 0; cut short to fit). Returns the number of keys
 * not used, quantization_config included (0: everything was read; buf gets ""). */
int tl_model_unused(const tl_model *m, char *buf, size_t n);

/* The whole of that list, never cut short: *names gets a new string (the caller frees it), the
 * quantization_config note first, then every key not used, ", "-separated ("" when none). Loads
 * the model again (tl_model_load's errors). For printers that owe the full list (models --format
 * csv|json). Cost: one more read of the config. */
int tl_model_unused_all(const char *name_or_path, char **names);

/* Preset names compiled into the binary, NULL-terminated, sorted. Static storage. */
const char *const *tl_model_list(void);

/* The MoE FFN shape the simulator uses: E, k and the expert width. Dense models give 1, 1 and
 * intermediate_size. */
void tl_model_moe_shape(const tl_model *m, int *n_experts, int *top_k, int *width);

/* The shared experts as the simulator models them: experts of the routed width that every token
 * also uses, as many as give the same total width (n_shared x shared_width / expert width: Qwen1.5-MoE's
 * one shared expert of 5632 = 4 x 1408 counts 4; DeepSeek's n_shared_experts count as they are). The
 * FLOPs and weight bytes are the shared experts' exactly; tl_model_load refuses a width that does not
 * divide. 0 for dense models. */
int tl_model_shared_experts(const tl_model *m);

/* The one line that says which FFN the simulator models for m: "E 60 + 4 shared, top-4, width 1408"
 * (the routed experts, shared experts of the routed width as tl_model_shared_experts counts them,
 * top-k and the expert width; a dense model is "E 1 + 0 shared, top-1, width 14336"). n_shared < 0
 * takes the config's count; a caller that overrides it (sim moe --shared) passes its own. Both
 * `models` and `sim moe` print it. */
void tl_model_describe(const tl_model *m, int n_shared, char *buf, size_t n);

#endif
