#!/usr/bin/env bash
# attn-mask branch (issue 35): attention's additive mask operand on one
# H200. Run from the repository root after `bash scripts/gpu-test.sh --pack`
# (binaries in .device/); results under $OUT (at most 8 files). Budget:
# about 3 minutes.
#   1. lit Cuda/attention-mask-run.mir (every masked kernel variant timed,
#      checked against the fp64 reference, the decided graph run against
#      the fp64 interpreter; attn_math forced too) and Cuda/attention-run.mir
#      (the unmasked kernels, which the mask edit touched).
#   2. The regenerated gallery Llama-3-8B layer (attention with the mask
#      input, examples/gallery/llama3_8b_layer.mir) at one rank (TP group
#      of one: its all_reduces copy), decode and prefill: --run checks every
#      output against the fp64 interpreter and prints the graph time.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; D=$ROOT/.device
source "$ROOT/scripts/device-driver.sh"  # device_lit_tree
OUT=${OUT:-$ROOT/gpu-results}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
{ nvidia-smi -L; git -C "$ROOT" log --oneline -1 2>/dev/null; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

echo "== 1. lit: masked and unmasked attention kernels"
device_lit_tree "$ROOT" "$D"
START=$(date +%s)
left() { echo $((170 - ($(date +%s) - START))); }
timeout 100 python3 "$D/lit/lit.py" -sv --filter 'attention-(mask-)?run' "$W/test/lit/Cuda" > "$OUT/lit.log" 2>&1
echo "lit rc=$?"
grep -E "^(PASS|FAIL|UNSUPPORTED):" "$OUT/lit.log"
for t in $(sed -n 's/^FAIL: mtsched :: Cuda\/\(.*\) (.*/\1/p' "$OUT/lit.log"); do
  for f in "$W/test/lit/Cuda/Output/$t".tmp*; do [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }; done
done >> "$OUT/lit.log" 2>&1
grep -h "run @" "$W"/test/lit/Cuda/Output/attention-mask-run.mir.tmp*.log 2>/dev/null > "$OUT/mask-run-lines.txt"
cat "$OUT/mask-run-lines.txt"

echo "== 2. gallery Llama-3-8B layer, one rank, --run against fp64"
# One graph per file, the TP group reduced to one rank.
python3 - "$ROOT/examples/gallery/llama3_8b_layer.mir" "$W" <<'PY'
import re, sys
src, w = sys.argv[1], sys.argv[2]
text = open(src).read().replace("group @tp = [0, 1]", "group @tp = [0]")
text = text.replace("world_size = 2", "world_size = 1")
head, graphs = [], {}
cur = None
for line in text.splitlines(True):
    m = re.match(r"graph @(\w+)\(", line)
    if m:
        cur = m.group(1)
        graphs[cur] = []
    if cur is None:
        head.append(line) if not line.startswith("//") else None
    else:
        graphs[cur].append(line)
        if line.startswith("}"):
            cur = None
for name, lines in graphs.items():
    open("%s/%s.mir" % (w, name), "w").write("".join(head) + "".join(lines))
    print(name)
PY
for g in llama3_8b_layer_decode llama3_8b_layer_prefill; do
  # What is left of the 3 minutes (decode first: it matters most).
  T=$(left); [ "$T" -lt 10 ] && { echo "$g skipped: out of time"; continue; }
  timeout $T "$OPT" "$W/$g.mir" --pipeline=default --backend=cuda --run --quiet \
    -o "$OUT/$g.decided.mir" 2> "$OUT/$g.log"
  echo "$g rc=$?"
  grep -E "run @|error" "$OUT/$g.log" | tail -8
  grep -o "multi_template_buffer attention([^)]*) {[^}]*} .*decided [a-z0-9_]*" "$OUT/$g.decided.mir" | sed 's/choices.*decided/... decided/'
done
