#!/usr/bin/env bash
# MPI ranks (docs/RANKS.md): builds with MPI, runs the MpiCommunicator unit
# tests and the simulator pipeline under `mpirun -np 2` and
# `mpirun -np 4 --oversubscribe`, healthy and with injected rank faults. Every
# mpirun runs under `timeout`, which is the bound being tested: a fault must
# end the job within the pre-sync window + the choice timeout + slack, with
# every surviving rank falling back the same way.
#
# Skips (exit 77) when mpirun is not installed.
set -euo pipefail

ROOT="${MTSCHED_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BUILD="${MTSCHED_BUILD_DIR:-$ROOT/build}"
cd "$ROOT"

if ! command -v mpirun >/dev/null 2>&1; then
  echo "mpi: SKIPPED: mpirun not found (apt-get install openmpi-bin libopenmpi-dev," \
    "or bash scripts/setup.sh)"
  exit 77
fi

# The Release build, with MPI (a build configured before MPI was installed
# has it off).
[[ -f "$BUILD/CMakeCache.txt" ]] || bash scripts/build.sh "$BUILD"
if ! grep -q '^MTSCHED_ENABLE_MPI:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  echo "mpi: reconfiguring $BUILD with -DMTSCHED_ENABLE_MPI=ON"
  cmake -DMTSCHED_ENABLE_MPI=ON "$BUILD" >/dev/null
fi
ninja -C "$BUILD" -j"${MTSCHED_JOBS:-2}" mtsched-opt MpiCommunicatorTests
OPT="$BUILD/tools/mtsched-opt/mtsched-opt"
UNIT="$BUILD/test/unit/Mpi/MpiCommunicatorTests"

MPIRUN=(mpirun)
if mpirun --version 2>&1 | grep -q 'Open MPI'; then
  # CI runs as root; Open MPI refuses that unless told.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  MPIRUN+=(--oversubscribe)
fi
echo "mpi: $(mpirun --version 2>&1 | head -n 1)"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
FAILS=0
fail() {
  echo "mpi: FAIL: $*" >&2
  FAILS=$((FAILS + 1))
}

# run NAME BOUND_S NP ARGS...: mtsched-opt under mpirun, killed past BOUND_S;
# stdout in $TMP/NAME.out, stderr in $TMP/NAME.err, status in RC.
run() {
  local NAME="$1" BOUND="$2" NP="$3"
  shift 3
  local START=$SECONDS
  RC=0
  timeout -k 5 "$BOUND" "${MPIRUN[@]}" -np "$NP" "$OPT" "$@" \
    >"$TMP/$NAME.out" 2>"$TMP/$NAME.err" || RC=$?
  echo "mpi: $NAME: np $NP, exit $RC, $((SECONDS - START))s (bound ${BOUND}s)"
  if [[ $RC -eq 124 || $RC -eq 137 ]]; then
    fail "$NAME did not finish within ${BOUND}s"
    sed 's/^/  | /' "$TMP/$NAME.err" >&2
  fi
}

# expect NAME REGEX: stderr of run NAME matches.
expect() {
  grep -Eq -- "$2" "$TMP/$1.err" || {
    fail "$1: no line matching '$2' on stderr"
    sed 's/^/  | /' "$TMP/$1.err" >&2
  }
}

# check NAME PYTHON-EXPR...: each expression is true of the report r.
check() {
  local NAME="$1"
  shift
  python3 - "$TMP/$NAME.json" "$@" <<'EOF' || fail "$NAME: report check failed"
import json, sys
r = json.load(open(sys.argv[1]))
ok = True
for e in sys.argv[2:]:
    if not eval(e):
        print("  report check false: " + e, file=sys.stderr)
        ok = False
sys.exit(0 if ok else 1)
EOF
}

# The reporting rank said once, in one line, that the pre-sync failed and
# what fell back; REGEX is the reason.
one_fallback() {
  local NAME="$1" REGEX="$2" N
  expect "$NAME" "warning: pre-sync of '@[a-z_]+' failed: $REGEX[^;]*; [0-9]+ nodes? could not be measured and fell back: "
  N="$(grep -c 'warning: pre-sync of' "$TMP/$NAME.err" || true)"
  [[ "$N" == 1 ]] || fail "$NAME: $N fallback lines, expected one"
}

