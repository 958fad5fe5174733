#!/usr/bin/env python3
"""A flat fused kernel of mtsched (a `--dump-kernels` file) in other shapes
of its loop: UNROLL iterations a thread (1, 2, 4, 8) and 128, 256 or 512
threads a block, each checked bitwise against the kernel as generated,
then timed in turn (CUDA graphs of 10 launches, 2 rounds).

  pointwise-sweep.py KERNEL.cu IN_ELEMS[,IN_ELEMS...] OUT_ELEMS
IN_ELEMS: each input's elements, in the signature's order (bf16 values);
OUT_ELEMS: the one output's. Prints per variant microseconds a launch and
the bytes moved (inputs read once, output written) per second. BLOCKS
(environment, default "128 256 512"): the block sizes; REDUCE_UNROLL: a
layout group's sum/max loop unrolled that deep instead. Each variant is
checked bitwise against the first one built.
"""
import importlib.util
import math
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "attn_dec_timeline", os.path.join(HERE, "attn-dec-timeline.py"))
tl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tl)  # the NVRTC/driver loader and Kernel


def variant(src, unroll, block, vec=1):
    out = re.sub(r"#define UNROLL \d+", "#define UNROLL %d" % unroll, src)
    out = out.replace("__launch_bounds__(256)", "__launch_bounds__(%d)" % block)
    out = re.sub(r"(blockIdx\.x|gridDim\.x|uu) \* 256 \*",
                 lambda m: "%s * %d *" % (m.group(1), block), out)
    out = out.replace("blockIdx.x * 256 + threadIdx.x",
                      "blockIdx.x * %d + threadIdx.x" % block)
    # A layout group's stride: gridDim.x * 256 * Vec, one literal.
    out = out.replace("gridDim.x * %d)" % (256 * vec), "gridDim.x * %d)" % (block * vec))
    # A layout group's sum/max loop: REDUCE_UNROLL (environment) deep.
    ru = os.environ.get("REDUCE_UNROLL")
    if ru:
        out = re.sub(r"#pragma unroll \d+\n(\s*)for \(int d",
                     lambda m: "#pragma unroll %s\n%sfor (int d" % (ru, m.group(1)), out)
    return out


def main():
    path, ins, outs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    src = open(path).read()
    name = re.search(r'__global__ void __launch_bounds__\(\d+\) (\w+)\(', src).group(1)
    # VEC, or a layout group's literal: `threadIdx.x) * 8;`.
    m = re.search(r"threadIdx\.x\) \* (\d+);", src)
    vec = tl.define(src, "VEC") or (int(m.group(1)) if m else 1)
    sizes = [int(x) for x in ins.split(",")]
    torch.manual_seed(0)
    xs = [torch.randn(n, device="cuda", dtype=torch.bfloat16) for n in sizes]
    ys = {}
    moved = 2 * (sum(sizes) + outs)
    groups = math.ceil(outs / vec)
    has_unroll = "#define UNROLL" in src
    res = {}
    for unroll in ((1, 2, 4, 8) if has_unroll else (1,)):
        for block in [int(b) for b in os.environ.get("BLOCKS", "128 256 512").split()]:
            tag = "u%d_b%d" % (unroll, block)
            try:
                k = tl.Kernel(variant(src, unroll, block, vec), name, 0)
            except Exception as e:
                print("  %s: not built: %s" % (tag, str(e)[:200]))
                continue
            y = torch.empty(outs, device="cuda", dtype=torch.bfloat16)
            ptrs = [ctypes_ptr(t) for t in xs + [y]]
            args = tl.ctypes.c_void_p * len(ptrs)
            a = args(*[tl.ctypes.cast(tl.ctypes.byref(p), tl.ctypes.c_void_p)
                       for p in ptrs])
            grid = max(1, min(math.ceil(groups / (block * unroll)), 1 << 20))

            def go(_i, k=k, a=a, grid=grid, block=block, keep=ptrs):
                stream = tl.ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
                tl.ck(tl.CU.cuLaunchKernel(k.fn, grid, 1, 1, block, 1, 1, 0, stream,
                                           a, None), "cuLaunchKernel")
            go(0)
            torch.cuda.synchronize()
            ys[tag] = (y, go, k.regs)
    ref = next(iter(ys.values()))[0]
    for tag, (y, go, regs) in ys.items():
        same = torch.equal(y, ref)
        print("  %s: %s; %s" % (tag, "same bits" if same else "DIFFERS", regs), flush=True)
    for rnd in range(2):
        for tag, (y, go, regs) in ys.items():
            res.setdefault(tag, []).append(tl.gtime(go, 1, loop=10))
    for tag, ts in res.items():
        us = min(ts)
        print("%-10s %s us  %.2f TB/s" % (tag, " ".join("%.1f" % t for t in ts),
                                         moved / us / 1e6), flush=True)


def ctypes_ptr(t):
    return tl.ctypes.c_void_p(t.data_ptr())


if __name__ == "__main__":
    main()
