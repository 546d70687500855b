/* Fuzz target: a model's config.json (simulator/model.h, tl_model_load on a path). */
#include "fuzz_input.h"

#include "core/tl.h"
#include "simulator/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tl_model m;
    tl_clear_error();
    int rc = tl_model_load(tl_fuzz_file(data, size, ".json"), &m);
    tl_fuzz_check(rc, "tl_model_load");
    if (rc != TL_OK) return 0;
    const char *call = "tl_model_load";
    tl_fuzz_require(m.hidden >= 1 && m.n_layers >= 1, call, "accepted a model without a positive hidden size and layer count");
    tl_fuzz_require(m.n_experts == 0 || (m.top_k >= 1 && m.top_k <= m.n_experts), call, "accepted a top-k outside [1, E]");
    char unused[1024];
    tl_model_unused(&m, unused, sizeof unused);
    int experts, top_k, width;
    tl_model_moe_shape(&m, &experts, &top_k, &width);
    tl_fuzz_require(experts >= 1 && top_k >= 1 && top_k <= experts, "tl_model_moe_shape", "an MoE shape outside 1 <= k <= E");
    return 0;
}
