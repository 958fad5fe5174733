#!/usr/bin/env bash
# moe-grouped branch (issue 35, "Grouped GEMM for MoE"): grouped_mm, one
# launch over all experts (device-side row counts and offsets), on one
# H200. Run from the repository root after `bash scripts/gpu-test.sh
# --pack` (binaries in .device/); results under $OUT (4 files). Budget:
# under 50 s, every step under `timeout`.
#   1. t16.log / summary.txt: the zoo's gpt-fast Mixtral MoE at Mixtral's
#      sizes (8 experts, top 2, 4096 <-> 14336, bf16), T = 16 tokens
#      (bench/moe/mixtral_moe_t16.mir), fuse-grouped-mm then the default
#      pipeline with --backend=cuda: every grouped_mm tile choice checked
#      on sampled rows against fp64 by the benchmarker and timed (the
#      summary lists them), then --run checked against the fp64
#      interpreter and timed.
#   2. eager.log: PyTorch eager of the same module (gpt-fast's w[ids]
#      gathers) at T = 16, CUDA events.
#   3. With T128=1 (a longer budget): T = 128 the same way, --run timed
#      only (its fp64 reference is 45 G multiply-adds), and eager at 128.
# Also: LIT=1 runs lit Cuda/grouped-mm-run.mir first (lit.log).
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" moe-grouped  # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)

if [ "${LIT:-0}" = 1 ]; then
  echo "== lit: Cuda/grouped-mm-run.mir" | tee -a "$S"
  device_lit_tree "$ROOT" "$D"
  timeout 14 python3 "$D/lit/lit.py" -sv --filter 'grouped-mm-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
  echo "lit rc=$?" | tee -a "$S"
  grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
fi

run_t() { # T SECONDS CHECK
  local T=$1 L=$2
  timeout "$L" "$BIN" "bench/moe/mixtral_moe_t$T.mir" \
    --pipeline=fuse-grouped-mm,default --backend=cuda --no-cache \
    --kernel-cache-dir="$K/kc" --quiet --run --run-check="$3" \
    --report="$K/r$T.json" -o "$K/t$T.mir" > "$OUT/t$T.log" 2>&1
  echo "T=$T rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -h "run @\|error\|warning" "$OUT/t$T.log" | head -8 | tee -a "$S"
  [ -f "$K/r$T.json" ] && python3 "$ROOT/bench/choices_file.py" report "$K/r$T.json" grouped_mm | tee -a "$S"
}
echo "== 1. Mixtral MoE (gpt-fast form), grouped_mm choices, --run vs fp64" | tee -a "$S"
run_t 16 36 true

echo "== 2. PyTorch eager, same module" | tee -a "$S"
SIZES=16; [ "${T128:-0}" = 1 ] && SIZES="16 128"
timeout 10 "$PY" bench/moe/eager_mixtral.py $SIZES > "$OUT/eager.log" 2>&1
echo "eager rc=$?" | tee -a "$S"
grep -h "eager\|Error" "$OUT/eager.log" | tail -4 | tee -a "$S"

if [ "${T128:-0}" = 1 ]; then
  echo "== 3. T = 128" | tee -a "$S"
  run_t 128 40 false
fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
