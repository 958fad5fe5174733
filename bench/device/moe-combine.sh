#!/usr/bin/env bash
# moe-combine branch (issue 35, "grouped GEMM for MoE ... fused gate x
# combine weighting"): the MoE combine's router weights applied inside
# grouped_mm, against the unfused form and PyTorch eager, in one call on
# one H200. Run from the repository root with .device/bin/mtsched-opt and
# .device/lib; results under $OUT (summary.txt plus logs). Budget: at most
# 75 s: every step under `timeout`, no step started past BUDGET (73 s) and
# none allowed to run past it; the steps are chosen by STEPS.
#   t16 / t128: the zoo's gpt-fast Mixtral MoE at Mixtral's sizes (8
#          experts, top 2, 4096 <-> 14336, bf16; bench/moe/mixtral_moe_t*.mir)
#          in three forms, each --run checked against the fp64 interpreter
#          and timed (50 samples):
#            unfused: --pipeline=default (grouped_mm, then the combine as a
#              transpose and a bmm over the picks);
#            scaled:  + fuse-moe-combine (the router weights a row scale on
#              grouped_mm's fp32 accumulator, the sum over the picks a
#              `sum` kernel);
#            summed:  + fuse-moe-combine-sum (the sum in the kernel too,
#              combine = true: the last of a token's rows to arrive adds
#              them in pick order from an fp32 workspace).
#          The runs share one autotune cache, so each tunes only its new
#          grouped_mm. CHECK128=false skips T = 128's fp64 check.
#   eager: PyTorch eager of the same module (gpt-fast's w[ids] gathers).
#   lit:   GPU lit tests: Cuda/grouped-mm-bad-id-run.mir (ids outside the
#          experts written NaN), Cuda/moe-combine-run.mir (both forms and
#          the rewritten zoo MoE, --run vs fp64).
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" moe-combine  # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-t16 eager lit}
BUDGET=${BUDGET:-73}
START=$SECONDS
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; echo "steps: $STEPS"; } > "$S" 2>&1
K=$(mktemp -d)
has() { [[ " $STEPS " == *" $1 "* ]]; }
# lim MAX: MAX seconds, or what is left of the budget if less (0: none).
lim() {
  local L=$((BUDGET - (SECONDS - START)))
  (( L > $1 )) && L=$1
  (( L < 3 )) && L=0
  echo "$L"
}

# run_form T FORM PIPELINE SECONDS CHECK
run_form() {
  local T=$1 F=$2 P=$3 L C=$5
  L=$(lim "$4")
  if (( L == 0 )); then
    echo "T=$T $F skipped: past the budget" | tee -a "$S"
    return
  fi
  timeout "$L" "$BIN" "bench/moe/mixtral_moe_t$T.mir" --pipeline="$P" \
    --backend=cuda --cache-dir="$K/ac$T" --kernel-cache-dir="$K/kc" \
    --quiet --run --run-check="$C" --run-time-samples=50 \
    --report="$K/r$T$F.json" -o "$K/t$T-$F.mir" > "$OUT/t$T-$F.log" 2>&1
  echo "T=$T $F rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -h "run @\|error\|warning" "$OUT/t$T-$F.log" | head -6 | tee -a "$S"
  [ -f "$K/r$T$F.json" ] && python3 - "$K/r$T$F.json" <<'PY' | tee -a "$S"
import json, sys
r = json.load(open(sys.argv[1]))
for n in r.get("nodes", []):
    if n.get("op") != "grouped_mm":
        continue
    cs = sorted(n.get("choices", []), key=lambda c: c["ms"]
                if isinstance(c.get("ms"), (int, float)) else 1e9)
    print("  %s chosen %s: %s" % (n["name"], n.get("chosen"), ", ".join(
        "%s %s" % (c["name"], "%.1f us" % (c["ms"] * 1e3)
                   if isinstance(c.get("ms"), (int, float)) else c.get("status"))
        for c in cs[:3])))
PY
}
for T in 16 128; do
  has "t$T" || continue
  echo "== T=$T: unfused (default), scaled, summed; --run vs fp64" | tee -a "$S"
  CHK=true; [ "$T" = 128 ] && CHK=${CHECK128:-true}
  run_form "$T" unfused default 30 "$CHK"
  run_form "$T" scaled fuse-grouped-mm,fuse-moe-combine,default 25 "$CHK"
  run_form "$T" summed fuse-grouped-mm,fuse-moe-combine,fuse-moe-combine-sum,default 25 "$CHK"
done

if has eager; then
  echo "== PyTorch eager, same module" | tee -a "$S"
  SIZES=""; for T in 16 128; do has "t$T" && SIZES="$SIZES $T"; done
  L=$(lim 12)
  if (( L > 0 )); then
    # shellcheck disable=SC2086
    timeout "$L" "$PY" bench/moe/eager_mixtral.py $SIZES > "$OUT/eager.log" 2>&1
    echo "eager rc=$?" | tee -a "$S"
  else
    echo "eager skipped: past the budget" | tee -a "$S"
  fi
  grep -h "eager\|Error" "$OUT/eager.log" | tail -4 | tee -a "$S"
fi
if has lit; then
  echo "== lit: grouped-mm-bad-id-run, moe-combine-run" | tee -a "$S"
  device_lit_tree "$ROOT" "$D"
  L=$(lim 30)
  if (( L > 0 )); then
    timeout "$L" python3 "$D/lit/lit.py" -sv --filter 'grouped-mm-bad-id-run|moe-combine-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
  else
    echo "skipped: past the budget" > "$OUT/lit.log"; false
  fi
  echo "lit rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
