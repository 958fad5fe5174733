#!/usr/bin/env bash
# Mixtral decode's layer IR (call 6's decided IR without its decisions) tuned by
# mtsched-opt with the torch backend's flags, alone and as a child of a PyTorch process
# (the second run met the first's autotune cache: only the first counts).
ROOT=$PWD; source scripts/device-driver.sh; device_script_setup "$ROOT" mx
export LD_LIBRARY_PATH=$ROOT/.device/lib:${LD_LIBRARY_PATH:-}
t() { grep -o "%bmm[_0-9]* = .*" "$1" | grep -o "decided [a-z0-9_.]*\|extern.cublas = [0-9.]*us\|gemm_wg_64x256x64_s4 = [0-9.]*us" | tr '\n' ' '; echo; }
timeout 120 "$BIN" .device/mx/layer-u.mir --pipeline=default --backend=cuda --quiet --kernel-cache-dir=/tmp/kc-l1 -o /tmp/l1.mir --report=$OUT/report-l1.json; echo "standalone:"; t /tmp/l1.mir
"$PY" - "$BIN" <<'PY'
import os, subprocess, sys, torch
x = torch.randn(4096, 4096, device="cuda")
y = x @ x
torch.cuda.synchronize()
print("torch", torch.__version__, "LD_LIBRARY_PATH", os.environ.get("LD_LIBRARY_PATH"))
cmd = [sys.argv[1], ".device/mx/layer-u.mir", "--pipeline=default", "--backend=cuda", "--quiet",
       "--kernel-cache-dir=/tmp/kc-l2", "-o", "/tmp/l2.mir", "--report=" + os.environ["OUT"] + "/report-l2.json"]
p = subprocess.Popen(cmd)
import time; time.sleep(3)
try:
    maps = open("/proc/%d/maps" % p.pid).read()
    print("cublas in the child:", sorted({l.split()[-1] for l in maps.splitlines() if "cublas" in l}))
except Exception as e:
    print("maps:", e)
p.wait()
maps = open("/proc/self/maps").read()
print("cublas in torch:", sorted({l.split()[-1] for l in maps.splitlines() if "cublas" in l}))
PY
echo "under torch:"; t /tmp/l2.mir
