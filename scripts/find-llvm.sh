# Sourced by the scripts that build (build.sh, gpu-test.sh): chooses the LLVM
# and the compiler. Not a command of its own.
#
#   MTSCHED_LLVM_CONFIG   llvm-config of the LLVM to build with (name or path);
#                         default: the newest LLVM 19 or newer among
#                         llvm-config-NN and llvm-config on PATH and
#                         /usr/lib/llvm-NN/bin/llvm-config
#   MTSCHED_CC/MTSCHED_CXX  the compilers; default: that LLVM's clang
#                         (clang-NN / clang++-NN on PATH, else its bindir's)
#
# mtsched_find_llvm sets LLVM_CONFIG, LLVM_MAJOR, CC_BIN and CXX_BIN, or
# prints why not and returns 1.

MTSCHED_MIN_LLVM_MAJOR=19

mtsched_llvm_major() { # llvm-config -> its major version, or nothing
  local V
  V="$("$1" --version 2>/dev/null)" || return 0
  [[ "$V" =~ ^([0-9]+)\. ]] && echo "${BASH_REMATCH[1]}"
}

mtsched_find_llvm() {
  LLVM_CONFIG=""
  LLVM_MAJOR=""
  if [[ -n "${MTSCHED_LLVM_CONFIG:-}" ]]; then
    LLVM_CONFIG="$(command -v "$MTSCHED_LLVM_CONFIG" || true)"
    if [[ -z "$LLVM_CONFIG" ]]; then
      echo "error: MTSCHED_LLVM_CONFIG='$MTSCHED_LLVM_CONFIG' not found" >&2
      return 1
    fi
    LLVM_MAJOR="$(mtsched_llvm_major "$LLVM_CONFIG")"
    if [[ -z "$LLVM_MAJOR" || "$LLVM_MAJOR" -lt $MTSCHED_MIN_LLVM_MAJOR ]]; then
      echo "error: $LLVM_CONFIG is LLVM '${LLVM_MAJOR:-?}'; mtsched needs LLVM $MTSCHED_MIN_LLVM_MAJOR or newer" >&2
      return 1
    fi
  else
    local C M
    local -a CANDIDATES=()
    while IFS= read -r C; do
      CANDIDATES+=("$(command -v "$C")")
    done < <(compgen -c llvm-config | grep -E '^llvm-config(-[0-9]+)?$' | sort -u)
    for C in /usr/lib/llvm-[0-9]*/bin/llvm-config; do
      [[ -x "$C" ]] && CANDIDATES+=("$C")
    done
    for C in "${CANDIDATES[@]}"; do
      M="$(mtsched_llvm_major "$C")"
      [[ -n "$M" && "$M" -ge $MTSCHED_MIN_LLVM_MAJOR ]] || continue
      if [[ -z "$LLVM_MAJOR" || "$M" -gt "$LLVM_MAJOR" ]]; then
        LLVM_CONFIG="$C"
        LLVM_MAJOR="$M"
      fi
    done
    if [[ -z "$LLVM_CONFIG" ]]; then
      echo "error: no llvm-config of LLVM $MTSCHED_MIN_LLVM_MAJOR or newer found;" \
        "run 'bash scripts/setup.sh' or set MTSCHED_LLVM_CONFIG" >&2
      return 1
    fi
  fi

  local BINDIR
  BINDIR="$("$LLVM_CONFIG" --bindir)"
  CC_BIN="${MTSCHED_CC:-}"
  CXX_BIN="${MTSCHED_CXX:-}"
  if [[ -z "$CC_BIN" ]]; then
    CC_BIN="$(command -v "clang-$LLVM_MAJOR" || true)"
    [[ -z "$CC_BIN" && -x "$BINDIR/clang" ]] && CC_BIN="$BINDIR/clang"
  else
    CC_BIN="$(command -v "$CC_BIN" || true)"
  fi
  if [[ -z "$CXX_BIN" ]]; then
    CXX_BIN="$(command -v "clang++-$LLVM_MAJOR" || true)"
    [[ -z "$CXX_BIN" && -x "$BINDIR/clang++" ]] && CXX_BIN="$BINDIR/clang++"
  else
    CXX_BIN="$(command -v "$CXX_BIN" || true)"
  fi
  if [[ -z "$CC_BIN" || -z "$CXX_BIN" ]]; then
    echo "error: compiler not found (${MTSCHED_CC:-clang-$LLVM_MAJOR} /" \
      "${MTSCHED_CXX:-clang++-$LLVM_MAJOR}); run 'bash scripts/setup.sh'" \
      "or set MTSCHED_CC and MTSCHED_CXX" >&2
    return 1
  fi
}
