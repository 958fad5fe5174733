#!/usr/bin/env bash
# Sets everything up, builds, and runs every test stage; exits non-zero if any
# stage fails. This is what CI runs (.ci/run).
#
#   bash scripts/test.sh                    # every stage
#   bash scripts/test.sh --only=release,asan
#   bash scripts/test.sh --skip=fuzz
#   bash scripts/test.sh --list             # list the stages
#
# Stages, in order:
#   setup     scripts/setup.sh (installs what is missing)
#   release   Release build (build/), ctest: unit tests + lit tests
#   deps      the Release mtsched-opt links no libLLVM*.so
#   example   scripts/run-example.sh (the README's first command)
#   import    the PyTorch importer's tests (lit: test/lit/Import, the .npy
#             tests) with Debian's PyTorch 1.13; fails if torch is missing
#   asan      ASan+UBSan build (build-asan/), ctest: unit + lit
#   tsan      ThreadSanitizer build (build-tsan/): see MTSCHED_TSAN_SCOPE
#   fuzz      scripts/fuzz.sh for MTSCHED_FUZZ_SECONDS (default 60)
#   extra:*   every scripts/test-extra.d/*.sh, in name order (MPI, CUDA, ...)
#
# Environment:
#   MTSCHED_JOBS             ninja and ctest parallelism (default 2)
#   MTSCHED_FUZZ_SECONDS     fuzzing time (default 60)
#   MTSCHED_TSAN_SCOPE       all (default): the whole unit + lit suite under
#                            TSan; threads: only ctest tests labelled
#                            `threads` (ctest -L threads) and lit tests whose
#                            path matches MTSCHED_TSAN_LIT_FILTER
#   MTSCHED_TSAN_LIT_FILTER  lit --filter regex for `threads` (default
#                            'threads|ranks')
#
# An extra stage script gets MTSCHED_ROOT, MTSCHED_BUILD_DIR (the Release
# build) and MTSCHED_JOBS in its environment, runs from the repository root,
# and passes with exit 0, fails with any other status except 77, which means
# "skipped" (e.g. no GPU) and counts as neither.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$ROOT/scripts/test.sh"
export MTSCHED_JOBS="${MTSCHED_JOBS:-2}"
export MTSCHED_FUZZ_SECONDS="${MTSCHED_FUZZ_SECONDS:-60}"
export MTSCHED_TSAN_SCOPE="${MTSCHED_TSAN_SCOPE:-all}"
export MTSCHED_TSAN_LIT_FILTER="${MTSCHED_TSAN_LIT_FILTER:-threads|ranks}"
SKIP_CODE=77

# ---------------------------------------------------------------------------
# Stages. Each runs in its own bash process (see the --run-stage branch
# below) so that `set -e` holds inside it and one failing stage does not stop
# the others.
# ---------------------------------------------------------------------------

run_ctest() {
  local DIR="$1"
  shift
  ctest --test-dir "$DIR" --output-on-failure --timeout 900 \
    -j"$MTSCHED_JOBS" "$@"
}

stage_setup() {
  bash "$ROOT/scripts/setup.sh"
}

stage_release() {
  bash "$ROOT/scripts/build.sh" "$ROOT/build"
  run_ctest "$ROOT/build"
}

stage_deps() {
  local BIN="$ROOT/build/tools/mtsched-opt/mtsched-opt"
  if [[ ! -x "$BIN" ]]; then
    bash "$ROOT/scripts/build.sh" --target=mtsched-opt "$ROOT/build"
  fi
  ldd "$BIN"
  # The driver must run on machines without LLVM installed.
  if ldd "$BIN" | grep -i 'libLLVM'; then
    echo "deps: error: $BIN links a shared LLVM library" >&2
    return 1
  fi
  echo "deps: OK, no libLLVM*.so"
}

stage_example() {
  MTSCHED_SKIP_SETUP=1 bash "$ROOT/scripts/run-example.sh"
}

stage_import() {
  source "$ROOT/scripts/torch-python.sh"
  local PY
  PY="$(find_torch_python)" || {
    echo "import: error: no Python with torch and numpy (scripts/setup.sh installs python3-torch and python3-numpy)" >&2
    return 1
  }
  echo "import: $PY, PyTorch $("$PY" -c 'import torch; print(torch.__version__)')"
  if [[ ! -x "$ROOT/build/tools/mtsched-opt/mtsched-opt" ]]; then
    bash "$ROOT/scripts/build.sh" --target=mtsched-opt "$ROOT/build"
  fi
  local LIT LOG
  LIT="$(sed -n 's/^MTSCHED_LIT:FILEPATH=//p' "$ROOT/build/CMakeCache.txt")"
  LOG="$(mktemp)"
  python3 "$LIT" -sv --filter 'Import/|interpret-npy' "$ROOT/build/test/lit" | tee "$LOG"
  # A test lit reports unsupported did not run: here that is a failure.
  if grep -q 'Unsupported' "$LOG"; then
    echo "import: error: some importer tests were unsupported (no torch for lit?)" >&2
    rm -f "$LOG"
    return 1
  fi
  rm -f "$LOG"
}

stage_asan() {
  bash "$ROOT/scripts/build.sh" --sanitizer=asan "$ROOT/build-asan"
  ASAN_OPTIONS=detect_leaks=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_ctest "$ROOT/build-asan"
}

