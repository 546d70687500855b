/* Fuzz target: a points CSV for draw roofline --points (visualize/points.h): tilelab's own CSV, an
 * ncu --csv export or a rocprofv3 counter collection, told apart by the header. */
#include "fuzz_input.h"

#include <math.h>

#include "core/tl.h"
#include "visualize/points.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tl_points p;
    tl_clear_error();
    int rc = tl_points_read(tl_fuzz_file(data, size, ".csv"), &p);
    tl_fuzz_check(rc, "tl_points_read");
    if (rc != TL_OK) return 0;
    tl_fuzz_require(p.n >= 1 && p.pts, "tl_points_read", "succeeded without a point");
    for (int i = 0; i < p.n; i++)
        tl_fuzz_require(isfinite(p.pts[i].intensity) && p.pts[i].intensity > 0 && isfinite(p.pts[i].tflops) &&
                            p.pts[i].tflops > 0,
                        "tl_points_read", "a point that has no place on a log-log roofline");
    tl_points_free(&p);
    return 0;
}
