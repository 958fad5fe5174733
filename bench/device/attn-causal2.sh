#!/usr/bin/env bash
# attn-causal2 branch (issue 35, the causal 4096 prefill under SDPA's
# default): the Hopper attention tiles with the softmax's key comparisons
# only in edge tiles (EDGE_SPLIT) and tree row maxima (TREE_MAX), beside
# PyTorch SDPA in the same call, on one H200. Run from the repository root
# with the binaries in .device/ (scripts/gpu-test.sh --pack); results under
# $OUT (summary.txt, log.txt, check.log, decided.mir, decided.log,
# sdpa.json, sdpa.log, lit.log). At most 75 s, every step under `timeout`.
#   1. check.log: each kernel as --dump-kernels writes it (and variants
#      made from it by editing its #defines, ab-TAG: `old`, both softmax
#      changes off, the kernel before this branch where there is no mask)
#      launched on its own by bench/device/attn-wg-check.py, compared
#      element-wise with an fp32 PyTorch reference, then timed alone
#      (median of 5 x 10 launches).
#   2. sdpa.json / sdpa.log: PyTorch SDPA (default, flash, cuDNN) at the
#      causal 4096 prefill (the masked gallery prefill's: 202-204 us in
#      earlier calls, docs/BENCHMARKS.md).
#   3. decided.mir / decided.log: the fastest attn_wg choices timed by the
#      benchmarker (after its fp64 check) at bench/attention-llama3.mir's
#      causal 4096 prefill, 2048 queries over 4096 keys without a mask,
#      and the masked gallery prefill.
#   4. lit.log: lit Cuda/attention-wg-run.mir (every default attn_wg tile
#      timed after the benchmarker's fp64 check, --run against the fp64
#      interpreter), in the time left.
set -u
ROOT=$PWD
source "$ROOT/scripts/device-driver.sh"
device_script_setup "$ROOT" attn-causal2
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$OUT/summary.txt
device_log_start "$OUT/log.txt" "$S" 73
git -C "$ROOT" log --oneline -1 >> "$S" 2>/dev/null
K=$(mktemp -d)

