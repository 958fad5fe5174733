#!/usr/bin/env bash
# Regenerates the heuristics lab's tables in docs/HEURISTICS.md ("Latest
# table" and "The recursive fusion search"): reruns the command written
# above each and replaces the rows between its <!-- TAG:begin --> and
# <!-- TAG:end --> markers (TAG: lab-table, lab-search-table).
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

# Each table's documented command is the line after its command marker's
# code fence: the heuristics and pruning table (lab-table) and the fusion
# search table (lab-search-table).
CUR=$(mktemp)
TABLE=$(mktemp)
NEW=$(mktemp)
trap 'rm -f "$CUR" "$TABLE" "$NEW"' EXIT
cp "$DOC" "$CUR"
ROWS=""
for TAG in lab-table lab-search-table; do
  CMD=$(awk -v m="<!-- $TAG:command -->" 'index($0, m){getline; getline; print; exit}' "$CUR")
  case "$CMD" in
    build/tools/mtsched-lab/mtsched-lab\ *) ;;
    *) echo "lab-table: error: no lab command after <!-- $TAG:command --> in $DOC" >&2; exit 1 ;;
  esac
  ARGS=${CMD#build/tools/mtsched-lab/mtsched-lab }
  # Word splitting of ARGS is wanted (flags and the corpus glob), from ROOT.
  # shellcheck disable=SC2086
  (cd "$ROOT" && "$LAB" $ARGS) > "$TABLE"
  awk -v table="$TABLE" -v b="<!-- $TAG:begin -->" -v e="<!-- $TAG:end -->" '
    index($0, b) { print; while ((getline l < table) > 0) print l; skip = 1; next }
    index($0, e) { skip = 0 }
    !skip { print }
  ' "$CUR" > "$NEW"
  grep -q "<!-- $TAG:end -->" "$NEW" || { echo "lab-table: error: $TAG markers missing in $DOC" >&2; exit 1; }
  cp "$NEW" "$CUR"
  ROWS="$ROWS $TAG: $(($(wc -l < "$TABLE") - 2)) rows"
done
CMD="the documented commands"

if [ "$CHECK" = 1 ]; then
  if ! diff -u "$DOC" "$NEW"; then
    echo "lab-table: docs/HEURISTICS.md's table differs from '$CMD' (run scripts/lab-table.sh)" >&2
    exit 1
  fi
  echo "lab-table: docs/HEURISTICS.md's table is current"
else
  cp "$NEW" "$DOC"
  echo "lab-table: rewrote the tables in docs/HEURISTICS.md ($ROWS )"
fi
