#!/usr/bin/env bash
# Decode GEMM tiles (issues 35, 37): every tile of
# bench/decode-sweep/tiles.json (mma.sync 16-row tiles of several widths,
# depths, warps and split-K factors; wgmma 64-row tiles, split-K too) timed
# with cuBLAS on the gallery's losing decode GEMMs
# (bench/decode-sweep/graphs.mir), --prune-top-k=0, each choice checked
# against the fp64 reference rows by the benchmarker. Prints the ten best
# per graph (bench/decode-sweep/best.py). Run from the repository root after
# `bash scripts/gpu-test.sh --pack`. Results in $OUT: sweep.log,
# decided.mir (every timing), best.txt. About 2-3 minutes.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/device-driver.sh
source "$ROOT/scripts/device-driver.sh"
device_script_setup "$ROOT" decode-sweep
D=$ROOT/bench/decode-sweep
{ date -u +%FT%TZ; nvidia-smi -L; } > "$OUT/sweep.log" 2>&1
timeout 400 "$BIN" "$D/graphs.mir" --split-input-file --pipeline=default \
  --backend=cuda --no-cache --choices-file="$D/${TILES:-tiles.json}" \
  --prune-top-k=0 --autotune-summary -o "$OUT/decided.mir" >> "$OUT/sweep.log" 2>&1
echo "exit $?" >> "$OUT/sweep.log"
python3 "$D/best.py" "$OUT/decided.mir" | tee "$OUT/best.txt"
