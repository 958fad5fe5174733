#!/usr/bin/env bash
# arch-runner (issue 36): the cuda backend split into a Builder (NVRTC on its
# pool, the kernel cache) and a Runner, on one GPU. Checks that
#   1. the GPU unit tests (CudaTests) and the lit tests under test/lit/Cuda
#      still pass;
#   2. a cold tune of examples/gallery/llama3_8b_layer.mir builds the walk's
#      batch once, before the first choice is timed (one "build" event in the
#      trace, before the first "benchmark"), and that compiling overlaps
#      timing: the time spent waiting for NVRTC ("cuda.compile") against the
#      whole benchmark phase; a second, warm run from the cache it wrote
#      creates no backend and prints the same IR.
# Run from the repository root with .device/ packed (scripts/gpu-test.sh
# --pack); results under $OUT (at most 8 files). Budget: about 3 minutes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh"  # device_lit_tree
OUT=${OUT:-$ROOT/gpu-results}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
nvidia-smi -L > "$OUT/env.txt" 2>&1; cat "$OUT/env.txt"

echo "== unit"
timeout 60 "$D/bin/CudaTests" > "$OUT/unit.log" 2>&1; echo "unit rc=$?"
tail -3 "$OUT/unit.log"

echo "== lit Cuda"
device_lit_tree "$ROOT" "$D"
timeout 80 python3 "$D/lit/lit.py" -sv "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1; echo "lit rc=$?"
grep -E "Passed|Failed|Unsupported" "$OUT/lit.log" | tail -4
for t in $(sed -n 's/^FAIL: mtsched :: Cuda\/\(.*\) (.*/\1/p' "$OUT/lit.log"); do
  for f in "$W/test/lit/Cuda/Output/$t".tmp*; do [ -f "$f" ] && { echo "== $f"; tail -15 "$f"; }; done
done >> "$OUT/lit.log" 2>&1

echo "== cold then warm tune"
C=$(mktemp -d); K=$(mktemp -d)
IN=examples/gallery/llama3_8b_layer.mir
timeout 30 "$D/bin/mtsched-opt" "$IN" --pipeline=default --kernel-cache-dir="$K" \
  --backend=cuda --cache-dir="$C" --quiet -o "$OUT/cold.mir" \
  --trace="$W/cold.trace.json" --report="$W/cold.report.json" > "$OUT/tune.log" 2>&1
echo "cold rc=$?" | tee -a "$OUT/tune.log"
timeout 30 "$D/bin/mtsched-opt" "$IN" --pipeline=default --kernel-cache-dir="$K" \
  --backend=cuda --cache-dir="$C" --quiet -o "$W/warm.mir" \
  --trace="$W/warm.trace.json" >> "$OUT/tune.log" 2>&1
echo "warm rc=$?" | tee -a "$OUT/tune.log"
python3 - "$W/cold.trace.json" "$W/warm.trace.json" "$W/cold.report.json" \
  "$OUT/cold.mir" "$W/warm.mir" <<'PY' | tee "$OUT/summary.txt"
import json, sys
cold, warm, report, cold_ir, warm_ir = sys.argv[1:]
ev = [e for e in json.load(open(cold))["traceEvents"] if e.get("ph") == "X"]
def named(n): return sorted((e for e in ev if e["name"] == n), key=lambda e: e["ts"])
builds, bench, comp = named("build"), named("benchmark"), named("cuda.compile")
print("build events:", len(builds), [b.get("args", {}).get("detail") for b in builds])
if builds and bench:
    print("first build before first benchmark:", builds[0]["ts"] <= bench[0]["ts"])
print("benchmarks timed:", len(bench), " benchmark ms: %.1f" % (sum(e["dur"] for e in bench) / 1e3))
print("waited for NVRTC (cuda.compile) ms: %.1f over %d waits" % (sum(e["dur"] for e in comp) / 1e3, len(comp)))
try:
    R = json.load(open(report))
    for k, v in R.items():
        if "phase" in k or "kernel" in k:
            print(k + ":", json.dumps(v))
except Exception as x:
    print("no report:", x)
w = [e for e in json.load(open(warm))["traceEvents"] if e.get("name") == "create benchmarker"]
print("warm run created the backend:", bool(w))
print("warm IR same as cold:", open(cold_ir).read() == open(warm_ir).read())
PY
