#!/usr/bin/env bash
# The real layers of examples/layers/ (and the fp8 layer) on one GPU, at one
# rank (docs/CUDA.md; docs/BENCHMARKS.md): each layer is written with a
# one-rank group (examples/layers/gen_layers.py --one-rank: per-rank shapes,
# collectives over one rank), decided with --backend=cuda, run with --run
# and every output compared with the fp64 interpreter, on inputs of a
# model's scale (scripts/layer_inputs.py: weights N(0, 1/fan-in), real
# rotary tables; --run's default uniform inputs make attention an argmax
# that one bf16 rounding flips).
#
#   bash scripts/gpu-layers.sh [decode|prefill|all]   # default: decode
#   LAYERS="mixtral_moe megatron_sp" bash scripts/gpu-layers.sh all  # only those
#
# Prefill graphs are checked too, but the fp64 interpreter takes minutes
# on them (the MoE layer most), so each run has a time limit
# ($LAYER_TIMEOUT, default 400 s: Mixtral's prefill takes about 235 s) and
# a run past it is reported as such.
# The driver: $MTSCHED_OPT, else .device/bin (scripts/gpu-test.sh --pack),
# else build/. Results go to $OUT/layers (else ./gpu-results/layers).
# Exits non-zero if a run fails or an output differs.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/device-driver.sh"
find_mtsched_opt "$ROOT"
# layer_inputs.py needs numpy: the interpreter that has torch and numpy.
source "$ROOT/scripts/torch-python.sh"
PY="$(find_torch_python)" || PY=python3
WHICH=${1:-decode}
R="${OUT:-$ROOT/gpu-results}/layers"
mkdir -p "$R"
W="$(mktemp -d)"
python3 "$ROOT/examples/layers/gen_layers.py" --one-rank "$W" || exit 1
# The fp8 layer is written at TP=2 with per-rank shapes: one rank of it.
[[ -f "$ROOT/examples/fp8_gemm_layer.mir" ]] &&
  sed -e 's/world_size = 2/world_size = 1/' -e 's/group @tp = \[0, 1\]/group @tp = [0]/' \
    "$ROOT/examples/fp8_gemm_layer.mir" >"$W/fp8_gemm_layer.mir"
fail=0
nvidia-smi -L 2>/dev/null || true
for f in "$W"/*.mir; do
  name=$(basename "$f" .mir)
  [[ -z "${LAYERS:-}" || " $LAYERS " = *" $name "* ]] || continue
  for g in decode prefill; do
    [[ $WHICH = all || $WHICH = "$g" ]] || continue
    grep -q "^graph @$g(" "$f" || continue
    # One graph per run: keep the groups and that graph.
    awk -v g="$g" '/^graph @/ {keep = ($0 ~ "^graph @" g "\\(")} /^group @/ {print; next} keep' \
      "$f" >"$W/$name-$g.mir"
    echo "== $name @$g"
    rm -rf "$W/in" && mkdir -p "$W/in"
    "$PY" "$ROOT/scripts/layer_inputs.py" "$W/$name-$g.mir" "$W/in" || { fail=1; continue; }
    t0=$EPOCHREALTIME
    timeout "${LAYER_TIMEOUT:-400}" "$BIN" "$W/$name-$g.mir" --pipeline=default --backend=cuda \
      --no-cache --kernel-cache-dir="$W/kc" --quiet --run --run-inputs="$W/in" \
      >"$R/$name-$g.decided.mir" 2>"$R/$name-$g.log"
    rc=$?
    wall=$(python3 -c "print(round($EPOCHREALTIME - $t0, 1))")
    grep -h 'run @\|error' "$R/$name-$g.log" | head -20
    if [[ $rc = 124 ]]; then
      echo "layer $name @$g: TIMEOUT after ${LAYER_TIMEOUT:-400} s" | tee -a "$R/summary.txt"
      fail=1
    elif [[ $rc != 0 ]] || ! grep -q 'matches the fp64 reference' "$R/$name-$g.log"; then
      echo "layer $name @$g: FAILED rc=$rc wall_s=$wall" | tee -a "$R/summary.txt"
      fail=1
    else
      echo "layer $name @$g: ok wall_s=$wall $(grep -h 'run @' "$R/$name-$g.log" | tr '\n' ' ')" |
        tee -a "$R/summary.txt"
    fi
  done
done
rm -rf "$W"
exit $fail
