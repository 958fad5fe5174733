#!/usr/bin/env bash
# Call 3 (two GPUs): every GPU unit test (collectives on two GPUs, the
# runtime on the caller's buffers), every lit test under test/lit/Cuda, and
# the torch.compile backend example (Llama-3-8B-shaped layer, decode).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__)'; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
echo "== unit"; timeout 170 $D/bin/CudaTests > $OUT/unit.log 2>&1; echo "unit rc=$?"; grep -E "PASSED|FAILED|SKIPPED \]" $OUT/unit.log | tail -8
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
echo "== lit Cuda"; timeout 200 python3 "$D/lit/lit.py" -sv "$W/test/lit/Cuda" > $OUT/lit.log 2>&1; echo "lit rc=$?"
grep -E "^(FAIL|UNSUPPORTED):" $OUT/lit.log; grep -E "Passed|Failed|Unsupported" $OUT/lit.log | tail -3
for t in $(sed -n 's/^FAIL: mtsched :: Cuda\/\(.*\) (.*/\1/p' "$OUT/lit.log"); do
  for f in "$W/test/lit/Cuda/Output/$t".tmp*; do [ -f "$f" ] && { echo "== $f"; tail -15 "$f"; }; done
done >> $OUT/lit.log 2>&1
echo "== torch.compile backend"; PYTHONUNBUFFERED=1 timeout 150 python3 examples/torch/compile_backend.py --build-dir .device > $OUT/backend.log 2>&1; echo "backend rc=$?"; tail -15 $OUT/backend.log
