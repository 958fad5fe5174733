#!/usr/bin/env python3
"""What --report costs: CPU time (user + system), wall time and peak RSS of
`mtsched-opt --pipeline=default --ranks=1` on generated graphs
(bench/gen_graph.py), with and without --report, each the median of --repeat
runs, measured with /usr/bin/time -v. CPU time is the figure to compare on a
shared machine, where wall time mostly measures the neighbours. Prints a
Markdown table.

  python3 bench/report_cost.py [--opt PATH] [--nodes 10000,100000,1000000]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, check=True)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", p.stderr)
    h, m, s = wall.groups()
    secs = int(h or 0) * 3600 + int(m) * 60 + float(s)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    cpu = sum(float(re.search(r"%s time \(seconds\): ([\d.]+)" % k, p.stderr).group(1))
              for k in ("User", "System"))
    return cpu, rss / 1024.0, secs


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--opt", default=os.path.join(HERE, "..", "build", "tools",
                                                 "mtsched-opt", "mtsched-opt"))
    p.add_argument("--nodes", default="10000,100000,1000000")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    print("| nodes | without: CPU s | wall s | peak MB | with --report: CPU s | "
          "wall s | peak MB | CPU added | memory added | report MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, "g.mir")
        report = os.path.join(tmp, "r.json")
        for n in [int(x) for x in a.nodes.split(",")]:
            with open(graph, "w") as f:
                subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                                "--nodes", str(n), "--world", "1"], stdout=f, check=True)
            base = [a.opt, "--pipeline=default", "--quiet", "--no-cache", "--ranks=1",
                    graph, "-o", os.devnull]
            without = [run(base) for _ in range(a.repeat)]
            with_ = [run(base + ["--report=" + report]) for _ in range(a.repeat)]
            med = lambda runs, i: statistics.median(x[i] for x in runs)
            t0, m0, w0 = med(without, 0), med(without, 1), med(without, 2)
            t1, m1, w1 = med(with_, 0), med(with_, 1), med(with_, 2)
            size = os.path.getsize(report) / 1e6
            print("| %d | %.2f | %.1f | %.0f | %.2f | %.1f | %.0f | %+.0f%% | %+.0f%% | %.0f |" %
                  (n, t0, w0, m0, t1, w1, m1, 100 * (t1 - t0) / t0,
                   100 * (m1 - m0) / m0, size))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
