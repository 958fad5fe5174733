#!/usr/bin/env bash
# Issue 37: is the Llama-3-70B MLP's gap to --run inside
# torch_backend_bench.py (1.057-1.067x, bench/results/device-2026-11-29a)
# where PyTorch put the weights? bench/run_gap.py --placements 4 times the
# same lean runner on four clones of the same inputs (new allocations),
# then the bench itself on the two MLPs again (no Inductor). Then issue
# 35's bench/device/epilogue-layout.sh. Run from the repository root after
# `bash scripts/gpu-test.sh --pack`; $OUT/placement.md, $OUT/bench.md,
# $OUT/epilogue-layout/summary.txt.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-results/placement}
mkdir -p "$OUT/gap" "$OUT/bench" "$OUT/epilogue-layout"
timeout 150 python3 bench/run_gap.py --build-dir .device --out "$OUT/gap" \
  --placements 4 llama3_70b_mlp deepseek_moe > "$OUT/gap.log" 2>&1
cp "$OUT/gap/run-gap.md" "$OUT/placement.md"
OUT=$OUT/bench timeout 150 python3 bench/torch_backend_bench.py \
  --build-dir .device --size decode --gallery-only --no-inductor \
  --layers llama3_8b_mlp --layers llama3_70b_mlp > "$OUT/bench.log" 2>&1
grep -h "^|" "$OUT/bench/torch-backend.md" > "$OUT/bench.md"
OUT=$OUT/epilogue-layout timeout 200 bash bench/device/epilogue-layout.sh \
  > "$OUT/epilogue-layout.log" 2>&1
rm -rf "$OUT/gap" "$OUT/bench"
cat "$OUT/placement.md" "$OUT/bench.md" "$OUT/epilogue-layout/summary.txt"
