#!/usr/bin/env python3
"""Tables for scripts/gpu-e2e.sh from mtsched-opt's JSON reports.

  gpu-e2e-summary.py decisions REPORT...   per node: decision, fused, time;
                                           whether every rank (and every
                                           report) decided alike
  gpu-e2e-summary.py modes DIR             V1 vs V2: autotune wall time and
                                           syncs of DIR/v_{threads,mpi}_*.json
"""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def decisions(paths):
    seen = {}
    ok = True
    for p in paths:
        r = load(p)
        if r is None:
            print(f"{p}: no report")
            continue
        name = os.path.basename(p)
        print(f"{name}: backend {r['backend']}, {len(r['ranks'])} ranks, "
              f"pre-sync ok={r['sync']['ok']} {r['sync']['ms']:.2f} ms")
        print("| node | decision | fused | time us (max over ranks) | measured |")
        print("|---|---|---|---:|---|")
        for n in r["nodes"]:
            c = next((c for c in n["choices"] if c["name"] == n["chosen"]), {})
            us = (c.get("fused_ms") if n["epilogue_fused"] else c.get("ms")) or 0
            measured = c.get("status") == "ok" and not n["fallback"]
            ok &= measured
            print(f"| {n['name']} | {n['chosen']} | {n['epilogue_fused']} | "
                  f"{1000 * us:.1f} | {'yes' if measured else 'NO'} |")
        per_rank = [x["decisions"] for x in r["ranks"]]
        alike = all(d == per_rank[0] for d in per_rank)
        ok &= alike
        print(f"every rank decided alike: {'yes' if alike else 'NO'}")
        seen[name] = per_rank[0]
    if len(seen) > 1:
        vals = list(seen.values())
        print("the reports decided alike: " +
              ("yes" if all(v == vals[0] for v in vals) else "no"))
    print("all decided from measurements, ranks agreeing: " +
          ("yes" if ok and seen else "NO"))


def modes(d):
    # V1 benchmarks while lowering, V2 in the autotune pass: count both.
    print("| ranks | mode | lower + autotune ms | syncs | sync ms |")
    print("|---|---|---:|---:|---:|")
    for kind in ("threads", "mpi"):
        for mode in ("immediate", "deferred"):
            r = load(os.path.join(d, f"v_{kind}_{mode}.json"))
            if r is None:
                continue
            ph = r["phases_ms"]
            print(f"| {kind} | {mode} | "
                  f"{ph.get('lower', 0) + ph.get('autotune', 0):.1f} | "
                  f"{r['sync']['count']} | {r['sync']['ms']:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "decisions":
        decisions(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "modes":
        modes(sys.argv[2])
    else:
        sys.exit(__doc__)
