#!/usr/bin/env bash
# End-to-end runs of the cuda backend on a machine with two GPUs, from a
# build carried there (scripts/gpu-test.sh --pack; docs/CUDA.md):
#
#   scripts/gpu-e2e.sh [DIR]        # DIR: the packed folder (default .device)
#   E2E_STEPS="1 5" scripts/gpu-e2e.sh   # some of the steps below only
#
#  1. examples/tp_mlp.mir autotuned from real measurements with thread ranks
#     (--ranks=2) and with MPI ranks (mpirun -np 2), decisions compared;
#     the MPI run also checks that every rank decided alike;
#  2. V1 (--collective-mode=immediate) vs V2 (deferred) autotune wall time
#     on that example, thread and MPI ranks;
#  3. the cost of one successful pre-sync (mtsched-bench-presync), thread
#     and MPI ranks;
#  4. calibration: the cuda reports of a 2-rank corpus (bench/corpus at
#     tp = 2) fitted by mtsched-calibrate into a device file;
#  5. the heuristics lab on the GPUs over part of that corpus, predicted by
#     the calibrated device;
#  6. --split-tuning=nodes (the default) vs off: tp_mlp's autotune wall
#     time with each rank timing a share of the GEMM work against every rank
#     timing all of it, thread and MPI ranks, alternating, kernels compiled
#     beforehand;
#     the decided IR of every run compared, and where the time went (from
#     the traces). SPLIT_CASES="tp_mlp tp_mlp_m llama_tp2" adds graphs with
#     more GEMM work (see step 6 below); SPLIT_MODES="off on nodes" adds
#     --split-tuning=on.
#
# Results go to $OUT, else ./gpu-results: summary.txt, and e2e.tar.gz with
# every report and log (the GPU machine sends back only a few files).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=$(cd "${1:-$ROOT/.device}" && pwd) || exit 1
STEPS=" ${E2E_STEPS:-1 2 3 4 5} "
want() { [[ "$STEPS" == *" $1 "* ]]; }
RESULTS=${OUT:-$ROOT/gpu-results}
mkdir -p "$RESULTS"
OUTDIR=$(mktemp -d)
SUM="$OUTDIR/summary.txt"
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OPT="$D/bin/mtsched-opt"
T=$(mktemp -d)
nvidia-smi -L
fail=0

secs() { python3 -c "print(round($EPOCHREALTIME - $1, 2))"; }
# name, command...: runs it, logs stdout/stderr under $OUTDIR, notes rc and wall time.
step() {
  local n=$1; shift
  local t0=$EPOCHREALTIME
  timeout 300 "$@" >"$OUTDIR/$n.out" 2>"$OUTDIR/$n.err"
  local rc=$?
  echo "$n rc=$rc wall_s=$(secs "$t0")" | tee -a "$SUM"
  tail -4 "$OUTDIR/$n.err"
  return $rc
}

# MPI: the packed Debian MPI libraries, else the machine's own.
MPIRUN=$(command -v mpirun || true)
MPI_LIBS=""
if [ -n "$MPIRUN" ]; then
  "$MPIRUN" --version 2>&1 | head -2 | tee -a "$SUM"
  for libs in "$D/lib:$D/lib-mpi" "$D/lib"; do
    if LD_LIBRARY_PATH="$libs" timeout 60 "$MPIRUN" --allow-run-as-root -np 2 \
      -x LD_LIBRARY_PATH="$libs" -x NCCL_NVLS_ENABLE \
      "$D/bin/mtsched-bench-presync" --iters=50 >"$T/mpi-probe.log" 2>&1; then
      MPI_LIBS=$libs
      break
    fi
    tail -5 "$T/mpi-probe.log"
  done
  echo "mpi: ${MPI_LIBS:-unusable} " | tee -a "$SUM"
else
  echo "mpi: no mpirun on this machine" | tee -a "$SUM"
fi
# mpirun -np 2 with the libraries that worked, as a command for timeout.
# --bind-to none: Open MPI binds each of two ranks to one core by default,
# and the benchmarker draws inputs and checks outputs on the host's threads.
MPI="$T/mpirun-np2"
cat >"$MPI" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$MPI_LIBS" exec "$MPIRUN" --allow-run-as-root -np 2 --bind-to none \\
  -x LD_LIBRARY_PATH="$MPI_LIBS" -x NCCL_NVLS_ENABLE "\$@"
WRAP
chmod +x "$MPI"

COMMON=(--pipeline=default --backend=cuda --no-cache --kernel-cache-dir="$T/kc")
if want 1; then
  echo "== 1. tp_mlp on two GPUs: thread ranks, MPI ranks"
  step tp_threads "$OPT" "$ROOT/examples/tp_mlp.mir" --ranks=2 "${COMMON[@]}" \
    --report="$OUTDIR/tp_threads.json" || fail=1
  if [ -n "$MPI_LIBS" ]; then
    step tp_mpi "$MPI" "$OPT" "$ROOT/examples/tp_mlp.mir" "${COMMON[@]}" \
      --report="$OUTDIR/tp_mpi.json" || fail=1
  fi
  python3 "$ROOT/scripts/gpu-e2e-summary.py" decisions "$OUTDIR"/tp_threads.json \
    "$OUTDIR"/tp_mpi.json 2>&1 | tee -a "$SUM"
fi

