#!/usr/bin/env bash
# attn-wg branch (issue 35, third cause): the Hopper attention tiles
# attn_wg_BQxBKV_sS (wgmma + TMA) on one H200. Run from the repository root
# after `bash scripts/gpu-test.sh --pack` (binaries in .device/); results
# under $OUT (7 files). Budget: under 3 minutes, every step under `timeout`.
#   1. check.log: each attn_wg tile's kernel (as --dump-kernels writes it)
#      launched on its own through the driver API (bench/device/
#      attn-wg-check.py) and compared element-wise with an fp32 reference in
#      PyTorch: max error, the first bad elements and rows, its time; at a
#      prefill ending mid-tile (GQA 4:1), the Llama-3-8B causal 4096
#      prefill, the masked gallery prefill (2048 queries over 4096 keys, an
#      f32 mask) and the same shape without the mask (causal and not), f16
#      at head dimension 64.
#   2. lit.log: lit Cuda/attention-wg-run.mir (every attn_wg tile timed
#      after the benchmarker's fp64 check, the decided graph --run against
#      the fp64 interpreter).
#   3. decided.mir / decided.log: every attention choice timed at
#      bench/attention-llama3.mir's causal prefill 4096 and the masked
#      gallery prefill;
#   4. sdpa.json / sdpa.log: PyTorch SDPA, each backend, at the same shapes
#      and the decode ones (bench/peers/torch_sdpa.py --masked);
#   5. then (decided.mir) every choice at the decode shapes (B = 1, 4, 16
#      over 4096 keys), as long as the budget lasts.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh"  # device_lit_tree
source "$ROOT/scripts/torch-python.sh"
PY="$(find_torch_python)" || PY=python3
OUT=${OUT:-$ROOT/gpu-results/attn-wg}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
START=$SECONDS
left() { echo $((175 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
cat "$S"
K=$(mktemp -d)

# The default wg tiles, then tiles only this script tries (longer key
# tiles with the overlap).
TILES="128x128_s2 128x64_s3 128x176_s2 128x128_s2_o 128x64_s2_o 128x160_s2_o 128x176_s2_o"
OTHERS="attn_math"
python3 - "$K/wg.json" $TILES <<'PY'
import json, sys
tiles = []
for t in sys.argv[2:]:
    bq, rest = t.split("x")
    bkv, st = rest.split("_s")
    tiles.append({"bq": int(bq), "bkv": int(bkv), "wgmma": True,
                  "stages": int(st.split("_")[0]), "overlap": st.endswith("_o")})
json.dump({"attention_tiles": tiles}, open(sys.argv[1], "w"))
PY

echo "== 1. element-wise check of each attn_wg kernel" | tee -a "$S"
# name  B HQ HKV SQ SKV D causal dtype mask
CASES="ragged 1 8 2 300 300 128 1 bf16 -
d64 2 6 3 300 300 64 1 f16 -
masked 1 16 4 2048 4096 128 0 bf16 q
unmasked 1 16 4 2048 4096 128 0 bf16 -
causal2048x4096 1 16 4 2048 4096 128 1 bf16 -
prefill4096 1 32 8 4096 4096 128 1 bf16 -"
: > "$K/cases.txt"
while read -r name B HQ HKV SQ SKV DD C T M; do
  ty="$T[$B,$HQ,$SQ,$DD]"; kv="$T[$B,$HKV,$SKV,$DD]"
  margs=""; mop=""
  [ "$M" = q ] && { margs=", %m: f32[1,1,$SQ,$SKV]"; mop=", %m"; }
  attr=""; [ "$C" = 1 ] && attr=" {causal = true}"
  printf 'graph @%s(%%q: %s, %%k: %s, %%v: %s%s) {\n  %%o = attention(%%q, %%k, %%v%s)%s : %s\n  return %%o\n}\n' \
    "$name" "$ty" "$kv" "$kv" "$margs" "$mop" "$attr" "$ty" > "$K/$name.mir"
  for t in $TILES; do
    dis=$OTHERS
    for o in $TILES; do [ "$o" != "$t" ] && dis="$dis,attn_wg_$o"; done
    timeout 20 "$OPT" "$K/$name.mir" --pipeline=lower,fuse,autotune --choices-file="$K/wg.json" --disable-choices="$dis" \
      --dump-kernels="$K/$name-$t" --quiet > /dev/null 2>> "$K/dump.log"
    f=$(ls "$K/$name-$t"/*.cu 2>/dev/null | head -1)
    bkv=${t#128x}; bkv=${bkv%%_s*}; st=${t#*_s}; st=${st%_o}
    [ -n "$f" ] && echo "$f $B $HQ $HKV $SQ $SKV $DD $C $T $bkv $st $M" >> "$K/cases.txt"
  done
done <<< "$CASES"
grep -v "wrote 1 kernels" "$K/dump.log" >> "$OUT/check.log" 2>/dev/null
echo "$(wc -l < "$K/cases.txt") kernels dumped" >> "$OUT/check.log"
timeout 100 "$PY" "$ROOT/bench/device/attn-wg-check.py" "$K/cases.txt" >> "$OUT/check.log" 2>&1
CHECK_RC=$?
echo "check rc=$CHECK_RC" >> "$OUT/check.log"
# A kernel that hangs would hang every later step too: leave the wg tiles
# out of them then.
NOWG=()
if [ "$CHECK_RC" = 124 ]; then
  NOWG=("--disable-choices=attn_wg_128x128_s2,attn_wg_128x64_s3,attn_wg_128x176_s2,attn_wg_128x128_s2_o,attn_wg_128x64_s2_o")
  echo "check timed out (a hang?): the wg tiles are left out below" | tee -a "$S"
fi
grep -v "^  " "$OUT/check.log" | tee -a "$S"

echo "== 2. lit: Cuda/attention-wg-run.mir" | tee -a "$S"
device_lit_tree "$ROOT" "$D"
T=$(left); [ "$T" -gt 55 ] && T=55
if [ ${#NOWG[@]} -gt 0 ] || [ "$T" -lt 10 ]; then
  echo "lit skipped" > "$OUT/lit.log"
else
  timeout "$T" python3 "$D/lit/lit.py" -sv --filter 'attention-wg-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
fi
echo "lit rc=$?" | tee -a "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED):" "$OUT/lit.log" | tee -a "$S"
for f in "$W"/test/lit/Cuda/Output/attention-wg-run.mir.tmp*.log; do
  [ -f "$f" ] && grep -h "run @\|error\|wrong\|differs" "$f" | head -20
done | tee -a "$S" >> "$OUT/lit.log"
grep -o "graph @[a-z0-9_]*\|decided [a-z0-9_]* timings {[^}]*}" "$OUT/lit.log" | head -20 >> "$S"

echo "== 3. every attention choice: causal prefill 4096 and the masked gallery prefill" | tee -a "$S"
sed -n '/^graph @prefill_4096/,/^}/p' "$ROOT/bench/attention-llama3.mir" > "$K/prefill.mir"
cat >> "$K/prefill.mir" <<'MIR'

graph @prefill_masked_2048x4096(%q: bf16[1,16,2048,128], %k: bf16[1,4,4096,128], %v: bf16[1,4,4096,128], %m: f32[1,1,2048,4096]) {
  %o = attention(%q, %k, %v, %m) {scale = 0.08838834764831845} : bf16[1,16,2048,128]
  return %o
}
MIR
sed '/^graph @prefill_4096/,/^}/d' "$ROOT/bench/attention-llama3.mir" > "$K/decode.mir"
# time_choices FILE SECONDS: every choice of FILE's graphs timed (after the
# benchmarker's fp64 check), the decided IR appended to decided.mir.
time_choices() {
  local T; T=$(left); [ "$T" -gt "$2" ] && T=$2
  if [ "$T" -lt 15 ]; then echo "$1 skipped: out of time" | tee -a "$S"; return; fi
  timeout "$T" "$OPT" "$1" --pipeline=default --backend=cuda --prune-top-k=0 \
    --no-cache --kernel-cache-dir="$K/kc" --quiet --choice-timeout-ms=20000 "${NOWG[@]}" \
    > "$K/decided.part" 2>> "$OUT/decided.log"
  local rc=$?
  echo "$(basename "$1") rc=$rc" | tee -a "$S"
  cat "$K/decided.part" >> "$OUT/decided.mir"
  grep -o "^graph @[a-z0-9_]*\|decided [a-z0-9_]* timings {[^}]*}" "$K/decided.part" | tee -a "$S"
}
: > "$OUT/decided.mir"
time_choices "$K/prefill.mir" 60
grep -i "error\|differs\|wrong" "$OUT/decided.log" | head -10 | tee -a "$S"

echo "== 4. PyTorch SDPA, each backend, same shapes" | tee -a "$S"
T=$(left); [ "$T" -gt 40 ] && T=40
if [ "$T" -gt 10 ]; then
  timeout "$T" "$PY" "$ROOT/bench/peers/torch_sdpa.py" "$OUT/sdpa.json" --masked > "$OUT/sdpa.log" 2>&1
  echo "sdpa rc=$?" | tee -a "$S"
  tee -a "$S" < "$OUT/sdpa.log" | tail -8
else
  echo "sdpa skipped: out of time" | tee -a "$S"
fi

echo "== 5. every attention choice: decode B = 1, 4, 16 over 4096 keys" | tee -a "$S"
time_choices "$K/decode.mir" 45

echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K"
