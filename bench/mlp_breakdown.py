"""Where a gallery layer's time goes (prefill, or decode with --size),
kernel by kernel, beside max-autotune in one process on one GPU: the
layer through
torch.compile(backend="mtsched") in each --swiglu-form given and through
torch.compile(mode="max-autotune"), timed interleaved (each round one
sample of each, in turn, so that the GPU's clock drifting under sustained
load shifts every one alike; the ratio to max-autotune is taken per round),
then each profiled kernel by kernel (torch.profiler, device time per call),
and what mtsched-opt measured for the layer's GEMM and SwiGLU nodes (its
report).

    python3 bench/mlp_breakdown.py --build-dir .device --out DIR \\
        [--layers llama3_70b_mlp ...] [--forms measured merged split] \\
        [--aten-only] [--size prefill|decode]

A form "args:FLAGS" compiles with those mtsched-opt flags instead of a
--swiglu-form (e.g. "args:--bench-sample-us=20000"); "args:@FILE" with the
flags FILE holds (several, as the form list is split at spaces).

--aten-only restricts Inductor's GEMM autotuning to ATen (cuBLAS), which
full max-autotune chose for every GEMM of the Llama-3 MLPs on an H200
(2026-11-29), to fit a short device call. Writes DIR/breakdown.md and
prints it. A diagnosis aid; the gallery's ratios come from
torch_backend_bench.py.
"""

import argparse
import collections
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_backend_bench as tbb  # noqa: E402
import kernel_profile  # noqa: E402
import torch  # noqa: E402
from mtsched_torch import collectives  # noqa: E402


def sample_us(fn, calls):
    """One sample: calls back-to-back calls of fn, started behind one in
    flight (as cuda_time_us), in us a call."""
    e0, e1 = torch.cuda.Event(enable_timing=True), \
        torch.cuda.Event(enable_timing=True)
    fn()
    e0.record()
    for _ in range(calls):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1000.0 / calls


def interleaved(variants, rounds, calls):
    """{name: [us per round]}: each round one sample of every variant, the
    order rotating from round to round."""
    names = list(variants)
    for n in names:
        sample_us(variants[n], 2)
    out = {n: [] for n in names}
    for r in range(rounds):
        for i in range(len(names)):
            n = names[(r + i) % len(names)]
            out[n].append(sample_us(variants[n], calls))
    return out


def sustained_profile(calls, rounds, n):
    """Each variant's kernels under sustained load: rounds x (a sample of n
    calls of every variant, the order rotating, each sample profiled), the
    kernels' us a call summed over the rounds. The short profiles above
    run one variant after the other (the second on a hotter GPU); these
    samples alternate as the interleaved timing does."""
    names = list(calls)
    acc = {k: collections.defaultdict(lambda: [0.0, 0.0]) for k in names}
    for r in range(rounds):
        for i in range(len(names)):
            k = names[(r + i) % len(names)]
            for kern, (c, us) in kernel_profile.profile(calls[k], n).items():
                acc[k][kern][0] += c / rounds
                acc[k][kern][1] += us / rounds
    lines = []
    for k in names:
        lines += kernel_profile.table(
            "%s kernels, sustained (%d rounds of %d calls, interleaved)" % (
                k, rounds, n), {x: tuple(v) for x, v in acc[k].items()})
    return lines


def report_lines(backend, rec):
    """What mtsched-opt measured for rec's graph: each GEMM and SwiGLU
    node's measured choices (ms) and the one it kept."""
    path = backend._report_path(os.path.basename(
        rec["decided_path"]).split(".")[0])
    try:
        with open(path) as f:
            r = json.load(f)
    except OSError:
        return ["(no report at %s)" % path]
    lines = []
    for n in r.get("nodes", []):
        if n.get("op") not in ("matmul", "swiglu"):
            continue
        ok = sorted((c for c in n.get("choices", []) if c.get("status") ==
                     "ok"), key=lambda c: c.get("ms") or 1e9)
        skipped = sum(1 for c in n.get("choices", [])
                      if c.get("status") == "skipped")
        lines.append("* %s (%s) kept %s; measured: %s; %d pruned" % (
            n["name"], n["op"], n.get("chosen"), ", ".join(
                "%s %.1f%s" % (c["name"], c["ms"] * 1e3,
                               " (fused %.1f)" % (c["fused_ms"] * 1e3)
                               if c.get("fused_ms") else "")
                for c in ok), skipped))
    return lines


# The backend's decided graphs taken out of its per-process table, still
# referenced by compiled code: kept alive until the process ends.
KEPT = []


def own_frame(model):
    """A function calling model with a code object of its own: Dynamo keeps
    compiled code per code object, so each such function keeps its own
    compilation (torch.compile of the module itself would share one entry
    among the forms, or lose it to torch._dynamo.reset())."""
    scope = {"model": model}
    exec("def call(*args):\n    return model(*args)\n", scope)
    return scope["call"]


def form_args(text):
    """A form's mtsched-opt flags: text, or FILE's contents for "@FILE"."""
    if not text.startswith("@"):
        return text
    with open(text[1:]) as f:
        return " ".join(f.read().split())


