#!/usr/bin/env bash
# Branch reduce-fuse (issue 35, "shape-changing reductions join the kernel
# of their producer chain", "row reductions with layout members"): fused
# sum/max and row reductions reading layout ops through, on one GPU.
#  1. --run of test/lit/Cuda/reduce-fusion-run.mir (the MoE combine read
#     through at decode and prefill sizes, a softmax and a mean written by
#     hand as one block per row, nested reductions, a per-row chain beside
#     whole rows, the unfused no-keepdim case, an RMSNorm and a softmax
#     reading a transpose through): every output checked against
#     the fp64 interpreter, each graph's time as a CUDA graph; then the same
#     graphs with --reduction-fusion=false (each sum/max alone, as before)
#     for the time before.
#  2. examples/layers/mixtral_moe.mir at decode, one rank (gen_layers.py
#     --one-rank, inputs of a model's scale from scripts/layer_inputs.py):
#     decided with --backend=cuda, --run against the fp64 interpreter; the
#     decided graph then regrouped with --reduction-fusion=false and true
#     (`--pipeline=fuse` on the decided IR: same GEMM decisions) and timed
#     both ways in the same call.
#  3. The gallery's DeepSeek and Mixtral MoE decode graphs at one rank (the
#     all_to_all over a one-rank group): decided once, then timed regrouped
#     without and with reduction fusion (--run-check=false: the fp64
#     interpreter of a 128-row expert GEMM is too slow for the budget; step
#     1 and 2 check the kernels).
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/). Results in $OUT: reduce-fuse.log (every --run
# report line), summary.txt (the times before/after), the decided IR of
# step 2. Budget: about 2.5 minutes; steps past $DEADLINE (150 s) are
# skipped and say so.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/device-driver.sh
source "$ROOT/scripts/device-driver.sh"
device_script_setup "$ROOT" reduce-fuse
W=$(mktemp -d)
KC="$W/kc"
device_log_start "$OUT/reduce-fuse.log" "$OUT/summary.txt" "${DEADLINE:-150}"
run() { # TAG FILE [ARGS]: --run's report lines into the log, times into the summary
  local TAG=$1 F=$2
  shift 2
  echo "== $TAG: $F $*" >> "$LOG"
  timeout 100 "$BIN" "$F" "$@" --backend=cuda --no-cache \
    --kernel-cache-dir="$KC" --run --quiet -o /dev/null > "$W/run.log" 2>&1
  local RC=$?
  cat "$W/run.log" >> "$LOG"
  echo "exit $RC" >> "$LOG"
  grep -h 'decided graph\|does not match\|error' "$W/run.log" |
    sed "s/^/$TAG: /" >> "$SUM"
  echo "$TAG: exit $RC, $(grep -c 'matches the fp64 reference' "$W/run.log") outputs match" >> "$SUM"
}

# 1. The lit graphs, fused (checked) and alone (timed, checked too).
T=$ROOT/test/lit/Cuda/reduce-fusion-run.mir
run fused "$T" --split-input-file --pipeline=default
late "the lit graphs without reduction fusion" ||
  run alone "$T" --split-input-file --pipeline=default --reduction-fusion=false

# 2. Mixtral's MoE layer at decode, one rank.
if ! late "examples/layers/mixtral_moe.mir"; then
  python3 "$ROOT/examples/layers/gen_layers.py" --one-rank "$W" > /dev/null
  awk '/^graph @/ {keep = ($0 ~ "^graph @decode\\(")} /^group @/ {print; next} keep' \
    "$W/mixtral_moe.mir" > "$W/mixtral-decode.mir"
  mkdir -p "$W/in"
  "$PY" "$ROOT/scripts/layer_inputs.py" "$W/mixtral-decode.mir" "$W/in" >> "$LOG" 2>&1
  echo "== decide layers/mixtral_moe @decode" >> "$LOG"
  timeout 100 "$BIN" "$W/mixtral-decode.mir" --pipeline=default --backend=cuda \
    --no-cache --kernel-cache-dir="$KC" --quiet -o "$OUT/mixtral_moe-decode.decided.mir" >> "$LOG" 2>&1
  echo "exit $?" >> "$LOG"
  for RF in false true; do
    late "mixtral_moe reduction-fusion=$RF" ||
      run "layers/mixtral_moe decode, reduction-fusion=$RF" \
        "$OUT/mixtral_moe-decode.decided.mir" --pipeline=fuse \
        --reduction-fusion=$RF --run-inputs="$W/in"
  done
fi

# 3. The gallery's MoE decode graphs at one rank, timed only.
for M in deepseek_moe mixtral_8x7b_moe; do
  late "gallery $M" && continue
  sed -e 's/world_size = 8/world_size = 1/' \
    -e 's/group @ep = \[0, 1, 2, 3, 4, 5, 6, 7\]/group @ep = [0]/' \
    "$ROOT/examples/gallery/$M.mir" |
    awk -v g="${M}_decode" '/^graph @/ {keep = ($0 ~ "^graph @" g "\\(")} /^group @/ {print; next} keep' \
      > "$W/$M.mir"
  echo "== decide gallery $M @decode" >> "$LOG"
  timeout 60 "$BIN" "$W/$M.mir" --pipeline=default --backend=cuda --no-cache \
    --kernel-cache-dir="$KC" --quiet -o "$W/$M.decided.mir" >> "$LOG" 2>&1
  echo "exit $?" >> "$LOG"
  for RF in false true; do
    late "gallery $M reduction-fusion=$RF" ||
      run "gallery $M decode, reduction-fusion=$RF" "$W/$M.decided.mir" \
        --pipeline=fuse --reduction-fusion=$RF --run-check=false
  done
done
echo "total $((SECONDS - START)) s" >> "$SUM"
rm -rf "$W"
cat "$SUM"
