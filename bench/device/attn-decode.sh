#!/usr/bin/env bash
# attn-decode branch (issue 35, "decode split-KV with the same"): the
# Hopper decode tiles attn_dec_16xBKV_wW_sS[_kvN] (a TMA producer warp
# feeding W mma.sync consumer warps through S stages of BKV keys) beside
# the mma.sync decode tiles and PyTorch SDPA on one H200. Run from the
# repository root after `bash scripts/gpu-test.sh --pack` (binaries in
# .device/); results under $OUT (5 files). Budget: under 2 minutes, every
# step under `timeout`.
#   1. sdpa.json / sdpa.log: PyTorch SDPA, each backend, at the decode
#      shapes (bench/peers/torch_sdpa.py; it also times the prefill).
#   2. lit.log: lit Cuda/attention-dec-run.mir (every attn_dec tile of its
#      choices file checked against fp64 by the benchmarker before it is
#      timed, the decided graph --run against the fp64 interpreter).
#   3. decided.mir / decided.log: every choice of
#      bench/device/attn-decode-tiles.json (today's mma.sync decode tiles,
#      their variants and the attn_dec tiles) timed at bench/
#      attention-llama3.mir's decode graphs (B = 1, 4, 16 over 4096 keys),
#      each checked against fp64 first; twice, as long as the budget lasts
#      (the second pass from the same kernel cache).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh"  # device_lit_tree
source "$ROOT/scripts/torch-python.sh"
PY="$(find_torch_python)" || PY=python3
OUT=${OUT:-$ROOT/gpu-results/attn-decode}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
START=$SECONDS
left() { echo $((115 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
cat "$S"
K=$(mktemp -d)

echo "== 1. PyTorch SDPA, each backend" | tee -a "$S"
timeout 30 "$PY" "$ROOT/bench/peers/torch_sdpa.py" "$OUT/sdpa.json" > "$OUT/sdpa.log" 2>&1
echo "sdpa rc=$?" | tee -a "$S"
grep decode "$OUT/sdpa.log" | tee -a "$S"

echo "== 2. lit: Cuda/attention-dec-run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
timeout 40 python3 "$D/lit/lit.py" -sv --filter 'attention-dec-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
LIT_RC=$?
echo "lit rc=$LIT_RC" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED):" "$OUT/lit.log" | tee -a "$S"
for f in "$W"/test/lit/Cuda/Output/attention-dec-run.mir.tmp*; do
  [ -f "$f" ] && grep -h "run @\|error\|wrong\|differs\|timings" "$f" | head -20
done | tee -a "$S" >> "$OUT/lit.log"
if [ "$LIT_RC" = 124 ]; then
  :
  python3 - "$ROOT/bench/device/attn-decode-tiles.json" "$K/tiles.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["attention_tiles"] = [x for x in t["attention_tiles"] if not x.get("decode")]
json.dump(t, open(sys.argv[2], "w"))
PY
  echo "lit timed out (a hang?): the attn_dec tiles are left out below" | tee -a "$S"
else
  cp "$ROOT/bench/device/attn-decode-tiles.json" "$K/tiles.json"
fi

echo "== 3. every decode choice at B = 1, 4, 16 over 4096 keys" | tee -a "$S"
sed '/^graph @prefill_4096/,/^}/d' "$ROOT/bench/attention-llama3.mir" > "$K/decode.mir"
: > "$OUT/decided.mir"
for pass in 1 2; do
  T=$(left); [ "$T" -gt 60 ] && T=60
  if [ "$T" -lt 15 ]; then echo "pass $pass skipped: out of time" | tee -a "$S"; continue; fi
  timeout "$T" "$OPT" "$K/decode.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
    --no-cache --kernel-cache-dir="$K/kc" --quiet --choice-timeout-ms=20000 \
    --choices-file="$K/tiles.json" --disable-choices=attn_math \
    > "$K/decided.part" 2>> "$OUT/decided.log"
  echo "pass $pass rc=$?" | tee -a "$S"
  echo "// pass $pass" >> "$OUT/decided.mir"
  cat "$K/decided.part" >> "$OUT/decided.mir"
  grep -o "^graph @[a-z0-9_]*\|decided [a-z0-9_]* timings {[^}]*}" "$K/decided.part" | tee -a "$S"
done
grep -i "error\|differs\|wrong" "$OUT/decided.log" | head -10 | tee -a "$S"

echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K" "$W"
