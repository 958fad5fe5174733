# Sourced by scripts that need PyTorch: find_torch_python prints the first
# interpreter that imports torch and numpy ($MTSCHED_PYTHON, python3,
# /usr/bin/python3) and fails if none does.
find_torch_python() {
  local P
  for P in ${MTSCHED_PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$P" >/dev/null 2>&1 &&
      "$P" -c 'import torch, numpy' >/dev/null 2>&1; then
      command -v "$P"
      return 0
    fi
  done
  return 1
}
