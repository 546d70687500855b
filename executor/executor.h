/* executor/executor.h: the CPU executor of the AMD kernels, as the rest of tilelab sees it (C).
 *
 * The kernels' .hip sources are compiled once per AMD target as host code (executor/hip_emu.h)
 * and linked beside this runtime; kernels/devices.c selects a target's tables (`--device
 * emu:gfx942`, `--device emu:gfx950`). Each launch runs on the CPU, waves of 64 work-items in
 * lockstep at every wave operation, and reports wave-level hazards as the launch's error
 * (executor/hip_emu.h lists them). What it does not model: time (no timing, no clocks worth
 * reading), caches, the hardware scheduler's order beyond lockstep (work-items of a wave run in
 * lane order between wave operations, work-groups one after another on each OS thread), and
 * rounding inside an instruction that the ISA guides leave unsaid (executor/amdgcn_ops.h).
 */
#ifndef TL_EXECUTOR_H
#define TL_EXECUTOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *arch;   /* "gfx942", "gfx950" */
    int compute_units;  /* the device's CUs (FACTS.md): the launchers size grids by it */
    size_t lds_bytes;   /* LDS a work-group may use: 64 KiB (gfx942), 160 KiB (gfx950) */
    int clock_khz;      /* peak engine clock */
    size_t mem_bytes;   /* HBM the device reports */
} tl_emu_target;

/* The target named arch ("gfx942", "gfx950"), or NULL. */
const tl_emu_target *tl_emu_find_target(const char *arch);
/* Makes t the emulated device (NULL: none) that launches and device queries see. */
void tl_emu_set_target(const tl_emu_target *t);
const tl_emu_target *tl_emu_target_now(void);

/* What the executor ran since the last reset: launches, work-groups, work-items, wave operations
 * (MFMAs among them) and barriers resolved, and the launches' wall time. */
typedef struct {
    long long launches, groups, items, wave_ops, mfmas, barriers;
    double seconds;
} tl_emu_stats;
void tl_emu_stats_get(tl_emu_stats *out);
void tl_emu_stats_reset(void);

#ifdef __cplusplus
}
#endif

#endif