def compile_forms(backend, model, inputs, ref, forms):
    """{label: compiled callable} per --swiglu-form, and text about each."""
    out, lines = {}, []
    for form in forms:
        # "args:FLAGS" compiles with mtsched-opt FLAGS instead of a
        # --swiglu-form (e.g. "args:--bench-sample-us=20000").
        os.environ["MTSCHED_TORCH_OPT_ARGS"] = \
            "" if form == "measured" else form_args(form[5:]) \
            if form.startswith("args:") else "--swiglu-form=" + form
        # The backend keeps one runtime graph per imported IR text in the
        # process: another form of the same IR must be decided anew. The
        # entries stay referenced (KEPT): a compiled form's graph lives in
        # its entry's module, and freeing it under the compiled code
        # crashed round 3.
        KEPT.extend(backend._GRAPHS.values())
        backend._GRAPHS.clear()
        t0 = time.time()
        cm = torch.compile(own_frame(model), backend="mtsched",
                           dynamic=False)
        y = cm(*inputs)
        torch.cuda.synchronize()
        rec = backend.GRAPHS[-1]
        label = "mtsched " + (
            "args:" + os.environ["MTSCHED_TORCH_OPT_ARGS"].replace(" ", " + ")
            if form.startswith("args:@") else form)
        with open(rec["decided_path"]) as f:
            text = f.read()
        kept = "merged" if " swiglu(" in text else "split"
        # select-swiglu's times and, where it re-timed them at sustained
        # load, how (swiglu_timing) and the autotuner's burst times.
        times = re.findall(r"\{(swiglu_merged_us[^}]*)\}", text)
        lines += ["#### %s: first call %.1f s, error to eager %.1e, "
                  "SwiGLU kept %s (%s)%s" % (
                      label, time.time() - t0, tbb.worst_error(y, ref), kept,
                      rec["decided_path"][-30:],
                      "".join("; " + t for t in times))]
        # As it goes: a call cut short by its time limit still says this.
        print(lines[-1], flush=True)
        # The nodes' measurements are the same for every form (the
        # autotuning cache replays them): listed once.
        report = report_lines(backend, rec) if form == forms[0] else []
        print("\n".join(report), flush=True)
        lines += report + [""]
        out[label] = cm
    os.environ.pop("MTSCHED_TORCH_OPT_ARGS", None)
    return out, lines


def layer(a, backend, name):
    model, inputs = tbb.build(name, a.size, 0)
    lines = ["## %s (%s, world size 1)" % (name, a.size), ""]
    with torch.no_grad(), collectives.mode("local"):
        ref = model(*inputs)
        fns, text = compile_forms(backend, model, inputs, ref, a.forms)
        lines += text
        if a.aten_only:
            import torch._inductor.config as icfg
            icfg.max_autotune_gemm_backends = "ATEN"
        t0 = time.time()
        ind = torch.compile(own_frame(model), mode="max-autotune",
                            dynamic=False)
        y = ind(*inputs)
        torch.cuda.synchronize()
        lines += ["#### max-autotune%s: first call %.1f s, error to eager "
                  "%.1e" % (" (GEMMs ATen only)" if a.aten_only else "",
                            time.time() - t0, tbb.worst_error(y, ref)), ""]
        print(lines[-2], flush=True)
        fns["max-autotune"] = ind
        calls = {k: (lambda f=f: f(*inputs)) for k, f in fns.items()}
        once = sample_us(calls["max-autotune"], 2)
        n = int(min(50, max(5, 40000.0 / once)))
        t = interleaved(calls, a.rounds, n)
        lines += ["### interleaved: %d rounds, %d calls a sample (us a call)"
                  % (a.rounds, n), "",
                  "| variant | median us | min | max | / max-autotune "
                  "(median of the rounds' ratios) |", "|---|---:|---:|---:|"
                  "---:|"]
        base = t["max-autotune"]
        for k, v in t.items():
            ratio = statistics.median(x / b for x, b in zip(v, base))
            lines.append("| %s | %.1f | %.1f | %.1f | %.3fx |" % (
                k, statistics.median(v), min(v), max(v), ratio))
        # Each round's sample, in round order: a drift or a slow round
        # shows here, which the median hides.
        lines += [""] + ["* %s by round: %s" % (
            k, " ".join("%.1f" % x for x in v)) for k, v in t.items()]
        lines.append("")
        print("\n".join(lines[lines.index("### interleaved: %d rounds, %d "
                                            "calls a sample (us a call)"
                                            % (a.rounds, n)):]), flush=True)
        for k, fn in calls.items():
            lines += kernel_profile.table("%s kernels" % k,
                                          kernel_profile.profile(fn, 5))
        if a.profile_rounds:
            lines += sustained_profile(calls, a.profile_rounds, n)
        # Kernel time that the interleaved samples do not show: the GPU
        # idle between back-to-back calls.
        lines += ["### GPU busy over 5 back-to-back calls (us a call)", "",
                  "| variant | busy | first start to last end | idle |",
                  "|---|---:|---:|---:|"]
        for k, fn in calls.items():
            b, span = kernel_profile.busy(fn, 5)
            lines.append("| %s | %.1f | %.1f | %.1f%% |" % (
                k, b, span, 100.0 * (span - b) / span if span else 0.0))
        lines.append("")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.path.join(tbb.ROOT, "build"))
    p.add_argument("--layers", nargs="+", default=["llama3_70b_mlp"])
    p.add_argument("--forms", nargs="*", default=["measured", "merged",
                                                   "split"])
    p.add_argument("--aten-only", action="store_true")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--profile-rounds", type=int, default=0,
                   help="also profile every variant's kernels over this "
                   "many interleaved rounds (sustained load)")
    p.add_argument("--size", choices=["prefill", "decode"], default="prefill")
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    backend = tbb.setup(a.build_dir)
    lines = ["# Gallery layers at %s, one GPU (%s, PyTorch %s)" % (
        a.size, torch.cuda.get_device_name(), torch.__version__), ""]
    for name in a.layers:
        lines += layer(a, backend, name)
        with open(os.path.join(a.out, "breakdown.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        torch._dynamo.reset()
        KEPT.extend(backend._GRAPHS.values())
        backend._GRAPHS.clear()
        torch.cuda.empty_cache()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
