#!/usr/bin/env bash
# This session's last device call (2026-11-28, evening), one H200, in
# priority order, each step bounded so the call ends inside 10 minutes:
#  1. bench/torch_backend_bench.py --size decode: the warm-start pair
#     (second process: no mtsched-opt, no NVRTC, cached accuracy verdict)
#     and every gallery layer through torch.compile(backend="mtsched") with
#     its accuracy checks, beside --run's CUDA-graph time, eager and
#     max-autotune (issue 37's table in one call).
#  2. bench/device/prologue.sh: the RMSNorm prologue fused into GEMMs
#     (issue 35), --run against the fp64 interpreter, on and off.
#  3. bench/device/size-hints.sh: Dynamo recompiles decided from the first
#     size's dispatch tables (issue 37), against eager.
#  4. examples/torch/compile_backend.py --model gpt2 --no-inductor (issue
#     37's example; max-autotune left out for time).
# Run from the repository root after `bash scripts/gpu-test.sh --pack`;
# results under $OUT/<step>/, a summary in $OUT/final.txt.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-results/final-g}
mkdir -p "$OUT"
S=$OUT/final.txt
{ date -u +%FT%TZ; nvidia-smi -L; } > "$S" 2>&1
step() { # NAME TIMEOUT CMD...: runs CMD with OUT=$OUT/NAME, logs, rc in summary
  local NAME=$1 T=$2
  shift 2
  mkdir -p "$OUT/$NAME"
  local T0=$SECONDS
  OUT=$OUT/$NAME timeout "$T" "$@" > "$OUT/$NAME/log.txt" 2>&1
  echo "$NAME: rc $? in $((SECONDS - T0)) s" >> "$S"
}
step backend 360 python3 bench/torch_backend_bench.py --build-dir .device \
  --size decode --budget-s 290 --run-timeout-s 60
step prologue 100 bash bench/device/prologue.sh
step size-hints 80 bash bench/device/size-hints.sh
step gpt2 50 python3 examples/torch/compile_backend.py --build-dir .device \
  --model gpt2 --no-inductor
grep -h "^|" "$OUT/backend/torch-backend.md" >> "$S" 2>/dev/null
tail -8 "$OUT/gpt2/log.txt" >> "$S"
cat "$S"
