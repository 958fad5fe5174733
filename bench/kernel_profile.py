"""Where a gallery layer's time goes, kernel by kernel, in PyTorch eager and
under torch.compile(mode="max-autotune") (PyTorch 2.x, one GPU): each
kernel's device time per call from torch.profiler, the layer at world size
1, as bench/torch_backend_bench.py builds it.

    python3 bench/kernel_profile.py --layers llama3_70b_mlp deepseek_moe \
        --size decode --out DIR

Writes DIR/kernel-profile.md (one table per layer and mode: kernel, calls
per step, us per step) and prints it. A diagnosis aid: the ratio claims
come from torch_backend_bench.py.
"""

import argparse
import collections
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_backend_bench as tbb  # noqa: E402
from mtsched_torch import collectives  # noqa: E402


def _device_events(fn, steps):
    """The device events of steps back-to-back calls of fn (after 5)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    return [e for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA]


def profile(fn, steps):
    """{kernel name: (calls per step, us per step)} over steps calls."""
    agg = collections.defaultdict(lambda: [0, 0.0])
    for e in _device_events(fn, steps):
        a = agg[e.name]
        a[0] += 1
        a[1] += e.device_time_total if hasattr(e, "device_time_total") \
            else e.cuda_time_total
    return {k: (v[0] / steps, v[1] / steps) for k, v in agg.items()}


def busy(fn, steps):
    """(us the GPU ran something, us from the first event's start to the
    last one's end) per call, over steps back-to-back calls: where the
    second exceeds the first the GPU waited between kernels (for the host,
    or a call that blocks it)."""
    spans = sorted((e.time_range.start, e.time_range.end)
                   for e in _device_events(fn, steps))
    if not spans:
        return 0.0, 0.0
    covered, end = 0.0, spans[0][0]
    for s, t in spans:
        if t > end:
            covered += t - max(s, end)
            end = t
    return covered / steps, (end - spans[0][0]) / steps


def table(title, prof):
    lines = ["### " + title, "", "| kernel | calls | us |", "|---|---:|---:|"]
    total = 0.0
    for k, (n, us) in sorted(prof.items(), key=lambda kv: -kv[1][1]):
        total += us
        lines.append("| %s | %.0f | %.1f |" % (k[:110].replace("|", "/"),
                                               n, us))
    lines.append("| **sum of kernels** | | **%.1f** |" % total)
    return lines + [""]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", nargs="+", required=True)
    p.add_argument("--size", choices=["decode", "prefill"], default="decode")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    lines = ["# Kernels per step, %s (%s, PyTorch %s)" % (
        a.size, torch.cuda.get_device_name(), torch.__version__), ""]
    for name in a.layers:
        model, inputs = tbb.build(name, a.size, a.seed)
        with torch.no_grad(), collectives.mode("local"):
            lines += table("%s eager" % name,
                           profile(lambda: model(*inputs), a.steps))
            torch._dynamo.reset()
            cm = torch.compile(model, mode="max-autotune", dynamic=False)
            cm(*inputs)
            lines += table("%s max-autotune" % name,
                           profile(lambda: cm(*inputs), a.steps))
            cm = None
            torch._dynamo.reset()
        model = inputs = None
        torch.cuda.empty_cache()
        with open(os.path.join(a.out, "kernel-profile.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
