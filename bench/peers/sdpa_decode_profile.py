"""PyTorch SDPA's decode kernels at Llama-3-8B shapes (Hq = 32, Hkv = 8,
D = 128, bf16, 4096 keys, one query), for a profile beside mtsched's
`attn_dec` kernels (bench/device/attn-dec16c.sh).

    python3 bench/peers/sdpa_decode_profile.py info [B ...]
        each kernel one SDPA call launches with the cuDNN backend and with
        the default dispatch (torch.profiler): name, grid, block, shared
        memory, registers per thread and device time, one line each.
    python3 bench/peers/sdpa_decode_profile.py run B N
        N calls with the cuDNN backend after 3 warm-up calls, each in an
        NVTX range "sdpa_prof" (for Nsight Compute's --nvtx-include).
"""
import json
import os
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def inputs(b):
    bf = dict(dtype=torch.bfloat16, device="cuda")
    return (torch.randn(b, 32, 1, 128, **bf), torch.randn(b, 8, 4096, 128, **bf),
            torch.randn(b, 8, 4096, 128, **bf))


def call(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def info(batches):
    for b in batches:
        q, k, v = inputs(b)
        for label, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                               ("default", None)):
            ctx = sdpa_kernel(backend) if backend else torch.no_grad()
            with ctx:
                for _ in range(3):
                    call(q, k, v)
                torch.cuda.synchronize()
                acts = [torch.profiler.ProfilerActivity.CUDA]
                with torch.profiler.profile(activities=acts) as prof:
                    for _ in range(5):
                        call(q, k, v)
                    torch.cuda.synchronize()
            path = os.path.join(tempfile.mkdtemp(), "trace.json")
            prof.export_chrome_trace(path)
            seen = {}
            for e in json.load(open(path)).get("traceEvents", []):
                if e.get("cat") != "kernel":
                    continue
                a = e.get("args", {})
                key = e["name"]
                s = seen.setdefault(key, {"n": 0, "us": [], "a": a})
                s["n"] += 1
                s["us"].append(float(e.get("dur", 0)))
            for name, s in seen.items():
                a = s["a"]
                us = sorted(s["us"])[len(s["us"]) // 2]
                print(f"B={b} {label}: {name[:160]} grid={a.get('grid')} "
                      f"block={a.get('block')} "
                      f"smem={a.get('shared memory')} "
                      f"regs={a.get('registers per thread')} "
                      f"blocks/SM={a.get('blocks per SM')} "
                      f"occupancy%={a.get('est. achieved occupancy %')} "
                      f"calls={s['n']} median_us={us:.2f}", flush=True)


def run(b, n):
    q, k, v = inputs(b)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(3):
            call(q, k, v)
        torch.cuda.synchronize()
        # Nsight Compute's --nvtx-include "sdpa_prof/" takes only these.
        for _ in range(n):
            torch.cuda.nvtx.range_push("sdpa_prof")
            call(q, k, v)
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"ran {3 + n} cuDNN SDPA calls at B={b}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "info":
        info([int(x) for x in sys.argv[2:]] or [16])
    elif sys.argv[1] == "run":
        run(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit("usage: sdpa_decode_profile.py info [B ...] | run B N")
