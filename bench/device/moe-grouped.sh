#!/usr/bin/env bash
# moe-grouped branch (issue 35, "Grouped GEMM for MoE"): grouped_mm, one
# launch over all experts (device-side row counts and offsets), on one
# H200. Run from the repository root after `bash scripts/gpu-test.sh
# --pack` (binaries in .device/); results under $OUT (6 files). Budget:
# under 75 s, every step under `timeout`.
#   1. lit.log: lit Cuda/grouped-mm-run.mir (every tile choice timed and
#      checked by the benchmarker, --run against the fp64 interpreter).
#   2. t16.log / t128.log / summary.txt: the zoo's gpt-fast Mixtral MoE at
#      Mixtral's sizes (8 experts, top 2, 4096 <-> 14336, bf16),
#      bench/moe/mixtral_moe_t{16,128}.mir, fuse-grouped-mm then the
#      default pipeline with --backend=cuda: every grouped_mm tile choice
#      checked on sampled rows against fp64 by the benchmarker and timed
#      (the summary lists them), then --run timed. The whole graph's --run
#      check against the fp64 interpreter is on with CHECK=1 (T = 16 only:
#      about 20 s more; round 1 ran it, see the final report).
#   3. eager.log: PyTorch eager of the same module (gpt-fast's w[ids]
#      gathers) at T = 16 and 128, CUDA events.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" moe-grouped  # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
left() { echo $((72 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)

echo "== 1. lit: Cuda/grouped-mm-run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
timeout 14 python3 "$D/lit/lit.py" -sv --filter 'grouped-mm-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
echo "lit rc=$?" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
grep -h "error" "$OUT/lit.log" | head -6 | tee -a "$S"

echo "== 2. Mixtral MoE (gpt-fast form), grouped_mm choices, --run" | tee -a "$S"
run_t() { # T SECONDS
  local T=$1 L=$2 C=--run-check=false
  [ "${CHECK:-0}" = 1 ] && [ "$T" = 16 ] && C=--run-check=true
  timeout "$L" "$BIN" "bench/moe/mixtral_moe_t$T.mir" \
    --pipeline=fuse-grouped-mm,default --backend=cuda --no-cache \
    --kernel-cache-dir="$K/kc" --quiet --run "$C" --report="$K/r$T.json" \
    -o "$K/t$T.mir" > "$OUT/t$T.log" 2>&1
  echo "T=$T rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -h "run @\|error\|warning" "$OUT/t$T.log" | head -8 | tee -a "$S"
  [ -f "$K/r$T.json" ] && python3 - "$K/r$T.json" <<'PY' | tee -a "$S"
import json, sys
r = json.load(open(sys.argv[1]))
for n in r.get("nodes", []):
    if n.get("op") != "grouped_mm":
        continue
    cs = sorted(n.get("choices", []), key=lambda c: c["ms"]
                if isinstance(c.get("ms"), (int, float)) else 1e9)
    print("  %s chosen %s: %s" % (n["name"], n.get("chosen"), ", ".join(
        "%s %s%s" % (c["name"], "%.1f us" % (c["ms"] * 1e3)
                     if isinstance(c.get("ms"), (int, float)) else c.get("ms"),
                     "" if c.get("status") in (None, "ok", "measured")
                     else " " + str(c["status"]))
        for c in cs)))
PY
}
run_t 16 30

echo "== 3. PyTorch eager, same module" | tee -a "$S"
timeout 15 "$PY" bench/moe/eager_mixtral.py 16 128 > "$OUT/eager.log" 2>&1
echo "eager rc=$?" | tee -a "$S"
grep -h "eager\|Error" "$OUT/eager.log" | tail -4 | tee -a "$S"

echo "== 4. T = 128" | tee -a "$S"
T=$(left)
if [ "$T" -ge 12 ]; then run_t 128 "$T"; else echo "T=128 skipped: out of time" | tee -a "$S"; fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
