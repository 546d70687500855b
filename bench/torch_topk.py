#!/usr/bin/env python3
"""Times torch.topk on the shapes of `tilelab bench topk`, as its named peer (issue 17).

Scores: float32 N(0, 1), rows of n, batch B, k; torch.topk(scores, k, dim=1, sorted=False), the
indices and values both produced (torch always returns both). Method (the seed's, as kernels/bench.h):
a 256 MB buffer is written before every iteration (L2 flush), 20 warm-up and 200 timed
iterations between CUDA events, the median; the topk call itself is a captured CUDA graph replayed
each iteration (as the tilelab bench replays its own). Causal prefill rows (--causal B:N:K,...):
row b of B sees N - (B - 1 - b) positions; torch.topk runs over whole rows whose positions past
that are -inf (the mask written before the timing, not timed). Prints CSV on stdout:
  name,batch,n,k,time_us,source
"""
import argparse
import datetime
import sys

import torch

from torch_timing import capture, flush_buffer, time_graph


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="4096,65536,262144,1048576,4194304")
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--k", default="512,2048")
    ap.add_argument("--causal", default="4096:65536:2048,256:262144:2048",
                    help="causal batches B:N:K, comma-separated ('' for none)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_topk: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    flush = flush_buffer(dev)
    name = torch.cuda.get_device_name(dev)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    source = f"measured on {name} {date} (torch {torch.__version__})"
    print("name,batch,n,k,time_us,source")

    def one(x, b, n, k, label):
        try:
            us = time_graph(capture(lambda: torch.topk(x, k, dim=1, sorted=False)), flush)
        except Exception as exc:  # report, keep going
            print(f"torch_topk: B={b} n={n} k={k}{label}: {exc}", file=sys.stderr)
            return
        print(f"torch topk f32 B={b} n={n} k={k}{label},{b},{n},{k},{us:.2f},{source}")
        sys.stdout.flush()

    for n in [int(v) for v in args.n.split(",")]:
        for b in [int(v) for v in args.batch.split(",")]:
            x = torch.randn(b, n, device=dev, dtype=torch.float32, generator=g)
            for k in [int(v) for v in args.k.split(",")]:
                one(x, b, n, k, "")
    for spec in [v for v in args.causal.split(",") if v]:
        b, n, k = (int(t) for t in spec.split(":"))
        x = torch.randn(b, n, device=dev, dtype=torch.float32, generator=g)
        lens = n - (b - 1 - torch.arange(b, device=dev))
        x.masked_fill_(torch.arange(n, device=dev)[None, :] >= lens[:, None], float("-inf"))
        one(x, b, n, k, " causal")
        del x
    return 0


if __name__ == "__main__":
    sys.exit(main())
