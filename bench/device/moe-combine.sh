#!/usr/bin/env bash
# moe-combine branch (issue 35, "grouped GEMM for MoE ... fused gate x
# combine weighting"): the MoE combine's router weights applied inside
# grouped_mm, against the unfused form and PyTorch eager, in one call on
# one H200. Run from the repository root with .device/bin/mtsched-opt and
# .device/lib; results under $OUT (summary.txt plus logs). Budget: at most
# 75 s: every step under `timeout`, no step started past BUDGET (73 s) and
# none allowed to run past it; the steps are chosen by STEPS (default
# "diag128"; round 1 ran "t16 eager lit", round 2 "lit eager t128"), in
# this order (f32r128 and diag128 after the t steps, described there):
#   lit:   GPU lit tests: Cuda/grouped-mm-bad-id-run.mir (ids outside the
#          experts written NaN), Cuda/moe-combine-run.mir (both forms and
#          the rewritten zoo MoE, --run vs fp64); eager runs beside it.
#   eager: PyTorch eager of the same module (gpt-fast's w[ids] gathers).
#   t16 / t128: the zoo's gpt-fast Mixtral MoE at Mixtral's sizes (8
#          experts, top 2, 4096 <-> 14336, bf16; bench/moe/mixtral_moe_t*.mir)
#          in three forms, timed (50 samples); at T = 16 each --run checked
#          against the fp64 interpreter, at T = 128 the scaled form (first;
#          CHECK128=false skips it) and the others timed only:
#            unfused: --pipeline=default (grouped_mm, then the combine as a
#              transpose and a bmm over the picks);
#            scaled:  + fuse-moe-combine (the router weights a row scale on
#              grouped_mm's fp32 accumulator, the sum over the picks a
#              `sum` kernel);
#            summed:  + fuse-moe-combine-sum (the sum in the kernel too,
#              combine = true: the last of a token's rows to arrive adds
#              them in pick order from an fp32 workspace).
#          The runs share one autotune cache, so each tunes only the
#          nodes it does not share with an earlier one.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_lit_tree, device_script_setup
device_script_setup "$ROOT" moe-combine  # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-diag128}
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

# run_form T FORM PIPELINE SECONDS CHECK [MIR [ARGS...]]
run_form() {
  local T=$1 F=$2 P=$3 L C=$5 M=${6:-bench/moe/mixtral_moe_t$1.mir}
  L=$(lim "$4")
  shift 6 2>/dev/null || shift $#
  if (( L == 0 )); then
    echo "T=$T $F skipped: past the budget" | tee -a "$S"
    return
  fi
  timeout "$L" "$BIN" "$M" --pipeline="$P" \
    --backend=cuda --cache-dir="$K/ac$T" --kernel-cache-dir="$K/kc" \
    --quiet --run --run-check="$C" --run-time-samples=50 "$@" \
    --report="$K/r$T$F.json" -o "$K/t$T-$F.mir" > "$OUT/t$T-$F.log" 2>&1
  echo "T=$T $F rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -h "run @\|error\|warning" "$OUT/t$T-$F.log" | head -6 | tee -a "$S"
  [ -f "$K/r$T$F.json" ] &&
    python3 "$ROOT/bench/choices_file.py" report "$K/r$T$F.json" grouped_mm | tee -a "$S"
}
# Eager in the background while lit runs: lit's small graphs take a
# moment of the GPU, and eager's tens of milliseconds do not see it.
if has eager; then
  echo "== PyTorch eager, same module (beside lit)" | tee -a "$S"
  SIZES=""; for T in 16 128; do has "t$T" && SIZES="$SIZES $T"; done
  # shellcheck disable=SC2086
  timeout "$(lim 25)" "$PY" bench/moe/eager_mixtral.py $SIZES > "$OUT/eager.log" 2>&1 &
  EAGER=$!
fi
if has lit; then
  echo "== lit: grouped-mm-bad-id-run, moe-combine-run" | tee -a "$S"
  device_lit_tree "$ROOT" "$D"
  timeout "$(lim 28)" python3 "$D/lit/lit.py" -sv --filter 'grouped-mm-bad-id-run|moe-combine-run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
  echo "lit rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -E "^(PASS|FAIL|UNSUPPORTED|TIMEOUT):" "$OUT/lit.log" | tee -a "$S"
