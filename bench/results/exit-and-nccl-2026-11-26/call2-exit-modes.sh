#!/usr/bin/env bash
# Run with a temporary build (not committed) whose MTSCHED_EXIT_EXPERIMENT
# chose the exit: 0 as before, 1 sessions buried (llvm::BuryPointer), 2
# buried and sys::Process::Exit without cleanup, 3 that exit alone.
set -u
D=$(pwd)/.device
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi"
export NCCL_NVLS_ENABLE=0
OPT="$D/bin/mtsched-opt"
R=$OUT/diag; mkdir -p "$R"
run() {
  local n=$1 tr=$2; shift 2
  local t0=$EPOCHREALTIME
  timeout 200 "$@" >"$R/$n.out" 2>"$R/$n.err"
  local rc=$? t1=$EPOCHREALTIME
  local m=-1
  [ -f "$tr" ] && m=$(stat -c %.6Y "$tr")
  echo "$n rc=$rc t0=$t0 t1=$t1 trace_mtime=$m" >> "$R/times.txt"
}
W=/tmp/w; rm -rf $W; mkdir -p $W
MPI="mpirun --allow-run-as-root -np 2 --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x MTSCHED_EXIT_EXPERIMENT"
C=(--pipeline=default --backend=cuda --no-cache --kernel-cache-dir=$W/tk)
"$OPT" examples/tp_mlp.mir --ranks=2 "${C[@]}" --quiet > /dev/null 2>&1   # kernel cache
for i in 1 2; do
  for m in 0 1 2 3; do
    export MTSCHED_EXIT_EXPERIMENT=$m
    n=gemm_m${m}_$i
    run $n $R/$n.trace.json "$OPT" bench/speed/gemm-bias-relu.mir --backend=cuda --pipeline=default \
      --cache-dir=$W/c$m$i --kernel-cache-dir=$W/k$m$i --trace=$R/$n.trace.json --quiet -o $R/$n.mir
    n=thr_m${m}_$i
    run $n $R/$n.trace.json "$OPT" examples/tp_mlp.mir --ranks=2 "${C[@]}" --trace=$R/$n.trace.json -o $R/$n.mir
    n=mpi_m${m}_$i
    run $n $R/$n.trace.json $MPI "$OPT" examples/tp_mlp.mir "${C[@]}" --trace=$R/$n.trace.json -o $R/$n.mir
    ls $W/tk | grep -c tmp >> $R/tmpfiles.txt
  done
done
cd $OUT && tar czf diag.tgz diag && rm -rf diag
