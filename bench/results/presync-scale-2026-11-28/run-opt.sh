#!/bin/bash
# The real pre-sync (mtsched-opt's report, sync.cost_ms) on thread ranks, for
# graphs from gen_groups.py: W ranks declaring W/8 groups of 8, so each
# rank's record carries the groups' text. Three runs per rank count (RANKS,
# default 16 64 128 256 512), each bounded by `timeout`; max RSS from
# /usr/bin/time. Usage: bash run-opt.sh > OUT.txt
B=${B:-build/tools/mtsched-opt/mtsched-opt}
D=$(dirname "$0")
T=$(mktemp -d)
echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) cores"
for w in ${RANKS:-16 64 128 256 512}; do
  python3 "$D/gen_groups.py" "$w" > "$T/g.mir"
  for rep in ${REPS:-1 2 3}; do
    l=$(cut -d' ' -f1-3 /proc/loadavg)
    /usr/bin/time -o "$T/t" -f "maxrss_kb=%M wall_s=%e" timeout 300 "$B" --pipeline=default \
      --no-cache --quiet --report="$T/r.json" "$T/g.mir" -o /dev/null
    s=$(python3 -c "
import json; s=json.load(open('$T/r.json'))['sync']
print('ok=%s cost_ms=%.3f skew_ms=%.3f' % (s['ok'], s['cost_ms'], s['skew_ms']))")
    echo "load $l | presync-opt threads ranks=$w $s $(cat "$T/t")"
  done
done
rm -rf "$T"
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
