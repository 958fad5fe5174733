#!/usr/bin/env bash
# Branch conv2d (issue 34): the IR's conv2d on one GPU.
#  1. --run of examples/conv2d_resnet.mir (a ResNet-50 3x3 conv, 64 channels
#     at 56x56, bias + ReLU, bf16, batch 1 and 32): every output checked
#     against the fp64 interpreter, the decided graph's time as a CUDA graph;
#  2. --run of conv2d shapes covering each tile of the implicit-GEMM kernel
#     (wide, 32- and 16-channel tiles), partial tiles, stride, dilation,
#     groups, depthwise 7x7 and a bias, in f32, f16 and bf16;
#  3. PyTorch eager (cuDNN) on the ResNet shapes, CUDA events, for scale;
#  4. the zoo's convolution models (resnet_block, convnext_block,
#     mobilenet_v2, vit) through bench/zoo_gpu.py against eager, no
#     torch.compile (the budget).
# Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/). Results in $OUT: conv2d.log, zoo-conv.md,
# zoo-conv.log. Budget: about 2 minutes.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
# shellcheck source=scripts/device-driver.sh
source "$ROOT/scripts/device-driver.sh"
find_mtsched_opt "$ROOT"
OUT=${OUT:-$ROOT/gpu-results/conv2d}
mkdir -p "$OUT"
LOG=$OUT/conv2d.log
{
  date -u +%FT%TZ
  nvidia-smi -L
  "$BIN" --version | head -1
} > "$LOG" 2>&1
run() { # FILE [ARGS]: --run's report lines, then the exit status
  echo "== $*" >> "$LOG"
  timeout 150 "$BIN" "$@" --pipeline=default --backend=cuda --no-cache \
    --run --quiet -o /dev/null >> "$LOG" 2>&1
  echo "exit $?" >> "$LOG"
}
run "$ROOT/examples/conv2d_resnet.mir"
W=$(mktemp -d)
cat > "$W/conv2d-tiles.mir" <<'MIR'
graph @wide(%x: f32[2,48,13,11], %w: f32[40,48,3,3]) {
  %y = conv2d(%x, %w) {stride = 2, padding = 1} : f32[2,40,7,6]
  return %y
}

// -----

graph @grouped(%x: f32[2,48,13,11], %w: f32[64,24,3,3], %b: f32[64]) {
  %y = conv2d(%x, %w, %b) {padding = [2, 1], dilation = [2, 1], groups = 2} : f32[2,64,13,11]
  return %y
}

// -----

graph @depthwise(%x: bf16[2,96,14,14], %w: bf16[96,1,7,7], %b: bf16[96]) {
  %y = conv2d(%x, %w, %b) {padding = 3, groups = 96} : bf16[2,96,14,14]
  return %y
}

// -----

graph @half(%x: f16[4,32,20,20], %w: f16[100,32,2,3], %b: f16[100]) {
  %y = conv2d(%x, %w, %b) {stride = [3, 2]} : f16[4,100,7,9]
  return %y
}

// -----

graph @strided(%x: bf16[8,128,28,28], %w: bf16[256,128,3,3]) {
  %y = conv2d(%x, %w) {stride = 2, padding = 1} : bf16[8,256,14,14]
  return %y
}
MIR
run "$W/conv2d-tiles.mir" --split-input-file
# shellcheck source=scripts/torch-python.sh
source "$ROOT/scripts/torch-python.sh"
if PY=$(find_torch_python); then
  echo "== eager F.conv2d (cuDNN), bf16, CUDA events, median of 20" >> "$LOG"
  timeout 60 "$PY" - >> "$LOG" 2>&1 <<'PY'
import torch, torch.nn.functional as F
for n in (1, 32):
    x = torch.randn(n, 64, 56, 56, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
    f = lambda: torch.relu(F.conv2d(x, w, b, padding=1))
    for _ in range(5):
        f()
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record(); f(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1000)
    print("eager resnet_conv_b%d: %.1f us (conv + bias + relu)" % (n, sorted(ts)[10]))
PY
  echo "exit $?" >> "$LOG"
  PYTHONUNBUFFERED=1 timeout 100 "$PY" bench/zoo_gpu.py --device cuda \
    --mtsched-opt "$BIN" --budget-seconds 80 --no-compile \
    --only resnet_block,convnext_block,mobilenet_v2,vit --out "$W/zoo" \
    --work "$W/zoo-cases" > "$OUT/zoo-conv.log" 2>&1
  echo "zoo rc=$?" >> "$OUT/zoo-conv.log"
  cp "$W/zoo/zoo-gpu.md" "$OUT/zoo-conv.md" 2>/dev/null
else
  echo "no Python with torch: eager and the zoo skipped" >> "$LOG"
fi
grep -c 'matches the fp64 reference' "$LOG" | sed 's/^/matches: /' >> "$LOG"
cat "$LOG"
tail -n 20 "$OUT/zoo-conv.log" 2>/dev/null
cat "$OUT/zoo-conv.md" 2>/dev/null
