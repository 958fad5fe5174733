#!/usr/bin/env bash
# attn-causal2 branch (issue 35, the causal 4096 prefill under SDPA's
# default): the Hopper attention tiles' softmax and scheduling variants,
# each checked element-wise and then timed alone, beside PyTorch SDPA in
# the same call, on one H200. Run from the repository root with the
# binaries in .device/ (scripts/gpu-test.sh --pack); results under $OUT
# (summary.txt, log.txt, check.log, sdpa.log, sdpa.json). At most 100 s,
# every step under `timeout`.
#   1. check.log: each kernel (as --dump-kernels writes it, and the variants
#      made from it by editing its #defines: ab-TAG) launched on its own by
#      bench/device/attn-wg-check.py, compared element-wise with an fp32
#      PyTorch reference, then timed alone (median of 5 x 10 launches): a
#      GQA prefill ending mid-tile, f16 at D = 64, the masked gallery
#      prefill, the same without the mask and the Llama-3-8B causal 4096
#      prefill. A variant tagged `diag-` computes wrong results on purpose
#      (it leaves work out to show what that work costs): timing only.
#   2. sdpa.json / sdpa.log: PyTorch SDPA (default, flash, cuDNN) at the
#      causal 4096 prefill (the masked gallery prefill's: 202-204 us in
#      earlier calls, docs/BENCHMARKS.md).
set -u
ROOT=$PWD
source "$ROOT/scripts/device-driver.sh"
device_script_setup "$ROOT" attn-causal2
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$OUT/summary.txt
device_log_start "$OUT/log.txt" "$S" 95
git -C "$ROOT" log --oneline -1 >> "$S" 2>/dev/null
K=$(mktemp -d)

# The tiles dumped (choices-file form) and the cases: name B HQ HKV SQ SKV
# D causal dtype mask tiles.
TILES="128x128_s2_o_pp_p 128x176_s2_o_pp_p 128x64_s2_o"
python3 - "$K/wg.json" $TILES <<'PY'
import json, sys
tiles = []
for t in sys.argv[2:]:
    bq, rest = t.split("x")
    bkv, st = rest.split("_s")
    flags = st.split("_")[1:]
    tiles.append({"bq": int(bq), "bkv": int(bkv), "wgmma": True,
                  "stages": int(st.split("_")[0]), "overlap": "o" in flags,
                  "pingpong": "pp" in flags, "persistent": "p" in flags})
json.dump({"attention_tiles": tiles}, open(sys.argv[1], "w"))
PY
CASES="prefill4096 1 32 8 4096 4096 128 1 bf16 - 128x128_s2_o_pp_p,128x176_s2_o_pp_p
unmasked 1 16 4 2048 4096 128 0 bf16 - 128x128_s2_o_pp_p,128x176_s2_o_pp_p
ragged 1 8 2 300 300 128 1 bf16 - 128x128_s2_o_pp_p,128x176_s2_o_pp_p
d64 2 6 3 300 300 64 1 f16 - 128x128_s2_o_pp_p
masked 1 16 4 2048 4096 128 0 bf16 q 128x64_s2_o"
# Variants (sed scripts on the dumped kernel's #defines), per case.
set_def() { echo "-e s/^#define\x20$1\x20.*/#define\x20$1\x20$2/"; }
ST="$(set_def EDGE_SPLIT 1) $(set_def TREE_MAX 1)"
variants() { # case tile kernel -> "tag sed-args" lines
  # (d64 and the masked tile were timed before: their variants only.)
  [ "$1" = d64 ] || [ "$1" = masked ] || echo "base -e s/^//"
  [ "$1" = d64 ] || echo "st $ST"
  [ "$1" = ragged ] && [ "$2" = 128x128_s2_o_pp_p ] && echo "ste4 $ST $(set_def EXP_EMU 4)"
  if [ "$2" = 128x128_s2_o_pp_p ]; then
    # CROSS_UNIT double-buffers q: the launch gets one more q tile and
    # two barriers (the checker reads the dump's first line).
    local sm; sm=$(sed -n '1s/.*dynamic shared memory \([0-9]*\) bytes.*/\1/p' "$3")
    local XS="$(set_def CROSS_UNIT 1) -e 1s/memory\x20${sm}\x20bytes/memory\x20$((sm + 32784))\x20bytes/"
    [ "$1" = d64 ] || echo "x $XS"
    echo "stx $ST $XS"
  fi
  if [ "$1" = prefill4096 ] && [ "$2" = 128x128_s2_o_pp_p ]; then
    # EXP_EMU N: every N-th score tile's exp2 on the FMA units.
    echo "ste4 $ST $(set_def EXP_EMU 4)"
    echo "ste2 $ST $(set_def EXP_EMU 2)"
    echo "split $(set_def EDGE_SPLIT 1)"
    echo "tree $(set_def TREE_MAX 1)"
    # Timing only: exp2 left out of the softmax (the scores' own values
    # go to p v), what the multi-function unit's share costs.
    echo "diag-noexp $ST -e s/exp2f(MT_EXP_ARG(\(.*\)));/(MT_EXP_ARG(\1));/"
    # Timing only: no softmax at all (the raw scores are p), what the
    # products and the pipeline alone take.
    echo "diag-nosoftmax -e s/^[[:space:]]*softmax(.*);\$// -e s/float\x20aA,\x20aB;/float\x20aA=1.f,aB=1.f;/"
    echo "base2 -e s/^//"
  fi
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
# The CROSS_UNIT kernels (ab-x-*, ab-stx-*) last and apart: a hang there
# costs only their own step.
grep -v "/ab-x-\|/ab-stx-" "$K/cases.txt" > "$K/cases-a.txt"
grep "/ab-x-\|/ab-stx-" "$K/cases.txt" > "$K/cases-x.txt"
timeout 55 "$PY" "$ROOT/bench/device/attn-wg-check.py" "$K/cases-a.txt" > "$OUT/check.log" 2>&1
echo "check rc=$?" | tee -a "$S"
T=$((80 - (SECONDS - START))); [ "$T" -gt 25 ] && T=25
timeout "$T" "$PY" "$ROOT/bench/device/attn-wg-check.py" "$K/cases-x.txt" >> "$OUT/check.log" 2>&1
echo "check (CROSS_UNIT) rc=$?" | tee -a "$S"
grep -v "^  \|^nvrtc rc 0" "$OUT/check.log" | sed 's/: shape B=1 HQ=/: HQ=/' | tee -a "$S"

echo "== 2. PyTorch SDPA, each backend" | tee -a "$S"
T=$((97 - (SECONDS - START))); [ "$T" -gt 25 ] && T=25
if [ "$T" -gt 8 ]; then
  timeout "$T" "$PY" "$ROOT/bench/peers/torch_sdpa.py" "$OUT/sdpa.json" \
    --only=prefill_4096 > "$OUT/sdpa.log" 2>&1
  echo "sdpa rc=$?" | tee -a "$S"
  grep "_us=" "$OUT/sdpa.log" | tee -a "$S"
else
  echo "sdpa skipped: out of time" | tee -a "$S"
fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
[ -n "${KEEP_K:-}" ] && echo "kept $K" || rm -rf "$K"
