#!/usr/bin/env python3
"""Times torch's SDPA (bf16, causal) on the shapes of `tilelab bench prefill`, the prefill kernel's
named peer (issue 21).

Q [1][H][seq][dqk], K [1][Hkv][seq][dqk], V [1][Hkv][seq][dv] bf16 ~ N(0, 1); GQA through
enable_gqa (or, on a torch without it, K and V repeated to H heads before the timing); dqk may
differ from dv (deepseek-v2-lite 192/128). TFLOP/s of the causal FLOPs, as tilelab counts them:
2 (dqk + dv) H seq (seq + 1) / 2. Method: bench/torch_timing.py (graph replay, 256 MB L2 flush,
20 warm-up, 200 timed, median). Prints CSV on stdout:
  name,shape,seq,heads,kv_heads,dqk,dv,backend,time_us,tflops,source
--shapes: comma-separated NAME:H:HKV:DQK:DV:SEQ items.
"""
import argparse
import datetime
import sys

import torch
import torch.nn.functional as F

from torch_timing import capture, flush_buffer, time_graph


def one(dev, name, H, hkv, dqk, dv, seq, flush, source):
    q = torch.randn(1, H, seq, dqk, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, hkv, seq, dqk, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, hkv, seq, dv, device=dev, dtype=torch.bfloat16)
    backend = "sdpa enable_gqa"
    try:
        F.scaled_dot_product_attention(q[:, :, :16], k[:, :, :16], v[:, :, :16], is_causal=True, enable_gqa=hkv != H)

        def fn():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hkv != H)
    except TypeError:
        backend = "sdpa repeated kv"
        k = k.repeat_interleave(H // hkv, dim=1)
        v = v.repeat_interleave(H // hkv, dim=1)

        def fn():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    us = time_graph(capture(fn), flush)
    flops = 2.0 * (dqk + dv) * H * seq * (seq + 1) / 2
    print(f"{name} seq={seq},{name},{seq},{H},{hkv},{dqk},{dv},{backend},{us:.2f},{flops / us / 1e6:.1f},{source}",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", required=True)
    a = ap.parse_args()
    dev = torch.device("cuda")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    source = f"measured on {torch.cuda.get_device_name(dev)} {when} torch {torch.__version__}"
    flush = flush_buffer(dev)
    print("name,shape,seq,heads,kv_heads,dqk,dv,backend,time_us,tflops,source")
    for item in a.shapes.split(","):
        name, H, hkv, dqk, dv, seq = item.split(":")
        try:
            one(dev, name, int(H), int(hkv), int(dqk), int(dv), int(seq), flush, source)
        except Exception as e:  # one shape's failure (memory, backend) must not lose the others
            print(f"torch_prefill: {item}: {e}", file=sys.stderr)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
