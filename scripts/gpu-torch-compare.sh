#!/usr/bin/env bash
# On one GPU with PyTorch 2.x: every gallery layer (examples/torch, at one
# rank) imported with torch.export, decided with --backend=cuda, run with
# --run on the inputs PyTorch eager gets (.npy files), its outputs compared
# with eager's (max relative error per output, bf16 tolerance), and its
# decided graph replayed as a CUDA graph set beside torch.compile(mode=
# "max-autotune") (CUDA graphs too), and its eager launches beside PyTorch
# eager.
# Layers that still contain custom ops are imported but not run.
#
#   bash scripts/gpu-torch-compare.sh            # from the repository root,
#                                                # with a built build/
# Environment:
#   OUT                results go to $OUT/torch-compare-<sizes> (else
#                      ./gpu-results/...): compare.md (the table),
#                      compare.json, per layer the .mir, the decided IR, the
#                      report and mtsched-opt's log
#   GALLERY            gallery modules, space-separated (default all)
#   SIZES              decode,prefill (default); SIZES=decode and then
#                      SIZES=prefill split the work over two calls when
#                      torch.compile's autotuning makes one call too long
#   DEADLINE           seconds after which no new layer starts (default 420)
#   MTSCHED_PYTHON     the interpreter with torch (default: python3, then
#                      /usr/bin/python3)
#   MTSCHED_OPT        the mtsched-opt binary (default build/tools/...)
# Extra arguments go to `python3 -m mtsched_torch.compare` (e.g.
# --no-compile, --fp64-check).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/torch-python.sh"
PY="$(find_torch_python)" || {
  echo "gpu-torch-compare: error: no Python with torch and numpy" >&2
  exit 2
}
# The driver: $MTSCHED_OPT, else .device/bin (scripts/gpu-test.sh --pack,
# with the libraries it packed), else build/.
source "$ROOT/scripts/device-driver.sh"
find_mtsched_opt "$ROOT"
if ! "$BIN" --version >/dev/null 2>&1; then
  echo "gpu-torch-compare: error: '$BIN' does not run here:" >&2
  "$BIN" --version >&2 || true
  echo "gpu-torch-compare: build it, or run 'scripts/gpu-test.sh --pack' and carry .device/" >&2
  exit 2
fi
export MTSCHED_OPT="$BIN"
SIZES="${SIZES:-decode,prefill}"
RESULTS="${OUT:-$ROOT/gpu-results}/torch-compare-${SIZES//,/-}"
mkdir -p "$RESULTS"
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
# The kernel cache stays out of $OUT (it is large and is not a result).
CACHE="${TMPDIR:-/tmp}/mtsched-torch-compare-kernels"
{
  echo "gpu-torch-compare: $(date -u +%FT%TZ), $("$PY" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)')"
  nvidia-smi -L 2>/dev/null || true
} | tee "$RESULTS/environment.txt"
# shellcheck disable=SC2086
"$PY" -m mtsched_torch.compare --gallery ${GALLERY:-all} \
  --sizes "$SIZES" --device cuda --mode run \
  --tracer export --mtsched-opt "$BIN" --kernel-cache-dir "$CACHE" \
  --deadline-s "${DEADLINE:-420}" --out "$RESULTS" "$@" \
  2> >(tee "$RESULTS/compare.log" >&2)