echo "== unit tests: MpiCommunicator"
for NP in 2 4; do
  for FILTER in '-*Breaks*' '*DepartureBreaks*' '*TimeoutBreaks*'; do
    RC=0
    timeout -k 5 60 "${MPIRUN[@]}" -np "$NP" "$UNIT" --gtest_filter="$FILTER" \
      >"$TMP/unit.log" 2>&1 || RC=$?
    if [[ $RC -ne 0 ]] || grep -q '^\[rank [0-9]*\].*failure' "$TMP/unit.log"; then
      fail "unit tests np $NP '$FILTER' (exit $RC)"
      sed 's/^/  | /' "$TMP/unit.log" >&2
    else
      echo "mpi: unit np $NP '$FILTER': $(grep -o 'PASSED.*' "$TMP/unit.log" | head -n 1)"
    fi
  done
done

COMMON=(--pipeline=default --quiet --no-cache)
EXAMPLE=examples/tp_mlp.mir
GRAPH4="$TMP/tp4.mir"
python3 bench/gen_graph.py --layers 2 --world 4 >"$GRAPH4"

echo "== healthy runs: the same IR as thread ranks, every rank's decisions equal"
"$OPT" "${COMMON[@]}" "$EXAMPLE" >"$TMP/threads2.out"
run np2 60 2 "${COMMON[@]}" "$EXAMPLE" --report="$TMP/np2.json"
[[ $RC -eq 0 ]] || fail "np2 exited $RC"
cmp -s "$TMP/np2.out" "$TMP/threads2.out" || fail "np2: IR differs from thread ranks"
check np2 "r['world_size'] == 2" "r['sync']['ok']" "len(r['ranks']) == 2" \
  "r['sync']['skew_ms'] is not None" "r['sync']['cost_ms'] is not None" \
  "all(k['decisions'] == r['ranks'][0]['decisions'] for k in r['ranks'])" \
  "len(r['ranks'][0]['decisions']) == 4"
# The same run destroying its sessions before MPI_Finalize (by default the
# process leaves them to the OS): the same IR, a clean exit.
run np2free 60 2 "${COMMON[@]}" "$EXAMPLE" --free-on-exit
[[ $RC -eq 0 ]] || fail "np2free exited $RC"
cmp -s "$TMP/np2free.out" "$TMP/threads2.out" || fail "np2free: IR differs from thread ranks"

"$OPT" "${COMMON[@]}" "$GRAPH4" >"$TMP/threads4.out"
run np4 60 4 "${COMMON[@]}" "$GRAPH4" --report="$TMP/np4.json"
[[ $RC -eq 0 ]] || fail "np4 exited $RC"
cmp -s "$TMP/np4.out" "$TMP/threads4.out" || fail "np4: IR differs from thread ranks"
check np4 "r['world_size'] == 4" "r['sync']['ok']" "len(r['ranks']) == 4" \
  "all(k['decisions'] == r['ranks'][0]['decisions'] for k in r['ranks'])"

echo "== --split-tuning=nodes: whole nodes per rank, the IR of every rank timing all"
NODES=test/lit/Autotune/Inputs/split-nodes.mir
"$OPT" "${COMMON[@]}" --prune-top-k=0 --ranks=2 --split-tuning=off "$NODES" >"$TMP/nodes-off.out"
run nodes2 60 2 "${COMMON[@]}" --prune-top-k=0 --split-tuning=nodes "$NODES" --report="$TMP/nodes2.json"
[[ $RC -eq 0 ]] || fail "nodes2 exited $RC"
cmp -s "$TMP/nodes2.out" "$TMP/nodes-off.out" || fail "nodes2: IR differs from --split-tuning=off"
check nodes2 "all(len({i for c in n['choices'] for i, x in enumerate(c['rank_ms']) if x is not None}) == 1 for n in r['nodes'] if n['op'] == 'matmul')" \
  "all(k['decisions'] == r['ranks'][0]['decisions'] for k in r['ranks'])"

