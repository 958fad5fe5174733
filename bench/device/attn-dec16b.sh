#!/usr/bin/env bash
# attn-dec16b branch (decode B = 16 <= 1.0x SDPA, B = 1 and 4 no slower):
# new decode tile forms beside today's defaults and PyTorch SDPA (every
# backend) on one H200. Run from the repository root after
# `bash scripts/gpu-test.sh --pack` (binaries in .device/); results under
# $OUT (summary.txt, sdpa.log, sdpa2.log, lit.log, decided.mir,
# decided.log, reports.tar). Budget: 70 s, every step under `timeout`.
#   1. sdpa.log: PyTorch SDPA, each backend, at the decode shapes
#      (bench/peers/torch_sdpa.py --only=decode_b1,decode_b4,decode_b16).
#   2. lit.log: lit Cuda/attention-dec-run.mir (every attn_dec tile of its
#      choices file, the new ones included, checked against fp64 by the
#      benchmarker before it is timed; the decided graphs --run against the
#      fp64 interpreter).
#   3. decided.mir / decided.log: per decode graph (bench/
#      attention-llama3.mir's B = 16, 4, 1 and a B = 8 one, 4096 keys) the
#      choices below, each checked against fp64 by the benchmarker before
#      it is timed.
#   4. sdpa2.log: SDPA once more at batch 16 (its spread between calls is
#      as large as the gap measured).
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" attn-dec16b # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
device_log_start "$OUT/decided.log" "$OUT/summary.txt" 70 # START, late
S=$OUT/summary.txt
left() { echo $((70 - (SECONDS - START))); }
git -C "$ROOT" log --oneline -1 2>/dev/null | tee -a "$S"
K=$(mktemp -d)

echo "== 1. PyTorch SDPA, each backend" | tee -a "$S"
timeout 15 "$PY" "$ROOT/bench/peers/torch_sdpa.py" "$OUT/sdpa.json" \
  --only=decode_b1,decode_b4,decode_b16 > "$OUT/sdpa.log" 2>&1
echo "sdpa rc=$?" | tee -a "$S"
grep decode "$OUT/sdpa.log" | tee -a "$S"

echo "== 2. lit: Cuda/attention-dec-run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
timeout 20 python3 "$D/lit/lit.py" -sv --filter 'attention-dec-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
LIT_RC=$?
echo "lit rc=$LIT_RC" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
for f in "$W"/test/lit/Cuda/Output/attention-dec-run.mir.tmp*; do
  [ -f "$f" ] && grep -h "run @\|error\|wrong\|differs\|timings" "$f" | head -24
done | tee -a "$S" >> "$OUT/lit.log"
if [ "$LIT_RC" = 124 ]; then echo "lit timed out (a hang?)" | tee -a "$S"; fi
# graph: its choices as bench/choices_file.py's tokens,
# dBKV.W.S.N[c][fP][e][r][t][p[w]] = attn_dec_16xBKV_wW_sS[_kvN][_c][_pfP]
# [_ef][_r][_t][_p|_pw] (r: staggered start, each
# (batch, kv head) CTA begins at its own key tile and wraps around; t: half
# the stages in flight until a CTA of the grid has finished, then all; pw:
# persistent, a partial result per consumer warp and kv head). A kernel
# that faults fails every choice after it in its graph: the new forms come
# after the defaults.
# Round 1 (13:56 UTC, b9a9df9; SDPA 63.90 and 63.66 us at B = 16): the
# staggered start changed nothing (16x32_w4_s4 65.56, _r 65.60; w2 65.50,
# _r 65.43), _pw 72.5-77.4 (_p 71.7), kv2 with 32 KB stages two an SM
# 69.1; B = 8 (64 CTAs) 49.3 with 64 KB of stages, 35.0 with 128 KB; 132
# CTAs of B = 16's work each (B = 33, 4 kv heads) 67.48: the same 4.1 TB/s
# as 128 CTAs. Batch 16 is bound by the memory (more SMs do not help), an
# SM alone is not (B = 8 reads 60 GB/s an SM with 128 KB in flight): round
# 2 tries more bytes in flight for the CTAs still streaming at the end
# (_t), and _pw with the two-step combine.
# Round 2 (14:04 UTC, d6a72be; SDPA 64.30 and 64.29): 16x32_w4_s4 65.95,
# _t 74.8-78.8 (at B = 8 56.8 against 49.3 with 4 stages: its producer
# waited each tile for a load of the count), _pw 71.9-73.8. Round 3: _t
# with the count copied into shared memory by the bulk copy engine and
# tested without a wait (14:18 UTC, b22cc7e; SDPA 63.68 and 63.95):
# 16x32_w4_s8_t 66.18 against 16x32_w4_s4 66.50 and 16x32_w2_s4 66.21,
# B = 8 53.2 against 49.3: no gain; B = 4 and 1 as before (21.25, 9.72).
CHOICES="decode_b16 d32.4.4.1 d32.2.4.1 d32.4.8.1 d32.4.8.1t d32.2.8.1t d64.2.4.1t d32.4.8.1rt
decode_b8 d32.4.4.1 d32.4.8.1 d32.4.8.1t
decode_n132 d32.4.4.1 d32.4.8.1t
decode_b4 d32.4.8.4 d16.4.8.4 d32.4.4.4
decode_b1 d32.4.8.8 d16.4.8.16 d32.4.4.16"

