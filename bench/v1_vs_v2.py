#!/usr/bin/env python3
"""V1 (immediate) vs V2 (deferred) autotuning on the simulator.

For 1, 3, 5, 10 collective nodes and 2, 4, 8 thread ranks, runs
`mtsched-opt --pipeline=default` in both modes and reports the number of
cross-rank syncs and the autotune pass's wall time (median of --repeat runs,
from the JSON report). Prints a Markdown table, and writes the rows to
PREFIX.csv and their plot to PREFIX.png (bench/plots.py; needs matplotlib).

  python3 bench/v1_vs_v2.py [--opt build/tools/mtsched-opt/mtsched-opt] [--out PREFIX]
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(opt, graph, mode, ranks, report):
    subprocess.run([opt, "--pipeline=default", "--quiet", "--no-cache",
                    "--collective-mode=" + mode, "--ranks=%d" % ranks,
                    "--report=" + report, graph, "-o", os.devnull],
                   check=True)
    with open(report) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--opt", default=os.path.join(HERE, "..", "build", "tools",
                                                 "mtsched-opt", "mtsched-opt"))
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default="v1_vs_v2",
                   help="write PREFIX.csv and PREFIX.png (default v1_vs_v2)")
    a = p.parse_args()
    rows = []
    print("| collectives | ranks | V1 syncs | V2 syncs | V1 sync ms | V2 sync ms | V1 autotune ms | V2 autotune ms | V1/V2 |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        for layers in (1, 3, 5, 10):
            for ranks in (2, 4, 8):
                graph = os.path.join(tmp, "g.mir")
                with open(graph, "w") as f:
                    subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                                    "--layers", str(layers), "--world", str(ranks)],
                                   stdout=f, check=True)
                row = {}
                for mode in ("immediate", "deferred"):
                    times, sync_ms, syncs = [], [], None
                    for _ in range(a.repeat):
                        r = run(a.opt, graph, mode, ranks, report)
                        # V1 decides while lowering, so its autotuning time is
                        # in `lower`; V2's is in `autotune`.
                        ph = r["phases_ms"]
                        times.append(ph.get("lower", 0) + ph.get("autotune", 0))
                        sync_ms.append(r["sync"]["ms"])
                        syncs = r["sync"]["count"]
                    row[mode] = (syncs, statistics.median(sync_ms),
                                 statistics.median(times))
                v1, v2 = row["immediate"], row["deferred"]
                print("| %d | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.1fx |" %
                      (layers, ranks, v1[0], v2[0], v1[1], v2[1], v1[2], v2[2],
                       v1[2] / v2[2]))
                rows.append([layers, ranks, v1[0], v2[0], "%.3f" % v1[1],
                             "%.3f" % v2[1], "%.3f" % v1[2], "%.3f" % v2[2]])
    # The table's rows as CSV, in the columns bench/plots.py reads.
    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["collectives", "ranks", "v1_syncs", "v2_syncs",
                    "v1_sync_ms", "v2_sync_ms", "v1_autotune_ms",
                    "v2_autotune_ms"])
        w.writerows(rows)
    sys.path.insert(0, HERE)
    import plots
    plots.v1v2(a.out + ".csv", a.out + ".png", "V1 vs V2 on the simulator")


if __name__ == "__main__":
    main()
