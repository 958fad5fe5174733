"""Helpers shared by the converter and the op table: the op name of an FX
node's target, its result's dtype and shape, and the Unmapped exception."""

import torch


class Unmapped(Exception):
    """A mapping declines a node; the message says why."""


def op_name(target):
    """``aten.mm`` for torch.ops.aten.mm.default; the callable's name
    otherwise."""
    if isinstance(target, torch._ops.OpOverload):
        ns = target.namespace if hasattr(target, "namespace") else \
            target._schema.name.split("::")[0]
        return "%s.%s" % (ns, target.overloadpacket.__name__)
    if isinstance(target, torch._ops.OpOverloadPacket):
        return str(target)
    mod = getattr(target, "__module__", "") or ""
    return ("%s.%s" % (mod, getattr(target, "__name__", str(target)))).lstrip(".")


def tensor_meta(node):
    """(torch dtype, shape) of a node's result, or a list of them, or None."""
    v = node.meta.get("val", None)
    if v is None:
        v = node.meta.get("tensor_meta", None)
    return _meta_of(v)


def _meta_of(v):
    if v is None:
        return None
    if isinstance(v, (list, tuple)) and not hasattr(v, "dtype"):
        return [_meta_of(x) for x in v]
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        return (v.dtype, tuple(int(d) for d in v.shape))
    return None
