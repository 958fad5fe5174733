#!/usr/bin/env bash
# attn-dec16c branch (issue 35: decode attention at B = 16 <= 1.0x SDPA,
# B = 1 and 4 no slower): a profile of mtsched's `attn_dec` kernel beside
# SDPA's cuDNN kernel at B = 16, and the decode choices beside SDPA, on one
# H200. Run from the repository root after `bash scripts/gpu-test.sh
# --pack` (binaries in .device/); results under $OUT. Budget: 72 s, every
# step under `timeout`.
#   1. sdpa.log: PyTorch SDPA, each backend, at B = 16, 4, 1
#      (bench/peers/torch_sdpa.py).
#   1b. lit.log: lit Cuda/attention-dec-run.mir (every attn_dec tile of its
#      choices file, the new ones included, checked against fp64 by the
#      benchmarker; the decided graphs --run against the fp64 interpreter).
#   2. decided.log / summary: per decode graph (bench/attention-llama3.mir)
#      the choices of $CHOICES, each checked against fp64 by the
#      benchmarker before it is timed.
#   3. sdpa-kernels.txt (SDPA_INFO=1): SDPA's kernels at B = 16 and 4
#      (name, grid, block, shared memory, registers: torch.profiler).
#   4. ncu-ours.txt, ncu-cudnn.txt (NCU_CUDNN=1): Nsight Compute (where the
#      machine has it and allows it) on our B = 16 kernel ($NCU_TILE, a
#      choices_file.py token) and on cuDNN's, same sections.
#   5. sdpa2.log: SDPA at B = 16 once more.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_script_setup, device_lit_tree
device_script_setup "$ROOT" attn-dec16c # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
device_log_start "$OUT/decided.log" "$OUT/summary.txt" 72 # START
S=$OUT/summary.txt
left() { echo $((72 - (SECONDS - START))); }
cap() { local T; T=$(left); [ "$T" -gt "$1" ] && T=$1; echo "$T"; }
K=$(mktemp -d)

echo "== 1. PyTorch SDPA, each backend" | tee -a "$S"
timeout 14 "$PY" bench/peers/torch_sdpa.py "$OUT/sdpa.json" \
  --only=decode_b1,decode_b4,decode_b16 > "$OUT/sdpa.log" 2>&1
echo "sdpa rc=$?" | tee -a "$S"
grep decode "$OUT/sdpa.log" | tee -a "$S"

if [ "${LIT:-1}" = 1 ]; then
  echo "== 1b. lit: Cuda/attention-dec-run.mir" | tee -a "$S"
  device_lit_tree "$ROOT" "$D" # W
  timeout "$(cap 20)" python3 "$D/lit/lit.py" -sv --filter 'attention-dec-run' \
    "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
  echo "lit rc=$?" | tee -a "$S"
  grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
  for f in "$W"/test/lit/Cuda/Output/attention-dec-run.mir.tmp*; do
    [ -f "$f" ] && grep -h "run @\|error\|wrong\|differs\|timings" "$f" | head -24
  done >> "$OUT/lit.log"
  grep -h "matches\|differs\|error" "$OUT/lit.log" | head -12 | tee -a "$S"
  rm -rf "$W"
fi

