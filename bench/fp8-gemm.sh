#!/usr/bin/env bash
# fp8 GEMMs on one GPU, in one call (docs/BENCHMARKS.md): mtsched's fp8
# template (every tile, --prune-top-k=0, each checked against fp64 before
# it is timed) against torch._scaled_mm (cuBLASLt fp8) and bf16 cuBLAS at
# M = 16, 64, 256, 4096 (N = K = 4096), e4m3 x e4m3, per-tensor scales,
# bf16 out.
#
#   BUILD_DIR=build scripts/gpu-test.sh --pack DIR   # here: binaries into DIR
#   bench/fp8-gemm.sh [DIR]                          # there (default .device)
#
# Reports go to $OUT (else ./gpu-results); the table comes last.
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
t0=$EPOCHREALTIME
timeout 300 "$D/bin/mtsched-opt" "$ROOT/bench/gemm-fp8.mir" --quiet --no-cache --pipeline=default \
  --prune-top-k=0 --backend=cuda --kernel-cache-dir="$T/kc" --report="$OUTDIR/fp8.json" \
  >/dev/null 2>"$OUTDIR/fp8.err" || fail=1
echo "mtsched rc=$fail wall_s=$(python3 -c "print(round($EPOCHREALTIME - $t0, 1))")"
tail -3 "$OUTDIR/fp8.err"
timeout 300 "$PY" "$ROOT/bench/peers/torch_fp8_gemm.py" "$OUTDIR/fp8-peer.json" || fail=1
python3 - "$OUTDIR" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
r = json.load(open(os.path.join(d, "fp8.json")))
peer = json.load(open(os.path.join(d, "fp8-peer.json"))) if os.path.exists(os.path.join(d, "fp8-peer.json")) else {}
print("\n| M x N x K | best mtsched fp8 tile | torch._scaled_mm | bf16 cuBLAS | mtsched / scaled_mm | mtsched / bf16 |")
print("|---|---|---|---|---|---|")
for n in r["nodes"]:
    m = int(n["graph"].split("_m")[1])
    key = "%dx4096x4096" % m
    ok = [c for c in n["choices"] if c["status"] == "ok" and c["ms"]]
    bad = [c["name"] + ":" + c["status"] for c in n["choices"] if c["status"] != "ok"]
    best = min(ok, key=lambda c: c["ms"]) if ok else None
    p = peer.get(key, {})
    us = best["ms"] * 1000 if best else None
    f = lambda v: "-" if v is None else "%.1f us" % v
    ratio = lambda a, b: "-" if a is None or b is None else "%.2f" % (a / b)
    print("| %s | %s %s | %s | %s | %s | %s |" % (
        key, best["name"] if best else "-", f(us), f(p.get("scaled_mm_us")),
        f(p.get("bf16_cublas_us")), ratio(us, p.get("scaled_mm_us")),
        ratio(us, p.get("bf16_cublas_us"))))
    if bad:
        print("  not ok:", ", ".join(bad))
PYEOF
exit $fail
