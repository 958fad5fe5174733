#!/usr/bin/env bash
# Issue 35's layers (prefill, or SIZE=decode) timed interleaved beside full max-autotune (one
# H200): torch_backend_bench.py times mtsched's compiled layer right after
# its own compile and max-autotune's after Inductor's, minutes apart, and
# the GPU's sustained clock moved those ratios by up to 8% between calls
# (the 8B MLP: 0.95x at 15:09 UTC, 1.03x at 18:11 with the same decisions).
# bench/mlp_breakdown.py compiles both in one process and times them in
# turn, round by round (median of the rounds' ratios), then profiles each
# kernel by kernel. Run from the repository root after
# `bash scripts/gpu-test.sh --pack`:
#   LAYERS="llama3_70b_mlp ..." [FORMS="measured args:..."] [ROUNDS=8] \
#     [LIMIT_S=400] [SIZE=prefill|decode] [PROFILE_ROUNDS=N] \
#     bash bench/device/final-call-interleaved.sh
# PROFILE_ROUNDS: also each variant's kernels profiled over N interleaved
# rounds (sustained load; mlp_breakdown.py --profile-rounds).
# $OUT/breakdown.md (the table per layer), breakdown.log, summary.txt.
set -u
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh" # device_script_setup
device_script_setup "$ROOT" final-interleaved # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LAYERS=${LAYERS:-llama3_70b_mlp mixtral_8x7b_moe llama3_8b_mlp}
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$S" 2>&1
K=$(mktemp -d)
# The backend's caches start empty, as in the gallery's calls.
export MTSCHED_TORCH_CACHE=$K/torch XDG_CACHE_HOME=$K/xdg
T0=$SECONDS
# shellcheck disable=SC2086 # LAYERS and FORMS are lists
timeout "${LIMIT_S:-400}" "$PY" bench/mlp_breakdown.py --build-dir "$D" \
  --out "$OUT" --layers $LAYERS --forms ${FORMS:-measured} --rounds "${ROUNDS:-8}" \
  --size "${SIZE:-prefill}" --profile-rounds "${PROFILE_ROUNDS:-0}" \
  > "$OUT/breakdown.log" 2>&1
echo "mlp_breakdown: rc $? in $((SECONDS - T0)) s" | tee -a "$S"
grep -E "^## |^#### |^### .*sustained|^\| (mtsched|max-autotune|nvjet|\*\*sum)" "$OUT/breakdown.md" \
  2>/dev/null | cut -c1-300 | tee -a "$S"
grep -i "Traceback\|Error" "$OUT/breakdown.log" | head -5 | tee -a "$S"
cp "$K"/torch/*.decided.mir "$OUT/" 2>/dev/null
rm -rf "$K"
