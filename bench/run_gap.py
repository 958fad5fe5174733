"""Where torch.compile(backend="mtsched")'s time per call and `mtsched-opt
--run`'s CUDA-graph time of the same decided graph part (issue 37: within
5%), per gallery layer, on one GPU:

  A  the compiled module's call, cm(*inputs) (Dynamo's guards, the binder,
     the lean runner, the runtime's CUDA graph), as torch_backend_bench.py
     times it (cuda_time_us: each sample behind a call in flight);
  A0 the same with each sample started on an idle GPU (how it was timed
     before 2026-11-29);
  CPU the host's time per call of A and of B;
  B  the lean runner alone on the same tensors (no Dynamo);
  C  the lean runner on --run's kind of inputs (uniform in [-1, 1), what
     --run fills its inputs with) instead of the model's;
  P  with --placements N: the lean runner on N clones of the model's
     inputs (the same values in new allocations);
  D  --run's CUDA-graph time, twice, on its own random inputs;
  E  --run's CUDA-graph time on the model's inputs (--run-inputs:
     the same values as A and B);
  A2 A again, after the --run processes.

A - B is the Python and Dynamo path, B - C what the values cost (the
data-dependent power and clock of the GPU), C - D and B - E what differs
between the two processes with the same values. Writes DIR/run-gap.md.

    python3 bench/run_gap.py --build-dir .device --out DIR [--size decode]
        [LAYER ...]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import torch_backend_bench as tbb  # noqa: E402
from mtsched_torch import collectives, runtime  # noqa: E402
from mtsched_torch.compare import cuda_time_us  # noqa: E402

RUN_RE = re.compile(r"decided graph ([0-9.]+) us as a CUDA graph")
DEFAULT = ["llama3_70b_mlp", "deepseek_moe", "llama3_8b_mlp"]

# The lean runner each Graph hands out, and the tensors of its last call.
RUNNERS = {}


def _capture():
    orig = runtime.Graph.torch_runner

    def torch_runner(self, device_index):
        inner = orig(self, device_index)
        slot = RUNNERS.setdefault(id(self), {"graph": self})
        slot["run"] = inner

        def run(inputs):
            slot["inputs"] = list(inputs)
            return inner(inputs)
        return run
    runtime.Graph.torch_runner = torch_runner


def cpu_us(fn, calls=10):
    """The host's time per call (us) while the GPU queue absorbs the
    calls: what a call costs the CPU, not the GPU."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t0) * 1e6 / calls
    torch.cuda.synchronize()
    return us


def run_us(opt, decided, inputs_dir=None):
    kc = os.path.join(os.path.dirname(decided), "kernels")
    cmd = [opt, "--backend=cuda", "--run", "--quiet", "--run-check=false",
           "--kernel-cache-dir=" + kc, "-o", os.devnull, decided]
    if inputs_dir:
        cmd.insert(3, "--run-inputs=" + inputs_dir)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=240)
    us = [float(m.group(1)) for m in RUN_RE.finditer(p.stdout)]
    if p.returncode != 0 or len(us) != 1:
        return "rc %d: %s" % (p.returncode,
                              (p.stdout.strip().splitlines() or ["-"])[-1])
    return us[0]


