"""The dense-GEMM peer of `tilelab sim step` (simulator/gemm.h): each line of standard input is a
call of the step's calls table, "NAME<TAB>gemm m=M n=N k=K batch=B dtype=bf16|fp8"; each is timed
with the seed's method (bench/torch_timing.py: a CUDA graph, the L2 flushed, 20 + 200 replays, the
median), bf16 as torch.matmul (batch > 1: torch.bmm over B independent GEMMs), fp8 as
torch._scaled_mm on E4M3 operands with float32 row / column scales (the step's weights are 128 x
128 block-scaled: the bytes differ by the scales only). torch._scaled_mm wants M a multiple of 16:
M is rounded up to it (the tile the model pads to) and said so. Prints CSV:
name,m,n,k,batch,dtype,m_run,time_us,tflops,source."""
import sys

import torch

from torch_timing import capture, flush_buffer, time_graph


def parse(line):
    name, spec = line.rstrip("\n").split("\t")
    f = dict(kv.split("=") for kv in spec.split()[1:])
    return name, int(f["m"]), int(f["n"]), int(f["k"]), int(f["batch"]), f["dtype"]


def gemm_fn(m, n, k, batch, dtype, dev):
    if dtype == "bf16":
        if batch > 1:
            a = torch.randn(batch, m, k, device=dev, dtype=torch.bfloat16)
            b = torch.randn(batch, k, n, device=dev, dtype=torch.bfloat16)
            return m, lambda: torch.bmm(a, b)
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        return m, lambda: torch.matmul(a, b)
    m_run = (m + 15) // 16 * 16
    a = torch.randn(m_run, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
    sa = torch.ones(m_run, 1, device=dev, dtype=torch.float32)
    sb = torch.ones(1, n, device=dev, dtype=torch.float32)
    if batch > 1:
        raise ValueError("batched fp8 GEMM: the step charges its per-head products in bf16")
    return m_run, lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def main():
    dev = torch.device("cuda")
    flush = flush_buffer(dev)
    src = "measured on %s, torch %s" % (torch.cuda.get_device_name(dev), torch.__version__)
    print("name,m,n,k,batch,dtype,m_run,time_us,tflops,source")
    for line in sys.stdin:
        if not line.strip():
            continue
        name, m, n, k, batch, dtype = parse(line)
        m_run, fn = gemm_fn(m, n, k, batch, dtype, dev)
        us = time_graph(capture(fn), flush)
        tflops = 2.0 * batch * m * n * k / (us * 1e6)
        print('"%s",%d,%d,%d,%d,%s,%d,%.3f,%.2f,%s' % (name, m, n, k, batch, dtype, m_run, us, tflops, src), flush=True)


if __name__ == "__main__":
    main()
