#!/usr/bin/env python3
"""Writes realistic inputs for a layer graph of examples/layers/ as .npy
files (one per graph input, the format of mtsched-opt --run-inputs).

  layer_inputs.py GRAPH.mir OUTDIR [--seed N]

--run's default inputs are uniform in [-1, 1], which is right for one
kernel but not for a whole layer: weights of that size make q.k logits of
thousands, a softmax that is an argmax, and an attention output that a
bf16 rounding of q flips. A model's weights are scaled by their fan-in, so
here: activations and caches N(0, 1); a weight [K, N] N(0, 1/K); a norm
weight 1 + N(0, 0.1); cos and sin the rotary tables of the positions the
graph covers (the last positions of a 4096-long sequence at decode).

fp8 layers (examples/fp8_gemm_layer.mir): an fp8 weight `w_x` is such a
weight divided by its per-tensor scale `s_w_x` = max|w| / 448 (so it spans
e4m3's range, as fp8 checkpoints store it); any other f32[] `s_*` is a
static activation scale, 16 / 448 (activations of N(0, 1)-sized rows
and their SwiGLU products span +-16).
"""
import re
import sys

import numpy as np


def inputs_of(text):
    m = re.search(r"^graph @[\w.]+\((.*)\)( attributes \{.*\})? \{$", text, re.M)
    if not m:
        sys.exit("layer_inputs: no graph in the file")
    return [(n, d, [int(x) for x in s.split(",") if x])
            for n, d, s in re.findall(r"%([\w.]+): (\w+)\[([\d,]*)\]", m.group(1))]


def rope(shape, base=500000.0):
    """cos or sin tables of shape [..., S or 1, D]: the rows are positions."""
    d = shape[-1]
    inv = 1.0 / base ** (np.arange(0, d, 2) / d)
    n = int(np.prod(shape[:-1]))
    pos = np.arange(4096 - n, 4096) if n < 4096 else np.arange(n)
    ang = np.outer(pos, inv)
    ang = np.concatenate([ang, ang], axis=1)
    return ang.reshape(shape)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
    rng = np.random.default_rng(seed)
    with open(sys.argv[1]) as f:
        text = f.read()
    out = sys.argv[2]
    scales = {}
    for name, dtype, shape in inputs_of(text):
        if name.startswith("s_") and dtype == "f32" and int(np.prod(shape)) == 1:
            continue  # after the weights they scale
        if dtype.startswith("f8"):
            a = rng.standard_normal(shape) / np.sqrt(shape[0])
            scales["s_" + name] = np.abs(a).max() / 448
            a = a / scales["s_" + name]
        elif name in ("cos", "sin"):
            a = rope(shape)
            a = np.cos(a) if name == "cos" else np.sin(a)
        elif name.startswith("g_"):
            a = 1 + 0.1 * rng.standard_normal(shape)
        elif name.startswith("w") and len(shape) == 2:
            a = rng.standard_normal(shape) / np.sqrt(shape[0])
        elif dtype.startswith("i"):
            a = np.zeros(shape, dtype=np.int64)
        else:
            a = rng.standard_normal(shape)
        if not dtype.startswith("i"):
            a = a.astype(np.float32)
        np.save(f"{out}/{name}.npy", a)
    for name, dtype, shape in inputs_of(text):
        if name.startswith("s_") and dtype == "f32" and int(np.prod(shape)) == 1:
            s = scales.get(name, 16 / 448)
            np.save(f"{out}/{name}.npy", np.full(shape, s, dtype=np.float32))


if __name__ == "__main__":
    main()
