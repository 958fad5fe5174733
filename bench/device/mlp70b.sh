#!/usr/bin/env bash
# mlp70b branch (issue 35), round 2: the gallery's Llama-3-70B MLP at
# prefill (x bf16[2048, 8192], RMSNorm, gate/up 8192 -> 28672, silu * up,
# down 28672 -> 8192, residual; world size 1) and, to see that it does not
# get slower, the Llama-3-8B MLP, on one H200, through
# bench/mlp_breakdown.py: each layer through torch.compile(backend=
# "mtsched") with select-swiglu's measured choice, with the merged and the
# split form forced (--swiglu-form), and through max-autotune (GEMMs
# ATen-only: what full max-autotune chose at every GEMM of these layers),
# timed interleaved (one sample of each per round: the GPU's clock drifts
# under sustained load), profiled kernel by kernel, and mtsched-opt's
# report per GEMM and SwiGLU node (every choice checked against fp64 before
# it is timed). Each variant is compiled from a function of its own, so
# that Dynamo keeps all of them (round 2 compiled the module itself and
# reset Dynamo between the forms: every mtsched variant then ran the last
# form compiled). This build measures the persistent merged tile
# (swiglu_wg_128x128x64_s4_p) as a kind of its own under the default
# pruning: round 1 found the backend never measured it at 70B. Run from the
# repository root with .device/bin/mtsched-opt; results under $OUT
# (summary.txt, breakdown.md, decided IR, reports.tar.gz, logs); every step
# under `timeout`, under 75 s.
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
# The backend's caches (decided IR, kernels, autotuning) start empty.
export MTSCHED_TORCH_CACHE=$K/torch XDG_CACHE_HOME=$K/xdg

T=$(left)
echo "== interleaved: the layers through mtsched (measured, merged, split) and max-autotune" | tee -a "$S"
timeout "$T" "$PY" bench/mlp_breakdown.py --build-dir "$D" --out "$OUT" \
  --layers llama3_70b_mlp llama3_8b_mlp --forms measured merged split \
  --aten-only > "$OUT/breakdown.log" 2>&1
echo "rc=$? ($((SECONDS - START)) s)" | tee -a "$S"
grep -v "^$" "$OUT/breakdown.md" 2>/dev/null | cut -c1-400 | tee -a "$S"
grep -i "Traceback\|Error\|fell back\|fallback" "$OUT/breakdown.log" | head -5 | tee -a "$S"
echo "total $((SECONDS - START)) s" | tee -a "$S"
cp "$K"/torch/*.decided.mir "$OUT/" 2>/dev/null
(cd "$K" && tar czf "$OUT/reports.tar.gz" torch/*.json 2>/dev/null)
rm -rf "$K"