# graph: its choices as bench/choices_file.py's tokens
# (dBKV.W.S.N = attn_dec_16xBKV_wW_sS[_kvN]).
# (o: `_ob`, one TMA copy a stage for k and one for v; s: `_sw`, the keys
# as the MMAs' rows, the packed query rows as their columns.)
# Round 1 (17:48 UTC, 926e1bd; SDPA 64.39 / cuDNN 64.36, at the end 64.35):
# 16x32_w4_s4 65.95, w2 65.89; _ob 66.52 (w2 66.52, 16x64_w2_s2_ob 78.67,
# 16x32_w4_s8_ob 67.77); B = 4 21.38-21.47 (_ob 21.63), B = 1 9.66-9.77
# (_ob 10.05): _ob loses. cuDNN's kernel (torch.profiler, ncu): sm80
# flash_fprop_wmma 16x128x128, grid (1, 8, 16) = 128 CTAs of 128 threads,
# 86 KB of shared memory, 183 registers: the same decomposition as ours
# (at B = 4: 8 splits, 256 CTAs, and a reduction kernel of 2.1 us).
# ncu (no clock control): ours 67.04 us, elapsed 120,392 cycles, the
# longest-active SM 112,540 (DRAM 4.01 TB/s over the duration); cuDNN 65.66
# us, 117,655, 113,462: our CTAs stream faster (268.6 MB over the longest
# SM's 62.9 us: 4.27 TB/s; cuDNN 4.22) and the time lost is outside the
# longest SM's activity (4.4 us against 2.4).
# Round 2 (18:01 UTC, 68f00b5; SDPA 64.29 / cuDNN 64.39, at the end 65.20 /
# 65.02; lit attention-dec-run passed with the _ob and _sw tiles):
# 16x32_w4_s4 65.95, _sw 66.22, _ob_sw 65.82, 16x32_w2_s4_sw 66.56,
# 16x64_w2_s2_sw 66.06, 16x32_w4_s8_sw 67.85: no gain at B = 16; ncu of
# 16x32_w4_s4_sw 67.23 us (120 registers, longest SM 115,025 of 121,143
# cycles). B = 4: 16x32_w4_s8_kv4_sw 20.96 against 21.47 (SDPA 23.14);
# B = 1: 16x32_w4_s8_kv8_sw 9.26 against 9.76 (SDPA 11.09). (A `_ts` form
# printing each CTA's start and end with device printf printed nothing,
# probably because the benchmarker polls its events (cuEventQuery), which
# does not flush device printf; it was removed, commit 68f00b5 has it.)
CHOICES=${CHOICES:-"decode_b16 d32.4.4.1 d32.4.4.1s d32.4.4.1os d64.2.2.1s
decode_b4 d32.4.8.4 d32.4.8.4s d16.4.8.4s
decode_b1 d32.4.8.8 d32.4.8.8s d16.4.8.16s"}
echo "== 2. decode choices over 4096 keys" | tee -a "$S"
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

if [ "${SDPA_INFO:-0}" = 1 ]; then
  echo "== 3. SDPA's kernels (torch.profiler)" | tee -a "$S"
  timeout "$(cap 12)" "$PY" bench/peers/sdpa_decode_profile.py info 16 4 \
    > "$OUT/sdpa-kernels.txt" 2>&1
  echo "sdpa-kernels rc=$?" | tee -a "$S"
  grep "^B=" "$OUT/sdpa-kernels.txt" | cut -c1-400 | tee -a "$S"
fi

echo "== 4. Nsight Compute" | tee -a "$S"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}; $(ls -d /usr/local/cuda*/bin /opt/nvidia/* 2>/dev/null | tr '\n' ' ')" | tee -a "$S"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis
  --section MemoryWorkloadAnalysis_Tables --section WarpStateStats
  --section LaunchStats --section Occupancy --section SchedulerStats
  --metrics sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_read.sum.per_second"
if [ -n "$NCU" ]; then
  "$NCU" --version 2>&1 | tail -1 | tee -a "$S"
  G=decode_b16
  python3 bench/choices_file.py attn "$K/one.json" ${NCU_TILE:-d32.4.4.1s}
  timeout "$(cap 16)" "$NCU" --clock-control none $SECTIONS -k regex:attn_dec -c 1 \
    "$BIN" "$K/$G.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
    --no-cache --kernel-cache-dir="$K/kc" --quiet --choice-timeout-ms=60000 \
    --choices-file="$K/one.json" --disable-choices=attn_math \
    > "$OUT/ncu-ours.txt" 2>&1
  echo "ncu ours rc=$?" | tee -a "$S"
  grep -E "==PROF==|==ERROR==|==WARNING==|Context [0-9]|Duration|DRAM Through|Memory Through|Registers Per|Shared Memory Config|Dynamic Shared|Grid Size|Block Size|Achieved Occ|No Eligible|Issued Warp|sm__cycles_active|dram__bytes" \
    "$OUT/ncu-ours.txt" | head -30 | tee -a "$S"
  if [ "${NCU_CUDNN:-0}" = 1 ]; then
    timeout "$(cap 24)" "$NCU" --clock-control none $SECTIONS --nvtx \
      --nvtx-include "sdpa_prof/" -c 3 \
      "$PY" bench/peers/sdpa_decode_profile.py run 16 1 > "$OUT/ncu-cudnn.txt" 2>&1
    echo "ncu cudnn rc=$?" | tee -a "$S"
    # Without a kernel in the NVTX range: by name, after the warm-up calls.
    if ! grep -q "Context [0-9]" "$OUT/ncu-cudnn.txt" && [ "$(left)" -gt 14 ]; then
      timeout "$(cap 18)" "$NCU" --clock-control none $SECTIONS --launch-skip 3 -c 2 \
        -k 'regex:(?i)(sdpa|fmha|flash|attn|attention|cudnn|fprop|xmma|decode)' \
        "$PY" bench/peers/sdpa_decode_profile.py run 16 2 > "$OUT/ncu-cudnn2.txt" 2>&1
      echo "ncu cudnn by name rc=$?" | tee -a "$S"
      grep -E "==PROF==|==ERROR==|Context [0-9]|Duration|DRAM Through" "$OUT/ncu-cudnn2.txt" | head -12 | tee -a "$S"
    fi
    grep -E "==PROF==|==ERROR==|==WARNING==|Context [0-9]|Duration|DRAM Through|Memory Through|Registers Per|Dynamic Shared|Static Shared|Grid Size|Block Size|Achieved Occ|No Eligible|Issued Warp|sm__cycles_active|dram__bytes" \
      "$OUT/ncu-cudnn.txt" | head -40 | tee -a "$S"
  fi
fi

echo "== 5. PyTorch SDPA at batch 16 once more" | tee -a "$S"
T=$(cap 8)
if [ "$T" -ge 4 ]; then
  timeout "$T" "$PY" bench/peers/torch_sdpa.py "$OUT/sdpa2.json" \
    --only=decode_b16 > "$OUT/sdpa2.log" 2>&1
  echo "sdpa2 rc=$?" | tee -a "$S"
  grep decode "$OUT/sdpa2.log" | tee -a "$S"
else
  echo "sdpa2 skipped: out of time" | tee -a "$S"
fi
tar -C "$K" -cf "$OUT/reports.tar" $(cd "$K" && ls report-*.json 2>/dev/null)
echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K"
