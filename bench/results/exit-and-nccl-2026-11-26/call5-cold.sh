#!/usr/bin/env bash
# Cold 2-rank runs (empty autotune and kernel caches): df3cf6e (old) against
# this build with --free-on-exit (newfree: the early NCCL start alone) and
# without (new), whole processes alternating.
set -u
D=$(pwd)/.device
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi"
export NCCL_NVLS_ENABLE=0
R=$OUT/cold; mkdir -p "$R"
W=/tmp/cold; rm -rf $W; mkdir -p $W
MPI="mpirun --allow-run-as-root -np 2 --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
run() { # NAME CMD...
  local n=$1; shift
  local t0=$EPOCHREALTIME
  timeout 200 "$@" >"$R/$n.out" 2>"$R/$n.err"
  local rc=$? t1=$EPOCHREALTIME
  echo "$n rc=$rc wall=$(python3 -c "print(round($t1-$t0,3))")" | tee -a "$R/times.txt"
}
LLAMA=examples/layers/llama3_8b_tp2.mir
for rep in 1 2 3; do
  for b in old new newfree; do
    OPT=$D/bin/mtsched-opt-${b%free}
    X=(); [ $b = newfree ] && X=(--free-on-exit)
    for g in tp ll; do
      G=examples/tp_mlp.mir; [ $g = ll ] && G=$LLAMA
      n=${g}_thr_${b}_$rep; run $n $OPT $G --ranks=2 --pipeline=default --backend=cuda --no-cache --kernel-cache-dir=$W/k-$n "${X[@]}" --report=$R/$n.json --trace=$R/$n.trace.json -o $R/$n.mir
      n=${g}_mpi_${b}_$rep; run $n $MPI $OPT $G --pipeline=default --backend=cuda --no-cache --kernel-cache-dir=$W/k-$n "${X[@]}" --report=$R/$n.json --trace=$R/$n.trace.json -o $R/$n.mir
    done
  done
done
find $W -name '*.tmp' | wc -l > $R/tmpfiles.txt
cd $OUT && tar czf cold.tgz cold && rm -rf cold
