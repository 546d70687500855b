/* simulator/step.h: one whole model step (a decode step or a prefill) on one GPU of a serving
 * instance, composed from the ops' own models: every kernel of a layer is charged with the same
 * function `tilelab sim OP` calls for the same shape, and nothing else is added to them.
 *
 * The walk (per GPU; tp GPUs split the heads and widths, ep GPUs hold E / ep experts each):
 *   every layer     quant (dense fp8: the projection's input, 1x128 groups) and the projections
 *                   as dense GEMMs (simulator/gemm.h: the library peer's tile model): GQA's fused
 *                   qkv and o; MLA's fused q_a + kv_a (replicated, as vLLM runs it), q_b, and in
 *                   decode the absorbed per-head products W_UK and W_UV (batched GEMMs, bf16), in
 *                   prefill kv_b; DSA's indexer projections (wq_b; wk with the head weights)
 *                   attention       decode: DSA (index_topk > 0) the indexer (simulator/indexer.h:
 *                                   the batch's B x T rows as one launch over one request's
 *                                   positions, each row seeing the context before the step and its
 *                                   place in the batch more: the scores are the batch's, the K bytes
 *                                   read from HBM one request's),
 *                                   top-k (simulator/topk.h) and the dual-scope decode over the
 *                                   top index_topk positions (simulator/decode.h, window 0); MLA
 *                                   without an indexer the dual-scope decode over every position
 *                                   (window = the context, no top-k); GQA the paged decode.
 *                                   prefill: the causal prefill attention (simulator/prefill.h)
 *                                   per request, MLA's expanded heads (q.k nope + rope, v); DSA
 *                                   adds the indexer and top-k over the prompt, causal
 *                   all-reduce      after o and after the FFN when tp > 1: the preset's
 *                                   allreduce_us + 2 (tp - 1) / tp x the bytes (tokens x hidden
 *                                   bf16) over link_gbps
 *   dense layers    the MLP: gate+up and down GEMMs (intermediate_size / tp)
 *   MoE layers      the router GEMM (bf16, replicated), the quantization of the MoE input (fp8:
 *                   1x128 E4M3, the MX types: MXFP8, as the fused MoE reads them), the fused MoE
 *                   (simulator/moe.h, tilelab's kernel geometry, random routing seed 1: stage 1
 *                   and stage 2, each its own call), shared experts as dense GEMMs of their width
 *                   / tp (fp8 when the experts are fp8 or MX, else bf16); with ep > 1 and tp = 1
 *                   (attention data-parallel) the dispatch of the tokens to the ep GPUs and the
 *                   combine back (tl_dispatch_sim, the payload of the experts' format, and bf16)
 *   once            the LM head GEMM (vocab / tp; in prefill only each request's last token)
 * Tokens: decode batch x tokens_per_step a step (one query token per request plus its speculative
 * ones); prefill each request's whole context. With ep > 1 and tp = ep the tokens are those of
 * the TP group (every GPU sees them all) and a GPU's MoE takes their rows to its E / ep experts:
 * the model with E / ep experts and k / ep routes a token when ep divides k, else one route for
 * tokens x k / ep tokens (rounded up); the combine is the all-reduce. With tp = 1 a GPU serves
 * batch / ep requests (rounded up) and its MoE gets every GPU's rows to its experts.
 *
 * The step's time is the sum of its calls' times, each `count` times (its layers x its calls a
 * layer), in the order of calls[]: nothing overlaps and nothing is added between kernels. That is
 * the kernel floor the model gives: what a real engine spends beyond it (its own launches of
 * kernels this walk does not list: norms, rotary, residual adds, sampling; host-side
 * scheduling; waits) is the gap to a measured step.
 *
 * Not modelled (tl_step_not_modelled names what of a config is left out): norms, rotary
 * embedding, residual adds, activation and sampling kernels; the embedding gather; MTP / draft
 * layers (the draft model's own step); sliding windows (every layer attends its whole context:
 * gpt-oss's window of 128 on half its layers is charged in full), attention sinks, QK norms;
 * GLM-5.1+'s shared indexer layers (index_topk_freq: every layer runs its own); paged decode head
 * dims other than 128 (charged as 128: pairs of 64-dim KV heads as one where the heads pair up);
 * dual-scope decode heads below 16 a GPU (charged as 16, the kernel's smallest head block);
 * prefill's sparse DSA attention (charged as the dense causal prefill over the prompt); the
 * overlap of communication with compute; EP's uneven expert loads beyond the random routing.
 */
#ifndef TL_SIM_STEP_H
#define TL_SIM_STEP_H

#include "gemm.h"
#include "hw.h"
#include "model.h"
#include "moe.h"

typedef enum { TL_STEP_DECODE, TL_STEP_PREFILL } tl_step_phase;

