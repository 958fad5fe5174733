#!/usr/bin/env bash
# gemm-lt branch (issue 35, Megatron's SP MLP at prefill): cuBLASLt's
# heuristic algorithms as GEMM choices (extern.cublaslt_aI, fused with a
# bias / residual epilogue where the node has one) and --gemm-sustained-us
# (a long GEMM's best forms re-timed at sustained load) on one H200. Run
# from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/); results under $OUT. Budget: 200 s, every step
# under `timeout`, results written as they come.
#   1. lit.log: lit Cuda/cublaslt-run.mir (decided graphs on cuBLASLt
#      algorithms, unfused and fused, --run against the fp64 interpreter;
#      the algorithms tuned, each checked against fp64 before it is timed,
#      with and without --gemm-sustained-us, and run).
#   2. direct/: bench/megatron-prefill-ws1.mir tuned by mtsched-opt with
#      the "lt" flags (LT below): the autotune summary, each pass's time,
#      the decided IR's timings and sustained times, and the decided
#      graph's --run time (no fp64 check: prefill-sized GEMMs).
#   3. inter/: bench/device/final-call-interleaved.sh on megatron_sp_mlp,
#      "lt" against today's defaults ("measured") beside full max-autotune,
#      timed interleaved in one process (breakdown.log as it goes).
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" gemm-lt     # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
left() { echo $((195 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
CHOICES=$ROOT/bench/device/gemm-lt-choices.json
LT="--choices-file=$CHOICES --gemm-sustained-us=1000"
# The torch backend runs decided graphs through the runtime library; the
# shared .device/lib one is main's, which cannot run extern.cublaslt_*:
# this branch's goes in the bundle as .device-gemm-lt/libmtsched_runtime.so.
RT=$ROOT/.device-gemm-lt/libmtsched_runtime.so
if [ -f "$RT" ]; then
  export MTSCHED_RUNTIME_LIB=$RT
  echo "runtime library: this branch's ($RT)" | tee -a "$S"
else
  echo "WARNING: no $RT: the cuBLASLt form runs on main's runtime library, which falls back to PyTorch on extern.cublaslt_*" | tee -a "$S"
fi

echo "== 1. lit: Cuda/cublaslt-run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
timeout 30 python3 "$D/lit/lit.py" -sv --filter 'cublaslt-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
echo "lit rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
grep -h "error\|does not match\|differs" "$OUT/lit.log" | head -8 | cut -c1-300 | tee -a "$S"

echo "== 2. megatron prefill (world size 1) tuned by mtsched-opt: $LT" | tee -a "$S"
mkdir -p "$OUT/direct"; K=$(mktemp -d)
T0=$SECONDS
# shellcheck disable=SC2086 # LT is a list of flags
timeout 70 "$BIN" "$ROOT/bench/megatron-prefill-ws1.mir" --pipeline=default --backend=cuda \
  $LT --no-cache --kernel-cache-dir="$K/kc" --autotune-summary --time-passes \
  --run --run-check=false --run-time-samples=3 \
  -o "$OUT/direct/decided.mir" 2> "$OUT/direct/log.txt"
echo "direct rc=$? in $((SECONDS - T0)) s" | tee -a "$S"
grep -o "{gemm_timing[^}]*}\|decided [a-z0-9_.]*\( fused\)\?\|timings {[^}]*}" "$OUT/direct/decided.mir" 2>/dev/null | cut -c1-1200 | tee -a "$S"
grep "run @\|error\|AUTOTUNE\|<- chosen\|autotune\|select-\|Total" "$OUT/direct/log.txt" | head -24 | cut -c1-200 | tee -a "$S"
rm -rf "$K"

T=$(($(left) - 6))
echo "== 3. megatron_sp_mlp interleaved: lt, defaults, max-autotune (${T} s)" | tee -a "$S"
mkdir -p "$OUT/inter"
F=$(mktemp); echo "$LT" > "$F"
OUT=$OUT/inter LAYERS=megatron_sp_mlp LIMIT_S=$T ROUNDS=6 \
  FORMS="args:@$F measured" \
  timeout $((T + 4)) bash "$ROOT/bench/device/final-call-interleaved.sh" > "$OUT/inter.log" 2>&1
echo "interleaved rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
grep -E "^####|^\* %|^\| (mtsched|max-autotune)|by round|nvjet|_mm_|sum of|Traceback|Error" \
  "$OUT/inter/breakdown.log" 2>/dev/null | grep -v "^E1129\|select_algorithm" | cut -c1-500 | tee -a "$S"
for f in "$OUT"/inter/*.decided.mir; do
  [ -f "$f" ] && { echo "-- $(basename "$f")"; grep -o "{gemm_timing[^}]*}\|decided [a-z0-9_.]*\( fused\)\?" "$f"; }
done | cut -c1-600 | tee -a "$S"
echo "done in $((SECONDS - START)) s" | tee -a "$S"
