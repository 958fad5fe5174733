#!/usr/bin/env bash
# swiglu-sus branch (issue 35), round 1: does select-swiglu's choice at
# prefill depend on how long its samples are? The gate/up SwiGLU of
# Llama-3-70B's MLP (2048 x 8192 -> 28672) and of Mixtral-8x7B's experts
# (8 x 2048 x 4096 -> 14336, bmm) decided by the existing binary with
# --bench-sample-us=500 (the default: burst clocks) and 20000, twice at 70B
# (samples long enough for the clock the GPU sustains), each choice
# checked against fp64 before it is timed; the choices restricted to what
# the gallery layers decided (the persistent merged tile, the persistent
# GEMM tile, cuBLAS) to fit the call. select-swiglu writes
# swiglu_merged_us / swiglu_split_us on %gu. Then, as time allows, the
# Mixtral layer through bench/mlp_breakdown.py (merged and split forced,
# max-autotune, interleaved). Run from the repository root with
# .device/bin/mtsched-opt; results under $OUT; every step under `timeout`,
# under 75 s.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_script_setup
device_script_setup "$ROOT" swiglu-sus  # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
left() { echo $((72 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)
export MTSCHED_TORCH_CACHE=$K/torch XDG_CACHE_HOME=$K/xdg
KC=$K/kc

mlp() { # NAME M K N [E: experts, one weight each (bmm)]
  local E=${5:-} B=""; [ -n "$E" ] && B="$E,"
  {
    printf 'graph @%s(%%h: bf16[%s%s,%s], %%wg: bf16[%s%s,%s], %%wu: bf16[%s%s,%s]) {\n' "$1" "$B" "$2" "$3" "$B" "$3" "$4" "$B" "$3" "$4"
    printf '  %%g = matmul(%%h, %%wg) : bf16[%s%s,%s]\n  %%u = matmul(%%h, %%wu) : bf16[%s%s,%s]\n' "$B" "$2" "$4" "$B" "$2" "$4"
    printf '  %%gs = silu(%%g) : bf16[%s%s,%s]\n  %%gu = mul(%%gs, %%u) : bf16[%s%s,%s]\n  return %%gu\n}\n' "$B" "$2" "$4" "$B" "$2" "$4"
  } > "$K/$1.mir"
}
mlp llama70b 2048 8192 28672
mlp mixtral 2048 4096 14336 8
cat > "$K/choices.json" <<'JSON'
{"swiglu_tiles": [
  {"template": "wgmma", "bm": 128, "bn": 128, "bk": 64, "stages": 4, "persistent": true}],
 "gemm_tiles": [
  {"template": "wgmma", "bm": 128, "bn": 256, "bk": 64, "stages": 4, "persistent": true}],
 "gemm_externs": ["extern.cublas"]}
JSON

echo "== 1. select-swiglu's two times by sample length (us; merged / split)" | tee -a "$S"
for GS in llama70b:500 llama70b:20000 mixtral:500 mixtral:20000 llama70b:500 llama70b:20000; do
  G=${GS%:*} SU=${GS#*:}
  {
    T=$(left); [ "$T" -gt 15 ] && T=15
    if [ "$T" -lt 5 ]; then echo "$G $SU skipped: out of time" | tee -a "$S"; continue; fi
    timeout "$T" "$BIN" "$K/$G.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
      --choices-file="$K/choices.json" --kernel-cache-dir="$KC" --no-cache \
      --bench-sample-us="$SU" --autotune-summary > "$K/$G-$SU.out" 2> "$K/$G-$SU.log"
    RC=$?
    cat "$K/$G-$SU.log" >> "$OUT/tune.log"
    M=$(grep -o "swiglu_merged_us = [0-9.inf]*" "$K/$G-$SU.out" | head -1 | cut -d' ' -f3)
    SP=$(grep -o "swiglu_split_us = [0-9.inf]*" "$K/$G-$SU.out" | head -1 | cut -d' ' -f3)
    KEPT=$(grep -q "= multi_template_buffer swiglu" "$K/$G-$SU.out" && echo merged || echo split)
    echo "$G sample-us=$SU rc=$RC merged $M split $SP kept $KEPT ($((SECONDS - START)) s)" | tee -a "$S"
    { echo "-- $G $SU"; grep -h "^  [a-z]" "$K/$G-$SU.log" | cut -c1-90; } >> "$OUT/choices.txt"
  }
done

T=$(left)
if [ "$T" -gt 30 ]; then
  echo "== 2. Mixtral through mtsched (merged, split forced) and max-autotune, interleaved" | tee -a "$S"
  timeout "$T" "$PY" bench/mlp_breakdown.py --build-dir "$D" --out "$OUT" \
    --layers mixtral_8x7b_moe --forms merged split --aten-only > "$OUT/breakdown.log" 2>&1
  echo "rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -v "^$" "$OUT/breakdown.md" 2>/dev/null | head -24 | cut -c1-300 | tee -a "$S"
  grep -i "Traceback\|Error\|fell back" "$OUT/breakdown.log" | head -5 | tee -a "$S"
else
  echo "== 2. skipped: $T s left" | tee -a "$S"
fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K"
