"""Where a gallery MLP's prefill time goes, kernel by kernel, beside its
peers in one process on one GPU: torch's cuBLAS for each GEMM shape alone
(sustained: torch_backend_bench's cuda_time_us, samples of at least 10
back-to-back calls; burst: one call after the GPU idled), then the layer
under torch.compile(mode="max-autotune") and under
torch.compile(backend="mtsched") in each --swiglu-form given, each layer
timed by cuda_time_us and its kernels by torch.profiler (device time per
call).

    python3 bench/mlp_breakdown.py --build-dir .device --out DIR \\
        [--layer llama3_70b_mlp] [--forms measured merged] [--aten-only]

--aten-only restricts Inductor's GEMM autotuning to ATen (cuBLAS), which
full max-autotune chose for every GEMM of the Llama-3-70B MLP on an H200
(2026-11-29), to fit a short device call. Writes DIR/breakdown.md and
prints it. A diagnosis aid; the ratio claims come from
torch_backend_bench.py.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_backend_bench as tbb  # noqa: E402
import kernel_profile  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from mtsched_torch import collectives  # noqa: E402


def burst_us(fn, samples=7, idle_s=0.05):
    """Median time of one call of fn after the GPU idled idle_s."""
    fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), \
        torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        time.sleep(idle_s)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1000.0)
    return sorted(times)[len(times) // 2]


def gemm_rows(model, x):
    """cuBLAS (torch) at each GEMM of the MLP: sustained and burst us."""
    mlp = model.mlp
    wg, wu, wd = (mlp.gate_proj.weight, mlp.up_proj.weight,
                  mlp.down_proj.weight)
    h = model.norm(x)
    a = F.silu(F.linear(h, wg)) * F.linear(h, wu)
    m, k = h.shape
    n = wg.shape[0]
    cases = [
        ("gate/up mm %dx%dx%d" % (m, k, n), lambda: F.linear(h, wg)),
        ("down mm %dx%dx%d" % (m, n, k), lambda: F.linear(a, wd)),
        ("down addmm (+ residual) %dx%dx%d" % (m, n, k),
         lambda: torch.addmm(x, a, wd.t())),
        ("silu(g) * u (eager, 3 kernels)",
         lambda: F.silu(F.linear(h, wg)) * F.linear(h, wu)),
    ]
    lines = ["### torch cuBLAS per GEMM shape (us)", "",
             "| case | sustained | burst |", "|---|---:|---:|"]
    for name, fn in cases:
        lines.append("| %s | %.1f | %.1f |" % (
            name, tbb.cuda_time_us(fn), burst_us(fn)))
    return lines + [""]


def layer_rows(title, cm, inputs, steps):
    """cm's sustained time per call and its kernels."""
    us = tbb.cuda_time_us(lambda: cm(*inputs))
    prof = kernel_profile.profile(lambda: cm(*inputs), steps)
    return ["%s: **%.1f us** a call (cuda_time_us)" % (title, us), ""] + \
        kernel_profile.table(title, prof), us


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.path.join(tbb.ROOT, "build"))
    p.add_argument("--layer", default="llama3_70b_mlp")
    p.add_argument("--forms", nargs="*", default=["measured", "merged"])
    p.add_argument("--aten-only", action="store_true")
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    backend = tbb.setup(a.build_dir)
    model, inputs = tbb.build(a.layer, "prefill", 0)
    lines = ["# %s at prefill, one GPU (%s, PyTorch %s)" % (
        a.layer, torch.cuda.get_device_name(), torch.__version__), ""]
    totals = []

    def save():
        with open(os.path.join(a.out, "breakdown.md"), "w") as f:
            f.write("\n".join(lines) + "\n")

    with torch.no_grad(), collectives.mode("local"):
        ref = model(*inputs)
        lines += gemm_rows(model, inputs[0])
        save()
        for form in a.forms:
            os.environ["MTSCHED_TORCH_OPT_ARGS"] = \
                "" if form == "measured" else "--swiglu-form=" + form
            torch._dynamo.reset()
            t0 = time.time()
            cm = torch.compile(model, backend="mtsched", dynamic=False)
            out = cm(*inputs)
            torch.cuda.synchronize()
            err = tbb.worst_error(out, ref)
            title = "mtsched --swiglu-form=%s (first call %.1f s, error " \
                "to eager %.1e, %d graph(s) eager)" % (
                    form, time.time() - t0, err, len(backend.STATS["eager"]))
            rows, us = layer_rows(title, cm, inputs, a.steps)
            lines += rows
            totals.append(("mtsched " + form, us))
            save()
            cm = None
        os.environ.pop("MTSCHED_TORCH_OPT_ARGS", None)
        if not a.no_inductor:
            torch._dynamo.reset()
            if a.aten_only:
                import torch._inductor.config as icfg
                icfg.max_autotune_gemm_backends = "ATEN"
            t0 = time.time()
            cm = torch.compile(model, mode="max-autotune", dynamic=False)
            out = cm(*inputs)
            torch.cuda.synchronize()
            title = "max-autotune%s (first call %.1f s, error to eager " \
                "%.1e)" % (" (GEMMs: ATen only)" if a.aten_only else "",
                           time.time() - t0, tbb.worst_error(out, ref))
            rows, us = layer_rows(title, cm, inputs, a.steps)
            lines += rows
            totals.append(("max-autotune", us))
            cm = None
    lines += ["### totals (us a call, sustained)", ""]
    lines += ["| %s | %.1f |" % t for t in totals]
    save()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
