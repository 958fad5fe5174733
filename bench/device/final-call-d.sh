#!/usr/bin/env bash
# The third session's last device call (2026-11-28, 4×H200): after the
# merges (op units sort/topk/scatter, conv2d, MPI hier pre-sync, fused hier,
# horizontal GEMM merging), the GPU unit tests (the 2- and 4-GPU hier ones
# included) and every GPU lit test, then hier-nccl.sh (fused hier timed),
# conv2d.sh and qkv-horiz.sh. Results under $OUT (at most 8 files).
# STEPS (default "unit lit hier conv qkv") picks the steps, so the call can
# be split in two within the 10-minute limit of one.
set -u
STEPS=" ${STEPS:-unit lit hier conv qkv} "
has() { [[ "$STEPS" == *" $1 "* ]]; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device; O=$OUT
source "$ROOT/scripts/device-driver.sh"  # device_lit_tree
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
nvidia-smi -L
has unit && { echo "== unit"; timeout 90 "$D/bin/CudaTests" > "$O/unit.log" 2>&1; echo "unit rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$O/unit.log" | tail -12; }
has lit && {
device_lit_tree "$ROOT" "$D"
echo "== lit Cuda"; timeout 150 python3 "$D/lit/lit.py" -sv -j4 "$W/test/lit/Cuda" > "$O/lit.log" 2>&1; echo "lit rc=$?"
grep -E "^FAIL:" "$O/lit.log"; grep -E "Passed|Failed|Unsupported|Timed" "$O/lit.log" | tail -4
for t in $(sed -n 's/^FAIL: mtsched :: Cuda\/\(.*\) (.*/\1/p' "$O/lit.log"); do
  for f in "$W/test/lit/Cuda/Output/$t".tmp*; do [ -f "$f" ] && { echo "== $f"; tail -12 "$f"; }; done
done >> "$O/lit.log" 2>&1
}
has hier && { echo "== hier-nccl"; mkdir -p "$O/hier"; OUT=$O/hier timeout 150 bash bench/device/hier-nccl.sh > /dev/null 2>&1
grep -E "PASS|FAIL|exit" "$O/hier/hier-summary.txt"; cat "$O/hier/hier-table.md"; }
has conv && { echo "== conv2d"; mkdir -p "$O/conv"; OUT=$O/conv timeout 150 bash bench/device/conv2d.sh 2>&1 | tail -30; }
if has qkv && [ -f bench/device/qkv-horiz.sh ]; then
  echo "== qkv-horiz"; mkdir -p "$O/qkv"; OUT=$O/qkv timeout 190 bash bench/device/qkv-horiz.sh 2>&1 | tail -40
fi
(cd "$O" && tar czf details.tgz $(ls -d hier conv qkv lit.log unit.log 2>/dev/null); rm -rf hier/*.json conv qkv lit.log unit.log)
cp "$O/hier/hier-summary.txt" "$O/hier/hier-table.md" "$O/" 2>/dev/null; rm -rf "$O/hier"
ls "$O"
