#!/usr/bin/env bash
# Branch op-unit (issue 36): the op units on one GPU, each output checked by
# --run against the fp64 interpreter. cumsum moved into lib/OpUnits (its
# lit run test, unchanged) and prod, the new op unit, at routing-sized and
# larger shapes in f32, bf16, i32 (wrapping) and i64. Run from the repository
# root after `bash scripts/gpu-test.sh --pack` (binaries in .device/); writes
# $OUT/op-unit.log. Budget: well under 3 minutes.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD; D=$ROOT/.device
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
LOG=$OUT/op-unit.log
nvidia-smi -L > "$LOG" 2>&1
run() { # FILE: every "matches"/"differs" line of --run, then the exit status
  echo "== $1" >> "$LOG"
  timeout 120 "$OPT" "$1" --split-input-file --pipeline=default --backend=cuda \
    --no-cache --run --quiet 2>&1 >/dev/null | tee -a "$LOG" | tail -20
  echo "exit ${PIPESTATUS[0]}" >> "$LOG"
}
run "$ROOT/test/lit/Cuda/cumsum-run.mir"
W=$(mktemp -d)
cat > "$W/prod-run.mir" <<'MIR'
graph @rows(%x: f32[4096,16], %y: f32[12,256], %b: bf16[8,8,32]) {
  %r = prod(%x) : f32[4096]
  %c = prod(%y) {dim = 0} : f32[256]
  %m = prod(%b) {dim = 1, keepdim = true} : bf16[8,1,32]
  return %r, %c, %m
}

// -----

graph @ints(%i: i32[6,48], %l: i64[1000,7]) {
  %i3 = add(%i) {scalar = 3} : i32[6,48]
  %l3 = add(%l) {scalar = 3} : i64[1000,7]
  %a = prod(%i3) {dim = 0} : i32[48]
  %b = prod(%l3) : i64[1000]
  return %a, %b
}
MIR
run "$W/prod-run.mir"
grep -c 'matches the fp64 reference' "$LOG" | sed 's/^/matches: /' >> "$LOG"
cat "$LOG"
