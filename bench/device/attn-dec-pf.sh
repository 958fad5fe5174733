#!/usr/bin/env bash
# Decode attention under PDL (issue 35): the next launch's key tiles
# prefetched into L2 before its griddepcontrol.wait, and the grid's trigger
# moved from its start to its last copy (attn-dec-timeline.py's mode
# `pf`: the generator's PRE_WAIT and EVICT_FIRST switched off, on or to
# other depths, and `late0`, beside `ours`, `notrig`, SDPA and SDPA's cuDNN
# backend, ROUNDS interleaved rounds, each variant checked against fp32
# first). Run from the repository root; the kernels are
# dumped by mtsched-opt (.device/bin after `bash scripts/gpu-test.sh
# --pack`, else build/) unless CASES names a cases file already dumped
# (attn-dec-timeline.py's format; its paths relative to the root).
#   [ROUNDS=4] [TILES="decode_b16 d32.4.4.1 ..."] [CASES=FILE] \
#     bash bench/device/attn-dec-pf.sh
# $OUT/summary.txt, $OUT/timeline.log. Budget: LIMIT_S (150 s).
set -u
ROOT=$PWD
source "$ROOT/scripts/device-driver.sh" # device_script_setup, device_dump_decode_case
device_script_setup "$ROOT" attn-dec-pf # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; } > "$S" 2>&1
START=$SECONDS
K=$(mktemp -d)
if [ -n "${CASES:-}" ]; then
  cp "$CASES" "$K/cases.txt"
else
  TILES=${TILES:-"decode_b16 d32.4.4.1
decode_b4 d32.4.8.4s
decode_b1 d32.4.8.8s"}
  while read -r g tile; do
    device_dump_decode_case "$K" "$g" "$tile" pf "$OUT/timeline.log"
  done <<< "$TILES"
fi
echo "$(wc -l < "$K/cases.txt") kernels" | tee -a "$S"
ROUNDS=${ROUNDS:-4} timeout $((${LIMIT_S:-150} - (SECONDS - START))) \
  "$PY" bench/device/attn-dec-timeline.py "$K/cases.txt" >> "$OUT/timeline.log" 2>&1
echo "timeline rc=$? at $((SECONDS - START)) s" | tee -a "$S"
grep -v "^  ptxas" "$OUT/timeline.log" | cut -c1-900 >> "$S"
rm -rf "$K"
