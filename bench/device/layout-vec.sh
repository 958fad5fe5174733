#!/usr/bin/env bash
# Branch layout-vec: read-through group kernels in the vector form (8
# adjacent bf16 outputs a thread, 16-byte loads and stores) with 32-bit
# indices (docs/CUDA.md), on one GPU.
#  1. lit: test/lit/Cuda/layout-fusion-run.mir (the vector and scalar forms
#     against the fp64 interpreter: the DeepSeek gather and combine at a
#     smaller size, a max over the experts, aligned concat, bf16 read into
#     f32, an innermost dimension of 12, a slice from 3) and
#     reduce-fusion-run.mir (the MoE combines).
#  2. The two groups that lost to Inductor at prefill, alone at full size
#     (bench/device/layout-vec/{gather,combine}.mir, inputs as graph
#     inputs; before: 631 and 503 us in torch.profiler, Inductor 138 and
#     256 us): --run --run-check=false, the CUDA-graph time of each.
#  3. The DeepSeek MoE layer's decided IR at prefill
#     (bench/results/device-2026-11-29b/moe-prefill/deepseek_moe.decided.mir,
#     copied to bench/device/layout-vec/ so that the script needs nothing
#     else; 4996 us through the torch backend before, --run's timeline
#     model 4192 us): --run --run-check=false, its CUDA-graph time.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/). Results in $OUT: summary.txt (the times and
# verdicts), layout-vec.log (every --run line), lit.log. Budget: about 2.5
# minutes; steps past $DEADLINE (150 s) are skipped and say so.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/device-driver.sh
source "$ROOT/scripts/device-driver.sh"
device_script_setup "$ROOT" layout-vec
D=$ROOT/.device
device_log_start "$OUT/layout-vec.log" "$OUT/summary.txt" "${DEADLINE:-150}"
WK=$(mktemp -d)
KC="$WK/kc"

# 1. The GPU lit tests of the forms.
device_lit_tree "$ROOT" "$D"
timeout 100 python3 "$D/lit/lit.py" -v \
  "$W/test/lit/Cuda/layout-fusion-run.mir" \
  "$W/test/lit/Cuda/reduce-fusion-run.mir" > "$OUT/lit.log" 2>&1
echo "lit layout-fusion-run, reduce-fusion-run: rc $?" >> "$SUM"
grep -h '^\(PASS\|FAIL\|UNSUPPORTED\|XFAIL\)' "$OUT/lit.log" >> "$SUM"
rm -rf "$W"

run() { # TAG FILE [ARGS]: --run's report lines into the log, times into the summary
  local TAG=$1 F=$2
  shift 2
  echo "== $TAG: $F $*" >> "$LOG"
  timeout 60 "$BIN" "$F" "$@" --backend=cuda --no-cache \
    --kernel-cache-dir="$KC" --run --run-check=false --quiet -o /dev/null \
    > "$WK/run.log" 2>&1
  local RC=$?
  cat "$WK/run.log" >> "$LOG"
  echo "exit $RC" >> "$LOG"
  grep -h 'decided graph\|error' "$WK/run.log" | sed "s/^/$TAG: /" >> "$SUM"
  echo "$TAG: exit $RC" >> "$SUM"
}

# 2. The two groups alone, fused as in the decided IR.
for G in gather combine; do
  late "$G" ||
    run "$G (full size)" "$ROOT/bench/device/layout-vec/$G.mir" \
      --pipeline=lower,fuse
done

# 3. The whole layer as decided.
late "deepseek_moe prefill" ||
  run "deepseek_moe prefill, decided IR" \
    "$ROOT/bench/device/layout-vec/deepseek_moe.decided.mir" \
    --pipeline=
echo "total $((SECONDS - START)) s" >> "$SUM"
rm -rf "$WK"
cat "$SUM"
