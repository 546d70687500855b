/* Fuzz target: a bench trace (`tilelab bench moe --trace`, read by tl_fig_trace of
 * visualize/figures.h), for both stages of the file's first case.
 *
 * The picture is named "fuzz.none": tl_fig_trace reads the trace and lays its blocks into SM slots
 * before it opens the picture, which then fails on the unknown extension, so each run exercises
 * the reader and the layout without drawing. LLVMFuzzerInitialize checks that order once on a
 * valid trace: if the picture were refused first, this target would test nothing and says so. */
#include "fuzz_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tl.h"
#include "visualize/figures.h"

static const char picture[] = "fuzz.none";

static int read_trace(const uint8_t *data, size_t size, int stage)
{
    tl_clear_error();
    int rc = tl_fig_trace(picture, tl_fuzz_file(data, size, ".csv"), 0, stage);
    tl_fuzz_check(rc, "tl_fig_trace");
    return rc;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char valid[] = "tokens,stage,dtype,block,sm,start_us,end_us\n1,1,bf16,0,3,1.5,9.25\n";
    read_trace((const uint8_t *)valid, sizeof valid - 1, 1);
    if (!strstr(tl_last_error(), picture)) {
        fprintf(stderr, "fuzz: tl_fig_trace no longer reads the trace before it opens the picture "
                        "(a valid trace gave: %s): this target must be rewritten\n", tl_last_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_trace(data, size, 1);
    read_trace(data, size, 2);
    return 0;
}
