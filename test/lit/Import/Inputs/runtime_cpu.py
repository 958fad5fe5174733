"""The runtime library's cpu path against eager PyTorch: a tiny layer is
imported, decided by mtsched-opt (the simulator), loaded through ctypes
(mtsched_torch.runtime) after torch, run on numpy inputs and compared.

    runtime_cpu.py MTSCHED_OPT LIBRARY OUTDIR FACTORY DTYPE
"""

import os
import subprocess
import sys

import numpy as np
import torch

from mtsched_torch import import_module, load_factory, runtime
from mtsched_torch.compare import (TOLERANCE, errors, init_weights,
                                   ir_input_tensors)


def main():
    opt, lib, out, factory, dtype = sys.argv[1:6]
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    os.makedirs(out, exist_ok=True)
    name = factory.rsplit(":", 1)[1]
    module = load_factory(factory)(dtype=tdt)
    module.eval()
    init_weights(module, 0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 64, generator=g).to(tdt)
    res = import_module(module, [x], name, 1, "make_fx", ["x"], quiet=True)
    mir = os.path.join(out, name + ".mir")
    with open(mir, "w") as f:
        f.write(res.text())
    decided = os.path.join(out, name + ".decided.mir")
    subprocess.run([opt, "--pipeline=default", "--quiet", "--no-cache",
                    "-o", decided, mir], check=True)
    with open(decided) as f:
        mod = runtime.Module(f.read(), library=lib)
    graph = mod.graph(device="cpu")
    print("graph @%s: %d inputs, %d outputs, %r"
          % (mod.graph_names[0], len(graph.inputs), len(graph.outputs),
             [t for t in graph.inputs if t.name == "x"][0]))
    ins = [t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
           for t in ir_input_tensors(res, module, [x], ["x"])]
    ours = graph.run(ins)
    # Twice: a prepared graph is reusable and deterministic.
    again = graph.run(ins)
    assert all(np.array_equal(a, b) for a, b in zip(ours, again))
    with torch.no_grad():
        ref = module(x)
    refs = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    ok = True
    for o, r, t in zip(ours, refs, graph.outputs):
        mx, nrm = errors(o, r.float().numpy())
        tol = TOLERANCE[dtype]
        ok &= nrm <= tol
        print("output %%%s %s%s: norm_rel %.1e (tolerance %g)"
              % (t.name, t.dtype, list(t.shape), nrm, tol))
    print("%s %s: %s" % (name, dtype, "match" if ok else "MISMATCH"))
    # What the library refuses, it says, with a place.
    for bad in ["graph @g(%x: f32[2]) {\n  %y = frob(%x) : f32[2]\n}\n",
                "graph @g(%x: f32[2]) attributes {world_size = 2} {\n"
                "  return %x\n}\n"]:
        try:
            runtime.Module(bad, library=lib).graph(device="cpu")
            print("accepted: %r" % bad)
        except runtime.RuntimeError_ as e:
            print("refused: %s" % str(e).splitlines()[0])
    # Several ranks from Python: the ranks and the id are checked as data;
    # a two-rank graph does not run on the interpreter.
    two = runtime.Module("graph @g(%x: f32[2]) attributes {world_size = 2} "
                         "{\n  %a = all_reduce(%x) : f32[2]\n  return %a\n"
                         "}\n", library=lib)
    for args in [(0, 2, b"short"), (2, 2, bytes(128)), (1, 2, bytes(128))]:
        try:
            two.set_ranks(*args)
            two.graph(device="cpu")
            print("accepted: rank %d of %d" % args[:2])
        except runtime.RuntimeError_ as e:
            print("refused: %s" % str(e).splitlines()[0])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
