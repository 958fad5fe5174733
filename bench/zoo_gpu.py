"""The zoo (examples/zoo/) on a GPU beside PyTorch: for every model and size,
eager PyTorch on the zoo's fixed inputs, the module exported and imported,
`mtsched-opt --pipeline=default --backend=cuda --run` on eager's inputs
(.npy), its outputs compared with eager's within the dtype's tolerance, and
its decided graph's time beside eager's and torch.compile(mode=
"max-autotune")'s, all in one process (docs/BENCHMARKS.md, "The zoo on one
H200").

    python3 bench/zoo_gpu.py --device cuda [--only gpt2,llama]
        [--sizes decode,prefill] [--shard 1/2] [--budget-seconds 520]
        [--decide-jobs 4] [--no-compile | --compile-only] [--out DIR]

Phases, so that a budget cuts the slowest part (max-autotune compiles, tens
of seconds each) and never the mtsched runs:

1. prepare, per case: seeded weights (compare.init_weights, on the CPU in
   fp32, then cast to --dtype and moved), the zoo's inputs, eager's outputs,
   the import (torch.export on 2.x, make_fx on 1.13: no custom op allowed)
   and the IR inputs as .npy (compare.save_inputs);
2. decide: `mtsched-opt --pipeline=default --backend=B` into an autotune
   cache of this run; with --decide-jobs N > 1 the cases decide N at a time
   (on cuda their measurements then share the GPU: the decisions may differ
   from a lone run's, the outputs are still checked), and the run of phase 3
   replays them from the cache;
3. run, one case at a time: `--run` (cuda; `--interpret`, the fp64
   interpreter, on the CPU) on eager's inputs, the outputs compared with
   eager's; `--run`'s "decided graph G us as a CUDA graph, E us eager" read;
4. time, on cuda: PyTorch eager and torch.compile(mode="max-autotune") with
   CUDA events (compare.cuda_time_us), while --budget-seconds allows: a
   compile starts only if the time left exceeds 1.5x the median compile so
   far (--compile-estimate before the first); the others are printed as
   skipped for time (a later call times them with --compile-only).

The decide time is the passes' wall time from --report's phases_ms (parse
to autotune, the GPU's benchmarking included; not the process start or
--run).

Every case is a line on stdout; zoo-gpu.md (the table) and zoo-gpu.json are
rewritten in --out after every case, so a run cut short keeps what
finished. Per-case files (the .mir, decided IR, inputs, outputs, logs) go to
--work (default --out/cases). Exit 1 if a case failed (an import, decide or
run error, or outputs outside the tolerance), 2 on a usage error; cases
skipped for time are not failures.

On the CPU (PyTorch 1.13, CI) the same script runs with --device cpu: make_fx,
--backend=sim, the fp64 interpreter, no timing (test/lit/Import/zoo-gpu.mir).
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "zoo"))

from mtsched_torch import collectives, compare, import_module  # noqa: E402
from mtsched_torch import trace as _trace  # noqa: E402
import zoo  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def log(msg):
    print("zoo-gpu: " + msg, flush=True)


def select(a):
    """The cases, every model's first size before any model's second (a
    budget that runs out still covers every model once), then --shard."""
    names = [e.name for e in zoo.ZOO]
    only = [n for n in a.only.split(",") if n]
    skip = [n for n in a.skip.split(",") if n]
    for n in only + skip:
        if n not in names:
            raise ValueError("unknown model '%s' (the zoo has: %s)"
                             % (n, ", ".join(names)))
    sizes = [s for s in a.sizes.split(",") if s]
    for s in sizes:
        if s not in zoo.SEQ:
            raise ValueError("unknown size '%s' (decode, prefill)" % s)
    cases = [(e, s) for s in sizes for e in zoo.ZOO
             if (not only or e.name in only) and e.name not in skip]
    if a.shard:
        m = re.fullmatch(r"([0-9]+)/([0-9]+)", a.shard)
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise ValueError("--shard takes I/N with 1 <= I <= N, not '%s'"
                             % a.shard)
        i, n = int(m.group(1)), int(m.group(2))
        cases = cases[i - 1::n]
    return cases


def build(entry, size, device, dtype):
    """The module and the zoo's inputs, as run_zoo.py makes them (seed 0,
    compare.init_weights), floats cast to dtype, on device. Weights are
    drawn in fp32 on the CPU, so every device and dtype starts from the
    same values."""
    torch.manual_seed(0)
    module = entry.factory().eval()
    compare.init_weights(module, 0)
    pairs = entry.inputs(size)
    module = module.to(device=device, dtype=dtype)
    names = [n for n, _ in pairs]
    inputs = [(t.to(dtype) if t.is_floating_point() else t).to(device)
              for _, t in pairs]
    return module, names, inputs


def eager(module, inputs):
    with torch.no_grad(), collectives.mode("local"):
        out = module(*inputs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def prepare(entry, size, a, row):
    """Phase 1. Returns (module, names, inputs, import result) or None."""
    d = os.path.join(a.work, row["name"])
    os.makedirs(d, exist_ok=True)
    module, names, inputs = build(entry, size, a.device, DTYPES[a.dtype])
    row["ref"] = [t.detach().float().cpu().numpy()
                  for t in eager(module, inputs)]
    tracer = a.tracer
    if tracer == "auto":
        tracer = "export" if _trace.has_export() else "make_fx"
    t0 = time.time()
    try:
        res = import_module(module, inputs, row["name"], 1, tracer, names,
                            quiet=True)
    except Exception as e:  # noqa: BLE001 - reported as the case's failure
        row["status"] = "FAIL import: %s: %s" % (
            type(e).__name__, (str(e).splitlines() or [""])[0][:200])
        return None
    row["import_s"] = round(time.time() - t0, 3)
    row["tracer"] = res.tracer
    row["nodes"] = len(res.graph.nodes)
    row["attention"] = sum(1 for n in res.graph.nodes if n.op == "attention")
    row["mir"] = os.path.join(d, row["name"] + ".mir")
    with open(row["mir"], "w") as f:
        f.write(res.text())
    if res.unmapped:
        row["status"] = "FAIL custom " + ", ".join(
            "%s x%d" % kv for kv in sorted(res.unmapped.items()))
        return None
    compare.save_inputs(res, module, inputs, names, os.path.join(d, "in"))
    types = {n.name: n.dtype for n in res.graph.nodes}
    types.update({i[0]: i[1] for i in res.graph.inputs})
    row["out_names"] = list(res.outputs)
    row["out_types"] = [types.get(o, a.dtype) for o in res.outputs]
    return module, names, inputs


def opt_cmd(a, row, extra):
    d = os.path.join(a.work, row["name"])
    return ([a.mtsched_opt, "--pipeline=default", "--quiet",
             "--backend=" + a.backend, "--cache-dir=" + a.cache_dir] +
            (["--kernel-cache-dir=" + a.kernel_cache_dir]
             if a.backend == "cuda" and a.kernel_cache_dir else []) +
            extra + ["--report=" + os.path.join(d, "report.json"),
                     "-o", os.path.join(d, "decided.mir"), row["mir"]])


def call(cmd, logfile):
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    with open(logfile, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n" + p.stderr)
    last = (p.stderr.strip().splitlines() or [""])[-1][:300]
    return p.returncode, p.stderr, last, time.time() - t0


def decide_ms(a, row):
    """The passes' wall time from the report (its top-level phases_ms
    keys; dotted keys are sub-phases of autotune)."""
    try:
        with open(os.path.join(a.work, row["name"], "report.json")) as f:
            ph = json.load(f).get("phases_ms", {})
        return sum(v for k, v in ph.items() if "." not in k)
    except (OSError, ValueError):
        return None


def decide(a, row):
    """Phase 2 for --decide-jobs > 1: fills the run's autotune cache."""
    rc, _, last, _ = call(opt_cmd(a, row, []),
                          os.path.join(a.work, row["name"], "decide.log"))
    if rc:
        row["status"] = "FAIL decide (rc %d): %s" % (rc, last)
        return
    ms = decide_ms(a, row)
    row["decide_ms"] = None if ms is None else round(ms, 2)


