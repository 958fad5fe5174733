#!/usr/bin/env bash
# Call 1: --run's CUDA-graph timing (lit tests whose name has "run") and the
# gallery at decode beside torch.compile max-autotune.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
nvidia-smi -L | tee $OUT/env.txt
python3 -c 'import torch; print("torch", torch.__version__)' | tee -a $OUT/env.txt
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
timeout 200 python3 "$D/lit/lit.py" -sv --filter 'run' "$W/test/lit/Cuda" > $OUT/lit-run.log 2>&1
tail -15 $OUT/lit-run.log
for t in $(sed -n 's/^FAIL: mtsched :: Cuda\/\(.*\) (.*/\1/p' "$OUT/lit-run.log"); do
  for f in "$W/test/lit/Cuda/Output/$t".tmp*; do [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }; done
done >> $OUT/lit-run.log 2>&1
$D/bin/mtsched-opt --pipeline=default --backend=cuda --run --quiet $ROOT/test/lit/Cuda/run-graph-time.mir 2>&1 >/dev/null | tail -3
OUT=/tmp/cmp SIZES=decode DEADLINE=330 timeout 380 bash scripts/gpu-torch-compare.sh > $OUT/compare-decode.log 2>&1
cp /tmp/cmp/torch-compare-decode/compare.md $OUT/compare-decode.md
cp /tmp/cmp/torch-compare-decode/compare.json $OUT/compare-decode.json
cat $OUT/compare-decode.md; tail -5 $OUT/compare-decode.log