stage_tsan() {
  local DIR="$ROOT/build-tsan"
  bash "$ROOT/scripts/build.sh" --sanitizer=tsan "$DIR"
  # scripts/tsan.supp says why NVRTC's own calls are not checked.
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/scripts/tsan.supp"
  case "$MTSCHED_TSAN_SCOPE" in
  all)
    run_ctest "$DIR"
    ;;
  threads)
    # Unit tests opt in with the ctest label `threads`
    # (set_tests_properties(... PROPERTIES LABELS threads)); lit tests by
    # their path (lit --filter). No matching test is not an error.
    run_ctest "$DIR" -L threads --no-tests=ignore
    local LIT
    LIT="$(sed -n 's/^MTSCHED_LIT:FILEPATH=//p' "$DIR/CMakeCache.txt")"
    python3 "$LIT" -sv --allow-empty-runs --filter "$MTSCHED_TSAN_LIT_FILTER" \
      "$DIR/test/lit"
    ;;
  *)
    echo "tsan: error: MTSCHED_TSAN_SCOPE must be 'all' or 'threads'" >&2
    return 2
    ;;
  esac
}

stage_fuzz() {
  bash "$ROOT/scripts/fuzz.sh" "$MTSCHED_FUZZ_SECONDS"
}

stage_extra() {
  local SCRIPT="$ROOT/scripts/test-extra.d/$1"
  MTSCHED_ROOT="$ROOT" MTSCHED_BUILD_DIR="$ROOT/build" bash "$SCRIPT"
}

if [[ "${1:-}" == --run-stage ]]; then
  cd "$ROOT"
  NAME="$2"
  if [[ "$NAME" == extra:* ]]; then
    stage_extra "${NAME#extra:}"
  else
    "stage_$NAME"
  fi
  exit 0
fi

# ---------------------------------------------------------------------------
# Driver.
# ---------------------------------------------------------------------------

STAGES=(setup release deps example import asan tsan fuzz)
if [[ -d "$ROOT/scripts/test-extra.d" ]]; then
  while IFS= read -r F; do
    STAGES+=("extra:$(basename "$F")")
  done < <(find "$ROOT/scripts/test-extra.d" -maxdepth 1 -name '*.sh' -type f | LC_ALL=C sort)
fi

describe() {
  case "$1" in
  setup) echo "install missing packages" ;;
  release) echo "Release build, unit + lit tests" ;;
  deps) echo "mtsched-opt links no libLLVM*.so" ;;
  example) echo "scripts/run-example.sh" ;;
  import) echo "PyTorch importer tests (torch 1.13)" ;;
  asan) echo "ASan+UBSan build, unit + lit tests" ;;
  tsan)
    if [[ "$MTSCHED_TSAN_SCOPE" == threads ]]; then
      echo "TSan build, ctest -L threads + lit --filter '$MTSCHED_TSAN_LIT_FILTER'"
    else
      echo "TSan build, unit + lit tests"
    fi
    ;;
  fuzz) echo "parser fuzzer, ${MTSCHED_FUZZ_SECONDS}s" ;;
  extra:*) echo "scripts/test-extra.d/${1#extra:}" ;;
  esac
}

ONLY=""
SKIP=""
for ARG in "$@"; do
  case "$ARG" in
  --only=*) ONLY=",${ARG#--only=}," ;;
  --skip=*) SKIP=",${ARG#--skip=}," ;;
  --list)
    for S in "${STAGES[@]}"; do printf '%-22s %s\n' "$S" "$(describe "$S")"; done
    exit 0
    ;;
  -h | --help)
    sed -n '2,35p' "$SELF" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "test: error: unknown argument '$ARG' (see --help)" >&2
    exit 2
    ;;
  esac
done

selected() {
  local S="$1"
  if [[ -n "$ONLY" && "$ONLY" != *",$S,"* ]]; then
    # --only=extra selects every extra stage.
    [[ "$S" == extra:* && "$ONLY" == *",extra,"* ]] || return 1
  fi
  [[ "$SKIP" != *",$S,"* ]] || return 1
  [[ "$S" != extra:* || "$SKIP" != *",extra,"* ]]
}

fmt_time() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

RESULTS=()
PASSED=0
FAILED=0
START_ALL=$SECONDS
for S in "${STAGES[@]}"; do
  selected "$S" || continue
  echo
  echo "==== [$S] $(describe "$S") ===="
  START=$SECONDS
  RC=0
  bash "$SELF" --run-stage "$S" </dev/null || RC=$?
  T=$((SECONDS - START))
  if [[ $RC -eq 0 ]]; then
    STATUS=PASS
    PASSED=$((PASSED + 1))
  elif [[ "$S" == extra:* && $RC -eq $SKIP_CODE ]]; then
    STATUS=SKIP
  else
    STATUS=FAIL
    FAILED=$((FAILED + 1))
  fi
  echo "==== [$S] $STATUS in $(fmt_time $T) ===="
  RESULTS+=("$(printf '%-4s  %-22s %8s  %s' "$STATUS" "$S" "$(fmt_time $T)" "$(describe "$S")")")
  if [[ "$S" == setup && $STATUS == FAIL ]]; then
    echo "test: setup failed; not running the other stages" >&2
    break
  fi
done

echo
echo "==== summary ($(fmt_time $((SECONDS - START_ALL))) in all) ===="
for R in "${RESULTS[@]}"; do echo "$R"; done
echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
