"""The torch.compile backend's import step (mtsched_torch.backend):
Dynamo's graph to mtsched's IR (``_import``: torch.export, else make_fx;
Dynamo's lifted parameters held as parameters again, ``_Lifted``; with
several ranks the functional collectives over the world), and the import
cache (``<key>.import.json``, keyed by ``_graph_key``), so a second
process neither re-exports the graph nor runs it eagerly."""

import hashlib
import json
import os

import torch

from . import import_module
from .backend_base import Fallback, _cache_dir, _importer_version, _log


def _graph_key(gm, example_inputs, lifted, world=1):
    """The key of the imported IR for Dynamo's graph: its code, its
    inputs' and parameters' types, the values of the tensors it holds as
    attributes (the importer folds those into constants), the importer."""
    h = hashlib.sha256(_importer_version().encode())
    h.update(gm.code.encode())
    if world > 1:
        # Each rank its own entry (ranks may share a cache directory): a
        # rank never finds another's import while that one is writing it.
        import torch.distributed as dist
        h.update(b"world %d rank %d" % (world, dist.get_rank()))
    for i, x in enumerate(example_inputs):
        h.update(repr((i, tuple(x.shape), tuple(x.stride()), str(x.dtype),
                       x.device.type, i in lifted)).encode())
    params = {id(p) for p in gm.parameters()}
    for n, t in list(gm.named_parameters()) + list(gm.named_buffers()):
        h.update(repr((n, tuple(t.shape), str(t.dtype),
                       t.device.type)).encode())
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        t = gm
        for part in str(node.target).split("."):
            t = getattr(t, part, None)
        if isinstance(t, torch.Tensor) and id(t) not in params:
            c = t.detach().cpu().contiguous()
            h.update(repr((str(node.target), tuple(c.shape),
                           str(c.dtype))).encode())
            # Flattened first: a 0-d tensor has no byte view.
            h.update(c.reshape(-1).view(torch.uint8).numpy().tobytes()
                     if c.numel() else b"")
    return h.hexdigest()[:24]


class _Imported:
    """What _compile needs of an import (mtsched_torch.Result), as the
    import cache stores it: the IR text, its inputs, its constants, the
    number of outputs and whether the graph returns one tensor."""

    def __init__(self, text, inputs, constants, n_outputs, single,
                 eager=None):
        self.text = text
        self.inputs = inputs
        self.constants = constants
        self.n_outputs = n_outputs
        self.single = single
        # Eager's outputs on Dynamo's example inputs where the import ran
        # the graph (one rank, not from the cache): the accuracy check's
        # reference, so the graph is not run eagerly twice. Not cached.
        self.eager = eager


def _load_imported(key):
    """The import cache's entry for key: an _Imported, the reason the graph
    ran eagerly (a str), or None."""
    base = os.path.join(_cache_dir(), key + ".import")
    try:
        with open(base + ".json") as f:
            d = json.load(f)
        if "fallback" in d:
            return d["fallback"]
        consts = {}
        if d.get("constants"):
            consts = torch.load(base + ".pt")
        return _Imported(d["text"], d["inputs"], consts, d["n_outputs"],
                         d["single"])
    except (OSError, ValueError, KeyError, RuntimeError):
        return None


def _store_imported(key, imp, fallback=None):
    """Writes the import cache's entry: imp, or why the graph runs
    eagerly. Best effort: a cache that cannot be written costs the next
    process the import, nothing else."""
    try:
        _write_imported(key, imp, fallback)
    except (OSError, RuntimeError, TypeError) as e:
        _log("the import cache was not written: %s" % e)


def _write_imported(key, imp, fallback):
    base = os.path.join(_cache_dir(), key + ".import")
    if imp is None:
        with open(base + ".json.tmp", "w") as f:
            json.dump({"fallback": fallback}, f)
        os.replace(base + ".json.tmp", base + ".json")
        return
    if imp.constants:
        torch.save({k: v.detach().cpu() for k, v in imp.constants.items()},
                   base + ".pt.tmp")
        os.replace(base + ".pt.tmp", base + ".pt")
    with open(base + ".json.tmp", "w") as f:
        json.dump({"text": imp.text, "inputs": imp.inputs,
                   "constants": sorted(imp.constants),
                   "n_outputs": imp.n_outputs, "single": imp.single}, f)
    os.replace(base + ".json.tmp", base + ".json")


