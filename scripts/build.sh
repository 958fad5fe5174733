#!/usr/bin/env bash
# Configures (CMake + Ninja, clang) and builds one build directory.
#
#   bash scripts/build.sh                       # Release            -> build/
#   bash scripts/build.sh --sanitizer=asan      # ASan+UBSan, RelWithDebInfo -> build-asan/
#   bash scripts/build.sh --sanitizer=tsan      # ThreadSanitizer, RelWithDebInfo -> build-tsan/
#   bash scripts/build.sh --fuzzer              # libFuzzer target (ASan+UBSan) -> build-fuzz/
#   bash scripts/build.sh [options] DIR         # any of the above into DIR
#
# Options:
#   --sanitizer=asan|tsan   sanitizer build (asan means address + undefined)
#   --fuzzer                build the mtsched-fuzz-parser libFuzzer target
#   --build-type=TYPE       override the CMake build type
#   --target=T              build only target T (repeatable; default: all,
#                           or mtsched-fuzz-parser with --fuzzer)
#   --no-tests              configure with MTSCHED_ENABLE_TESTS=OFF
#   --werror, --no-werror   configure with MTSCHED_WERROR=ON / OFF (-Werror);
#                           neither: as the directory was (OFF when new)
#
# Environment: MTSCHED_JOBS (ninja -j, default 2); MTSCHED_LLVM_CONFIG (the
# LLVM, default the newest llvm-config-NN >= 19 found); MTSCHED_CC /
# MTSCHED_CXX (default that LLVM's clang-NN / clang++-NN). Run
# scripts/setup.sh first on a fresh machine; scripts/test.sh and
# scripts/run-example.sh do that for you.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SANITIZER=""
FUZZER=0
BUILD_TYPE=""
BUILD_DIR=""
TESTS=ON
WERROR=""
TARGETS=()

usage() { sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

for ARG in "$@"; do
  case "$ARG" in
    --sanitizer=asan) SANITIZER="address;undefined" ;;
    --sanitizer=tsan) SANITIZER="thread" ;;
    --sanitizer=*)
      echo "build: error: unknown sanitizer '${ARG#--sanitizer=}' (asan or tsan)" >&2
      exit 2 ;;
    --fuzzer) FUZZER=1 ;;
    --build-type=*) BUILD_TYPE="${ARG#--build-type=}" ;;
    --target=*) TARGETS+=("${ARG#--target=}") ;;
    --no-tests) TESTS=OFF ;;
    --werror) WERROR=ON ;;
    --no-werror) WERROR=OFF ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "build: error: unknown option '$ARG'" >&2; usage >&2; exit 2 ;;
    *)
      if [[ -n "$BUILD_DIR" ]]; then
        echo "build: error: more than one build directory given" >&2
        exit 2
      fi
      BUILD_DIR="$ARG" ;;
  esac
done

BENCH=ON
if [[ $FUZZER == 1 ]]; then
  if [[ "$SANITIZER" == thread ]]; then
    echo "build: error: --fuzzer builds with ASan+UBSan; it cannot be combined with tsan" >&2
    exit 2
  fi
  # libFuzzer needs ASan+UBSan on the code under test so that memory errors
  # and undefined behaviour become crashes it can report.
  SANITIZER="address;undefined"
  TESTS=OFF
  BENCH=OFF
  DEFAULT_DIR=build-fuzz
  [[ ${#TARGETS[@]} -eq 0 ]] && TARGETS=(mtsched-fuzz-parser)
elif [[ "$SANITIZER" == "address;undefined" ]]; then
  DEFAULT_DIR=build-asan
elif [[ "$SANITIZER" == thread ]]; then
  DEFAULT_DIR=build-tsan
else
  DEFAULT_DIR=build
fi
if [[ -z "$BUILD_TYPE" ]]; then
  if [[ -n "$SANITIZER" ]]; then BUILD_TYPE=RelWithDebInfo; else BUILD_TYPE=Release; fi
fi
BUILD_DIR="${BUILD_DIR:-$ROOT/$DEFAULT_DIR}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$PWD/$BUILD_DIR" ;; esac

# LLVM_CONFIG, CC_BIN, CXX_BIN: see scripts/find-llvm.sh.
source "$ROOT/scripts/find-llvm.sh"
mtsched_find_llvm || exit 1

# CMake silently throws the whole cache away when the compiler changes, and
# refuses a different generator; say what to do instead.
CACHE="$BUILD_DIR/CMakeCache.txt"
if [[ -f "$CACHE" ]]; then
  OLD_CXX="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$CACHE")"
  OLD_GEN="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$CACHE")"
  if [[ "$OLD_GEN" != Ninja || ( -n "$OLD_CXX" && "$OLD_CXX" != "$CXX_BIN" ) ]]; then
    echo "build: error: $BUILD_DIR was configured with '$OLD_GEN' / '$OLD_CXX';" \
      "remove it (rm -rf '$BUILD_DIR') and rerun" >&2
    exit 1
  fi
fi

# A directory configured with the tests off (scripts/run-example.sh, on a
# machine that had only the example's packages) decided MPI ranks from what
# was installed then, and CMake keeps that answer. When the tests are turned
# on, scripts/setup.sh has installed the rest: look for MPI again.
RESET=()
if [[ -f "$CACHE" && $TESTS == ON ]] &&
  grep -q '^MTSCHED_ENABLE_TESTS:BOOL=OFF$' "$CACHE"; then
  RESET=(-UMTSCHED_ENABLE_MPI '-UMPI_*')
fi

mkdir -p "$BUILD_DIR"
echo "build: configuring $BUILD_DIR ($BUILD_TYPE${SANITIZER:+, sanitizer=$SANITIZER}$([[ $FUZZER == 1 ]] && echo ", fuzzer")$([[ $WERROR == ON ]] && echo ", -Werror"); $(basename "$CXX_BIN"), LLVM $("$LLVM_CONFIG" --version))"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
  -DCMAKE_C_COMPILER="$CC_BIN" \
  -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DLLVM_DIR="$("$LLVM_CONFIG" --cmakedir)" \
  -DMTSCHED_SANITIZER="$SANITIZER" \
  -DMTSCHED_ENABLE_FUZZER="$([[ $FUZZER == 1 ]] && echo ON || echo OFF)" \
  -DMTSCHED_ENABLE_TESTS="$TESTS" \
  -DMTSCHED_ENABLE_BENCH="$BENCH" \
  ${WERROR:+-DMTSCHED_WERROR="$WERROR"} \
  "${RESET[@]}" \
  >"$BUILD_DIR/configure.log" 2>&1 || {
    cat "$BUILD_DIR/configure.log" >&2
    echo "build: error: cmake configure failed" >&2
    exit 1
  }

echo "build: building ${TARGETS[*]:-all} in $BUILD_DIR (ninja -j${MTSCHED_JOBS:-2})"
ninja -C "$BUILD_DIR" -j"${MTSCHED_JOBS:-2}" "${TARGETS[@]}"