def run(a, row):
    """Phase 3: --run (or --interpret) on eager's inputs, then compare."""
    d = os.path.join(a.work, row["name"])
    extra = ["--run-inputs=" + os.path.join(d, "in"),
             "--run-outputs=" + os.path.join(d, "out")]
    if a.backend == "cuda":
        extra += ["--run", "--run-check=" + ("true" if a.fp64_check
                                             else "false")]
    else:
        extra += ["--interpret"]
    rc, err, last, secs = call(opt_cmd(a, row, extra),
                               os.path.join(d, "run.log"))
    row["run_s"] = round(secs, 2)
    if rc:
        row["status"] = "FAIL run (rc %d): %s" % (rc, last)
        return
    if row.get("decide_ms") is None:
        ms = decide_ms(a, row)
        row["decide_ms"] = None if ms is None else round(ms, 2)
    row["mtsched_us"], row["mtsched_eager_us"] = compare.run_times(err)
    worst_max, worst_norm, ok = 0.0, 0.0, True
    for i, (name, ty) in enumerate(zip(row["out_names"], row["out_types"])):
        ours = np.load(os.path.join(d, "out", name + ".npy"))
        mx, nrm = compare.errors(ours, row["ref"][i])
        tol = compare.TOLERANCE.get(ty, compare.TOLERANCE["bf16"])
        worst_max, worst_norm = max(worst_max, mx), max(worst_norm, nrm)
        if not nrm <= tol:
            ok = False
            row["status"] = ("FAIL mismatch: %%%s norm-wise relative error "
                             "%.2e > %.0e" % (name, nrm, tol))
    row["max_rel"], row["norm_rel"] = worst_max, worst_norm
    if ok:
        row["status"] = "PASS"