fi
if has eager; then
  wait "$EAGER"
  echo "eager rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -h "eager\|Error" "$OUT/eager.log" | tail -4 | tee -a "$S"
fi

SCALED=fuse-grouped-mm,fuse-moe-combine,default
SUMMED=fuse-grouped-mm,fuse-moe-combine,fuse-moe-combine-sum,default

# f32r128: T = 128 with the router in f32 (bench/moe/f32_router.sh; the
# experts as imported), so that the GPU routes every token as fp64 does:
# the scaled form checked against fp64 and timed, the others timed.
if has f32r128; then
  echo "== T=128, router in f32: scaled (checked), unfused, summed" | tee -a "$S"
  R=$K/t128f32.mir
  bash bench/moe/f32_router.sh bench/moe/mixtral_moe_t128.mir "$R"
  run_form 128 f32r-scaled "$SCALED" 45 true "$R"
  run_form 128 f32r-unfused default 25 false "$R"
  run_form 128 f32r-summed "$SUMMED" 25 false "$R"
fi

# diag128: why T = 128's check failed in round 2 (relative error 2.53e-2
# over a 2e-2 tolerance): the graph returning the expert ids too, the fp64
# interpreter's outputs (of the grouped graph: the gathered weights would
# be 120 GB) computed on the CPU in the background while the GPU runs the
# three forms unchecked (outputs written, timed); then the GPU's scaled
# form compared with fp64 token by token, routed alike or not
# (bench/moe/compare_routed.py).
if has diag128; then
  echo "== T=128 diagnosis: GPU outputs vs fp64 per token, three forms timed" | tee -a "$S"
  I=$K/t128ids.mir
  sed 's/^  return %view_8$/  return %view_8, %topk.indices/' bench/moe/mixtral_moe_t128.mir > "$I"
  # --interpret evaluates the input graph, not the pipeline's result (in
  # round 4 it refused the 250 GB of gathered weights): rewrite first.
  "$BIN" "$I" --pipeline=fuse-grouped-mm -o "$K/t128g.mir" > "$OUT/ref128.log" 2>&1
  timeout "$(lim 70)" "$BIN" "$K/t128g.mir" --interpret \
    --interpret-max-bytes=60000000000 --run-outputs="$K/ref" -o /dev/null \
    >> "$OUT/ref128.log" 2>&1 &
  REF=$!
  # Round 4 (the interpreter beside them) ran past 30, 22 and 22 s: one
  # unchecked T = 128 run takes 30-40 s on the device; the summed form is
  # the one the budget drops.
  run_form 128 scaled "$SCALED" 40 false "$I" --run-outputs="$K/gpu"
  run_form 128 unfused default 32 false "$I" --run-outputs="$K/gpu-unfused"
  run_form 128 summed "$SUMMED" 30 false "$I" --run-outputs="$K/gpu-summed"
  wait "$REF"
  echo "fp64 interpreter rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  for G in gpu gpu-unfused gpu-summed; do
    [ -f "$K/$G/view_8.npy" ] && [ -f "$K/ref/view_8.npy" ] || continue
    echo "-- $G vs fp64" | tee -a "$S"
    timeout 10 "$PY" bench/moe/compare_routed.py "$K/$G" "$K/ref" 2>&1 | tee -a "$S"
  done
fi
for T in 16 128; do
  has "t$T" || continue
  echo "== T=$T: unfused (default), scaled, summed" | tee -a "$S"
  if [ "$T" = 16 ]; then
    run_form 16 unfused default 30 true
    run_form 16 scaled "$SCALED" 25 true
    run_form 16 summed "$SUMMED" 25 true
  else
    # Its fp64 reference is 45 G multiply-adds and each run draws 2.8 GB
    # of weights: the scaled form (the two up-projections' grouped_mm as in
    # the others) is checked, the other two only timed.
    run_form 128 scaled "$SCALED" 40 "${CHECK128:-true}"
    run_form 128 unfused default 30 false
    run_form 128 summed "$SUMMED" 30 false
  fi
done

echo "total $((SECONDS - START)) s" | tee -a "$S"
