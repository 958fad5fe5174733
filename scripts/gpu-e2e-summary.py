#!/usr/bin/env python3
"""Tables for scripts/gpu-e2e.sh from mtsched-opt's JSON reports.

  gpu-e2e-summary.py decisions REPORT...   per node: decision, fused, time;
                                           whether every rank (and every
                                           report) decided alike
  gpu-e2e-summary.py modes DIR             V1 vs V2: autotune wall time and
                                           syncs of DIR/v_{threads,mpi}_*.json
  gpu-e2e-summary.py split DIR             --split-tuning settings vs off, per
                                           graph: wall and autotune time
                                           (median of the DIR/split_CASE_
                                           {threads,mpi}_{off,on,nodes}_N runs),
                                           benchmarks per rank, whether
                                           every run decided alike, and the
                                           traces' time per phase
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


# The trace phases that show where a split run's time went ("Total ..."
# events: summed over the process's threads, so over both thread ranks).
PHASES = ["cuda.query-device", "cuda.open-device", "cuda.nccl.start",
          "cuda.wait-nccl-init",
          "cuda.collective.init", "cuda.nccl.init",
          "cuda.collective.prepare", "cuda.prepare.inputs",
          "cuda.prepare.reference", "cuda.compile", "cuda.check", "cuda.time",
          "benchmark"]


def phase_totals(path):
    t = load(path)
    out = {}
    for e in (t or {}).get("traceEvents", []):
        name = e.get("name", "")
        if name.startswith("Total ") and name[6:] in PHASES:
            out[name[6:]] = e.get("dur", 0) / 1000
    return out


def split(d):
    import re
    import statistics
    walls = {}
    for line in open(os.path.join(d, "summary.txt")):
        m = re.match(r"(split_(\w+?)_(threads|mpi)_(on|off|nodes)_\d+) rc=(\d+) "
                     r"wall_s=([\d.]+)", line)
        if m and m.group(5) == "0":
            walls[m.group(1)] = float(m.group(6))
    cases = sorted({re.match(r"split_(\w+)_(?:threads|mpi)_", n).group(1)
                    for n in walls})
    for case in cases:
        print(f"### {case}")
        print("| ranks | split | runs | wall s (median) | autotune ms (median) "
              "| benchmarks on rank 0 | decided IR |")
        print("|---|---|---:|---:|---:|---:|---|")
        phases = {}
        for kind in ("threads", "mpi"):
            irs = {}
            med = {}
            for s in ("off", "on", "nodes"):
                runs = sorted(n for n in walls
                              if n.startswith(f"split_{case}_{kind}_{s}_"))
                if not runs:
                    continue
                tune, bench = [], []
                per_phase = {}
                for n in runs:
                    r = load(os.path.join(d, n + ".json"))
                    if r is not None:
                        tune.append(r["phases_ms"].get("autotune", 0))
                        bench.append(r.get("benchmarks_run", 0))
                    with open(os.path.join(d, n + ".out")) as f:
                        # The decisions, not the measured times every run
                        # prints beside them (and select-swiglu's).
                        irs[n] = re.sub(
                            r" (fused_)?timings \{[^}]*\}|"
                            r"swiglu_(merged|split)_us = [0-9.inf]+,? ?", "",
                            f.read())
                    for k, v in phase_totals(
                            os.path.join(d, n + ".trace.json")).items():
                        per_phase.setdefault(k, []).append(v)
                phases[(kind, s)] = {k: statistics.median(v)
                                     for k, v in per_phase.items()}
                med[s] = statistics.median(walls[n] for n in runs)
                print(f"| {kind} | {s} | {len(runs)} | {med[s]:.2f} | "
                      f"{statistics.median(tune) if tune else float('nan'):.0f} | "
                      f"{bench[0] if bench else '?'} | "
                      f"{len(set(irs.values()))} distinct decisions so far |")
            if "off" in med and len(med) > 1:
                alike = len(set(irs.values())) == 1
                ratios = ", ".join(f"{s}/off {med[s] / med['off']:.2f}"
                                   for s in ("on", "nodes") if s in med)
                print(f"{case} {kind}: wall {ratios}; every run decided "
                      f"alike: {'yes' if alike else 'NO'}")
                # The issue asks for the split's decisions to be the
                # unsplit run's: runs of each setting that decided what
                # most `off` runs decided.
                offs = [ir for n, ir in irs.items() if f"_{kind}_off_" in n]
                usual = max(set(offs), key=offs.count)
                same = ", ".join(
                    f"{s} {sum(ir == usual for n, ir in irs.items() if f'_{kind}_{s}_' in n)}"
                    f"/{sum(f'_{kind}_{s}_' in n for n in irs)}"
                    for s in ("off", "on", "nodes") if s in med)
                print(f"{case} {kind}: runs deciding as most off runs: {same}")
        cols = sorted(phases)
        if cols:
            print()
            print("| trace phase, ms (median; threads: both ranks summed) | " +
                  " | ".join(f"{k} {s}" for k, s in cols) + " |")
            print("|---|" + "---:|" * len(cols))
            for ph in PHASES:
                print(f"| {ph} | " + " | ".join(
                    f"{phases[c].get(ph, 0):.0f}" for c in cols) + " |")
        print()


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "decisions":
        decisions(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "modes":
        modes(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "split":
        split(sys.argv[2])
    else:
        sys.exit(__doc__)
