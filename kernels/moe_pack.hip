/* kernels/moe_pack.hip: the weights' packing at upload (moe_pack_weights; the layout is
 * kernels/moe_pack.h's) and its launch wrapper tl_moe_launch_pack (kernels/moe_launch.h). */
#include "moe_launch.h"

/* Packs one expert's matrix of stage `stage` (rows layout: W1 [2 width][K] codes, gate rows first;
 * W2 [hidden][K]) into groups of NCOLS rows (kernels/moe_pack.h; n_rows rows, n_out = width):
 * thread i writes the i-th 16 bytes of dst. A permutation: each source vector is written once.
 * Runs once per expert and matrix when the weights are uploaded (tl_moe_gpu_open). */
template <int DT>
__global__ void moe_pack_weights(const uint8_t *src, uint8_t *dst, int stage, int K, int n_rows, int n_out)
{
#if defined(MOE_NO_DEVICE)
    (void)src, (void)dst, (void)stage, (void)K, (void)n_rows, (void)n_out;
#else
    const size_t row_bytes = W_BYTES(DT, (size_t)K);
    const size_t o = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 16;
    if (o >= (size_t)n_rows * row_bytes) return;
    *(uint4 *)(dst + o) = *(const uint4 *)(src + tl_moe_pack_source(o, stage, row_bytes, Pack<DT>::RUN_BYTES, n_out, TL_WAVE));
#endif
}

int tl_moe_launch_pack(int dtype, const uint8_t *src, uint8_t *dst, int stage, int K, int n_rows, int n_out)
{
    const size_t n16 = (size_t)n_rows * W_BYTES(dtype, (size_t)K) / 16;
    return by_dtype(dtype, [&](auto d) {
        (void)tl_launch(moe_pack_weights<decltype(d)::value>, (unsigned)((n16 + 255) / 256), 256, 0, 0, false, src, dst, stage, K, n_rows, n_out);
        TL_GPU_CHECK_LAUNCH("moe_pack_weights");
        return 0;
    });
}