# The tiles dumped (choices-file form) and the cases: name B HQ HKV SQ SKV
# D causal dtype mask tiles.
TILES="128x128_s2_o_pp_p 128x128_s3_o_pp_p 128x176_s2_o_pp_p 128x64_s2_o"
python3 "$ROOT/bench/choices_file.py" attn "$K/wg.json" $TILES
CASES="prefill4096 1 32 8 4096 4096 128 1 bf16 - 128x128_s2_o_pp_p,128x128_s3_o_pp_p
unmasked 1 16 4 2048 4096 128 0 bf16 - 128x128_s2_o_pp_p,128x176_s2_o_pp_p
ragged 1 8 2 300 300 128 1 bf16 - 128x176_s2_o_pp_p
d64 2 6 3 300 300 64 1 f16 - 128x176_s2_o_pp_p
masked 1 16 4 2048 4096 128 0 bf16 q 128x64_s2_o"
# Variants (sed scripts on the dumped kernel's #defines), per case.
set_def() { echo "-e s/^#define\x20$1\x20.*/#define\x20$1\x20$2/"; }
OLD="$(set_def EDGE_SPLIT 0) $(set_def TREE_MAX 0)"
variants() { # case tile kernel -> "tag sed-args" lines
  echo "new -e s/^//"
  case "$1-$2" in
    prefill4096-128x128_s2_o_pp_p | unmasked-128x128_s2_o_pp_p) echo "old $OLD" ;;
  esac
}
set -f # the variants' sed scripts hold * and (
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
    timeout 20 "$BIN" "$K/$name.mir" --pipeline=lower,fuse,autotune --choices-file="$K/wg.json" \
      --disable-choices="$dis" --dump-kernels="$K/$name-$t" --quiet > /dev/null 2>> "$K/dump.log"
    f=$(find "$K/$name-$t" -name '*.cu' 2>/dev/null | head -1)
    [ -n "$f" ] || { echo "no kernel for $name $t" >> "$OUT/log.txt"; continue; }
    bkv=${t#128x}; bkv=${bkv%%_s*}; st=${t#*_s}; st=${st%%_*}
    while read -r tag args; do
      d="$K/ab-$tag-$name-$t"; mkdir -p "$d"
      # shellcheck disable=SC2086
      sed $args "$f" > "$d/$(basename "$f")"
      echo "$d/$(basename "$f") $B $HQ $HKV $SQ $SKV $DD $C $T $bkv $st $M" >> "$K/cases.txt"
    done < <(variants "$name" "$t" "$f")
  done
done <<< "$CASES"
set +f
grep -v "wrote 1 kernels" "$K/dump.log" >> "$OUT/log.txt" 2>/dev/null
echo "== 1. $(wc -l < "$K/cases.txt") kernels: element-wise check, then each alone" | tee -a "$S"
timeout 30 "$PY" "$ROOT/bench/device/attn-wg-check.py" "$K/cases.txt" > "$OUT/check.log" 2>&1
CHECK_RC=$?
echo "check rc=$CHECK_RC" | tee -a "$S"
grep -v "^  \|^nvrtc rc 0" "$OUT/check.log" | sed 's/: shape B=1 HQ=/: HQ=/' | tee -a "$S"

echo "== 2. PyTorch SDPA, each backend" | tee -a "$S"
T=$((73 - (SECONDS - START))); [ "$T" -gt 15 ] && T=15
if [ "$T" -gt 8 ]; then
  timeout "$T" "$PY" "$ROOT/bench/peers/torch_sdpa.py" "$OUT/sdpa.json" \
    --only=prefill_4096 > "$OUT/sdpa.log" 2>&1
  echo "sdpa rc=$?" | tee -a "$S"
  grep "_us=" "$OUT/sdpa.log" | tee -a "$S"
else
  echo "sdpa skipped: out of time" | tee -a "$S"
fi

echo "== 3. the benchmarker (fp64 check, then timing): the fastest attn_wg choices" | tee -a "$S"
# The tiles timed per graph come from a choices file (tile names as in
# TILES; 128x176_s2_o_pp_p is no default, the others are).
tiles_json() { python3 "$ROOT/bench/choices_file.py" attn "$@"; }
sed -n '/^graph @prefill_4096/,/^}/p' "$ROOT/bench/attention-llama3.mir" > "$K/g-prefill_4096.mir"
cat > "$K/g-unmasked.mir" <<'MIR'
graph @unmasked_2048x4096(%q: bf16[1,16,2048,128], %k: bf16[1,4,4096,128], %v: bf16[1,4,4096,128]) {
  %o = attention(%q, %k, %v) {scale = 0.08838834764831845} : bf16[1,16,2048,128]
  return %o
}
MIR
cat > "$K/g-masked.mir" <<'MIR'
graph @prefill_masked_2048x4096(%q: bf16[1,16,2048,128], %k: bf16[1,4,4096,128], %v: bf16[1,4,4096,128], %m: f32[1,1,2048,4096]) {
  %o = attention(%q, %k, %v, %m) {scale = 0.08838834764831845} : bf16[1,16,2048,128]
  return %o
}
MIR
: > "$OUT/decided.mir"
while read -r g keep; do
  T=$((73 - (SECONDS - START))); [ "$T" -gt 20 ] && T=20
  [ "$T" -ge 6 ] || { echo "$g skipped: out of time" | tee -a "$S"; continue; }
  # shellcheck disable=SC2086
  tiles_json "$K/c-$g.json" ${keep//,/ }
  timeout "$T" "$BIN" "$K/g-$g.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
    --no-cache --kernel-cache-dir="$K/kc" --quiet --choice-timeout-ms=20000 \
    --choices-file="$K/c-$g.json" --disable-choices=attn_math \
    >> "$OUT/decided.mir" 2>> "$OUT/decided.log"
  echo "$g rc=$?" | tee -a "$S"
done <<'LIST'
prefill_4096 128x128_s2_o_pp,128x128_s2_o_pp_p,128x128_s3_o_pp_p,128x176_s2_o_pp_p
unmasked 128x128_s2_o_pp_p,128x128_s3_o_pp_p,128x176_s2_o_pp_p
masked 128x64_s3,128x64_s2_o
LIST
grep -o "^graph @[a-z0-9_]*\|decided [a-z0-9_]* timings {[^}]*}" "$OUT/decided.mir" | tee -a "$S"
grep -i "error\|differs\|wrong" "$OUT/decided.log" | head -10 | tee -a "$S"

echo "== 4. lit: Cuda/attention-wg-run.mir" | tee -a "$S"
T=$((73 - (SECONDS - START)))
if [ "$CHECK_RC" = 124 ] || [ "$T" -lt 10 ]; then
  echo "lit skipped (check rc=$CHECK_RC, $T s left)" | tee -a "$S" > "$OUT/lit.log"
else
  device_lit_tree "$ROOT" "$ROOT/.device"
  timeout "$T" python3 "$ROOT/.device/lit/lit.py" -sv --filter 'attention-wg-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
  echo "lit rc=$? ($T s given)" | tee -a "$S"
  grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
  for f in "$W"/test/lit/Cuda/Output/attention-wg-run.mir.tmp*.log; do
    [ -f "$f" ] && grep -h "run @\|error\|wrong\|differs" "$f" | head -20
  done | tee -a "$S" >> "$OUT/lit.log"
fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
[ -n "${KEEP_K:-}" ] && echo "kept $K" || rm -rf "$K"
