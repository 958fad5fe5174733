#!/usr/bin/env bash
# Is the Llama-3-70B MLP's gap to --run (1.057x in
# bench/results/device-2026-11-29a/final, 1.000x in run-gap-2) the order of
# torch_backend_bench.py (eager timed before the compile)? bench/run_gap.py
# on that layer twice each way, then the bench itself on it alone (no
# Inductor). Run from the repository root after `bash scripts/gpu-test.sh
# --pack`; $OUT/{plain,eager}/run-gap.md, $OUT/bench/torch-backend.md.
set -u
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/gpu-results/run-gap-eager}
mkdir -p "$OUT/plain" "$OUT/eager" "$OUT/bench"
timeout 150 python3 bench/run_gap.py --build-dir .device --out "$OUT/eager" \
  --eager-first --repeat 2 llama3_70b_mlp > "$OUT/eager/log.txt" 2>&1
timeout 120 python3 bench/run_gap.py --build-dir .device --out "$OUT/plain" \
  --repeat 2 llama3_70b_mlp > "$OUT/plain/log.txt" 2>&1
OUT=$OUT/bench timeout 150 python3 bench/torch_backend_bench.py \
  --build-dir .device --size decode --gallery-only --no-inductor \
  --layers llama3_8b_mlp --layers llama3_70b_mlp > "$OUT/bench/log.txt" 2>&1
cat "$OUT/eager/run-gap.md" "$OUT/plain/run-gap.md"
grep -h "^|" "$OUT/bench/torch-backend.md"
