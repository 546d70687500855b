/* ops/quant_figs.c: the quant row's figure (`tilelab draw dispatch-bytes`): bytes a token crosses
 * the fabric as, by payload, from the contract (contract/quant.h's tl_payload_of), drawn by
 * visualize/quant_figs.c. The kernels' point on the roofline: `tilelab sim quant --format csv`
 * into `tilelab draw roofline --points`. */
#include <stdio.h>
#include <string.h>

#include "../contract/quant.h"
#include "../simulator/model.h"
#include "../visualize/figures.h"
#include "ops.h"

static const char dispatch_bytes_usage[] =
    "usage: tilelab draw dispatch-bytes [--model glm-5] [--topk K] -o FILE\n"
    "  Bytes a token of the model's hidden state crosses the fabric as in a MoE dispatch: BF16, and\n"
    "  FP8 1x128 / MXFP8 / MXFP4 with their scales and the routing record (contract/quant.h), one\n"
    "  stacked bar each (values, scales, routing), totals and shares of BF16 at the ends. From the\n"
    "  contract: no timing.\n";

static int draw_dispatch_bytes(int argc, char **argv)
{
    if (tl_wants_help(argc, argv, dispatch_bytes_usage)) return 0;
    const char *model_s = "glm-5", *topk_s = NULL, *out = NULL;
    tl_opt opts[] = {TL_OPT_V("--model", &model_s), TL_OPT_V("--topk", &topk_s), TL_OPT_V("-o", &out), TL_OPT_END};
    int rc = tl_opts_parse(argc, argv, opts, "draw dispatch-bytes", NULL, 0, NULL);
    if (rc || (rc = tl_ops_need_output(out, "dispatch-bytes"))) return rc;
    tl_model m;
    if ((rc = tl_model_load(model_s, &m))) return rc;
    int topk = m.top_k;
    if (topk_s && (rc = tl_parse_int(topk_s, 1, TL_QUANT_MAX_TOPK, "--topk", &topk))) return rc;
    if (topk < 1 || topk > TL_QUANT_MAX_TOPK)
        return tl_error(TL_EUSAGE, "dispatch-bytes", "model %s routes %d experts a token (1..%d; --topk)", m.name, topk,
                        TL_QUANT_MAX_TOPK);
    if (m.hidden < TL_QUANT_GROUP || m.hidden % TL_QUANT_GROUP || m.hidden > TL_QUANT_MAX_K)
        return tl_error(TL_EUSAGE, "dispatch-bytes", "hidden size %d of %s is not a multiple of 128 in [128, %ld]",
                        m.hidden, m.name, TL_QUANT_MAX_K);
    tl_payload_bar bars[TL_PAYLOAD_N];
    for (int k = 0; k < TL_PAYLOAD_N; k++) {
        tl_payload_bytes p = tl_payload_of((tl_payload_kind)k, m.hidden, topk);
        bars[k] = (tl_payload_bar){tl_payload_name((tl_payload_kind)k), p.values, p.scales, p.routing};
    }
    char about[300], foot[300];
    snprintf(about, sizeof about, "%s: hidden %d, top-%d; scales: float32 per 128 values (FP8) or E8M0 per 32 (MX); "
             "routing: %d ids + %d weights + the token's row and rank", m.name, m.hidden, topk, topk, topk);
    snprintf(foot, sizeof foot, "from the contract (contract/quant.h's dispatch record); not simulated, not measured");
    return tl_fig_dispatch_bytes(out, bars, TL_PAYLOAD_N, "MoE dispatch: bytes a token crosses the fabric, by format",
                                 about, foot);
}

const tl_op_figure tl_quant_figures[] = {
    {"dispatch-bytes", "bytes a token crosses the fabric in a MoE dispatch, by format (values, scales, routing)",
     draw_dispatch_bytes},
    {NULL, NULL, NULL},
};