def layer_row(a, backend, name):
    model, inputs = tbb.build(name, a.size, a.seed)
    row = {"layer": name + (" (eager first)" if a.eager_first else "")}
    with torch.no_grad(), collectives.mode("local"):
        if a.eager_first:
            # torch_backend_bench.py's order: eager timed, then compiled.
            cuda_time_us(lambda: model(*inputs))
        RUNNERS.clear()
        n0 = len(backend.GRAPHS)
        torch._dynamo.reset()
        cm = torch.compile(model, backend="mtsched", dynamic=False)
        cm(*inputs)
        recs = backend.GRAPHS[n0:]
        if len(recs) != 1 or len(RUNNERS) != 1:
            row["why"] = "%d graphs, %d runners (one of each expected)" % (
                len(recs), len(RUNNERS))
            return row
        slot = next(iter(RUNNERS.values()))
        g, run, real = slot["graph"], slot["run"], slot["inputs"]
        row["A"] = cuda_time_us(lambda: cm(*inputs))
        row["A0"] = cuda_time_us(lambda: cm(*inputs), busy_start=False)
        row["cpuA"] = cpu_us(lambda: cm(*inputs))
        row["B"] = cuda_time_us(lambda: run(real))
        row["cpuB"] = cpu_us(lambda: run(real))
        uni = [torch.empty_like(x).uniform_(-1, 1) if x.is_floating_point()
               else x for x in real]
        row["C"] = cuda_time_us(lambda: run(uni))
        uni = None
        # The same values in new allocations: what the placement of the
        # caller's tensors in GPU memory costs (the runtime binds them in
        # place; a new binding is a new CUDA graph of the same kernels).
        row["P"] = []
        for _ in range(a.placements):
            clones = [x.clone() for x in real]
            row["P"].append(cuda_time_us(lambda: run(clones)))
            clones = None
        opt = os.environ["MTSCHED_OPT"]
        decided = recs[0]["decided_path"]
        d = tempfile.mkdtemp(prefix="run-gap-")
        for t, x in zip(g.inputs, real):
            v = x.float() if x.is_floating_point() else x
            np.save(os.path.join(d, t.name + ".npy"), v.cpu().numpy())
        row["D"] = [run_us(opt, decided) for _ in range(2)]
        row["E"] = [run_us(opt, decided, d)]
        shutil.rmtree(d, ignore_errors=True)
        row["A2"] = cuda_time_us(lambda: cm(*inputs))
        torch._dynamo.reset()
    return row


def fmt(x):
    if isinstance(x, list):
        return " / ".join(fmt(v) for v in x)
    return "%.1f" % x if isinstance(x, float) else str(x)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", required=True)
    p.add_argument("--out", default=os.environ.get("OUT", "run-gap"))
    p.add_argument("--size", default="decode", choices=["decode", "prefill"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eager-first", action="store_true",
                   help="time eager before compiling, as "
                   "torch_backend_bench.py does")
    p.add_argument("--placements", type=int, default=0,
                   help="also time the runner on this many clones of the "
                   "inputs (same values, new allocations)")
    p.add_argument("--repeat", type=int, default=1,
                   help="rows per layer")
    p.add_argument("layers", nargs="*")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    os.environ.setdefault("MTSCHED_TORCH_CACHE",
                          tempfile.mkdtemp(prefix="run-gap-cache-"))
    backend = tbb.setup(a.build_dir)
    _capture()
    lines = ["# backend call against --run, same decided graph (%s, %s)"
             % (a.size, torch.cuda.get_device_name()), "",
             "| layer | A cm() us | A0 idle start us | CPU per call A / B us | B runner us | C runner, uniform inputs "
             "us | P runner on clones us | D --run us (x2) | E --run, model's inputs us | A2 us "
             "| A / D | B / E |", "|---|" + "---|" * 11]
    for name in [n for n in a.layers or DEFAULT for _ in range(a.repeat)]:
        row = layer_row(a, backend, name)
        if "why" in row:
            lines.append("| %s | %s |" % (row["layer"], row["why"]))
        else:
            def ratio(x, ys):
                ys = [y for y in ys if isinstance(y, float)]
                return "%.3fx" % (x / min(ys)) if ys else "-"
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                         "| %s | %s |" % (
                row["layer"], fmt(row["A"]), fmt(row["A0"]),
                fmt([row["cpuA"], row["cpuB"]]), fmt(row["B"]), fmt(row["C"]),
                fmt(row["P"] or "-"), fmt(row["D"]), fmt(row["E"]), fmt(row["A2"]),
                ratio(row["A"], row["D"]), ratio(row["B"], row["E"])))
        print(lines[-1], flush=True)
        with open(os.path.join(a.out, "run-gap.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
