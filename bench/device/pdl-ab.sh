#!/usr/bin/env bash
# Programmatic dependent launch on and off in the same call (one H200): each
# gallery layer's graph (examples/gallery, cut to one rank by
# scripts/one_rank_graph.py; SIZE decode, the default, or prefill) tuned once
# by mtsched-opt on the GPU and run with `--run` (checked against the fp64
# interpreter at decode), then run again ROUNDS times each with
# MTSCHED_PDL=0 and MTSCHED_PDL=1 in turn (the autotune cache replays the
# decisions: the same kernels, launched without and with PDL;
# docs/CUDA.md). Prints each run's `run @...` line: the decided graph's time
# as a CUDA graph and eagerly. Run from the repository root after
# `bash scripts/gpu-test.sh --pack`:
#   [LAYERS="llama3_8b_layer ..."] [ROUNDS=3] [SIZE=decode] [LIMIT_S=300] \
#     bash bench/device/pdl-ab.sh
# $OUT/summary.txt, $OUT/logs.tar (each run's log, the decided IRs).
set -u
ROOT=$PWD
source "$ROOT/scripts/device-driver.sh" # device_script_setup
device_script_setup "$ROOT" pdl-ab # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
LAYERS=${LAYERS:-llama3_8b_layer llama3_70b_layer llama3_8b_mlp llama3_70b_mlp megatron_sp_mlp mixtral_8x7b_moe deepseek_moe}
SIZE=${SIZE:-decode}
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; } > "$S" 2>&1
K=$(mktemp -d)
export XDG_CACHE_HOME=$K/xdg # a fresh autotune cache
START=$SECONDS
left() { echo $((${LIMIT_S:-300} - (SECONDS - START))); }
CHECK=true
[ "$SIZE" = prefill ] && CHECK=false # prefill GEMMs take minutes on a CPU
for L in $LAYERS; do
  [ "$(left)" -gt 20 ] || { echo "$L: out of time" | tee -a "$S"; continue; }
  python3 scripts/one_rank_graph.py "examples/gallery/$L.mir" "$K/$L.mir" "${L}_$SIZE"
  timeout "$(left)" "$BIN" "$K/$L.mir" --pipeline=default --backend=cuda --quiet \
    --kernel-cache-dir="$K/kc" --run --run-check=$CHECK -o "$K/$L.decided.mir" \
    > "$K/$L.tune.log" 2>&1
  echo "$L ($SIZE) tuned: rc $? at $((SECONDS - START)) s" | tee -a "$S"
  grep -h "run @\|error\|differs\|matches" "$K/$L.tune.log" | head -6 | tee -a "$S"
  for R in $(seq "${ROUNDS:-3}"); do
    for P in 0 1; do
      [ "$(left)" -gt 5 ] || break 2
      MTSCHED_PDL=$P timeout "$(left)" "$BIN" "$K/$L.mir" --pipeline=default \
        --backend=cuda --quiet --kernel-cache-dir="$K/kc" --run --run-check=false \
        -o /dev/null > "$K/$L.r$R.pdl$P.log" 2>&1
      echo "$L round $R MTSCHED_PDL=$P rc $?: $(grep -h "run @" "$K/$L.r$R.pdl$P.log")" | tee -a "$S"
    done
  done
done
tar -C "$K" -cf "$OUT/logs.tar" --exclude=kc --exclude=xdg . 2>/dev/null
echo "total $((SECONDS - START)) s" | tee -a "$S"
