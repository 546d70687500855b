/* simulator/slots.h: the block slots of a list schedule (the models' tl_*_schedule): CUs x blocks a
 * CU, each free from some time on; the next block goes to the slot that frees first (ties: the one
 * dealt first). Slot k (its dealing order) sits on XCD k % xcds, CU (k / xcds) % (cus / xcds) of
 * that XCD, block slot k / cus there: the first blocks of a grid spread over every XCD and CU alike,
 * as the hardware's round-robin dispatch deals them. */
#ifndef TL_SIM_SLOTS_H
#define TL_SIM_SLOTS_H

#include "hw.h"

typedef struct {
    double free_us;
    long k; /* the slot's dealing order */
} tl_slot;

typedef struct {
    tl_slot *heap; /* a min-heap on (free_us, k) */
    long n;
    int cus, xcds;
} tl_slots;

/* n (>= 1) slots on hw, all free at start_us. TL_EFAIL (recorded) out of memory. Cost: O(n). */
int tl_slots_open(tl_slots *s, const tl_hw *hw, long n, double start_us);
/* The slot that frees first: its dealing order; *free_us its free time. O(1). */
long tl_slots_first(const tl_slots *s, double *free_us);
/* That slot is busy until until_us (>= its free time). O(log n). */
void tl_slots_fill_first(tl_slots *s, double until_us);
/* Slot k's CU and its block slot on that CU. */
void tl_slots_place(const tl_slots *s, long k, int *cu, int *slot);
void tl_slots_close(tl_slots *s);

#endif
