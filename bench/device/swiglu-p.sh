#!/usr/bin/env bash
# swiglu-p branch (issue 35): the merged gate+up GEMM's persistent wgmma
# tiles (swiglu_wg_..._p: the GEMM template's persistent kernel with both
# weights' columns in each B stage, one wgmma 2 * BN wide; _p_d claiming
# its tiles from a counter) beside the plain swiglu_wg tile and the split
# form, on one H200. Run from the repository root with
# .device/bin/mtsched-opt; results under $OUT (4 files); every step under
# `timeout`, under 75 s (round 2; round 1 also timed _p_c2 and
# swiglu_wg_128x64x64_s6_p, which lost everywhere).
#   1. lit.log: lit Cuda/swiglu-wg-run.mir (every wg tile forced, old and
#      new, checked while tuning and --run against the fp64 interpreter),
#      Cuda/swiglu-run.mir (the MLP decided either way, --run) and
#      Cuda/persistent-wgmma-run.mir (the GEMM's _p and _p_d tiles).
#   2. summary.txt, decided.mir, reports.tar.gz: the SwiGLU MLP's gate/up
#      (silu * mul) at prefill, bf16, every choice timed (--prune-top-k=0)
#      after the benchmarker's fp64 check, twice per shape: Llama-3-70B
#      (2048 x 8192 -> 28672), Llama-3-8B (2048 x 4096 -> 14336), DeepSeek's
#      experts (64 x [2048 x 2048] * [2048 x 1408]) and Mixtral's (8 x
#      [2048 x 4096] * [4096 x 14336]), both batched weights. The choices
#      file offers the plain merged 128x128 tile, the _p and _p_d ones and,
#      for the split form's GEMMs, the best two of round 1's three
#      (gemm_wg_128x256x64_s4_p, cuBLAS) and gemm_wg_128x256x64_s4_p_d;
#      select-swiglu writes swiglu_merged_us / swiglu_split_us on %gu.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" swiglu-p    # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
left() { echo $((70 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)

echo "== 1. lit: Cuda/swiglu-wg-run.mir (A-C plain tiles, D-G persistent), swiglu-run.mir, persistent-wgmma-run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
timeout 30 python3 "$D/lit/lit.py" -sv --filter 'swiglu-wg-run|swiglu-run|persistent-wgmma-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
echo "lit rc=$?" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
for f in "$W"/test/lit/Cuda/Output/{swiglu,persistent}*-run.mir.tmp*.log; do
  [ -f "$f" ] && { echo "-- $(basename "$f")"; grep -h "run @\|error\|wrong\|differs" "$f" | grep -v "decided graph" | head -8; }
done | tee -a "$S" >> "$OUT/lit.log"

echo "== 2. SwiGLU at prefill: merged (swiglu_wg_*) against split (two GEMMs, silu and mul fused)" | tee -a "$S"
cat > "$K/choices.json" <<'JSON'
{"swiglu_tiles": [
  {"template": "wgmma", "bm": 128, "bn": 128, "bk": 64, "stages": 4},
  {"template": "wgmma", "bm": 128, "bn": 128, "bk": 64, "stages": 4, "persistent": true},
  {"template": "wgmma", "bm": 128, "bn": 128, "bk": 64, "stages": 4, "persistent": true, "dynamic": true}],
 "gemm_tiles": [
  {"template": "wgmma", "bm": 128, "bn": 256, "bk": 64, "stages": 4, "persistent": true},
  {"template": "wgmma", "bm": 128, "bn": 256, "bk": 64, "stages": 4, "persistent": true, "dynamic": true}],
 "gemm_externs": ["extern.cublas"]}
JSON
mlp() { # NAME M K N [E: experts, one weight each (bmm)]
  local E=${5:-} B=""; [ -n "$E" ] && B="$E,"
  local WB=$B; [ -z "$E" ] && WB=""
  {
    printf 'graph @%s(%%h: bf16[%s%s,%s], %%wg: bf16[%s%s,%s], %%wu: bf16[%s%s,%s]) {\n' "$1" "$B" "$2" "$3" "$WB" "$3" "$4" "$WB" "$3" "$4"
    printf '  %%g = matmul(%%h, %%wg) : bf16[%s%s,%s]\n  %%u = matmul(%%h, %%wu) : bf16[%s%s,%s]\n' "$B" "$2" "$4" "$B" "$2" "$4"
    printf '  %%gs = silu(%%g) : bf16[%s%s,%s]\n  %%gu = mul(%%gs, %%u) : bf16[%s%s,%s]\n  return %%gu\n}\n' "$B" "$2" "$4" "$B" "$2" "$4"
  } > "$K/$1.mir"
}
mlp llama70b_prefill 2048 8192 28672
mlp llama8b_prefill 2048 4096 14336
mlp moe_experts 2048 2048 1408 64
mlp mixtral_experts 2048 4096 14336 8
: > "$OUT/decided.mir"
for R in 1 2; do
for G in llama70b_prefill llama8b_prefill moe_experts mixtral_experts; do
  T=$(left); [ "$T" -gt 15 ] && T=15
  if [ "$T" -lt 8 ]; then echo "$G run $R skipped: out of time" | tee -a "$S"; continue; fi
  timeout "$T" "$BIN" "$K/$G.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
    --choices-file="$K/choices.json" --no-cache --kernel-cache-dir="$K/kc" --quiet \
    --report="$K/report-$G-$R.json" > "$K/$G.out" 2>> "$OUT/decided.log"
  echo "$G run $R rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  cat "$K/$G.out" >> "$OUT/decided.mir"
  grep -o "swiglu_merged_us = [0-9.inf]*, swiglu_split_us = [0-9.inf]*\|decided [a-z0-9_.]*" "$K/$G.out" | tee -a "$S"
  [ -f "$K/report-$G-$R.json" ] && python3 "$ROOT/bench/choices_file.py" report "$K/report-$G-$R.json" swiglu,matmul --skip u,%u | tee -a "$S"
done
done
grep -i "error\|differs\|wrong\|hang" "$OUT/decided.log" | head -10 | tee -a "$S"
echo "total $((SECONDS - START)) s" | tee -a "$S"
(cd "$K" && tar czf "$OUT/reports.tar.gz" report-*.json 2>/dev/null)
rm -rf "$K" "$W"
