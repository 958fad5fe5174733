#!/usr/bin/env bash
# Sets everything up, builds (Release, build/), and runs the main example:
# mtsched-opt on examples/tp_mlp.mir, printing the resulting IR.
#
#   bash scripts/run-example.sh
#
# Environment: MTSCHED_SKIP_SETUP=1 skips the package check, MTSCHED_JOBS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
bash scripts/build.sh build

# The example command: the one place to change what the example runs.
EXAMPLE_CMD=(build/tools/mtsched-opt/mtsched-opt --pipeline=default examples/tp_mlp.mir)

echo "run-example: ${EXAMPLE_CMD[*]}"
"${EXAMPLE_CMD[@]}"
