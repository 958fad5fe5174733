#!/usr/bin/env bash
# GEMM + bias + ReLU and GEMM + residual + RMSNorm (N = K = 4096; M = 16,
# 64, 256, 4096) on one GPU, in one call (docs/BENCHMARKS.md): mtsched as
# users run it (--pipeline=default, default pruning, every timed choice
# checked first) against torch.compile(mode="max-autotune-no-cudagraphs")
# and cuBLAS + separate epilogue (bench/peers/torch_gemm.py). mtsched's
# time is its decision's: the fused kernel's, or the GEMM's plus the
# epilogue kernel's (the report's epilogue_ms), all timed over inputs
# rotated past 3x the L2, as the peer's are.
#
#   BUILD_DIR=build scripts/gpu-test.sh --pack DIR   # here: binaries into DIR
#   bench/epilogue-vs-inductor.sh [DIR]              # there (default .device)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=$(cd "${1:-$ROOT/.device}" && pwd) || exit 1
OUTDIR=${OUT:-$ROOT/gpu-results}
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source "$ROOT/scripts/torch-python.sh"
PY="$(find_torch_python)" || PY=python3
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
fail=0
T=$(mktemp -d)
timeout 300 "$D/bin/mtsched-opt" "$ROOT/bench/epilogue-vs-inductor.mir" --quiet --no-cache \
  --pipeline=default --backend=cuda --kernel-cache-dir="$T/kc" --report="$OUTDIR/epi.json" \
  >"$OUTDIR/epi.decided.mir" 2>"$OUTDIR/epi.err" || fail=1
tail -3 "$OUTDIR/epi.err"
timeout 280 "$PY" "$ROOT/bench/peers/torch_gemm.py" "$OUTDIR/epi-peer.json" \
  16,4096,4096 64,4096,4096 256,4096,4096 4096,4096,4096 || fail=1
python3 - "$OUTDIR" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
r = json.load(open(os.path.join(d, "epi.json")))
pp = os.path.join(d, "epi-peer.json")
peer = json.load(open(pp)) if os.path.exists(pp) else {}
f = lambda v: "-" if v is None else "%.1f" % v
print("\n| function | M | mtsched's decision | mtsched us | cuBLAS + epilogue (torch) | Inductor max-autotune | mtsched / Inductor |")
print("|---|---|---|---|---|---|---|")
for n in r["nodes"]:
    g = n["graph"].lstrip("@")
    kind, m = g.rsplit("_m", 1)
    c = {x["name"]: x for x in n["choices"]}[n["chosen"]]
    if n["epilogue_fused"]:
        us, how = c["fused_ms"] * 1000, "fused"
    else:
        us, how = (c["ms"] + (n.get("epilogue_ms") or 0)) * 1000, "+ epilogue kernel"
    p = peer.get("%sx4096x4096" % m, {})
    key = "bias_relu" if kind == "bias_relu" else "resid_rmsnorm"
    ind, cub = p.get("inductor_%s_us" % key), p.get("cublas_%s_us" % key)
    print("| %s | %s | `%s` %s | %s | %s | %s | %s |" % (kind, m, n["chosen"], how, f(us), f(cub), f(ind),
          "-" if not ind else "%.2fx" % (us / ind)))
PYEOF
exit $fail
