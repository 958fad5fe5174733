"""Runs the zoo: for every model and size, import (no custom op allowed),
verify, decide under every fusion heuristic and check each schedule with
verify-schedule, evaluate with the fp64 interpreter on the inputs eager
PyTorch gets and compare.

    /usr/bin/python3 examples/zoo/run_zoo.py --mtsched-opt build/tools/mtsched-opt/mtsched-opt \\
        [--only gpt2,llama] [--sizes decode,prefill] [--out DIR]

One line per case: name, size, nodes, attention ops, import seconds,
decide seconds (the default heuristic), max norm-wise relative error, and
PASS or FAIL with the first reason. Exit 1 if any case failed.
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from mtsched_torch import import_module  # noqa: E402
from mtsched_torch import collectives, compare  # noqa: E402
import zoo  # noqa: E402

HEURISTICS = ("cost-model", "always", "never")


def run(opt, args):
    p = subprocess.run([opt] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, p.stderr.strip().splitlines()[-1:] or [""]


def case(entry, size, opt, out):
    name = "%s_%s" % (entry.name, size)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    module = entry.factory().eval()
    compare.init_weights(module, 0)
    pairs = entry.inputs(size)
    names = [n for n, _ in pairs]
    tensors = [t for _, t in pairs]
    row = {"name": name, "nodes": 0, "attention": 0, "import_s": 0.0,
           "decide_s": 0.0, "err": None, "status": "PASS"}
    t0 = time.time()
    try:
        res = import_module(module, tensors, name, 1, "make_fx"
                            if not hasattr(torch, "export") else "auto",
                            names, quiet=True)
    except Exception as e:  # noqa: BLE001 - reported as the case's failure
        row["status"] = "FAIL import: %s: %s" % (type(e).__name__,
                                                 str(e).splitlines()[0][:120])
        return row
    row["import_s"] = time.time() - t0
    row["nodes"] = len(res.graph.nodes)
    row["attention"] = sum(1 for n in res.graph.nodes if n.op == "attention")
    mir = os.path.join(d, name + ".mir")
    with open(mir, "w") as f:
        f.write(res.text())
    if res.unmapped:
        row["status"] = "FAIL custom " + ", ".join(
            "%s x%d" % kv for kv in sorted(res.unmapped.items()))
        return row
    rc, err = run(opt, [mir, "-o", os.devnull])
    if rc:
        row["status"] = "FAIL verify: " + err[0]
        return row
    for h in HEURISTICS:
        dec = os.path.join(d, "decided-%s.mir" % h)
        t0 = time.time()
        rc, err = run(opt, ["--pipeline=default", "--quiet", "--no-cache",
                            "--fusion-heuristic=" + h, mir, "-o", dec])
        if h == HEURISTICS[0]:
            row["decide_s"] = time.time() - t0
        if rc:
            row["status"] = "FAIL decide (%s): %s" % (h, err[0])
            return row
        rc, err = run(opt, ["--pipeline=verify-schedule", dec, "-o",
                            os.devnull])
        if rc:
            row["status"] = "FAIL verify-schedule (%s): %s" % (h, err[0])
            return row
    compare.save_inputs(res, module, tensors, names, os.path.join(d, "in"))
    rc, err = run(opt, ["--pipeline=default", "--quiet", "--no-cache",
                        "--interpret", "--run-inputs=" + os.path.join(d, "in"),
                        "--run-outputs=" + os.path.join(d, "outs"), mir,
                        "-o", os.devnull])
    if rc:
        row["status"] = "FAIL interpret: " + err[0]
        return row
    with torch.no_grad(), collectives.mode("local"):
        ref = module(*tensors)
    refs = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    worst = 0.0
    for i, out in enumerate(res.outputs):
        ours = np.load(os.path.join(d, "outs", out + ".npy"))
        _, nrm = compare.errors(ours, refs[i].double().numpy())
        worst = max(worst, nrm)
    row["err"] = worst
    if not worst <= compare.TOLERANCE["f32"]:
        row["status"] = "FAIL mismatch (norm rel. error %.2e > %.0e)" % (
            worst, compare.TOLERANCE["f32"])
    return row


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--mtsched-opt", required=True)
    p.add_argument("--only", default="")
    p.add_argument("--skip", default="")
    p.add_argument("--sizes", default="decode,prefill")
    p.add_argument("--out", default="zoo-out")
    p.add_argument("--markdown", metavar="FILE",
                   help="also write docs/IMPORT.md's zoo table")
    a = p.parse_args(argv)
    only = set(filter(None, a.only.split(",")))
    skip = set(filter(None, a.skip.split(",")))
    rows = []
    for size in a.sizes.split(","):
        for e in zoo.ZOO:
            if (only and e.name not in only) or e.name in skip:
                continue
            r = case(e, size, a.mtsched_opt, a.out)
            rows.append(r)
            print("zoo: %-24s nodes %4d  attention %d  import %5.2f s  "
                  "decide %5.2f s  err %s  %s" % (
                      r["name"], r["nodes"], r["attention"], r["import_s"],
                      r["decide_s"], "-" if r["err"] is None else
                      "%.1e" % r["err"], r["status"]), flush=True)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(rows))
    return 1 if any(r["status"] != "PASS" for r in rows) else 0


def markdown(rows):
    """docs/IMPORT.md's zoo table: one row per model, both sizes side by
    side."""
    by = {}
    for r in rows:
        model, size = r["name"].rsplit("_", 1)
        by.setdefault(model, {})[size] = r
    lines = ["| model | decode: nodes / attention ops | import (s) | decide (s) "
             "| error | prefill: nodes / attention | import (s) | decide (s) "
             "| error | result |", "|---|---|---|---|---|---|---|---|---|---|"]
    for model, sizes in by.items():
        cells = [model]
        ok = True
        for size in ("decode", "prefill"):
            r = sizes.get(size)
            if r is None:
                cells += ["-"] * 4
                continue
            ok &= r["status"] == "PASS"
            cells += ["%d / %d" % (r["nodes"], r["attention"]),
                      "%.2f" % r["import_s"], "%.2f" % r["decide_s"],
                      "-" if r["err"] is None else "%.1e" % r["err"]]
        status = "pass" if ok else "; ".join(
            sorted(set(r["status"] for r in sizes.values()
                       if r["status"] != "PASS")))
        lines.append("| " + " | ".join(cells + [status]) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