echo "== process groups smaller than the world: only members time them"
# A wide pre-sync window: 8 processes on two cores must not fall back.
SUBOPTS=("${COMMON[@]}" --pre-sync-timeout-ms=10000)
SUB=test/lit/Autotune/subgroups.mir
"$OPT" "${SUBOPTS[@]}" "$SUB" >"$TMP/threadssub.out"
run sub4 60 4 "${SUBOPTS[@]}" "$SUB" --report="$TMP/sub4.json"
[[ $RC -eq 0 ]] || fail "sub4 exited $RC"
cmp -s "$TMP/sub4.out" "$TMP/threadssub.out" || fail "sub4: IR differs from thread ranks"
check sub4 "len(r['ranks']) == 4" \
  "all(k['decisions'] == r['ranks'][0]['decisions'] for k in r['ranks'])" \
  "[n['timed_by'] for n in r['nodes'] if n['name'] == '%r'] == [[0, 1]]" \
  "all((c['rank_ms'][i] is not None) == (i < 2) for n in r['nodes'] if n['name'] == '%r' for c in n['choices'] for i in range(4))"
TPDP=test/lit/Autotune/Inputs/tp-dp.mir
"$OPT" "${SUBOPTS[@]}" --size-hints-bytes=65536 "$TPDP" >"$TMP/threadstpdp.out"
run tpdp8 90 8 "${SUBOPTS[@]}" --size-hints-bytes=65536 "$TPDP" --report="$TMP/tpdp8.json"
[[ $RC -eq 0 ]] || fail "tpdp8 exited $RC"
cmp -s "$TMP/tpdp8.out" "$TMP/threadstpdp.out" || fail "tpdp8: IR differs from thread ranks"
check tpdp8 "len(r['ranks']) == 8" \
  "{n['name']: n['timed_by'] for n in r['nodes'] if n['group']} == {'%r0': [0, 1, 2, 3], '%r1': [4, 5, 6, 7], '%g': list(range(8))}"

# The autotune cache: rank 0 replays and broadcasts; the IR is the same.
for PASS in write replay; do
  run "cache$PASS" 60 2 --pipeline=default --quiet --cache-dir="$TMP/cache" "$EXAMPLE"
  [[ $RC -eq 0 ]] || fail "cache$PASS exited $RC"
  cmp -s "$TMP/cache$PASS.out" "$TMP/threads2.out" || fail "cache$PASS: IR differs from thread ranks"
done

run v1np2 60 2 "${COMMON[@]}" --collective-mode=immediate "$EXAMPLE" --report="$TMP/v1np2.json"
[[ $RC -eq 0 ]] || fail "v1np2 exited $RC"
check v1np2 "r['mode'] == 'immediate'" "r['sync']['count'] == 3" "r['sync']['ok']" \
  "all(k['decisions'] == r['ranks'][0]['decisions'] for k in r['ranks'])"

run ranksmismatch 60 2 "${COMMON[@]}" --ranks=3 "$EXAMPLE"
[[ $RC -ne 0 ]] || fail "--ranks=3 under -np 2 should fail"
expect ranksmismatch "error: --ranks=3 does not match the 2 MPI processes"

echo "== ranks that differ: one clear error, every rank stops"
# Each process reads its own file (or flags) through a small shell wrapper.
sed 's/reduce = "sum"/reduce = "max"/' "$EXAMPLE" >"$TMP/max.mir"
cp "$EXAMPLE" "$TMP/in0.mir"
cp "$TMP/max.mir" "$TMP/in1.mir"
printf 'graph @broken(\n' >"$TMP/bad1.mir"
export IN_DIR="$TMP"
PERRANK=(sh -c 'exec "$0" "$@" "$IN_DIR/in${OMPI_COMM_WORLD_RANK:-$PMI_RANK}.mir"' "$OPT")
RC=0
timeout -k 5 30 "${MPIRUN[@]}" -np 2 "${PERRANK[@]}" "${COMMON[@]}" \
  >"$TMP/attrs.out" 2>"$TMP/attrs.err" || RC=$?
[[ $RC -ne 0 ]] || fail "attrs: ranks with different reduce attributes should fail"
expect attrs "error: graph '@tp_mlp': ranks 0 and 1 have different collective nodes: rank 0 has '%[a-z]+ = .*reduce = \"sum\".*', rank 1 has '.*reduce = \"max\""
grep -q NBC_Progress "$TMP/attrs.err" && fail "attrs: Open MPI errors leaked"
cp "$TMP/bad1.mir" "$TMP/in1.mir"
RC=0
timeout -k 5 30 "${MPIRUN[@]}" -np 2 "${PERRANK[@]}" "${COMMON[@]}" \
  >"$TMP/parse.out" 2>"$TMP/parse.err" || RC=$?
