"""torch.compile(backend="mtsched") against eager, Inductor and --run, per
gallery layer, and a second process's warm start (issue 37's "What it must
show", one GPU).

    python3 bench/torch_backend_bench.py --build-dir .device --out DIR
    python3 bench/torch_backend_bench.py --build-dir .device --warm-only
    python3 bench/torch_backend_bench.py --list

Two parts, each also alone (--warm-only, --gallery-only):

* Warm start: the Llama-3-8B decode layer compiled with backend="mtsched"
  in a first process, then in a second one, both on a fresh cache
  (MTSCHED_TORCH_CACHE): first-call wall time (torch.compile's whole first
  call: Dynamo, the import, the decision, the runtime's prepare), the
  backend's own compile time, and where things came from (the IR and the
  decisions from the caches, kernels from the kernel cache or NVRTC,
  mtsched-opt runs: each one autotunes, i.e. benchmarks).
* Gallery: every examples/torch/gallery.py module at world size 1 (its
  collectives local), --size decode (or prefill), in this process: eager,
  backend="mtsched" (steady state per call: the runtime replays a CUDA
  graph while its pointers are stable), `mtsched-opt --run` on the same
  decided IR ("decided graph G us as a CUDA graph"), and
  torch.compile(mode="max-autotune") while --budget-s lasts (its compile
  takes tens of seconds a layer). Outputs against eager within bf16
  tolerance.

Writes DIR/torch-backend.md (the tables) and DIR/torch-backend.json.
PyTorch 2.x with CUDA; --build-dir holds mtsched-opt (bin/ or
tools/mtsched-opt/) and libmtsched_runtime.so (lib/ or lib/RuntimeApi/).
Exit status 0 if every mtsched row matched eager and the warm process ran
no mtsched-opt and compiled nothing.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples", "torch")
sys.path.insert(0, EXAMPLES)
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

import gallery  # noqa: E402
from mtsched_torch import collectives  # noqa: E402
from mtsched_torch.compare import (TOLERANCE, cuda_time_us, errors,  # noqa
                                   init_weights, random_inputs)

WARM_LAYER = "llama3_8b_layer"


def flat(out):
    """The tensors a module returned, as a list."""
    if isinstance(out, torch.Tensor):
        return [out]
    res = []
    for o in out:
        res += flat(o) if isinstance(o, (list, tuple)) else [o]
    return [t for t in res if isinstance(t, torch.Tensor)]


def worst_error(out, ref):
    """The largest normwise relative error over the outputs (inf if their
    number or shapes differ)."""
    out, ref = flat(out), flat(ref)
    if len(out) != len(ref):
        return float("inf")
    return max([errors(o.float().cpu().numpy(), r.float().cpu().numpy())[1]
                for o, r in zip(out, ref)] or [0.0])


def find_opt(build_dir):
    for c in [os.path.join(build_dir, "bin", "mtsched-opt"),
              os.path.join(build_dir, "tools", "mtsched-opt", "mtsched-opt")]:
        if os.access(c, os.X_OK):
            return c
    raise SystemExit("torch_backend_bench: no mtsched-opt under %s"
                     % build_dir)


def setup(build_dir):
    os.environ["MTSCHED_BUILD_DIR"] = build_dir
    os.environ["MTSCHED_OPT"] = find_opt(build_dir)
    os.environ.pop("MTSCHED_RUNTIME_LIB", None)
    from mtsched_torch import backend
    return backend


def build(name, size, seed, dev="cuda"):
    e = gallery.by_name(name)
    specs = e.inputs(size, 1)
    torch.manual_seed(seed)
    model = e.factory()(world_size=1, device=dev)
    model.eval()
    init_weights(model, seed)
    return model, random_inputs(specs, dev, seed)


def launches(fn):
    """CUDA kernels one call of fn launches, counted by torch.profiler
    (kernels inside a replayed CUDA graph count one each), or None."""
    try:
        from torch.profiler import ProfilerActivity, profile
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sum(1 for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA and
                   "memcpy" not in e.name.lower() and
                   "memset" not in e.name.lower())
    except Exception:  # noqa: BLE001 - a count we cannot take is "-"
        return None


def first_call(label, compile_fn, inputs):
    """(compiled module, its first output, seconds of the first call,
    warnings' messages)."""
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.cuda.synchronize()
        t0 = time.time()
        cm = compile_fn()
        out = cm(*inputs)
        torch.cuda.synchronize()
        first = time.time() - t0
    msgs = [str(x.message) for x in w if "mtsched" in str(x.message)]
    return cm, out, first, msgs


# -- warm start ------------------------------------------------------------

def warm_child(a):
    """One process of the warm-start pair: compiles WARM_LAYER with
    backend="mtsched" and prints one JSON line."""
    backend = setup(a.build_dir)
    model, inputs = build(a.warm_layer, "decode", a.seed)
    with torch.no_grad(), collectives.mode("local"):
        ref = model(*inputs)
        # torch's own start-up (CUDA context, cuBLAS) is not the backend's.
        torch.cuda.synchronize()
        cm, out, first, msgs = first_call("mtsched", lambda: torch.compile(
            model, backend="mtsched", dynamic=False), inputs)
        err = worst_error(out, ref)
        us = cuda_time_us(lambda: cm(*inputs))
    recs = [dict(r) for r in backend.GRAPHS]
    for r in recs:
        r.update({"live_" + k: v for k, v in
                  backend.live_stats(r["name"]).items()})
    nvrtc = False
    try:
        with open("/proc/self/maps") as f:
            nvrtc = "libnvrtc" in f.read()
    except OSError:
        pass
    print("WARM-JSON " + json.dumps({
        "first_call_s": first, "us": us, "err": err, "graphs": recs,
        "eager": backend.STATS["eager"], "warnings": msgs,
        "opt_runs": backend.OPT_RUNS[0], "nvrtc_loaded": nvrtc}))
    return 0


def warm_start(a, cache):
    rows = []
    env = dict(os.environ, MTSCHED_TORCH_CACHE=cache,
               MTSCHED_TORCH_VERBOSE="1")
    for label in ["first process", "second process"]:
        t0 = time.time()
        p = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--warm-child",
             "--build-dir", a.build_dir, "--seed", str(a.seed),
             "--warm-layer", a.warm_layer],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, env=env, timeout=a.warm_timeout_s)
        wall = time.time() - t0
        for line in p.stderr.splitlines():
            if line.startswith("mtsched: "):
                print("%s: %s" % (label, line), file=sys.stderr)
        js = [ln[len("WARM-JSON "):] for ln in p.stdout.splitlines()
              if ln.startswith("WARM-JSON ")]
        if p.returncode != 0 or not js:
            print("%s failed (rc %d):\n%s" % (label, p.returncode,
                                              p.stderr[-3000:]),
                  file=sys.stderr)
            rows.append({"label": label, "failed": True,
                         "process_s": wall})
            continue
        r = json.loads(js[0])
        r.update({"label": label, "process_s": wall})
        rows.append(r)
    return rows