class _Lifted(torch.nn.Module):
    """Dynamo's graph with the parameters it takes as inputs (it lifts a
    module's parameters to graph inputs) held as parameters again: the
    importer then treats them as weights, transposed once where the IR
    holds the transpose, rather than as inputs read through a transpose
    kernel on every call."""

    PREFIX = "lifted_"

    def __init__(self, gm, example_inputs, lifted):
        super().__init__()
        self.gm = gm
        self.n = len(example_inputs)
        self.lifted = list(lifted)
        for i in self.lifted:
            self.register_parameter(self.PREFIX + str(i), example_inputs[i])

    def forward(self, *user):
        rest = iter(user)
        args = [getattr(self, self.PREFIX + str(i)) if i in self.lifted
                else next(rest) for i in range(self.n)]
        return self.gm(*args)


def _group_names(gm, world):
    """{PyTorch group name: "world"} for the functional collectives of
    Dynamo's graph, each over a real process group of `world` ranks;
    Fallback for a group smaller than the world (the runtime opens one
    communicator, over every rank)."""
    names = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        target = str(getattr(node.target, "__name__", node.target))
        op = str(node.target)
        if "c10d_functional" not in op or "wait_tensor" in op:
            continue
        group = node.kwargs.get("group_name")
        if group is None:
            strs = [a for a in node.args if isinstance(a, str)
                    and a.lower() not in ("sum", "avg", "max", "min",
                                          "product")]
            group = strs[-1] if strs else None
        if group is None:
            raise Fallback("%s names no process group" % target)
        size = _group_size(group)
        if size is None:
            raise Fallback("%s: process group %r is unknown to "
                           "torch.distributed" % (target, group))
        if size != world:
            raise Fallback("%s over process group %r of %d ranks; the "
                           "runtime runs collectives over all %d ranks only"
                           % (target, group, size, world))
        names[group] = "world"
    return names


def _group_size(name):
    """The size of torch.distributed's process group called `name`."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    try:
        return c10d._resolve_process_group(name).size()
    except Exception:  # noqa: BLE001 - older torch: look the name up
        pass
    for pg, n in getattr(getattr(c10d, "_world", None), "pg_names",
                         {}).items():
        if n == name:
            return dist.get_world_size(pg)
    return None


def _import(traced, example_inputs, lifted, name, gm, world=1):
    """Dynamo's graph imported (torch.export, else make_fx), as _Imported;
    Fallback where it is not all in the IR. Several ranks: the graph's
    functional collectives become the IR's, over the world."""
    res, why = None, []
    user = [x for i, x in enumerate(example_inputs) if i not in lifted]
    names = _group_names(gm, world) if world > 1 else {}
    # torch.export first (2.x), then make_fx, as mtsched_torch.compare does.
    for tracer in ["auto", "make_fx"]:
        try:
            res = import_module(traced, user, name, world, tracer, quiet=True,
                                groups={}, group_names=names)
            break
        except Exception as e:  # noqa: BLE001 - any import failure falls back
            why.append("%s: %s: %s" % (tracer, type(e).__name__,
                                       str(e).splitlines()[0][:200]
                                       if str(e) else ""))
    if res is None:
        raise Fallback("import failed (%s)" % "; ".join(why))
    if res.unmapped:
        raise Fallback("ops outside the IR: " + ", ".join(
            "%s x%d" % kv for kv in sorted(res.unmapped.items())))
    if world > 1:
        # Not run: its collectives would wait for ranks that took another
        # path (one rank's import cached, another's not); Dynamo's output
        # node knows the values it returns.
        ref = _example_outputs(gm)
    else:
        with torch.no_grad():
            ref = gm(*example_inputs)
    single = not isinstance(ref, (list, tuple))
    refs = [ref] if single else list(ref)
    if len(refs) != len(res.outputs) or not all(
            isinstance(r, torch.Tensor) for r in refs):
        raise Fallback("the graph returns %d values, the IR %d tensors"
                       % (len(refs), len(res.outputs)))
    return _Imported(res.text(), res.inputs, res.constants, len(res.outputs),
                     single, None if world > 1 else refs)


def _example_outputs(gm):
    """What Dynamo's graph returns, from its output node's example values
    (fake tensors), without running it."""
    out = [n for n in gm.graph.nodes if n.op == "output"]
    if not out:
        raise Fallback("the graph has no output node")

    def val(a):
        if isinstance(a, torch.fx.Node):
            v = a.meta.get("example_value", a.meta.get("val"))
            if v is None:
                raise Fallback("output %s has no example value" % a.name)
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(val(x) for x in a)
        return a
    return val(out[0].args[0])
