#!/usr/bin/env python3
"""Times torch's SDPA decode on the shapes of `tilelab bench decode`, as the kernels' named peer
(issue 19).

paged       K and V pools [pages][16][kv_heads][128] (bf16, or float8_e4m3fn with float32 scales
            per token and KV head) behind a random block table (a permutation of the pages).
            path "sdpa": the keys already contiguous [B][kv_heads][L][128] bf16 (what SDPA reads;
              the GQA query heads of a KV head are folded into the query length, which gives the
              same answer as enable_gqa and lets the fused kernels run); TB/s of the cache bytes;
            path "gather+sdpa": the pages gathered through the block table (fp8: dequantized) into
              that layout, then the same SDPA; TB/s of the same cache bytes.
dual-scope  the latent cache [B][max_len][576] float8_e4m3fn with a float32 scale per position; per
            request the window (last W positions) and k top-k positions (random) gathered,
            dequantized to bf16 and attended by the H query heads (one shared KV head: the heads are
            folded into the query length), q.k over 576 dims, values the first 512.
            path "gather+sdpa", per call in us.
Method: the 256 MB L2 flush before every iteration, CUDA events around the work only; the work
captured once in a CUDA graph and replayed (torch.cuda.CUDAGraph) unless --no-graph; the median of
--iters iterations after --warmup. Prints CSV on stdout:
  name,kind,kv,batch,seq,kv_heads,gqa,heads,topk,path,time_us,tbps,source
"""
import argparse
import datetime
import sys

import torch
import torch.nn.functional as F

from torch_timing import capture, flush_buffer, time_eager

D = 128
QK, DV = 576, 512


def timer(fn, flush, warmup, iters, graph):
    """torch_timing's method on fn, captured as a CUDA graph and replayed when graph is set."""
    return time_eager(capture(fn).replay if graph else fn, flush, warmup, iters)


def paged(dev, batch, seq, kvh, gqa, kv, flush, args, source):
    pages_per = (seq + 15) // 16
    pages = batch * pages_per
    H = kvh * gqa
    q = torch.randn(batch, H, D, device=dev, dtype=torch.bfloat16)
    table = torch.randperm(pages, device=dev).view(batch, pages_per)
    if kv == "fp8":
        kp = (torch.randn(pages, 16, kvh, D, device=dev) * 8).to(torch.float8_e4m3fn)
        vp = (torch.randn(pages, 16, kvh, D, device=dev) * 8).to(torch.float8_e4m3fn)
        ks = torch.rand(pages, 16, kvh, device=dev) / 8
        vs = torch.rand(pages, 16, kvh, device=dev) / 8
    else:
        kp = torch.randn(pages, 16, kvh, D, device=dev, dtype=torch.bfloat16)
        vp = torch.randn(pages, 16, kvh, D, device=dev, dtype=torch.bfloat16)
        ks = vs = None
    ebytes = 1 if kv == "fp8" else 2
    cache_bytes = 2.0 * batch * seq * kvh * D * ebytes + (8.0 * batch * seq * kvh if kv == "fp8" else 0)
    qf = q.view(batch, kvh, gqa, D)  # the gqa heads of a KV head as its query rows

    def gather(pool, sc):
        x = pool[table].reshape(batch, pages_per * 16, kvh, D)[:, :seq]
        if sc is not None:
            x = x.to(torch.bfloat16) * sc[table].reshape(batch, pages_per * 16, kvh, 1)[:, :seq].to(torch.bfloat16)
        return x.transpose(1, 2)  # [B][kvh][L][D]

    rows = []
    # path sdpa: contiguous bf16 keys (for fp8 the same values in bf16: the bandwidth peer reads bf16)
    kc = gather(kp, ks).contiguous()
    vc = gather(vp, vs).contiguous()
    us = timer(lambda: F.scaled_dot_product_attention(qf, kc, vc), flush, args.warmup, args.iters, args.graph)
    bf16_bytes = 2.0 * batch * seq * kvh * D * 2
    rows.append(("sdpa", us, bf16_bytes / (us * 1e6)))
    del kc, vc
    torch.cuda.empty_cache()
    us = timer(lambda: F.scaled_dot_product_attention(qf, gather(kp, ks), gather(vp, vs)), flush, args.warmup,
               args.iters, args.graph)
    rows.append(("gather+sdpa", us, cache_bytes / (us * 1e6)))
    name = f"paged {kv} B={batch} L={seq} kvH={kvh} gqa={gqa}"
    for path, us, tbps in rows:
        print(f"{name},paged,{kv},{batch},{seq},{kvh},{gqa},{H},0,{path},{us:.2f},{tbps:.3f},{source}", flush=True)


def dual(dev, batch, seq, heads, window, topk, flush, args, source):
    lat = (torch.randn(batch, seq, QK, device=dev) * 8).to(torch.float8_e4m3fn)
    sc = torch.rand(batch, seq, device=dev) / 8
    q = torch.randn(batch, 1, heads, QK, device=dev, dtype=torch.bfloat16)  # heads folded into the query rows
    win = torch.arange(seq - window, seq, device=dev).expand(batch, window)
    sel = torch.randint(0, seq, (batch, topk), device=dev)
    idx = torch.cat([win, sel], 1)  # [B][W + k]
    bidx = torch.arange(batch, device=dev)[:, None]

    def call():
        kv = (lat[bidx, idx].to(torch.bfloat16) * sc[bidx, idx][..., None].to(torch.bfloat16))[:, None]  # [B][1][n][576]
        return F.scaled_dot_product_attention(q, kv, kv[..., :DV], scale=QK ** -0.5)

    us = timer(call, flush, args.warmup, args.iters, args.graph)
    n = window + topk
    tbps = batch * n * (QK + 4.0) / (us * 1e6)
    name = f"dual-scope fp8 B={batch} H={heads} W={window} k={topk}"
    print(f"{name},dual-scope,fp8,{batch},{seq},1,{heads},{heads},{topk},gather+sdpa,{us:.2f},{tbps:.3f},{source}",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paged", default="bf16:32:16384:16:1", help="kv:batch:seq:kv_heads:gqa,...")
    ap.add_argument("--dual", default="1:32768:128:128:512", help="batch:seq:heads:window:topk,...")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-graph", dest="graph", action="store_false")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_decode: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    torch.manual_seed(1)
    flush = flush_buffer(dev)
    name = torch.cuda.get_device_name(dev)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    source = f"measured on {name} {date} (torch {torch.__version__})"
    print("name,kind,kv,batch,seq,kv_heads,gqa,heads,topk,path,time_us,tbps,source")
    rc = 0
    for spec in filter(None, args.dual.split(",")):
        b, l, h, w, k = (int(v) for v in spec.split(":"))
        try:
            dual(dev, b, l, h, w, k, flush, args, source)
        except Exception as ex:
            print(f"torch_decode: dual-scope {spec}: {ex}", file=sys.stderr)
            rc = 1
        torch.cuda.empty_cache()
    for spec in filter(None, args.paged.split(",")):
        kv, b, l, h, g = spec.split(":")
        try:
            paged(dev, int(b), int(l), int(h), int(g), kv, flush, args, source)
        except Exception as ex:  # report and go on with the next shape
            print(f"torch_decode: paged {spec}: {ex}", file=sys.stderr)
            rc = 1
        torch.cuda.empty_cache()
    return rc


if __name__ == "__main__":
    sys.exit(main())
