#!/bin/bash
# The real pre-sync (mtsched-opt's report: sync.cost_ms, sync.shape) on
# thread ranks, flat against hierarchical (--pre-sync=flat|hier; hier groups
# about sqrt(W) consecutive ranks as hosts), for gen_groups.py's graphs (W
# ranks declaring W/8 groups of 8, as bench/results/presync-scale-2026-11-28).
# Also checks that both decide the same IR. Usage:
#   RANKS="64 256 1024" REPS="1 2" bash run.sh > OUT.txt
B=${B:-build/tools/mtsched-opt/mtsched-opt}
G=bench/results/presync-scale-2026-11-28/gen_groups.py
T=$(mktemp -d)
echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) cores"
for w in ${RANKS:-64 256 1024}; do
  python3 "$G" "$w" > "$T/g.mir"
  for rep in ${REPS:-1 2}; do
    for shape in flat hier; do
      l=$(cut -d' ' -f1-3 /proc/loadavg)
      /usr/bin/time -o "$T/t" -f "maxrss_kb=%M wall_s=%e" timeout 400 "$B" --pipeline=default \
        --no-cache --quiet --pre-sync=$shape --report="$T/r.json" "$T/g.mir" -o "$T/$shape.mir"
      s=$(python3 -c "
import json; s=json.load(open('$T/r.json'))['sync']
print('shape=%s ok=%s cost_ms=%.3f skew_ms=%.3f' % (s['shape'].replace(' ', '_'), s['ok'], s['cost_ms'], s['skew_ms']))")
      echo "load $l | presync-opt threads ranks=$w $s $(cat "$T/t")"
    done
    cmp -s "$T/flat.mir" "$T/hier.mir" && echo "# ranks=$w rep=$rep same IR" || echo "# ranks=$w rep=$rep IR DIFFERS"
  done
done
rm -rf "$T"
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
