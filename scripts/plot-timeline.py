#!/usr/bin/env python3
"""Draws an `mtsched-opt --emit=timeline` trace as a PNG (docs/PASSES.md).

    python3 scripts/plot-timeline.py timeline.json out.png [--title TEXT]

One row per rank and track (compute, comm), each kernel and collective a bar
at its time, labelled with its node; collectives orange, template kernels
blue, plain buffer kernels grey, as --emit=dot colours them. Needs
matplotlib (Debian: python3-matplotlib, for /usr/bin/python3).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"template": "#74a9e8", "collective": "#f59f4c", "kernel": "#bdbdbd"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    trace = json.load(open(args.trace))
    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    if not spans:
        sys.exit("plot-timeline: error: no events in " + args.trace)
    lanes = sorted(threads)
    row = {lane: i for i, lane in enumerate(lanes)}
    end = max(e["ts"] + e["dur"] for e in spans)

    fig, ax = plt.subplots(figsize=(11, 0.55 * len(lanes) + 1.3), dpi=110)
    for e in spans:
        y = row[(e["pid"], e["tid"])]
        ax.barh(y, e["dur"], left=e["ts"], height=0.7,
                color=COLOURS.get(e["cat"], "#bdbdbd"), edgecolor="black",
                linewidth=0.6)
        # The node (and its fused members' count) when the bar has room.
        label = e["name"].split(" ")[0]
        if "choice" in e["args"]:
            label += " " + e["args"]["choice"]
        fused = e["args"].get("epilogue")
        if fused:
            label += "\n+ " + ", ".join(fused)
        if e["dur"] > end * 0.011 * max(map(len, label.split("\n"))):
            ax.text(e["ts"] + e["dur"] / 2, y, label, ha="center",
                    va="center", fontsize=7.5)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(["%s %s" % (procs[p], threads[(p, t)])
                        for p, t in lanes])
    ax.invert_yaxis()
    ax.set_xlim(0, end * 1.01)
    ax.set_xlabel("time (us)")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, ["template kernel", "collective", "buffer kernel"],
              loc="upper center", bbox_to_anchor=(0.5, -0.18 - 0.2 / len(lanes)),
              ncol=3, fontsize=8, frameon=False)
    spans_ms = trace.get("otherData", {}).get("makespan_us", {})
    title = args.title or ", ".join(
        "%s: %.1f us" % (g, us) for g, us in spans_ms.items())
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.png)


if __name__ == "__main__":
    main()
