#!/usr/bin/env bash
# A/B on 2 GPUs: the build of df3cf6e (old) against this one (new), whole
# processes alternating, kernel caches filled first; wall time, trace, report.
set -u
D=$(pwd)/.device
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi"
export NCCL_NVLS_ENABLE=0
R=$OUT/ab; mkdir -p "$R"
W=/tmp/ab; rm -rf $W; mkdir -p $W
MPI="mpirun --allow-run-as-root -np 2 --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
run() { # NAME CMD...
  local n=$1; shift
  local t0=$EPOCHREALTIME
  timeout 200 "$@" >"$R/$n.out" 2>"$R/$n.err"
  local rc=$? t1=$EPOCHREALTIME
  echo "$n rc=$rc wall=$(python3 -c "print(round($t1-$t0,3))")" | tee -a "$R/times.txt"
}
LLAMA=examples/layers/llama3_8b_tp2.mir
for b in old new; do
  OPT=$D/bin/mtsched-opt-$b
  $OPT examples/tp_mlp.mir --ranks=2 --pipeline=default --backend=cuda --no-cache --kernel-cache-dir=$W/kc-$b --quiet >/dev/null 2>&1
  $OPT $LLAMA --ranks=2 --pipeline=default --backend=cuda --no-cache --kernel-cache-dir=$W/kc-$b --quiet >/dev/null 2>&1
  $OPT examples/tp_mlp.mir --ranks=2 --split-tuning=off --pipeline=default --backend=cuda --no-cache --kernel-cache-dir=$W/kc-$b --quiet >/dev/null 2>&1
done
for rep in 1 2 3; do
  for b in old new newfree; do
    OPT=$D/bin/mtsched-opt-${b%free}
    C=(--pipeline=default --backend=cuda --no-cache --kernel-cache-dir=$W/kc-${b%free})
    [ $b = newfree ] && C+=(--free-on-exit)
    for s in off nodes; do
      n=tp_thr_${s}_${b}_$rep; run $n $OPT examples/tp_mlp.mir --ranks=2 "${C[@]}" --split-tuning=$s --report=$R/$n.json --trace=$R/$n.trace.json -o $R/$n.mir
      n=tp_mpi_${s}_${b}_$rep; run $n $MPI $OPT examples/tp_mlp.mir "${C[@]}" --split-tuning=$s --report=$R/$n.json --trace=$R/$n.trace.json -o $R/$n.mir
    done
    n=ll_thr_${b}_$rep; run $n $OPT $LLAMA --ranks=2 "${C[@]}" --report=$R/$n.json --trace=$R/$n.trace.json -o $R/$n.mir
    n=ll_mpi_${b}_$rep; run $n $MPI $OPT $LLAMA "${C[@]}" --report=$R/$n.json --trace=$R/$n.trace.json -o $R/$n.mir
    n=gemm_${b}_$rep; run $n $OPT bench/speed/gemm-bias-relu.mir --backend=cuda --pipeline=default --cache-dir=$W/c-$b-$rep --kernel-cache-dir=$W/k-$b-$rep --trace=$R/$n.trace.json --quiet -o $R/$n.mir ${C[@]:4}
  done
done
ls -R $W | grep -c tmp > $R/tmpfiles.txt || true
