"""Runs imported layers with mtsched and with PyTorch on the same inputs and
prints the max relative error per output (and, on a GPU, the times).

For each layer and size:

1. build the module with seeded random weights on ``--device``;
2. import it (``torch.export`` on PyTorch 2.x, else make_fx) to a ``.mir``;
3. write every graph input as ``.npy`` (weights from the module's state,
   transposed where the importer made the input the transpose; bf16 as f32);
4. ``mtsched-opt --pipeline=default`` then ``--run`` on the GPU
   (``--backend=cuda``) or ``--interpret`` on the CPU, reading those inputs
   and writing the outputs as ``.npy``;
5. run the module eagerly (collectives are the identity on one rank) and
   compare: max |mtsched - torch| / max |torch| per output, and the
   norm-wise relative error ||mtsched - torch|| / ||torch||, which must be
   within the bf16 tolerance (2e-2, the one ``--run`` uses);
6. on a GPU, time PyTorch eager and ``torch.compile(mode="max-autotune")``
   with CUDA events, beside the decided graph's time ``--run`` prints.

    python3 -m mtsched_torch.compare --gallery all --device cuda   # GPU
    python3 -m mtsched_torch.compare --factory m.py:f --input x=f32[8,64] \\
        --device cpu                                              # CPU, CI

Results go to ``$OUT`` (or ``--out``): ``compare.md`` (the table),
``compare.json`` and, per layer, the ``.mir``, inputs, outputs and logs.
Layers that still contain custom ops are imported and decided but not run
(``--run`` has no kernel for them); the table says which ops.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch

from . import (build_inputs, collectives, import_module, load_factory,
               parse_kwargs, trace as _trace)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
TOLERANCE = {"bf16": 2e-2, "f16": 5e-3, "f32": 1e-3}


def tolerance(dtype):
    """The norm-wise relative tolerance of an output of `dtype`: an IR type
    name ("bf16") or a torch.dtype (float64 as f32, its nearest IR type);
    bf16's for a type without one of its own (integers, bool)."""
    if isinstance(dtype, torch.dtype):
        from .convert import _DTYPES, _NEAREST
        dtype = _DTYPES.get(dtype, _NEAREST.get(dtype))
    return TOLERANCE.get(dtype, TOLERANCE["bf16"])


def init_weights(module, seed):
    """Seeded weights of a sensible scale: N(0, 1/fan_in) for matrices (and
    stacked expert matrices), 1 + N(0, 0.1) for vectors (norm weights)."""
    gens = {}
    with torch.no_grad():
        for name, p in module.named_parameters():
            # Generated where the weight lives (a 70B layer is 10^9 values).
            g = gens.get(p.device)
            if g is None:
                g = gens[p.device] = torch.Generator(
                    device=p.device).manual_seed(seed)
            r = torch.randn(p.shape, generator=g, device=p.device)
            if p.dim() >= 2:
                fan_in = p.shape[-1] if "weight" in name.split(".")[-1] \
                    else p.shape[-2]
                v = r / math.sqrt(fan_in)
            elif name.endswith("bias"):
                v = 0.1 * r
            else:
                v = 1 + 0.1 * r
            p.copy_(v.to(p.dtype))


def random_inputs(specs, device, seed):
    """Inputs for (name, dtype, shape) specs: N(0, 1), rounded to dtype."""
    g = torch.Generator().manual_seed(seed + 1)
    out = []
    for name, dt, shape in specs:
        if dt.is_floating_point:
            t = torch.randn(shape, generator=g)
            if name == "mask":
                t = torch.zeros(shape)
        else:
            t = torch.randint(0, 4, shape, generator=g)
        out.append(t.to(dt).to(device))
    return out


