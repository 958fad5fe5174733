#!/usr/bin/env bash
# Where a cold run's fixed costs go: process start/exit around the trace,
# NCCL's own init timings, thread and MPI ranks.
set -u
D=$(pwd)/.device
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi"
export NCCL_NVLS_ENABLE=0
OPT="$D/bin/mtsched-opt"
R=$OUT/diag; mkdir -p "$R"
nvidia-smi -L > "$R/gpus.txt"
which strace perf ltrace > "$R/tools.txt" 2>&1
ldd "$OPT" > "$R/ldd.txt" 2>&1
now() { echo "$EPOCHREALTIME"; }
# NAME TRACE ARGS...: t0, t1 and the trace's mtime into times.txt
run() {
  local n=$1 tr=$2; shift 2
  local t0=$EPOCHREALTIME
  timeout 200 "$@" >"$R/$n.out" 2>"$R/$n.err"
  local rc=$? t1=$EPOCHREALTIME
  local m=-1
  [ -f "$tr" ] && m=$(stat -c %.6Y "$tr")
  echo "$n rc=$rc t0=$t0 t1=$t1 trace_mtime=$m" >> "$R/times.txt"
}
for i in 1 2 3; do run version_$i none "$OPT" --version; done
W=/tmp/w; rm -rf $W; mkdir -p $W
for i in 1 2 3; do
  run gemm_cold_$i $R/gemm_cold_$i.trace.json "$OPT" bench/speed/gemm-bias-relu.mir --backend=cuda --pipeline=default \
    --cache-dir=$W/c$i --kernel-cache-dir=$W/k$i --trace=$R/gemm_cold_$i.trace.json --quiet -o $R/gemm_cold_$i.mir
done
run gemm_warm gemm_warm.trace.json "$OPT" bench/speed/gemm-bias-relu.mir --backend=cuda --pipeline=default \
    --cache-dir=$W/c1 --kernel-cache-dir=$W/k1 --trace=$R/gemm_warm.trace.json --quiet -o $R/gemm_warm.mir
# sim backend, same graph: no GPU at all
run gemm_sim $R/gemm_sim.trace.json "$OPT" bench/speed/gemm-bias-relu.mir --backend=sim --pipeline=default \
    --no-cache --trace=$R/gemm_sim.trace.json --quiet -o $R/gemm_sim.mir
MPI="mpirun --allow-run-as-root -np 2 --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x CUDA_MODULE_LOADING"
C=(--pipeline=default --backend=cuda --no-cache --kernel-cache-dir=$W/tk)
"$OPT" examples/tp_mlp.mir --ranks=2 "${C[@]}" --quiet > /dev/null 2>&1   # kernel cache
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
for i in 1 2; do
  for s in off nodes; do
    run tp_thr_${s}_$i $R/tp_thr_${s}_$i.trace.json "$OPT" examples/tp_mlp.mir --ranks=2 "${C[@]}" --split-tuning=$s \
      --trace=$R/tp_thr_${s}_$i.trace.json --report=$R/tp_thr_${s}_$i.json -o $R/tp_thr_${s}_$i.mir
    run tp_mpi_${s}_$i $R/tp_mpi_${s}_$i.trace.json $MPI "$OPT" examples/tp_mlp.mir "${C[@]}" --split-tuning=$s \
      --trace=$R/tp_mpi_${s}_$i.trace.json --report=$R/tp_mpi_${s}_$i.json -o $R/tp_mpi_${s}_$i.mir
  done
done
export CUDA_MODULE_LOADING=EAGER
run tp_mpi_eager $R/tp_mpi_eager.trace.json $MPI "$OPT" examples/tp_mlp.mir "${C[@]}" \
      --trace=$R/tp_mpi_eager.trace.json -o $R/tp_mpi_eager.mir
unset CUDA_MODULE_LOADING NCCL_DEBUG NCCL_DEBUG_SUBSYS
grep -h "Init timings" $R/*.err > $R/nccl-init-timings.txt
cd $OUT && tar czf diag.tgz diag && rm -rf diag
