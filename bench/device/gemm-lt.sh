#!/usr/bin/env bash
# gemm-lt branch (issue 35, Megatron's SP MLP at prefill): cuBLASLt's
# heuristic algorithms as GEMM choices (extern.cublaslt_aI) beside
# extern.cublas and the templates on one H200. Run from the repository root
# after `bash scripts/gpu-test.sh --pack` (binaries in .device/); results
# under $OUT. Budget: 150 s, every step under `timeout`.
#   1. lit.log: lit Cuda/cublaslt-run.mir (decided graphs on cuBLASLt
#      algorithms --run against the fp64 interpreter; the algorithms tuned,
#      each checked against fp64 before it is timed, and run) and
#      Cuda/run.mir (extern.cublas's graph run, unchanged).
#   2. inter/: bench/device/final-call-interleaved.sh on megatron_sp_mlp,
#      three mtsched forms beside full max-autotune, timed interleaved:
#      "lt": bench/device/gemm-lt-choices.json (extern.cublas and cuBLASLt's
#      algorithms a0-a3, fused with a bias / residual epilogue where the
#      node has one) and --gemm-sustained-us=1000 (each GEMM's 3 best forms
#      re-timed at sustained load); listed first, so the report's
#      per-choice times are its; "sus": today's choices with
#      --gemm-sustained-us=1000; "measured": today's defaults.
#   3. direct/: if time is left, bench/megatron-prefill-ws1.mir tuned by
#      mtsched-opt as "lt", the decided IR's timings and the decided
#      graph's --run time (no fp64 check: prefill-sized GEMMs).
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" gemm-lt     # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
left() { echo $((145 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
CHOICES=$ROOT/bench/device/gemm-lt-choices.json
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

echo "== 1. lit: Cuda/cublaslt-run.mir, Cuda/run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
timeout 35 python3 "$D/lit/lit.py" -sv --filter 'cublaslt-run|Cuda/run\.mir' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
echo "lit rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
grep -h "error\|does not match\|differs" "$OUT/lit.log" | head -8 | cut -c1-300 | tee -a "$S"

echo "== 2. megatron_sp_mlp interleaved: cuBLASLt choices, defaults, max-autotune" | tee -a "$S"
T=$(($(left) - 8)); [ "$T" -gt 115 ] && T=115
mkdir -p "$OUT/inter"
LT=$(mktemp); echo "--choices-file=$CHOICES --gemm-sustained-us=1000" > "$LT"
OUT=$OUT/inter LAYERS=megatron_sp_mlp LIMIT_S=$T ROUNDS=8 \
  FORMS="args:@$LT args:--gemm-sustained-us=1000 measured" \
  timeout $((T + 5)) bash "$ROOT/bench/device/final-call-interleaved.sh" > "$OUT/inter.log" 2>&1
echo "interleaved rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
grep -E "mlp_breakdown|^\| (mtsched|max-autotune)|kept|Error" "$OUT/inter/summary.txt" "$OUT/inter/breakdown.md" 2>/dev/null \
  | cut -c1-400 | tee -a "$S"
for f in "$OUT"/inter/*.decided.mir; do
  [ -f "$f" ] && { echo "-- $(basename "$f")"; grep -o "{gemm_timing[^}]*}\|decided [a-z0-9_.]*\( fused\)\?\|timings {[^}]*}" "$f"; }
done | cut -c1-900 | tee -a "$S"
grep -E "nvjet|linear|_mm_|sum of" "$OUT/inter/breakdown.md" 2>/dev/null | cut -c1-160 | tee -a "$S"
grep -i "warning\|fall.*back" "$OUT/inter/breakdown.log" 2>/dev/null | head -5 | cut -c1-300 | tee -a "$S"

T=$(left)
echo "== 3. megatron prefill (world size 1) tuned by mtsched-opt (${T} s left)" | tee -a "$S"
if [ "$T" -gt 30 ]; then
  mkdir -p "$OUT/direct"; K=$(mktemp -d)
  timeout $((T - 3)) "$BIN" "$ROOT/bench/megatron-prefill-ws1.mir" --pipeline=default --backend=cuda \
    --choices-file="$CHOICES" --gemm-sustained-us=1000 --no-cache --kernel-cache-dir="$K/kc" --quiet \
    --run --run-check=false --run-time-samples=3 \
    -o "$OUT/direct/decided.mir" 2> "$OUT/direct/log.txt"
  echo "direct rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -o "{gemm_timing[^}]*}\|decided [a-z0-9_.]*\( fused\)\?\|timings {[^}]*}" "$OUT/direct/decided.mir" 2>/dev/null | cut -c1-900 | tee -a "$S"
  grep "run @\|error" "$OUT/direct/log.txt" | head -5 | tee -a "$S"
  rm -rf "$K"
else
  echo "skipped: out of time" | tee -a "$S"
fi
echo "done in $((SECONDS - START)) s" | tee -a "$S"
