/* Fuzz target: a hardware preset and an overlay (simulator/hw.h): each input is loaded as a whole
 * preset (tl_hw_load "FILE") and as an overlay merged over the H200's ("h200,FILE"). */
#include "fuzz_input.h"

#include <stdio.h>

#include "core/tl.h"
#include "simulator/hw.h"

static void load(const char *spec)
{
    static tl_hw hw; /* about 8 KiB: off the stack */
    tl_clear_error();
    int rc = tl_hw_load(spec, &hw);
    tl_fuzz_check(rc, "tl_hw_load");
    if (rc != TL_OK) return;
    tl_fuzz_require(hw.cus >= 1 && hw.n_instr >= 0 && hw.n_instr <= TL_HW_MAX_INSTR, "tl_hw_load",
                    "accepted a preset without compute units or with an instruction count out of range");
    for (int i = 0; i < hw.n_instr; i++) tl_hw_instr_tflops(&hw, &hw.instr[i]);
    tl_instr in;
    tl_hw_pick_instr(&hw, "bf16", "bf16", 16, &in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = tl_fuzz_file(data, size, ".json");
    char spec[4200];
    load(path);
    snprintf(spec, sizeof spec, "h200,%s", path);
    load(spec);
    return 0;
}
