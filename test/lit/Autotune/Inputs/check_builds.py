"""Prints, per rank (a trace thread that timed a choice) of an --trace file,
how many times the autotuner called its backend's builder ('build'
events), their sizes, and whether the first build ended before the rank
timed its first choice ('benchmark' events); one line per rank, sorted
(threads carry no rank number)."""
import json
import sys

events = [e for e in json.load(open(sys.argv[1]))["traceEvents"]
          if e.get("ph") == "X"]
lines = []
for tid in {e["tid"] for e in events if e["name"] == "benchmark"}:
    mine = sorted((e for e in events if e["tid"] == tid), key=lambda e: e["ts"])
    builds = [e for e in mine if e["name"] == "build"]
    bench = [e for e in mine if e["name"] == "benchmark"]
    first = builds[0]["ts"] + builds[0]["dur"] <= bench[0]["ts"] if builds else None
    sizes = ",".join(b.get("args", {}).get("detail", "?") for b in builds)
    lines.append("builds=%d [%s] built_before_first_benchmark=%s"
                 % (len(builds), sizes, first))
print("\n".join(sorted(lines)))
