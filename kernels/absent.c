/* kernels/absent.c: the GPU tables of a build without GPU code (TILELAB_GPU=off). Op rows test
 * these pointers instead of #ifdef: NULL means "no GPU part in this build". A GPU build links
 * the kernels (the .hip files of kernels/), which define the same names, instead of this file. */
#include "bench.h"
#include "decode.h"
#include "indexer.h"
#include "moe.h"
#include "prefill.h"
#include "quant.h"
#include "topk.h"

const tl_gpu_api *const tl_gpu_native = NULL;
const tl_decode_gpu_api *const tl_decode_gpu_native = NULL;
const tl_indexer_gpu_api *const tl_indexer_gpu_native = NULL;
const tl_moe_gpu_api *const tl_moe_gpu_native = NULL;
const tl_prefill_gpu_api *const tl_prefill_gpu_native = NULL;
const tl_quant_gpu_api *const tl_quant_gpu_native = NULL;
const tl_topk_gpu_api *const tl_topk_gpu_native = NULL;
