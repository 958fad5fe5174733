#!/usr/bin/env bash
# moe-grouped branch (issue 35, "Grouped GEMM for MoE"): grouped_mm, one
# launch over all experts (device-side row counts and offsets), on one
# H200. Run from the repository root after `bash scripts/gpu-test.sh
# --pack` (binaries in .device/); results under $OUT (4 files). Budget:
# under 100 s, every step under `timeout`.
#   1. lit.log: lit Cuda/grouped-mm-run.mir (each tile and both forms,
#      --run against the fp64 interpreter).
#   2. t16.log / summary.txt: the zoo's gpt-fast Mixtral MoE at Mixtral's
#      sizes (8 experts, top 2, 4096 <-> 14336, bf16), T = 16 tokens
#      (bench/moe/mixtral_moe_t16.mir), fuse-grouped-mm then the default
#      pipeline, --run checked against the fp64 interpreter and timed.
#   3. eager.log: PyTorch eager of the same module (gpt-fast's w[ids]
#      gathers) at T = 16 and 128, CUDA events.
#   4. t128.log: T = 128 timed only, with what is left of the budget (its
#      fp64 reference is 45 G multiply-adds).
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" moe-grouped  # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
left() { echo $((95 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)

echo "== 1. lit: Cuda/grouped-mm-run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
timeout 20 python3 "$D/lit/lit.py" -sv --filter 'grouped-mm-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
echo "lit rc=$?" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
grep -h "run @\|error" "$OUT/lit.log" | head -12 | tee -a "$S"

echo "== 2. Mixtral MoE (gpt-fast form), grouped_mm, --run" | tee -a "$S"
run_t() { # T SECONDS [more flags]
  local T=$1 L=$2; shift 2
  timeout "$L" "$BIN" "bench/moe/mixtral_moe_t$T.mir" \
    --pipeline=fuse-grouped-mm,default --backend=cuda --no-cache \
    --kernel-cache-dir="$K/kc" --quiet --run "$@" -o "$K/t$T.mir" \
    > "$OUT/t$T.log" 2>&1
  echo "T=$T rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -h "run @\|error\|warning" "$OUT/t$T.log" | head -8 | tee -a "$S"
  grep -c "grouped_mm" "$K/t$T.mir" | sed 's/^/grouped_mm nodes: /' | tee -a "$S"
}
run_t 16 50

echo "== 3. PyTorch eager, same module" | tee -a "$S"
T=$(left); [ "$T" -gt 20 ] && T=20
if [ "$T" -ge 8 ]; then
  timeout "$T" "$PY" bench/moe/eager_mixtral.py 16 128 > "$OUT/eager.log" 2>&1
  echo "eager rc=$?" | tee -a "$S"
  grep -h "eager\|Error" "$OUT/eager.log" | tail -4 | tee -a "$S"
else
  echo "eager skipped: out of time" | tee -a "$S"
fi
echo "== 4. T = 128, timed only (--run-check=false), while the budget lasts" | tee -a "$S"
T=$(left)
if [ "$T" -ge 10 ]; then run_t 128 "$T" --run-check=false; else echo "T=128 skipped: out of time" | tee -a "$S"; fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
