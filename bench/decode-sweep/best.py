"""The ten fastest choices per graph of a decided file (its `timings {...}`),
with cuBLAS's time beside them: bench/device/decode-sweep.sh's table."""
import re
import sys

graph = None
for line in open(sys.argv[1]):
    m = re.match(r"graph @(\w+)", line)
    if m:
        graph = m.group(1)
    m = re.search(r"decided (\S+).*?timings \{([^}]*)\}", line)
    if not m or graph is None:
        continue
    times = {}
    for kv in m.group(2).split(","):
        k, _, v = kv.strip().partition(" = ")
        v = v.replace("us", "").strip()
        times[k] = float(v) if v not in ("inf", "") else float("inf")
    best = sorted(times.items(), key=lambda kv: kv[1])
    cub = times.get("extern.cublas", float("nan"))
    print("%s: decided %s; cuBLAS %.1f us; %d choices" % (
        graph, m.group(1), cub, len(times)))
    for k, v in best[:10]:
        print("  %-28s %8.1f us  %.3fx cuBLAS" % (k, v, v / cub))
    failed = [k for k, v in times.items() if v == float("inf")]
    if failed:
        print("  failed or skipped: " + ", ".join(failed))
