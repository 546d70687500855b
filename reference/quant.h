/* reference/quant.h: the CPU side of `quant` (contract/quant.h): the reference (numerics/'
 * quantizers over rows, OpenMP), the naive scalar loop that checks it (numerics' one-value
 * functions: tl_encode, tl_bfp8_scale, tl_mx_scale_code), the kernels' own per-group arithmetic run
 * on the host (contract/quant.h's tl_quant_* functions, so CI checks what the GPU computes), the
 * dispatch record's unpack, the round trip, and the seeded inputs.
 *
 * Every quantizer takes x [rows][K] bfloat16 bits and writes:
 *   codes   tl_quant_code_bytes(s) bytes (dispatch: the records, tl_quant_record_layout's stride);
 *   scales  tl_quant_scale_count(s) float32 (fp8 family, query) or E8M0 bytes (mx); NULL for dispatch.
 * dispatch also reads ids [rows][topk] int32 and weights [rows][topk] float32 and stamps each record
 * with its row and src_rank. The three agree bit for bit (tests/test_quant.c, `tilelab check quant`).
 * Bad shape: TL_EUSAGE; out of memory: TL_EFAIL.
 */
#ifndef TL_REFERENCE_QUANT_H
#define TL_REFERENCE_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "../contract/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Inputs: numerics/dist.h's normal, uniform, laplace and outliers (row_len 128), rounded to bf16;
 * or adversarial: normal with every 128-run of a row one of: all zeros (signs mixed), tiny (1e-6,
 * below the FP8 amax clamp, and bf16 subnormals), huge (near bf16's max), a NaN (either sign),
 * +Inf, -Inf with a NaN, values on E4M3 / E2M1 rounding ties, ordinary. */
typedef enum { TL_QDIST_NORMAL, TL_QDIST_UNIFORM, TL_QDIST_LAPLACE, TL_QDIST_OUTLIERS, TL_QDIST_ADVERSARIAL, TL_QDIST_N } tl_quant_dist;
int tl_quant_dist_parse(const char *s, tl_quant_dist *out);
const char *tl_quant_dist_name(tl_quant_dist d);
/* x [rows][K] bf16; for dispatch (ids, weights not NULL) top-k distinct expert ids in [0, 256) and
 * softmax-like positive weights. Deterministic whatever the thread count. Cost: O(rows K). */
int tl_quant_inputs_make(const tl_quant_shape *s, tl_quant_dist d, uint64_t seed, uint16_t *x, int32_t *ids,
                         float *weights);

/* The reference (OpenMP over rows, or over 128-token blocks for the query). */
int tl_quant_reference(const tl_quant_shape *s, const uint16_t *x, const int32_t *ids, const float *weights,
                       int src_rank, uint8_t *codes, void *scales);
/* The naive loop: one value at a time through numerics' scalar functions. Single-threaded. */
int tl_quant_naive(const tl_quant_shape *s, const uint16_t *x, const int32_t *ids, const float *weights,
                   int src_rank, uint8_t *codes, void *scales);
/* The kernels' arithmetic on the host: the same tl_quant_* calls, group by group, the query's
 * butterfly in the kernel's order. */
int tl_quant_host_kernel(const tl_quant_shape *s, const uint16_t *x, const int32_t *ids, const float *weights,
                         int src_rank, uint8_t *codes, void *scales);

/* The dispatch records back into their fields: codes [rows][K], scales [rows][K/128], ids and
 * weights [rows][topk], src_row and src_rank [rows]. TL_EFAIL when a padding byte is not zero. */
int tl_quant_unpack(const tl_quant_shape *s, const uint8_t *records, uint8_t *codes, float *scales, int32_t *ids,
                    float *weights, int32_t *src_row, int32_t *src_rank);

/* The round trip: codes and scales dequantized by numerics (tl_bfp8_dequantize_*, tl_mx_dequantize)
 * against the quantizer's input (x, rotated for a hadamard query): every element of a group whose
 * scale is finite within u |x| + half the format's subnormal step x scale (+ what the MX floor rule
 * clamps: |x| - max x X) + 2^-22 |x| (two float32 roundings); NaN wherever the input or the scale
 * holds NaN (MX: the whole block). Infinite inputs and the elements of groups with an Inf scale
 * are counted (inf_groups), not bounded, and so are values within a rounding step of float32's
 * largest whose code times a power-of-two scale (ue8m0, MX round-up) dequantizes to Inf (overflow). dispatch also
 * unpacks its records and compares the routing fields with the inputs. *worst: the largest
 * error / bound; *rel_rms over the bounded groups. TL_EFAIL naming the first element off its bound. */
typedef struct {
    size_t bounded, nan_ok, inf_groups, overflow;
    double worst, rel_rms;
} tl_quant_roundtrip;
int tl_quant_roundtrip_check(const tl_quant_shape *s, const uint16_t *x, const int32_t *ids, const float *weights,
                             int src_rank, const uint8_t *codes, const void *scales, tl_quant_roundtrip *r);

#ifdef __cplusplus
}
#endif

#endif
