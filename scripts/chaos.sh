#!/usr/bin/env bash
# The `chaos` stage of scripts/test.sh: autotuning under load and under every
# injected fault must give the same answer every time, within its bound.
#
#   bash scripts/chaos.sh [BUILD_DIR]        # default: build/
#
# With CPU hogs running beside it (one per core, killed on exit):
#   1. healthy runs of examples/tp_mlp.mir and of generated 10k-node graphs
#      at 2, 4 and 8 thread ranks and 2 and 4 MPI ranks: every run of one
#      input prints byte-identical IR, no fallback, the report's sync ok;
#   2. the README's example 300 times, 4 at a time: one distinct output;
#   3. every fault kind at 2, 4 and 8 ranks, thread and MPI: each run ends
#      within its documented bound (docs/RANKS.md), the survivors agree and
#      the report names the rank at fault;
#   4. a warm cache (--cache-only) with a rank that exits, hangs or comes
#      past the window, thread and MPI, 2 and 4 ranks: the cached decision
#      replayed, no node falling back.
# MPI parts are skipped (with a note) when mpirun is missing. The verdict
# does not depend on timing luck: deadlines are the defaults (5 s arrival,
# 2 s agreement) except in the fault runs, which set their own to keep the
# stage short, and bounds carry slack for a loaded machine.
#
# Environment: CHAOS_RUNS (healthy runs per input and rank count, default
# 2), CHAOS_EXAMPLE_RUNS (default 300), CHAOS_NODES (default 10000),
# CHAOS_PARTS (default "1 2 3 4": which of the parts above to run).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
cd "$ROOT"
OPT="$BUILD/tools/mtsched-opt/mtsched-opt"
RUNS="${CHAOS_RUNS:-2}"
EXAMPLE_RUNS="${CHAOS_EXAMPLE_RUNS:-300}"
NODES="${CHAOS_NODES:-10000}"
PARTS=" ${CHAOS_PARTS:-1 2 3 4} "
[[ -x "$OPT" ]] || bash scripts/build.sh "$BUILD"

