#!/usr/bin/env bash
# Issue 35's prefill table in one call (2026-11-29, one H200): every gallery
# layer at prefill through torch.compile(backend="mtsched") with its
# accuracy checks, beside --run's CUDA-graph time of the same decided graph,
# eager and max-autotune, each timing's samples started behind a call in
# flight. With this session's attn_wg attention tiles, the read-through
# kernels' vector form and one-rank collectives as views. Run from the
# repository root after `bash scripts/gpu-test.sh --pack`; $OUT/final.txt.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-results/final-prefill}
mkdir -p "$OUT/backend"
S=$OUT/final.txt
{ date -u +%FT%TZ; nvidia-smi -L; } > "$S" 2>&1
T0=$SECONDS
OUT=$OUT/backend timeout 530 python3 bench/torch_backend_bench.py \
  --build-dir .device --size prefill --gallery-only --budget-s 450 --run-timeout-s 60 \
  > "$OUT/backend/log.txt" 2>&1
echo "backend: rc $? in $((SECONDS - T0)) s" >> "$S"
grep -h "^|" "$OUT/backend/torch-backend.md" >> "$S" 2>/dev/null
cat "$S"