def guarded(what, fn, row, *args):
    """fn(row, *args); an exception fails the row (one line), not the run."""
    try:
        fn(row, *args)
    except Exception as e:  # noqa: BLE001 - one row per failure
        row["status"] = "FAIL %s: %s: %s" % (
            what, type(e).__name__, (str(e).splitlines() or [""])[0][:200])


def time_eager(row, module, inputs):
    row["eager_us"] = compare.cuda_time_us(lambda: eager(module, inputs))


def time_compile(row, module, inputs):
    """torch.compile(mode="max-autotune"): its first call (the compile and
    autotuning) timed apart, then its calls with CUDA events; its output
    is compared with eager's too (a sanity check of the baseline)."""
    torch._dynamo.reset()  # a fresh cache: no recompile limit is reached
    try:
        t0 = time.time()
        cm = torch.compile(module, mode="max-autotune")
        with torch.no_grad(), collectives.mode("local"):
            out = cm(*inputs)
        torch.cuda.synchronize()
        row["compile_s"] = round(time.time() - t0, 1)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        row["compile_norm_rel"] = max(
            compare.errors(o.detach().float().cpu().numpy(), r)[1]
            for o, r in zip(outs, row["ref"]))

        def fn():
            with torch.no_grad(), collectives.mode("local"):
                return cm(*inputs)
        row["compile_us"] = compare.cuda_time_us(fn)
    except Exception as e:  # noqa: BLE001 - the baseline's failure is a cell
        row["compile_us"] = None
        row["compile_error"] = "%s: %s" % (
            type(e).__name__, (str(e).splitlines() or [""])[0][:200])


def fmt(x, spec):
    return "-" if x is None else spec % x