[[ $RC -ne 0 ]] || fail "parse: a rank that cannot parse its input should fail the job"
expect parse "error: rank 0: rank 1 could not read its input"
expect parse "error: rank 1: rank 1 could not read its input"
RC=0
timeout -k 5 30 "${MPIRUN[@]}" -np 2 sh -c \
  'if [ "${OMPI_COMM_WORLD_RANK:-$PMI_RANK}" = 1 ]; then set -- "$@" --fusion-heuristic=never; fi; exec "$@"' \
  sh "$OPT" "${COMMON[@]}" "$EXAMPLE" >"$TMP/flags.out" 2>"$TMP/flags.err" || RC=$?
[[ $RC -ne 0 ]] || fail "flags: ranks with different --fusion-heuristic should fail"
expect flags "error: ranks 0 and 1 run with different autotuning flags: rank 0 has '--fusion-heuristic=benchmark', rank 1 has '--fusion-heuristic=never'"
# Every flag that changes a measurement or a decision is compared; a
# mismatch names the flag and both values, and every rank exits 1.
for PAIR in "--seed=1|--seed=0|--seed=1" "--sim-noise=0.5|--sim-noise=0|--sim-noise=0.5" \
  "--bench-runs=3|--bench-runs=10|--bench-runs=3" \
  '--device=h100|--device=h200\([0-9A-F]+\)|--device=h100\([0-9A-F]+\)'; do
  IFS='|' read -r FLAG A B <<<"$PAIR"
  NAME="flag${FLAG%%=*}"
  RC=0
  timeout -k 5 30 "${MPIRUN[@]}" -np 1 "$OPT" "${COMMON[@]}" "$EXAMPLE" : \
    -np 1 "$OPT" "${COMMON[@]}" "$EXAMPLE" "$FLAG" >"$TMP/$NAME.out" 2>"$TMP/$NAME.err" || RC=$?
  [[ $RC -eq 1 ]] || fail "$NAME: ranks with different $FLAG should exit 1, not $RC"
  expect "$NAME" "error: ranks 0 and 1 run with different autotuning flags: rank 0 has '$A', rank 1 has '$B'"
done
# Group membership: the collective names its group, the members differ.
sed 's/group @tp = \[0, 1\]/group @tp = [1, 0]/' "$EXAMPLE" >"$TMP/groups.mir"
RC=0
timeout -k 5 30 "${MPIRUN[@]}" -np 1 "$OPT" "${COMMON[@]}" "$EXAMPLE" : \
  -np 1 "$OPT" "${COMMON[@]}" "$TMP/groups.mir" >"$TMP/groups.out" 2>"$TMP/groups.err" || RC=$?
[[ $RC -eq 1 ]] || fail "groups: ranks with different group members should exit 1, not $RC"
expect groups "error: ranks 0 and 1 have different process groups: rank 0 has '@tp = \[0, 1\]', rank 1 has '@tp = \[1, 0\]'"
# World size: compared first, with "did you read your input?", so it fails
# at once (not after the pre-sync's window) and names both sizes.
sed 's/world_size = 2/world_size = 4/' "$EXAMPLE" >"$TMP/ws4.mir"
RC=0 START=$SECONDS
timeout -k 5 30 "${MPIRUN[@]}" -np 1 "$OPT" "${COMMON[@]}" "$EXAMPLE" : \
  -np 1 "$OPT" "${COMMON[@]}" "$TMP/ws4.mir" >"$TMP/ws.out" 2>"$TMP/ws.err" || RC=$?
[[ $RC -eq 1 ]] || fail "ws: ranks with different world sizes should exit 1, not $RC"
expect ws "error: rank 0: ranks 0 and 1 have different world sizes: rank 0 has '@tp_mlp' with world_size 2, rank 1 has '@tp_mlp' with world_size 4; every rank stops"
expect ws "error: rank 1: ranks 0 and 1 have different world sizes"
# Well inside the 5 s arrival deadline: nobody waited for the pre-sync.
[[ $((SECONDS - START)) -lt 5 ]] || fail "ws: took $((SECONDS - START)) s"

