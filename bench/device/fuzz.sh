#!/usr/bin/env bash
# The parser fuzzer (fuzz/ParserFuzzer.cpp, ASan+UBSan) on every CPU core of
# a device machine, for the issue's long run: libFuzzer's fork mode, one job
# per core, the seeds and corpus that scripts/fuzz.sh made here, the
# dictionary fuzz/mir.dict. Carry .device-fuzz (bin/mtsched-fuzz-parser,
# seeds/, corpus/) made by `bash bench/device/fuzz.sh --pack`.
#
#   bash bench/device/fuzz.sh --pack            # here, after scripts/fuzz.sh 1
#   bash bench/device/fuzz.sh SECONDS [JOBS]    # there; logs under $OUT
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
D="$ROOT/.device-fuzz"
if [[ "${1:-}" == --pack ]]; then
  B="${MTSCHED_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
  rm -rf "$D" && mkdir -p "$D/bin" "$D/seeds" "$D/corpus"
  cp "$B/fuzz/mtsched-fuzz-parser" "$D/bin/"
  cp "$B/seeds/"* "$D/seeds/"
  cp "$B/corpus/"* "$D/corpus/" 2>/dev/null || true
  du -sh "$D"
  exit 0
fi
SECS="${1:-480}"
JOBS="${2:-$(nproc)}"
OUT="${OUT:-/tmp/fuzz-out}"
mkdir -p "$OUT/artifacts"
export ASAN_OPTIONS="detect_leaks=1:malloc_context_size=10:quarantine_size_mb=64"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
echo "fuzz: $JOBS jobs for ${SECS}s on $(nproc) cores; $(ls "$D/seeds" | wc -l) seeds, $(ls "$D/corpus" | wc -l) corpus inputs"
cd "$OUT"
timeout --kill-after=30 $((SECS + 120)) "$D/bin/mtsched-fuzz-parser" \
  -fork="$JOBS" -max_total_time="$SECS" -timeout=5 -rss_limit_mb=2048 \
  -dict="$ROOT/fuzz/mir.dict" -artifact_prefix="$OUT/artifacts/" \
  -print_final_stats=1 "$D/corpus" "$D/seeds" > "$OUT/fuzz.log" 2>&1
RC=$?
echo "fuzz: exit $RC"
grep -E '^#[0-9]+' "$OUT/fuzz.log" | tail -n 3
grep -E '^(Done|stat::|INFO: exiting)' "$OUT/fuzz.log" | tail -n 8
ls "$OUT/artifacts" | head
# Keep what comes back small: the log's last lines and any artifact.
tail -n 400 "$OUT/fuzz.log" > "$OUT/fuzz-tail.log"; rm -f "$OUT/fuzz.log"
rm -rf "$OUT"/fuzz-*.log.* 2>/dev/null
exit $RC
