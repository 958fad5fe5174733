#!/usr/bin/env bash
# Long GEMMs in and out of PDL at prefill, beside full max-autotune (one
# H200): for each of REPEATS rounds, each layer of LAYERS is timed by
# final-call-interleaved.sh once per MTSCHED_PDL mode of MODES, the modes
# alternating (`all`: every group, layout and GEMM kernel waits and
# triggers; `1`, the default: GEMMs of LongKernelFlops or more take no part;
# `0`: no PDL; docs/CUDA.md). Each run is its own process, tuned anew.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`:
#   [LAYERS="llama3_70b_mlp ..."] [MODES="all 1"] [REPEATS=2] [ROUNDS=8] \
#     [LIMIT_S=480] bash bench/device/pdl-prefill-ab.sh
# $OUT/ab.txt (mtsched's and max-autotune's row of each run), $OUT/r.tgz
# (each run's breakdown.md, summary.txt and decided graphs).
set -u
ROOT=$PWD
OUT=${OUT:?OUT names the results folder}
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpu.txt" 2>&1
START=$SECONDS
for R in $(seq "${REPEATS:-2}"); do
  for L in ${LAYERS:-llama3_70b_mlp llama3_8b_mlp}; do
    for P in ${MODES:-all 1}; do
      # A run takes 30-60 s; leave it room to finish.
      [ $((SECONDS - START)) -lt $((${LIMIT_S:-480} - 90)) ] || break 3
      D=$OUT/$L-r$R-$P
      MTSCHED_PDL=$P LAYERS=$L ROUNDS=${ROUNDS:-8} SIZE=prefill LIMIT_S=90 \
        OUT=$D bash "$ROOT/bench/device/final-call-interleaved.sh" > /dev/null 2>&1
      echo "$L r$R MTSCHED_PDL=$P $((SECONDS - START))s: $(grep -h \
        '^| mtsched measured\|^| max-autotune' "$D/breakdown.md" 2>/dev/null |
        head -2 | tr '\n' ' ')" | tee -a "$OUT/ab.txt"
    done
  done
done
(cd "$OUT" && tar czf r.tgz --exclude=r.tgz -- */breakdown.md */summary.txt \
  */*.decided.mir 2>/dev/null && rm -rf -- */)