def table(rows, device):
    head = ("| model | size | tracer | nodes / attention | import (s) | "
            "decide (ms) | max rel. error | norm rel. error | result |")
    rule = "|---|---|---|---|---|---|---|---|---|"
    if device.startswith("cuda"):
        head += (" mtsched CUDA graph (us) | torch.compile max-autotune (us)"
                 " | graph / compile | mtsched eager (us) | PyTorch eager "
                 "(us) | compile (s) |")
        rule += "---|---|---|---|---|---|"
    lines = [head, rule]
    for r in rows:
        cells = [r["model"], r["size"], r.get("tracer") or "-",
                 "-" if r.get("nodes") is None else "%d / %d" % (
                     r["nodes"], r["attention"]),
                 fmt(r.get("import_s"), "%.2f"),
                 fmt(r.get("decide_ms"), "%.1f"),
                 fmt(r.get("max_rel"), "%.2e"),
                 fmt(r.get("norm_rel"), "%.2e"), r["status"]]
        if device.startswith("cuda"):
            g, c = r.get("mtsched_us"), r.get("compile_us")
            cells += [fmt(g, "%.1f"),
                      fmt(c, "%.1f") if c is not None or "compile_error"
                      not in r else "error", fmt(
                          g / c if g is not None and c else None, "%.2fx"),
                      fmt(r.get("mtsched_eager_us"), "%.1f"),
                      fmt(r.get("eager_us"), "%.1f"),
                      r.get("compile_skipped") or fmt(r.get("compile_s"),
                                                      "%.0f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def save(a, rows, meta):
    keep = [{k: v for k, v in r.items() if k not in ("ref",)} for r in rows]
    with open(os.path.join(a.out, "zoo-gpu.json"), "w") as f:
        json.dump(dict(meta, rows=keep), f, indent=1)
    with open(os.path.join(a.out, "zoo-gpu.md"), "w") as f:
        f.write(table(rows, a.device))


def main(argv=None):
    p = argparse.ArgumentParser(prog="bench/zoo_gpu.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--mtsched-opt", help="the driver (default: $MTSCHED_OPT,"
                   " else build/tools/mtsched-opt/mtsched-opt)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available()
                   else "cpu")
    p.add_argument("--dtype", choices=sorted(DTYPES),
                   help="default bf16 on cuda, f32 on the CPU")
    p.add_argument("--tracer", default="auto",
                   choices=["auto", "export", "make_fx"])
    p.add_argument("--only", default="", help="models, comma-separated")
    p.add_argument("--skip", default="", help="models, comma-separated")
    p.add_argument("--sizes", default="decode,prefill")
    p.add_argument("--shard", default="", metavar="I/N",
                   help="every N-th case from the I-th (1-based)")
    p.add_argument("--budget-seconds", type=float, default=0,
                   help="wall-clock budget of the whole run (0: none): no "
                   "case is prepared and no compile started past it")
    p.add_argument("--compile-estimate", type=float, default=40,
                   help="seconds a max-autotune compile is assumed to take "
                   "before one has been measured")
    p.add_argument("--no-compile", dest="compile", action="store_false",
                   help="no torch.compile baseline")
    p.add_argument("--compile-only", action="store_true",
                   help="only eager and torch.compile (no import or run): "
                   "a second call for the compiles a budget skipped")
    p.add_argument("--decide-jobs", type=int, default=1,
                   help="decide this many cases at once (phase 2)")
    p.add_argument("--fp64-check", action="store_true",
                   help="--run also checks against mtsched's interpreter")
    p.add_argument("--cache-dir", help="the autotune cache (default: a "
                   "fresh temporary directory)")
    p.add_argument("--kernel-cache-dir", help="the cubin cache (default: "
                   "$TMPDIR/mtsched-zoo-gpu-kernels)")
    p.add_argument("--out", default=os.environ.get("OUT") or "zoo-gpu-out")
    p.add_argument("--work", help="per-case files (default OUT/cases)")
    a = p.parse_args(argv)
    try:
        cases = select(a)
    except ValueError as e:
        print("zoo-gpu: error: %s" % e, file=sys.stderr)
        return 2
    if a.decide_jobs < 1:
        print("zoo-gpu: error: --decide-jobs must be at least 1",
              file=sys.stderr)
        return 2
    cuda = a.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("zoo-gpu: error: --device %s but torch.cuda is not available"
              % a.device, file=sys.stderr)
        return 2
    a.dtype = a.dtype or ("bf16" if cuda else "f32")
    a.backend = "cuda" if cuda else "sim"
    a.compile = a.compile and cuda and hasattr(torch, "compile")
    if a.compile_only and not a.compile:
        print("zoo-gpu: error: --compile-only needs cuda and torch.compile",
              file=sys.stderr)
        return 2
    tmp = tempfile.gettempdir()
    own_cache = a.cache_dir is None
    a.cache_dir = a.cache_dir or tempfile.mkdtemp(prefix="mtsched-zoo-gpu-")
    a.kernel_cache_dir = a.kernel_cache_dir or os.path.join(
        tmp, "mtsched-zoo-gpu-kernels")
    # Inductor's and Triton's caches outside --out (large, not results),
    # shared by the shards of one machine.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                          os.path.join(tmp, "mtsched-zoo-gpu-inductor"))
    os.environ.setdefault("TRITON_CACHE_DIR",
                          os.path.join(tmp, "mtsched-zoo-gpu-triton"))
    a.work = a.work or os.path.join(a.out, "cases")
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    if not a.compile_only:
        try:
            a.mtsched_opt = compare.find_mtsched_opt(a.mtsched_opt)
        except FileNotFoundError as e:
            print("zoo-gpu: error: %s" % e, file=sys.stderr)
            return 2
    start = time.time()

    def left():
        return a.budget_seconds - (time.time() - start) \
            if a.budget_seconds else float("inf")

    meta = {"torch": torch.__version__, "device": a.device,
            "gpu": torch.cuda.get_device_name(0) if cuda else None,
            "dtype": a.dtype, "backend": a.backend,
            "decide_jobs": a.decide_jobs}
    log("PyTorch %s, device %s%s, %s, %d case(s), results in %s" % (
        torch.__version__, a.device, " (%s)" % meta["gpu"] if cuda else "",
        a.dtype, len(cases), a.out))
    rows, live = [], {}
    for e, size in cases:
        rows.append({"name": "%s_%s" % (e.name, size), "model": e.name,
                     "size": size, "status": "not reached"})
    skipped = []

    def report(row):
        log("%-24s nodes %4s  attention %s  import %5s s  decide %6s ms"
            "  err %s  graph %s us  %s" % (
                row["name"], row.get("nodes", "-"), row.get("attention", "-"),
                fmt(row.get("import_s"), "%.2f"),
                fmt(row.get("decide_ms"), "%.1f"),
                fmt(row.get("norm_rel"), "%.1e"),
                fmt(row.get("mtsched_us"), "%.1f"), row["status"]))

    # Phase 1 (prepare), and with one decide job phase 3 (run) right after
    # it: a run cut short keeps whole rows.
    for (e, size), row in zip(cases, rows):
        if left() <= 0:
            row["status"] = "skipped for time"
            skipped.append(row["name"])
            continue
        if a.compile_only:
            module, names, inputs = build(e, size, a.device, DTYPES[a.dtype])
            row["ref"] = [t.detach().float().cpu().numpy()
                          for t in eager(module, inputs)]
            row["status"] = "compile only"
            live[row["name"]] = (module, inputs)
            continue
        try:
            got = prepare(e, size, a, row)
        except Exception as ex:  # noqa: BLE001 - one row per failure
            row["status"] = "FAIL prepare: %s: %s" % (
                type(ex).__name__, (str(ex).splitlines() or [""])[0][:200])
            got = None
        if got is not None:
            row["status"] = "prepared"
            live[row["name"]] = (got[0], got[2])
            if a.decide_jobs == 1:
                guarded("run", lambda r: run(a, r), row)
        if a.decide_jobs == 1 or row["status"] != "prepared":
            report(row)
        save(a, rows, meta)

    # Phase 2 (decide, --decide-jobs at once), then phase 3 one at a time.
    if a.decide_jobs > 1:
        ready = [r for r in rows if r["status"] == "prepared"]
        with concurrent.futures.ThreadPoolExecutor(a.decide_jobs) as pool:
            list(pool.map(lambda r: guarded("decide", lambda x: decide(a, x),
                                            r), ready))
        save(a, rows, meta)
        for row in ready:
            if row["status"] != "prepared":
                report(row)
                continue
            if left() <= 0:
                row["status"] = "skipped for time (decided, not run)"
                skipped.append(row["name"])
            else:
                guarded("run", lambda r: run(a, r), row)
            report(row)
            save(a, rows, meta)
    if skipped:
        log("skipped for time (%d): %s" % (len(skipped), ", ".join(skipped)))

    # Phase 4: eager, then max-autotune while the budget lasts.
    if cuda:
        for row in rows:
            if row["name"] in live:
                guarded("eager timing", time_eager, row, *live[row["name"]])
        save(a, rows, meta)
    if a.compile:
        took, no_time = [], []
        for row in rows:
            if row["name"] not in live:
                continue
            # The next compile is assumed to take 1.5x the median so far
            # (--compile-estimate before any): none starts that would
            # likely end past the budget.
            est = 1.5 * sorted(took)[len(took) // 2] if took else \
                a.compile_estimate
            if left() < est:
                row["compile_skipped"] = "skipped for time"
                no_time.append(row["name"])
                continue
            time_compile(row, *live[row["name"]])
            if row.get("compile_s"):
                took.append(row["compile_s"])
            log("%-24s eager %s us  max-autotune %s us (compiled in %s s)%s"
                % (row["name"], fmt(row.get("eager_us"), "%.1f"),
                   fmt(row.get("compile_us"), "%.1f"),
                   fmt(row.get("compile_s"), "%.0f"),
                   "  " + row["compile_error"] if "compile_error" in row
                   else ""))
            save(a, rows, meta)
        if no_time:
            log("torch.compile skipped for time (%d): %s; run them with "
                "--compile-only --only ..." % (len(no_time),
                                               ", ".join(no_time)))
    save(a, rows, meta)
    if own_cache:
        shutil.rmtree(a.cache_dir, ignore_errors=True)
    failed = [r["name"] for r in rows if r["status"].startswith("FAIL")]
    if a.compile_only:
        log("%d of %d case(s) compiled and timed, %d skipped for time "
            "(%.0f s)" % (sum(1 for r in rows if r.get("compile_us")),
                          len(rows), len(rows) - len(live) + sum(
                              1 for r in rows if r.get("compile_skipped")),
                          time.time() - start))
        return 1 if failed else 0
    passed = sum(1 for r in rows if r["status"] == "PASS")
    log("%d of %d case(s) pass, %d failed%s, %d skipped for time (%.0f s)"
        % (passed, len(rows), len(failed),
           " (" + ", ".join(failed) + ")" if failed else "",
           len(skipped), time.time() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
