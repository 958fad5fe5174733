#!/usr/bin/env bash
# Issue 37's table in one call (2026-11-29, one H200): the warm-start pair
# and every gallery layer at decode through torch.compile(backend="mtsched")
# with its accuracy checks, beside --run's CUDA-graph time of the same
# decided graph, eager and max-autotune, every timing's samples started
# behind a call in flight (bench/run_gap.py showed the idle start charging
# Dynamo's 45-96 us of host time per call to 15-35 calls' samples). The
# budget leaves max-autotune time for all seven layers. Run from the
# repository root after `bash scripts/gpu-test.sh --pack`; $OUT/final.txt.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-results/final-h}
mkdir -p "$OUT/backend"
S=$OUT/final.txt
{ date -u +%FT%TZ; nvidia-smi -L; } > "$S" 2>&1
T0=$SECONDS
OUT=$OUT/backend timeout 555 python3 bench/torch_backend_bench.py \
  --build-dir .device --size decode --budget-s 480 --run-timeout-s 60 \
  > "$OUT/backend/log.txt" 2>&1
echo "backend: rc $? in $((SECONDS - T0)) s" >> "$S"
grep -h "^|" "$OUT/backend/torch-backend.md" >> "$S" 2>/dev/null
cat "$S"
