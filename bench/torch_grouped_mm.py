#!/usr/bin/env python3
"""Times torch's grouped GEMM (torch._grouped_mm, bf16) on the fused MoE's shapes, as the baseline
for `tilelab bench moe` (issue 5).

Same shapes and routing as the tilelab bench: DeepSeek-V3.2 (hidden 7168, expert width 2048 / tp,
256 experts, top-8), balanced routing (token t, slot s -> expert (t*k + s) % E, as
simulator/worklist.h's TL_ROUTE_BALANCED). Stage 1 = x_sorted (M*k x H) times every routed expert's
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

import torch


def balanced_counts(tokens, experts, k):
    counts = [0] * experts
    for i in range(tokens * k):
        counts[i % experts] += 1
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
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_grouped_mm: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    H, I, E, k = args.hidden, args.width // args.tp, args.experts, args.topk
    g = torch.Generator(device=dev).manual_seed(1)
    # weights of every expert, as _grouped_mm wants them: B is (E, K, N) with K contiguous
    # ("column-major" B), i.e. the transpose of a row-major (E, N, K) tensor
    w1 = (torch.randn(E, 2 * I, H, device=dev, dtype=torch.bfloat16, generator=g) / H ** 0.5).transpose(1, 2)
    w2 = (torch.randn(E, H, I, device=dev, dtype=torch.bfloat16, generator=g) / I ** 0.5).transpose(1, 2)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=dev)
    name = torch.cuda.get_device_name(dev)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    source = f"measured on {name} {date} (torch {torch.__version__})"
    print("name,stage,tokens,time_us,weight_tbps,source")
    for m in [int(t) for t in args.tokens.split(",")]:
        counts = balanced_counts(m, E, k)
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
            print(f"torch grouped_mm bf16 s{stage} M={m},{stage},{m},{us:.2f},{wbytes / us / 1e6:.3f},{source}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
