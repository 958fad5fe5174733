#!/usr/bin/env bash
# Issue 37's 5% between torch.compile(backend="mtsched") and --run's CUDA
# graph of the same decided graph: bench/run_gap.py on the layers that were
# furthest apart (docs/BENCHMARKS.md), at decode, on one H200. Run from the
# repository root after `bash scripts/gpu-test.sh --pack`; $OUT/run-gap.md.
set -u
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/gpu-results/run-gap}
mkdir -p "$OUT"
timeout 420 python3 bench/run_gap.py --build-dir .device --out "$OUT" \
  llama3_8b_mlp llama3_70b_mlp deepseek_moe \
  > "$OUT/log.txt" 2>&1
echo "rc $?" >> "$OUT/log.txt"
tail -5 "$OUT/log.txt"
cat "$OUT/run-gap.md"
