#!/usr/bin/env bash
# Mixtral decode's expert GEMMs (batch 16) over wgmma tile widths, from the repository root
# (files under .device/mx/ when it ran; here beside its reports).
# gate.json and down.json list tiles (bn 224, bn 112, bk 128) that the choices
# file refuses since f7d5fa7: drop them to run it again.
# SUF=2 runs gate2.json and down2.json (mma.sync tiles of 16 and 32 rows).
ROOT=$PWD; source scripts/device-driver.sh; device_script_setup "$ROOT" mx
export LD_LIBRARY_PATH=$ROOT/.device/lib:${LD_LIBRARY_PATH:-}
for g in gate down; do
  timeout 120 "$BIN" .device/mx/$g.mir --pipeline=default --backend=cuda --prune-top-k=0 --no-cache \
    --kernel-cache-dir=/tmp/kc-$g --quiet --choice-timeout-ms=20000 --choices-file=.device/mx/${g}${SUF:-}.json \
    --report="$OUT/report-${g}${SUF:-}.json" 2>&1 | grep -o "decided.*" | cut -c1-900
  python3 bench/choices_file.py report "$OUT/report-${g}${SUF:-}.json" matmul
done
