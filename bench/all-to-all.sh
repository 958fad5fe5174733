#!/usr/bin/env bash
# all_to_all on two GPUs, in one call (docs/BENCHMARKS.md): mtsched's
# choices for an even and an uneven all_to_all (bench/all-to-all.mir, two
# thread ranks, each choice checked on both ranks before it is timed)
# beside torch's all_to_all_single (bench/peers/torch_alltoall.py).
#
#   BUILD_DIR=build scripts/gpu-test.sh --pack DIR   # here: binaries into DIR
#   bench/all-to-all.sh [DIR]                        # there (default .device)
#
# Reports go to $OUT (else ./gpu-results); the table comes last.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=$(cd "${1:-$ROOT/.device}" && pwd) || exit 1
OUTDIR=${OUT:-$ROOT/gpu-results}
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0
source "$ROOT/scripts/torch-python.sh"
PY="$(find_torch_python)" || PY=python3
nvidia-smi -L
fail=0
T=$(mktemp -d)
timeout 300 "$D/bin/mtsched-opt" "$ROOT/bench/all-to-all.mir" --ranks=2 --quiet --no-cache \
  --pipeline=default --backend=cuda --kernel-cache-dir="$T/kc" --report="$OUTDIR/a2a.json" \
  >"$OUTDIR/a2a.decided.mir" 2>"$OUTDIR/a2a.err" || fail=1
tail -3 "$OUTDIR/a2a.err"
timeout 300 "$PY" "$ROOT/bench/peers/torch_alltoall.py" "$OUTDIR/a2a-peer.json" || fail=1
python3 - "$OUTDIR" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
r = json.load(open(os.path.join(d, "a2a.json")))
pp = os.path.join(d, "a2a-peer.json")
peer = json.load(open(pp)) if os.path.exists(pp) else {}
f = lambda v: "-" if v is None else "%.1f" % v
print("\n| rows x 4096 bf16 | even nccl | even p2p | torch even | uneven nccl | torch uneven |")
print("|---|---|---|---|---|---|")
by = {}
for n in r["nodes"]:
    rows = int(n["graph"].split("_r")[1])
    name = n["name"].lstrip("%")
    t = {c["name"]: (c["ms"] * 1000 if c["status"] == "ok" and c["ms"] else None)
         for c in n["choices"]}
    by.setdefault(rows, {})[name] = t
    for c in n["choices"]:
        if c["status"] != "ok" and not (name == "uneven" and c["name"] == "p2p") \
                and not (name == "rc" and c["name"] == "p2p"):
            print("  %s %s %s: %s" % (n["graph"], name, c["name"], c["status"]))
for rows in sorted(by):
    e, u = by[rows].get("even", {}), by[rows].get("uneven", {})
    p = peer.get(str(rows), {})
    print("| %d | %s | %s | %s | %s | %s |" % (rows, f(e.get("nccl")), f(e.get("p2p")),
          f(p.get("even_us")), f(u.get("nccl")), f(p.get("uneven_us"))))
PYEOF
exit $fail