def ir_input_tensors(res, module, inputs, names):
    """The tensors of the IR graph's inputs, in its order and layout:
    parameters and buffers of ``module`` by name, else the call's inputs by
    name, transposed where the importer made the input the transpose."""
    state = dict(module.named_parameters())
    state.update(dict(module.named_buffers()))
    by_name = dict(zip(names, inputs))
    out = []
    for info in res.inputs:
        t = state.get(info["torch_name"])
        if info["kind"] == "constant" and info["ir_name"] in res.constants:
            t = res.constants[info["ir_name"]]
        if t is None:
            t = by_name.get(info["torch_name"])
        if t is None:
            raise KeyError("no tensor for IR input %%%s (%s)"
                           % (info["ir_name"], info["torch_name"]))
        t = t.detach()
        if info["transposed"]:
            t = t.t()
        if list(t.shape) != info["shape"]:
            raise ValueError("input %%%s has shape %s, the IR says %s"
                             % (info["ir_name"], list(t.shape),
                                info["shape"]))
        out.append(t)
    return out


def save_inputs(res, module, inputs, names, directory):
    """One .npy per IR input, in the IR's layout (transposed weights)."""
    os.makedirs(directory, exist_ok=True)
    for info, t in zip(res.inputs,
                       ir_input_tensors(res, module, inputs, names)):
        a = t.float().cpu().numpy() if t.is_floating_point() else \
            t.cpu().numpy()
        # ascontiguousarray makes a 0-d array 1-d: keep rank 0.
        np.save(os.path.join(directory, info["ir_name"] + ".npy"),
                np.ascontiguousarray(a).reshape(a.shape))


