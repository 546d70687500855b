#!/usr/bin/env python3
"""Times torch's grouped GEMM (torch._grouped_mm, bf16) on the fused MoE's shapes, as the baseline
for `tilelab bench moe` (issue 5).

Same shapes and routing as the tilelab bench: DeepSeek-V3.2 (hidden 7168, expert width 2048 / tp,
256 experts, top-8). --routing balanced (default): token t, slot s -> expert (t*k + s) % E, as
contract/worklist.h's TL_ROUTE_BALANCED; --routing random --seed S: the experts tl_route draws for
TL_ROUTE_RANDOM with that seed (k distinct uniform experts a token; core/tl.c's xoshiro256** seeded
by splitmix64, ported below), so that the per-expert row counts equal `tilelab bench moe --routing
random --seed S`'s. Stage 1 = x_sorted (M*k x H) times every routed expert's
W1 (H x 2I) in groups; stage 2 = act (M*k x I) times W2 (I x H). Only the grouped GEMMs are timed
(no SwiGLU, no gather, no combine), which flatters torch.

Method (the seed's): a 256 MB buffer is written before every iteration (L2 flush), 20 warm-up and
200 timed iterations between CUDA events, the median. Prints CSV on stdout:
  name,stage,tokens,time_us,weight_tbps,source
"""
import argparse
import datetime
import statistics
import sys

try:
    import torch
except ImportError:  # --counts-only needs no torch
    torch = None


def balanced_counts(tokens, experts, k):
    counts = [0] * experts
    for i in range(tokens * k):
        counts[i % experts] += 1
    return counts


M64 = (1 << 64) - 1


class TlRng:
    """core/tl.c's tl_rng: xoshiro256** seeded by four splitmix64 draws."""

    def __init__(self, seed):
        self.s = []
        x = seed & M64
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    def u64(self):
        s = self.s
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M64
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            x = self.u64()
            if x < limit:
                return x % n


def random_counts(tokens, experts, k, seed):
    """Rows per expert of contract/worklist.c's route_random (rejection while k <= 16 and 2k <= E,
    else a partial Fisher-Yates shuffle of one permutation carried across tokens)."""
    rng, counts = TlRng(seed), [0] * experts
    shuffle = k > 16 or 2 * k > experts
    perm = list(range(experts))
    for _ in range(tokens):
        row = []
        for s in range(k):
            if shuffle:
                j = s + rng.below(experts - s)
                perm[s], perm[j] = perm[j], perm[s]
                e = perm[s]
            else:
                e = rng.below(experts)
                while e in row:
                    e = rng.below(experts)
            row.append(e)
            counts[e] += 1
    return counts


def time_fn(fn, flush, warmup=20, iters=200):
    for _ in range(warmup):
        fn()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        flush.fill_(i & 0xFF)
        start[i].record()
        fn()
        end[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e3 for s, e in zip(start, end)]
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="1,8,64,256,1024")
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--routing", choices=["balanced", "random"], default="balanced")
    ap.add_argument("--seed", type=int, default=1, help="random routing's seed (tilelab's --seed)")
    ap.add_argument("--counts-only", action="store_true",
                    help="print each M's rows per expert (no GPU needed) and stop")
    args = ap.parse_args()
    H, I, E, k = args.hidden, args.width // args.tp, args.experts, args.topk
    route = (lambda m: balanced_counts(m, E, k)) if args.routing == "balanced" else \
        (lambda m: random_counts(m, E, k, args.seed))
    if args.counts_only:
        for m in [int(t) for t in args.tokens.split(",")]:
            print(m, " ".join(map(str, route(m))))
        return 0
    if torch is None or not torch.cuda.is_available():
        print("torch_grouped_mm: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    # weights of every expert, as _grouped_mm wants them: B is (E, K, N) with K contiguous
    # ("column-major" B), i.e. the transpose of a row-major (E, N, K) tensor
    w1 = (torch.randn(E, 2 * I, H, device=dev, dtype=torch.bfloat16, generator=g) / H ** 0.5).transpose(1, 2)
    w2 = (torch.randn(E, H, I, device=dev, dtype=torch.bfloat16, generator=g) / I ** 0.5).transpose(1, 2)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=dev)
    name = torch.cuda.get_device_name(dev)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    routing = "balanced" if args.routing == "balanced" else f"random seed {args.seed}"
    source = f"measured on {name} {date} (torch {torch.__version__}); routing {routing}"
    print("name,stage,tokens,time_us,weight_tbps,source")
    for m in [int(t) for t in args.tokens.split(",")]:
        counts = route(m)
        offs = torch.tensor(counts, device=dev, dtype=torch.int32).cumsum(0).to(torch.int32)
        rows = m * k
        active = sum(1 for c in counts if c)
        x = torch.randn(rows, H, device=dev, dtype=torch.bfloat16, generator=g)
        a = torch.randn(rows, I, device=dev, dtype=torch.bfloat16, generator=g)
        for stage, (A, B, wbytes) in enumerate([(x, w1, active * 2 * I * H * 2), (a, w2, active * H * I * 2)], 1):
            fn = lambda A=A, B=B: torch._grouped_mm(A, B, offs=offs)
            try:
                us = time_fn(fn, flush, iters=args.iters)
            except Exception as exc:  # report, keep going
                print(f"torch_grouped_mm: stage {stage} M={m}: {exc}", file=sys.stderr)
                continue
            print(f"torch grouped_mm bf16 s{stage} M={m}{'' if args.routing == 'balanced' else ' random'},{stage},{m},{us:.2f},{wbytes / us / 1e6:.3f},{source}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
