#!/usr/bin/env bash
# mlp70b branch (issue 35): where the gallery's Llama-3-70B MLP at prefill
# (x bf16[2048, 8192], RMSNorm, gate/up 8192 -> 28672, silu * up, down
# 28672 -> 8192, residual; world size 1) loses to max-autotune, node by
# node, on one H200. Run from the repository root with
# .device/bin/mtsched-opt; results under $OUT (summary.txt, breakdown.md,
# decided*.mir, reports.tar.gz, logs); every step under `timeout`, under
# 75 s.
#   1. The MLP's IR decided with every choice timed (--prune-top-k=0) after
#      the benchmarker's fp64 check of each: the default persistent tiles,
#      the same with the raster group over all 16 tile rows (_g16: each
#      weight read from memory once, not twice), cuBLAS; --autotune-summary
#      gives each node's choices, `--run` the decided graph's time.
#   2. The gate/up SwiGLU alone, select-swiglu's forms timed in samples of
#      30 ms of back-to-back launches (--bench-sample-us=30000: the clock
#      the GPU sustains under load, as the layer runs) instead of 0.5 ms.
#   3. bench/mlp_breakdown.py: torch's cuBLAS per GEMM shape (sustained and
#      burst), then the layer through torch.compile(backend="mtsched") with
#      select-swiglu's measured choice and with the merged form forced
#      (--swiglu-form=merged), and max-autotune (GEMMs ATen-only: what full
#      max-autotune chose at every GEMM here), each timed by cuda_time_us
#      and profiled kernel by kernel in the same process.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_script_setup
device_script_setup "$ROOT" mlp70b      # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$SECONDS
left() { echo $((72 - (SECONDS - START))); }
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)
# One kernel cache for mtsched-opt and the torch backend.
export MTSCHED_TORCH_CACHE=$K/torch XDG_CACHE_HOME=$K/xdg
KC=$MTSCHED_TORCH_CACHE/kernels

cat > "$K/mlp.mir" <<'MIR'
graph @llama3_70b_mlp_prefill(%x: bf16[2048,8192], %norm_w: bf16[8192], %wg: bf16[8192,28672], %wu: bf16[8192,28672], %wd: bf16[28672,8192]) {
  %h = rmsnorm(%x, %norm_w) {eps = 1e-05} : bf16[2048,8192]
  %g = matmul(%h, %wg) : bf16[2048,28672]
  %gs = silu(%g) : bf16[2048,28672]
  %u = matmul(%h, %wu) : bf16[2048,28672]
  %gu = mul(%gs, %u) : bf16[2048,28672]
  %d = matmul(%gu, %wd) : bf16[2048,8192]
  %out = add(%x, %d) : bf16[2048,8192]
  return %out
}
MIR
cat > "$K/swiglu.mir" <<'MIR'
graph @swiglu_70b(%h: bf16[2048,8192], %wg: bf16[8192,28672], %wu: bf16[8192,28672]) {
  %g = matmul(%h, %wg) : bf16[2048,28672]
  %u = matmul(%h, %wu) : bf16[2048,28672]
  %gs = silu(%g) : bf16[2048,28672]
  %gu = mul(%gs, %u) : bf16[2048,28672]
  return %gu
}
MIR
cat > "$K/choices.json" <<'JSON'
{"swiglu_tiles": [
  {"template": "wgmma", "bm": 128, "bn": 128, "bk": 64, "stages": 4, "persistent": true},
  {"template": "wgmma", "bm": 128, "bn": 128, "bk": 64, "stages": 4, "persistent": true, "group_m": 16}],
 "gemm_tiles": [
  {"template": "wgmma", "bm": 128, "bn": 256, "bk": 64, "stages": 4, "persistent": true},
  {"template": "wgmma", "bm": 128, "bn": 256, "bk": 64, "stages": 4, "persistent": true, "group_m": 16}],
 "gemm_externs": ["extern.cublas"]}
JSON
summary() { # the summary's AUTOTUNE tables and select-swiglu's times
  grep -h "AUTOTUNE\|^  \|swiglu_merged_us\|run @\|decided graph" "$1" |
    grep -v "^  *$" | sed 's/ timings {.*//' | cut -c1-200
}

echo "== 1. the MLP decided, every choice timed (500 us samples), --run" | tee -a "$S"
T=$(left); [ "$T" -gt 30 ] && T=30
timeout "$T" "$BIN" "$K/mlp.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
  --choices-file="$K/choices.json" --kernel-cache-dir="$KC" --autotune-summary \
  --report="$K/report-mlp.json" --run --run-check=false -o "$OUT/decided.mir" \
  > "$OUT/mlp.log" 2>&1
echo "rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
summary "$OUT/mlp.log" | tee -a "$S"
grep "^  %" "$OUT/decided.mir" | sed 's/ choices \[[^]]*\]//; s/ timings {.*//' | cut -c1-220 | tee -a "$S"

echo "== 2. gate/up alone, select-swiglu in 30 ms samples" | tee -a "$S"
T=$(left); [ "$T" -gt 15 ] && T=15
if [ "$T" -ge 8 ]; then
  timeout "$T" "$BIN" "$K/swiglu.mir" --pipeline=default --backend=cuda --prune-top-k=0 \
    --choices-file="$K/choices.json" --kernel-cache-dir="$KC" --no-cache \
    --bench-sample-us=30000 --bench-runs=5 --autotune-summary \
    --report="$K/report-sustained.json" -o "$OUT/decided-sustained.mir" \
    > "$OUT/sustained.log" 2>&1
  echo "rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  summary "$OUT/sustained.log" | tee -a "$S"
  grep -o "swiglu_[a-z]*_us = [0-9.inf]*\|decided [a-z0-9_.]*" "$OUT/decided-sustained.mir" | tee -a "$S"
else
  echo "skipped: out of time" | tee -a "$S"
fi

echo "== 3. torch: cuBLAS per shape, the layer through mtsched (measured, merged) and max-autotune" | tee -a "$S"
T=$(left)
if [ "$T" -ge 15 ]; then
  timeout "$T" "$PY" bench/mlp_breakdown.py --build-dir "$D" --out "$OUT" \
    --forms measured merged --aten-only > "$OUT/breakdown.log" 2>&1
  echo "rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
  grep -v "^$" "$OUT/breakdown.md" 2>/dev/null | cut -c1-160 | tee -a "$S"
  grep -i "error\|Traceback\|fallback" "$OUT/breakdown.log" | head -5 | tee -a "$S"
else
  echo "skipped: out of time" | tee -a "$S"
fi
echo "total $((SECONDS - START)) s" | tee -a "$S"
cp "$K"/torch/*.decided.mir "$OUT/" 2>/dev/null
(cd "$K" && tar czf "$OUT/reports.tar.gz" report-*.json torch/*.json 2>/dev/null)
rm -rf "$K"
