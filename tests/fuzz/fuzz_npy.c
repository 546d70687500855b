/* Fuzz target: a NumPy .npy file (core/npy.h, tl_npy_read), then its elements as float32. */
#include "fuzz_input.h"

#include <stdlib.h>

#include "core/npy.h"
#include "core/tl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tl_npy a;
    tl_clear_error();
    int rc = tl_npy_read(tl_fuzz_file(data, size, ".npy"), &a);
    tl_fuzz_check(rc, "tl_npy_read");
    if (rc != TL_OK) return 0;
    /* the body was read from this input, so it cannot be larger than the input */
    tl_fuzz_require(a.count * tl_npy_type_size(a.type) <= size, "tl_npy_read", "more elements than the file holds");
    char shape[256];
    tl_npy_shape_str(&a, shape, sizeof shape);
    float *f = malloc((a.count ? a.count : 1) * sizeof *f);
    if (f) {
        tl_clear_error();
        tl_fuzz_check(tl_npy_to_f32(&a, "fuzz", f), "tl_npy_to_f32");
        free(f);
    }
    tl_npy_free(&a);
    return 0;
}
