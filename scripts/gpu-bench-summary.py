#!/usr/bin/env python3
"""Summarises the reports scripts/gpu-test.sh --bench writes (DIR/*.json)."""
import json
import os
import sys

d = sys.argv[1]


def load(name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def flops(graph):
    m = {"@mm4096": (4096, 4096, 4096), "@mm16": (16, 4096, 4096),
         "@mm64": (64, 4096, 4096), "@mm256": (256, 4096, 4096),
         "@bias_relu": (4096, 4096, 4096), "@res_rms": (4096, 4096, 4096),
         "@res_rms256": (4096, 256, 4096)}[graph]
    return 2.0 * m[0] * m[1] * m[2]


def us(ms):
    return None if ms is None else ms * 1000.0


r = load("gemm.json")
if r:
    print("GEMM (bf16): best template vs cuBLAS")
    for n in r["nodes"]:
        ok = [c for c in n["choices"] if c["status"] == "ok"]
        tmpl = [c for c in ok if c["name"].startswith("gemm_")]
        blas = [c for c in ok if c["name"] == "extern.cublas"]
        bad = [(c["name"], c["status"]) for c in n["choices"] if c["status"] != "ok"]
        f = flops(n["graph"])
        line = n["graph"] + ":"
        if tmpl:
            b = min(tmpl, key=lambda c: c["ms"])
            line += " best %s %.1f us (%.0f TFLOP/s)" % (b["name"], us(b["ms"]), f / b["ms"] / 1e9)
        if blas:
            c = blas[0]
            line += "; cuBLAS %.1f us (%.0f TFLOP/s)" % (us(c["ms"]), f / c["ms"] / 1e9)
        if tmpl and blas:
            line += "; template/cuBLAS = %.0f%%" % (100 * blas[0]["ms"] / b["ms"])
        if bad:
            line += "; not ok: %s" % bad
        print(line)
r = load("epilogue.json")
if r:
    print("Fused epilogues: best fused template vs cuBLAS + separate epilogue kernel")
    for n in r["nodes"]:
        blas = [c for c in n["choices"] if c["name"] == "extern.cublas" and c["status"] == "ok"]
        fused = [c for c in n["choices"] if c.get("fused_ms") is not None and not c.get("fused_predicted")
                 and c["status"] == "ok" and c["name"].startswith("gemm_")]
        fused = [c for c in fused if c["fused_ms"] == c["fused_ms"] and c["fused_ms"] != float("inf")]
        epi = n.get("epilogue_ms")
        line = n["graph"] + ": chosen %s fused=%s" % (n["chosen"], n["epilogue_fused"])
        if blas and epi is not None:
            line += "; cuBLAS %.1f + epilogue %.1f = %.1f us" % (us(blas[0]["ms"]), us(epi), us(blas[0]["ms"] + epi))
        if fused:
            b = min(fused, key=lambda c: c["fused_ms"])
            line += "; best fused %s %.1f us" % (b["name"], us(b["fused_ms"]))
        else:
            msgs = {c.get("message", "") for c in n["choices"] if c.get("message")}
            line += "; no fused template measured %s" % sorted(msgs)[:2]
        print(line)
for name in ("tp_cold.json", "tp_warm.json", "compile1.json", "compile16.json"):
    r = load(name)
    if r:
        print("%s: kernels %s, autotune %.2f s" % (name, r.get("kernels"),
              r["phases_ms"].get("autotune", 0) / 1000.0))
        if name.startswith("tp_"):
            for n in r["nodes"]:
                print("  %s %s -> %s fused=%s" % (n["graph"], n["name"], n["chosen"], n["epilogue_fused"]))
