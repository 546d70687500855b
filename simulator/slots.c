/* simulator/slots.c: a list schedule's block slots (simulator/slots.h). */
#include "slots.h"

#include <stdlib.h>

static int before(const tl_slot *a, const tl_slot *b)
{
    return a->free_us < b->free_us || (a->free_us == b->free_us && a->k < b->k);
}

int tl_slots_open(tl_slots *s, const tl_hw *hw, long n, double start_us)
{
    s->n = n > 0 ? n : 1;
    s->cus = hw->cus > 0 ? hw->cus : 1;
    s->xcds = hw->xcds > 0 && hw->xcds <= s->cus ? hw->xcds : 1;
    s->heap = malloc((size_t)s->n * sizeof *s->heap);
    if (!s->heap) return tl_error(TL_EFAIL, "schedule", "out of memory for %ld block slots", s->n);
    for (long k = 0; k < s->n; k++) s->heap[k] = (tl_slot){start_us, k}; /* a heap already: keys ascend */
    return TL_OK;
}

long tl_slots_first(const tl_slots *s, double *free_us)
{
    if (free_us) *free_us = s->heap[0].free_us;
    return s->heap[0].k;
}

void tl_slots_fill_first(tl_slots *s, double until_us)
{
    tl_slot *h = s->heap;
    h[0].free_us = until_us;
    for (long i = 0;;) {
        long l = 2 * i + 1, m = i;
        if (l < s->n && before(&h[l], &h[m])) m = l;
        if (l + 1 < s->n && before(&h[l + 1], &h[m])) m = l + 1;
        if (m == i) return;
        tl_slot t = h[i];
        h[i] = h[m], h[m] = t;
        i = m;
    }
}

void tl_slots_place(const tl_slots *s, long k, int *cu, int *slot)
{
    const int per_xcd = s->cus / s->xcds;
    *cu = (int)((k % s->xcds) * per_xcd + (k / s->xcds) % per_xcd);
    *slot = (int)(k / s->cus);
}

void tl_slots_close(tl_slots *s)
{
    free(s->heap);
    s->heap = NULL;
}
