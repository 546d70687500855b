/* Fuzz target: a routing trace (contract/worklist.h, --routing trace:FILE), routed for two MoE
 * shapes and, when accepted, built into the worklist that the model, the reference and the kernel
 * share. */
#include "fuzz_input.h"

#include <stdio.h>

#include "contract/worklist.h"
#include "core/tl.h"

/* tokens, routed experts, top-k: a small shape and DeepSeek-V3's E and k */
static const int shapes[][3] = {{8, 8, 2}, {33, 256, 8}};

static void route(const tl_routing *r, int tokens, int experts, int k)
{
    int32_t ids[33 * 8];
    float weights[33 * 8];
    tl_clear_error();
    int rc = tl_route(r, tokens, experts, k, 1, ids, weights);
    tl_fuzz_check(rc, "tl_route");
    if (rc != TL_OK) return;
    tl_worklist wl;
    tl_clear_error();
    rc = tl_worklist_build(ids, tokens, k, experts, 16, &wl);
    tl_fuzz_check(rc, "tl_worklist_build");
    tl_fuzz_require(rc == TL_OK, "tl_worklist_build", "refused a routing that tl_route accepted");
    tl_worklist_free(&wl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char spec[4200];
    tl_routing r;
    snprintf(spec, sizeof spec, "trace:%s", tl_fuzz_file(data, size, ".csv"));
    tl_clear_error();
    int rc = tl_routing_parse(spec, &r);
    tl_fuzz_check(rc, "tl_routing_parse");
    tl_fuzz_require(rc == TL_OK, "tl_routing_parse", "refused the scratch file's trace: spec");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) route(&r, shapes[i][0], shapes[i][1], shapes[i][2]);
    return 0;
}
