#!/usr/bin/env bash
# Issue 37, several ranks (branch tp-backend), on 2 GPUs of one host:
# 1. the runtime library alone (bench/runtime_ranks_check.py under mpirun):
#    a small SPMD graph decided once by rank 0 (mtsched-opt --ranks=2,
#    NCCL-only choices), run on both ranks through mtsched_comm_id /
#    mtsched_module_set_ranks, each collective against torch.distributed's;
# 2. torch.compile(backend="mtsched") on the TP=2 Llama-3-8B decoder layer
#    on both ranks (examples/torch/compile_tp.py under mpirun), twice on one
#    fresh cache: the first process decides (rank 0, one pre-sync), the
#    second finds every rank's decisions in the cache. Both print, per rank,
#    the decisions' hash, the pre-syncs, error against eager, us per call.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/). Results under $OUT (4 logs, 1 summary). At most
# 3 minutes (60 + 2 x 55 s limits).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONUNBUFFERED=1
ROOT=$PWD; D=$ROOT/.device
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
nvidia-smi -L
NGPU=$(nvidia-smi -L | grep -c '^GPU')
[ "$NGPU" -ge 2 ] || { echo "tp-backend: needs 2 GPUs, found $NGPU"; exit 2; }
ls -l "$D/bin/mtsched-opt" "$D/lib/libmtsched_runtime.so" || exit 2
CACHE=$(mktemp -d); trap 'rm -rf "$CACHE"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none
     -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS
     -x LD_LIBRARY_PATH -x PYTHONUNBUFFERED -x MTSCHED_TORCH_CACHE=$CACHE
     -x MASTER_ADDR=127.0.0.1)
rc=0
S=$OUT/tp-backend-summary.txt; : > "$S"
echo "== the runtime's NCCL collectives on 2 ranks" | tee -a "$S"
timeout 60 "${MPI[@]}" -x MASTER_PORT=29541 python3 bench/runtime_ranks_check.py \
  --build-dir "$D" > "$OUT/runtime-ranks.log" 2>&1
r=$?; echo "runtime_ranks_check rc=$r" | tee -a "$S"; [ $r = 0 ] || rc=1
grep -E '^rank [0-9]' "$OUT/runtime-ranks.log" | grep -v -i warning | head -30 | tee -a "$S"
grep -E 'every rank|MISMATCH' "$OUT/runtime-ranks.log" | tee -a "$S"
for run in first second; do
  echo "== torch.compile(backend=mtsched), TP=2 Llama-3-8B layer, $run process" | tee -a "$S"
  port=$([ $run = first ] && echo 29543 || echo 29545)
  timeout 55 "${MPI[@]}" -x MASTER_PORT=$port -x MTSCHED_TORCH_VERBOSE=1 \
    python3 examples/torch/compile_tp.py --build-dir "$D" > "$OUT/compile-tp-$run.log" 2>&1
  r=$?; echo "compile_tp ($run) rc=$r" | tee -a "$S"; [ $r = 0 ] || rc=1
  grep -E '^(\||Llama|collective choices|same decisions|one pre-sync|outputs equal|rank [0-9]: a graph|decisions|  %|runtime counters|mtsched: )' \
    "$OUT/compile-tp-$run.log" | head -60 | tee -a "$S"
done
ls "$CACHE" | head -20 > "$OUT/cache-listing.txt"
exit $rc
