#!/usr/bin/env bash
# Prologue fusion on one H200 (branch prologue): rmsnorm -> matmul at decode
# (M = 1, 16, 64; K = 4096; N = 4096 and 14336), and the gallery's
# Llama-3-8B MLP and layer decode at world size 1 (the layer's attention
# norm feeds the merged Q/K/V GEMM), each tuned once on the GPU (the
# default pipeline up to select-horizontal), then run with --run from the
# same decisions (the six GEMMs three ways, the gallery graphs split and
# fused):
#   split   select-prologue with --prologue-fusion=false (the norm's kernel,
#           then the GEMM as decided);
#   model   select-prologue as the default pipeline runs it (the cost
#           model's choice, recorded as prologue_fused_us / _split_us);
#   fused   select-prologue with `always` (the prologue GEMM wherever it can
#           run), so the fused kernel is checked and timed even where the
#           model keeps the split form.
# Each run checks every output against the fp64 interpreter and prints the
# graph time (CUDA graph and eager) and the launches per run. In the MLP
# the norm feeds SwiGLU's merged gate+up GEMM (as select-swiglu decides on
# the GPU), which runs it in its prologue; in the layer also the merged
# Q/K/V GEMM.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/: mtsched-opt and CudaTests); results under $OUT, at
# most 7 files: unit.log, runs.log (every run's output), the decided fused
# IR of each file, prologue.md, and tune-failed.log only if tuning failed.
# At most 3 minutes: every step has a limit (20 s for the GPU unit tests
# PrologueGpu* of CudaTests, 30 + 3 x 10 s for the six GEMMs, 20 + 2 x 10 s
# for the MLP, 25 + 2 x 10 s for the layer).
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD; D=$ROOT/.device; OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
W=$(mktemp -d)
nvidia-smi -L 2>/dev/null | head -1
rc=0
# The kernels first, on hand-decided graphs (plain GEMM split-K or not,
# ragged, f16; merged Q/K/V; SwiGLU), against the fp64 interpreter.
timeout 20 "$D/bin/CudaTests" --gtest_filter='PrologueGpu*' > "$OUT/unit.log" 2>&1 || rc=1
tail -4 "$OUT/unit.log"
{
  for M in 1 16 64; do
    for N in 4096 14336; do
      echo "graph @norm_mm_m${M}_n${N}(%x: bf16[$M,4096], %w: bf16[4096], %b: bf16[4096,$N]) {"
      echo "  %n = rmsnorm(%x, %w) {eps = 1e-05} : bf16[$M,4096]"
      echo "  %y = matmul(%n, %b) : bf16[$M,$N]"
      echo "  return %y"
      echo "}"
    done
  done
} > "$W/gemms.mir"
# One decode graph of a gallery file at world size 1.
decode_only() { python3 "$ROOT/scripts/one_rank_graph.py" "$1" "$2" "$3"; }
decode_only "$ROOT/examples/gallery/llama3_8b_mlp.mir" "$W/mlp.mir" llama3_8b_mlp_decode
decode_only "$ROOT/examples/gallery/llama3_8b_layer.mir" "$W/layer.mir" llama3_8b_layer_decode
COMMON=(--backend=cuda --kernel-cache-dir="$W/kc" --no-cache)
echo "| graph | form | graph us (CUDA graph) | eager us | launches | fp64 check |" > "$OUT/prologue.md"
echo "|---|---|---|---|---|---|" >> "$OUT/prologue.md"
for G in gemms mlp layer; do
  TUNE_S=30; RUN_S=10; FORMS="split model fused"
  [ $G = mlp ] && { TUNE_S=20; FORMS="split fused"; }
  [ $G = layer ] && { TUNE_S=25; FORMS="split fused"; }
  timeout $TUNE_S "$OPT" "$W/$G.mir" "${COMMON[@]}" --quiet \
    --pipeline=lower,fuse-swiglu,fuse-horizontal,fuse,autotune,select-swiglu,select-horizontal \
    -o "$W/$G.tuned.mir" > "$W/$G.tune.log" 2>&1
  trc=$?; echo "== $G: tuned rc=$trc"
  [ $trc = 0 ] || { rc=1; { echo "== $G"; tail -40 "$W/$G.tune.log"; } >> "$OUT/tune-failed.log"; tail -3 "$W/$G.tune.log"; continue; }
  for F in $FORMS; do
    EXTRA=(--pipeline=select-prologue --prologue-fusion=false)
    [ $F = model ] && EXTRA=(--pipeline=select-prologue)
    [ $F = fused ] && EXTRA=(--pipeline=select-prologue --fusion-heuristic=always)
    timeout $RUN_S "$OPT" "$W/$G.tuned.mir" "${COMMON[@]}" "${EXTRA[@]}" --run \
      -o "$W/$G.$F.mir" > "$W/$G.$F.log" 2>&1
    frc=$?
    { echo "== $G $F (rc $frc)"; cat "$W/$G.$F.log"; } >> "$OUT/runs.log"
    echo "   $F (rc $frc): $(grep -o 'prologue_[a-z_]* = [^,}]*' "$W/$G.$F.mir" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
    grep -E "error" "$W/$G.$F.log" | cut -c1-200
    # One row per graph of the file.
    grep "decided graph" "$W/$G.$F.log" | while read -r LINE; do
      NAME=$(echo "$LINE" | sed -n 's/^run @\([A-Za-z0-9_]*\).*/\1/p')
      GRAPH=$(echo "$LINE" | sed -n 's/.*decided graph \([0-9.]*\) us as a CUDA graph.*/\1/p')
      EAGER=$(echo "$LINE" | sed -n 's/.* \([0-9.]*\) us eager.*/\1/p')
      LAUNCH=$(echo "$LINE" | sed -n 's/.*runs, \([0-9]*\) launches a run.*/\1/p')
      echo "| ${NAME:-$G} | $F | ${GRAPH:--} | ${EAGER:--} | ${LAUNCH:--} | (see below) |" >> "$OUT/prologue.md"
    done
    NOK=$(grep -c "matches the fp64" "$W/$G.$F.log")
    NBAD=$(grep -c "DIFFERS FROM" "$W/$G.$F.log")
    echo "| $G (all graphs) | $F | | | | $NOK match, $NBAD differ (rc $frc) |" >> "$OUT/prologue.md"
    [ $frc = 0 ] && [ "$NBAD" = 0 ] && [ "$NOK" -gt 0 ] || rc=1
  done
  cp "$W/$G.fused.mir" "$OUT/$G.fused.mir" 2>/dev/null
done
cat "$OUT/prologue.md"
rm -rf "$W"
exit $rc
