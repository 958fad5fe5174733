#!/usr/bin/env bash
# The recursive fusion search on one H200 (branch fusion-search): decode
# graphs tuned once on the GPU (the default pipeline up to select-swiglu,
# with --prologue-fusion and --epilogue-through-layout, so that Q's and K's
# RoPE can fuse into their GEMMs and block the Q/K/V merge and the norm's
# prologue), then decided two ways from the same measurements and run with
# --run (every output checked against the fp64 interpreter, the graph
# time as a CUDA graph and eager, launches per run):
#   greedy     --fusion-search=greedy (pass order);
#   recursive  --fusion-search=recursive (search-fusion reopens fused
#              epilogues where the merge and the prologue then win).
# Graphs, at world size 1: the gallery's Llama-3-8B and Llama-3-70B layers
# at decode, and the lit input norm-qkv-rope-mha-decode (Q/K/V with a
# pointwise RoPE stand-in on Q and K, 16 rows), where the simulator's
# search reopens both epilogues (24.3 -> 20.2 us).
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/). Results under $OUT, at most 6 files: runs.log
# (every run's output), fusion-search.md (the table), the recursive IR of
# each graph, and tune-failed.log only if tuning failed. At most 3
# minutes: every step has a limit (tuning 30 s per layer, 20 s for the
# small graph; each decided run 10 s: 80 + 6 x 10 s).
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD; D=$ROOT/.device; OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
W=$(mktemp -d)
nvidia-smi -L 2>/dev/null | head -1
rc=0
# One decode graph of a gallery file at world size 1.
decode_only() { python3 "$ROOT/scripts/one_rank_graph.py" "$1" "$2" "$3"; }
decode_only "$ROOT/examples/gallery/llama3_8b_layer.mir" "$W/l8b.mir" llama3_8b_layer_decode
decode_only "$ROOT/examples/gallery/llama3_70b_layer.mir" "$W/l70b.mir" llama3_70b_layer_decode
cp "$ROOT/test/lit/Autotune/Inputs/norm-qkv-rope-mha-decode.mir" "$W/qkv.mir"
COMMON=(--backend=cuda --kernel-cache-dir="$W/kc" --no-cache --prologue-fusion
        --epilogue-through-layout)
{ echo "| graph | search | reopened | graph us (CUDA graph) | eager us | launches | fp64 check |"
  echo "|---|---|---|---|---|---|---|"; } > "$OUT/fusion-search.md"
for G in qkv l8b l70b; do
  TUNE_S=30; [ $G = qkv ] && TUNE_S=20
  timeout $TUNE_S "$OPT" "$W/$G.mir" "${COMMON[@]}" --quiet \
    --pipeline=lower,fuse-swiglu,fuse-horizontal,fuse,autotune,select-swiglu \
    -o "$W/$G.tuned.mir" > "$W/$G.tune.log" 2>&1
  trc=$?; echo "== $G: tuned rc=$trc"
  [ $trc = 0 ] || { rc=1; { echo "== $G"; tail -40 "$W/$G.tune.log"; } >> "$OUT/tune-failed.log"; tail -3 "$W/$G.tune.log"; continue; }
  for S in greedy recursive; do
    timeout 10 "$OPT" "$W/$G.tuned.mir" "${COMMON[@]}" --fusion-search=$S \
      --pipeline=search-fusion,select-horizontal,select-prologue --run \
      -o "$W/$G.$S.mir" > "$W/$G.$S.log" 2>&1
    frc=$?
    { echo "== $G $S (rc $frc)"; cat "$W/$G.$S.log"; } >> "$OUT/runs.log"
    REOPENED=$(grep -o '%[A-Za-z0-9_.]* = multi_template_buffer [a-z_]*([^)]*) {fusion_reopened' "$W/$G.$S.mir" 2>/dev/null | sed 's/ = .*//' | tr '\n' ' ')
    echo "   $S (rc $frc): reopened ${REOPENED:-none}; $(grep -o 'fusion_[a-z]*_us = [0-9.]*' "$W/$G.$S.mir" 2>/dev/null | head -2 | tr '\n' ' ')"
    grep -E "error" "$W/$G.$S.log" | cut -c1-200
    LINE=$(grep "decided graph" "$W/$G.$S.log" | head -1)
    GRAPH=$(echo "$LINE" | sed -n 's/.*decided graph \([0-9.]*\) us as a CUDA graph.*/\1/p')
    EAGER=$(echo "$LINE" | sed -n 's/.* \([0-9.]*\) us eager.*/\1/p')
    LAUNCH=$(echo "$LINE" | sed -n 's/.*runs, \([0-9]*\) launches a run.*/\1/p')
    NOK=$(grep -c "matches the fp64" "$W/$G.$S.log")
    NBAD=$(grep -c "DIFFERS FROM" "$W/$G.$S.log")
    echo "| $G | $S | ${REOPENED:-none} | ${GRAPH:--} | ${EAGER:--} | ${LAUNCH:--} | $NOK match, $NBAD differ (rc $frc) |" >> "$OUT/fusion-search.md"
    [ $frc = 0 ] && [ "$NBAD" = 0 ] && [ "$NOK" -gt 0 ] || rc=1
  done
  cp "$W/$G.recursive.mir" "$OUT/$G.recursive.mir" 2>/dev/null
done
cat "$OUT/fusion-search.md"
rm -rf "$W"
exit $rc
