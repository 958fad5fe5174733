"""mtsched_torch: import PyTorch modules into mtsched's IR.

    from mtsched_torch import import_module
    res = import_module(module, [torch.empty(8, 4096, dtype=torch.bfloat16,
                                             device="meta")],
                        name="mlp", world_size=2)
    open("mlp.mir", "w").write(res.text())

See docs/IMPORT.md for the op mapping, the collectives and the command line
(``scripts/mtsched-import``).
"""

import ast
import importlib.util
import os
import re
import sys

import torch

from . import collectives, ir, trace as _trace
from .convert import Converter

__all__ = ["import_module", "convert", "Result", "load_factory",
           "parse_input", "build_inputs", "collectives"]

_TORCH_DTYPES = {
    "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "i32": torch.int32, "i64": torch.int64,
    "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
}


class Result:
    """What an import produced: the IR module (with this graph in it), the
    graph, its inputs (name, kind, PyTorch name, transposed, type) and the
    unmapped ops by name and count."""

    def __init__(self, module, graph, inputs, unmapped, tracer, outputs,
                 constants=None):
        self.module = module
        # IR name -> CPU tensor of the inputs folded at import (kind
        # "constant"): masks, position tables, index vectors.
        self.constants = dict(constants or {})
        self.graph = graph
        self.inputs = inputs
        self.unmapped = unmapped
        self.tracer = tracer
        self.outputs = outputs

    def text(self):
        return self.module.text()

    @property
    def fully_mapped(self):
        return not self.unmapped


def convert(traced, name, world_size=1, group_names=None, module=None,
            quiet=False):
    """A Traced graph into an IR graph appended to ``module`` (a new
    ir.Module if None)."""
    conv = Converter(traced, name, world_size, group_names, module, quiet)
    g = conv.run()
    conv.graph.comments.append(
        "imported by mtsched_torch (%s): %d nodes, %d custom%s"
        % (traced.tracer, len(g.nodes),
           sum(conv.unmapped.values()),
           "" if not conv.unmapped else " (" + ", ".join(
               "%s x%d" % kv for kv in sorted(conv.unmapped.items())) + ")"))
    conv.module.graphs.append(g)
    conv.warn()
    r = Result(conv.module, g, conv.input_infos, conv.unmapped,
               traced.tracer, list(g.outputs), conv.constants)
    r.reasons = dict(conv.unmapped_reasons)
    r.sources = dict(conv.sources)
    return r


def import_module(module, inputs, name, world_size=1, tracer="auto",
                  input_names=None, groups=None, collectives_mode=None,
                  ir_module=None, quiet=False, group_names=None):
    """Traces ``module(*inputs)`` and converts it.

    inputs: tensors (meta tensors: no memory) with the per-rank shapes.
    groups: ``{name: size}`` of the process groups the module uses
    (default: ``module.mtsched_groups`` if it has one).
    collectives_mode: see collectives.set_mode (default: export uses the
    functional collectives, make_fx the mtsched:: ops).
    group_names: ``{PyTorch group name: IR group name}`` for collectives
    already in the module's graph (a Dynamo graph's functional collectives
    name real process groups; the torch.compile backend maps those that
    span the world to ``"world"``).
    """
    if tracer == "auto":
        tracer = "export" if _trace.has_export() else "make_fx"
    if collectives_mode is None:
        collectives_mode = "functional" if (
            tracer == "export" and collectives.functional_available()) \
            else "mtsched"
    if groups is None:
        groups = dict(getattr(module, "mtsched_groups", {}) or {})
    with collectives.mode(collectives_mode):
        # No groups to set up: leave the helpers' groups as they are (a
        # program's real process groups, collectives.use_process_group).
        reverse = collectives.setup_groups(groups, world_size) \
            if groups else {}
        reverse.update(group_names or {})
        t = _trace.trace(module, list(inputs), tracer, input_names)
        return convert(t, name, world_size, reverse, ir_module, quiet)


def load_factory(spec):
    """``path/to/model.py:factory`` or ``package.module:factory``."""
    if ":" not in spec:
        raise ValueError("expected FILE.py:FACTORY or MODULE:FACTORY, got %r"
                         % spec)
    path, fn = spec.rsplit(":", 1)
    if path.endswith(".py") or os.sep in path:
        mod_name = "mtsched_user_" + re.sub(r"\W", "_",
                                            os.path.basename(path)[:-3])
        s = importlib.util.spec_from_file_location(mod_name, path)
        if s is None:
            raise ValueError("cannot load %s" % path)
        mod = importlib.util.module_from_spec(s)
        sys.modules[mod_name] = mod
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        s.loader.exec_module(mod)
    else:
        mod = importlib.import_module(path)
    if not hasattr(mod, fn):
        raise ValueError("%s has no factory %r" % (path, fn))
    return getattr(mod, fn)


_SPEC = re.compile(r"(?:([A-Za-z_][A-Za-z0-9_]*)=)?([a-z0-9]+)\[([0-9, ]*)\]\Z")


def parse_input(spec):
    """``x=bf16[8,4096]`` or ``bf16[8,4096]`` -> (name or None, dtype, shape)."""
    m = _SPEC.match(spec.strip())
    if not m or m.group(2) not in _TORCH_DTYPES:
        raise ValueError("bad input spec %r (expected NAME=DTYPE[d0,d1,...], "
                         "DTYPE one of f32, f16, bf16, i32, i64)" % spec)
    dims = [int(d) for d in m.group(3).replace(" ", "").split(",") if d]
    return m.group(1), _TORCH_DTYPES[m.group(2)], tuple(dims)


def build_inputs(specs, device="meta"):
    """Tensors (uninitialised, on device) and names for input specs."""
    tensors, names = [], []
    for i, s in enumerate(specs):
        n, dt, shape = parse_input(s) if isinstance(s, str) else s
        tensors.append(torch.empty(shape, dtype=dt, device=device))
        names.append(n or ("x" if len(specs) == 1 else "x%d" % i))
    return tensors, names


def parse_kwargs(items):
    """``key=value`` strings (values as Python literals, else strings)."""
    out = {}
    for it in items or []:
        if "=" not in it:
            raise ValueError("expected KEY=VALUE, got %r" % it)
        k, v = it.split("=", 1)
        name = v[len("torch."):] if v.startswith("torch.") else v
        if name in _TORCH_DTYPES:
            out[k] = _TORCH_DTYPES[name]
            continue
        try:
            out[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            out[k] = v
    return out
