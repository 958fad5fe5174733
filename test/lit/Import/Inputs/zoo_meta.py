"""Runs every zoo model's eager forward in bf16 on the meta device (no
values, no memory): a tensor the model makes on the CPU (a mask or
position ids built without the input's device) meets the meta inputs and
fails, as it would on a GPU, where bench/zoo_gpu.py takes eager's outputs
as the reference. Prints one line per case, exit 1 if any failed."""

import os
import sys
import traceback

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                    "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))

import zoo_gpu  # noqa: E402

_repeat_interleave = torch.repeat_interleave


def repeat_interleave(x, repeats, dim=None, **kw):
    """PyTorch 1.13's meta kernel needs output_size; an int repeat is an
    expand + reshape (the same values on a real device)."""
    if x.device.type != "meta" or not isinstance(repeats, int) or \
            dim is None:
        return _repeat_interleave(x, repeats, dim, **kw)
    d = dim % x.dim()
    s = list(x.shape)
    y = x.unsqueeze(d + 1).expand(*s[:d + 1], repeats, *s[d + 1:])
    s[d] *= repeats
    return y.reshape(s)


torch.repeat_interleave = repeat_interleave
torch.Tensor.repeat_interleave = repeat_interleave

bad = 0
for size in ("decode", "prefill"):
    for e in zoo_gpu.zoo.ZOO:
        module, _, inputs = zoo_gpu.build(e, size, "meta", torch.bfloat16)
        try:
            outs = zoo_gpu.eager(module, inputs)
            assert all(o.device.type == "meta" for o in outs)
            print("zoo-meta: %s_%s ok" % (e.name, size))
        except Exception as ex:  # noqa: BLE001 - reported per case
            bad += 1
            where = [f for f in traceback.extract_tb(ex.__traceback__)
                     if "examples" in f.filename]
            print("zoo-meta: %s_%s FAIL %s: %s%s" % (
                e.name, size, type(ex).__name__, str(ex).splitlines()[0],
                " at %s:%d" % (os.path.basename(where[-1].filename),
                               where[-1].lineno) if where else ""))
sys.exit(1 if bad else 0)
