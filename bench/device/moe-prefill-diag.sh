#!/usr/bin/env bash
# Where the gallery MoE layers lose at prefill (issue 35: DeepSeek 1.18x of
# max-autotune; Mixtral went eager on its accuracy check): each layer's
# prefill graph at one rank decided on the GPU, its per-kernel measured
# times (--emit=timeline of the decided IR) and --run's CUDA-graph time,
# beside PyTorch eager's kernels (torch.profiler) of the same module at one
# rank. Run from the repository root after `bash scripts/gpu-test.sh
# --pack`; results under $OUT.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD; D=$ROOT/.device; OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
# The one-rank collective views (test/lit/Cuda/one-rank-collective-run.mir).
source "$ROOT/scripts/device-driver.sh"
device_lit_tree "$ROOT" "$D"
timeout 120 python3 "$D/lit/lit.py" -v "$W/test/lit/Cuda/one-rank-collective-run.mir" \
  > "$OUT/lit.log" 2>&1
echo "lit one-rank-collective-run: rc $?" | tee "$OUT/summary.txt"
W=$(mktemp -d)
for L in deepseek_moe mixtral_8x7b_moe; do
  python3 - "$ROOT/examples/gallery/$L.mir" "$W/$L.mir" "${L}_prefill" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"group @(\w+) = \[[0-9, ]*\]", r"group @\1 = [0]", text)
text = re.sub(r"world_size = \d+", "world_size = 1", text)
out, keep, head = [], False, True
for line in text.splitlines(True):
    m = re.match(r"graph @(\w+)\(", line)
    if m:
        head = False
        keep = m.group(1) == sys.argv[3]
    if head and not line.startswith("//"):
        out.append(line)
    elif keep:
        out.append(line)
        if line.startswith("}"):
            keep = False
open(sys.argv[2], "w").write("".join(out))
PY
  timeout 150 "$OPT" "$W/$L.mir" --pipeline=default --backend=cuda --no-cache \
    --kernel-cache-dir="$W/kc" --run --run-check=false -o "$W/$L.decided.mir" \
    > "$OUT/$L.log" 2>&1
  echo "$L rc=$?" | tee -a "$OUT/summary.txt"
  grep -E "run @|error" "$OUT/$L.log" | head -5 | tee -a "$OUT/summary.txt"
  timeout 30 "$OPT" "$W/$L.decided.mir" --pipeline= --emit=timeline -o "$W/$L.tl.json" \
    >> "$OUT/$L.log" 2>&1
  python3 - "$W/$L.tl.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
t = json.load(open(sys.argv[1]))
ev = [e for e in t.get("traceEvents", []) if e.get("ph") == "X"]
tot = sum(e.get("dur", 0) for e in ev)
print("kernels %d, sum of durations %.1f us" % (len(ev), tot))
for e in sorted(ev, key=lambda e: -e.get("dur", 0))[:14]:
    a = e.get("args", {})
    print("  %9.1f us  %-40s %s %s" % (e.get("dur", 0), e.get("name", "")[:40],
          a.get("choice", ""), a.get("time", "")))
PY
done
timeout 200 python3 - <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import os, sys
sys.path.insert(0, "bench"); sys.path.insert(0, "python"); sys.path.insert(0, "examples/torch")
import torch
from torch.profiler import profile, ProfilerActivity
import torch_backend_bench as tb
for name in ["deepseek_moe", "mixtral_8x7b_moe"]:
    model, inputs = tb.build(name, "prefill", 0)
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(5):
                model(*inputs)
            torch.cuda.synchronize()
    print("== eager", name)
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))
PY
cp "$W"/*.decided.mir "$OUT/" 2>/dev/null
ls "$OUT"