def errors(ours, ref):
    """(max |a-b| / max |b|, ||a-b|| / ||b||) in float64."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(ref, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf"), float("inf")
    d = np.abs(a - b)
    if not np.all(np.isfinite(a)):
        return float("inf"), float("inf")
    mb = np.abs(b).max() if b.size else 0.0
    nb = np.linalg.norm(b)
    return (float(d.max() / mb) if mb else float(d.max()),
            float(np.linalg.norm(a - b) / nb) if nb else float(
                np.linalg.norm(a - b)))


def cuda_time_us(fn, samples=10, busy_start=True):
    """Median time of fn() in microseconds, CUDA events: samples of at
    least 10 back-to-back calls and about 5 ms, each started behind one
    untimed call still running on the GPU. In a steady stream of calls
    the CPU time of a call (Python, Dynamo's guards, the launch) is
    hidden behind the GPU work of the one before, unless it is longer;
    a sample started on an idle GPU would pay its first call's CPU time
    once per sample (2-7 us a call on 100-330 us decode layers through
    torch.compile, docs/BENCHMARKS.md; busy_start=False times that way).
    A call is then timed as --run times its CUDA graph (back-to-back
    replays)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), \
        torch.cuda.Event(enable_timing=True)
    e0.record()
    fn()
    e1.record()
    e1.synchronize()
    once = max(e0.elapsed_time(e1) * 1000.0, 1.0)
    reps = int(min(2000, max(10, 5000.0 / once)))
    times = []
    for _ in range(samples):
        if busy_start:
            fn()
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1000.0 / reps)
    times.sort()
    return times[len(times) // 2]


def run_times(stderr):
    """(G, E) from --run's "decided graph G us as a CUDA graph, E us eager"
    (G None where capture failed, which --run says loudly; both None when
    the line is missing)."""
    m = re.search(r"decided graph ([0-9.]+) us as a CUDA graph", stderr)
    graph = float(m.group(1)) if m else None
    m = re.search(r"decided graph (?:[0-9.]+ us as a CUDA graph, )?"
                  r"([0-9.]+) us eager", stderr)
    return graph, float(m.group(1)) if m else None


def find_mtsched_opt(path=None):
    for p in [path, os.environ.get("MTSCHED_OPT"),
              os.path.join(ROOT, "build", "tools", "mtsched-opt",
                           "mtsched-opt")]:
        if p and os.path.exists(p):
            return p
    raise FileNotFoundError("mtsched-opt not found (build it, or pass "
                            "--mtsched-opt / set MTSCHED_OPT)")


class Case:
    """One layer at one size."""

    def __init__(self, name, factory, kwargs, specs):
        self.name = name
        self.factory = factory
        self.kwargs = kwargs
        self.specs = specs  # [(name, torch dtype, shape)]


def build(case, device):
    """The case's module on device: a factory that takes ``device`` (or
    ``world_size``) gets it; any other is a plain module factory, built on
    the CPU and moved (its buffers' values are kept for the importer)."""
    import inspect
    params = inspect.signature(case.factory).parameters
    kwargs = {k: v for k, v in case.kwargs.items()
              if k in params or any(p.kind == p.VAR_KEYWORD
                                    for p in params.values())}
    if device == "meta" or "device" in params:
        m = _trace.build_module(case.factory, kwargs, device)
    else:
        m = case.factory(**kwargs)
        values = {n: b.detach().clone() for n, b in m.named_buffers()}
        m = m.to(device)
        m._mtsched_buffer_values = values
    # A factory that takes no dtype gets the inputs' floating type (its
    # parameters and floating buffers are cast, as module.to(dtype) does).
    floats = {dt for _, dt, _ in case.specs if dt.is_floating_point}
    if "dtype" not in params and len(floats) == 1:
        dt = floats.pop()
        if any(p.dtype != dt for p in m.parameters()):
            m = m.to(dt)
    return m


def run_case(case, a, opt, outdir, log):
    """Imports, decides, runs and compares one case; returns a result row."""
    row = {"layer": case.name, "status": "", "outputs": []}
    d = os.path.join(outdir, case.name)
    os.makedirs(d, exist_ok=True)
    dev = a.device
    names = [n for n, _, _ in case.specs]
    tracer = a.tracer
    if tracer == "auto":
        tracer = "export" if _trace.has_export() else "make_fx"
    if a.mode == "run":
        # A layer with custom ops cannot --run: find out on the meta device
        # before allocating its weights.
        try:
            meta = build(case, "meta")
            meta.eval()
            pre = import_module(meta, [torch.empty(sh, dtype=dt,
                                                   device="meta")
                                       for _, dt, sh in case.specs],
                                case.name, 1, tracer, names, quiet=True)
            if pre.unmapped:
                with open(os.path.join(d, case.name + ".mir"), "w") as f:
                    f.write(pre.text())
                row.update(tracer=pre.tracer, nodes=len(pre.graph.nodes),
                           custom=dict(pre.unmapped))
                row["status"] = "not run: custom " + ", ".join(
                    "%s x%d" % kv for kv in sorted(pre.unmapped.items()))
                return row
        except Exception as e:  # noqa: BLE001 - the real module decides
            log("%s: import on the meta device failed (%s: %s)"
                % (case.name, type(e).__name__, str(e).splitlines()[0][:200]
                   if str(e) else ""))
    torch.manual_seed(a.seed)
    module = build(case, dev)
    module.eval()
    init_weights(module, a.seed)
    inputs = random_inputs(case.specs, dev, a.seed)
    t0 = time.time()
    try:
        res = import_module(module, inputs, case.name, 1, tracer, names,
                            quiet=True)
    except Exception as e:  # noqa: BLE001 - reported per row
        if tracer != "export":
            raise
        log("%s: torch.export failed (%s: %s); trying make_fx"
            % (case.name, type(e).__name__, str(e).splitlines()[0][:200]))
        tracer = "make_fx"
        res = import_module(module, inputs, case.name, 1, tracer, names,
                            quiet=True)
    row["tracer"] = res.tracer
    row["import_s"] = round(time.time() - t0, 2)
    row["nodes"] = len(res.graph.nodes)
    row["custom"] = dict(res.unmapped)
    mir = os.path.join(d, case.name + ".mir")
    with open(mir, "w") as f:
        f.write(res.text())
    cmd = [opt, "--pipeline=default", "--quiet", "--no-cache",
           "--report=" + os.path.join(d, "report.json"),
           "-o", os.path.join(d, "decided.mir"), mir]
    run_args = []
    if res.unmapped:
        row["status"] = "not run: custom " + ", ".join(
            "%s x%d" % kv for kv in sorted(res.unmapped.items()))
    else:
        save_inputs(res, module, inputs, names, os.path.join(d, "in"))
        run_args = ["--run-inputs=" + os.path.join(d, "in"),
                    "--run-outputs=" + os.path.join(d, "out")]
        if a.mode == "run":
            run_args += ["--run", "--run-check=" + ("true" if a.fp64_check
                                                    else "false")]
        else:
            run_args += ["--interpret"]
    if res.unmapped and a.mode == "run":
        # --run has no kernel for a custom op; deciding on the GPU would
        # only time the mapped part.
        return row
    if a.mode == "run":
        cmd.insert(1, "--backend=cuda")
        if a.kernel_cache_dir:
            cmd.insert(1, "--kernel-cache-dir=" + a.kernel_cache_dir)
    t0 = time.time()
    p = subprocess.run(cmd + run_args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    row["mtsched_s"] = round(time.time() - t0, 2)
    with open(os.path.join(d, "mtsched.log"), "w") as f:
        f.write("$ " + " ".join(cmd + run_args) + "\n" + p.stderr)
    if p.returncode != 0:
        row["status"] = (row["status"] + "; " if row["status"] else "") + \
            "mtsched-opt failed (rc %d): %s" % (
                p.returncode, p.stderr.strip().splitlines()[-1][:300]
                if p.stderr.strip() else "")
        return row
    row["mtsched_us"], row["mtsched_eager_us"] = run_times(p.stderr)
    if res.unmapped:
        row["status"] = row["status"] + " (decided)"
        return row
    with torch.no_grad(), collectives.mode("local"):
        ref = module(*inputs)
    refs = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    ok = True
    for i, name in enumerate(res.outputs):
        path = os.path.join(d, "out", name + ".npy")
        ours = np.load(path)
        r = refs[i].float().cpu().numpy()
        mx, nrm = errors(ours, r)
        types = {n.name: n.dtype for n in res.graph.nodes}
        types.update({i[0]: i[1] for i in res.graph.inputs})
        tol = tolerance(types.get(name, "bf16"))
        good = nrm <= tol
        ok &= good
        row["outputs"].append({"name": name, "max_rel": mx, "norm_rel": nrm,
                               "tolerance": tol, "ok": good})
    row["status"] = "match" if ok else "MISMATCH"
    if a.mode == "run" and dev.startswith("cuda"):
        with torch.no_grad(), collectives.mode("local"):
            row["eager_us"] = cuda_time_us(lambda: module(*inputs))
            if a.compile:
                try:
                    t0 = time.time()
                    cm = torch.compile(module, mode="max-autotune")
                    row["compile_us"] = cuda_time_us(lambda: cm(*inputs))
                    row["compile_s"] = round(time.time() - t0, 1)
                except Exception as e:  # noqa: BLE001
                    row["compile_us"] = None
                    row["compile_error"] = "%s: %s" % (
                        type(e).__name__, str(e).splitlines()[0][:200])
    del module
    if dev.startswith("cuda"):
        torch.cuda.empty_cache()
    return row


def gallery_cases(names, sizes):
    sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
    import gallery  # noqa: E402
    cases = []
    # Every layer's first size before any layer's second: a run cut short
    # by a deadline still covers every layer.
    for size in sizes:
        for e in gallery.GALLERY:
            if names != ["all"] and e.name not in names:
                continue
            cases.append(Case("%s_%s" % (e.name, size), e.factory(),
                              {"world_size": 1}, e.inputs(size, 1)))
    return cases


def fmt(x, spec="%.3g"):
    return "-" if x is None else spec % x


def ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def table(rows, device):
    """Like beside like: mtsched's decided graph replayed as a CUDA graph
    beside torch.compile(mode="max-autotune") (which replays CUDA graphs),
    and its launches issued eagerly beside PyTorch eager."""
    lines = ["| layer | tracer | nodes | max rel. error | norm rel. error "
             "| result | mtsched CUDA graph (us) | torch.compile max-autotune "
             "(us) | graph / compile | mtsched eager (us) | PyTorch eager "
             "(us) | eager / eager |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        outs = r.get("outputs") or []
        mx = max((o["max_rel"] for o in outs), default=None)
        nr = max((o["norm_rel"] for o in outs), default=None)
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                     "| %s |" % (
                         r["layer"], r.get("tracer", "-"), r.get("nodes", "-"),
                         fmt(mx, "%.2e"), fmt(nr, "%.2e"), r["status"],
                         fmt(r.get("mtsched_us"), "%.1f"),
                         fmt(r.get("compile_us"), "%.1f"),
                         fmt(ratio(r.get("mtsched_us"), r.get("compile_us")),
                             "%.2fx"),
                         fmt(r.get("mtsched_eager_us"), "%.1f"),
                         fmt(r.get("eager_us"), "%.1f"),
                         fmt(ratio(r.get("mtsched_eager_us"),
                                   r.get("eager_us")), "%.2fx")))
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m mtsched_torch.compare",
        description="Run imported layers with mtsched and PyTorch on the "
        "same inputs; print the max relative error per output.")
    p.add_argument("--gallery", nargs="*", metavar="NAME",
                   help="gallery modules (examples/torch/gallery.py) at "
                   "world size 1, or 'all'")
    p.add_argument("--sizes", default="decode,prefill",
                   help="gallery sizes (default decode,prefill)")
    p.add_argument("--factory", help="FILE.py:FUNCTION (instead of "
                   "--gallery)")
    p.add_argument("--input", action="append", default=[],
                   metavar="NAME=DTYPE[shape]")
    p.add_argument("--arg", action="append", default=[], metavar="K=V")
    p.add_argument("--name", help="layer name for --factory")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available()
                   else "cpu")
    p.add_argument("--mode", choices=["run", "interpret"],
                   help="run: --backend=cuda --run (default on cuda); "
                   "interpret: the fp64 interpreter on the CPU")
    p.add_argument("--tracer", default="auto",
                   choices=["auto", "export", "make_fx"])
    p.add_argument("--mtsched-opt", help="the mtsched-opt binary")
    p.add_argument("--out", default=os.environ.get("OUT") or "compare-out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", dest="compile", action="store_false",
                   help="skip the torch.compile baseline")
    p.add_argument("--fp64-check", action="store_true",
                   help="also check --run's outputs against mtsched's fp64 "
                   "interpreter (slow for prefill sizes)")
    p.add_argument("--kernel-cache-dir", help="passed to mtsched-opt")
    p.add_argument("--deadline-s", type=float, default=0,
                   help="stop starting new layers after this many seconds")
    a = p.parse_args(argv)
    if a.mode is None:
        a.mode = "run" if a.device.startswith("cuda") else "interpret"
    if (a.gallery is None) == (a.factory is None):
        p.error("give --gallery [NAME ...|all] or --factory FILE:FN")
    opt = find_mtsched_opt(a.mtsched_opt)
    if a.factory:
        fn = load_factory(a.factory)
        specs = []
        for s in a.input:
            from . import parse_input
            n, dt, shape = parse_input(s)
            specs.append((n or "x%d" % len(specs), dt, shape))
        cases = [Case(a.name or a.factory.rsplit(":", 1)[1], fn,
                      dict(parse_kwargs(a.arg), world_size=1), specs)]
    else:
        cases = gallery_cases(a.gallery or ["all"], a.sizes.split(","))
    os.makedirs(a.out, exist_ok=True)
    start = time.time()
    rows = []

    def log(msg):
        print("compare: " + msg, file=sys.stderr, flush=True)

    log("PyTorch %s, device %s, mode %s, %d case(s), results in %s"
        % (torch.__version__, a.device, a.mode, len(cases), a.out))
    for c in cases:
        if a.deadline_s and time.time() - start > a.deadline_s:
            rows.append({"layer": c.name, "status": "skipped (deadline)",
                         "outputs": []})
            continue
        try:
            row = run_case(c, a, opt, a.out, log)
        except Exception as e:  # noqa: BLE001 - one row per failure
            row = {"layer": c.name, "outputs": [],
                   "status": "error: %s: %s" % (type(e).__name__,
                                                str(e).splitlines()[0][:300]
                                                if str(e) else "")}
        rows.append(row)
        log("%s: %s (%.0f s so far)" % (c.name, row["status"],
                                        time.time() - start))
        with open(os.path.join(a.out, "compare.json"), "w") as f:
            json.dump({"torch": torch.__version__, "device": a.device,
                       "gpu": torch.cuda.get_device_name(0)
                       if a.device.startswith("cuda") else None,
                       "rows": rows}, f, indent=1)
        with open(os.path.join(a.out, "compare.md"), "w") as f:
            f.write(table(rows, a.device))
    sys.stdout.write(table(rows, a.device))
    bad = [r for r in rows if r["status"] in ("MISMATCH",) or
           r["status"].startswith("error") or "failed" in r["status"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