/* What a call is, for the rows per op kind. */
typedef enum {
    TL_STEP_ATTENTION, /* decode or prefill attention */
    TL_STEP_INDEXER,
    TL_STEP_TOPK,
    TL_STEP_MOE,       /* the fused MoE's stages */
    TL_STEP_QUANT,
    TL_STEP_GEMM,      /* dense projections, MLPs, shared experts, router, LM head */
    TL_STEP_DISPATCH,  /* EP dispatch and combine */
    TL_STEP_ALLREDUCE,
    TL_STEP_NOPS
} tl_step_op;

typedef enum { TL_STEP_LAYER_DENSE, TL_STEP_LAYER_MOE, TL_STEP_LAYER_HEAD, TL_STEP_NLAYERS } tl_step_layer;

#define TL_STEP_MAX_CALLS 96
#define TL_STEP_CMD_LEN 640

typedef struct {
    const tl_hw *hw;
    const tl_model *model;
    const char *hw_spec, *model_spec; /* as the user gave them (for the calls' `sim` commands) */
    tl_step_phase phase;
    int batch;              /* requests, 1..TL_DECODE_MAX_BATCH */
    const long *context;    /* positions each request holds before the step (decode) or its prompt
                               (prefill): n_context = 1 (all alike) or batch entries, each >= 1 */
    int n_context;
    int tokens_per_step;    /* decode: 1 + speculative tokens a request (1..TL_DECODE_MAX_MTP for
                               MLA models; paged: up to 16 / gqa query heads together); prefill: 1 */
    int tp, ep;             /* >= 1; ep > 1 needs tp = 1 or tp = ep */
    int kv_fp8;             /* attention KV cache: 0 bf16, 1 fp8 (E4M3, float32 scales) */
    tl_moe_dtype experts;
    tl_gemm_dtype dense;
} tl_step_problem;

typedef struct {
    tl_step_layer layer;
    tl_step_op op;
    char name[48];          /* "q_b_proj", "moe stage 1", "dual-scope decode" */
    long count;             /* times a step: layers of its type x its calls a layer */
    double time_us;         /* one call */
    double hbm_bytes, flops; /* one call, as its model counts them */
    char limiter[24];
    double fixed_us;        /* of time_us: the model's launch and fixed terms (launch_us, next kernels,
                               pipeline fill, epilogue; the all-reduce's latency) */
    int kernels;            /* kernels one call launches */
    /* The `tilelab` command whose model row gives this call's time (a GEMM's: "gemm m=M n=N k=K
     * batch=B dtype=D", its shape for the torch peer, the step's own term; the EP-local MoE's:
     * `sim moe` of the config with the " (EP-local: n_routed_experts E, num_experts_per_tok K)" it
     * ends with; empty: none, the all-reduces), and, for the test that holds the step to the op
     * rows, the op row's name ("" where the command is not one as it stands) and the part of it
     * (moe: stage - 1; others 0). */
    char cmd[TL_STEP_CMD_LEN];
    char op_row[16];
    int part;
} tl_step_call;

typedef struct {
    tl_step_call calls[TL_STEP_MAX_CALLS];
    int n_calls;
    double op_us[TL_STEP_NOPS], op_bytes[TL_STEP_NOPS], op_flops[TL_STEP_NOPS];
    long op_calls[TL_STEP_NOPS];          /* calls a step (counts summed) */
    double op_fixed_us[TL_STEP_NOPS];     /* of op_us: their launch and fixed terms */
    const char *op_limiter[TL_STEP_NOPS]; /* the limiter of the kind's largest call (count x time) */
    double layer_us[TL_STEP_NLAYERS];     /* all layers of the type together */
    int layers[TL_STEP_NLAYERS];          /* layers of the type (head: 1) */
    double step_us;                       /* sum over calls of count x time_us, in call order */
    long tokens;                          /* tokens the step serves, the whole instance */
    double per_token_us;                  /* step_us / tokens */
    double hbm_bytes, flops;              /* one GPU's, a step */
    long kernels;                         /* kernels one GPU launches a step */
    double fixed_us;                      /* of step_us: the calls' launch and fixed terms */
    int gpus;                             /* max(tp, ep) */
    double expert_bytes;                  /* expert weights (routed + shared) read a step, all GPUs */
    double expert_floor_us;               /* those bytes at every GPU's HBM read ceiling together */
} tl_step_result;

const char *tl_step_op_name(tl_step_op op);
const char *tl_step_layer_name(tl_step_layer l);
/* "decode" | "prefill"; TL_EUSAGE otherwise. */
int tl_step_phase_parse(const char *s, tl_step_phase *out);

/* Composes the step. TL_EUSAGE (one line) for a NULL preset or model, a value out of range, tp
 * not dividing the heads or widths, ep not dividing the experts, an ep / tp pairing the walk does
 * not model, more speculative tokens than the attention kernel takes, or any op's own refusal of
 * its shape (its message). Cost: the ops' models, once per distinct call (the MoE's worklist
 * dominates: milliseconds at a few thousand tokens). */
int tl_step_sim(const tl_step_problem *p, tl_step_result *r);

/* What of the model's config the step does not model, for a printer: one line into buf (always
 * terminated when n > 0). */
void tl_step_not_modelled(const tl_step_problem *p, char *buf, size_t n);

#endif
