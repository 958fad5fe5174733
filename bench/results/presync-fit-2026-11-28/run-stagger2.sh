#!/bin/bash
# How long a waiting thread must have waited before waking it costs its
# sender (the model's t_asleep): 2 thread ranks, rank 1 arriving S µs after
# rank 0 (--stagger-us=S); last_wait_us is rank 1's barrier wait, i.e. what
# waking rank 0 cost it. Usage: bash run-stagger2.sh > stagger-2.txt
BENCH=${BENCH:-build/bench/mtsched-bench-presync}
echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) cores"
for s in 1 2 3 5 10 20 50 100 1000; do
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) | $(timeout 60 "$BENCH" --ranks=2 --iters=2000 --warmup=50 --stagger-us=$s)"
done
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
