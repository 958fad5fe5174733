"""Command line: a PyTorch module factory, input shapes and a world size in,
a ``.mir`` file out.

    python3 -m mtsched_torch examples/torch/llama.py:llama3_8b_mlp \\
        --input x=bf16[8,4096] --world-size 2 -o mlp.mir

(``scripts/mtsched-import`` runs this with an interpreter that has torch.)
"""

import argparse
import inspect
import json
import os
import sys
import traceback

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
                   help="fail (exit 2, one error line per op) if any op "
                   "became a custom op")
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
    except Exception as e:  # noqa: BLE001 - one line, never a traceback
        print("mtsched-import: error: %s" % one_line(e), file=sys.stderr)
        return 2
    name = a.name or a.factory.rsplit(":", 1)[1]
    try:
        res = import_module(module, inputs, name, a.world_size, a.tracer,
                            names, collectives_mode=a.collectives,
                            quiet=a.strict)
    except Exception as e:  # noqa: BLE001 - one line, never a traceback
        print("mtsched-import: error: cannot trace %s: %s"
              % (a.factory, one_line(e)), file=sys.stderr)
        return 2
    if a.strict and res.unmapped:
        for n in res.graph.nodes:
            if n.custom:
                print("mtsched-import: error: %s%s is outside the opset: %s"
                      % (res.sources.get(n.name, "") and
                         res.sources[n.name] + ": ", n.op,
                         res.reasons.get(n.op, "no mapping")),
                      file=sys.stderr)
        return 2
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
    return 0


def one_line(e):
    """An exception as one line: the user's source line it came from (the
    innermost frame outside PyTorch and this package), its type and the
    first line of its message."""
    where = ""
    here = os.path.dirname(os.path.abspath(__file__))
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    for fr in traceback.extract_tb(e.__traceback__):
        f = os.path.abspath(fr.filename)
        if f.startswith(here) or f.startswith(torch_dir) or \
                "/functorch/" in f or f.startswith(sys.prefix) or \
                fr.filename.startswith("<"):
            continue
        where = "%s:%d: " % (fr.filename, fr.lineno)
    msg = str(e).strip().splitlines()
    msg = msg[0] if msg else ""
    if len(msg) > 200:
        msg = msg[:msg.find(". ") + 1] if 0 < msg.find(". ") < 200 \
            else msg[:200] + "..."
    if isinstance(e, (ValueError, OSError)) and not where:
        return msg
    if "data-dependent" in msg or "nonzero" in msg or \
            "dynamic" in msg.lower():
        msg = "a data-dependent shape (" + msg + ")"
    return "%s%s: %s" % (where, type(e).__name__, msg)


if __name__ == "__main__":
    sys.exit(main())
