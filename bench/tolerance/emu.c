/* Full emulation of the fused-MoE check statistic: CPU reference (sequential FMA fp32 accumulation,
 * like an OpenBLAS microkernel) vs GPU-like order (mma k16 blocks summed exactly then rounded, 4 waves
 * taking interleaved 256-wide K chunks, partials added at the end). bf16 or DeepSeek block fp8.
 * Weights: a fixed pool of E experts (generated like reference/moe.c: Irwin-Hall normal, bf16 or
 * E4M3 codes with 128x128 block scales); x and routing fresh per seed (tl_route's random weights).
 * Usage: emu dtype(bf16|fp8) M seeds seed0 [H W E k]
 * Prints one line per seed: seed rel_rms worst_row nflip_bf16 nflip_act nscale hdiff_rel */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roundings.h"

static int H = 7168, W = 256, E = 256, K = 8, FP8 = 0, RZ = 0, MB = 16;
/* fp32 rounding of an exact (double) value: RNE, or toward zero when RZ (tensor-core style) */
static float rnd(double d)
{
    float f = (float)d;
    if (RZ && fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    return f;
}

static float normal4(uint64_t h)
{
    uint32_t a = h & 0xffff, b = (h >> 16) & 0xffff, c = (h >> 32) & 0xffff, d = h >> 48;
    float s = ((float)(a + b + c + d) + 2.0f) * (1.0f / 65536.0f) - 2.0f;
    return s * 1.7320508f;
}
static double unif(uint64_t *st) { *st = mix64(*st); return ((*st >> 11) + 0.5) * 0x1p-53; }
static double gauss(uint64_t *st)
{
    double u1 = unif(st), u2 = unif(st);
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* pool: W1t[e][c][r] (r < 2W), W2t[e][j][n]; fp8: code values, scales S1[e][r/128][c/128], S2[e][n/128][j/128] */
static float *W1t, *W2t, *S1, *S2;
static double hb2[10], hbn[10];
static int nb(int x) { return (x + 127) / 128; }

static void make_pool(uint64_t seed)
{
    size_t m1 = (size_t)H * 2 * W, m2 = (size_t)W * H;
    W1t = malloc(m1 * E * 4);
    W2t = malloc(m2 * E * 4);
    if (!W1t || !W2t) { fprintf(stderr, "oom\n"); exit(1); }
    float sg1 = 1.0f / sqrtf((float)H), sg2 = 1.0f / sqrtf((float)W);
#pragma omp parallel for schedule(dynamic)
    for (int e = 0; e < E; e++) {
        for (int r = 0; r < 2 * W; r++) {
            uint64_t base = mix64(seed ^ mix64(((uint64_t)e << 32) | (uint32_t)r));
            for (int c = 0; c < H; c++) {
                float v = normal4(mix64(base + c));
                W1t[(size_t)e * m1 + (size_t)c * 2 * W + r] = FP8 ? e4m3(64.0f * v) : bf16(sg1 * v);
            }
        }
        for (int n = 0; n < H; n++) {
            uint64_t base = mix64((seed + 1) ^ mix64(((uint64_t)e << 32) | (uint32_t)n));
            for (int j = 0; j < W; j++) {
                float v = normal4(mix64(base + j));
                W2t[(size_t)e * m2 + (size_t)j * H + n] = FP8 ? e4m3(64.0f * v) : bf16(sg2 * v);
            }
        }
    }
    if (FP8) {
        size_t n1 = (size_t)nb(2 * W) * nb(H), n2 = (size_t)nb(H) * nb(W);
        S1 = malloc(n1 * E * 4);
        S2 = malloc(n2 * E * 4);
        for (size_t i = 0; i < n1 * E; i++)
            S1[i] = sg1 / 64.0f * (0.5f + (float)(mix64(seed ^ 0xb10cull ^ i) >> 40) * (1.0f / 16777216.0f));
        for (size_t i = 0; i < n2 * E; i++)
            S2[i] = sg2 / 64.0f * (0.5f + (float)(mix64((seed + 1) ^ 0xb10cull ^ i) >> 40) * (1.0f / 16777216.0f));
    }
}

/* stage 1, CPU order: h[r] = sum_c x[c] * Wdeq[c][r], sequential fmaf over c */
static void s1_cpu(int e, const float *xd, float *h)
{
    const int R = 2 * W, ncb = nb(H);
    const float *Wt = W1t + (size_t)e * H * R;
    for (int r = 0; r < R; r++) h[r] = 0;
    if (!FP8) {
        for (int c = 0; c < H; c++) {
            float xv = xd[c];
            const float *w = Wt + (size_t)c * R;
            for (int r = 0; r < R; r++) h[r] = fmaf(xv, w[r], h[r]);
        }
    } else {
        const float *S = S1 + (size_t)e * nb(R) * ncb;
        for (int c = 0; c < H; c++) {
            float xv = xd[c];
            const float *w = Wt + (size_t)c * R;
            for (int rb = 0; rb < R; rb += 128) {
                float s = S[(rb / 128) * ncb + c / 128];
                for (int r = rb; r < rb + 128 && r < R; r++) h[r] = fmaf(xv, w[r] * s, h[r]);
            }
        }
    }
}

/* stage 1, GPU order. bf16: blocks of 16 summed exactly (double) then added to the wave's fp32
 * accumulator with one rounding; fp8: blocks of 128 of code products -> fp32 partial, acc = fma(partial,
 * sx*sw, acc). wave = (c / 256) % 4; at the end (w0 + w1) + (w2 + w3). xq: fp8 code values, xs scales. */
static void s1_gpu(int e, const float *xd, const float *xq, const float *xs, float *h)
{
    const int R = 2 * W, ncb = nb(H);
    const float *Wt = W1t + (size_t)e * H * R;
    float *acc = calloc((size_t)4 * R, 4);
    double *tmp = malloc((size_t)R * 8);
    const int B = FP8 ? 128 : MB;
    for (int c0 = 0; c0 < H; c0 += B) {
        int wave = (c0 / 256) % 4, c1 = c0 + B < H ? c0 + B : H;
        for (int r = 0; r < R; r++) tmp[r] = 0;
        for (int c = c0; c < c1; c++) {
            double xv = FP8 ? xq[c] : xd[c];
            const float *w = Wt + (size_t)c * R;
            for (int r = 0; r < R; r++) tmp[r] += xv * (double)w[r];
        }
        float *a = acc + (size_t)wave * R;
        if (!FP8) {
            for (int r = 0; r < R; r++) a[r] = rnd((double)a[r] + tmp[r]);
        } else {
            const float *S = S1 + (size_t)e * nb(R) * ncb;
            for (int r = 0; r < R; r++) {
                float sc = xs[c0 / 128] * S[(r / 128) * ncb + c0 / 128];
                a[r] = fmaf((float)tmp[r], sc, a[r]);
            }
        }
    }
    for (int r = 0; r < R; r++) h[r] = (acc[r] + acc[R + r]) + (acc[2 * R + r] + acc[3 * R + r]);
    free(acc);
    free(tmp);
}

/* SwiGLU -> bf16 -> (fp8) E4M3 per 1x128 group. a: dequantized values; aq/as: code values, scales */
static void swiglu(const float *h, float *a, float *aq, float *as)
{
    for (int j = 0; j < W; j++) {
        float g = h[j], u = h[W + j];
        a[j] = bf16(g / (1.0f + expf(-g)) * u);
    }
    if (FP8)
        for (int j0 = 0; j0 < W; j0 += 128) {
            float amax = 0;
            for (int j = j0; j < j0 + 128 && j < W; j++) amax = fmaxf(amax, fabsf(a[j]));
            float s = fmaxf(amax, 1e-4f) / 448.0f;
            as[j0 / 128] = s;
            for (int j = j0; j < j0 + 128 && j < W; j++) {
                aq[j] = e4m3(a[j] / s);
                a[j] = aq[j] * s;
            }
        }
}

static void s2_cpu(int e, const float *a, float *y)
{
    const int nkb = nb(W);
    const float *Wt = W2t + (size_t)e * W * H;
    for (int n = 0; n < H; n++) y[n] = 0;
    for (int j = 0; j < W; j++) {
        float av = a[j];
        const float *w = Wt + (size_t)j * H;
        if (!FP8)
            for (int n = 0; n < H; n++) y[n] = fmaf(av, w[n], y[n]);
        else {
            const float *S = S2 + (size_t)e * nb(H) * nkb;
            for (int nb0 = 0; nb0 < H; nb0 += 128) {
                float s = S[(nb0 / 128) * nkb + j / 128];
                for (int n = nb0; n < nb0 + 128 && n < H; n++) y[n] = fmaf(av, w[n] * s, y[n]);
            }
        }
    }
}

/* stage 2 GPU: bf16: blocks of 16 exact, waves take interleaved 64-chunks of K; fp8: blocks of 128 */
static void s2_gpu(int e, const float *a, const float *aq, const float *as, float *y)
{
    const int nkb = nb(W);
    const float *Wt = W2t + (size_t)e * W * H;
    float *acc = calloc((size_t)4 * H, 4);
    double *tmp = malloc((size_t)H * 8);
    const int B = FP8 ? 128 : MB, CH = FP8 ? 128 : 64;
    for (int j0 = 0; j0 < W; j0 += B) {
        int wave = (j0 / CH) % 4, j1 = j0 + B < W ? j0 + B : W;
        for (int n = 0; n < H; n++) tmp[n] = 0;
        for (int j = j0; j < j1; j++) {
            double av = FP8 ? aq[j] : a[j];
            const float *w = Wt + (size_t)j * H;
            for (int n = 0; n < H; n++) tmp[n] += av * (double)w[n];
        }
        float *ac = acc + (size_t)wave * H;
        if (!FP8)
            for (int n = 0; n < H; n++) ac[n] = rnd((double)ac[n] + tmp[n]);
        else {
            const float *S = S2 + (size_t)e * nb(H) * nkb;
            for (int n = 0; n < H; n++) ac[n] = fmaf((float)tmp[n], as[j0 / 128] * S[(n / 128) * nkb + j0 / 128], ac[n]);
        }
    }
    for (int n = 0; n < H; n++) y[n] = (acc[n] + acc[H + n]) + (acc[2 * H + n] + acc[3 * H + n]);
    free(acc);
    free(tmp);
}

int main(int argc, char **argv)
{
    if (argc < 5) { fprintf(stderr, "usage: emu bf16|fp8 M seeds seed0 [H W E k]\n"); return 2; }
    FP8 = !strcmp(argv[1], "fp8");
    if (getenv("GPU_RZ")) RZ = atoi(getenv("GPU_RZ"));
    if (getenv("GPU_MB")) MB = atoi(getenv("GPU_MB"));
    int M = atoi(argv[2]), S = atoi(argv[3]);
    uint64_t seed0 = strtoull(argv[4], 0, 10);
    if (argc > 8) { H = atoi(argv[5]); W = atoi(argv[6]); E = atoi(argv[7]); K = atoi(argv[8]); }
    make_pool(0x5eedull);
    fprintf(stderr, "pool made\n");
    int nedge = M * K;
    float *x = malloc((size_t)M * H * 4), *xq = malloc((size_t)M * H * 4), *xs = malloc((size_t)M * nb(H) * 4);
    int *ids = malloc(nedge * 4);
    float *tw = malloc(nedge * 4);
    float *yr = malloc((size_t)nedge * H * 4), *yg = malloc((size_t)nedge * H * 4);
    for (int sd = 0; sd < S; sd++) {
        uint64_t st = mix64(seed0 * 1000003ull + sd);
        for (size_t i = 0; i < (size_t)M * H; i++) x[i] = bf16((float)gauss(&st));
        if (FP8)
            for (int t = 0; t < M; t++)
                for (int c0 = 0; c0 < H; c0 += 128) {
                    float amax = 0;
                    for (int c = c0; c < c0 + 128 && c < H; c++) amax = fmaxf(amax, fabsf(x[(size_t)t * H + c]));
                    float s = fmaxf(amax, 1e-4f) / 448.0f;
                    xs[t * nb(H) + c0 / 128] = s;
                    for (int c = c0; c < c0 + 128 && c < H; c++) {
                        size_t i = (size_t)t * H + c;
                        xq[i] = e4m3(x[i] / s);
                        x[i] = xq[i] * s;
                    }
                }
        for (int t = 0; t < M; t++) {
            double sum = 0;
            for (int s = 0; s < K; s++) {
                int e, dup;
                do {
                    e = (int)(unif(&st) * E);
                    dup = 0;
                    for (int q = 0; q < s; q++) dup |= ids[t * K + q] == e;
                } while (dup);
                ids[t * K + s] = e;
                tw[t * K + s] = (float)(0.05 + unif(&st));
                sum += tw[t * K + s];
            }
            for (int s = 0; s < K; s++) tw[t * K + s] = (float)(tw[t * K + s] / sum);
        }
        long nf = 0, nfa = 0, nsc = 0;
        double hd2 = 0, hr2 = 0;
#pragma omp parallel reduction(+ : nf, nfa, nsc, hd2, hr2)
        {
            float *hr = malloc(2 * W * 4), *hg = malloc(2 * W * 4), *ar = malloc(W * 4), *ag = malloc(W * 4);
            float *aqr = malloc(W * 4), *aqg = malloc(W * 4), *asr = malloc(nb(W) * 4), *asg = malloc(nb(W) * 4);
            float *br = malloc(W * 4), *bg = malloc(W * 4);
#pragma omp for schedule(dynamic, 1)
            for (int ed = 0; ed < nedge; ed++) {
                int t = ed / K, e = ids[ed];
                const float *xt = x + (size_t)t * H;
                s1_cpu(e, xt, hr);
                s1_gpu(e, xt, xq + (size_t)t * H, xs + (size_t)t * nb(H), hg);
                for (int r = 0; r < 2 * W; r++) {
                    double d = (double)hr[r] - hg[r];
                    hd2 += d * d, hr2 += (double)hr[r] * hr[r];
                    int bi = (int)(fabs(hr[r]) * 2);
                    if (bi > 9) bi = 9;
#pragma omp atomic
                    hb2[bi] += d * d;
#pragma omp atomic
                    hbn[bi] += 1;
                }
                swiglu(hr, ar, aqr, asr);
                swiglu(hg, ag, aqg, asg);
                for (int j = 0; j < W; j++) {
                    float g1 = hr[j], u1 = hr[W + j], g2 = hg[j], u2 = hg[W + j];
                    br[j] = bf16(g1 / (1.0f + expf(-g1)) * u1);
                    bg[j] = bf16(g2 / (1.0f + expf(-g2)) * u2);
                    nf += br[j] != bg[j];
                    nfa += ar[j] != ag[j];
                }
                if (FP8)
                    for (int b = 0; b < nb(W); b++) nsc += asr[b] != asg[b];
                s2_cpu(e, ar, yr + (size_t)ed * H);
                s2_gpu(e, ag, aqg, asg, yg + (size_t)ed * H);
            }
            free(hr), free(hg), free(ar), free(ag), free(aqr), free(aqg), free(asr), free(asg), free(br), free(bg);
        }
        double sr = 0, sdd = 0, worst = 0;
        for (int t = 0; t < M; t++) {
            double rowd = 0;
            for (int n = 0; n < H; n++) {
                float o1 = 0, o2 = 0;
                for (int s = 0; s < K; s++) {
                    size_t ed = (size_t)t * K + s;
                    o1 += tw[ed] * yr[ed * H + n];
                    o2 += tw[ed] * yg[ed * H + n];
                }
                double d = (double)o2 - o1;
                sr += (double)o1 * o1, rowd += d * d;
            }
            sdd += rowd;
            if (rowd > worst) worst = rowd;
        }
        double rel = sqrt(sdd / sr), wr = sqrt(worst / H) / sqrt(sr / ((double)M * H));
        printf("%d %.6e %.6e %ld %ld %ld %.4e\n", sd, rel, wr, nf, nfa, nsc, sqrt(hd2 / hr2));
        fflush(stdout);
    }
    for (int b = 0; b < 10; b++) fprintf(stderr, "|h| in [%.1f,%.1f): n %.0f  diff rms %.3e\n", b / 2.0, (b + 1) / 2.0, hbn[b], sqrt(hb2[b] / hbn[b]));
    return 0;
}
