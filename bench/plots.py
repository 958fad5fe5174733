#!/usr/bin/env python3
"""Plots (PNG) of the benchmark results, beside the scripts' Markdown tables.

Every benchmark script calls one of these after printing its table; each
reads the same data the table came from (a --report JSON or the script's
CSV), so a plot never shows numbers the table does not. matplotlib is
optional (Debian: python3-matplotlib): without it the scripts print their
tables and say that no plot was written.

  plots.py allreduce REPORT.json OUT.png [--title T]   # gpu-coll-summary.py
  plots.py gemm GEMM.json OUT.png [--title T]          # gemm-sweep.py
  plots.py v1v2 V1_VS_V2.csv OUT.png [--title T]       # v1_vs_v2.py
  plots.py scaling SCALING.csv OUT.png [--title T]     # scaling.py

The recorded results in bench/results/ are plotted into docs/images/ with
  bench/plots.py --recorded
"""
import argparse
import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def pyplot():
    """matplotlib's pyplot without a display, or None (with a note)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("plots: matplotlib is not installed (Debian: apt-get install "
              "python3-matplotlib); no plot written", file=sys.stderr)
        return None


def save(plt, fig, out):
    fig.tight_layout()
    # No timestamps or software versions in the file: the same data gives
    # the same bytes, so committed plots only change with their data.
    fig.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(fig)
    print("plots: wrote " + out, file=sys.stderr)


def size_label(b):
    for unit, f in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= f:
            return "%d %s" % (b // f, unit)
    return "%d B" % b


def allreduce(report, out, title=None):
    """The all_reduce sweep: every algorithm's time per message size, unfused
    and fused with its residual + rmsnorm epilogue, against NCCL (+ the
    separate epilogue kernel). The report of bench/allreduce-2gpu.mir."""
    plt = pyplot()
    if not plt:
        return False
    r = json.load(open(report))
    rows = []
    for n in r["nodes"]:
        if n.get("op") != "all_reduce":
            continue
        b = int(n["graph"].lstrip("@ar").split("_")[0])
        t = {c["name"]: c for c in n["choices"]}
        us = lambda c, k="ms": (None if t.get(c, {}).get(k) is None
                                else t[c][k] * 1000)
        epi = n.get("epilogue_ms")
        rows.append((b, {c: us(c) for c in ("nccl", "one_shot", "two_shot")},
                     {c: us(c, "fused_ms") for c in ("one_shot", "two_shot")},
                     None if epi is None or us("nccl") is None
                     else us("nccl") + epi * 1000))
    rows.sort()
    xs = [r[0] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    style = {"nccl": ("#495057", "o"), "one_shot": ("#1c7ed6", "s"),
             "two_shot": ("#e8590c", "^")}
    for c, (col, m) in style.items():
        a.plot(xs, [r[1][c] for r in rows], marker=m, color=col, label=c)
    a.set_title("all_reduce alone")
    for c in ("one_shot", "two_shot"):
        col, m = style[c]
        b.plot(xs, [r[2][c] for r in rows], marker=m, color=col,
               label=c + " fused")
    b.plot(xs, [r[3] for r in rows], marker="o", color="#495057",
           linestyle="--", label="nccl + rmsnorm kernel")
    b.set_title("all_reduce + residual + rmsnorm")
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([size_label(x) for x in xs], rotation=45)
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("µs (slowest rank, median)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    save(plt, fig, out)
    return True


GEMM_SHAPES = {"@mm4096": "4096³", "@mm16": "16×4096×4096",
               "@mm64": "64×4096×4096", "@mm256": "256×4096×4096"}


def gemm(report, out, title=None):
    """GEMM templates vs cuBLAS: per shape the best wgmma template, the best
    mma.sync template and cuBLAS, in TFLOP/s. The gemm.json of
    bench/gemm-sweep.sh (graphs @mm4096, @mm16, @mm64, @mm256)."""
    plt = pyplot()
    if not plt:
        return False
    r = json.load(open(report))
    flops = {"@mm4096": (4096, 4096, 4096), "@mm16": (16, 4096, 4096),
             "@mm64": (64, 4096, 4096), "@mm256": (256, 4096, 4096)}
    fams = (("best wgmma template", "#e8590c",
             lambda c: c.startswith("gemm_wg_")),
            ("best mma.sync template", "#1c7ed6",
             lambda c: c.startswith("gemm_") and not c.startswith("gemm_wg_")),
            ("cuBLAS", "#495057", lambda c: c == "extern.cublas"))
    shapes, vals = [], {f[0]: [] for f in fams}
    for n in r["nodes"]:
        if n["graph"] not in flops:
            continue
        m, nn, k = flops[n["graph"]]
        shapes.append(GEMM_SHAPES[n["graph"]])
        ok = [c for c in n["choices"] if c["status"] == "ok" and c.get("ms")]
        for name, _, pred in fams:
            cs = [c["ms"] for c in ok if pred(c["name"])]
            vals[name].append(2.0 * m * nn * k / (min(cs) * 1e-3) / 1e12
                              if cs else 0)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    w = 0.27
    for i, (name, col, _) in enumerate(fams):
        xs = [j + (i - 1) * w for j in range(len(shapes))]
        ax.bar(xs, vals[name], w, color=col, label=name)
        for x, v in zip(xs, vals[name]):
            ax.text(x, v, "%.0f" % v if v else "n/a", ha="center",
                    va="bottom", fontsize=8)
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(shapes)
    ax.set_xlabel("M × N × K (bf16)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    save(plt, fig, out)
    return True


def read_csv(path):
    with open(path) as f:
        return [r for r in csv.DictReader(
            line for line in f if not line.startswith("#"))]


def v1v2(path, out, title=None):
    """V1 (one sync per collective) vs V2 (one pre-sync): the autotune time
    and the total sync time against the number of collectives, one line per
    rank count. The CSV of bench/v1_vs_v2.py."""
    plt = pyplot()
    if not plt:
        return False
    rows = read_csv(path)
    ranks = sorted({int(r["ranks"]) for r in rows})
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = ["#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9"]
    for i, n in enumerate(ranks):
        rs = sorted((r for r in rows if int(r["ranks"]) == n),
                    key=lambda r: int(r["collectives"]))
        xs = [int(r["collectives"]) for r in rs]
        col = colors[i % len(colors)]
        for ax, key in ((a, "autotune_ms"), (b, "sync_ms")):
            ax.plot(xs, [float(r["v1_" + key]) for r in rs], marker="o",
                    color=col, linestyle="--", label="V1, %d ranks" % n)
            ax.plot(xs, [float(r["v2_" + key]) for r in rs], marker="s",
                    color=col, label="V2, %d ranks" % n)
    a.set_title("autotuning (ms)")
    b.set_title("cross-rank syncs, total (ms)")
    for ax in (a, b):
        ax.set_xlabel("collective nodes")
        ax.set_ylabel("ms")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    save(plt, fig, out)
    return True


def scaling(path, out, title=None):
    """Whole-process time and each phase against graph size (log-log), and
    the time per node. The CSV of bench/scaling.py."""
    plt = pyplot()
    if not plt:
        return False
    rows = sorted(read_csv(path), key=lambda r: int(r["nodes"]))
    xs = [int(r["nodes"]) for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.plot(xs, [float(r["total_s"]) * 1000 for r in rows], marker="o",
           color="#212529", label="whole process")
    for key, col in (("parse_verify_ms", "#868e96"), ("lower_ms", "#1c7ed6"),
                     ("fuse_ms", "#2f9e44"), ("autotune_ms", "#e8590c")):
        a.plot(xs, [float(r[key]) for r in rows], marker=".", color=col,
               label=key[:-3].replace("_", "+"))
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_ylabel("ms")
    a.set_title("wall time")
    b.plot(xs, [float(r["us_per_node"]) for r in rows], marker="o",
           color="#212529")
    b.set_xscale("log")
    b.set_ylim(bottom=0)
    b.set_ylabel("µs per node")
    b.set_title("whole process, per node")
    for ax in (a, b):
        ax.set_xlabel("nodes")
        ax.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    save(plt, fig, out)
    return True


KINDS = {"allreduce": allreduce, "gemm": gemm, "v1v2": v1v2,
         "scaling": scaling}

# The recorded results (bench/results/, each file says where its numbers
# come from) and the pictures docs/BENCHMARKS.md shows.
RECORDED = [
    ("allreduce", "allreduce-2xh200-2026-11-22.json", "allreduce-2xh200.png",
     "all_reduce on 2×H200, bf16, thread ranks (2026-11-22)"),
    ("gemm", "gemm-h200-2026-11-22.json", "gemm-h200.png",
     "GEMM templates vs cuBLAS on one H200 (2026-11-22)"),
    ("v1v2", "v1_vs_v2-sim-2026-11-22.csv", "v1_vs_v2-sim.png",
     "V1 vs V2 on the simulator, 2 cores (2026-11-22)"),
    ("scaling", "scaling-sim-2026-11-23.csv", "scaling-sim.png",
     "Scaling on the simulator, 1 rank, 2 cores (2026-11-23)"),
]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", nargs="?", choices=sorted(KINDS))
    p.add_argument("data", nargs="?")
    p.add_argument("out", nargs="?")
    p.add_argument("--title")
    p.add_argument("--recorded", action="store_true",
                   help="plot bench/results/ into docs/images/")
    a = p.parse_args()
    if a.recorded:
        os.makedirs(os.path.join(ROOT, "docs", "images"), exist_ok=True)
        ok = all(KINDS[k](os.path.join(HERE, "results", d),
                          os.path.join(ROOT, "docs", "images", o), t)
                 for k, d, o, t in RECORDED)
        return 0 if ok else 1
    if not (a.kind and a.data and a.out):
        p.error("give KIND DATA OUT.png, or --recorded")
    return 0 if KINDS[a.kind](a.data, a.out, a.title) else 1


if __name__ == "__main__":
    sys.exit(main())
