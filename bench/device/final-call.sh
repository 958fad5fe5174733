#!/usr/bin/env bash
# The session's last device call (2026-11-28): the GPU unit tests and every
# GPU lit test under test/lit/Cuda after the merges (Builder/Runner, op
# units, the attention mask, mt_pow), prod's GPU check (op-unit.sh), then the
# prefill diagnosis (attn-prefill-diag.sh). Results under $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device; O=$OUT
source "$ROOT/scripts/device-driver.sh"  # device_lit_tree
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
nvidia-smi -L
echo "== unit"; timeout 50 "$D/bin/CudaTests" > "$O/unit.log" 2>&1; echo "unit rc=$?"
grep -E "PASSED|FAILED" "$O/unit.log" | tail -6
device_lit_tree "$ROOT" "$D"
echo "== lit Cuda"; timeout 130 python3 "$D/lit/lit.py" -sv -j4 "$W/test/lit/Cuda" > "$O/lit.log" 2>&1; echo "lit rc=$?"
grep -E "^FAIL:" "$O/lit.log"; grep -E "Passed|Failed|Unsupported|Timed" "$O/lit.log" | tail -4
for t in $(sed -n 's/^FAIL: mtsched :: Cuda\/\(.*\) (.*/\1/p' "$O/lit.log"); do
  for f in "$W/test/lit/Cuda/Output/$t".tmp*; do [ -f "$f" ] && { echo "== $f"; tail -12 "$f"; }; done
done >> "$O/lit.log" 2>&1
echo "== op-unit"; OUT=$O timeout 50 bash bench/device/op-unit.sh; grep -E "matches|DIFFERS|exit" "$O/op-unit.log" | head -20
echo "== attention prefill diagnosis"; mkdir -p "$O/diag"; OUT=$O/diag timeout 280 bash bench/device/attn-prefill-diag.sh
(cd "$O" && tar czf diag.tgz diag lit.log unit.log op-unit.log && rm -rf diag lit.log unit.log op-unit.log)
