#!/usr/bin/env bash
# Sets everything up, builds, and runs every test; exits non-zero if any stage
# fails. CI (.ci/run) runs it, then its deep tier.
#
#   bash scripts/test.sh                    # every test, once (the check tier)
#   bash scripts/test.sh --deep             # and again under the sanitizers,
#                                           # the fuzzer and the g++ build (CI)
#   bash scripts/test.sh --only=release,asan
#   bash scripts/test.sh --skip=fuzz
#   bash scripts/test.sh --list             # list the stages and their tiers
#
# Two tiers. The check tier (setup docs release deps example import chaos
# package extra:*) builds once and runs every unit, lit, importer, chaos,
# package and MPI test: the README's command, under 15 minutes on two idle
# cores. The deep tier (asan tsan fuzz build-matrix) rebuilds the project
# three more times to run the same tests under ASan+UBSan and TSan, fuzzes
# the parser and builds with g++: another ~20 minutes, which .ci/run adds
# with --deep. --only names stages of either tier.
#
# Stages, in order:
#   setup     scripts/setup.sh (installs what is missing)
#   docs      scripts/check-docs.py: no dead link, missing file, missing page
#             or unknown mtsched:: target in README.md and docs/*.md;
#             scripts/check-layers.py: no include up the library layers
#             scripts/check-function-length.py: no new function in lib/
#             over 150 lines
#   release   Release build (build/, clang, -Werror), ctest: unit tests and
#             one lit entry per test/lit directory (lit-IR, lit-Cuda, ...)
#             but lit-Import, which the import stage runs (all of them with
#             MTSCHED_RELEASE_ALL=1); reuses what scripts/run-example.sh
#             built in build/
#   deps      the Release mtsched-opt links no libLLVM*.so
#   example   scripts/run-example.sh (the README's first command)
#   import    the PyTorch importer's tests (lit: test/lit/Import, the .npy
#             tests) with Debian's PyTorch 1.13; fails if torch is missing
#   chaos     scripts/chaos.sh: under CPU hogs, identical IR every run and
#             every injected fault bounded, at 2/4/8 thread and MPI ranks
#   asan      ASan+UBSan build (build-asan/), ctest: unit + lit but the
#             NVRTC sweeps (SANITIZER_SKIP)
#   tsan      ThreadSanitizer build (build-tsan/): see MTSCHED_TSAN_SCOPE
#   fuzz      scripts/fuzz.sh for MTSCHED_FUZZ_SECONDS (default 60)
#   build-matrix  plain CMake with g++ and -Werror (build-gcc/: libraries and
#             tools), the clang -Werror tools of build/; each installed into
#             a temporary prefix and used by test/install/consumer
#   package   scripts/package.sh: the .deb's contents and Depends, its
#             mtsched-opt run from a temporary root (dpkg -x) on the example,
#             and test/install/consumer built against it
#   extra:*   every scripts/test-extra.d/*.sh, in name order (MPI, CUDA, ...)
#
# Environment:
#   MTSCHED_JOBS             ninja and ctest parallelism (default 2)
#   MTSCHED_FUZZ_SECONDS     fuzzing time (default 60)
#   MTSCHED_TSAN_SCOPE       all (default): the unit + lit suite under TSan
#                            but the NVRTC sweeps (SANITIZER_SKIP); threads:
#                            only ctest tests labelled `threads` (ctest -L
#                            threads) and lit tests whose path matches
#                            MTSCHED_TSAN_LIT_FILTER
#   MTSCHED_TSAN_LIT_FILTER  lit --filter regex for `threads` (default
#                            'threads|ranks')
#   MTSCHED_CCACHE           1 (default): every build goes through ccache
#                            when it is installed (setup installs it), so the
#                            package stage's Release build and the clang
#                            install reuse the release stage's objects; 0:
#                            no ccache. CCACHE_DIR etc. are ccache's own
#                            (CCACHE_BASEDIR defaults to the checkout).
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

stage_docs() {
  # All run, so that one report shows every problem.
  local RC=0
  python3 "$ROOT/scripts/check-docs.py" || RC=1
  python3 "$ROOT/scripts/check-layers.py" || RC=1
  python3 "$ROOT/scripts/check-function-length.py" || RC=1
  return $RC
}

