/* kernels/devices.h: which device runs the op rows' GPU side (plain C).
 *
 * Every kernels/OP.h table (tl_moe_gpu_kernels, ...) is the selected device's:
 *   "gpu"         this build's GPU (its .hip files built by nvcc or hipcc; NULL tables in a build
 *                 without one, kernels/absent.c) -- the default;
 *   "emu:gfx942"  the CPU executor running the kernels' gfx942 (MI300X) code, and
 *   "emu:gfx950"  ... their gfx950 (MI355X) code (executor/executor.h): the same .hip sources,
 *                 compiled for the host with that target's code selected, in every build.
 * Select before opening any op's GPU state; a state opened on one device is not valid on another.
 */
#ifndef TL_KERNELS_DEVICES_H
#define TL_KERNELS_DEVICES_H

#ifdef __cplusplus
extern "C" {
#endif

/* Selects the device named `name` (above). TL_EUSAGE, recorded, for any other name. */
int tl_device_select(const char *name);
/* The selected device's name ("gpu", "emu:gfx950"). */
const char *tl_device_selected(void);
/* 1 when the selected device is the CPU executor (no timing: bench refuses it). */
int tl_device_is_emu(void);

#ifdef __cplusplus
}
#endif

#endif
