#!/usr/bin/env bash
# Horizontal fusion on one H200 (branch qkv-horiz): the gallery's
# Llama-3-8B layer, decode and prefill, at world size 1 (the TP group
# reduced to one rank, as attn-mask.sh does), tuned once on the GPU (the
# default pipeline up to select-swiglu: fuse-horizontal's merged GEMM is
# timed beside Q, K and V), then run with --run twice from the same
# decisions: split (select-horizontal with --horizontal-fusion=false: the
# Q/K/V GEMMs as decided, three launches) and merged (select-horizontal
# with `always`, so the merged kernel runs even where the measurements keep
# the split form).
# Each run checks the layer's output and Q, K and V (returned too) against
# the fp64 interpreter, and prints the graph time (CUDA graph and eager) and
# the launches per run. select-horizontal's own decision (the default
# heuristic, on the times measured while tuning) is printed from the decided
# IR (horizontal_merged_us / _split_us, horizontal_measured).
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/); results under $OUT (a log per run, the decided
# merged IR per layer, qkv-horiz.md; the tuning log only if tuning failed).
# At most 3 minutes: every step has a limit (30+20+20 s decode, 45+32+32 s
# prefill).
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD; D=$ROOT/.device; OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
W=$(mktemp -d)
nvidia-smi -L 2>/dev/null | head -1
python3 - "$ROOT/examples/gallery/llama3_8b_layer.mir" "$W" <<'PY'
import re, sys
text = open(sys.argv[1]).read().replace("group @tp = [0, 1]", "group @tp = [0]")
text = text.replace("world_size = 2", "world_size = 1")
for want in ("decode", "prefill"):
    out, keep, head = [], False, True
    for line in text.splitlines(True):
        m = re.match(r"graph @(\w+)\(", line)
        if m:
            head = False
            keep = m.group(1) == "llama3_8b_layer_" + want
        if head and not line.startswith("//"):
            out.append(line)
        elif keep:
            out.append(line)
            if line.startswith("}"):
                keep = False
    body = "".join(out).replace("  return %add_6\n",
                                "  return %add_6, %mm, %mm_1, %mm_2\n")
    open(sys.argv[2] + "/" + want + ".mir", "w").write(body)
PY
COMMON=(--backend=cuda --kernel-cache-dir="$W/kc" --no-cache)
echo "| layer | form | graph us (CUDA graph) | eager us | launches | fp64 check |" > "$OUT/qkv-horiz.md"
echo "|---|---|---|---|---|---|" >> "$OUT/qkv-horiz.md"
rc=0
for G in decode prefill; do
  TUNE_S=30; RUN_S=20
  [ $G = prefill ] && { TUNE_S=45; RUN_S=32; }
  timeout $TUNE_S "$OPT" "$W/$G.mir" "${COMMON[@]}" --quiet \
    --pipeline=lower,fuse-swiglu,fuse-horizontal,fuse,autotune,select-swiglu \
    -o "$W/$G.tuned.mir" \
    > "$W/$G.tune.log" 2>&1
  trc=$?; echo "== $G: tuned rc=$trc"
  [ $trc = 0 ] || { rc=1; cp "$W/$G.tune.log" "$OUT/"; tail -3 "$W/$G.tune.log"; continue; }
  # select-horizontal's decision (the default heuristic) on these times.
  "$OPT" "$W/$G.tuned.mir" --pipeline=select-horizontal -o "$W/$G.model.mir" 2>&1 | tail -2
  echo "   decided: $(grep -o 'q_proj.weight) {[^}]*}' "$W/$G.model.mir" | head -1)"
  for F in split merged; do
    EXTRA=(--pipeline=select-horizontal --horizontal-fusion=false)
    [ $F = merged ] && EXTRA=(--pipeline=select-horizontal --fusion-heuristic=always)
    timeout $RUN_S "$OPT" "$W/$G.tuned.mir" "${COMMON[@]}" "${EXTRA[@]}" --run \
      -o "$W/$G.$F.mir" > "$OUT/$G.$F.log" 2>&1
    frc=$?
    echo "   $F: $(grep -o 'q_proj.weight) {[^}]*}' "$W/$G.$F.mir" 2>/dev/null | head -1)"
    grep -E "run @|error" "$OUT/$G.$F.log" | cut -c1-200
    LINE=$(grep "decided graph" "$OUT/$G.$F.log" | head -1)
    GRAPH=$(echo "$LINE" | sed -n 's/.*decided graph \([0-9.]*\) us as a CUDA graph.*/\1/p')
    EAGER=$(echo "$LINE" | sed -n 's/.* \([0-9.]*\) us eager.*/\1/p')
    LAUNCH=$(echo "$LINE" | sed -n 's/.*runs, \([0-9]*\) launches a run.*/\1/p')
    NOK=$(grep -c "matches the fp64" "$OUT/$G.$F.log")
    NBAD=$(grep -c "DIFFERS FROM" "$OUT/$G.$F.log")
    echo "| $G | $F | ${GRAPH:--} | ${EAGER:--} | ${LAUNCH:--} | $NOK match, $NBAD differ (rc $frc) |" >> "$OUT/qkv-horiz.md"
    [ $frc = 0 ] && [ "$NBAD" = 0 ] || rc=1
  done
  cp "$W/$G.merged.mir" "$OUT/$G.merged.mir" 2>/dev/null
done
cat "$OUT/qkv-horiz.md"
rm -rf "$W"
exit $rc
