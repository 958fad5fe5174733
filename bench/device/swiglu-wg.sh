#!/usr/bin/env bash
# swiglu-wg branch (issue 35): the merged gate+up GEMM's Hopper tiles
# swiglu_wg_BMxBNxBK_sS (wgmma + TMA) on one H200. Run from the repository
# root after `bash scripts/gpu-test.sh --pack` (binaries in .device/);
# results under $OUT (5 files). Budget: under 2 minutes, every step
# under `timeout`.
#   1. lit.log: lit Cuda/swiglu-wg-run.mir (each wg tile forced, checked
#      while tuning and --run against the fp64 interpreter) and
#      Cuda/swiglu-run.mir (the MLP decided either way, --run).
#   2. decided.mir / reports.tar.gz (report-*.json) / summary.txt: the SwiGLU MLP's gate/up
#      (silu * mul) at prefill, every choice timed (--prune-top-k=0) after
#      the benchmarker's fp64 check: Llama-3-8B (M 2048, K 4096, N 14336),
#      DeepSeek-MoE's experts (64 x [2048 x 2048] * [2048 x 1408], bmm:
#      batched weights) and Llama-3-70B (K 8192, N 28672), bf16. select-swiglu writes
#      swiglu_merged_us / swiglu_split_us on %gu; the summary lists each
#      swiglu and gate/up GEMM choice's time from the report.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" swiglu-wg   # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
left() { echo $((88 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)

echo "== 1. lit: Cuda/swiglu-wg-run.mir, Cuda/swiglu-run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
timeout 40 python3 "$D/lit/lit.py" -sv --filter 'swiglu-wg-run|swiglu-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
echo "lit rc=$?" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
for f in "$W"/test/lit/Cuda/Output/swiglu*-run.mir.tmp*.log; do
  [ -f "$f" ] && { echo "-- $(basename "$f")"; grep -h "run @\|error\|wrong\|differs" "$f" | head -12; }
done | tee -a "$S" >> "$OUT/lit.log"

echo "== 2. SwiGLU at prefill: merged (swiglu_*) against split (two GEMMs + mul)" | tee -a "$S"
mlp() { # NAME M K N [E: experts, one weight each (bmm)]
  local E=${5:-} B=""; [ -n "$E" ] && B="$E,"
  local WB=$B; [ -z "$E" ] && WB=""
  {
    printf 'graph @%s(%%h: bf16[%s%s,%s], %%wg: bf16[%s%s,%s], %%wu: bf16[%s%s,%s]) {\n' "$1" "$B" "$2" "$3" "$WB" "$3" "$4" "$WB" "$3" "$4"
    printf '  %%g = matmul(%%h, %%wg) : bf16[%s%s,%s]\n  %%u = matmul(%%h, %%wu) : bf16[%s%s,%s]\n' "$B" "$2" "$4" "$B" "$2" "$4"
    printf '  %%gs = silu(%%g) : bf16[%s%s,%s]\n  %%gu = mul(%%gs, %%u) : bf16[%s%s,%s]\n  return %%gu\n}\n' "$B" "$2" "$4" "$B" "$2" "$4"
  } > "$K/$1.mir"
}
mlp llama8b_prefill 2048 4096 14336
mlp llama70b_prefill 2048 8192 28672
mlp moe_experts 2048 2048 1408 64
: > "$OUT/decided.mir"
for G in llama8b_prefill moe_experts llama70b_prefill; do
  T=$(left); [ "$T" -gt 25 ] && T=25
  if [ "$T" -lt 12 ]; then echo "$G skipped: out of time" | tee -a "$S"; continue; fi
  timeout "$T" "$BIN" "$K/$G.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
    --no-cache --kernel-cache-dir="$K/kc" --quiet --report="$K/report-$G.json" \
    > "$K/$G.out" 2>> "$OUT/decided.log"
  echo "$G rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  cat "$K/$G.out" >> "$OUT/decided.mir"
  grep -o "%gu = .*swiglu_split_us = [0-9.inf]*}\|decided [a-z0-9_.]*" "$K/$G.out" | tee -a "$S"
  [ -f "$K/report-$G.json" ] && python3 "$ROOT/bench/choices_file.py" report "$K/report-$G.json" swiglu,matmul --skip u,%u | tee -a "$S"
done
grep -i "error\|differs\|wrong\|hang" "$OUT/decided.log" | head -10 | tee -a "$S"
echo "== 3. lit Cuda/swiglu-wg-run.mir again, while the budget lasts (races)" | tee -a "$S"
for i in 1 2 3; do
  T=$(left); [ "$T" -lt 20 ] && break
  timeout "$((T - 5))" python3 "$D/lit/lit.py" -s --filter 'swiglu-wg-run' "$W/test/lit/Cuda" > "$K/relit.log" 2>&1
  echo "repeat $i rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -h "DIFFERS\|differs" "$W"/test/lit/Cuda/Output/swiglu-wg-run.mir.tmp*.log 2>/dev/null | head -4 | tee -a "$S"
done
echo "total $((SECONDS - START)) s" | tee -a "$S"
(cd "$K" && tar czf "$OUT/reports.tar.gz" report-*.json 2>/dev/null)
rm -rf "$K" "$W"
