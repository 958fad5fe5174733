#!/usr/bin/env bash
# Builds the Debian package mtsched_<version>_<arch>.deb (cmake/Packaging.cmake)
# and prints its path on the last line:
#
#   bash scripts/package.sh                # Release build in build-package/
#   bash scripts/package.sh DIR            # ... in DIR
#   sudo apt install ./build-package/package/mtsched_0.4.0_amd64.deb
#
# A Release build of the libraries, the tools and the MPI plugin (no tests,
# no benchmarks), configured for /usr, with -Werror as every scripted build
# (the same compile lines as scripts/build.sh --werror), then cpack. Needs what
# scripts/setup.sh installs (LLVM >= 19 and its clang, CMake, Ninja; Open MPI
# for the plugin, which is left out with a warning when MPI is not found) and
# dpkg-dev (dpkg-shlibdeps computes Depends). MTSCHED_JOBS: ninja -j
# (default 2); MTSCHED_LLVM_CONFIG: which LLVM (scripts/find-llvm.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build-package}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$PWD/$BUILD_DIR" ;; esac

# LLVM_CONFIG, CC_BIN, CXX_BIN, as scripts/build.sh uses them.
source "$ROOT/scripts/find-llvm.sh"
mtsched_find_llvm || exit 1
for TOOL in cmake ninja cpack dpkg-shlibdeps; do
  command -v "$TOOL" >/dev/null 2>&1 || {
    echo "package: error: $TOOL not found (apt-get install cmake ninja-build dpkg-dev," \
      "or bash scripts/setup.sh)" >&2
    exit 1
  }
done

mkdir -p "$BUILD_DIR"
echo "package: configuring $BUILD_DIR (Release, prefix /usr; $(basename "$CXX_BIN"), LLVM $("$LLVM_CONFIG" --version))"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$CC_BIN" \
  -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DLLVM_DIR="$("$LLVM_CONFIG" --cmakedir)" \
  -DCMAKE_INSTALL_PREFIX=/usr \
  -DMTSCHED_ENABLE_TESTS=OFF \
  -DMTSCHED_ENABLE_BENCH=OFF \
  -DMTSCHED_ENABLE_FUZZER=OFF \
  -DMTSCHED_SANITIZER= \
  -DMTSCHED_WERROR=ON \
  >"$BUILD_DIR/configure.log" 2>&1 || {
  cat "$BUILD_DIR/configure.log" >&2
  echo "package: error: cmake configure failed" >&2
  exit 1
}
if ! grep -q '^MTSCHED_ENABLE_MPI:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
  echo "package: warning: no MPI C library found: the package has no MPI plugin," \
    "so its mtsched-opt cannot run as an MPI rank (apt-get install libopenmpi-dev)" >&2
fi

echo "package: building in $BUILD_DIR (ninja -j${MTSCHED_JOBS:-2})"
ninja -C "$BUILD_DIR" -j"${MTSCHED_JOBS:-2}"

rm -rf "$BUILD_DIR/package"
(cd "$BUILD_DIR" && cpack --config CPackConfig.cmake -B "$BUILD_DIR/package") \
  >"$BUILD_DIR/cpack.log" 2>&1 || {
  cat "$BUILD_DIR/cpack.log" >&2
  echo "package: error: cpack failed" >&2
  exit 1
}
grep 'Depends:' "$BUILD_DIR/cpack.log" | sed 's/^-- /package: /' || true
DEB="$(find "$BUILD_DIR/package" -maxdepth 1 -name 'mtsched_*.deb' | head -n 1)"
if [[ -z "$DEB" ]]; then
  echo "package: error: cpack made no mtsched_*.deb (see $BUILD_DIR/cpack.log)" >&2
  exit 1
fi
echo "package: $(du -h "$DEB" | cut -f1) $(dpkg-deb -f "$DEB" Package Version Architecture | paste -sd' ')"
echo "$DEB"
