#!/bin/bash
# Runs one generated attention kernel (a .cu file from mtsched-opt
# --dump-kernels, f32 graphs only: the bf16/f16 conversions are inline PTX)
# on the CPU: every CUDA thread of a block is a host thread, __syncthreads a
# std::barrier, warp shuffles go through a per-warp buffer; blocks run one
# at a time, split-KV splits in reverse order. Compares with an fp64
# reference and checks that split-KV counters are back at zero; exits 1 if
# the maximum error exceeds 1e-4. Needs g++ with C++20 (std::barrier).
#
#   run.sh FILE.cu B HQ HKV SQ SKV D CAUSAL SCALE GRIDX GRIDY THREADS WSFLOATS [GRIDZ [MB MH MSQ]]
#
# MB MH MSQ: the kernel's additive mask is [MB, MH, MSQ, SKV] (f32; random,
# -inf at most keys but key 0).
#
# e.g. the flash tile of %o = attention(f32[2,4,3,8], f32[2,2,5,8], ...)
# {causal = true}:  run.sh o_attn_flash_16x32_w4.cu 2 4 2 3 5 8 1 0.35355339 1 4 128 0
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
f=$1
shift
name=$(grep -o '__launch_bounds__(THREADS) [a-zA-Z0-9_]*(' "$f" | head -1 | sed 's/.* //;s/(//')
T=$(mktemp -d)
python3 - "$f" >"$T/k.cpp" <<'PY'
import sys
s = open(sys.argv[1]).read()
s = s[s.index('// attention %'):]  # drop the prelude: the emulator has its own
s = s.replace('extern __shared__ __align__(16) float mt_smem[];', 'float *mt_smem = g_smem;')
s = s.replace('extern "C" ', '')
print('#include "emu_prelude.h"\n' + s + '\n#include "emu_main.h"\n')
PY
g++ -std=c++20 -O1 -w -pthread -I"$HERE" "$T/k.cpp" -o "$T/k.bin" -DKERNEL="$name" \
  -DB="$1" -DHQ_="$2" -DHKV_="$3" -DSQ_="$4" -DSKV_="$5" -DDD="$6" -DCAUS="$7" \
  -DSCALE="$8" -DGX="$9" -DGY="${10}" -DTH="${11}" -DWS="${12}" -DGZ="${13:-1}" \
  ${14:+-DMB="${14}" -DMH="${15}" -DMSQ="${16}"}
"$T/k.bin"
rc=$?
rm -rf "$T"
exit $rc