if want 2; then
  echo "== 2. V1 vs V2 autotune wall time (tp_mlp, 2 ranks)"
  for mode in immediate deferred; do
    step "v_threads_$mode" "$OPT" "$ROOT/examples/tp_mlp.mir" --ranks=2 "${COMMON[@]}" \
      --collective-mode=$mode --quiet --report="$OUTDIR/v_threads_$mode.json"
    [ -n "$MPI_LIBS" ] && step "v_mpi_$mode" "$MPI" "$OPT" "$ROOT/examples/tp_mlp.mir" \
      "${COMMON[@]}" --collective-mode=$mode --quiet --report="$OUTDIR/v_mpi_$mode.json"
  done
  python3 "$ROOT/scripts/gpu-e2e-summary.py" modes "$OUTDIR" 2>&1 | tee -a "$SUM"
fi

if want 3; then
  echo "== 3. one successful pre-sync"
  step presync_threads "$D/bin/mtsched-bench-presync" --ranks=2 --iters=2000
  cat "$OUTDIR/presync_threads.out" | tee -a "$SUM"
  if [ -n "$MPI_LIBS" ]; then
    step presync_mpi "$MPI" "$D/bin/mtsched-bench-presync" --iters=2000
    cat "$OUTDIR/presync_mpi.out" | tee -a "$SUM"
  fi
fi

python3 "$ROOT/bench/corpus/gen_corpus.py" --tp 2 --out "$T/corpus"
if want 4; then
  echo "== 4. calibration from cuda reports (bench/corpus at tp = 2)"
  CAL=()
  for g in tp_layer_decode tp_layer_prefill sp_layer_decode sp_layer_prefill; do
    step "cal_$g" "$OPT" "$T/corpus/$g.mir" --ranks=2 "${COMMON[@]}" --quiet \
      --report="$OUTDIR/cal_$g.json" && CAL+=(--calibrate-from="$OUTDIR/cal_$g.json" "$T/corpus/$g.mir")
  done
  FROM=()
  FILES=()
  for ((i = 0; i < ${#CAL[@]}; i += 2)); do FROM+=("${CAL[i]}"); FILES+=("${CAL[i + 1]}"); done
  step calibrate "$D/bin/mtsched-calibrate" "${FROM[@]}" --calibrate="$OUTDIR/h200-calibrated.json" \
    --device=h200 "${FILES[@]}" || fail=1
  cat "$OUTDIR/calibrate.out" | tee -a "$SUM"
fi

if want 5; then
  echo "== 5. heuristics lab on the GPUs (decode sizes: each setting is a full autotune)"
  # Predictions from this run's calibration, else from the one committed.
  DEV="$ROOT/bench/h200x2-calibrated.json"
  [ -s "$OUTDIR/h200-calibrated.json" ] && DEV="$OUTDIR/h200-calibrated.json"
  echo "lab device: $DEV" | tee -a "$SUM"
  step lab "$D/bin/mtsched-lab" --backend=cuda --device="$DEV" --sim-noise=0 --wall-times \
    --heuristics=benchmark,cost-model,never --prune=0,1 \
    "$T/corpus/tp_layer_decode.mir" "$T/corpus/sp_layer_decode.mir" \
    "$T/corpus/llama_layer_decode.mir" || fail=1
  cat "$OUTDIR/lab.out" | tee -a "$SUM"
fi
if want 6; then
  # SPLIT_CASES picks the graphs: tp_mlp (issue 16's measure), tp_mlp_m
  # (the same tuned at five GEMM sizes, as a server tunes for its batch
  # sizes: five times the GEMM work, the same collective work) and
  # llama_tp2 (examples/layers/llama3_8b_tp2.mir, decode and prefill).
  for case in ${SPLIT_CASES:-tp_mlp}; do
    case $case in
    tp_mlp) args=("$ROOT/examples/tp_mlp.mir") ;;
    tp_mlp_m) args=("$ROOT/examples/tp_mlp.mir" --size-hints-m=16,64,256,1024,4096) ;;
    llama_tp2) args=("$ROOT/examples/layers/llama3_8b_tp2.mir") ;;
    *) echo "unknown split case $case" | tee -a "$SUM"; fail=1; continue ;;
    esac
    echo "== 6. split tuning: $case, 2 ranks, --split-tuning=${SPLIT_MODES:-off nodes}"
    # One untimed run per setting fills the kernel cache, so every setting
    # times the same work: benchmarking, not NVRTC. (`nodes` measures every
    # fused and unfused variant of a node before the walk, so it compiles
    # kernels that a walk which skips them never does.)
    for s in ${SPLIT_MODES:-off nodes}; do
      step "split_${case}_fill_$s" "$OPT" "${args[@]}" --ranks=2 "${COMMON[@]}" \
        --split-tuning=$s --quiet
    done
    for rep in 1 2 3; do
      for s in ${SPLIT_MODES:-off nodes}; do
        n="split_${case}_threads_${s}_$rep"
        step "$n" "$OPT" "${args[@]}" --ranks=2 "${COMMON[@]}" \
          --split-tuning=$s --report="$OUTDIR/$n.json" --trace="$OUTDIR/$n.trace.json"
        n="split_${case}_mpi_${s}_$rep"
        [ -n "$MPI_LIBS" ] && step "$n" "$MPI" "$OPT" "${args[@]}" \
          "${COMMON[@]}" --split-tuning=$s --report="$OUTDIR/$n.json" \
          --trace="$OUTDIR/$n.trace.json"
      done
    done
  done
  python3 "$ROOT/scripts/gpu-e2e-summary.py" split "$OUTDIR" 2>&1 | tee -a "$SUM"
fi
cp "$SUM" "$RESULTS/summary.txt"
tar czf "$RESULTS/e2e.tar.gz" -C "$OUTDIR" .
exit $fail
