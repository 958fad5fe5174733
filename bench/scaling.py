#!/usr/bin/env python3
"""Parse -> lower -> fuse -> autotune (simulator) time on generated graphs.

Runs `mtsched-opt --pipeline=default --ranks=1` on graphs of about 1k, 10k,
100k and 1M nodes and reports the wall time of the whole process (median of
--repeat runs) and of each phase from the JSON report. Prints a Markdown table.

  python3 bench/scaling.py [--opt PATH] [--max-nodes 1000000]
"""
import argparse
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
    a = p.parse_args()
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
            n *= 10


if __name__ == "__main__":
    main()
