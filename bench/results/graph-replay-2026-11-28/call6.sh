#!/usr/bin/env bash
# Call 6: the torch.compile backend example after Dynamo's lifted
# parameters are held as parameters (transposed once).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
nvidia-smi -L
PYTHONUNBUFFERED=1 timeout 200 python3 examples/torch/compile_backend.py --build-dir .device > $OUT/backend.log 2>&1; echo "backend rc=$?"; grep -v Warning $OUT/backend.log | tail -8