echo "== 3. decode choices at B = 16, 8, 4, 1 over 4096 keys" | tee -a "$S"
: > "$OUT/decided.mir"
while read -r g tiles; do
  python3 "$ROOT/bench/choices_file.py" attn "$K/$g.json" $tiles
  sed -n "/^graph @$g(/,/^}/p" "$ROOT/bench/attention-llama3.mir" > "$K/$g.mir"
  [ "$g" = decode_b8 ] && printf '%s\n' 'graph @decode_b8(%q: bf16[8,32,1,128], %k: bf16[8,8,4096,128], %v: bf16[8,8,4096,128]) {' '  %o = attention(%q, %k, %v) {causal = true} : bf16[8,32,1,128]' '  return %o' '}' > "$K/$g.mir"
  # 132 (batch, kv head) CTAs of 4096 keys each (B = 33, 16 query heads
  # over 4 kv heads): one a CTA per SM of an H200.
  [ "$g" = decode_n132 ] && printf '%s\n' 'graph @decode_n132(%q: bf16[33,16,1,128], %k: bf16[33,4,4096,128], %v: bf16[33,4,4096,128]) {' '  %o = attention(%q, %k, %v) {causal = true} : bf16[33,16,1,128]' '  return %o' '}' > "$K/$g.mir"
  T=$(left); [ "$T" -gt 12 ] && T=12
  if [ "$T" -lt 3 ]; then echo "$g skipped: out of time" | tee -a "$S"; continue; fi
  device_tune_attention "$K" "$g" "$T"
  echo "$g rc=$? at $((SECONDS - START)) s" | tee -a "$S"
  cat "$K/decided.part" >> "$OUT/decided.mir"
  grep -o "decided [a-z0-9_]* timings {[^}]*}" "$K/decided.part" | tee -a "$S"
done <<< "$CHOICES"
grep -i "error\|differs\|wrong" "$OUT/decided.log" | head -10 | tee -a "$S"
# Each choice that did not time: its status and message from the report.
for r in "$K"/report-*.json; do
  [ -f "$r" ] && python3 "$ROOT/bench/choices_file.py" not-ok "$r" | tee -a "$S"
done

echo "== 4. PyTorch SDPA at batch 16 once more" | tee -a "$S"
T=$(left); [ "$T" -gt 8 ] && T=8
if [ "$T" -ge 4 ]; then
  timeout "$T" "$PY" "$ROOT/bench/peers/torch_sdpa.py" "$OUT/sdpa2.json" \
    --only=decode_b16 > "$OUT/sdpa2.log" 2>&1
  echo "sdpa2 rc=$?" | tee -a "$S"
  grep decode "$OUT/sdpa2.log" | tee -a "$S"
else
  echo "sdpa2 skipped: out of time" | tee -a "$S"
fi
tar -C "$K" -cf "$OUT/reports.tar" $(cd "$K" && ls report-*.json 2>/dev/null)
echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K" "$W"
