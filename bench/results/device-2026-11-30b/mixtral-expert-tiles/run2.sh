#!/usr/bin/env bash
# Mixtral decode's gate GEMM after the layer's expand/transpose chain (chain.mir) and
# alone (gate.mir), wgmma 64x256 against cuBLAS, two tunings each; from the repository
# root with these files under .device/mx/.
ROOT=$PWD; source scripts/device-driver.sh; device_script_setup "$ROOT" mx
export LD_LIBRARY_PATH=$ROOT/.device/lib:${LD_LIBRARY_PATH:-}
for g in chain gate; do
  for r in 1 2; do
  timeout 120 "$BIN" .device/mx/$g.mir --pipeline=default --backend=cuda --prune-top-k=0 --no-cache \
    --kernel-cache-dir=/tmp/kc-$g-$r --quiet --choice-timeout-ms=20000 --choices-file=.device/mx/chain.json \
    --report="$OUT/report-$g-$r.json" 2>&1 | grep -o "decided [^}]*}" | cut -c1-400
  done
done
