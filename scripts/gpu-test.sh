#!/usr/bin/env bash
# GPU tests and measurements of the cuda backend, run on a machine with a
# GPU from a build carried there (see docs/CUDA.md):
#
#   scripts/gpu-test.sh [--bench] [DIR]
#   scripts/gpu-test.sh --warm [DIR]
#
# DIR (default .device) holds bin/{mtsched-opt,CudaTests,FileCheck,not},
# lib/ (shared libraries the binaries need beyond libc, and
# libmtsched_runtime.so; lib/mtsched/ the MPI plugin) and lit/ (lit.py);
# scripts/gpu-test.sh --pack builds that folder here from build/ (or
# $BUILD_DIR).
# Runs the GPU unit tests (they skip, saying why, without a GPU) and the
# lit tests under test/lit/Cuda (REQUIRES: cuda-gpu). With --bench it then
# times the measurements recorded in docs/BENCHMARKS.md; results go to
# $OUT (or ./gpu-results) as JSON reports and a summary.
# --warm only times warm starts: tp_mlp on one GPU is tuned once on cuda
# into a fresh autotune cache, then run 10 times more from it; each warm
# run must replay every node, never create the backend (no `create
# benchmarker` in its trace) and print the same IR. It prints
# `warm_start median_ms=... max_ms=... created_backend=0 same_ir=1` (the
# target is a median of at most 20 ms) and exits 1 if a check fails.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# device_lit_tree: the lit tree over the packed tools.
source "$ROOT/scripts/device-driver.sh"
BENCH=0
PACK=0
COLL=0
WARM=0
while [ $# -gt 0 ]; do
  case "$1" in
  --bench) BENCH=1; shift ;;
  --coll) COLL=1; shift ;;
  --pack) PACK=1; shift ;;
  --warm) WARM=1; shift ;;
  *) break ;;
  esac
done
D=$(cd "${1:-$ROOT/.device}" 2>/dev/null && pwd || echo "${1:-$ROOT/.device}")

if [ $PACK = 1 ]; then
  # Collect what the GPU machine lacks (it has no LLVM): the binaries, the
  # non-system libraries they load, FileCheck, not and lit.
  B=${BUILD_DIR:-$ROOT/build}
  rm -rf "$D" && mkdir -p "$D/bin" "$D/lib"
  cp "$B/tools/mtsched-opt/mtsched-opt" "$B/test/unit/Cuda/CudaTests" "$D/bin/"
  # The tools of scripts/gpu-e2e.sh, where built.
  for t in tools/mtsched-calibrate/mtsched-calibrate tools/mtsched-lab/mtsched-lab \
    bench/mtsched-bench-presync; do
    [ -x "$B/$t" ] && cp "$B/$t" "$D/bin/"
  done
  # FileCheck, not and lit as the build's lit tests found them (CMake cache).
  cached() { sed -n "s/^$1:FILEPATH=//p" "$B/CMakeCache.txt"; }
  FILECHECK=$(cached MTSCHED_FILECHECK)
  NOT=$(cached MTSCHED_NOT)
  LIT=$(cached MTSCHED_LIT)
  if [ -z "$FILECHECK" ] || [ -z "$NOT" ] || [ -z "$LIT" ]; then
    echo "gpu-test: error: $B was configured without tests (no FileCheck/not/lit in its cache)" >&2
    exit 1
  fi
  cp "$FILECHECK" "$NOT" "$D/bin/"
  # The MPI plugin, where mtsched-opt looks for it (bin/../lib/mtsched, as
  # installed: docs/RANKS.md); the MPI libraries it needs go to lib-mpi.
  if [ -f "$B/lib/mtsched/libmtsched_mpi.so" ]; then
    mkdir -p "$D/lib/mtsched" && cp "$B/lib/mtsched/libmtsched_mpi.so" "$D/lib/mtsched/"
  fi
  # The runtime library (docs/RUNTIME.md): examples/torch/compile_backend.py
  # --build-dir "$D" finds it at lib/ and mtsched-opt at bin/.
  if [ -f "$B/lib/RuntimeApi/libmtsched_runtime.so" ]; then
    cp "$B/lib/RuntimeApi/libmtsched_runtime.so" "$D/lib/"
  fi
  for bin in "$D"/bin/* "$D"/lib/mtsched/*.so "$D"/lib/libmtsched_runtime.so; do
    [ -e "$bin" ] || continue
    ldd "$bin" | awk '/=> \// {print $3}' |
      grep -v -E 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux' |
      xargs -r -I{} cp -L {} "$D/lib/"
  done
  # MPI's own libraries apart: the GPU machine's MPI, if it has one, must
  # load its own (scripts/gpu-e2e.sh tries both).
  mkdir -p "$D/lib-mpi"
  for l in "$D"/lib/libmpi* "$D"/lib/libopen-* "$D"/lib/libhwloc* "$D"/lib/libevent* "$D"/lib/libpmix*; do
    [ -e "$l" ] && mv "$l" "$D/lib-mpi/"
  done
  # lit.py runs from its own folder; a lit installed by pip is a package of
  # the Python it was installed for, so take its source folder.
  case "$LIT" in
  *.py) cp -r "$(dirname "$LIT")" "$D/lit" ;;
  *)
    # The Python named on its #! line (pip writes the one it installed for).
    LITPY=$(sed -n '1s/^#! *//p' "$LIT")
    LITPKG=$(${LITPY:-python3} -c 'import lit, os; print(os.path.dirname(os.path.dirname(lit.__file__)))') || {
      echo "gpu-test: error: cannot find the lit package for $LIT" >&2
      exit 1
    }
    mkdir -p "$D/lit" && cp -r "$LITPKG/lit" "$D/lit/lit"
    printf 'import sys\nfrom lit.main import main\nsys.exit(main())\n' >"$D/lit/lit.py"
    ;;
  esac
  du -sh "$D"
  exit 0
