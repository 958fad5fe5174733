#!/usr/bin/env bash
# The GEMM templates against cuBLAS on one GPU, in one call (docs/BENCHMARKS.md):
#
#   BUILD_DIR=build scripts/gpu-test.sh --pack DIR   # here: binaries into DIR
#   bench/gemm-sweep.sh [DIR]                        # there (default .device)
#
# 1. Correctness: the GPU unit tests of the GEMM choices (every choice, fused
#    and not, on shapes that are not tile multiples; the wgmma choices on odd
#    shapes, f16, a batched B and each kind of fused epilogue).
# 2. Timing through the autotuner (its accuracy check runs first for every
#    choice it times; --prune-top-k=0): every template (split-K ones where
#    offered) and cuBLAS at 4096^3 and at M = 16, 64,
#    256 (N = K = 4096), bf16; then GEMM + bias + ReLU and GEMM + residual +
#    RMSNorm, each template fused against cuBLAS + the epilogue kernel.
# Reports and logs go to $OUT (else ./gpu-results); the table comes last.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=$(cd "${1:-$ROOT/.device}" && pwd) || exit 1
OUTDIR=${OUT:-$ROOT/gpu-results}
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OPT="$D/bin/mtsched-opt"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
  --format=csv | tee "$OUTDIR/summary.txt"
fail=0

echo "== GEMM unit tests on the GPU"
timeout 300 "$D/bin/CudaTests" --gtest_filter='CudaBackend.*' >"$OUTDIR/unit.log" 2>&1
[ $? = 0 ] || fail=1
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|Failure|Expected|Which is|fused:|: ' "$OUTDIR/unit.log" |
  grep -v 'RUN' | head -40

T=$(mktemp -d)
cp "$ROOT/bench/gemm.mir" "$T/gemm.mir"
cp "$ROOT/bench/gemm-epilogue.mir" "$T/epilogue.mir"
for n in gemm epilogue; do
  echo "== $n"
  t0=$EPOCHREALTIME
  timeout 200 "$OPT" "$T/$n.mir" --quiet --no-cache --pipeline=default --prune-top-k=0 --backend=cuda \
    --kernel-cache-dir="$T/kc" --report="$OUTDIR/$n.json" >/dev/null 2>"$OUTDIR/$n.err"
  rc=$?
  [ $rc = 0 ] || fail=1
  echo "$n rc=$rc wall_s=$(python3 -c "print(round($EPOCHREALTIME - $t0, 1))")" | tee -a "$OUTDIR/summary.txt"
  tail -3 "$OUTDIR/$n.err"
done
python3 "$ROOT/bench/gemm-sweep.py" "$OUTDIR" | tee -a "$OUTDIR/summary.txt"
exit $fail
