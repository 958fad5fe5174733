#!/usr/bin/env bash
# Autotuning speed of the cuda backend (issue 16), beside torch.compile's
# max-autotune of the same function, in one GPU call:
#
#   bash bench/autotune-speed.sh [DIR]
#
# DIR (default .device, see scripts/gpu-test.sh --pack) holds bin/mtsched-opt
# and lib/. For each graph under bench/speed/ it times the whole process,
# cold (empty autotune cache and kernel cache) then warm (both filled), with
# a Chrome trace of each run (--trace) for where the time goes; the Llama
# MLP is also run with --run (decided graph on the GPU, checked against the
# fp64 interpreter), and both cold runs again measuring every choice
# (--prune-top-k=0) to price the default pruning. Then bench/peers/torch_gemm.py times cuBLAS and
# Inductor's max-autotune compile of GEMM+bias+ReLU at 4096^3 with empty
# Inductor and Triton caches, when PyTorch is installed (SKIP_PEERS=1: not). Results in $OUT
# (default ./speed-results): speed.md (the table), *.trace.json, *.log.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=$(cd "${1:-$ROOT/.device}" && pwd)
OUTDIR=${OUT:-$PWD/speed-results}
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OPT="$D/bin/mtsched-opt"
[ -x "$OPT" ] || OPT="$D/tools/mtsched-opt/mtsched-opt"
W=$(mktemp -d)
T="$OUTDIR/speed.md"
echo "| graph | run | wall s | rc |" >"$T"
echo "|---|---|---|---|" >>"$T"
time_run() { # NAME PHASE ARGS...
  local name=$1 phase=$2
  shift 2
  local t0=$EPOCHREALTIME
  "$OPT" "$ROOT/bench/speed/$name.mir" --backend=cuda --pipeline=default \
    --cache-dir="${CD:-$W/cache-$name}" --kernel-cache-dir="${KC:-$W/kernels-$name}" \
    --trace="$OUTDIR/$name-$phase.trace.json" --quiet "$@" \
    -o "$OUTDIR/$name-$phase.mir" 2>"$OUTDIR/$name-$phase.log"
  local rc=$?
  local s
  s=$(python3 -c "print(round($EPOCHREALTIME - $t0, 3))")
  echo "| $name | $phase | $s | $rc |" | tee -a "$T"
}
for name in gemm-bias-relu llama-mlp-m16; do
  time_run "$name" cold
  time_run "$name" warm
  time_run "$name" warm2
done
CD="$W/cache-run" KC=none time_run llama-mlp-m16 run-cold --run
# What the default pruning (--prune-top-k=3) costs: the same cold runs
# measuring every choice, then each node's decision under the default priced
# with the exhaustive run's times (regret = its time / the best - 1).
for name in gemm-bias-relu llama-mlp-m16; do
  CD="$W/c0-$name" KC="$W/k0-$name" time_run "$name" cold-all --prune-top-k=0
  python3 - "$OUTDIR/$name-cold.mir" "$OUTDIR/$name-cold-all.mir" <<'PY' | tee -a "$OUTDIR/notes.txt"
import re, sys
def nodes(path):
    out = {}
    for line in open(path):
        m = re.search(r"%(\S+) = \S+ .* decided (\S+)( fused)?.* timings \{([^}]*)\}", line)
        if not m:
            continue
        t = dict((k.strip(), float(v.strip().rstrip("us")) if v.strip() != "inf" else float("inf"))
                 for k, v in (kv.split("=") for kv in m.group(4).split(",")))
        f = re.search(r"fused_timings \{([^}]*)\}", line)
        ft = dict((k.strip(), float(v.strip().rstrip("us")) if v.strip() != "inf" else float("inf"))
                  for k, v in (kv.split("=") for kv in f.group(1).split(","))) if f else {}
        out[m.group(1)] = (m.group(2), bool(m.group(3)), t, ft)
    return out
pruned, full = nodes(sys.argv[1]), nodes(sys.argv[2])
for n, (d, fused, _, _) in pruned.items():
    fd, ffused, t, ft = full[n]
    # Both decisions priced by the exhaustive run (an unfused choice's
    # separate epilogue kernel is the same for both, so fused is compared
    # with fused and unfused with unfused through the exhaustive decision).
    best = (ft if ffused else t).get(fd, float("inf"))
    mine = (ft if fused else t).get(d, float("inf"))
    if fused != ffused:
        print("prune %%%s: default decides %s%s, exhaustive %s%s (fused and "
              "unfused are not comparable here; see the decided IR)"
              % (n, d, " fused" if fused else "", fd, " fused" if ffused else ""))
        continue
    print("prune %s %%%s: default decides %s%s (%.2f us in the exhaustive run), exhaustive %s%s, regret %.1f%%"
          % (sys.argv[1].rsplit("/", 1)[-1][:-9], n, d, " fused" if fused else "", mine, fd,
             " fused" if ffused else "", 100 * (mine / best - 1)))
PY
done
grep -h "^run @\|error\|warning" "$OUTDIR"/*.log | head -20 | tee -a "$OUTDIR/notes.txt"
# Where the time goes: the trace's events summed by name (top 15 per run).
for f in "$OUTDIR"/*.trace.json; do
  python3 - "$f" <<'PY' | tee -a "$OUTDIR/profile.txt"
import json, sys, collections
ev = json.load(open(sys.argv[1])).get("traceEvents", [])
tot = collections.Counter(); cnt = collections.Counter()
for e in ev:
    if e.get("ph") == "X":
        tot[e["name"]] += e.get("dur", 0); cnt[e["name"]] += 1
print("==", sys.argv[1].rsplit("/", 1)[-1])
for n, d in [x for x in tot.most_common() if not x[0].startswith("Total ")][:15]:
    print(f"  {n:32s} {d/1e6:9.3f} s  x{cnt[n]}")
PY
done
if [ -z "${SKIP_PEERS:-}" ] &&
  python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  export TORCHINDUCTOR_CACHE_DIR="$W/inductor" TRITON_CACHE_DIR="$W/triton"
  timeout 400 python3 "$ROOT/bench/peers/torch_gemm.py" "$OUTDIR/torch_gemm.json" 4096,4096,4096 \
    >"$OUTDIR/torch_gemm.log" 2>&1
  echo "torch_gemm rc=$?" | tee -a "$OUTDIR/notes.txt"
  python3 -c "import json; r=json.load(open('$OUTDIR/torch_gemm.json')); print(json.dumps(r))" | tee -a "$OUTDIR/notes.txt"
fi
rm -rf "$W"
