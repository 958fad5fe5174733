#!/usr/bin/env python3
"""Does a GPU left idle time a short kernel slower? (issue 16's decisions)

The autotuner times each choice for a few milliseconds, and some choices
follow a long host-only pause (cuBLAS's first call, a node's fp64
reference, NVRTC). If the GPU lowers its clocks while idle, the first
milliseconds after a pause run slower, and a choice timed there loses.

For each pause, this sleeps that long, then times the same CUDA graph
(PER launches of a 16 x 4096 x 2048 bf16 GEMM, as the autotuner replays
one) SAMPLES times back to back: the first sample starts right after the
pause. Printed per pause: the first sample, the median of the first five
and of all samples, in microseconds per GEMM. Run one process per GPU
(--device) at once, as MPI ranks run.

  python3 bench/idle-probe.py --device 0 & python3 bench/idle-probe.py --device 1
"""
import argparse
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--device", type=int, default=0)
p.add_argument("--pauses-ms", default="0,10,30,100,300,1000")
p.add_argument("--repeats", type=int, default=8)
p.add_argument("--samples", type=int, default=20)
p.add_argument("--per", type=int, default=50)
a = p.parse_args()
torch.cuda.set_device(a.device)
A = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
B = torch.randn(4096, 2048, device="cuda", dtype=torch.bfloat16)
C = torch.empty(16, 2048, device="cuda", dtype=torch.bfloat16)
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    for _ in range(3):
        torch.mm(A, B, out=C)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=s):
    for _ in range(a.per):
        torch.mm(A, B, out=C)
torch.cuda.synchronize()
ev = [torch.cuda.Event(enable_timing=True) for _ in range(2 * a.samples)]


def burst():
    for i in range(a.samples):
        ev[2 * i].record()
        g.replay()
        ev[2 * i + 1].record()
    torch.cuda.synchronize()
    return [ev[2 * i].elapsed_time(ev[2 * i + 1]) * 1000 / a.per
            for i in range(a.samples)]


for _ in range(20):  # warm: clocks up
    burst()
print(f"device {a.device}: {torch.cuda.get_device_name(a.device)}")
print("pause_ms first_us first5_median_us median_us max_first_us")
for pause in [int(x) for x in a.pauses_ms.split(",")]:
    firsts, f5, meds = [], [], []
    for _ in range(a.repeats):
        burst()  # busy before the pause, as after a previous choice
        time.sleep(pause / 1000)
        t = burst()
        firsts.append(t[0])
        f5.append(statistics.median(t[:5]))
        meds.append(statistics.median(t))
    print(f"{pause} {statistics.median(firsts):.2f} {statistics.median(f5):.2f} "
          f"{statistics.median(meds):.2f} {max(firsts):.2f}", flush=True)
