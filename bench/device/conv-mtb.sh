#!/usr/bin/env bash
# Branch conv-mtb (issue 34): conv2d as a multi-template buffer on one GPU.
#  1. CudaTests: every conv2d choice (CUDA-core and tensor-core implicit-
#     GEMM tiles, the direct kernel, extern.cudnn) measured by the
#     benchmarker, which checks each result against the fp64 reference
#     (the conv_mma tiles' first run on a GPU); and the end-to-end test;
#  2. lit test/lit/Cuda/conv2d-run.mir (conv shapes through --run);
#  3. --backend=cuda --run of conv2d graphs (ResNet 3x3 at batch 32 and
#     stage 3, ResNeXt grouped, ConvNeXt depthwise 7x7, ViT-B/16 patch
#     embedding, bf16; a small f32 grouped one), decided among every choice
#     (--prune-top-k=0) with cuDNN and again without it (a tile or the
#     direct kernel runs, and --run executes it): every output against the
#     fp64 interpreter, each choice's time in the autotune summary;
#  4. torch.nn.functional.conv2d (cuDNN, bf16) on the same shapes, CUDA
#     events; then a table: each choice's time, the decided one, eager.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`.
# Results in $OUT: conv-mtb.log, summary.txt, eager.txt, table.md.
# Budget: under 3 minutes.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
# shellcheck source=scripts/device-driver.sh
source "$ROOT/scripts/device-driver.sh"
# shellcheck source=scripts/torch-python.sh
source "$ROOT/scripts/torch-python.sh"
find_mtsched_opt "$ROOT"
OUT=${OUT:-$ROOT/gpu-results/conv-mtb}
mkdir -p "$OUT"
LOG=$OUT/conv-mtb.log
PY=$(find_torch_python) || PY=""
# cuDNN: the system's, else the one PyTorch's wheel ships (its folder also
# on the loader's path, for the libraries libcudnn.so.9 opens).
if [ -z "${MTSCHED_CUDNN_LIB:-}" ] && [ -n "$PY" ]; then
  DIR=$("$PY" -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null)
  if [ -n "$DIR" ] && [ -e "$DIR/libcudnn.so.9" ]; then
    export MTSCHED_CUDNN_LIB="$DIR/libcudnn.so.9"
    export LD_LIBRARY_PATH="$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
{
  date -u +%FT%TZ
  nvidia-smi -L
  "$BIN" --version | head -1
  echo "MTSCHED_CUDNN_LIB=${MTSCHED_CUDNN_LIB:-(unset: libcudnn.so.9, .8)}"
} > "$LOG" 2>&1

T=$ROOT/.device/bin/CudaTests
[ -x "$T" ] || T=$ROOT/build/test/unit/Cuda/CudaTests
echo "== CudaTests" >> "$LOG"
timeout 50 "$T" --gtest_filter='CudaBackend.EveryConvChoiceMatchesTheReference:CudaBackend.RunsAGraphEndToEnd' >> "$LOG" 2>&1
echo "exit $?" >> "$LOG"

if [ -d "$ROOT/.device/bin" ]; then
  device_lit_tree "$ROOT" "$ROOT/.device"
  echo "== lit Cuda/conv2d-run.mir" >> "$LOG"
  timeout 40 python3 "$ROOT/.device/lit/lit.py" -sv \
    "$W/test/lit/Cuda/conv2d-run.mir" >> "$LOG" 2>&1
  echo "exit $?" >> "$LOG"
fi

G=$(mktemp -d)
cat > "$G/convs.mir" <<'MIR'
graph @resnet_b32(%x: bf16[32,64,56,56], %w: bf16[64,64,3,3], %b: bf16[64]) {
  %y = conv2d(%x, %w, %b) {padding = 1} : bf16[32,64,56,56]
  return %y
}

// -----

graph @resnet_s3(%x: bf16[8,256,14,14], %w: bf16[256,256,3,3], %b: bf16[256]) {
  %y = conv2d(%x, %w, %b) {padding = 1} : bf16[8,256,14,14]
  return %y
}

// -----

graph @resnext_grouped(%x: bf16[8,128,28,28], %w: bf16[128,4,3,3]) {
  %y = conv2d(%x, %w) {padding = 1, groups = 32} : bf16[8,128,28,28]
  return %y
}

// -----

graph @convnext_dw(%x: bf16[8,96,56,56], %w: bf16[96,1,7,7], %b: bf16[96]) {
  %y = conv2d(%x, %w, %b) {padding = 3, groups = 96} : bf16[8,96,56,56]
  return %y
}

// -----

graph @vit_patch(%x: bf16[8,3,224,224], %w: bf16[768,3,16,16], %b: bf16[768]) {
  %y = conv2d(%x, %w, %b) {stride = 16} : bf16[8,768,14,14]
  return %y
}

// -----

