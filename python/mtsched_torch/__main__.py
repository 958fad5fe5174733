"""Command line: a PyTorch module factory, input shapes and a world size in,
a ``.mir`` file out.

    python3 -m mtsched_torch examples/torch/llama.py:llama3_8b_mlp \\
        --input x=bf16[8,4096] --world-size 2 -o mlp.mir

(``scripts/mtsched-import`` runs this with an interpreter that has torch.)
"""

import argparse
import inspect
import json
import sys

import torch

from . import (build_inputs, import_module, load_factory, parse_kwargs,
               _trace)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="mtsched-import",
        description="Import a PyTorch module into mtsched IR (.mir). The "
        "factory is called with world_size=N (and device='meta' when it "
        "takes a device) and must return an nn.Module whose forward takes "
        "the inputs, with per-rank (sharded) shapes.")
    p.add_argument("factory", help="FILE.py:FUNCTION or MODULE:FUNCTION")
    p.add_argument("--input", "-i", action="append", default=[],
                   metavar="NAME=DTYPE[d0,...]",
                   help="one per forward argument, in order "
                   "(e.g. x=bf16[8,4096])")
    p.add_argument("--world-size", "-w", type=int, default=1,
                   help="ranks the graph runs on (default 1)")
    p.add_argument("--arg", "-a", action="append", default=[],
                   metavar="KEY=VALUE", help="extra factory argument "
                   "(Python literal), repeatable")
    p.add_argument("--name", help="graph name (default: the factory's)")
    p.add_argument("--tracer", default="auto",
                   choices=["auto", "export", "make_fx", "symbolic_trace"],
                   help="auto: torch.export on PyTorch 2.x, else make_fx")
    p.add_argument("--collectives", default=None,
                   choices=["mtsched", "functional"],
                   help="how the module's collectives are traced (default: "
                   "functional with torch.export, else mtsched)")
    p.add_argument("--device", default="meta",
                   help="device to build the module and inputs on "
                   "(default meta: no memory, no GPU)")
    p.add_argument("-o", "--output", default="-", help="output .mir "
                   "(default stdout)")
    p.add_argument("--inputs-json", metavar="FILE",
                   help="write the graph inputs (IR name, kind, PyTorch "
                   "name, transposed, type) as JSON")
    p.add_argument("--strict", action="store_true",
                   help="fail (exit 3) if any op became a custom op")
    a = p.parse_args(argv)
    if a.world_size < 1:
        p.error("--world-size must be at least 1")
    if not a.input:
        p.error("give each forward argument with --input NAME=DTYPE[shape]")
    try:
        factory = load_factory(a.factory)
        kwargs = parse_kwargs(a.arg)
        params = inspect.signature(factory).parameters
        if "world_size" in params:
            kwargs.setdefault("world_size", a.world_size)
        module = _trace.build_module(factory, kwargs, a.device)
        module.eval()
        inputs, names = build_inputs(a.input, a.device)
    except (ValueError, OSError, TypeError) as e:
        print("mtsched-import: error: %s" % e, file=sys.stderr)
        return 2
    name = a.name or a.factory.rsplit(":", 1)[1]
    res = import_module(module, inputs, name, a.world_size, a.tracer, names,
                        collectives_mode=a.collectives)
    text = res.text()
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    if a.inputs_json:
        with open(a.inputs_json, "w") as f:
            json.dump({"graph": res.graph.name, "tracer": res.tracer,
                       "torch": torch.__version__, "inputs": res.inputs,
                       "outputs": res.outputs,
                       "unmapped": dict(res.unmapped)}, f, indent=1)
    print("mtsched-import: @%s: %d inputs, %d nodes, %d custom (%s, PyTorch "
          "%s)" % (res.graph.name, len(res.graph.inputs),
                   len(res.graph.nodes), sum(res.unmapped.values()),
                   res.tracer, torch.__version__), file=sys.stderr)
    if a.strict and res.unmapped:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
