#!/usr/bin/env bash
# Issue 35's gallery table at one size in one call (one H200): every gallery
# layer through torch.compile(backend="mtsched") with its accuracy checks,
# beside --run's CUDA-graph time of the same decided graph, eager and
# max-autotune, each timing's samples started behind a call in flight.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`:
#   SIZE=decode|prefill [BUDGET_S=450] [LAYERS="a b"] bash bench/device/final-call-gallery.sh
# (LAYERS: only those gallery layers, by name; default every one).
# $OUT/final.txt has the table; $OUT/backend/ the bench's files.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD
SIZE=${SIZE:-prefill}
BUDGET_S=${BUDGET_S:-450}
OUT=${OUT:-$ROOT/gpu-results/final-$SIZE}
mkdir -p "$OUT/backend"
S=$OUT/final.txt
{ date -u +%FT%TZ; nvidia-smi -L; } > "$S" 2>&1
LARGS=(); for L in ${LAYERS:-}; do LARGS+=(--layers "$L"); done
T0=$SECONDS
OUT=$OUT/backend timeout $((BUDGET_S + 80)) python3 bench/torch_backend_bench.py \
  --build-dir .device --size "$SIZE" --gallery-only --budget-s "$BUDGET_S" \
  "${LARGS[@]}" \
  --run-timeout-s 60 > "$OUT/backend/log.txt" 2>&1
echo "backend ($SIZE): rc $? in $((SECONDS - T0)) s" >> "$S"
grep -h "^|" "$OUT/backend/torch-backend.md" >> "$S" 2>/dev/null
cat "$S"
