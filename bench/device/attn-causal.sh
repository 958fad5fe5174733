#!/usr/bin/env bash
# attn-causal branch (issue 35, attention prefill at cuDNN's speed): the
# Hopper attention tiles with persistent CTAs (`_p`) and the consumers'
# pingpong (`_pp`) at the Llama-3-8B causal prefill on one H200. Run from
# the repository root after `bash scripts/gpu-test.sh --pack` (binaries in
# .device/); results under $OUT (5 files). Budget: about 1-2 minutes (200 s at most), every
# step under `timeout`.
#   1. check.log: each listed tile's kernel (as --dump-kernels writes it)
#      launched on its own (bench/device/attn-wg-check.py) and compared
#      element-wise with an fp32 reference in PyTorch, then timed alone: a
#      GQA prefill ending mid-tile, f16 at head dimension 64, the masked
#      gallery prefill (2048 queries over 4096 keys, an f32 mask), the same
#      without the mask (not causal) and the Llama-3-8B causal 4096 prefill.
#   2. decided.mir / decided.log: every attn_wg choice (and the best
#      mma.sync tile) timed by the benchmarker at bench/attention-llama3.mir's
#      causal prefill 4096 (and its decode steps) and the masked gallery
#      prefill.
#   3. sdpa.json / sdpa.log: PyTorch SDPA (default, flash, cuDNN, ...) at
#      the same shape and the masked gallery prefill.
#   4. lit.log: lit Cuda/attention-*.mir (attention-wg-run.mir: every
#      default attn_wg tile timed after the benchmarker's fp64 check, --run
#      against the fp64 interpreter), in the time left.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh"  # device_lit_tree
source "$ROOT/scripts/torch-python.sh"
PY="$(find_torch_python)" || PY=python3
OUT=${OUT:-$ROOT/gpu-results/attn-causal}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
START=$SECONDS
left() { echo $((200 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
cat "$S"
K=$(mktemp -d)

# The tiles checked: the defaults that matter at these shapes (the best
# causal ones, the TMA-mask one, the warp-staged 3-stage one), after the
# softmax changes (FUSED_SCALE, LAZY_RESCALE, QK_ZERO_INIT).
TILES="128x128_s2_o 128x128_s2_o_pp_p 128x128_s3_o_pp 128x128_s3_o_pp_p 128x64_s2_o 128x64_s3"
python3 "$ROOT/bench/choices_file.py" attn "$K/wg.json" $TILES

echo "== 1. element-wise check of each tile's kernel, then its time alone" | tee -a "$S"
# name  B HQ HKV SQ SKV D causal dtype mask tiles
CASES="ragged 1 8 2 300 300 128 1 bf16 - 128x128_s2_o_pp_p,128x128_s3_o_pp,128x128_s3_o_pp_p,128x64_s3
d64 2 6 3 300 300 64 1 f16 - 128x128_s3_o_pp_p,128x128_s2_o
masked 1 16 4 2048 4096 128 0 bf16 q 128x64_s2_o,128x64_s3
unmasked 1 16 4 2048 4096 128 0 bf16 - 128x128_s2_o,128x128_s2_o_pp_p,128x128_s3_o_pp_p
prefill4096 1 32 8 4096 4096 128 1 bf16 - 128x128_s2_o,128x128_s2_o_pp_p,128x128_s3_o_pp,128x128_s3_o_pp_p"
: > "$K/cases.txt"
while read -r name B HQ HKV SQ SKV DD C T M LIST; do
  ty="$T[$B,$HQ,$SQ,$DD]"; kv="$T[$B,$HKV,$SKV,$DD]"
  margs=""; mop=""
  [ "$M" = q ] && { margs=", %m: f32[1,1,$SQ,$SKV]"; mop=", %m"; }
  attr=""; [ "$C" = 1 ] && attr=" {causal = true}"
  printf 'graph @%s(%%q: %s, %%k: %s, %%v: %s%s) {\n  %%o = attention(%%q, %%k, %%v%s)%s : %s\n  return %%o\n}\n' \
    "$name" "$ty" "$kv" "$kv" "$margs" "$mop" "$attr" "$ty" > "$K/$name.mir"
  for t in ${LIST//,/ }; do
    dis=attn_math
    for o in $TILES; do [ "$o" != "$t" ] && dis="$dis,attn_wg_$o"; done
    timeout 20 "$OPT" "$K/$name.mir" --pipeline=lower,fuse,autotune --choices-file="$K/wg.json" --disable-choices="$dis" \
      --dump-kernels="$K/$name-$t" --quiet > /dev/null 2>> "$K/dump.log"
    f=$(ls "$K/$name-$t"/*.cu 2>/dev/null | head -1)
    bkv=${t#128x}; bkv=${bkv%%_s*}; st=${t#*_s}; st=${st%%_*}
    [ -n "$f" ] && echo "$f $B $HQ $HKV $SQ $SKV $DD $C $T $bkv $st $M" >> "$K/cases.txt"
  done
done <<< "$CASES"
# Each softmax change on its own, at the causal prefill: the best two
# tiles' kernels edited back (ab-base: none of them; ab-fused, ab-lazy,
# ab-zero: only that one) and, with all of them, the GEMM template's
# registers (ab-regs232: the producer keeps 40, the consumers 232; call 3
# timed the other way round, 240 against 232).
for t in 128x128_s2_o_pp_p 128x128_s3_o_pp_p; do
  f=$(ls "$K/prefill4096-$t"/*.cu 2>/dev/null | head -1)
  [ -n "$f" ] || continue
  st=${t#*_s}; st=${st%%_*}
  for v in base fused lazy zero regs232; do
    mkdir -p "$K/ab-$v-$t"
    case $v in
      base) sed -e 's/^#define FUSED_SCALE 1/#define FUSED_SCALE 0/' -e 's/^#define LAZY_RESCALE 1/#define LAZY_RESCALE 0/' -e 's/^#define QK_ZERO_INIT 1/#define QK_ZERO_INIT 0/' "$f" ;;
      fused) sed -e 's/^#define LAZY_RESCALE 1/#define LAZY_RESCALE 0/' -e 's/^#define QK_ZERO_INIT 1/#define QK_ZERO_INIT 0/' "$f" ;;
      lazy) sed -e 's/^#define FUSED_SCALE 1/#define FUSED_SCALE 0/' -e 's/^#define QK_ZERO_INIT 1/#define QK_ZERO_INIT 0/' "$f" ;;
      zero) sed -e 's/^#define FUSED_SCALE 1/#define FUSED_SCALE 0/' -e 's/^#define LAZY_RESCALE 1/#define LAZY_RESCALE 0/' "$f" ;;
      regs232) sed -e 's/^#define PRODUCER_REGS "24"/#define PRODUCER_REGS "40"/' -e 's/^#define CONSUMER_REGS "240"/#define CONSUMER_REGS "232"/' "$f" ;;
    esac > "$K/ab-$v-$t/$(basename "$f")"
    echo "$K/ab-$v-$t/$(basename "$f") 1 32 8 4096 4096 128 1 bf16 128 $st -" >> "$K/cases.txt"
  done
done
grep -v "wrote 1 kernels" "$K/dump.log" >> "$OUT/check.log" 2>/dev/null
echo "$(wc -l < "$K/cases.txt") kernels dumped" >> "$OUT/check.log"
timeout 90 "$PY" "$ROOT/bench/device/attn-wg-check.py" "$K/cases.txt" >> "$OUT/check.log" 2>&1
CHECK_RC=$?
echo "check rc=$CHECK_RC" >> "$OUT/check.log"
# A kernel that hangs would hang every later step too: leave the new tiles
# out of them then.
NEW="attn_wg_128x128_s2,attn_wg_128x64_s3,attn_wg_128x176_s2,attn_wg_128x128_s2_o,attn_wg_128x64_s2_o,attn_wg_128x128_s2_o_p,attn_wg_128x128_s2_o_pp,attn_wg_128x128_s2_o_pp_p,attn_wg_128x128_s3_o_pp,attn_wg_128x128_s3_o_pp_p"
NOWG=()
if [ "$CHECK_RC" = 124 ]; then
  NOWG=("--disable-choices=$NEW")
  echo "check timed out (a hang?): the wg tiles are left out below" | tee -a "$S"
fi
grep -v "^  " "$OUT/check.log" | tee -a "$S"

echo "== 2. every attn_wg choice: causal prefill 4096, the masked gallery prefill, decode" | tee -a "$S"
cp "$ROOT/bench/attention-llama3.mir" "$K/prefill.mir"
cat >> "$K/prefill.mir" <<'MIR'

graph @prefill_masked_2048x4096(%q: bf16[1,16,2048,128], %k: bf16[1,4,4096,128], %v: bf16[1,4,4096,128], %m: f32[1,1,2048,4096]) {
  %o = attention(%q, %k, %v, %m) {scale = 0.08838834764831845} : bf16[1,16,2048,128]
  return %o
}
MIR
# The flash and mma.sync tiles are slower by far (docs/BENCHMARKS.md): only
# attn_mma_128x64_w8 stays as the reference beside the wg tiles.
OFF="attn_math,attn_flash_64x64_w4,attn_flash_32x64_w4,attn_flash_16x64_w4,attn_flash_16x32_w4,attn_mma_128x32_w4,attn_mma_256x32_w8,attn_mma_64x64_w4,attn_mma_16x32_w4"
[ ${#NOWG[@]} -gt 0 ] && OFF="$OFF,$NEW"
: > "$OUT/decided.mir"
T=$(left); [ "$T" -gt 60 ] && T=60
if [ "$T" -ge 15 ]; then
  timeout "$T" "$OPT" "$K/prefill.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
    --no-cache --kernel-cache-dir="$K/kc" --quiet --choice-timeout-ms=20000 --disable-choices="$OFF" \
    > "$OUT/decided.mir" 2>> "$OUT/decided.log"
  echo "prefill.mir rc=$?" | tee -a "$S"
  grep -o "^graph @[a-z0-9_]*\|decided [a-z0-9_]* timings {[^}]*}" "$OUT/decided.mir" | tee -a "$S"
  grep -i "error\|differs\|wrong" "$OUT/decided.log" | head -10 | tee -a "$S"
else
  echo "choices skipped: out of time" | tee -a "$S"
fi

echo "== 3. PyTorch SDPA, each backend, same shapes" | tee -a "$S"
T=$(left); [ "$T" -gt 20 ] && T=20
if [ "$T" -gt 10 ]; then
  timeout "$T" "$PY" "$ROOT/bench/peers/torch_sdpa.py" "$OUT/sdpa.json" --masked \
    --only=prefill_4096,prefill_masked_2048x4096 > "$OUT/sdpa.log" 2>&1
  echo "sdpa rc=$?" | tee -a "$S"
  tee -a "$S" < "$OUT/sdpa.log" | tail -4
else
  echo "sdpa skipped: out of time" | tee -a "$S"
fi

echo "== 4. lit: Cuda/attention-*.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
T=$(left); [ "$T" -gt 70 ] && T=70
if [ ${#NOWG[@]} -gt 0 ] || [ "$T" -lt 10 ]; then
  echo "lit skipped" > "$OUT/lit.log"
else
  timeout "$T" python3 "$D/lit/lit.py" -sv --filter 'attention-' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
fi
echo "lit rc=$?" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED):" "$OUT/lit.log" | tee -a "$S"
for f in "$W"/test/lit/Cuda/Output/attention-*.mir.tmp*.log; do
  [ -f "$f" ] && grep -h "run @\|error\|wrong\|differs" "$f" | head -20
done | tee -a "$S" >> "$OUT/lit.log"

echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K"
