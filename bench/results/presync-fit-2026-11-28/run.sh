#!/bin/bash
# Issue 40, the real pre-sync's cost against the model (docs/RANKS.md,
# "Where the flat model was not within 2x"): in one session, so the machine's
# state is the same for all of it,
#  1. the bench with ranks arriving apart (--stagger-us=1000: rank r spins
#     r ms first, so each arrival finds every earlier rank asleep): the last
#     arrival's barrier wait, i.e. what one notify_all of k sleepers costs
#     the rank that sends it (t_notify);
#  2. the bench as before (thread ranks 2-1024, the fit and its checks);
#  3. mtsched-opt's flat pre-sync on thread ranks (gen_groups.py graphs, W/8
#     groups of 8) with the report's split of sync.cost_ms (last_wait_ms,
#     exchange_ms) and every rank's own cost (rank_cost_ms min/median/max).
# Every run bounded by `timeout`, each line with the load average.
# Usage: bash bench/results/presync-fit-2026-11-28/run.sh > OUT.txt
# (REPS, default 3 rounds of the bench; STAGGER, BENCH_SPECS, OPT_SPECS
# override the lists below.) measurements-1.txt: one round of the bench
# (REPS=1), 16:55 UTC; measurements.txt: the default, after it;
# measurements-check.txt: OPT_SPECS="16:10 64:3 128:3 256:3 512:3", 17:11.
# Then: python3 bench/presync_model.py validate OUT.txt --fit-threads 2 4 16 128 1024
B=${B:-build/tools/mtsched-opt/mtsched-opt}
BENCH=${BENCH:-build/bench/mtsched-bench-presync}
G=bench/results/presync-scale-2026-11-28/gen_groups.py
T=$(mktemp -d)
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) cores"
for rep in $(seq "${REPS:-3}"); do
  for spec in ${STAGGER:-2:300 4:200 8:100 16:60 32:30}; do
    IFS=: read -r n it <<<"$spec"
    l=$(load)
    r=$(timeout 120 "$BENCH" --ranks="$n" --iters="$it" --warmup=5 --stagger-us=1000 2>&1 | tail -1)
    echo "load $l | $r"
  done
  for spec in ${BENCH_SPECS:-2:2000:100 4:2000:100 8:1000:50 16:500:20 32:300:20 64:200:10 128:100:5 256:40:4 512:16:2 1024:8:2}; do
    IFS=: read -r n it wu <<<"$spec"
    l=$(load)
    r=$(timeout 300 "$BENCH" --ranks="$n" --iters="$it" --warmup="$wu" 2>&1 | tail -1)
    echo "load $l | iters=$it warmup=$wu | $r"
  done
done
for spec in ${OPT_SPECS:-16:10 64:3 128:3 256:3 512:3 1024:2}; do
  IFS=: read -r w reps <<<"$spec"
  python3 "$G" "$w" > "$T/g.mir"
  for rep in $(seq "$reps"); do
    l=$(load)
    /usr/bin/time -o "$T/t" -f "maxrss_kb=%M wall_s=%e" timeout 120 "$B" --pipeline=default \
      --no-cache --quiet --pre-sync=flat --report="$T/r.json" "$T/g.mir" -o /dev/null
    s=$(python3 -c "
import json; s=json.load(open('$T/r.json'))['sync']; c=s['rank_cost_ms']
print('ok=%s cost_ms=%.3f skew_ms=%.3f last_wait_ms=%.3f exchange_ms=%.3f rank_cost_ms=%.3f/%.3f/%.3f ranks=%d'
      % (s['ok'], s['cost_ms'], s['skew_ms'], s['last_wait_ms'], s['exchange_ms'],
         c['min'], c['median'], c['max'], c['ranks']))")
    echo "load $l | presync-opt threads ranks=$w $s $(cat "$T/t")"
    rm -f "$T/r.json"
  done
done
rm -rf "$T"
echo "# end $(date -u +%FT%TZ) load $(load)"
