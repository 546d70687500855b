"""The timing method the torch peers of `tilelab bench` share (kernels/bench.h's, the seed's): a
captured CUDA graph of the call, 20 warm-up replays, then 200 timed ones, each after a 256 MB buffer
is written (L2 flush) and between CUDA events around the replay alone; the median in microseconds.
time_eager is the same method for a call that cannot be captured or takes seconds (fewer
iterations, no graph: its launches are timed too).
"""
import statistics

import torch


def flush_buffer(dev):
    """The 256 MB buffer whose write flushes the L2 before every timed iteration."""
    return torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=dev)


def capture(fn):
    """fn as a CUDA graph: three calls on a side stream first (allocations, lazy init), then the capture."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def time_graph(graph, flush, warmup=20, iters=200):
    """The median microseconds of one replay of graph, the L2 flushed before each."""
    for _ in range(warmup):
        graph.replay()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        flush.fill_(i & 0xFF)
        start[i].record()
        graph.replay()
        end[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(start, end))


def time_eager(fn, flush, warmup=2, iters=5):
    """The median microseconds of fn() called eagerly, the L2 flushed before each call."""
    for _ in range(warmup):
        fn()
    times = []
    for i in range(iters):
        flush.fill_(i & 0xFF)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)
