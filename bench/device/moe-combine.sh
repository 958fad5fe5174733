#!/usr/bin/env bash
# moe-combine branch (issue 35, "grouped GEMM for MoE ... fused gate x
# combine weighting"): the MoE combine's router weights applied inside
# grouped_mm (fuse-moe-combine: a row scale on the fp32 accumulator, the
# sum over the picks a separate reduction), against the unfused form (the
# default pipeline: grouped_mm, then the combine as a transpose and a bmm
# over the picks) and PyTorch eager, in one call on one H200. Run from the
# repository root with .device/bin/mtsched-opt and .device/lib; results
# under $OUT (summary.txt plus logs). Budget: at most 75 s, every step
# under `timeout`; the steps are chosen by STEPS (default: round 2's).
#   lit:   GPU lit tests: Cuda/grouped-mm-bad-id-run.mir (ids outside the
#          experts written NaN), Cuda/moe-combine-run.mir (the scaled form
#          and the rewritten zoo MoE, --run vs fp64), Cuda/grouped-mm-run.mir.
#   t16 / t128: the zoo's gpt-fast Mixtral MoE at Mixtral's sizes (8
#          experts, top 2, 4096 <-> 14336, bf16; bench/moe/mixtral_moe_t*.mir)
#          unfused (--pipeline=default) then fused
#          (--pipeline=fuse-grouped-mm,fuse-moe-combine,default), each
#          --run checked against the fp64 interpreter (CHECK16 / CHECK128,
#          true / true by default) and timed (50 samples); the second run
#          replays the first's decisions for the nodes both have (one
#          autotune cache), so only the scaled grouped_mm is tuned again.
#   eager: PyTorch eager of the same module (gpt-fast's w[ids] gathers).
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" moe-combine  # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-lit t16 eager}
START=$SECONDS
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; echo "steps: $STEPS"; } > "$S" 2>&1
K=$(mktemp -d)
has() { [[ " $STEPS " == *" $1 "* ]]; }

if has lit; then
  echo "== lit: grouped-mm-bad-id-run, moe-combine-run, grouped-mm-run" | tee -a "$S"
  device_lit_tree "$ROOT" "$D"
  timeout 25 python3 "$D/lit/lit.py" -sv --filter 'grouped-mm-bad-id-run|moe-combine-run|grouped-mm-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
  echo "lit rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
fi

# run_form T FORM PIPELINE SECONDS CHECK
run_form() {
  local T=$1 F=$2 P=$3 L=$4 C=$5
  timeout "$L" "$BIN" "bench/moe/mixtral_moe_t$T.mir" --pipeline="$P" \
    --backend=cuda --cache-dir="$K/ac$T" --kernel-cache-dir="$K/kc" \
    --quiet --run --run-check="$C" --run-time-samples=50 \
    --report="$K/r$T$F.json" -o "$OUT/t$T-$F.mir" > "$OUT/t$T-$F.log" 2>&1
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
  echo "== T=$T: unfused (default) vs fuse-moe-combine, --run vs fp64" | tee -a "$S"
  CHK=true; [ "$T" = 128 ] && CHK=${CHECK128:-true}
  run_form "$T" unfused default 30 "$CHK"
  run_form "$T" fused fuse-grouped-mm,fuse-moe-combine,default 30 "$CHK"
done

if has eager; then
  echo "== PyTorch eager, same module" | tee -a "$S"
  SIZES=""; for T in 16 128; do has "t$T" && SIZES="$SIZES $T"; done
  # shellcheck disable=SC2086
  timeout 12 "$PY" bench/moe/eager_mixtral.py $SIZES > "$OUT/eager.log" 2>&1
  echo "eager rc=$?" | tee -a "$S"
  grep -h "eager\|Error" "$OUT/eager.log" | tail -4 | tee -a "$S"
fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
