/* kernels/moe_pack.h: where the fused MoE kernel's packed weights put each byte, as plain index
 * functions shared by the device code (kernels/moe.hip: the packing kernel and the GEMM's loads)
 * and the host tests (tests/test_moe_pack.c), which check the two sides against each other for
 * both lane maps without a GPU.
 *
 * The layout. An expert's weight matrix (rows of K codes, row_bytes each) is cut into groups of
 * TL_MOE_NCOLS rows: the rows one wave multiplies (stage 1: an item's 16 gate and 16 up rows,
 * tl_moe_group_row; stage 2: 32 consecutive rows of W2). A group is TL_MOE_NCOLS x row_bytes
 * contiguous bytes, cut into packed chunks of 4 k-groups x run_bytes of each row; a packed chunk
 * holds, for fragment f, vector v (16 bytes) and lane l in that order, the 16 bytes that lane l
 * loads as its vector v of fragment f. So a wave's load instruction reads wave x 16 contiguous
 * bytes. A lane layout whose runs are R times shorter than the packed run (bf16's layout 0: 32
 * bytes against 64) reads R of its chunks from one packed chunk (tl_moe_packed_vec), and its
 * activations follow the same k (tl_moe_lane_k).
 *
 * The lane maps (kernels/mma.h): NVIDIA (wave 32) has 8-column fragments and lane = 4 x column +
 * k-group; AMD (wave 64) has 16-column fragments and lane = 16 x k-group + column. The functions
 * take the wave size and pick the map from it. Cost: a few integer operations each.
 */
#ifndef TL_KERNELS_MOE_PACK_H
#define TL_KERNELS_MOE_PACK_H

#include "moe.h" /* TL_MOE_NCOLS, TL_MOE_S1_NB: the rows of a group */

#include <stddef.h>

#if defined(__CUDACC__)
#define TL_MOE_PACK_FN static __host__ __device__ inline
#elif defined(__HIP__)
#define TL_MOE_PACK_FN static __attribute__((host, device)) inline
#else
#define TL_MOE_PACK_FN static inline
#endif

TL_MOE_PACK_FN int tl_moe_frag_cols(int wave) { return wave == 32 ? 8 : 16; }
/* (unsigned arithmetic: lanes, chunks and k are never negative, and the compiler may use it) */
TL_MOE_PACK_FN int tl_moe_lane_kgrp(int wave, int lane) { return (int)(wave == 32 ? (unsigned)lane % 4u : (unsigned)lane / 16u); }
TL_MOE_PACK_FN int tl_moe_lane_col(int wave, int lane) { return (int)(wave == 32 ? (unsigned)lane / 4u : (unsigned)lane % 16u); }

/* The row of the expert's matrix that column `col` of fragment f of group g holds. Stage 1: the
 * first half of the fragments are gate rows g x 16.., the second half up rows n_out + g x 16..
 * (n_out = the expert width); stage 2: rows g x 32... */
TL_MOE_PACK_FN size_t tl_moe_group_row(int stage, size_t g, int f, int col, int n_out, int wave)
{
    const int fc = tl_moe_frag_cols(wave), half = TL_MOE_NCOLS / fc / 2;
    if (stage == 2) return g * TL_MOE_NCOLS + (size_t)f * fc + col;
    const size_t n = g * TL_MOE_S1_NB + (size_t)(f % half) * fc + col;
    return f < half ? n : (size_t)n_out + n;
}

/* Bytes of one packed chunk of a group: 4 k-groups x run_bytes of each of its rows. */
TL_MOE_PACK_FN size_t tl_moe_pack_chunk_bytes(int run_bytes) { return (size_t)TL_MOE_NCOLS * 4 * run_bytes; }

/* Where packed byte `dst` (an offset into the expert's packed matrix, a multiple of 16) comes
 * from: its offset in the rows layout. run_bytes = the packed run of a lane (16 x vectors). */
TL_MOE_PACK_FN size_t tl_moe_pack_source(size_t dst, int stage, size_t row_bytes, int run_bytes, int n_out, int wave)
{
    const size_t group_bytes = TL_MOE_NCOLS * row_bytes, chunk_bytes = tl_moe_pack_chunk_bytes(run_bytes);
    const size_t g = dst / group_bytes, pc = dst % group_bytes / chunk_bytes, q = dst % chunk_bytes / 16;
    const int lane = (int)(q % (size_t)wave), fv = (int)(q / (size_t)wave), f = fv / (run_bytes / 16),
              v = fv % (run_bytes / 16);
    const size_t n = tl_moe_group_row(stage, g, f, tl_moe_lane_col(wave, lane), n_out, wave);
    return n * row_bytes + pc * 4 * (size_t)run_bytes + (size_t)tl_moe_lane_kgrp(wave, lane) * run_bytes + 16 * (size_t)v;
}

/* Vector v of fragment f of chunk c of a lane layout with runs of w_vec vectors, R = run_bytes /
 * (16 w_vec) of its chunks per packed chunk: its offset from the group's first byte + 16 x lane. */
TL_MOE_PACK_FN size_t tl_moe_packed_vec(int c, int f, int v, int w_vec, int r, int run_bytes, int wave)
{
    return (size_t)(c / r) * tl_moe_pack_chunk_bytes(run_bytes) +
           (size_t)((f * (run_bytes / 16) + (c % r) * w_vec + v) * wave) * 16;
}

/* The first k of the run that k-group kgrp loads in chunk c of a lane layout with runs of krun
 * values, R of its chunks per packed chunk (rows layout: R = 1, the run at c x 4 krun + kgrp x krun). */
TL_MOE_PACK_FN int tl_moe_lane_k(int c, int kgrp, int krun, int r)
{
    const unsigned uc = (unsigned)c, ur = (unsigned)r, uk = (unsigned)krun;
    return (int)(uc / ur * 4u * ur * uk + (unsigned)kgrp * ur * uk + uc % ur * uk);
}

#endif
