#!/usr/bin/env bash
# Builds and runs the mtsched-fuzz-parser libFuzzer target (fuzz/).
#
#   bash scripts/fuzz.sh [SECONDS]     # default: $MTSCHED_FUZZ_SECONDS or 60
#
# Seeds are every *.mir under examples/ and test/lit/ (each `// -----` case
# also on its own), plus decided IR: what `mtsched-opt --pipeline=default`
# prints for the examples and the benchmark graphs (timings, fused timings,
# dispatch tables, sync states, fallbacks), made with the Release build's
# mtsched-opt (MTSCHED_OPT overrides it; it is built if missing). All are
# copied or made afresh into BUILD_DIR/seeds on every run; inputs
# the fuzzer finds go to BUILD_DIR/corpus, which is kept between local runs
# (CI starts from a fresh clone, so from the seeds alone). Nothing generated
# is committed. Any crash, sanitizer report, leak, timeout (-timeout=5), out-
# of-memory (-rss_limit_mb=2048) or round-trip mismatch makes this exit
# non-zero and leaves the input in BUILD_DIR/artifacts/; reproduce with
#   build-fuzz/fuzz/mtsched-fuzz-parser build-fuzz/artifacts/crash-...
#
# Environment: MTSCHED_FUZZ_BUILD_DIR (default build-fuzz), MTSCHED_JOBS,
# MTSCHED_FUZZ_LOG (libFuzzer's log, default BUILD_DIR/fuzz.log),
# MTSCHED_FUZZ_TIMEOUT (seconds one input may take, default 5; raise it for
# a long run under `nice` on a loaded machine, where a starved input is not
# a hang).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_TO_RUN="${1:-${MTSCHED_FUZZ_SECONDS:-60}}"
if ! [[ "$SECONDS_TO_RUN" =~ ^[0-9]+$ ]] || [[ "$SECONDS_TO_RUN" -lt 1 ]]; then
  echo "fuzz: error: run time must be a positive number of seconds, got '$SECONDS_TO_RUN'" >&2
  exit 2
fi
BUILD_DIR="${MTSCHED_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"

bash "$ROOT/scripts/build.sh" --fuzzer "$BUILD_DIR"
FUZZER="$BUILD_DIR/fuzz/mtsched-fuzz-parser"

SEEDS="$BUILD_DIR/seeds"
CORPUS="$BUILD_DIR/corpus"
ARTIFACTS="$BUILD_DIR/artifacts"
LOG="${MTSCHED_FUZZ_LOG:-$BUILD_DIR/fuzz.log}"
INPUT_TIMEOUT="${MTSCHED_FUZZ_TIMEOUT:-5}"
if ! [[ "$INPUT_TIMEOUT" =~ ^[0-9]+$ ]] || [[ "$INPUT_TIMEOUT" -lt 1 ]]; then
  echo "fuzz: error: MTSCHED_FUZZ_TIMEOUT must be a positive number of seconds, got '$INPUT_TIMEOUT'" >&2
  exit 2
fi
rm -rf "$SEEDS"
mkdir -p "$SEEDS" "$CORPUS" "$ARTIFACTS"

# One seed per file and one per `// -----` case: a split file as a whole
# stops at its first error case, so its later cases would otherwise never
# reach the fuzzer.
N=0
while IFS= read -r -d '' F; do
  N=$((N + 1))
  cp "$F" "$SEEDS/$N.mir"
  awk -v prefix="$SEEDS/$N." '
    BEGIN { part = 0 }
    /^\/\/ -----/ { part++; next }
    { print > (prefix part ".mir") }' "$F"
done < <(find "$ROOT/examples" "$ROOT/test/lit" -name '*.mir' -type f -print0 | sort -z)
# Decided IR: the clauses autotuning adds are mutated too. Each graph is
# decided several ways, so every clause kind appears in some seed.
OPT="${MTSCHED_OPT:-$ROOT/build/tools/mtsched-opt/mtsched-opt}"
if [[ ! -x "$OPT" ]]; then
  bash "$ROOT/scripts/build.sh" --target=mtsched-opt "$ROOT/build"
fi
DECIDED=0
VARIANTS=(
  ""
  "--size-hints-m=16,4096 --size-hints-bytes=4096,1048576"
  "--collective-mode=immediate"
  "--fusion-heuristic=cost-model --prune-top-k=2"
  "--inject=mismatch:rank=1 --pre-sync-timeout-ms=50"
)
while IFS= read -r -d '' F; do
  for V in "${VARIANTS[@]}"; do
    DECIDED=$((DECIDED + 1))
    # shellcheck disable=SC2086  # V is a list of flags
    MTSCHED_CACHE=off timeout 60 "$OPT" --pipeline=default --quiet --no-cache \
      $V "$F" -o "$SEEDS/decided-$DECIDED.mir" >/dev/null 2>&1 ||
      rm -f "$SEEDS/decided-$DECIDED.mir"
  done
done < <(find "$ROOT/examples" "$ROOT/bench" "$ROOT/test/lit/Autotune/Inputs" \
  -name '*.mir' -type f -print0 | sort -z)
echo "fuzz: $(find "$SEEDS" -type f | wc -l) seeds from $N .mir files and $(find "$SEEDS" -name 'decided-*' | wc -l) decided graphs; corpus has $(find "$CORPUS" -type f | wc -l) inputs"

# Fail on the first UBSan report with a stack; report leaks. ASan keeps every
# distinct allocation stack, and the recursive parser makes millions of them:
# short stacks and a smaller quarantine keep memory flat over long runs.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:malloc_context_size=10:quarantine_size_mb=64}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

echo "fuzz: running $FUZZER for ${SECONDS_TO_RUN}s (log: $LOG)"
STATUS=0
# The outer timeout only guards against the fuzzer itself wedging; libFuzzer
# stops on its own at -max_total_time.
timeout --kill-after=30 $((SECONDS_TO_RUN + 300)) \
  "$FUZZER" \
  -max_total_time="$SECONDS_TO_RUN" \
  -timeout="$INPUT_TIMEOUT" \
  -rss_limit_mb=2048 \
  -dict="$ROOT/fuzz/mir.dict" \
  -artifact_prefix="$ARTIFACTS/" \
  -print_final_stats=1 \
  "$CORPUS" "$SEEDS" >"$LOG" 2>&1 || STATUS=$?

if [[ $STATUS -ne 0 ]]; then
  tail -n 80 "$LOG"
  echo
  echo "fuzz: FAILED (exit $STATUS); inputs in $ARTIFACTS:" >&2
  ls -1 "$ARTIFACTS" >&2 || true
  exit 1
fi
grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added)' "$LOG" || true
grep -E '^#[0-9]+.*(DONE|INITED)' "$LOG" | tail -n 2 || true
echo "fuzz: OK, no crash, leak, timeout or round-trip mismatch in ${SECONDS_TO_RUN}s; corpus now $(find "$CORPUS" -type f | wc -l) inputs"
