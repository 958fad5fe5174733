# Device time of a PyTorch callable, the way the peer scripts of
# ../shared/peers time it: `loop` calls captured in one CUDA graph, the
# median of `iters` replays divided by `loop`; fn(i) takes the index of the
# input copy to use (rotated so the inputs exceed the L2).
import statistics

import torch


def gtime(fn, copies, iters=20, loop=10):
    for i in range(5): fn(i % copies)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(); s0 = torch.cuda.Stream()
    with torch.cuda.stream(s0):
        with torch.cuda.graph(g, stream=s0):
            for i in range(loop): fn(i % copies)
    torch.cuda.synchronize()
    for _ in range(3): g.replay()
    ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); g.replay(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0 / loop)
    return statistics.median(ts)
