/* simulator/gemm.c: the dense-GEMM tile model (simulator/gemm.h says what it charges). */
#include "gemm.h"

#include <math.h>
#include <string.h>

int tl_gemm_dtype_parse(const char *s, tl_gemm_dtype *out)
{
    if (s && strcmp(s, "bf16") == 0) *out = TL_GEMM_BF16;
    else if (s && strcmp(s, "fp8") == 0) *out = TL_GEMM_FP8;
    else return tl_error(TL_EUSAGE, "dense dtype", "'%s' is not bf16 or fp8", s ? s : "(null)");
    return TL_OK;
}

const char *tl_gemm_dtype_name(tl_gemm_dtype d) { return d == TL_GEMM_FP8 ? "fp8" : "bf16"; }

double tl_gemm_weight_bytes(tl_gemm_dtype d) { return d == TL_GEMM_FP8 ? 1.0 + 4.0 / (128.0 * 128.0) : 2.0; }

/* An activation element as the GEMM reads it: bf16, or E4M3 with a float32 scale per 1x128 group. */
static double act_bytes(tl_gemm_dtype d) { return d == TL_GEMM_FP8 ? 1.0 + 4.0 / 128.0 : 2.0; }

void tl_gemm_tile(long m, int *tile_m, int *tile_n)
{
    static const int heights[] = {16, 32, 64, 128};
    *tile_m = 128;
    for (int i = 0; i < 4; i++)
        if (m <= heights[i]) {
            *tile_m = heights[i];
            break;
        }
    *tile_n = *tile_m <= 32 ? 64 : 128;
}

/* The peer library's rate for the format, TFLOP/s (gemm.h). */
static double peer_tflops(const tl_hw *hw, tl_gemm_dtype d)
{
    const double measured = d == TL_GEMM_FP8 ? hw->gemm_fp8_tflops : hw->gemm_bf16_tflops;
    if (measured > 0) return measured;
    return TL_GEMM_LIBRARY_SHARE * tl_ceiling_value(d == TL_GEMM_FP8 ? hw->ceilings.fp8_tflops : hw->ceilings.bf16_tflops);
}

static long round_up(long v, long to) { return (v + to - 1) / to * to; }

/* The fewest K splits that give every CU an item, each split at least TL_GEMM_MIN_K_SPLIT deep. */
static int k_splits(const tl_hw *hw, long long tiles, long k)
{
    if (tiles >= hw->cus) return 1;
    long most = k / TL_GEMM_MIN_K_SPLIT;
    long want = (long)((hw->cus + tiles - 1) / tiles);
    long s = want < most ? want : most;
    return s > 1 ? (int)s : 1;
}

int tl_gemm_sim(const tl_gemm_problem *p, tl_gemm_result *r)
{
    memset(r, 0, sizeof *r);
    if (!p || !p->hw) return tl_error(TL_EUSAGE, "gemm", "no hardware preset");
    const long lim = 2147483647L;
    if (p->m < 1 || p->n < 1 || p->k < 1 || p->m > lim || p->n > lim || p->k > lim || p->batch < 1)
        return tl_error(TL_EUSAGE, "gemm", "%ld x %ld x %ld (batch %d): sizes must be in [1, 2^31)", p->m, p->n, p->k,
                        p->batch);
    const tl_hw *hw = p->hw;
    const char *fmt = p->dtype == TL_GEMM_FP8 ? "fp8" : "bf16";
    const double rate = peer_tflops(hw, p->dtype);
    if (!(rate > 0)) return tl_error(TL_EUSAGE, "gemm", "%s has no %s matrix ceiling", hw->name, fmt);
    tl_gemm_tile(p->m, &r->tile_m, &r->tile_n);
    tl_instr in;
    if (tl_hw_pick_instr(hw, fmt, fmt, r->tile_m, &in)) return TL_EUSAGE;
    snprintf(r->instr, sizeof r->instr, "%s", in.name);
    const long long tiles = (long long)p->batch * ((p->m + r->tile_m - 1) / r->tile_m) *
                            ((p->n + r->tile_n - 1) / r->tile_n);
    r->split = k_splits(hw, tiles, p->k);
    r->items = tiles * r->split;
    r->waves = (double)r->items / hw->cus;
    const double B = p->batch, m = (double)p->m, n = (double)p->n, k = (double)p->k;
    r->flops_useful = 2.0 * B * m * n * k;
    r->flops_issued = 2.0 * B * (double)round_up(p->m, in.m) * (double)round_up(p->n, in.n) *
                      (double)round_up(p->k, in.k);
    r->weight_bytes = B * n * k * tl_gemm_weight_bytes(p->dtype);
    r->act_bytes = B * m * k * act_bytes(p->dtype);
    r->out_bytes = B * m * n * 2.0;
    r->partial_bytes = r->split > 1 ? 2.0 * r->split * B * m * n * 4.0 : 0;
    r->hbm_bytes = r->weight_bytes + r->act_bytes + r->out_bytes + r->partial_bytes;
    r->rate_tflops = rate;
    /* the items' work at one CU's share of the rate, wave after wave */
    const double item_us = r->flops_issued / (double)r->items / (rate * 1e6 / hw->cus);
    r->matrix_us = ceil(r->waves) * item_us;
    const double ceiling = tl_ceiling_value(hw->ceilings.hbm_read_gbps);
    const double active = r->items < hw->cus ? (double)r->items : hw->cus;
    const double hbm_us = r->hbm_bytes / (ceiling * 1e3), stream_us = r->hbm_bytes / (active * hw->hbm_per_cu_gbps * 1e3);
    r->memory_us = fmax(hbm_us, stream_us);
    r->kernels = r->split > 1 ? 2 : 1;
    r->fixed_us = hw->launch_us + hw->item_fixed_us + (r->split > 1 ? hw->next_kernel_us : 0);
    const double body = fmax(r->matrix_us, r->memory_us);
    r->time_us = r->fixed_us + body;
    r->limiter = r->fixed_us >= 0.5 * r->time_us ? "fixed"
                 : r->matrix_us >= r->memory_us  ? "matrix"
                 : stream_us > hbm_us            ? "cu-stream"
                                                 : "hbm";
    return TL_OK;
}
