/* bench/tolerance/roundings.h: what emu.c and fast.c share: the seed mixer of reference/moe.c's
 * weights (splitmix64) and the two roundings of the fused MoE's intermediates, bf16 (RNE) and
 * E4M3 (RNE, saturating to 448, subnormals below 2^-6). */
#ifndef TL_BENCH_TOLERANCE_ROUNDINGS_H
#define TL_BENCH_TOLERANCE_ROUNDINGS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fff + ((u >> 16) & 1);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}
static float e4m3(float x)
{
    float a = fabsf(x);
    if (a == 0) return 0;
    int e;
    frexpf(a, &e); /* a = f*2^e, f in [0.5,1): floor(log2 a) = e-1 */
    int fe = e - 1;
    if (fe < -6) fe = -6;
    float step = ldexpf(1.0f, fe - 3);
    float q = rintf(a / step) * step;
    if (q > 448.0f) q = 448.0f;
    return x < 0 ? -q : q;
}

#endif
