#!/bin/bash
# Measures mtsched-bench-presync at thread ranks 2..1024 and MPI ranks 2, 4, 8
# on this machine, three runs each, every run bounded by `timeout`.
# Output: one line per run, "<uptime> | <bench line>", on stdout.
# Usage: bash bench/results/presync-scale-2026-11-28/run.sh > OUT.txt
B=${B:-build/bench/mtsched-bench-presync}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for rep in 1 2 3; do
  for spec in 2:2000:100 4:2000:100 8:1000:50 16:500:20 64:200:10 256:40:4 1024:8:2; do
    IFS=: read -r n it wu <<<"$spec"
    l=$(uptime | sed 's/.*load average: //')
    r=$(timeout 300 "$B" --ranks="$n" --iters="$it" --warmup="$wu" 2>&1 | tail -1)
    echo "load $l | iters=$it warmup=$wu | $r"
  done
  for spec in 2:2000:100 4:1000:50 8:300:20; do
    IFS=: read -r n it wu <<<"$spec"
    l=$(uptime | sed 's/.*load average: //')
    r=$(timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$n" "$B" --iters="$it" --warmup="$wu" 2>&1 | grep presync | tail -1)
    echo "load $l | iters=$it warmup=$wu | $r"
  done
done
echo "# end $(date -u +%FT%TZ) load $(uptime | sed 's/.*load average: //')"
