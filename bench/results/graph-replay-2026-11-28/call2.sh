#!/usr/bin/env bash
# Call 2: the merged build's GPU unit + lit tests (single GPU), the zoo on
# PyTorch 2.x (torch.export path, fp64 interpreter vs eager), and the
# gallery at decode beside torch.compile max-autotune (new importer).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__)'; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
echo "== unit"; timeout 150 $D/bin/CudaTests > $OUT/unit.log 2>&1; echo "unit rc=$?"; tail -3 $OUT/unit.log
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
echo "== lit Cuda"; timeout 170 python3 "$D/lit/lit.py" -sv "$W/test/lit/Cuda" > $OUT/lit.log 2>&1; echo "lit rc=$?"
grep -E "^(FAIL|UNSUPPORTED|XFAIL|PASS).*::" $OUT/lit.log | sort | uniq -c | sort -rn | head -40
grep -E "Passed|Failed|Unsupported" $OUT/lit.log | tail -4
for t in $(sed -n 's/^FAIL: mtsched :: Cuda\/\(.*\) (.*/\1/p' "$OUT/lit.log"); do
  for f in "$W/test/lit/Cuda/Output/$t".tmp*; do [ -f "$f" ] && { echo "== $f"; tail -15 "$f"; }; done
done >> $OUT/lit.log 2>&1
echo "== zoo (torch.export, interpreter)"
timeout 150 python3 examples/zoo/run_zoo.py --mtsched-opt $D/bin/mtsched-opt --out /tmp/zoo --markdown $OUT/zoo.md > $OUT/zoo.log 2>&1; echo "zoo rc=$?"; tail -4 $OUT/zoo.log
echo "== gallery decode"
OUT=/tmp/cmp SIZES=decode DEADLINE=200 timeout 260 bash scripts/gpu-torch-compare.sh > $OUT/compare-decode.log 2>&1
cp /tmp/cmp/torch-compare-decode/compare.md $OUT/compare-decode.md 2>/dev/null
cat $OUT/compare-decode.md