def warm_table(rows):
    lines = ["| process | first call s | backend compile s (import / "
             "decide / prepare) | IR | decisions | kernels (cache / NVRTC) "
             "| mtsched-opt runs | us/call | norm rel err |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("failed"):
            lines.append("| %s | FAILED | | | | | | | |" % r["label"])
            continue
        g = r["graphs"]
        comp = sum(x["compile_s"] for x in g)
        parts = "%.2f / %.2f / %.2f" % tuple(
            sum(x[k] for x in g) for k in ["import_s", "decide_s",
                                           "prepare_s"])
        lines.append("| %s | %.2f | %.3f (%s) | %s | %s | %d (%d / %d) | %d "
                     "| %.1f | %.1e |" % (
                         r["label"], r["first_call_s"], comp, parts,
                         ",".join(x["ir"] for x in g) or "-",
                         ",".join(x["decided"] for x in g) or "-",
                         sum(x.get("kernels", 0) for x in g),
                         sum(x.get("kernels_cached", 0) for x in g),
                         sum(x.get("kernels_compiled", 0) for x in g),
                         r["opt_runs"], r["us"], r["err"]))
    return lines


def warm_ok(rows):
    if len(rows) != 2 or any(r.get("failed") for r in rows):
        return False
    second = rows[1]
    return bool(second["graphs"]) and second["opt_runs"] == 0 and all(
        x["ir"] == "cache" and x["decided"] == "cache" and
        x.get("kernels_compiled", 1) == 0 for x in second["graphs"])


# -- gallery ---------------------------------------------------------------

RUN_RE = re.compile(r"decided graph ([0-9.]+) us as a CUDA graph")


def run_graph_us(opt, decided, timeout):
    """`mtsched-opt --run`'s CUDA-graph time of a decided IR file (us), or
    None with the reason."""
    # The backend's kernel cache beside the decided IR: --run compiles
    # nothing the runtime compiled already.
    kc = os.path.join(os.path.dirname(decided), "kernels")
    p = subprocess.run([opt, "--backend=cuda", "--run", "--quiet",
                        "--run-check=false", "--kernel-cache-dir=" + kc,
                        "-o", os.devnull, decided],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=timeout)
    us = [float(m.group(1)) for m in RUN_RE.finditer(p.stdout)]
    if p.returncode != 0 or not us:
        tail = p.stdout.strip().splitlines()[-1:] or ["(no output)"]
        return None, "rc %d: %s" % (p.returncode, tail[0][:200])
    return sum(us), None


def gallery_rows(a, backend, rows, save):
    """Fills rows (one per layer), calling save() after each step: a run
    cut short by its time limit keeps what it measured."""
    opt = os.environ["MTSCHED_OPT"]
    names = a.layers or [e.name for e in gallery.GALLERY]
    # The warm-start layer first, its max-autotune row at once (the
    # comparison docs/RUNTIME.md quotes), whatever the budget.
    names = sorted(names, key=lambda n: n != a.warm_layer)
    t_start = time.time()
    for name in names:
        save()
        if rows and rows[-1]["layer"] == a.warm_layer and \
                "mtsched_us" in rows[-1] and not a.no_inductor:
            inductor_row(a, rows[-1])
            save()
        row = {"layer": name, "size": a.size}
        rows.append(row)
        try:
            model, inputs = build(name, a.size, a.seed)
        except Exception as e:  # noqa: BLE001 - a row says why
            row["status"] = "cannot build: %s" % str(e)[:200]
            continue
        with torch.no_grad(), collectives.mode("local"):
            ref = model(*inputs)
            row["eager_us"] = cuda_time_us(lambda: model(*inputs))
            row["eager_launches"] = launches(lambda: model(*inputs))
            n0, e0 = len(backend.GRAPHS), len(backend.STATS["eager"])
            try:
                cm, out, first, msgs = first_call(
                    "mtsched", lambda: torch.compile(
                        model, backend="mtsched", dynamic=False), inputs)
                row["mtsched_first_s"] = first
                row["mtsched_err"] = worst_error(out, ref)
                if not row["mtsched_err"] <= TOLERANCE["bf16"]:
                    # The backend's own rule (docs/RUNTIME.md): as close
                    # to a float64 run of the model as eager is.
                    from mtsched_torch.backend_check import compare_fp64
                    outs = list(out) if isinstance(out, (list, tuple)) \
                        else [out]
                    refs = list(ref) if isinstance(ref, (list, tuple)) \
                        else [ref]
                    row["fp64_ok"], row["fp64"] = compare_fp64(
                        outs, refs, model, inputs)
                row["mtsched_us"] = cuda_time_us(lambda: cm(*inputs))
                row["mtsched_launches"] = launches(lambda: cm(*inputs))
            except Exception as e:  # noqa: BLE001
                row["status"] = "mtsched failed: %s: %s" % (
                    type(e).__name__, str(e).splitlines()[0][:200]
                    if str(e) else "")
                continue
            recs = backend.GRAPHS[n0:]
            row["graphs"] = len(recs)
            row["fell_back"] = backend.STATS["eager"][e0:]
            # Each graph's accuracy check (docs/RUNTIME.md).
            row["checks"] = [{k: r.get(k) for k in [
                "checked", "check_error", "check_s", "check_skipped",
                "check_fp64"]}
                for r in recs]
            row["runtime"] = {}
            for r in recs:
                for k, v in backend.live_stats(r["name"]).items():
                    row["runtime"][k] = row["runtime"].get(k, 0) + v
            paths = sorted({r["decided_path"] for r in recs})
            total, whys = 0.0, []
            for path in paths:
                us, why = run_graph_us(opt, path, a.run_timeout_s)
                if us is None:
                    whys.append(why)
                else:
                    total += us
            if paths and not whys:
                row["run_graph_us"] = total
            elif whys:
                row["run_why"] = "; ".join(whys)
            cm = None
            torch._dynamo.reset()
        row["status"] = (
            "match" if row["mtsched_err"] <= TOLERANCE["bf16"] else
            "match against float64 (%s)" % row["fp64"][:200]
            if row.get("fp64_ok") else "MISMATCH")
        if row["fell_back"]:
            row["status"] += "; %d graph(s) eager: %s" % (
                len(row["fell_back"]), "; ".join(row["fell_back"])[:300])
        model = inputs = ref = None
        torch.cuda.empty_cache()
    # Inductor after, while the budget lasts: its autotuning dominates. The
    # warm-start layer has its max-autotune row already (unless it was the
    # last layer).
    for row in rows:
        save()
        if a.no_inductor or "mtsched_us" not in row or \
                "inductor_us" in row or "inductor" in row:
            continue
        if row["layer"] != a.warm_layer and \
                time.time() - t_start > a.budget_s:
            row["inductor"] = "skipped (--budget-s %d spent)" % a.budget_s
            continue
        inductor_row(a, row)
    save()
    return rows


def inductor_row(a, row):
    """torch.compile(mode="max-autotune") of row's layer into row."""
    model, inputs = build(row["layer"], a.size, a.seed)
    with torch.no_grad(), collectives.mode("local"):
        ref = model(*inputs)
        try:
            cm, out, first, _ = first_call(
                "inductor", lambda: torch.compile(
                    model, mode="max-autotune", dynamic=False), inputs)
            row["inductor_first_s"] = first
            row["inductor_err"] = worst_error(out, ref)
            row["inductor_us"] = cuda_time_us(lambda: cm(*inputs))
            row["inductor_launches"] = launches(lambda: cm(*inputs))
            cm = None
        except Exception as e:  # noqa: BLE001 - the row says why
            row["inductor"] = "failed: %s" % (str(e).splitlines() or [""])[0][
                :200]
        torch._dynamo.reset()
    model = inputs = ref = None
    torch.cuda.empty_cache()


def gallery_table(rows):
    def f(x, fmt):
        return fmt % x if isinstance(x, (int, float)) else "-"
    lines = ["| layer | eager us | mtsched us | --run graph us | mtsched / "
             "--run | max-autotune us | mtsched / max-autotune | mtsched "
             "first call s | Inductor first call s | err (mtsched) | "
             "runtime: captures, staged in/out | launches (eager / mtsched "
             "/ max-autotune) | status |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, g, i = r.get("mtsched_us"), r.get("run_graph_us"), \
            r.get("inductor_us")
        rt = r.get("runtime", {})
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | "
                     "%s | %s | %s |" % (
                         r["layer"], f(r.get("eager_us"), "%.1f"),
                         f(m, "%.1f"), f(g, "%.1f") if g else
                         r.get("run_why", "-"),
                         f(m / g, "%.3fx") if m and g else "-",
                         f(i, "%.1f") if i else r.get("inductor", "-"),
                         f(m / i, "%.2fx") if m and i else "-",
                         f(r.get("mtsched_first_s"), "%.1f"),
                         f(r.get("inductor_first_s"), "%.1f"),
                         f(r.get("mtsched_err"), "%.1e"),
                         "%s, %s/%s" % (rt.get("captures", "-"),
                                        rt.get("staged_inputs", "-"),
                                        rt.get("staged_outputs", "-")),
                         " / ".join(f(r.get(k + "_launches"), "%d") for k in
                                    ("eager", "mtsched", "inductor")),
                         r.get("status", "-")))
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default=None,
                   help="folder for torch-backend.md/.json ($OUT if set)")
    p.add_argument("--size", choices=["decode", "prefill"], default="decode")
    p.add_argument("--layers", action="append", default=[],
                   help="a gallery module (repeatable; default: all)")
    p.add_argument("--budget-s", type=int, default=150,
                   help="seconds after which max-autotune rows are skipped")
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--warm-only", action="store_true")
    p.add_argument("--gallery-only", action="store_true")
    p.add_argument("--warm-layer", default=WARM_LAYER)
    p.add_argument("--warm-timeout-s", type=int, default=150)
    p.add_argument("--run-timeout-s", type=int, default=120)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--list", action="store_true")
    p.add_argument("--warm-child", action="store_true",
                   help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.list:
        for e in gallery.GALLERY:
            print(e.name)
        return 0
    a.build_dir = os.path.abspath(a.build_dir)
    if a.warm_child:
        return warm_child(a)
    if not torch.cuda.is_available():
        print("torch_backend_bench: needs a CUDA device", file=sys.stderr)
        return 2
    out = a.out or os.environ.get("OUT") or "."
    os.makedirs(out, exist_ok=True)
    try:
        backend = setup(a.build_dir)
    except ImportError as e:
        print("torch_backend_bench: the mtsched backend is unavailable: %s"
              % e, file=sys.stderr)
        return 2
    result = {"device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "size": a.size}
    md = ["# torch.compile(backend=\"mtsched\"), %s, torch %s"
          % (result["device"], torch.__version__), ""]
    ok = True

    def save(extra=()):
        text = "\n".join(md + list(extra))
        with open(os.path.join(out, "torch-backend.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(out, "torch-backend.json"), "w") as f:
            json.dump(result, f, indent=1, default=str)
        return text
    if not a.gallery_only:
        with tempfile.TemporaryDirectory(prefix="mtsched-warm-") as cache:
            rows = warm_start(a, cache)
        result["warm"] = rows
        result["warm_ok"] = warm_ok(rows)
        ok &= result["warm_ok"]
        md += ["## Warm start: %s, decode, a fresh cache, two processes"
               % a.warm_layer, ""] + warm_table(rows) + [
            "", "second process warm (IR and decisions from the caches, no "
            "mtsched-opt run, no NVRTC compile): %s" % (
                "yes" if result["warm_ok"] else "NO"), ""]
    if not a.warm_only:
        # The gallery's decisions go to a cache of their own, fresh, so the
        # first-call times include the decision.
        cache = tempfile.mkdtemp(prefix="mtsched-gallery-")
        os.environ["MTSCHED_TORCH_CACHE"] = cache
        rows = []
        result["gallery"] = rows
        head = ["## Gallery layers at world size 1, %s" % a.size, ""]
        gallery_rows(a, backend, rows,
                     lambda: save(head + gallery_table(rows)))
        ok &= all(r.get("status", "").startswith("match") for r in rows)
        md += head + gallery_table(rows) + [""]
    print(save())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
