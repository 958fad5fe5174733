#!/usr/bin/env bash
# Issue 37 on one GPU (branch size-hints): torch.compile(backend="mtsched",
# options={"size_hints_m": [16, 64, 128]}) on an MLP block at 16, 48, 100
# and 300 rows: the first size tuned with the hints, 48 and 100 decided
# from its dispatch tables (decided "dispatch", no benchmark of the
# matmuls), 300 tuned (beyond the largest hint); every size against eager;
# then a second process decides 32 rows from the first process's tables.
# The same through MTSCHED_TORCH_SIZE_HINTS. Run from the repository root
# after `bash scripts/gpu-test.sh --pack` (binaries in .device/); results
# under $OUT (size-hints.md/.json, the logs). At most 3 minutes.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD; D=$ROOT/.device
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
nvidia-smi -L
rc=0
echo "== options={'size_hints_m': ...}"
PYTHONUNBUFFERED=1 timeout 100 python3 bench/torch_size_hints.py \
  --build-dir "$D" --out "$OUT" > "$OUT/size-hints.log" 2>&1 || rc=1
grep -v -i warning "$OUT/size-hints.log" | tail -20
echo "== MTSCHED_TORCH_SIZE_HINTS"
mkdir -p "$OUT/env"
PYTHONUNBUFFERED=1 timeout 70 python3 bench/torch_size_hints.py --env \
  --build-dir "$D" --out "$OUT/env" > "$OUT/size-hints-env.log" 2>&1 || rc=1
grep -v -i warning "$OUT/size-hints-env.log" | tail -12
exit $rc
