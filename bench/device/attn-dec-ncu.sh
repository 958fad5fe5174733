#!/usr/bin/env bash
# Decode attention beside cuDNN under Nsight Compute (issue 35: batch 16 at
# 1.02-1.03x SDPA; the timelines leave the gap in how each kernel streams K
# and V). Run from the repository root after `bash scripts/gpu-test.sh
# --pack`: dumps each tile of $TL (graph tile: bench/choices_file.py tokens;
# default the unsplit batch-16 tile), runs bench/device/attn-dec-timeline.py
# in MODE ncu under `ncu --set full` (clocks left alone): two launches of
# the kernel as the launcher encodes its tensor maps (NVTX range `ours`),
# with their L2 promotion none, 64 B and 128 B (`l2p0`, `l2p1`, `l2p2`)
# and of SDPA's cuDNN kernel (`sdpa_cudnn`); then the same tiles timed in
# MODE tl (graph replay beside SDPA, $OUT/timed.log). $OUT/ncu.log,
# $OUT/dec.ncu-rep, $OUT/raw.csv (every metric, a row per launch),
# $OUT/details.txt and $OUT/summary.txt (a few metrics side by side).
set -u
ROOT=$PWD
source "$ROOT/scripts/device-driver.sh" # device_script_setup, device_dump_decode_case
device_script_setup "$ROOT" attn-dec-ncu # NCCL_NVLS_ENABLE=0, BIN, PY, OUT
S=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi -L; "$BIN" --version | head -1; } > "$S" 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none} $("${NCU:-false}" --version 2>&1 | tail -1)" | tee -a "$S"
[ -n "$NCU" ] || exit 2
K=$(mktemp -d)
TL=${TL:-"decode_b16 d32.4.4.1"}
: > "$K/cases.txt"
while read -r g tile; do
  device_dump_decode_case "$K" "$g" "$tile" ncu "$OUT/ncu.log"
done <<< "$TL"
T0=$SECONDS
timeout "${LIMIT_S:-240}" "$NCU" --clock-control none --nvtx \
  --nvtx-include "ours/" --nvtx-include "l2p0/" --nvtx-include "l2p1/" \
  --nvtx-include "l2p2/" --nvtx-include "sdpa_cudnn/" --set full \
  --import-source no -f --export "$OUT/dec" \
  "$PY" bench/device/attn-dec-timeline.py "$K/cases.txt" >> "$OUT/ncu.log" 2>&1
echo "ncu rc=$? in $((SECONDS - T0)) s" | tee -a "$S"
if [ -f "$OUT/dec.ncu-rep" ]; then
  "$NCU" --import "$OUT/dec.ncu-rep" --page raw --csv > "$OUT/raw.csv" 2>&1
  "$NCU" --import "$OUT/dec.ncu-rep" --page details > "$OUT/details.txt" 2>&1
  "$PY" - "$OUT/raw.csv" <<'PY' | tee -a "$S"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, rows = rows[0], [r for r in rows[2:] if len(r) == len(rows[0])]
want = ["Kernel Name", "gpu__time_duration.sum", "launch__grid_size",
        "launch__block_size", "launch__registers_per_thread",
        "launch__shared_mem_per_block_dynamic", "dram__bytes_read.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__t_sector_hit_rate.pct", "lts__t_sectors_srcunit_tex_op_read.sum",
        "lts__t_sectors_srcunit_ltcfabric.sum", "lts__t_sectors.sum",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed"]
for w in want:
    if w in head:
        i = head.index(w)
        print("%-55s %s" % (w, " | ".join(r[i][:40] for r in rows)))
PY
fi
sed -i 's/ ncu$/ tl/' "$K/cases.txt"
timeout 60 "$PY" bench/device/attn-dec-timeline.py "$K/cases.txt" > "$OUT/timed.log" 2>&1
echo "timed rc=$?" | tee -a "$S"
grep "us (round" "$OUT/timed.log" | tee -a "$S"
rm -rf "$K"
