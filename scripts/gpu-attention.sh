#!/usr/bin/env bash
# Attention on one GPU (docs/CUDA.md, "Attention"; docs/BENCHMARKS.md):
#   (a) --run of the decode and prefill examples (examples/attention/):
#       every choice timed and checked, the decided graph run and compared
#       with the fp64 interpreter; then again with the flash tiles made to
#       fail, so attn_math runs too;
#   (b) every choice timed at Llama-3-8B shapes (bench/attention-llama3.mir)
#       and, in the same call, PyTorch's scaled_dot_product_attention at the
#       same shapes (bench/peers/torch_sdpa.py), set side by side.
#
#   bash scripts/gpu-attention.sh        # from the repository root
# The driver: $MTSCHED_OPT, else .device/bin (scripts/gpu-test.sh --pack),
# else build/. Results go to $OUT/attention (else ./gpu-results/attention):
# run-*.log, decided.mir, report.json, torch_sdpa.json, summary.md.
# Exits non-zero if a --run output differs or a step fails.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/device-driver.sh"
find_mtsched_opt "$ROOT"
R="${OUT:-$ROOT/gpu-results}/attention"
mkdir -p "$R"
KC="$(mktemp -d)"
fail=0
nvidia-smi -L 2>/dev/null || true

# The flash tiles of each example (an --inject naming a choice the graph
# does not have is refused): attn_math runs once they all fail.
FLASH_decode="flash_16x64_w4 flash_16x32_w4 flash_16x64_w4_kv8 flash_16x64_w4_kv16 flash_16x64_w4_kv32
  mma_16x32_w4 mma_16x32_w4_kv4 mma_16x32_w4_kv8 mma_16x32_w4_kv16"
FLASH_prefill="flash_64x64_w4 flash_32x64_w4 flash_16x64_w4 flash_16x32_w4
  mma_128x64_w8 mma_128x32_w4 mma_256x32_w8 mma_64x64_w4 mma_16x32_w4"
for ex in decode prefill; do
  for mode in best math; do
    extra=()
    if [[ $mode = math ]]; then
      tiles="FLASH_$ex"
      for t in ${!tiles}; do
        extra+=("--inject=run-fail:choice=attn_$t")
      done
    fi
    echo "== --run $ex ($mode)"
    timeout 300 "$BIN" "$ROOT/examples/attention/$ex.mir" --pipeline=default --backend=cuda \
      --no-cache --kernel-cache-dir="$KC" --quiet --run "${extra[@]}" \
      >"$R/run-$ex-$mode.mir" 2>"$R/run-$ex-$mode.log"
    rc=$?
    grep -h 'run @\|error' "$R/run-$ex-$mode.log"
    grep -o 'decided [a-z0-9_]* timings {[^}]*}' "$R/run-$ex-$mode.mir"
    if [[ $rc != 0 ]] || ! grep -q 'matches the fp64 reference' "$R/run-$ex-$mode.log"; then
      echo "gpu-attention: --run $ex ($mode) FAILED (rc=$rc)"
      fail=1
    fi
  done
done

echo "== timing every choice at Llama-3-8B shapes"
timeout 400 "$BIN" "$ROOT/bench/attention-llama3.mir" --pipeline=default --backend=cuda \
  --no-cache --kernel-cache-dir="$KC" --quiet --choice-timeout-ms=120000 \
  --report="$R/report.json" >"$R/decided.mir" 2>"$R/decided.log" || {
  echo "gpu-attention: timing FAILED"
  tail -5 "$R/decided.log"
  fail=1
}
grep -o '^graph @[a-z0-9_]*\|decided [a-z0-9_]* timings {[^}]*}' "$R/decided.mir"

echo "== PyTorch scaled_dot_product_attention, same shapes"
PY=python3
"$PY" -c 'import torch' 2>/dev/null || PY=/usr/bin/python3
timeout 300 "$PY" "$ROOT/bench/peers/torch_sdpa.py" "$R/torch_sdpa.json" || {
  echo "gpu-attention: the PyTorch peer FAILED"
  fail=1
}

python3 "$ROOT/scripts/gpu-attention-summary.py" "$R/decided.mir" "$R/torch_sdpa.json" |
  tee "$R/summary.md"
rm -rf "$KC"
exit $fail