stage_release() {
  bash "$ROOT/scripts/build.sh" --werror "$ROOT/build"
  # test/lit/Import is the import stage's, which runs it on this build and
  # also fails on a test lit reports unsupported; run once, not twice.
  if [[ -n "${MTSCHED_RELEASE_ALL:-}" ]]; then
    run_ctest "$ROOT/build"
  else
    run_ctest "$ROOT/build" -E '^lit-Import$'
  fi
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
  local -a LIT_CMD=("$LIT")
  [[ "$LIT" == *.py ]] && LIT_CMD=(python3 "$LIT")
  "${LIT_CMD[@]}" -sv --filter 'Import/|interpret-npy' "$ROOT/build/test/lit" | tee "$LOG"
  # A test lit reports unsupported did not run: here that is a failure.
  if grep -q 'Unsupported' "$LOG"; then
    echo "import: error: some importer tests were unsupported (no torch for lit?)" >&2
    rm -f "$LOG"
    return 1
  fi
  rm -f "$LOG"
}

stage_chaos() {
  bash "$ROOT/scripts/chaos.sh" "$ROOT/build"
}

# The code generator's NVRTC sweeps, which the sanitizer stages leave to
# release: each compiles hundreds of generated kernels with NVRTC, a
# library no sanitizer instruments. With them asan's tests took 1191 s and
# tsan's 928, without them 210 and 241 (2026-11-30, two cores). The sanitizers
# still run the code generator (its other unit tests, the lit tests) and
# NVRTC driven from a thread pool (the sweeps of the collective, conv2d and
# SwiGLU kernels stay, and CudaCompiler's tests).
SANITIZER_SKIP='EveryKernelCompilesWithNvrtc\.Shard|HorizontalCodegen\.EveryTileCompilesWithNvrtc|AttentionDecodeVariants\.CompileWithNvrtc|AttentionCodegen\.DecTilesCompileWithNvrtc|PrologueCodegen\.EveryTileCompilesWithNvrtc|PrologueCodegen\.EveryHorizontalTileCompilesWithNvrtc|AttentionCodegen/EveryChoiceCompilesWithNvrtc'

stage_asan() {
  bash "$ROOT/scripts/build.sh" --sanitizer=asan "$ROOT/build-asan"
  ASAN_OPTIONS=detect_leaks=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_ctest "$ROOT/build-asan" -E "$SANITIZER_SKIP"
}

stage_tsan() {
  local DIR="$ROOT/build-tsan"
  bash "$ROOT/scripts/build.sh" --sanitizer=tsan "$DIR"
  # scripts/tsan.supp says why NVRTC's own calls are not checked.
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/scripts/tsan.supp"
  case "$MTSCHED_TSAN_SCOPE" in
  all)
    run_ctest "$DIR" -E "$SANITIZER_SKIP"
    ;;
  threads)
    # Unit tests opt in with the ctest label `threads`
    # (set_tests_properties(... PROPERTIES LABELS threads)); lit tests by
    # their path (lit --filter). No matching test is not an error.
    run_ctest "$DIR" -L threads --no-tests=ignore
    local LIT
    LIT="$(sed -n 's/^MTSCHED_LIT:FILEPATH=//p' "$DIR/CMakeCache.txt")"
    # lit.py is a script for python3; lit and llvm-lit run on their own.
    local -a LIT_CMD=("$LIT")
    [[ "$LIT" == *.py ]] && LIT_CMD=(python3 "$LIT")
    "${LIT_CMD[@]}" -sv --allow-empty-runs --filter "$MTSCHED_TSAN_LIT_FILTER" \
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

# Installs build directory $1 into a fresh prefix and builds and runs the
# out-of-tree project test/install/consumer against it with compiler $2.
install_and_consume() {
  local BUILD="$1" CXX="$2"
  local TMP
  TMP="$(mktemp -d)"
  cmake --install "$BUILD" --prefix "$TMP/prefix" >"$TMP/install.log"
  echo "build-matrix: installed $(find "$TMP/prefix" -type f | wc -l) files from $BUILD"
  cmake -S "$ROOT/test/install/consumer" -B "$TMP/consumer" -G Ninja \
    -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" \
    -DCMAKE_PREFIX_PATH="$TMP/prefix" >"$TMP/consumer.log" 2>&1 || {
    cat "$TMP/consumer.log" >&2
    return 1
  }
  grep -E 'Using (mtsched|LLVM)' "$TMP/consumer.log" || true
  ninja -C "$TMP/consumer"
  "$TMP/consumer/mtsched-consumer" | tee "$TMP/consumer.out"
  grep -q '^graph @g' "$TMP/consumer.out"
  "$TMP/prefix/bin/mtsched-opt" --version
  rm -rf "$TMP"
}

