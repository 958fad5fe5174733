#!/usr/bin/env bash
# Issue 37 on one GPU (branch runtime-warm): the torch.compile backend's
# warm start (a second process: IR and decisions from the caches, kernels
# from the kernel cache, no mtsched-opt, no NVRTC) and every gallery layer
# at world size 1 against eager, --run's CUDA graph and max-autotune.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/); results under $OUT (torch-backend.md/.json, the
# log, the runtime unit test's log). At most 4 minutes (40 s + 190 s limits); a
# benchmark cut short by its limit keeps the rows it wrote.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
nvidia-smi -L
rc=0
echo "== the runtime's cuda path (CudaRuntime.*: bindings, kept graphs, staging, counters)"
timeout 40 "$D/bin/CudaTests" --gtest_filter='CudaRuntime.*' > "$OUT/cuda-runtime-unit.log" 2>&1 || rc=1
tail -4 "$OUT/cuda-runtime-unit.log"
echo "== torch.compile backend: warm start, then the gallery (decode)"
PYTHONUNBUFFERED=1 timeout 190 python3 bench/torch_backend_bench.py \
  --build-dir "$D" --out "$OUT" --budget-s 100 > "$OUT/torch-backend.log" 2>&1
brc=$?; echo "torch_backend_bench rc=$brc"; [ $brc = 0 ] || rc=1
grep -v -i warning "$OUT/torch-backend.log" | grep -E '^(\||#|second process|first process|mtsched:)' | tail -40
exit $rc
