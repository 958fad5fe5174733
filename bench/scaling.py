#!/usr/bin/env python3
"""Parse -> lower -> fuse -> autotune (simulator) time on generated graphs.

Runs `mtsched-opt --pipeline=default --ranks=1` on graphs of about 1k, 10k,
100k and 1M nodes and reports the wall time of the whole process (median of
--repeat runs) and of each phase from the JSON report. Prints a Markdown
table, and writes the rows to PREFIX.csv and their plot to PREFIX.png
(bench/plots.py; needs matplotlib).

  python3 bench/scaling.py [--opt PATH] [--max-nodes 1000000] [--out PREFIX]
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--opt", default=os.path.join(HERE, "..", "build", "tools",
                                                 "mtsched-opt", "mtsched-opt"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-nodes", type=int, default=1000000)
    p.add_argument("--out", default="scaling",
                   help="write PREFIX.csv and PREFIX.png (default scaling)")
    a = p.parse_args()
    rows = []
    print("| nodes | total s | parse+verify ms | lower ms | fuse ms | autotune ms | us/node |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, "g.mir")
        report = os.path.join(tmp, "r.json")
        n = 1000
        while n <= a.max_nodes:
            with open(graph, "w") as f:
                subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                                "--nodes", str(n), "--world", "1"],
                               stdout=f, check=True)
            cmd = [a.opt, "--pipeline=default", "--quiet", "--no-cache", graph,
                   "-o", os.devnull]
            walls, reports = [], []
            for _ in range(a.repeat):
                # The wall time excludes writing the report, which is large.
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True)
                walls.append(time.perf_counter() - t0)
            subprocess.run(cmd + ["--report=" + report], check=True)
            with open(report) as f:
                reports.append(json.load(f)["phases_ms"])
            wall = statistics.median(walls)
            med = lambda k: statistics.median(r.get(k, 0) for r in reports)
            print("| %d | %.3f | %.1f | %.1f | %.1f | %.1f | %.2f |" %
                  (n, wall, med("parse") + med("verify"), med("lower"),
                   med("fuse"), med("autotune"), wall * 1e6 / n))
            rows.append([n, "%.3f" % wall, "%.1f" % (med("parse") + med("verify")),
                         "%.1f" % med("lower"), "%.1f" % med("fuse"),
                         "%.1f" % med("autotune"), "%.2f" % (wall * 1e6 / n)])
            n *= 10
    # The table's rows as CSV, in the columns bench/plots.py reads.
    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["nodes", "total_s", "parse_verify_ms", "lower_ms",
                    "fuse_ms", "autotune_ms", "us_per_node"])
        w.writerows(rows)
    sys.path.insert(0, HERE)
    import plots
    plots.scaling(a.out + ".csv", a.out + ".png", "Scaling on the simulator")


if __name__ == "__main__":
    main()
