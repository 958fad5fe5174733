#!/usr/bin/env bash
# attn-dec16d branch (issue 35: decode attention at B = 1, 4, 16 <= 1.0x
# SDPA on an H200): `_sw` as the split decode tiles' default, and where
# batch 16's last ~2 us go. Run from the repository root after `bash
# scripts/gpu-test.sh --pack` (binaries in .device/); results under $OUT.
# Budget: 72 s, every step under `timeout`.
#   1. sdpa.log: PyTorch SDPA, each backend, at B = 16, 4, 1
#      (bench/peers/torch_sdpa.py).
#   2. lit.log: lit Cuda/attention-dec-run.mir, attention-run.mir (the
#      default choices, decode with `_sw`), attention-mma-run.mir: every
#      choice checked against fp64, the decided graphs --run against the
#      fp64 interpreter.
#   3. decided.log / summary: per decode graph (bench/attention-llama3.mir)
#      the choices of $CHOICES (the old and the new defaults), each checked
#      against fp64 by the benchmarker before it is timed.
#   4. timeline.log: bench/device/attn-dec-timeline.py on the dumped
#      kernels of $TL (graph tile mode): checked against fp32, timed beside
#      SDPA (default, cuDNN) in one process, the variants (carve-out 100,
#      one CTA an SM, PDL) in `full` mode, and every CTA's %globaltimer
#      stamps (-DMT_TIMELINE).
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_script_setup, device_lit_tree, device_dump_decode_case
device_script_setup "$ROOT" attn-dec16d # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
device_log_start "$OUT/decided.log" "$OUT/summary.txt" 72 # START
S=$OUT/summary.txt
left() { echo $((72 - (SECONDS - START))); }
cap() { local T; T=$(left); [ "$T" -gt "$1" ] && T=$1; echo "$T"; }
K=$(mktemp -d)

echo "== 1. PyTorch SDPA, each backend" | tee -a "$S"
timeout 14 "$PY" bench/peers/torch_sdpa.py "$OUT/sdpa.json" \
  --only=decode_b1,decode_b4,decode_b16 > "$OUT/sdpa.log" 2>&1
echo "sdpa rc=$? at $((SECONDS - START)) s" | tee -a "$S"
grep decode "$OUT/sdpa.log" | tee -a "$S"

if [ "${LIT:-1}" = 1 ]; then
  echo "== 2. lit: Cuda/attention-dec-run, attention-run, attention-mma-run" | tee -a "$S"
  device_lit_tree "$ROOT" "$D" # W
  timeout "$(cap 30)" python3 "$D/lit/lit.py" -sv -j3 "$W/test/lit/Cuda/attention-dec-run.mir" \
    "$W/test/lit/Cuda/attention-run.mir" "$W/test/lit/Cuda/attention-mma-run.mir" \
    > "$OUT/lit.log" 2>&1
  echo "lit rc=$? at $((SECONDS - START)) s" | tee -a "$S"
  grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):|^ *(Passed|Failed|Unsupported) *:" "$OUT/lit.log" | tee -a "$S"
  for f in "$W"/test/lit/Cuda/Output/attention-*run.mir.tmp*log; do
    [ -f "$f" ] && grep -h "run @\|error\|wrong\|differs" "$f" | head -24
  done >> "$OUT/lit.log"
  grep -h "differs\|error" "$OUT/lit.log" | head -12 | tee -a "$S"
  echo "lit fp64 matches: $(grep -c "matches the fp64" "$OUT/lit.log")" | tee -a "$S"
  rm -rf "$W"
fi

# graph: its choices as bench/choices_file.py's tokens
# (dBKV.W.S.N = attn_dec_16xBKV_wW_sS[_kvN]; s: `_sw`).
CHOICES=${CHOICES:-"decode_b16 d32.4.4.1 d32.4.4.1s
decode_b4 d32.4.8.4 d32.4.8.4s d32.4.8.8s
decode_b1 d32.4.8.8 d32.4.8.8s d32.4.8.16 d32.4.8.16s"}
echo "== 3. decode choices over 4096 keys" | tee -a "$S"
while read -r g tiles; do
  python3 bench/choices_file.py attn "$K/$g.json" $tiles
  sed -n "/^graph @$g(/,/^}/p" bench/attention-llama3.mir > "$K/$g.mir"
  T=$(cap 10)
  if [ "$T" -lt 3 ]; then echo "$g skipped: out of time" | tee -a "$S"; continue; fi
  device_tune_attention "$K" "$g" "$T"
  echo "$g rc=$? at $((SECONDS - START)) s" | tee -a "$S"
  grep -o "decided [a-z0-9_]* timings {[^}]*}" "$K/decided.part" | tee -a "$S"
done <<< "$CHOICES"
grep -i "error\|differs\|wrong" "$OUT/decided.log" | head -10 | tee -a "$S"
for r in "$K"/report-*.json; do
  [ -f "$r" ] && python3 bench/choices_file.py not-ok "$r" | tee -a "$S"
done

# graph tile mode (full: the variants too; tl: timeline and SDPA only).
TL=${TL:-"decode_b16 d32.4.4.1 full
decode_b4 d32.4.8.4s full
decode_b1 d32.4.8.8s full
decode_b16 d32.4.4.1s tl"}
echo "== 4. timeline (bench/device/attn-dec-timeline.py)" | tee -a "$S"
: > "$K/cases.txt"
while read -r g tile mode; do
  device_dump_decode_case "$K" "$g" "$tile" "$mode" "$OUT/timeline.log"
done <<< "$TL"
echo "$(wc -l < "$K/cases.txt") kernels dumped at $((SECONDS - START)) s" | tee -a "$S"
timeout "$(cap 40)" "$PY" bench/device/attn-dec-timeline.py "$K/cases.txt" \
  >> "$OUT/timeline.log" 2>&1
echo "timeline rc=$? at $((SECONDS - START)) s" | tee -a "$S"
grep -v "^  ptxas" "$OUT/timeline.log" | cut -c1-600 | tee -a "$S" > /dev/null
tar -C "$K" -cf "$OUT/reports.tar" $(cd "$K" && ls report-*.json 2>/dev/null)
echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K"