fi

OUTDIR=${OUT:-$ROOT/gpu-results}
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH="$D/lib:$D/lib-mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OPT="$D/bin/mtsched-opt"
nvidia-smi -L || echo "gpu-test: no nvidia-smi; GPU tests will skip"
fail=0

if [ $WARM = 1 ]; then
  echo "== warm start from the autotune cache (one GPU)"
  T=$(mktemp -d)
  sed -e 's/group @tp = \[0, 1\]/group @tp = [0]/' \
    -e 's/world_size = 2/world_size = 1/' "$ROOT/examples/tp_mlp.mir" >"$T/tp_mlp1.mir"
  "$OPT" "$T/tp_mlp1.mir" --pipeline=default --backend=cuda --quiet --cache-dir="$T/cache" \
    --kernel-cache-dir="$T/kernels" >"$T/cold.mir" 2>"$T/cold.err" || { cat "$T/cold.err"; exit 1; }
  for i in 1 2 3 4 5 6 7 8 9 10; do
    t0=$EPOCHREALTIME
    "$OPT" "$T/tp_mlp1.mir" --pipeline=default --backend=cuda --quiet --cache-dir="$T/cache" \
      --kernel-cache-dir="$T/kernels" --trace="$T/warm$i.json" --report="$T/warm$i.report.json" >"$T/warm$i.mir" 2>"$T/warm$i.err"
    rc=$?
    t1=$EPOCHREALTIME
    echo "$(python3 -c "print(($t1 - $t0) * 1000)") $rc" >>"$T/times"
  done
  python3 - "$T" <<'PY' | tee -a "$OUTDIR/summary.txt"
import json, statistics, sys
t = sys.argv[1]
rows = [l.split() for l in open(t + "/times")]
ms = [float(r[0]) for r in rows]
ok = all(r[1] == "0" for r in rows)
cold = open(t + "/cold.mir").read()
same = all(open("%s/warm%d.mir" % (t, i)).read() == cold for i in range(1, 11))
created = sum("create benchmarker" in open("%s/warm%d.json" % (t, i)).read() for i in range(1, 11))
hits = all(json.load(open("%s/warm%d.report.json" % (t, i)))["cache"]["misses"] == 0 for i in range(1, 11))
print("warm_start median_ms=%.1f max_ms=%.1f created_backend=%d same_ir=%d all_cached=%d rc_ok=%d"
      % (statistics.median(ms), max(ms), created, same, hits, ok))
