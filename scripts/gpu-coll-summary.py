#!/usr/bin/env python3
"""Markdown table of the 2-GPU all_reduce sweep from a --report JSON.

usage: gpu-coll-summary.py REPORT.json
The sweep is also plotted to REPORT.png (bench/plots.py, if matplotlib is
installed).
Each graph @arN holds one bf16 all_reduce of N bytes per rank followed by a
residual add and an rmsnorm; the report has every choice's time (max over
ranks, median of samples), unfused and fused, and the epilogue alone.
"""
import json
import os
import sys

r = json.load(open(sys.argv[1]))
print("| bytes | nccl us (GB/s) | one_shot us (GB/s) | two_shot us (GB/s) | pick | pick's all_reduce vs fastest "
      "| nccl + rmsnorm kernel us | fused one_shot us | fused two_shot us | fused speedup | decision | decision vs fastest option |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in r["nodes"]:
    if n.get("op") != "all_reduce":
        continue
    b = int(n["graph"].lstrip("@ar").split("_")[0])
    t = {c["name"]: c for c in n["choices"]}

    def us(c, key="ms"):
        v = t.get(c, {}).get(key)
        return None if v is None else v * 1000

    def cell(c):
        u = us(c)
        if u is None:
            return t.get(c, {}).get("status", "-")
        # bus bandwidth at 2 ranks = algorithm bandwidth = bytes / time
        return "%.1f (%.0f)" % (u, b / (u * 1e-6) / 1e9)

    unf = {c: us(c) for c in t if us(c) is not None}
    fastest = min(unf.values()) if unf else None
    # The autotuner's pick (its all_reduce time against the fastest's).
    pick = n.get("chosen", "-")
    epi = n.get("epilogue_ms")
    nccl_epi = (us("nccl") + epi * 1000) if (us("nccl") is not None and epi is not None) else None
    f1, f2 = us("one_shot", "fused_ms"), us("two_shot", "fused_ms")
    fused = [x for x in (f1, f2) if x is not None]
    unfused_best = (fastest + epi * 1000) if (fastest is not None and epi is not None) else None
    sp = ("%.2fx" % (nccl_epi / min(fused))) if (fused and nccl_epi) else "-"
    dec = n.get("chosen", "-") + (" fused" if n.get("epilogue_fused") else "")
    fmt = lambda x: "-" if x is None else "%.1f" % x
    # Every way to run all_reduce + rmsnorm: a choice then the separate
    # kernel, or a fused choice; the decision's time against the fastest.
    opts = {}
    for c in unf:
        if epi is not None:
            opts[c] = unf[c] + epi * 1000
        f = us(c, "fused_ms")
        if f is not None:
            opts[c + " fused"] = f
    dec_vs = ("+%.1f%%" % (100 * (opts[dec] / min(opts.values()) - 1))) if dec in opts else "-"
    print("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        b, cell("nccl"), cell("one_shot"), cell("two_shot"), pick,
        "+%.1f%%" % (100 * (unf[pick] / fastest - 1)) if pick in unf else "-",
        fmt(nccl_epi), fmt(f1), fmt(f2), sp, dec, dec_vs))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "bench"))
import plots  # noqa: E402

plots.allreduce(sys.argv[1], os.path.splitext(sys.argv[1])[0] + ".png",
                "all_reduce sweep")