# Plain CMake as a user runs it (no LLVM_DIR, the default search) with g++
# and -Werror, only the libraries and tools: the scripted builds are clang's.
# Then clang's -Werror tools from the release build (already built when the
# release stage ran). Both are installed and used by an outside project.
stage_build-matrix() {
  local GCC_DIR="$ROOT/build-gcc"
  mkdir -p "$GCC_DIR"
  cmake -S "$ROOT" -B "$GCC_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DMTSCHED_WERROR=ON \
    -DMTSCHED_ENABLE_TESTS=OFF -DMTSCHED_ENABLE_BENCH=OFF \
    >"$GCC_DIR/configure.log" 2>&1 || {
    cat "$GCC_DIR/configure.log" >&2
    return 1
  }
  grep -E 'Using LLVM|MPI ranks' "$GCC_DIR/configure.log"
  ninja -C "$GCC_DIR" -j"$MTSCHED_JOBS"
  install_and_consume "$GCC_DIR" g++

  bash "$ROOT/scripts/build.sh" --werror --target=mtsched-opt \
    --target=mtsched-lab --target=mtsched-calibrate --target=mtsched_runtime "$ROOT/build"
  local CLANGXX
  CLANGXX="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$ROOT/build/CMakeCache.txt")"
  install_and_consume "$ROOT/build" "$CLANGXX"
}

# The .deb: built by scripts/package.sh (build-package/), its file list and
# Depends checked, then unpacked into a temporary root (dpkg -x: nothing is
# installed on this machine) whose mtsched-opt runs the README example with
# no LD_LIBRARY_PATH, and, where mpirun is, as two MPI ranks that find the
# package's MPI plugin beside it; test/install/consumer then builds against
# its CMake package.
stage_package() {
  local TMP DEB
  TMP="$(mktemp -d)"
  bash "$ROOT/scripts/package.sh" "$ROOT/build-package" | tee "$TMP/package.log"
  DEB="$(tail -n 1 "$TMP/package.log")"
  dpkg-deb -c "$DEB" | awk '{print $NF}' >"$TMP/contents"
  echo "package: $(wc -l <"$TMP/contents") entries in $(basename "$DEB")"
  local -a WANT=(
    '^\./usr/bin/mtsched-opt$' '^\./usr/bin/mtsched-lab$'
    '^\./usr/bin/mtsched-calibrate$' '^\./usr/bin/mtsched-import$'
    '^\./usr/include/mtsched/IR/Graph\.h$' '^\./usr/include/mtsched/Config/Version\.h$'
    '^\./usr/lib/([^/]+/)?libMtschedDriver\.a$'
    '^\./usr/lib/([^/]+/)?cmake/mtsched/mtschedConfig\.cmake$'
    '^\./usr/lib/([^/]+/)?cmake/mtsched/mtschedTargets\.cmake$'
    '^\./usr/lib/python3/dist-packages/mtsched_torch/__init__\.py$'
    '^\./usr/share/mtsched/examples/tp_mlp\.mir$'
    '^\./usr/share/doc/mtsched/copyright$' '^\./usr/share/doc/mtsched/RANKS\.md$')
  if grep -q '^MTSCHED_ENABLE_MPI:BOOL=ON' "$ROOT/build-package/CMakeCache.txt"; then
    WANT+=('^\./usr/lib/([^/]+/)?mtsched/libmtsched_mpi\.so$')
  fi
  local W BAD=0
  for W in "${WANT[@]}"; do
    grep -Eq "$W" "$TMP/contents" || {
      echo "package: error: nothing in the .deb matches $W" >&2
      BAD=1
    }
  done
  local DEPENDS
  DEPENDS="$(dpkg-deb -f "$DEB" Depends)"
  echo "package: Depends: $DEPENDS"
  if grep -Eiq 'mpi|cuda|nccl|nvrtc|cublas|llvm' <<<"$DEPENDS"; then
    echo "package: error: Depends names MPI, CUDA or LLVM, which must stay optional" >&2
    BAD=1
  fi
  dpkg -x "$DEB" "$TMP/root"
  local OPT="$TMP/root/usr/bin/mtsched-opt"
  if ldd "$OPT" | grep -i mpi; then
    echo "package: error: the packaged mtsched-opt links MPI" >&2
    BAD=1
  fi
  env -u LD_LIBRARY_PATH "$OPT" --version
  env -u LD_LIBRARY_PATH "$OPT" --pipeline=default \
    "$TMP/root/usr/share/mtsched/examples/tp_mlp.mir" >"$TMP/threads.out"
  grep -q 'decided' "$TMP/threads.out" || {
    echo "package: error: the packaged mtsched-opt decided nothing" >&2
    BAD=1
  }
  if command -v mpirun >/dev/null 2>&1; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout -k 5 120 mpirun --oversubscribe -np 2 env -u LD_LIBRARY_PATH "$OPT" \
      --pipeline=default "$TMP/root/usr/share/mtsched/examples/tp_mlp.mir" >"$TMP/mpi.out"
    cmp "$TMP/threads.out" "$TMP/mpi.out" || {
      echo "package: error: the packaged mtsched-opt as 2 MPI ranks decided otherwise" >&2
      BAD=1
    }
    echo "package: 2 MPI ranks with the packaged plugin: same IR as 2 thread ranks"
  fi
  # The packaged CMake package, as another project finds it.
  local CXX
  CXX="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$ROOT/build-package/CMakeCache.txt")"
  cmake -S "$ROOT/test/install/consumer" -B "$TMP/consumer" -G Ninja \
    -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" \
    -DCMAKE_PREFIX_PATH="$TMP/root/usr" >"$TMP/consumer.log" 2>&1 || {
    cat "$TMP/consumer.log" >&2
    return 1
  }
  grep -E 'Using mtsched' "$TMP/consumer.log" || true
  ninja -C "$TMP/consumer" >/dev/null
  "$TMP/consumer/mtsched-consumer" | grep -q '^graph @g' || {
    echo "package: error: test/install/consumer against the package printed no graph" >&2
    BAD=1
  }
  rm -rf "$TMP"
  [[ $BAD -eq 0 ]]
}

