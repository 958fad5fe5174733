#!/usr/bin/env bash
# The zoo (bench/device/zoo-gpu.sh) spread over the GPUs of one machine:
# shard I of N on GPU I-1 (CUDA_VISIBLE_DEVICES), all at once, so every
# case gets its torch.compile(mode="max-autotune") baseline inside one call
# (one GPU's budget covers all 50 --run cases but only a few compiles).
# Each shard is bench/zoo_gpu.py as zoo-gpu.sh runs it: a case's --run and
# eager times come before any compile of its shard, and each ratio pairs
# numbers taken on the same GPU in the same call.
#
#   NGPU=4 BUDGET=500 bash bench/device/zoo-gpu-x4.sh
#
# Results in $OUT (5 files): env.txt, zoo-gpu.log (the shards' logs one
# after another), zoo-gpu.md and zoo-gpu.json (the shards' rows merged in
# the zoo's order) and zoo-gpu-cases.tar.gz (every shard's cases).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
# shellcheck source=scripts/torch-python.sh
source "$ROOT/scripts/torch-python.sh"
PY=$(find_torch_python) || { echo "zoo-gpu-x4: error: no Python with torch" >&2; exit 2; }
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
[ "$NGPU" -ge 1 ] || { echo "zoo-gpu-x4: error: no GPU" >&2; exit 2; }
OUT=${OUT:-$ROOT/gpu-results/zoo-gpu-x4}
mkdir -p "$OUT"
W=$(mktemp -d)
PIDS=()
for I in $(seq 1 "$NGPU"); do
  mkdir -p "$W/shard$I" "$W/tmp$I"
  CUDA_VISIBLE_DEVICES=$((I - 1)) OUT="$W/shard$I" \
    ZOO_ARGS="--shard $I/$NGPU ${ZOO_ARGS:-}" \
    TMPDIR="$W/tmp$I" bash bench/device/zoo-gpu.sh > "$W/shard$I.out" 2>&1 &
  PIDS+=($!)
done
for P in "${PIDS[@]}"; do wait "$P"; done
cp "$W/shard1/env.txt" "$OUT/env.txt" 2>/dev/null
echo "shards: $NGPU" >> "$OUT/env.txt"
for I in $(seq 1 "$NGPU"); do
  echo "=== shard $I/$NGPU"
  cat "$W/shard$I/zoo-gpu.log" 2>/dev/null || cat "$W/shard$I.out"
done > "$OUT/zoo-gpu.log"
"$PY" - "$W" "$NGPU" "$OUT" <<'PY'
import json, os, sys
sys.path.insert(0, "bench")
import zoo_gpu
w, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows, meta = [], None
for i in range(1, n + 1):
    p = os.path.join(w, "shard%d" % i, "zoo-gpu.json")
    if not os.path.exists(p):
        print("zoo-gpu-x4: shard %d left no zoo-gpu.json" % i)
        continue
    d = json.load(open(p))
    for r in d.pop("rows"):
        r["shard"] = i
        rows.append(r)
    meta = meta or d
order = {e.name: k for k, e in enumerate(zoo_gpu.zoo.ZOO)}
rows.sort(key=lambda r: (r["size"] != "decode", order.get(r["model"], 99)))
json.dump(dict(meta or {}, shards=n, rows=rows),
          open(os.path.join(out, "zoo-gpu.json"), "w"), indent=1)
open(os.path.join(out, "zoo-gpu.md"), "w").write(
    zoo_gpu.table(rows, (meta or {}).get("device") or "cuda"))
print("zoo-gpu-x4: %d rows" % len(rows))
PY
cat "$OUT/zoo-gpu.md"
tar -C "$W" -czf "$OUT/zoo-gpu-cases.tar.gz" $(cd "$W" && ls -d shard*/zoo-gpu-cases.tar.gz 2>/dev/null)
rm -rf "$W"
