#!/bin/bash
# Points held out of the fit: thread ranks 32, 128, 512 and MPI ranks 3, 6,
# 12, 16 (oversubscribed), three runs each, each bounded by `timeout`.
B=${B:-build/bench/mtsched-bench-presync}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) cores"
for rep in 1 2 3; do
  for spec in 32:300:10 128:80:4 512:16:2; do
    IFS=: read -r n it wu <<<"$spec"
    l=$(uptime | sed 's/.*load average: //')
    r=$(timeout 300 "$B" --ranks="$n" --iters="$it" --warmup="$wu" 2>&1 | tail -1)
    echo "load $l | iters=$it warmup=$wu | $r"
  done
  for spec in 3:1000:50 6:500:20 12:200:10 16:100:10; do
    IFS=: read -r n it wu <<<"$spec"
    l=$(uptime | sed 's/.*load average: //')
    r=$(timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$n" "$B" --iters="$it" --warmup="$wu" 2>&1 | grep presync | tail -1)
    echo "load $l | iters=$it warmup=$wu | $r"
  done
done
echo "# end $(date -u +%FT%TZ) load $(uptime | sed 's/.*load average: //')"
