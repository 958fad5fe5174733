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
