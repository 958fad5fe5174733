#!/usr/bin/env bash
# Byte-for-byte comparison of the decided IR two builds print, to show a
# refactoring changed no decision:
#
#   scripts/compare-decided.sh [-j N] [-o DIR] BUILD_A BUILD_B
#   scripts/compare-decided.sh --gen [-j N] BUILD DIR
#
# For every examples/**/*.mir and every *.mir under test/lit (Inputs/ too)
# and each --fusion-heuristic, it runs BUILD/tools/mtsched-opt/mtsched-opt
# --pipeline=default on the simulator with a fixed seed (files holding
# `// -----` with --split-input-file) and writes stdout plus the exit status
# to DIR/<heuristic>/<path>.out; stderr goes beside it (.err) but is not
# compared (it carries wall times). The first form generates into DIR/a and
# DIR/b (DIR defaults to a fresh temporary directory), diffs them, prints
# `identical: N outputs` or the differences, and exits 1 on any difference.
# Lit inputs that are meant to fail are compared too: their diagnostics are
# their output.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${MTSCHED_JOBS:-2}
GEN=0
OUTDIR=
HEURISTICS=${COMPARE_HEURISTICS:-"benchmark cost-model always never"}
while [ $# -gt 0 ]; do
  case "$1" in
  --gen) GEN=1; shift ;;
  -j) JOBS=$2; shift 2 ;;
  -o) OUTDIR=$2; shift 2 ;;
  -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
  *) break ;;
  esac
done

# One input under one heuristic: generate.sh OPT DIR HEURISTIC FILE
gen_one() {
  local opt=$1 dir=$2 h=$3 f=$4
  local rel=${f#"$ROOT"/}
  local out="$dir/$h/$rel"
  mkdir -p "$(dirname "$out")"
  local split=()
  grep -q '^// -----' "$f" && split=(--split-input-file)
  (cd "$ROOT" && timeout 120 "$opt" --pipeline=default --backend=sim \
    --seed=1 --fusion-heuristic="$h" "${split[@]}" "$rel" \
    >"$out.out" 2>"$out.err" </dev/null)
  echo "exit $?" >>"$out.out"
}
export -f gen_one
export ROOT

generate() {
  local build=$1 dir=$2
  local opt
  opt=$(cd "$build" && pwd)/tools/mtsched-opt/mtsched-opt
  if [ ! -x "$opt" ]; then
    echo "compare-decided: no mtsched-opt in $build" >&2
    exit 2
  fi
  mkdir -p "$dir"
  local h
  for h in $HEURISTICS; do
    find "$ROOT/examples" "$ROOT/test/lit" -name '*.mir' | LC_ALL=C sort |
      xargs -P "$JOBS" -I{} bash -c 'gen_one "$@"' _ "$opt" "$dir" "$h" {}
  done
}

if [ $GEN = 1 ]; then
  [ $# -eq 2 ] || { echo "usage: $0 --gen BUILD DIR" >&2; exit 2; }
  generate "$1" "$2"
  exit 0
fi
[ $# -eq 2 ] || { echo "usage: $0 [-j N] [-o DIR] BUILD_A BUILD_B" >&2; exit 2; }
[ -n "$OUTDIR" ] || OUTDIR=$(mktemp -d /tmp/compare-decided.XXXXXX)
rm -rf "$OUTDIR/a" "$OUTDIR/b"
generate "$1" "$OUTDIR/a"
generate "$2" "$OUTDIR/b"
N=$(find "$OUTDIR/a" -name '*.out' | wc -l)
if diff -r -x '*.err' "$OUTDIR/a" "$OUTDIR/b"; then
  echo "identical: $N outputs ($OUTDIR)"
  exit 0
fi
echo "compare-decided: outputs differ ($OUTDIR)" >&2
exit 1
