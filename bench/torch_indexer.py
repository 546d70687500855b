#!/usr/bin/env python3
"""Times the torch formulation of the DSA lightning indexer on the shapes of `tilelab bench indexer`,
as its named peer (issue 18).

The formulation (what a model's reference code does): S = Q K^T by torch._scaled_mm on the E4M3
codes (unit scales, bfloat16 out; a bf16 matmul where _scaled_mm is refused), times k_scale, relu,
times w, summed over the heads, -inf outside the causal window (start 0, end = prefix + i + 1,
prefix = kv - rows); rows taken in chunks so that S stays within about 4 GiB. TFLOP/s counts only
in-window work (2 D H per in-window score), as tilelab's bench does. Method: torch_timing's
time_eager (the 256 MB L2 flush before every iteration, CUDA events, the median; 2 warm-up and 5
timed iterations: a 64K square takes seconds). Prints CSV on stdout:
  name,rows,kv,heads,path,time_us,tflops,source
"""
import argparse
import datetime
import sys

import torch

from torch_timing import flush_buffer, time_eager

D = 128


def indexer(q, k, ks, w, prefix, use_scaled, chunk):
    rows, heads, _ = q.shape
    kv = k.shape[0]
    out = torch.empty(rows, kv, dtype=torch.float32, device=q.device)
    pos = torch.arange(kv, device=q.device)
    one = torch.ones((), dtype=torch.float32, device=q.device)
    kt = k.t()
    for r0 in range(0, rows, chunk):
        r1 = min(rows, r0 + chunk)
        a = q[r0:r1].reshape(-1, D)
        if use_scaled:
            s = torch._scaled_mm(a, kt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            s = a.to(torch.bfloat16) @ kt.to(torch.bfloat16)
        s = torch.relu(s.view(r1 - r0, heads, kv).float() * ks)
        logits = (s * w[r0:r1, :, None]).sum(1)
        end = prefix + torch.arange(r0, r1, device=q.device) + 1
        out[r0:r1] = logits.masked_fill(pos[None, :] >= end[:, None], float("-inf"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="4096:4096,2048:65536", help="rows:kv,...")
    ap.add_argument("--heads", default="32,64")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_indexer: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    torch.manual_seed(1)
    flush = flush_buffer(dev)
    name = torch.cuda.get_device_name(dev)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    source = f"measured on {name} {date} (torch {torch.__version__})"
    print("name,rows,kv,heads,path,time_us,tflops,source")
    for h in [int(v) for v in args.heads.split(",")]:
        for shape in args.shapes.split(","):
            rows, kv = (int(v) for v in shape.split(":"))
            prefix = kv - rows
            q = (torch.randn(rows, h, D, device=dev) * 50).to(torch.float8_e4m3fn)
            k = (torch.randn(kv, D, device=dev) * 50).to(torch.float8_e4m3fn)
            ks = torch.rand(kv, device=dev) / 100
            w = torch.randn(rows, h, device=dev) / 100
            chunk = max(1, (4 << 30) // (h * kv * 6))  # S in bf16 and float32
            use_scaled = True
            try:
                indexer(q[:1], k, ks, w[:1], prefix, True, 1)
            except Exception as ex:  # older torch or an unsupported layout: the bf16 matmul
                print(f"torch_indexer: _scaled_mm refused ({ex}); bf16 matmul instead", file=sys.stderr)
                use_scaled = False
            us = time_eager(lambda: indexer(q, k, ks, w, prefix, use_scaled, chunk), flush)
            scores = rows * prefix + rows * (rows + 1) / 2
            tflops = 2.0 * D * h * scores / (us * 1e6)
            path = "scaled_mm_fp8" if use_scaled else "bf16_matmul"
            print(f"torch indexer {rows}x{kv} H={h},{rows},{kv},{h},{path},{us:.1f},{tflops:.2f},{source}", flush=True)
            del q, k, ks, w
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
