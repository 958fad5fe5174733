#!/usr/bin/env bash
# Byte-identical check of what mtsched-opt decides, for refactorings that
# must not change behaviour (docs/DEVELOPING.md):
#
#   scripts/compare-decided.sh BASE_OPT NEW_OPT [OUT]   # run both, then diff
#   scripts/compare-decided.sh --save OPT OUT           # one binary's outputs
#
# Every examples/**/*.mir and every test/lit/**/*.mir (Inputs/ included, each
# '// -----' case on its own) of this checkout is run, from the repository
# root so that diagnostics name the same paths, through:
#   print    parse, verify, print
#   default  --pipeline=default (simulator, fixed seed)
#   cost     the same with --fusion-heuristic=cost-model
#   always   the same with --fusion-heuristic=always
#   never    the same with --fusion-heuristic=never
#   v1       the same with --collective-mode=immediate (decided by `lower`)
#   kernels  --lower --fuse --dump-kernels: every generated CUDA kernel
#   dkernels --pipeline=default --dump-kernels: the decided graph's kernels
# The autotune cache is off (--no-cache): a decision replayed from an entry
# the other binary wrote would hide a difference. Each run's stdout, exit
# status and stderr (its lines sorted) are kept
# (rejected inputs too: their diagnostics must not change either). OUT defaults to
# build/compare-decided; the comparison exits 1 if anything differs.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SEED=1
JOBS=${MTSCHED_JOBS:-2}

save() {
  local OPT=$1 OUT=$2
  OPT=$(cd "$(dirname "$OPT")" && pwd)/$(basename "$OPT")
  if [ ! -x "$OPT" ]; then
    echo "compare-decided: error: '$OPT' is not an executable" >&2
    return 1
  fi
  rm -rf "$OUT" && mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  cd "$ROOT" || return 1
  export OPT OUT SEED
  { find examples -name '*.mir'; find test/lit -name '*.mir'; } | LC_ALL=C sort |
    xargs -P "$JOBS" -I{} bash -c '
      F={}
      K=$(printf "%s" "$F" | tr "/" "_")
      SPLIT=
      case "$F" in test/lit/*) SPLIT=--split-input-file ;; esac
      one() { # name, then options
        local N=$1; shift
        timeout 120 "$OPT" $SPLIT --quiet --no-cache "$@" "$F" >"$OUT/$K.$N.out" 2>"$OUT/$K.$N.err"
        echo $? >"$OUT/$K.$N.rc"
        # Ranks run as threads print their warnings in whichever order
        # they get there: compare the lines, not their order.
        LC_ALL=C sort -o "$OUT/$K.$N.err" "$OUT/$K.$N.err"
      }
      kernels() { # name, then options: the .cu files, then the run
        local N=$1 D="$OUT/$K.$1.cu"; shift
        mkdir -p "$D"
        one "$N" "$@" --dump-kernels="$D"
        sed -i "s|$D|DIR|g" "$OUT/$K.$N.err"
        rmdir "$D" 2>/dev/null
      }
      one print
      one default --pipeline=default --seed=$SEED
      one cost --pipeline=default --seed=$SEED --fusion-heuristic=cost-model
      one always --pipeline=default --seed=$SEED --fusion-heuristic=always
      one never --pipeline=default --seed=$SEED --fusion-heuristic=never
      one v1 --pipeline=default --seed=$SEED --collective-mode=immediate
      kernels kernels --lower --fuse
      kernels dkernels --pipeline=default --seed=$SEED
    '
  echo "compare-decided: $(find "$OUT" -name '*.rc' | wc -l) runs of $OPT saved in $OUT"
}

if [ "${1:-}" = --save ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --save OPT OUT" >&2; exit 2; }
  save "$2" "$3"
  exit $?
fi
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 BASE_OPT NEW_OPT [OUT] | $0 --save OPT OUT" >&2
  exit 2
fi
OUT=${3:-$ROOT/build/compare-decided}
save "$1" "$OUT/base" || exit 1
save "$2" "$OUT/new" || exit 1
if diff -r "$OUT/base" "$OUT/new" >"$OUT/diff.txt"; then
  echo "compare-decided: identical ($(find "$OUT/base" -type f | wc -l) files)"
  exit 0
fi
echo "compare-decided: outputs differ; see $OUT/diff.txt ($(grep -c '^diff\|^Only' "$OUT/diff.txt") files)"
exit 1
