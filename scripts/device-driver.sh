# Sourced by the GPU scripts (gpu-attention.sh, gpu-layers.sh,
# gpu-torch-compare.sh): find_mtsched_opt ROOT sets BIN to the mtsched-opt
# to run: $MTSCHED_OPT, else ROOT/.device/bin (scripts/gpu-test.sh --pack;
# LD_LIBRARY_PATH then gains the libraries it packed), else ROOT/build.
find_mtsched_opt() {
  local ROOT=$1
  if [[ -n "${MTSCHED_OPT:-}" ]]; then
    BIN="$MTSCHED_OPT"
  elif [[ -x "$ROOT/.device/bin/mtsched-opt" ]]; then
    BIN="$ROOT/.device/bin/mtsched-opt"
    export LD_LIBRARY_PATH="$ROOT/.device/lib:$ROOT/.device/lib-mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    BIN="$ROOT/build/tools/mtsched-opt/mtsched-opt"
  fi
}

# device_lit_tree ROOT D: sets W to a new temporary lit tree that runs
# ROOT's test/lit with the tools packed in D (scripts/gpu-test.sh --pack:
# D/bin's mtsched-opt, FileCheck and not; no LLVM on a GPU machine):
# the driver copied to W/tools/mtsched-opt with the MPI plugin beside it
# (tools/lib/mtsched, where the copied driver looks), and
# W/test/lit/lit.site.cfg.py. Run lit on "$W/test/lit/<Dir>".
device_lit_tree() {
  local ROOT=$1 D=$2
  W=$(mktemp -d)
  mkdir -p "$W/test/lit/Cuda" "$W/tools/mtsched-opt"
  cp "$D/bin/mtsched-opt" "$W/tools/mtsched-opt/"
  if [ -d "$D/lib/mtsched" ]; then
    mkdir -p "$W/tools/lib" && cp -r "$D/lib/mtsched" "$W/tools/lib/"
  fi
  cat >"$W/test/lit/lit.site.cfg.py" <<SITE
import os
config.mtsched_src_root = "$ROOT"
config.mtsched_obj_root = "$W"
config.mtsched_tools_dir = "$W/tools/mtsched-opt"
config.llvm_tools_dir = "$D/bin"
config.python = "python3"
lit_config.load_config(config, os.path.join(config.mtsched_src_root, "test/lit/lit.cfg.py"))
SITE
}

# device_script_setup ROOT NAME: what a bench/device script starts with:
# NVLink multicast off, the working directory ROOT, BIN (find_mtsched_opt),
# PY (a python3 with torch where there is one, else python3) and OUT (the
# caller's, else ROOT/gpu-results/NAME), created.
device_script_setup() {
  local ROOT=$1 NAME=$2
  export NCCL_NVLS_ENABLE=0
  cd "$ROOT" || exit 2
  find_mtsched_opt "$ROOT"
  # shellcheck source=scripts/torch-python.sh
  source "$ROOT/scripts/torch-python.sh"
  PY="$(find_torch_python)" || PY=python3
  OUT=${OUT:-$ROOT/gpu-results/$NAME}
  mkdir -p "$OUT"
}

# device_log_start LOG SUM DEADLINE: starts a bench/device script's log
# (the date, the GPUs, mtsched-opt's version), copies it to the summary
# SUM, and starts the budget that `late` reads (START, DEADLINE seconds).
device_log_start() {
  LOG=$1 SUM=$2 DEADLINE=$3
  START=$SECONDS
  {
    date -u +%FT%TZ
    nvidia-smi -L
    "$BIN" --version | head -1
  } > "$LOG" 2>&1
  cp "$LOG" "$SUM"
}

# late WHAT: true (and says so in the summary and the log) once the
# budget device_log_start started is spent.
late() {
  if (( SECONDS - START > DEADLINE )); then
    echo "skipped (past ${DEADLINE} s): $1" | tee -a "$SUM" >> "$LOG"
    return 0
  fi
  return 1
}

# device_tune_attention K G T: mtsched-opt ($BIN) tunes the attention graph
# K/G.mir on the GPU within T seconds over the choices of K/G.json (a
# bench/choices_file.py file; nothing pruned, no caches, attn_math off),
# each choice checked against fp64 before it is timed: the report at
# K/report-G.json, the decided IR at K/decided.part, the log appended to
# $OUT/decided.log; mtsched-opt's status (124: out of time).
device_tune_attention() {
  local K=$1 G=$2 T=$3
  timeout "$T" "$BIN" "$K/$G.mir" --pipeline=default --backend=cuda \
    --prune-top-k=0 --no-cache --kernel-cache-dir="$K/kc" --quiet \
    --choice-timeout-ms=20000 --choices-file="$K/$G.json" \
    --disable-choices=attn_math --report="$K/report-$G.json" \
    > "$K/decided.part" 2>> "$OUT/decided.log"
}

# device_dump_decode_case K G TILE MODE LOG: the decode tile TILE (a
# bench/choices_file.py token) of bench/attention-llama3.mir's graph G
# (decode_bN: Llama-3-8B, 4096 keys) dumped as CUDA C++ under K, and its
# line for bench/device/attn-dec-timeline.py (KERNEL.cu B HQ HKV SKV D
# MODE) appended to K/cases.txt; mtsched-opt's messages appended to LOG.
device_dump_decode_case() {
  local K=$1 G=$2 TILE=$3 MODE=$4 LOG=$5 F
  python3 bench/choices_file.py attn "$K/one.json" "$TILE"
  sed -n "/^graph @$G(/,/^}/p" bench/attention-llama3.mir > "$K/$G.mir"
  timeout 8 "$BIN" "$K/$G.mir" --pipeline=lower,fuse,autotune --prune-top-k=0 \
    --choices-file="$K/one.json" --disable-choices=attn_math --no-cache \
    --kernel-cache-dir="$K/kc" --dump-kernels="$K/dump-$G-$TILE" --quiet \
    > /dev/null 2>> "$LOG"
  F=$(ls "$K/dump-$G-$TILE"/*attn_dec*.cu 2>/dev/null | head -1)
  [ -n "$F" ] && echo "$F ${G#decode_b} 32 8 4096 128 $MODE" >> "$K/cases.txt"
}
