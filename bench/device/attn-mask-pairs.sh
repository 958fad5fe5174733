#!/usr/bin/env bash
# The tensor-core attention tiles with an additive mask, after the mask rows
# are found once per thread and read two keys per load: the GPU lit tests of
# masked and unmasked attention (every choice checked against fp64), then
# every choice timed at the gallery Llama-3-8B layer's prefill shape at one
# rank (32 query heads over 8 kv heads, 2048 queries over 4096 keys, an f32
# mask [1, 1, 2048, 4096] shared by the heads) beside PyTorch's SDPA with a
# bf16 mask of that shape (SDPA takes bool or q's type), and the layer through
# the backend (bench/device/prefill-profile.sh, no Inductor). Run from the
# repository root after `bash scripts/gpu-test.sh --pack`; results under $OUT.
set -u
export NCCL_NVLS_ENABLE=0
ROOT=$PWD; D=$ROOT/.device; OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
source "$ROOT/scripts/device-driver.sh"
device_lit_tree "$ROOT" "$D"
S=$OUT/summary.txt
timeout 200 python3 "$D/lit/lit.py" -v "$W/test/lit/Cuda/attention-mask-run.mir" \
  "$W/test/lit/Cuda/attention-mma-run.mir" > "$OUT/lit.log" 2>&1
echo "lit attention-mask-run, attention-mma-run: rc $?" | tee "$S"
grep -E "^(PASS|FAIL|UNSUPPORTED)" "$OUT/lit.log" | tee -a "$S"
T=$(mktemp -d)
cat > "$T/m.mir" <<'MIR'
graph @masked_2048x4096(%q: bf16[1,32,2048,128], %k: bf16[1,8,4096,128], %v: bf16[1,8,4096,128], %m: f32[1,1,2048,4096]) {
  %o = attention(%q, %k, %v, %m) {scale = 0.08838834764831845} : bf16[1,32,2048,128]
  return %o
}
MIR
timeout 200 "$D/bin/mtsched-opt" "$T/m.mir" --prune-top-k=0 --pipeline=default --backend=cuda \
  --no-cache --kernel-cache-dir="$T/kc" --choice-timeout-ms=60000 --run --run-check=false \
  -o "$OUT/masked.decided.mir" > "$OUT/masked.log" 2>&1
echo "masked every choice: rc $?" | tee -a "$S"
grep -E "run @|error" "$OUT/masked.log" | head -5 | tee -a "$S"
grep -o "decided [a-z0-9_]* timings {[^}]*}" "$OUT/masked.decided.mir" | tr ',' '\n' | tee -a "$S"
timeout 100 python3 - <<'PY' 2>&1 | tee -a "$S"
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
bf = dict(dtype=torch.bfloat16, device="cuda")
q = torch.randn(1, 32, 2048, 128, **bf); k = torch.randn(1, 8, 4096, 128, **bf)
v = torch.randn(1, 8, 4096, 128, **bf); m = torch.randn(1, 1, 2048, 4096, **bf)
def t(fn):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / 20 * 1e3
call = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
print("SDPA default (bf16 mask): %.1f us" % t(call))
for b in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
    try:
        with sdpa_kernel(getattr(SDPBackend, b)):
            print("SDPA %s: %.1f us" % (b, t(call)))
    except Exception as ex:
        print("SDPA %s: refused (%s)" % (b, str(ex).splitlines()[0][:100]))
PY
INDUCTOR=0 LAYERS=llama3_8b_layer LAYER_TIMEOUT=150 OUT=$OUT/layer \
  bash bench/device/prefill-profile.sh > "$OUT/layer.log" 2>&1
grep -E "^== |^mtsched error|^--run|^timeline|attention" "$OUT/layer/summary.txt" | cut -c1-160 | tee -a "$S"
