#!/usr/bin/env bash
# Where the decode layers that lose to max-autotune lose (issues 35, 37):
# the gallery's Llama-3-70B MLP, DeepSeek MoE and Mixtral MoE at world size
# 1 (as bench/torch_backend_bench.py runs them), decode.
#  1. Each graph imported at world size 1 (examples/torch/gallery.py's
#     generate), decided with --backend=cuda --prune-top-k=0 (every choice
#     of every node timed: --autotune-summary) and run (--run, CUDA-graph
#     time; --run-check=false: the fp64 interpreter of these is slow, the
#     backend bench checks against eager).
#  2. bench/kernel_profile.py: PyTorch eager and max-autotune kernel by
#     kernel (torch.profiler) for the same layers.
# Run from the repository root after `bash scripts/gpu-test.sh --pack`.
# Results in $OUT: decode-diag.log, <layer>.summary.txt, kernel-profile.md.
# Budget about 4 minutes ($DEADLINE, default 220 s, skips what is late).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/device-driver.sh
source "$ROOT/scripts/device-driver.sh"
device_script_setup "$ROOT" decode-diag
LOG=$OUT/decode-diag.log
DEADLINE=${DEADLINE:-220}
LAYERS=${LAYERS:-llama3_70b_mlp deepseek_moe mixtral_8x7b_moe}
START=$SECONDS
W=$(mktemp -d)
{ date -u +%FT%TZ; nvidia-smi -L; } > "$LOG" 2>&1
(cd "$ROOT/examples/torch" && "$PY" - "$W" $LAYERS <<'PYEOF'
import sys
import gallery
for n in sys.argv[2:]:
    mod, _ = gallery.generate(gallery.by_name(n), world_size=1, quiet=True)
    open("%s/%s.mir" % (sys.argv[1], n), "w").write(mod.text())
PYEOF
) >> "$LOG" 2>&1
for L in $LAYERS; do
  if (( SECONDS - START > DEADLINE )); then
    echo "skipped (past ${DEADLINE} s): $L" >> "$LOG"; continue
  fi
  awk -v g="${L}_decode" '/^graph @/ {keep = ($0 ~ "^graph @" g "\\(")} /^group @/ {print; next} keep' \
    "$W/$L.mir" > "$W/$L-decode.mir"
  echo "== $L" >> "$LOG"
  timeout 120 "$BIN" "$W/$L-decode.mir" --pipeline=default --backend=cuda \
    --no-cache --kernel-cache-dir="$W/kc" --prune-top-k=0 --autotune-summary \
    --run --run-check=false -o "$OUT/$L.decided.mir" > "$OUT/$L.summary.txt" 2>&1
  echo "exit $?" >> "$LOG"
  grep -h "decided graph" "$OUT/$L.summary.txt" >> "$LOG"
done
if (( SECONDS - START < DEADLINE + 60 )); then
  timeout 200 "$PY" bench/kernel_profile.py --layers $LAYERS --size decode \
    --out "$OUT" >> "$LOG" 2>&1
  echo "kernel_profile exit $?" >> "$LOG"
fi
echo "total $((SECONDS - START)) s" >> "$LOG"
rm -rf "$W"
tail -5 "$LOG"
