#!/usr/bin/env python3
"""Tables from the reports bench/gemm-sweep.sh writes (DIR/gemm.json,
DIR/epilogue.json): every GEMM choice per shape, then the best template of
each family against cuBLAS, then fused epilogues against cuBLAS + epilogue.
The template-vs-cuBLAS table is also plotted to DIR/gemm.png (bench/plots.py,
if matplotlib is installed)."""
import json
import os
import sys

d = sys.argv[1]
SHAPES = {"@mm4096": (4096, 4096, 4096), "@mm16": (16, 4096, 4096),
          "@mm64": (64, 4096, 4096), "@mm256": (256, 4096, 4096),
          "@bias_relu": (4096, 4096, 4096), "@res_rms": (4096, 4096, 4096),
          "@res_rms256": (4096, 256, 4096)}


def load(name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def tflops(graph, ms):
    m, n, k = SHAPES[graph]
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def fmt(ms):
    return "-" if ms is None else "%.1f" % (ms * 1000)


gemm = load("gemm.json")
if gemm:
    print("\nEvery choice (us; not ok: status)")
    for n in gemm["nodes"]:
        cells = []
        for c in n["choices"]:
            cells.append("%s=%s" % (c["name"], fmt(c["ms"]) if c["status"] == "ok"
                                    else c["status"] + ":" + c.get("message", "")[:60]))
        print(n["graph"], "; ".join(cells))
    print("\n| M x N x K | best wgmma | best mma.sync | best split-K | cuBLAS | best template / cuBLAS |")
    print("|---|---|---|---|---|---|")
    for n in gemm["nodes"]:
        ok = [c for c in n["choices"] if c["status"] == "ok" and c["ms"]]
        best = {}
        for fam, pred in (("wg", lambda c: c["name"].startswith("gemm_wg_")),
                          ("mma", lambda c: c["name"].startswith("gemm_")
                           and not c["name"].startswith("gemm_wg_")
                           and "_k" not in c["name"]),
                          ("splitk", lambda c: c["name"].startswith("gemm_")
                           and "_k" in c["name"]),
                          ("blas", lambda c: c["name"] == "extern.cublas")):
            cs = [c for c in ok if pred(c)]
            best[fam] = min(cs, key=lambda c: c["ms"]) if cs else None
        m, nn, k = SHAPES[n["graph"]]
        cell = lambda c: "-" if not c else "%s %s us, %.0f TFLOP/s" % (
            c["name"], fmt(c["ms"]), tflops(n["graph"], c["ms"]))
        ratio = "-"
        tmpl = [best[f] for f in ("wg", "mma", "splitk") if best[f]]
        if tmpl and best["blas"]:
            top = min(tmpl, key=lambda c: c["ms"])
            ratio = "%.0f%%" % (100 * best["blas"]["ms"] / top["ms"])
        print("| %d x %d x %d | %s | %s | %s | %s | %s |" % (
            m, nn, k, cell(best["wg"]), cell(best["mma"]),
            cell(best["splitk"]), cell(best["blas"]), ratio))

epi = load("epilogue.json")
if epi:
    print("\n| graph | cuBLAS + epilogue | best unfused template + epilogue | best fused template | chosen |")
    print("|---|---|---|---|---|")
    for n in epi["nodes"]:
        e = n.get("epilogue_ms")
        ok = [c for c in n["choices"] if c["status"] == "ok" and c["ms"]]
        blas = [c for c in ok if c["name"] == "extern.cublas"]
        tm = [c for c in ok if c["name"].startswith("gemm_")]
        fused = [c for c in n["choices"] if c["name"].startswith("gemm_")
                 and c.get("fused_ms") and not c.get("fused_predicted")]
        b = "-" if not (blas and e) else "%s + %s = %s" % (
            fmt(blas[0]["ms"]), fmt(e), fmt(blas[0]["ms"] + e))
        t = "-"
        if tm and e:
            bt = min(tm, key=lambda c: c["ms"])
            t = "%s + %s = %s (%s)" % (fmt(bt["ms"]), fmt(e), fmt(bt["ms"] + e), bt["name"])
        f = "none fused"
        if fused:
            bf = min(fused, key=lambda c: c["fused_ms"])
            f = "%s (%s)" % (fmt(bf["fused_ms"]), bf["name"])
        print("| %s | %s | %s | %s | %s%s |" % (
            n["graph"], b, t, f, n["chosen"], " fused" if n["epilogue_fused"] else ""))

if gemm:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import plots
    plots.gemm(os.path.join(d, "gemm.json"), os.path.join(d, "gemm.png"),
               "GEMM templates vs cuBLAS")
