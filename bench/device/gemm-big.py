#!/usr/bin/env python3
"""The Llama-3-70B MLP's prefill GEMMs under sustained load: cuBLAS as
PyTorch calls it against mtsched's GEMM choices (bench/device/gemm-big.sh,
issue 35).

  gemm-big.py OUT.json [--seconds S] [--mtsched BUILD_DIR TILE.json CUBLAS.json]

At M = 2048 for (N, K) = (28672, 8192) (gate/up) and (8192, 28672) (down),
bf16, times in one process
  * tn: torch.matmul(x, W.t()) with W [N, K] as nn.Linear stores it (cuBLAS
    gets the weight transposed: max-autotune's ATen GEMMs, TNT kernels);
  * nn: torch.matmul(x, Wt) with Wt = W.t().contiguous(), [K, N] (the
    layout mtsched's IR holds a pre-transposed weight in, and the one its
    extern.cublas is given: NNT);
and with --mtsched, the same nn.Linear through torch.compile(backend=
"mtsched") with mtsched-opt's choices forced by a choices file
(MTSCHED_TORCH_OPT_ARGS): TILE.json offers one wgmma tile and no extern
(mtsched tile), CUBLAS.json no tile (mtsched cublas). Each variant is first
checked on 64 rows against fp64 (worst error relative to the largest
reference value; mtsched's benchmarker also checked its choice against
fp64 before timing it). Timing: sustained samples, interleaved (each round
one sample of every variant, the order rotating, so that a clock drifting
under load moves them together); a sample is as many back-to-back calls as
cover about 10 ms, timed with CUDA events. Per variant: the median, min and
max of the rounds, the median of the first 3 rounds (the GPU's clocks
still boosted, after compiling) and of the last half (sustained), and the
median of the rounds' ratios to tn; the kernels each launches
(torch.profiler, one call).
"""
import json
import os
import re
import statistics
import sys
import time

import torch

SHAPES = [("gate_up", 2048, 28672, 8192), ("down", 2048, 8192, 28672)]
KEPT = []  # the backend's decided graphs stay referenced (see mlp_breakdown)


def check(fn, x, w_nk):
    """Worst |out - ref| / max|ref| on the first 64 rows, ref in fp64."""
    out = fn()[:64].double()
    ref = x[:64].double() @ w_nk.double().t()
    return float((out - ref).abs().max() / ref.abs().max())


def kernel_of(fn):
    try:
        with torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            fn()
            torch.cuda.synchronize()
        names = [e.key for e in p.key_averages()
                 if str(e.device_type).endswith("CUDA")]
    except Exception as e:  # the timing matters more than the names
        return ["(profiler failed: %s)" % str(e)[:80]]
    return [n[:90] for n in names if not n.startswith("Memset")]


def sample(fn, calls):
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1000.0 / calls


def mtsched_linear(backend, w, x, choices):
    """x -> nn.Linear(w) through torch.compile(backend="mtsched") with the
    choices file given; (callable, what mtsched-opt decided)."""
    os.environ["MTSCHED_TORCH_OPT_ARGS"] = "--choices-file=" + choices
    KEPT.extend(backend._GRAPHS.values())
    backend._GRAPHS.clear()
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False,
                          device=w.device, dtype=w.dtype)
    lin.weight = torch.nn.Parameter(w, requires_grad=False)
    # A function of its own: Dynamo keeps compiled code per code object.
    scope = {"lin": lin}
    exec("def call(x):\n    return lin(x)\n", scope)
    cm = torch.compile(scope["call"], backend="mtsched", dynamic=False)
    cm(x)
    torch.cuda.synchronize()
    os.environ.pop("MTSCHED_TORCH_OPT_ARGS", None)
    rec = backend.GRAPHS[-1]
    with open(rec["decided_path"]) as f:
        text = f.read()
    return (lambda: cm(x)), sorted(set(re.findall(r" decided ([\w.]+)",
                                                   text)))


def timed(fns, seconds, calls):
    names = list(fns)
    times = {v: [] for v in names}
    for fn in fns.values():  # warm the clocks, caches and heuristics
        sample(fn, 2)
    t_end = time.time() + seconds
    r = 0
    while time.time() < t_end or r < 6:
        for i in range(len(names)):
            v = names[(r + i) % len(names)]
            times[v].append(sample(fns[v], calls))
        r += 1
    return times, r


def summary(times):
    base = times["tn"]
    out = {}
    for v, ts in times.items():
        half = len(ts) // 2
        out[v] = {
            "median_us": statistics.median(ts), "min_us": min(ts),
            "max_us": max(ts), "first3_us": statistics.median(ts[:3]),
            "sustained_us": statistics.median(ts[half:]),
            "over_tn": statistics.median(a / b for a, b in zip(ts, base)),
            "over_tn_sustained": statistics.median(
                a / b for a, b in zip(ts[half:], base[half:]))}
    return out


def main():
    out_path = sys.argv[1]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) \
        if "--seconds" in sys.argv else 12.0
    backend = None
    if "--mtsched" in sys.argv:
        i = sys.argv.index("--mtsched")
        build_dir, tile_json, cublas_json = sys.argv[i + 1:i + 4]
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.dirname(here))
        import torch_backend_bench as tbb
        backend = tbb.setup(build_dir)
    torch.manual_seed(0)
    bf = dict(dtype=torch.bfloat16, device="cuda")
    res = {"device": torch.cuda.get_device_name(0),
           "torch": torch.__version__}
    for name, M, N, K in SHAPES:
        x = torch.randn(M, K, **bf)
        w = torch.randn(N, K, **bf) / K ** 0.5
        wt = w.t().contiguous()
        y = torch.empty(M, N, **bf)
        fns = {"tn": lambda: torch.matmul(x, w.t(), out=y),
               "nn": lambda: torch.matmul(x, wt, out=y)}
        r = {}
        with torch.no_grad():
            if backend is not None:
                t0 = time.time()
                for label, path in (("mtsched tile", tile_json),
                                    ("mtsched cublas", cublas_json)):
                    fns[label], decided = mtsched_linear(backend, w, x, path)
                    r[label] = {"decided": decided}
                r["compile_s"] = time.time() - t0
            for v, fn in fns.items():
                r.setdefault(v, {}).update(err=check(fn, x, w),
                                           kernels=kernel_of(fn))
            calls = max(1, int(10000 / (2 * M * N * K / 700e6)))  # ~10 ms
            times, rounds = timed(fns, seconds / len(SHAPES), calls)
        for v, s in summary(times).items():
            r[v].update(s)
        r["rounds"] = rounds
        r["calls_per_sample"] = calls
        res[name] = r
        print("%s M=%d N=%d K=%d: %d rounds x %d calls" %
              (name, M, N, K, rounds, calls))
        for v in fns:
            q = r[v]
            print("  %-14s median %.1f us (min %.1f, max %.1f; first 3 "
                  "rounds %.1f, last half %.1f); / tn %.4f (last half "
                  "%.4f); err %.2e; %s%s" %
                  (v, q["median_us"], q["min_us"], q["max_us"],
                   q["first3_us"], q["sustained_us"], q["over_tn"],
                   q["over_tn_sustained"], q["err"], q["kernels"],
                   " decided %s" % q["decided"] if "decided" in q else ""),
                  flush=True)
        del x, w, wt, y, fns
        torch.cuda.empty_cache()
    json.dump(res, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
