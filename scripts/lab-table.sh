#!/usr/bin/env bash
# Regenerates the heuristics lab's table in docs/HEURISTICS.md ("Latest
# table"): reruns the command written there and replaces the rows between
# the <!-- lab-table:begin --> and <!-- lab-table:end --> markers.
#
#   bash scripts/lab-table.sh [BUILD_DIR]           # rewrite the table
#   bash scripts/lab-table.sh --check [BUILD_DIR]   # exit 1 if it differs
#
# On the simulator the table is the same for the same seed, byte for byte
# (no wall-time column), so --check is a test that the docs did not drift.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECK=0
BUILD="$ROOT/build"
for ARG in "$@"; do
  case "$ARG" in
    --check) CHECK=1 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "lab-table: error: unknown option '$ARG'" >&2; exit 2 ;;
    *) BUILD="$ARG" ;;
  esac
done
DOC="$ROOT/docs/HEURISTICS.md"
LAB="$BUILD/tools/mtsched-lab/mtsched-lab"
[ -x "$LAB" ] || { echo "lab-table: error: no $LAB (build mtsched-lab first)" >&2; exit 1; }

# The documented command: the line after the begin marker's code fence.
CMD=$(awk '/<!-- lab-table:command -->/{getline; getline; print; exit}' "$DOC")
case "$CMD" in
  build/tools/mtsched-lab/mtsched-lab\ *) ;;
  *) echo "lab-table: error: no lab command after <!-- lab-table:command --> in $DOC" >&2; exit 1 ;;
esac
ARGS=${CMD#build/tools/mtsched-lab/mtsched-lab }

TABLE=$(mktemp)
NEW=$(mktemp)
trap 'rm -f "$TABLE" "$NEW"' EXIT
# Word splitting of ARGS is wanted (flags and the corpus glob), from ROOT.
# shellcheck disable=SC2086
(cd "$ROOT" && "$LAB" $ARGS) > "$TABLE"

awk -v table="$TABLE" '
  /<!-- lab-table:begin -->/ { print; while ((getline l < table) > 0) print l; skip = 1; next }
  /<!-- lab-table:end -->/ { skip = 0 }
  !skip { print }
' "$DOC" > "$NEW"
grep -q '<!-- lab-table:end -->' "$NEW" || { echo "lab-table: error: markers missing in $DOC" >&2; exit 1; }

if [ "$CHECK" = 1 ]; then
  if ! diff -u "$DOC" "$NEW"; then
    echo "lab-table: docs/HEURISTICS.md's table differs from '$CMD' (run scripts/lab-table.sh)" >&2
    exit 1
  fi
  echo "lab-table: docs/HEURISTICS.md's table is current"
else
  cp "$NEW" "$DOC"
  echo "lab-table: rewrote the table in docs/HEURISTICS.md ($(($(wc -l < "$TABLE") - 2)) rows)"
fi
