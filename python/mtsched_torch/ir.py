"""A writer for mtsched's textual IR (docs/IR.md).

Only what the importer needs: groups, graphs with typed inputs, high-level
nodes (built-in ops and ``custom "name"`` ops with configs) and ``return``.
The text it writes is in canonical form except for the comments it adds, so
``mtsched-opt file.mir`` prints the same module without them.
"""

import math
import re

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_VALUE = re.compile(r"[A-Za-z0-9_.]+\Z")

DTYPES = ("f32", "f16", "bf16", "i32", "i64", "bool")


def is_identifier(s):
    """True when s is a bare identifier of the IR (attribute keys, choices)."""
    return bool(_IDENT.match(s))


def sanitize_value_name(s):
    """A value name (after the ``%``) made from any string."""
    s = re.sub(r"[^A-Za-z0-9_.]", "_", s)
    return s or "v"


def sanitize_symbol(s):
    """A symbol name (after the ``@``): starts with a letter or ``_``."""
    s = re.sub(r"[^A-Za-z0-9_.]", "_", s)
    if not s or not (s[0].isalpha() or s[0] == "_"):
        s = "g" + s
    return s


def format_type(dtype, shape):
    """``bf16[8,4096]``; ``f32[]`` for a scalar."""
    return "%s[%s]" % (dtype, ",".join(str(int(d)) for d in shape))


def _escape(s):
    out = []
    for ch in s.encode("utf-8"):
        c = chr(ch)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif 32 <= ch < 127:
            out.append(c)
        else:
            out.append("\\%03o" % ch)
    return '"' + "".join(out) + '"'


def format_attr_value(v):
    """An attribute value as the printer writes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if math.isnan(v):
            return "nan"
        if v == int(v) and abs(v) < 1e16:
            return "%d.0" % int(v)
        r = repr(v)
        return r if ("." in r or "e" in r) else r + ".0"
    if isinstance(v, str):
        return _escape(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_attr_value(x) for x in v) + "]"
    raise TypeError("cannot write %r as an IR attribute" % (v,))


def format_attrs(attrs):
    if not attrs:
        return ""
    return " {" + ", ".join("%s = %s" % (k, format_attr_value(v))
                            for k, v in attrs.items()) + "}"


class Node:
    """One high-level node: ``%name = op(%a, %b) {attrs} [configs] : type``;
    an op of several results (topk, sort) lists them all:
    ``%v, %i = topk(%x) {k = 2} : f32[16,2], i64[16,2]``."""

    def __init__(self, name, op, operands, dtype, shape, attrs=None,
                 custom=False, configs=None, comment=None, extra=None):
        self.name = name
        self.op = op
        self.operands = list(operands)
        self.dtype = dtype
        self.shape = tuple(shape)
        self.attrs = dict(attrs or {})
        self.custom = custom
        self.configs = list(configs or (["aten"] if custom else []))
        self.comment = comment
        # The results after the first: (name, dtype, shape).
        self.extra = [(n, d, tuple(s)) for n, d, s in (extra or [])]

    def text(self):
        op = "custom %s" % _escape(self.op) if self.custom else self.op
        names = ", ".join("%" + n for n in [self.name] +
                          [e[0] for e in self.extra])
        s = "%s = %s(%s)%s" % (names, op,
                               ", ".join("%" + o for o in self.operands),
                               format_attrs(self.attrs))
        if self.configs:
            s += " configs [%s]" % ", ".join(self.configs)
        return s + " : " + ", ".join(
            format_type(d, sh) for d, sh in
            [(self.dtype, self.shape)] + [(e[1], e[2]) for e in self.extra])


class Graph:
    """A graph: typed inputs, nodes in program order, returned values."""

    def __init__(self, name, world_size=1):
        self.name = name
        self.world_size = world_size
        self.inputs = []  # (name, dtype, shape, comment)
        self.nodes = []
        self.outputs = []
        self.comments = []

    def text(self):
        lines = ["// " + c for c in self.comments]
        for n, dt, sh, c in self.inputs:
            if c:
                lines.append("//   %%%s: %s" % (n, c))
        args = ", ".join("%%%s: %s" % (n, format_type(dt, sh))
                         for n, dt, sh, _ in self.inputs)
        attrs = (" attributes {world_size = %d}" % self.world_size
                 if self.world_size != 1 else "")
        lines.append("graph @%s(%s)%s {" % (self.name, args, attrs))
        for n in self.nodes:
            if n.comment:
                lines.append("  // " + n.comment)
            lines.append("  " + n.text())
        lines.append("  return" + ("" if not self.outputs else " " + ", ".join(
            "%" + o for o in self.outputs)))
        lines.append("}")
        return "\n".join(lines) + "\n"


class Module:
    """Groups then graphs, as the printer orders them."""

    def __init__(self):
        self.header = []
        self.groups = {}  # name -> ranks
        self.graphs = []

    def add_group(self, name, size):
        ranks = list(range(size))
        old = self.groups.get(name)
        if old is not None and old != ranks:
            raise ValueError("group @%s is used with sizes %d and %d"
                             % (name, len(old), size))
        self.groups[name] = ranks

    def text(self):
        parts = []
        head = "".join("// %s\n" % h for h in self.header)
        if self.groups:
            head += "".join("group @%s = [%s]\n" % (g, ", ".join(map(str, r)))
                            for g, r in self.groups.items())
        if head:
            parts.append(head)
        parts.extend(g.text() for g in self.graphs)
        return "\n".join(parts)
