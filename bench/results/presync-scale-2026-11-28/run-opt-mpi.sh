#!/bin/bash
# The real pre-sync (mtsched-opt's report, sync.cost_ms) on MPI ranks of this
# machine (oversubscribed past 2), for gen_groups.py graphs with groups of 2:
# three runs per rank count (RANKS, default 2 4 8), each bounded by `timeout`.
B=${B:-build/tools/mtsched-opt/mtsched-opt}
D=$(dirname "$0")
T=$(mktemp -d)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) cores"
for w in ${RANKS:-2 4 8}; do
  python3 "$D/gen_groups.py" "$w" 2 > "$T/g.mir"
  for rep in ${REPS:-1 2 3}; do
    l=$(cut -d' ' -f1-3 /proc/loadavg)
    timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$w" "$B" --pipeline=default \
      --no-cache --quiet --report="$T/r.json" "$T/g.mir" -o /dev/null
    s=$(python3 -c "
import json; s=json.load(open('$T/r.json'))['sync']
print('ok=%s cost_ms=%.3f skew_ms=%.3f' % (s['ok'], s['cost_ms'], s['skew_ms']))")
    echo "load $l | presync-opt mpi ranks=$w $s"
    rm -f "$T/r.json"
  done
done
rm -rf "$T"
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