sys.exit(0 if ok and same and hits and created == 0 else 1)
PY
  exit "${PIPESTATUS[0]}"
fi

if [ $COLL = 1 ]; then
  # Collectives on two GPUs (thread ranks, one GPU each) only: the unit and
  # lit tests, then with --bench the all_reduce sweep of docs/BENCHMARKS.md.
  echo "== collective unit tests"
  timeout 300 "$D/bin/CudaTests" --gtest_filter='Collective*' 2>&1 | tee "$OUTDIR/coll-unit.log" | tail -25
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  echo "== collective lit tests (thread ranks, MPI ranks)"
  device_lit_tree "$ROOT" "$D"
  timeout 300 python3 "$D/lit/lit.py" -sv "$W/test/lit/Cuda/collective-2gpu.mir" "$W/test/lit/Cuda/collective-2gpu-mpi.mir" \
    "$W/test/lit/Cuda/all-to-all-2gpu.mir" 2>&1 | tee "$OUTDIR/coll-lit.log" | tail -25
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  if [ $BENCH = 1 ]; then
    echo "== all_reduce sweep, 2 ranks"
    t0=$EPOCHREALTIME
    timeout 400 "$OPT" "$ROOT/bench/allreduce-2gpu.mir" --ranks=2 --pipeline=default --backend=cuda \
      --no-cache --choice-timeout-ms=300000 --kernel-cache-dir="$(mktemp -d)" --report="$OUTDIR/allreduce-2gpu.json" \
      >"$OUTDIR/allreduce-2gpu.out" 2>"$OUTDIR/allreduce-2gpu.err"
    echo "allreduce-2gpu rc=$? wall_s=$(python3 -c "print(round($EPOCHREALTIME - $t0, 2))")" | tee -a "$OUTDIR/summary.txt"
    tail -5 "$OUTDIR/allreduce-2gpu.err"
    python3 "$ROOT/scripts/gpu-coll-summary.py" "$OUTDIR/allreduce-2gpu.json" | tee -a "$OUTDIR/summary.txt"
  fi
  exit $fail
fi

echo "== GPU unit tests"
"$D/bin/CudaTests" 2>&1 | tee "$OUTDIR/unit.log" | tail -25
[ "${PIPESTATUS[0]}" = 0 ] || fail=1

echo "== lit tests under test/lit/Cuda"
device_lit_tree "$ROOT" "$D"
python3 "$D/lit/lit.py" -sv "$W/test/lit/Cuda" 2>&1 | tee "$OUTDIR/lit.log" | tail -25
if [ "${PIPESTATUS[0]}" != 0 ]; then
  fail=1
  # A failed test's mtsched-opt stderr went to its %t.log, which lit does
  # not show: print them, so that a failure seen once can be read.
  for t in $(sed -n 's/^FAIL: mtsched :: Cuda\/\(.*\) (.*/\1/p' "$OUTDIR/lit.log"); do
    for f in "$W/test/lit/Cuda/Output/$t".tmp*.log; do
      [ -f "$f" ] && { echo "== $f"; tail -40 "$f"; }
    done
  done 2>&1 | tee -a "$OUTDIR/lit.log"
fi

# The lit tests above check these; their `run @` lines go to the summary:
# the decided SwiGLU MLP and the layers with two-output epilogues (GEMM
# add -> rmsnorm writing the sum; a one-rank all_reduce's), each run on the
# GPU with --run and compared with the fp64 interpreter.
echo "== --run: SwiGLU MLP and two-output epilogues vs the fp64 interpreter"
if nvidia-smi -L >/dev/null 2>&1; then
  for t in swiglu-run two-output-run legal-fusion-run; do
    "$OPT" "$ROOT/test/lit/Cuda/$t.mir" --split-input-file --pipeline=default \
      --backend=cuda --no-cache --kernel-cache-dir="$W/kernels" --run --quiet \
      2>&1 >"$OUTDIR/run-$t.mir" | grep '^run @\|error' | tee -a "$OUTDIR/summary.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  done
