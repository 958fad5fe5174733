#!/usr/bin/env bash
# Installs what mtsched needs on a Debian 12 machine, and nothing that is
# already there: a warm run only asks dpkg, so it takes well under a second.
# Safe to run with no terminal (CI runs it as root with stdin closed).
#
#   bash scripts/setup.sh            # everything: build, tests, GPU/MPI side
#   bash scripts/setup.sh --example  # only what building mtsched-opt needs
#                                    # (scripts/run-example.sh)
#   MTSCHED_SKIP_SETUP=1 bash ...    # skip (e.g. on a machine you manage)
set -euo pipefail

if [[ "${MTSCHED_SKIP_SETUP:-0}" == 1 ]]; then
  echo "setup: skipped (MTSCHED_SKIP_SETUP=1)"
  exit 0
fi

GROUPS_WANTED=(example tests extras)
for ARG in "$@"; do
  case "$ARG" in
  --example) GROUPS_WANTED=(example) ;;
  -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup: error: unknown argument '$ARG' (--example or none)" >&2; exit 2 ;;
  esac
done

# One package a line, in groups.
#
# example: what configuring with tests off and building mtsched-opt needs:
# the toolchain (clang-19 builds everything), LLVM 19's CMake package and
# static Support library (llvm-19-dev; it pulls in llvm-19-tools), and the
# libraries libLLVMSupport.a links against.
EXAMPLE_PACKAGES=(
  cmake
  ninja-build
  clang-19
  llvm-19-dev
  zlib1g-dev
  libtinfo-dev
  libzstd-dev
)
# tests: the unit and lit tests, sanitizer and fuzzer builds: lit's FileCheck
# (llvm-19-tools), sanitizer and libFuzzer runtimes, GoogleTest, Python with
# psutil (lit's per-test --timeout), PyTorch 1.13 and NumPy (the importer and
# its tests), MPI for multi-process ranks, Graphviz (the lit test that renders
# --emit=dot), dpkg-dev (dpkg-shlibdeps, for the .deb's Depends), ccache
# (scripts/test.sh's builds share compiled objects where their flags match).
TEST_PACKAGES=(
  ccache
  llvm-19-tools
  libclang-rt-19-dev
  libgtest-dev
  libgmock-dev
  python3
  python3-psutil
  python3-numpy
  python3-torch
  libopenmpi-dev
  openmpi-bin
  graphviz
  dpkg-dev
)
# extras: the benchmark programs and the benchmark scripts' plots.
EXTRA_PACKAGES=(
  libbenchmark-dev
  python3-matplotlib
)

PACKAGES=()
for G in "${GROUPS_WANTED[@]}"; do
  case "$G" in
  example) PACKAGES+=("${EXAMPLE_PACKAGES[@]}") ;;
  tests) PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  extras) PACKAGES+=("${EXTRA_PACKAGES[@]}") ;;
  esac
done

# `dpkg -s` succeeds for removed packages whose config files remain, so ask
# for the exact status.
is_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: error: this script expects Debian 12 (dpkg/apt not found)" >&2
  exit 1
fi

MISSING=()
for P in "${PACKAGES[@]}"; do
  is_installed "$P" || MISSING+=("$P")
done

if [[ ${#MISSING[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "setup: error: missing packages (${MISSING[*]}) and not root, no sudo" >&2
    exit 1
  fi
fi

echo "setup: installing: ${MISSING[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q </dev/null
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  --no-install-recommends "${MISSING[@]}" </dev/null

STILL=()
for P in "${MISSING[@]}"; do
  is_installed "$P" || STILL+=("$P")
done
if [[ ${#STILL[@]} -ne 0 ]]; then
  echo "setup: error: still missing after apt-get: ${STILL[*]}" >&2
  exit 1
fi
echo "setup: installed ${#MISSING[@]} package(s): ${MISSING[*]}"