TMP="$(mktemp -d)"
HOGS=()
cleanup() {
  local P
  for P in "${HOGS[@]}"; do kill "$P" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

FAILS=0
fail() {
  echo "chaos: FAIL: $*" >&2
  FAILS=$((FAILS + 1))
}

MPI=0
MPIRUN=(mpirun)
if command -v mpirun >/dev/null 2>&1 &&
  grep -q '^MTSCHED_ENABLE_MPI:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  MPI=1
  if mpirun --version 2>&1 | grep -q 'Open MPI'; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    MPIRUN+=(--oversubscribe)
  fi
else
  echo "chaos: note: no mpirun or no MPI build; MPI runs skipped"
fi

# One busy loop per core, for the whole stage.
for _ in $(seq "$(nproc)"); do
  (while :; do :; done) &
  HOGS+=($!)
done
echo "chaos: ${#HOGS[@]} CPU hogs running"

export MTSCHED_CACHE=off
COMMON=(--pipeline=default --quiet --no-cache)

# launch KIND NP: the command prefix that runs NP ranks as KIND.
launch() {
  if [[ $1 == mpi ]]; then
    echo "${MPIRUN[*]} -np $2 $OPT"
  else
    echo "$OPT --ranks=$2"
  fi
}

# ---------------------------------------------------------------------------
if [[ "$PARTS" == *" 1 "* ]]; then
echo "== 1. healthy runs under load: byte-identical IR, no fallback"
python3 bench/gen_graph.py --nodes "$NODES" --world 2 >"$TMP/g2.mir"
python3 bench/gen_graph.py --nodes "$NODES" --world 4 >"$TMP/g4.mir"
python3 bench/gen_graph.py --nodes "$NODES" --world 8 >"$TMP/g8.mir"
CONFIGS=("threads 2 examples/tp_mlp.mir" "threads 2 $TMP/g2.mir"
  "threads 4 $TMP/g4.mir" "threads 8 $TMP/g8.mir")
if [[ $MPI == 1 ]]; then
  CONFIGS+=("mpi 2 examples/tp_mlp.mir" "mpi 2 $TMP/g2.mir" "mpi 4 $TMP/g4.mir")
fi
for C in "${CONFIGS[@]}"; do
  read -r KIND NP IN <<<"$C"
  NAME="$KIND$NP-$(basename "$IN" .mir)"
  START=$SECONDS
  for I in $(seq "$RUNS"); do
    RC=0
    # shellcheck disable=SC2046
    timeout -k 5 300 $(launch "$KIND" "$NP") "${COMMON[@]}" "$IN" \
      --report="$TMP/$NAME.$I.json" >"$TMP/$NAME.$I.out" 2>"$TMP/$NAME.$I.err" || RC=$?
    [[ $RC -eq 0 ]] || fail "$NAME run $I exited $RC"
    if grep -q 'warning\|error' "$TMP/$NAME.$I.err"; then
      fail "$NAME run $I: stderr not empty"
      sed 's/^/  | /' "$TMP/$NAME.$I.err" | head -n 5 >&2
    fi
    python3 - "$TMP/$NAME.$I.json" <<'EOF' || fail "$NAME run $I: report says the sync failed"
import json, sys
r = json.load(open(sys.argv[1]))
s = r["sync"]
ok = s["ok"] and s["fallback_nodes"] == 0 and not any(n["fallback"] for n in r["nodes"])
print("    skew %.3f ms, cost %.3f ms, sync %.1f ms" % (s["skew_ms"], s["cost_ms"], s["ms"]))
sys.exit(0 if ok else 1)
EOF
  done
  DISTINCT="$(for I in $(seq "$RUNS"); do sha1sum <"$TMP/$NAME.$I.out"; done | sort -u | wc -l)"
  [[ "$DISTINCT" == 1 ]] || fail "$NAME: $DISTINCT distinct outputs in $RUNS runs"
  echo "chaos: $NAME: $RUNS runs, $DISTINCT distinct output(s), $((SECONDS - START))s"
done
# MPI and thread ranks agree with each other too.
if [[ $MPI == 1 ]]; then
  for P in "2-tp_mlp" "2-g2" "4-g4"; do
    cmp -s "$TMP/threads$P.1.out" "$TMP/mpi$P.1.out" ||
      fail "$P: MPI ranks printed other IR than thread ranks"
  done
fi
fi

# ---------------------------------------------------------------------------
if [[ "$PARTS" == *" 2 "* ]]; then
echo "== 2. the README example $EXAMPLE_RUNS times under load, 4 at a time"
START=$SECONDS
mkdir -p "$TMP/readme"
# The README's command, with its cache: the first runs tune and write it,
# the others replay it while more writers race.
seq "$EXAMPLE_RUNS" | xargs -P 4 -I{} sh -c \
  "MTSCHED_CACHE=on MTSCHED_CACHE_DIR='$TMP/readme-cache' '$OPT' --pipeline=default examples/tp_mlp.mir >'$TMP/readme/{}.out' 2>'$TMP/readme/{}.err'; echo \$? >'$TMP/readme/{}.rc'"
DISTINCT="$(for F in "$TMP"/readme/*.out; do sha1sum <"$F"; done | sort -u | wc -l)"
BAD_RC="$(cat "$TMP"/readme/*.rc | grep -vc '^0$' || true)"
LOUD="$(cat "$TMP"/readme/*.err | grep -c 'warning' || true)"
echo "chaos: README example: $EXAMPLE_RUNS runs, $DISTINCT distinct output(s), $BAD_RC non-zero exits, $LOUD warnings, $((SECONDS - START))s"
[[ "$DISTINCT" == 1 ]] || fail "README example: $DISTINCT distinct outputs"
[[ "$BAD_RC" == 0 ]] || fail "README example: $BAD_RC runs exited non-zero"
[[ "$LOUD" == 0 ]] || fail "README example: $LOUD warnings"
fi

# ---------------------------------------------------------------------------
echo "== 3. every fault at 2, 4 and 8 ranks: bounded, survivors agree, culprit named"
# Short deadlines keep the stage short. A fault's bound is its documented
# formula (docs/PASSES.md, docs/RANKS.md) in these numbers, rounded up to the
# second, plus "run": the time of the same launch without a fault, measured
# first (MPI start-up included). SLACK absorbs the load's noise only.
D=1000 # --pre-sync-timeout-ms
G=500  # --agreement-timeout-ms
T=1000 # --choice-timeout-ms
SLACK=5
declare -A BASE
FAULT=(--pipeline=default --quiet --no-cache --pre-sync-timeout-ms=$D
  --agreement-timeout-ms=$G --choice-timeout-ms=$T)

# baseline KIND NP: times the healthy launch on the small graph (the "run"
# of every bound).
baseline() {
  local KIND="$1" NP="$2" IN="$TMP/small$2.mir" START
  python3 bench/gen_graph.py --layers 2 --world "$NP" -m 256 -n 1024 >"$IN"
  START=$SECONDS
  # shellcheck disable=SC2046
  timeout -k 5 120 $(launch "$KIND" "$NP") "${FAULT[@]}" "$IN" >/dev/null 2>&1 ||
    fail "$KIND$NP: the healthy baseline run failed"
  BASE[$KIND$NP]=$((SECONDS - START + 1))
  echo "chaos: $KIND$NP: healthy run ${BASE[$KIND$NP]}s (rounded up)"
}

# fault KIND NP SPEC FORMULA_S EXPECT_RC PYCHECK: one faulty run on a small
# generated graph of NP ranks, bounded by FORMULA_S + the healthy run;
# PYCHECK is evaluated on the report r (None when there is none) with R the
# faulty rank.
fault() {
  local KIND="$1" NP="$2" SPEC="$3" BOUND=$(($4 + BASE[$1$2])) WANT="$5" CHECK="$6"
  local NAME="$KIND$NP-${SPEC//[:=]/_}" IN="$TMP/small$NP.mir"
  local START=$SECONDS RC=0
  # shellcheck disable=SC2046
  timeout -k 5 $((BOUND + SLACK)) $(launch "$KIND" "$NP") "${FAULT[@]}" \
    --inject="$SPEC" "$IN" --report="$TMP/$NAME.json" \
    >"$TMP/$NAME.out" 2>"$TMP/$NAME.err" || RC=$?
  local T=$((SECONDS - START))
  echo "chaos: $NAME: exit $RC in ${T}s (bound ${BOUND}s)"
  if [[ $RC -eq 124 || $RC -eq 137 ]]; then
    fail "$NAME: did not end within ${BOUND}s + ${SLACK}s"
    return
  fi
  [[ $RC -eq $WANT ]] || fail "$NAME: exit $RC, expected $WANT"
  [[ $T -le $((BOUND + SLACK)) ]] || fail "$NAME: ${T}s, bound ${BOUND}s"
  if grep -q 'decided differently' "$TMP/$NAME.err"; then
    fail "$NAME: ranks decided differently"
  fi
  local FALLBACKS
  FALLBACKS="$(grep -c 'warning: pre-sync of' "$TMP/$NAME.err" || true)"
  [[ "$FALLBACKS" -le 1 ]] || fail "$NAME: $FALLBACKS fallback lines, expected at most one"
  python3 - "$TMP/$NAME.json" "${SPEC}" "$CHECK" <<'EOF' || {
import json, os, re, sys
path, spec, check = sys.argv[1:]
r = json.load(open(path)) if os.path.exists(path) else None
m = re.search(r"rank=(\d+)", spec)
R = int(m.group(1)) if m else None
def choice(name):
    return [c for n in r["nodes"] for c in n["choices"] if c["name"] == name]
sys.exit(0 if eval(check) else 1)
EOF
    fail "$NAME: check failed: $6"
    sed 's/^/  | /' "$TMP/$NAME.err" | head -n 8 >&2
  }
}

AGREE="all(k['decisions'] == r['ranks'][0]['decisions'] for k in r['ranks'])"
KINDS=()
[[ "$PARTS" == *" 3 "* ]] && KINDS+=(threads)
[[ $MPI == 1 && "$PARTS" == *" 3 "* ]] && KINDS+=(mpi)
for KIND in "${KINDS[@]}"; do
  for NP in 2 4 8; do
    baseline "$KIND" "$NP"
    L=$((NP - 1)) # the faulty rank: the last
    # Late within the deadline (bound: ms): nothing falls back; the skew is
    # measured.
    fault "$KIND" "$NP" "late:rank=$L:ms=300" 1 0 \
      "r['sync']['ok'] and r['sync']['skew_ms'] >= 150 and $AGREE"
    # Late past the deadline (bound: ms): every rank names the late one.
    fault "$KIND" "$NP" "late:rank=$L:ms=1200" 2 0 \
      "not r['sync']['ok'] and r['sync']['late_ranks'] == [R] and r['sync']['fallback_nodes'] > 0 and $AGREE"
    # Later than D + G (bound: D + G for thread ranks; an MPI process sleeps
    # its own time out, so MPI skips this one): named missing.
    if [[ $KIND == threads ]]; then
      fault "$KIND" "$NP" "late:rank=$L:ms=60000" 2 0 \
        "r['sync']['missing_ranks'] == [R] and all(n['fallback'] for n in r['nodes'])"
    fi
    # Hung (bound: D + G; MPI: the hung process leaves at D + G + 2 s with
    # status 3): named missing.
    HANG_RC=0 HANG_S=2
    [[ $KIND == mpi ]] && HANG_RC=3 HANG_S=4
    fault "$KIND" "$NP" "hang:rank=$L" $HANG_S $HANG_RC \
      "r['sync']['missing_ranks'] == [R] and r['sync']['ms'] < 3000"
    fault "$KIND" "$NP" "exit:rank=$L" 0 0 \
      "r['sync']['missing_ranks'] == [R] and all(n['fallback'] for n in r['nodes'])"
    # Different collective nodes: an error, no report.
    fault "$KIND" "$NP" "mismatch:rank=$L" 0 1 "r is None"
    # Choice faults (bound: none, or T per workload for a timeout): +inf on
    # every rank; the faulty rank's own time is null.
    for C in build-fail run-fail wrong-result timeout; do
      fault "$KIND" "$NP" "$C:choice=two_shot:rank=$L" $([[ $C == timeout ]] && echo 1 || echo 0) 0 \
        "r['sync']['ok'] and all(c['ms'] is None and c['status'] != 'ok' for c in choice('two_shot')) and all(c['rank_ms'][R] is None for c in choice('two_shot')) and $AGREE"
    done
  done
done

# ---------------------------------------------------------------------------
# A fully cached graph never falls back, whichever rank is missing: the
# survivors (and a late rank) replay their own reading of the cache. The
# verdict is the same whether a fault made the pre-sync fail or not, so it
# does not depend on timing: the warm run's IR, every node a hit, no node
# falling back.
if [[ "$PARTS" == *" 4 "* ]]; then
  echo "== 4. a warm cache with a rank missing: replayed, nothing falls back"
  CACHED=(--pipeline=default --quiet --pre-sync-timeout-ms=$D
    --agreement-timeout-ms=$G --choice-timeout-ms=$T)
  KINDS=(threads)
  [[ $MPI == 1 ]] && KINDS+=(mpi)
  for KIND in "${KINDS[@]}"; do
    for NP in 2 4; do
      IN="$TMP/cached$NP.mir" CDIR="$TMP/cache-$KIND$NP"
      python3 bench/gen_graph.py --layers 2 --world "$NP" -m 256 -n 1024 >"$IN"
      # shellcheck disable=SC2046
      timeout -k 5 120 $(launch "$KIND" "$NP") "${CACHED[@]}" --cache-dir="$CDIR" \
        "$IN" -o "$TMP/cached-$KIND$NP.ref.mir" >/dev/null 2>&1 ||
        fail "$KIND$NP: the run that warms the cache failed"
      L=$((NP - 1))
      for SPEC in "exit:rank=$L" "exit:rank=0" "hang:rank=$L" "late:rank=$L:ms=4000"; do
        NAME="cached-$KIND$NP-${SPEC//[:=]/_}" RC=0
        # MPI: a hung process leaves with status 3 (docs/RANKS.md).
        WANT=0
        [[ $KIND == mpi && $SPEC == hang* ]] && WANT=3
        # shellcheck disable=SC2046
        timeout -k 5 60 $(launch "$KIND" "$NP") "${CACHED[@]}" --cache-dir="$CDIR" \
          --cache-only --inject="$SPEC" "$IN" -o "$TMP/$NAME.mir" \
          --report="$TMP/$NAME.json" >/dev/null 2>"$TMP/$NAME.err" || RC=$?
        echo "chaos: $NAME: exit $RC"
        [[ $RC -eq $WANT ]] || fail "$NAME: exit $RC, expected $WANT"
        cmp -s "$TMP/cached-$KIND$NP.ref.mir" "$TMP/$NAME.mir" ||
          fail "$NAME: the IR differs from the cached decision"
        python3 - "$TMP/$NAME.json" <<'EOF' || fail "$NAME: a node fell back or missed the cache"
import json, sys
r = json.load(open(sys.argv[1]))
ok = (r["sync"]["fallback_nodes"] == 0 and r["cache"]["misses"] == 0
      and r["cache"]["hits"] > 0 and not any(n["fallback"] for n in r["nodes"]))
sys.exit(0 if ok else 1)
EOF
      done
    done
  done
fi

if [[ $FAILS -ne 0 ]]; then
  echo "chaos: $FAILS check(s) failed" >&2
  exit 1
fi
echo "chaos: OK"
