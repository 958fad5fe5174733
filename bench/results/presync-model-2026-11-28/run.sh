#!/bin/bash
# Re-validation of bench/presync_model.py (docs/RANKS.md, "The pre-sync at
# scale"): the real pre-sync (mtsched-opt's report: sync.cost_ms, sync.shape)
# flat and hierarchical on thread ranks (gen_groups.py graphs, W/8 groups of
# 8) and on MPI ranks (groups of 2; hier is new for MPI), checking both decide
# the same IR; and the bench's first exchange cold (--warmup=0 --iters=1)
# beside its warm median. Every run bounded by `timeout`, each line with the
# load average. Usage: bash bench/results/presync-model-2026-11-28/run.sh > OUT.txt
# (THREADS, REPS, MPI_RANKS, COLD override the defaults below.)
B=${B:-build/tools/mtsched-opt/mtsched-opt}
BENCH=${BENCH:-build/bench/mtsched-bench-presync}
G=bench/results/presync-scale-2026-11-28/gen_groups.py
T=$(mktemp -d)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
load() { cut -d' ' -f1-3 /proc/loadavg; }
sync_line() {
  python3 -c "
import json; s=json.load(open('$1'))['sync']
print('ok=%s cost_ms=%.3f skew_ms=%.3f shape=%s' % (s['ok'], s['cost_ms'], s['skew_ms'], s['shape'].replace(' ', '_')))"
}
echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) cores"
for n in ${COLD:-2 4 8 16 32 64}; do
  for rep in 1 2 3 4 5; do
    l=$(load)
    r=$(timeout 60 "$BENCH" --ranks="$n" --iters=1 --warmup=0 2>&1 | tail -1)
    echo "load $l | cold | ${r/presync threads/presync-cold threads}"
  done
done
for w in ${THREADS:-16 64 256 1024}; do
  python3 "$G" "$w" > "$T/g.mir"
  for rep in ${REPS:-1 2 3}; do
    for shape in flat hier; do
      l=$(load)
      /usr/bin/time -o "$T/t" -f "maxrss_kb=%M wall_s=%e" timeout 120 "$B" --pipeline=default \
        --no-cache --quiet --pre-sync=$shape --report="$T/r.json" "$T/g.mir" -o "$T/$shape.mir"
      echo "load $l | presync-opt$([[ $shape == hier ]] && echo -hier) threads ranks=$w $(sync_line "$T/r.json") $(cat "$T/t")"
      rm -f "$T/r.json"
    done
    cmp -s "$T/flat.mir" "$T/hier.mir" && echo "# threads ranks=$w rep=$rep same IR" || echo "# threads ranks=$w rep=$rep IR DIFFERS"
  done
done
for w in ${MPI_RANKS:-2 4 8}; do
  python3 "$G" "$w" 2 > "$T/g.mir"
  for rep in ${REPS:-1 2 3}; do
    for shape in flat hier; do
      l=$(load)
      timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$w" "$B" --pipeline=default \
        --no-cache --quiet --pre-sync=$shape --report="$T/r.json" "$T/g.mir" -o "$T/$shape.mir"
      echo "load $l | presync-opt$([[ $shape == hier ]] && echo -hier) mpi ranks=$w $(sync_line "$T/r.json")"
      rm -f "$T/r.json"
    done
    cmp -s "$T/flat.mir" "$T/hier.mir" && echo "# mpi ranks=$w rep=$rep same IR" || echo "# mpi ranks=$w rep=$rep IR DIFFERS"
  done
done
rm -rf "$T"
echo "# end $(date -u +%FT%TZ) load $(load)"
