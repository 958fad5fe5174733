#!/usr/bin/env bash
# Installs what mtsched needs on a Debian 12 machine, and nothing that is
# already there: a warm run only asks dpkg, so it takes well under a second.
# Safe to run with no terminal (CI runs it as root with stdin closed).
#
#   bash scripts/setup.sh            # install what is missing
#   MTSCHED_SKIP_SETUP=1 bash ...    # skip (e.g. on a machine you manage)
set -euo pipefail

if [[ "${MTSCHED_SKIP_SETUP:-0}" == 1 ]]; then
  echo "setup: skipped (MTSCHED_SKIP_SETUP=1)"
  exit 0
fi

# One package a line: the toolchain (clang-19 builds everything; LLVM 19's
# static Support library, lit and FileCheck), test and benchmark libraries,
# the libraries libLLVMSupport.a links against, MPI for multi-process
# ranks, Graphviz (the lit test that renders --emit=dot) and matplotlib (the
# benchmark scripts' plots).
PACKAGES=(
  cmake
  ninja-build
  clang-19
  llvm-19-dev
  llvm-19-tools
  libclang-rt-19-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  zlib1g-dev
  libtinfo-dev
  libzstd-dev
  python3
  python3-numpy
  python3-torch
  libopenmpi-dev
  openmpi-bin
  graphviz
  python3-matplotlib
)

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
