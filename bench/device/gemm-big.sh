#!/usr/bin/env bash
# gemm-big branch (issue 35), round 2: the Llama-3-70B MLP's prefill GEMMs
# (M = 2048, bf16, (N, K) = (28672, 8192) gate/up and (8192, 28672) down)
# on one H200 under sustained load, in one process, interleaved
# (bench/device/gemm-big.py --mtsched): cuBLAS as PyTorch calls it
# (torch.matmul(x, W.t()), max-autotune's ATen GEMMs, TNT; and on the
# [K, N] copy, NNT) against nn.Linear through torch.compile(backend=
# "mtsched") with its choice forced by a choices file: the wgmma tile
# gemm_wg_128x256x64_s4_p (bench/device/gemm-big-tile.json) and
# extern.cublas (bench/device/gemm-big-cublas.json). Each checked on 64
# rows against fp64 (and by mtsched's benchmarker before it timed its
# choice), then timed in ~10 ms samples, 10 s a shape, the first rounds
# (boost clocks) and the last half (sustained) reported apart.
# Round 1 (commit d8b9304, gemm-big-fold branch) found TN = NN
# (1.003, 1.0026) and the tile ahead of extern.cublas in 5 ms samples of
# mtsched-opt's benchmarker (1266.6 vs 1286.9, 1280.5 vs 1307.4 us).
# Run from the repository root with .device/bin/mtsched-opt; results under
# $OUT (summary.txt, torch.json, torch.log); under `timeout`, under 75 s.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_script_setup
device_script_setup "$ROOT" gemm-big    # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
START=$SECONDS
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)
# The backend's caches (decided IR, kernels, autotuning) start empty.
export MTSCHED_TORCH_CACHE=$K/torch XDG_CACHE_HOME=$K/xdg

echo "== cuBLAS (TN, NN) against mtsched's tile and extern.cublas, sustained, interleaved" | tee -a "$S"
timeout 70 "$PY" bench/device/gemm-big.py "$OUT/torch.json" --seconds 20 \
  --mtsched "$D" "$ROOT/bench/device/gemm-big-tile.json" \
  "$ROOT/bench/device/gemm-big-cublas.json" > "$OUT/torch.log" 2>&1
echo "rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
grep -v "^$\|UserWarning\|_warn_once" "$OUT/torch.log" | tail -14 | cut -c1-420 | tee -a "$S"
echo "total $((SECONDS - START)) s" | tee -a "$S"
rm -rf "$K"
