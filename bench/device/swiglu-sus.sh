#!/usr/bin/env bash
# swiglu-sus branch (issue 35): select-swiglu at prefill re-times long
# forms (either over --swiglu-sustained-us=1000) interleaved at sustained
# load: 5 rounds, each form 5 ms warm-up then a 20 ms sample, in turn
# (docs/PASSES.md). Round 1 (17:46 UTC) found the sustained times keep the
# merged form at Llama-3-70B's and Mixtral's prefill shapes, and Mixtral's
# layer at 0.948x of max-autotune with it. Round 2:
#   1. the gate/up SwiGLU of Llama-3-70B's MLP (2048 x 8192 -> 28672) and
#      of Mixtral-8x7B's experts (8 x 2048 x 4096 -> 14336, bmm) decided
#      again (spread from call to call), and Llama-3-8B's (2048 x 4096 ->
#      14336, about 0.6 ms a form: under the threshold) with the threshold
#      lowered to 500 us, to see whether sustained timing would also keep
#      the merged form that is faster in its layer; every kernel checked
#      against fp64 before it is timed; choices restricted to what the
#      gallery layers decided (the persistent merged tile, the persistent
#      GEMM tile, cuBLAS) to fit the call. %gu shows the burst times
#      (swiglu_burst_*_us, 0.5 ms samples), the sustained ones
#      (swiglu_merged_us / swiglu_split_us) and the kept form.
#   2. the Llama-3-70B MLP layer (LAYER) through bench/mlp_breakdown.py:
#      mtsched measured (now sustained) / merged / split forced and
#      max-autotune (GEMMs ATen-only), timed interleaved, then profiled.
# Run from the repository root with .device/bin/mtsched-opt; results under
# $OUT; every step under `timeout`, under 75 s.
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
mlp llama8b 2048 4096 14336
cat > "$K/choices.json" <<'JSON'
{"swiglu_tiles": [
  {"template": "wgmma", "bm": 128, "bn": 128, "bk": 64, "stages": 4, "persistent": true}],
 "gemm_tiles": [
  {"template": "wgmma", "bm": 128, "bn": 256, "bk": 64, "stages": 4, "persistent": true}],
 "gemm_externs": ["extern.cublas"]}
JSON

echo "== 1. select-swiglu: burst (autotuner) and sustained (interleaved) times, us" | tee -a "$S"
for GS in llama70b:1000 mixtral:1000 llama8b:500 llama70b:1000; do
  G=${GS%:*} SU=${GS#*:} # SU: --swiglu-sustained-us
  {
    T=$(left); [ "$T" -gt 15 ] && T=15
    if [ "$T" -lt 5 ]; then echo "$G $SU skipped: out of time" | tee -a "$S"; continue; fi
    timeout "$T" "$BIN" "$K/$G.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
      --choices-file="$K/choices.json" --kernel-cache-dir="$KC" --no-cache \
      --swiglu-sustained-us="$SU" --autotune-summary > "$K/$G-$SU.out" 2> "$K/$G-$SU.log"
    RC=$?
    cat "$K/$G-$SU.log" >> "$OUT/tune.log"
    A=$(grep -o "{swiglu_merged_us[^}]*}" "$K/$G-$SU.out" | head -1)
    KEPT=$(grep -q "= multi_template_buffer swiglu" "$K/$G-$SU.out" && echo merged || echo split)
    echo "$G sustained-us=$SU rc=$RC kept $KEPT $A ($((SECONDS - START)) s)" | tee -a "$S"
    grep -i "error\|warning" "$K/$G-$SU.log" | head -3 | cut -c1-300 | tee -a "$S"
    { echo "-- $G $SU"; grep -h "^  [a-z]" "$K/$G-$SU.log" | cut -c1-90; } >> "$OUT/choices.txt"
  }
done

T=$(left)
LAYER=${LAYER:-llama3_70b_mlp}
if [ "$T" -gt 30 ]; then
  echo "== 2. $LAYER through mtsched (measured, merged, split) and max-autotune, interleaved" | tee -a "$S"
  timeout "$T" "$PY" bench/mlp_breakdown.py --build-dir "$D" --out "$OUT" \
    --layers "$LAYER" --forms measured merged split --aten-only > "$OUT/breakdown.log" 2>&1
  echo "rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -v "^$" "$OUT/breakdown.md" 2>/dev/null | head -30 | cut -c1-600 | tee -a "$S"
  grep -i "Traceback\|Error\|fell back" "$OUT/breakdown.log" | head -5 | tee -a "$S"
else
  echo "== 2. skipped: $T s left" | tee -a "$S"
fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K"
