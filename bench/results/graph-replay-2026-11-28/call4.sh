#!/usr/bin/env bash
# Call 4 (two GPUs): the torch.compile backend example after the aten.linear
# fix, and the MPI lit test with the packed MPI plugin named.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
export MTSCHED_MPI_PLUGIN=$D/lib/mtsched/libmtsched_mpi.so
nvidia-smi -L
echo "== torch.compile backend"; PYTHONUNBUFFERED=1 timeout 200 python3 examples/torch/compile_backend.py --build-dir .device > $OUT/backend.log 2>&1; echo "backend rc=$?"; grep -v Warning $OUT/backend.log | tail -8
W=$(mktemp -d); mkdir -p "$W/test/lit/Cuda" "$W/tools/mtsched-opt"
cp $D/bin/mtsched-opt "$W/tools/mtsched-opt/"
cat >"$W/test/lit/lit.site.cfg.py" <<SITE
import os
config.mtsched_src_root = "$ROOT"
config.mtsched_obj_root = "$W"
config.mtsched_tools_dir = "$W/tools/mtsched-opt"
config.llvm_tools_dir = "$D/bin"
config.python = "python3"
lit_config.load_config(config, os.path.join(config.mtsched_src_root, "test/lit/lit.cfg.py"))
SITE
for L in "" "$D/lib-mpi:"; do
  echo "== MPI lit (LD_LIBRARY_PATH prefix '$L')"
  LD_LIBRARY_PATH=$L$LD_LIBRARY_PATH timeout 120 python3 "$D/lit/lit.py" -sv --filter 'mpi' "$W/test/lit/Cuda" > $OUT/mpi-lit.log 2>&1 && { echo "mpi lit PASS"; grep -E "Passed|Failed" $OUT/mpi-lit.log; break; }
  grep -E "error|Passed|Failed" $OUT/mpi-lit.log | head -5
done