graph @small_f32(%x: f32[2,48,13,11], %w: f32[64,24,3,3], %b: f32[64]) {
  %y = conv2d(%x, %w, %b) {padding = [2, 1], dilation = [2, 1], groups = 2} : f32[2,64,13,11]
  return %y
}
MIR
for MODE in cudnn tiles; do
  EXTRA=()
  [ "$MODE" = tiles ] && EXTRA=(--disable-choices=extern.cudnn)
  echo "== --run, choices: $MODE" >> "$LOG"
  timeout 60 "$BIN" "$G/convs.mir" --split-input-file --pipeline=default \
    --backend=cuda --no-cache --prune-top-k=0 --autotune-summary "${EXTRA[@]}" \
    --run --quiet -o "$G/decided-$MODE.mir" > "$G/run-$MODE.out" 2> "$G/summary-$MODE.txt"
  echo "exit $?" >> "$LOG"
  cat "$G/run-$MODE.out" >> "$LOG"
  grep -v '^AUTOTUNE\|^  ' "$G/summary-$MODE.txt" >> "$LOG"
  { echo "### choices: $MODE"; cat "$G/summary-$MODE.txt"; } >> "$OUT/summary.txt"
done
grep -h 'decided' "$G"/decided-*.mir | sed 's/timings.*//' >> "$LOG"

if [ -n "$PY" ]; then
  echo "== eager F.conv2d (cuDNN), CUDA events, median of 20" >> "$LOG"
  timeout 30 "$PY" - > "$OUT/eager.txt" 2>&1 <<'PY'
import torch, torch.nn.functional as F
torch.backends.cudnn.benchmark = True
shapes = {
    "resnet_b32": ((32, 64, 56, 56), (64, 64, 3, 3), True, dict(padding=1), torch.bfloat16),
    "resnet_s3": ((8, 256, 14, 14), (256, 256, 3, 3), True, dict(padding=1), torch.bfloat16),
    "resnext_grouped": ((8, 128, 28, 28), (128, 4, 3, 3), False, dict(padding=1, groups=32), torch.bfloat16),
    "convnext_dw": ((8, 96, 56, 56), (96, 1, 7, 7), True, dict(padding=3, groups=96), torch.bfloat16),
    "vit_patch": ((8, 3, 224, 224), (768, 3, 16, 16), True, dict(stride=16), torch.bfloat16),
    "small_f32": ((2, 48, 13, 11), (64, 24, 3, 3), True, dict(padding=(2, 1), dilation=(2, 1), groups=2), torch.float32),
}
for name, (xs, ws, bias, kw, dt) in shapes.items():
    x = torch.randn(*xs, device="cuda", dtype=dt)
    w = torch.randn(*ws, device="cuda", dtype=dt)
    b = torch.randn(ws[0], device="cuda", dtype=dt) if bias else None
    f = lambda: F.conv2d(x, w, b, **kw)
    for _ in range(5):
        f()
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record(); f(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1000)
    print("eager %s %.1f" % (name, sorted(ts)[10]))
PY
  echo "exit $?" >> "$LOG"
  cat "$OUT/eager.txt" >> "$LOG"
  # The table: per graph, each choice's time (cuDNN run, then tiles-only
  # run for what cuDNN's run left out), the decided one, eager.
  "$PY" - "$OUT/summary.txt" "$OUT/eager.txt" > "$OUT/table.md" 2>>"$LOG" <<'PY'
import re, sys
summary, eager = open(sys.argv[1]).read(), open(sys.argv[2]).read()
ref = dict(re.findall(r"^eager (\S+) ([0-9.]+)", eager, re.M))
rows, mode, graph = {}, None, None
for line in summary.splitlines():
    m = re.match(r"### choices: (\S+)", line)
    if m:
        mode = m.group(1); continue
    m = re.match(r"AUTOTUNE @(\S+) ", line)
    if m:
        graph = m.group(1); continue
    m = re.match(r"  (\S+) ([0-9.]+) ms .*?(<- chosen)?$", line)
    if m and graph:
        r = rows.setdefault(graph, {"choices": {}, "decided": {}})
        r["choices"].setdefault(m.group(1), float(m.group(2)) * 1000)
        if m.group(3):
            r["decided"][mode] = m.group(1)
print("| graph | choice | us | decided (with cuDNN / tiles only) | eager F.conv2d us |")
print("|---|---|---:|---|---:|")
for g, r in rows.items():
    first = True
    for c, us in sorted(r["choices"].items(), key=lambda kv: kv[1]):
        d = " / ".join(r["decided"].get(k, "-") for k in ("cudnn", "tiles")) if first else ""
        print("| %s | %s | %.1f | %s | %s |" % (g if first else "", c, us, d, ref.get(g, "-") if first else ""))
        first = False
PY
  cat "$OUT/table.md" >> "$LOG"
else
  echo "no Python with torch: eager and the table skipped" >> "$LOG"
fi
MATCHES=$(grep -c 'matches the fp64 reference' "$LOG")
DIFFERS=$(grep -c 'DIFFERS' "$LOG")
printf 'matches: %s\ndiffers: %s\n' "$MATCHES" "$DIFFERS" >> "$LOG"
cat "$LOG"