echo "== faults: bounded, every survivor falls back the same way"
# Late within the 5 s deadline: no fallback, the skew measured.
run ontime 20 2 "${COMMON[@]}" --inject=late:rank=1:ms=200 "$EXAMPLE" --report="$TMP/ontime.json"
[[ $RC -eq 0 ]] || fail "ontime exited $RC"
grep -q warning "$TMP/ontime.err" && fail "ontime: unexpected warning"
check ontime "r['sync']['ok']" "r['sync']['skew_ms'] >= 100" "not any(n['fallback'] for n in r['nodes'])"
# Late past a 300 ms deadline: everyone meets again at the all-gather, names
# rank 1 (the late one, not the one on time) and falls back.
run late 20 2 "${COMMON[@]}" --pre-sync-timeout-ms=300 --inject=late:rank=1:ms=800 "$EXAMPLE" --report="$TMP/late.json"
[[ $RC -eq 0 ]] || fail "late exited $RC"
one_fallback late "rank 1 arrived [0-9]+ ms after rank 0, past the 300 ms arrival deadline"
check late "not r['sync']['ok']" "r['sync']['late_ranks'] == [1]" "all(n['fallback'] for n in r['nodes'])" \
  "len(r['ranks']) == 2" "r['ranks'][0]['decisions'] == r['ranks'][1]['decisions']"

# Hang: the survivors time out after the window + 1 s and fall back; the
# hung rank gives up 2 s later, and the job ends with its status, 3.
run hang 20 2 "${COMMON[@]}" --inject=hang:rank=1 --pre-sync-timeout-ms=1000 --agreement-timeout-ms=1000 "$EXAMPLE" \
  --report="$TMP/hang.json"
[[ $RC -eq 3 ]] || fail "hang exited $RC, expected 3 (the hung rank's status)"
one_fallback hang "rank 1 did not reach the pre-sync within 2000 ms"
expect hang "rank 1 hangs \(injected fault\)"
check hang "not r['sync']['ok']" "r['sync']['ms'] < 5000" "r['sync']['missing_ranks'] == [1]" \
  "[n['chosen'] for n in r['nodes'] if n['op'] == 'all_reduce'] == ['nccl', 'nccl']"

# Exit: the peers hear at once that rank 1 left and fall back.
run exit 20 2 "${COMMON[@]}" --inject=exit:rank=1 "$EXAMPLE" --report="$TMP/exit.json"
[[ $RC -eq 0 ]] || fail "exit exited $RC"
one_fallback exit "rank 1 exited before the pre-sync"
expect exit "warning: rank 1 exited \(injected fault\)"
check exit "not r['sync']['ok']" "all(n['fallback'] for n in r['nodes'])"

# Rank 0 exits: rank 1 reports.
run exit0 20 2 "${COMMON[@]}" --inject=exit:rank=0 "$EXAMPLE" --report="$TMP/exit0.json"
[[ $RC -eq 0 ]] || fail "exit0 exited $RC"
one_fallback exit0 "rank 0 exited before the pre-sync"
grep -q '^graph @tp_mlp' "$TMP/exit0.out" || fail "exit0: rank 1 did not print the IR"
check exit0 "[k['rank'] for k in r['ranks']] == [1]"

# Four ranks: one hangs, the three others agree; then one exits.
run hang4 30 4 "${COMMON[@]}" --inject=hang:rank=1 --pre-sync-timeout-ms=1000 --agreement-timeout-ms=1000 "$GRAPH4" \
  --report="$TMP/hang4.json"
[[ $RC -eq 3 ]] || fail "hang4 exited $RC, expected 3"
one_fallback hang4 "rank 1 did not reach the pre-sync within 2000 ms"
check hang4 "not r['sync']['ok']" "all(n['fallback'] for n in r['nodes'])"
run exit4 30 4 "${COMMON[@]}" --inject=exit:rank=2 "$GRAPH4" --report="$TMP/exit4.json"
[[ $RC -eq 0 ]] || fail "exit4 exited $RC"
one_fallback exit4 "rank 2 exited before the pre-sync"
run late4 30 4 "${COMMON[@]}" --pre-sync-timeout-ms=300 --inject=late:rank=3:ms=800 "$GRAPH4" --report="$TMP/late4.json"
[[ $RC -eq 0 ]] || fail "late4 exited $RC"
one_fallback late4 "rank 3 arrived [0-9]+ ms after rank [0-2], past the 300 ms arrival deadline"
check late4 "len(r['ranks']) == 4" "r['sync']['late_ranks'] == [3]" \
  "all(k['decisions'] == r['ranks'][0]['decisions'] for k in r['ranks'])"

if [[ $FAILS -ne 0 ]]; then
  echo "mpi: $FAILS check(s) failed" >&2
  exit 1
fi
echo "mpi: OK"
