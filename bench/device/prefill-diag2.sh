#!/usr/bin/env bash
# Second look at the gallery Llama-3-8B prefill layer (attn-prefill-diag.sh:
# the attention alone is right at its shapes, its output inside the layer is
# not): the layer with the attention's operands returned too (q after RoPE
# and the transpose, the new keys, the concatenated keys), and the layer with
# no fusion at all. Results under $OUT.
set -u
ROOT=$PWD; D=$ROOT/.device; OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
OPT=$D/bin/mtsched-opt
W=$(mktemp -d)
sed -n '/^python3 - "\$ROOT/,/^PY$/p' bench/device/attn-prefill-diag.sh | sed '1d;$d' > "$W/split.py"
python3 "$W/split.py" examples/gallery/llama3_8b_layer.mir "$W/p.mir"
sed 's/  return %add_6, %bmm_1.attention, %add_4, %mul_8/  return %add_6, %bmm_1.attention, %transpose_2, %add_1, %add_2, %cat_2, %bmm_1.q, %bmm_1.kv_k.r/' "$W/p.mir" > "$W/p2.mir"
timeout 100 "$OPT" "$W/p2.mir" --pipeline=default --backend=cuda --no-cache --kernel-cache-dir="$W/kc" --run -o "$OUT/p2.decided.mir" > "$OUT/p2.log" 2>&1
echo "intermediates rc=$?"; grep -E "run @|error" "$OUT/p2.log" | cut -c1-160
timeout 100 "$OPT" "$W/p.mir" --pipeline=default --backend=cuda --no-cache --kernel-cache-dir="$W/kc" --fusion-heuristic=never --run -o "$OUT/never.decided.mir" > "$OUT/never.log" 2>&1
echo "no fusion rc=$?"; grep -E "run @|error" "$OUT/never.log" | cut -c1-160
