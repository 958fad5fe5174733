#!/usr/bin/env bash
# Branch epilogue-layout (issue 35, "template epilogues that continue
# through layout ops by index substitution"), on one GPU:
#  1. --run of test/lit/Schedule/epilogue-layout.mir and
#     epilogue-layout-interpret.mir (the Q projection's reshape, transpose
#     and RoPE products in the GEMM's epilogue; the cases that end it),
#     decided with --fusion-heuristic=always so the fused kernels run
#     (mma.sync or wgmma, as tuning picks), then the same graphs with
#     --epilogue-through-layout=false: every output checked against the
#     fp64 interpreter, each graph's time as a CUDA graph.
#  2. The Llama-3-8B Q projection + reshape + permute + RoPE products at
#     decode and prefill shapes, feature on and off (default heuristic:
#     the fused choice is taken only if it times faster).
#  3. The gallery's Llama-3-8B layer at decode and prefill, one rank,
#     feature on and off (fp64 check at decode; prefill timed with
#     --run-check=false to stay in budget), times and launches printed.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/). Results in $OUT: epilogue-layout.log (every
# --run report line), summary.txt, the decided IR of the lit graphs.
# Budget: under 3 minutes; steps past $DEADLINE (130 s) are skipped and
# say so (no step runs longer than 60 s).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/device-driver.sh
source "$ROOT/scripts/device-driver.sh"
device_script_setup "$ROOT" epilogue-layout
W=$(mktemp -d)
KC="$W/kc"
device_log_start "$OUT/epilogue-layout.log" "$OUT/summary.txt" "${DEADLINE:-130}"
rc=0
run() { # TAG LIMIT FILE [ARGS]: --run's report into the log, times into the summary
  local TAG=$1 LIMIT=$2 F=$3
  shift 3
  echo "== $TAG: $F $*" >> "$LOG"
  timeout "$LIMIT" "$BIN" "$F" "$@" --backend=cuda --no-cache \
    --kernel-cache-dir="$KC" --run --quiet > "$W/run.log" 2>&1
  local RC=$?
  cat "$W/run.log" >> "$LOG"
  echo "exit $RC" >> "$LOG"
  grep -h 'decided graph\|does not match\|DIFFERS\|error' "$W/run.log" |
    sed "s/^/$TAG: /" >> "$SUM"
  local BAD
  BAD=$(grep -c 'does not match\|DIFFERS' "$W/run.log")
  echo "$TAG: exit $RC, $(grep -c 'matches the fp64 reference' "$W/run.log") outputs match, $BAD differ" >> "$SUM"
  [ "$RC" = 0 ] && [ "$BAD" = 0 ] || rc=1
}

# 1. The lit graphs, fused through layout ops, then ended at them.
for T in epilogue-layout epilogue-layout-interpret; do
  F=$ROOT/test/lit/Schedule/$T.mir
  late "$T" && continue
  run "$T on" 60 "$F" --split-input-file --pipeline=default \
    --epilogue-through-layout --fusion-heuristic=always \
    -o "$OUT/$T.decided.mir"
  # Which epilogues ran fused (a fused choice the benchmark's check failed
  # would have fallen back to unfused: see WrongResult in the log).
  grep -o 'epilogue \[[^]]*\] decided [^ ]*\( fused\)\?' "$OUT/$T.decided.mir" 2>/dev/null |
    sed "s/^/$T on: /" >> "$SUM"
  grep -c 'WrongResult\|differs from the fp64 reference' "$LOG" | sed "s/^/$T: benchmark check failures so far: /" >> "$SUM"
  late "$T off" ||
    run "$T off" 60 "$F" --split-input-file --pipeline=default \
      --fusion-heuristic=always --epilogue-through-layout=false -o /dev/null
done

# 2. The Llama-3-8B Q projection at its shapes (hidden 4096, 32 heads of
#    128): [B*S, 4096] x [4096, 4096] -> reshape [B,S,32,128] -> transpose
#    [B,32,S,128] -> RoPE's products with cos/sin [S,128] and their sum,
#    plus a residual of the new shape: decode (B = 16, S = 1) and prefill
#    (B = 1, S = 256, fp64-checked), feature on and off.
for SH in "decode 16 1" "prefill 1 256"; do
  set -- $SH
  PH=$1 B=$2 S=$3 M=$(( $2 * $3 ))
  cat > "$W/q-$PH.mir" <<MIR
graph @llama3_8b_q_rope_$PH(%x: bf16[$M,4096], %wq: bf16[4096,4096], %cos: bf16[$S,128], %sin: bf16[$S,128], %res: bf16[$B,32,$S,128]) {
  %q = matmul(%x, %wq) : bf16[$M,4096]
  %q4 = reshape(%q) : bf16[$B,$S,32,128]
  %t = transpose(%q4) {perm = [0, 2, 1, 3]} : bf16[$B,32,$S,128]
  %qc = mul(%t, %cos) : bf16[$B,32,$S,128]
  %qs = mul(%qc, %sin) : bf16[$B,32,$S,128]
  %r = add(%qs, %res) : bf16[$B,32,$S,128]
  return %r
}
MIR
  for ON in true false; do
    late "q_rope $PH epilogue-through-layout=$ON" && continue
    run "q_rope $PH epilogue-through-layout=$ON" 40 "$W/q-$PH.mir" \
      --pipeline=default --epilogue-through-layout=$ON -o "$W/q-$PH-$ON.mir"
    grep -o 'epilogue \[[^]]*\] decided [^ ]*\( fused\)\?' "$W/q-$PH-$ON.mir" 2>/dev/null |
      sed "s/^/q_rope $PH on=$ON: /" >> "$SUM"
  done
done

# 3. The gallery's Llama-3-8B layer, decode and prefill, one rank (its Q/K
#    views feed RoPE's rotate-half slices as well, so fuse plans the same
#    either way: a control that nothing else moved).
for PH in decode prefill; do
  sed -e 's/world_size = 2/world_size = 1/' -e 's/group @tp = \[0, 1\]/group @tp = [0]/' \
    "$ROOT/examples/gallery/llama3_8b_layer.mir" |
    awk -v g="llama3_8b_layer_$PH" '/^graph @/ {keep = ($0 ~ "^graph @" g "\\(")} /^group @/ {print; next} keep' \
      > "$W/layer-$PH.mir"
  CHECK=()
  [ $PH = prefill ] && CHECK=(--run-check=false)
  for ON in true false; do
    late "llama3_8b_layer $PH epilogue-through-layout=$ON" && continue
    run "llama3_8b_layer $PH epilogue-through-layout=$ON" 40 "$W/layer-$PH.mir" \
      --pipeline=default --epilogue-through-layout=$ON "${CHECK[@]}" \
      -o "$W/layer-$PH-$ON.mir"
    grep -c 'epilogue \[' "$W/layer-$PH-$ON.mir" 2>/dev/null |
      sed "s/^/llama3_8b_layer $PH on=$ON: templates with an epilogue: /" >> "$SUM"
  done
done
echo "total $((SECONDS - START)) s" >> "$SUM"
rm -rf "$W"
cat "$SUM"
exit $rc
