#!/usr/bin/env bash
# Installs what building the driver needs, builds mtsched-opt (Release,
# build/), and runs the main example: mtsched-opt on examples/tp_mlp.mir,
# printing the resulting IR.
#
#   bash scripts/run-example.sh
#
# Only the example's packages (scripts/setup.sh --example) and only the
# mtsched-opt target: no tests, GPU or MPI side. A new build/ is configured
# as scripts/test.sh's release stage configures it (Release, clang, -Werror)
# but with the tests off, so that stage later reuses every object built here
# (it turns the tests on in the same directory). An existing build/ keeps its
# settings.
#
# Environment: MTSCHED_SKIP_SETUP=1 skips the package check, MTSCHED_JOBS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh --example
# A new build/: the release stage's flags with the tests off. An existing one
# keeps its tests and -Werror settings (build.sh turns the tests on unless
# told otherwise).
if [[ ! -f build/CMakeCache.txt ]]; then
  ARGS=(--werror --no-tests)
elif grep -q '^MTSCHED_ENABLE_TESTS:BOOL=OFF$' build/CMakeCache.txt; then
  ARGS=(--no-tests)
else
  ARGS=()
fi
bash scripts/build.sh "${ARGS[@]}" --target=mtsched-opt build

# The example command: the one place to change what the example runs.
EXAMPLE_CMD=(build/tools/mtsched-opt/mtsched-opt --pipeline=default examples/tp_mlp.mir)

echo "run-example: ${EXAMPLE_CMD[*]}"
"${EXAMPLE_CMD[@]}"
