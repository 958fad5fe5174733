#!/usr/bin/env bash
# The session's last call for issue 35 (one H200), from the repository root
# after `bash scripts/gpu-test.sh --pack`: every GPU lit test under
# test/lit/Cuda with the merged build (lit -j4), then the gallery at prefill
# (or SIZE=decode) through the backend (final-call-gallery.sh; BUDGET_S,
# default 380), or with BENCH=interleaved timed interleaved beside
# max-autotune. $OUT/lit-cuda.txt and $OUT/<size>[-interleaved]/.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD; D=$ROOT/.device
OUT=${OUT:-$ROOT/gpu-results/final-35}
mkdir -p "$OUT"
source "$ROOT/scripts/device-driver.sh" # device_lit_tree
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
T0=$SECONDS
device_lit_tree "$ROOT" "$D"
timeout 120 python3 "$D/lit/lit.py" -sv -j4 "$W/test/lit/Cuda" \
  > "$OUT/lit-cuda.txt" 2>&1
echo "lit Cuda: rc $? in $((SECONDS - T0)) s" | tee -a "$OUT/lit-cuda.txt"
grep -E "^(FAIL|PASS|UNSUPPORTED):|Passed|Failed|Unsupported" \
  "$OUT/lit-cuda.txt" | grep -v "^PASS" | tail -12
# BENCH=interleaved: the layers timed interleaved beside max-autotune
# instead (final-call-interleaved.sh; LAYERS, FORMS, ROUNDS; LIMIT_S from
# BUDGET_S), at SIZE (default prefill).
SIZE=${SIZE:-prefill}
if [ "${BENCH:-gallery}" = interleaved ]; then
  SIZE=$SIZE LIMIT_S=${BUDGET_S:-380} OUT=$OUT/$SIZE-interleaved \
    bash "$ROOT/bench/device/final-call-interleaved.sh"
else
  SIZE=$SIZE BUDGET_S=${BUDGET_S:-380} OUT=$OUT/$SIZE \
    bash "$ROOT/bench/device/final-call-gallery.sh"
fi