stage_extra() {
  local SCRIPT="$ROOT/scripts/test-extra.d/$1"
  MTSCHED_ROOT="$ROOT" MTSCHED_BUILD_DIR="$ROOT/build" bash "$SCRIPT"
}

# Compiler launcher for every CMake configure of a stage (scripts/build.sh,
# scripts/package.sh and the plain cmake of build-matrix all read CMake's
# CMAKE_<LANG>_COMPILER_LAUNCHER environment variables on a first configure).
use_ccache() {
  [[ "${MTSCHED_CCACHE:-1}" != 0 ]] || return 0
  command -v ccache >/dev/null 2>&1 || return 0
  export CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-ccache}"
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
  # Paths relative to the checkout, so that build/ and build-package/ (whose
  # generated include directories differ only by the build directory's name)
  # hash alike.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
}

if [[ "${1:-}" == --run-stage ]]; then
  cd "$ROOT"
  use_ccache
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

STAGES=(setup docs release deps example import chaos asan tsan fuzz build-matrix package)
# The deep tier: run only with --deep or when --only names them.
DEEP_STAGES=",asan,tsan,fuzz,build-matrix,"
if [[ -d "$ROOT/scripts/test-extra.d" ]]; then
  while IFS= read -r F; do
    STAGES+=("extra:$(basename "$F")")
  done < <(find "$ROOT/scripts/test-extra.d" -maxdepth 1 -name '*.sh' -type f | LC_ALL=C sort)
fi

describe() {
  case "$1" in
  setup) echo "install missing packages" ;;
  docs) echo "docs: links, paths, pages, targets; library layers" ;;
  release) echo "Release build (-Werror), unit + lit tests" ;;
  deps) echo "mtsched-opt links no libLLVM*.so" ;;
  example) echo "scripts/run-example.sh" ;;
  import) echo "PyTorch importer tests (torch 1.13)" ;;
  chaos) echo "scripts/chaos.sh: determinism under load and faults" ;;
  asan) echo "ASan+UBSan build, unit + lit tests" ;;
  tsan)
    if [[ "$MTSCHED_TSAN_SCOPE" == threads ]]; then
      echo "TSan build, ctest -L threads + lit --filter '$MTSCHED_TSAN_LIT_FILTER'"
    else
      echo "TSan build, unit + lit tests"
    fi
    ;;
  fuzz) echo "parser fuzzer, ${MTSCHED_FUZZ_SECONDS}s" ;;
  build-matrix) echo "g++ and clang -Werror builds, install, find_package consumer" ;;
  package) echo "the .deb (scripts/package.sh): contents, Depends, runs unpacked" ;;
  extra:*) echo "scripts/test-extra.d/${1#extra:}" ;;
  esac
}

ONLY=""
SKIP=""
DEEP=""
for ARG in "$@"; do
  case "$ARG" in
  --deep) DEEP=1 ;;
  --only=*) ONLY=",${ARG#--only=}," ;;
  --skip=*) SKIP=",${ARG#--skip=}," ;;
  --list)
    for S in "${STAGES[@]}"; do
      T=check
      [[ "$DEEP_STAGES" == *",$S,"* ]] && T=deep
      printf '%-22s %-6s %s\n' "$S" "$T" "$(describe "$S")"
    done
    exit 0
    ;;
  -h | --help)
    # The header comment: from line 2 up to the first line that is not one.
    awk 'NR > 1 && !/^#/ { exit } NR > 1' "$SELF" | sed 's/^# \{0,1\}//'
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
  # Without --only, a deep stage runs only with --deep.
  if [[ -z "$ONLY" && -z "$DEEP" && "$DEEP_STAGES" == *",$S,"* ]]; then
    return 1
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
