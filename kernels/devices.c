/* kernels/devices.c: the selected device's op tables (kernels/devices.h). */
#include "devices.h"

#include <string.h>

#include "../core/tl.h"
#include "../executor/executor.h"
#include "bench.h"
#include "decode.h"
#include "indexer.h"
#include "moe.h"
#include "prefill.h"
#include "quant.h"
#include "topk.h"

/* One set of tables per device: this build's GPU and the executor's two targets. */
#define TL_DEVICE_TABLES(X)                                                                         \
    X(tl_gpu_api, tl_gpu) X(tl_decode_gpu_api, tl_decode_gpu) X(tl_indexer_gpu_api, tl_indexer_gpu) \
    X(tl_moe_gpu_api, tl_moe_gpu) X(tl_prefill_gpu_api, tl_prefill_gpu) X(tl_quant_gpu_api, tl_quant_gpu) \
    X(tl_topk_gpu_api, tl_topk_gpu)

#define DECLARE_EMU(T, n) extern const T *const n##_emu_gfx942; extern const T *const n##_emu_gfx950;
TL_DEVICE_TABLES(DECLARE_EMU)
#define DEFINE_SELECTED(T, n) const T *const *n##_selected = &n##_native;
TL_DEVICE_TABLES(DEFINE_SELECTED)

static char selected[32] = "gpu";

int tl_device_select(const char *name)
{
    const char *arch = strncmp(name, "emu:", 4) == 0 ? name + 4 : NULL;
    if (strcmp(name, "gpu") == 0) {
#define SELECT_NATIVE(T, n) n##_selected = &n##_native;
        TL_DEVICE_TABLES(SELECT_NATIVE)
        tl_emu_set_target(NULL);
    } else if (arch && (strcmp(arch, "gfx942") == 0 || strcmp(arch, "gfx950") == 0)) {
        const int g950 = strcmp(arch, "gfx950") == 0;
#define SELECT_EMU(T, n) n##_selected = g950 ? &n##_emu_gfx950 : &n##_emu_gfx942;
        TL_DEVICE_TABLES(SELECT_EMU)
        tl_emu_set_target(tl_emu_find_target(arch));
    } else {
        return tl_error(TL_EUSAGE, "--device", "'%s' is not a device: gpu, cpu, emu:gfx942 or emu:gfx950", name);
    }
    strncpy(selected, name, sizeof selected - 1);
    return 0;
}

const char *tl_device_selected(void) { return selected; }

int tl_device_is_emu(void) { return strncmp(selected, "emu:", 4) == 0; }
