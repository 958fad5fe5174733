#!/usr/bin/env bash
# The zoo (examples/zoo) on one H200 with PyTorch 2.x: bench/zoo_gpu.py
# (docs/BENCHMARKS.md, "The zoo on one GPU"): every model at both sizes
# imported with torch.export, decided with --backend=cuda, --run on eager's
# inputs and compared with eager (bf16 tolerance), its decided graph's time
# beside PyTorch eager and, while the budget lasts, torch.compile(mode=
# "max-autotune"). Run from the repository root, .device/ packed by
# `scripts/gpu-test.sh --pack` (no LLVM on the GPU machine).
#
#   bash bench/device/zoo-gpu.sh          # call 1: all 50 cases, then
#                                         # compiles until the budget ends
#   ZOO_ARGS="--compile-only --only gpt2,llama --sizes decode" \
#     bash bench/device/zoo-gpu.sh        # a later call: compiles skipped
#
# Environment: BUDGET (seconds for bench/zoo_gpu.py, default 470: the call
# stays under 9 minutes with PyTorch's import and the archive),
# DECIDE_JOBS (default 1: each case decides alone on the GPU, so no
# measurement shares it), DEVICE (default cuda; cpu runs the CPU path here,
# a check of this script), ZOO_ARGS (more arguments for bench/zoo_gpu.py).
# Results in $OUT (5 files): env.txt, zoo-gpu.log, zoo-gpu.md, zoo-gpu.json
# (rewritten after every case: a call cut short keeps what finished) and
# zoo-gpu-cases.tar.gz (every case's .mir, decided IR, report and logs).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
# shellcheck source=scripts/device-driver.sh
source "$ROOT/scripts/device-driver.sh"
find_mtsched_opt "$ROOT"
"$BIN" --version >/dev/null 2>&1 || { echo "zoo-gpu: error: '$BIN' does not run here" >&2; exit 2; }
# shellcheck source=scripts/torch-python.sh
source "$ROOT/scripts/torch-python.sh"
PY=$(find_torch_python) || { echo "zoo-gpu: error: no Python with torch" >&2; exit 2; }
OUT=${OUT:-$ROOT/gpu-results/zoo-gpu}
mkdir -p "$OUT"
BUDGET=${BUDGET:-470}
W=$(mktemp -d)
{
  date -u +%FT%TZ
  nvidia-smi -L
  "$PY" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)'
  echo "cores $(nproc)"
  "$BIN" --version | head -1
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# shellcheck disable=SC2086
PYTHONUNBUFFERED=1 timeout $((BUDGET + 40)) "$PY" bench/zoo_gpu.py \
  --device "${DEVICE:-cuda}" --mtsched-opt "$BIN" --budget-seconds "$BUDGET" \
  --decide-jobs "${DECIDE_JOBS:-1}" --out "$OUT" --work "$W/cases" \
  ${ZOO_ARGS:-} > "$OUT/zoo-gpu.log" 2>&1
echo "zoo-gpu rc=$?" | tee -a "$OUT/zoo-gpu.log"
grep '^zoo-gpu:' "$OUT/zoo-gpu.log" | tail -n 80
cat "$OUT/zoo-gpu.md"
tar -C "$W" -czf "$OUT/zoo-gpu-cases.tar.gz" --exclude='*.npy' cases