else
  echo "skipped: no GPU"
fi

if [ $BENCH = 1 ]; then
  echo "== measurements"
  T=$(mktemp -d)
  cp "$ROOT/bench/gemm.mir" "$T/gemm.mir"
  cp "$ROOT/bench/gemm-epilogue.mir" "$T/epilogue.mir"
  # tp_mlp on one rank: world size 1, so each all_reduce is a copy.
  sed -e 's/group @tp = \[0, 1\]/group @tp = [0]/' \
    -e 's/world_size = 2/world_size = 1/' "$ROOT/examples/tp_mlp.mir" >"$T/tp_mlp1.mir"
  sed -e 's/group @tp = \[0, 1\]/group @tp = [0]/' \
    -e 's/world_size = 2/world_size = 1/' "$ROOT/examples/llama_mlp_swiglu.mir" >"$T/swiglu1.mir"

  run() { # name, args...
    local n=$1; shift
    local t0=$EPOCHREALTIME
    "$OPT" "$@" --quiet >"$T/$n.out" 2>"$T/$n.err"
    local rc=$?
    echo "$n rc=$rc wall_s=$(python3 -c "print(round($EPOCHREALTIME - $t0, 2))")" | tee -a "$OUTDIR/summary.txt"
    tail -3 "$T/$n.err"
  }
  # --no-cache: no autotune-result cache, so every run measures; only the
  # kernel cache (--kernel-cache-dir) is cold or warm.
  run gemm "$T/gemm.mir" --no-cache --pipeline=default --backend=cuda --kernel-cache-dir="$T/c1" --report="$OUTDIR/gemm.json"
  run epilogue "$T/epilogue.mir" --no-cache --pipeline=default --backend=cuda --kernel-cache-dir="$T/c1" --report="$OUTDIR/epilogue.json"
  run tp_cold "$T/tp_mlp1.mir" --no-cache --pipeline=default --backend=cuda --kernel-cache-dir="$T/c2" --report="$OUTDIR/tp_cold.json"
  run tp_warm "$T/tp_mlp1.mir" --no-cache --pipeline=default --backend=cuda --kernel-cache-dir="$T/c2" --report="$OUTDIR/tp_warm.json"
  # Replay from the autotune cache (written by the next run) for comparison.
  run tp_replay0 "$T/tp_mlp1.mir" --cache-dir="$T/t5" --pipeline=default --backend=cuda --kernel-cache-dir="$T/c5"
  run tp_replay "$T/tp_mlp1.mir" --cache-dir="$T/t5" --pipeline=default --backend=cuda --kernel-cache-dir="$T/c5" --report="$OUTDIR/tp_replay.json"
  run compile_serial "$T/gemm.mir" --no-cache --pipeline=default --backend=cuda --kernel-cache-dir="$T/c3" --compile-threads=1 --bench-runs=1 --report="$OUTDIR/compile1.json"
  run compile_16 "$T/gemm.mir" --no-cache --pipeline=default --backend=cuda --kernel-cache-dir="$T/c4" --compile-threads=16 --bench-runs=1 --report="$OUTDIR/compile16.json"
  # SwiGLU (Llama-3-8B MLP at TP=2, one rank): merged gate+up GEMM against
  # the split GEMMs, decode and prefill, as measured.
  run swiglu "$T/swiglu1.mir" --no-cache --pipeline=default --backend=cuda --kernel-cache-dir="$T/c6" --report="$OUTDIR/swiglu.json"
  cp "$T/swiglu.out" "$OUTDIR/swiglu.mir"
  grep -o '^graph @[a-z_]*\|%gu = [a-z_]* [a-z]*(\|swiglu_[a-z]*_us = [0-9.inf]*\|decided swiglu_[0-9x_ws]*' "$T/swiglu.out" | tr '\n' ' ' | sed 's/graph @/\nswiglu @/g' | tee -a "$OUTDIR/summary.txt"
  echo | tee -a "$OUTDIR/summary.txt"
  python3 "$ROOT/scripts/gpu-bench-summary.py" "$OUTDIR" | tee -a "$OUTDIR/summary.txt"
fi
exit $fail
