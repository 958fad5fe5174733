"""FX graph (ATen level) -> mtsched IR graph.

The walk is in program order. Each ``call_function`` node is looked up by its
op name (``aten.mm``, ``_c10d_functional.all_reduce``, ``vllm.all_reduce``)
in ``opmap.OPS``; a mapping returns the IR value the node becomes, or raises
``Unmapped`` with a reason. Any op without a mapping (or whose mapping
declines) becomes ``custom "aten.name"(...)`` with its non-tensor arguments as
attributes, and the converter warns with the op's name and count: nothing is
dropped silently. Nodes no output depends on are removed at the end, so the
pieces of a recognised pattern (rmsnorm) disappear with it.
"""

import collections
import operator
import sys

import torch

from . import ir
from . import opmap
from .fxutil import Unmapped, op_name, tensor_meta  # noqa: F401

_DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "bool",
}
# Types the IR lacks, declared as the nearest one (custom ops only see them).
_NEAREST = {
    torch.float64: "f32",
    torch.int8: "i32",
    torch.uint8: "i32",
    torch.int16: "i32",
}


class MultiOutput:
    """An unmapped op with several results, emitted per getitem."""

    def __init__(self, node):
        self.node = node
        self.emitted = {}


class Converter:
    """Converts one Traced graph into one ir.Graph."""

    def __init__(self, traced, name, world_size=1, group_names=None,
                 module=None, quiet=False):
        self.traced = traced
        self.graph = ir.Graph(ir.sanitize_symbol(name), world_size)
        self.world_size = world_size
        self.module = module if module is not None else ir.Module()
        self.group_names = dict(group_names or {})
        self.env = {}
        self.names = set()
        self.unmapped = collections.Counter()
        self.unmapped_reasons = {}
        self.transposed = set()  # IR names of pre-transposed inputs
        self.input_infos = []
        self.quiet = quiet
        self.rmsnorms = 0
        self.elided = collections.Counter()
        # Constant folding: FX nodes whose value is known at import (built
        # by factories such as arange/full/triu, or computed from buffers
        # whose values are known alone) -> their CPU tensors. One that a
        # mapped op reads becomes a graph input of kind "constant", its
        # value in self.constants (IR name -> tensor).
        self.consts = {}
        self.constants = {}
        # IR name of a custom node -> the user's source line (where the
        # tracer recorded stack traces: torch.export).
        self.sources = {}
        self.attentions = 0

    # -- helpers used by opmap ------------------------------------------------

    def unique(self, hint):
        base = ir.sanitize_value_name(hint)
        name, i = base, 1
        while name in self.names:
            name = "%s.%d" % (base, i)
            i += 1
        self.names.add(name)
        return name

    def dtype(self, tdtype, what="a value"):
        if tdtype in _DTYPES:
            return _DTYPES[tdtype]
        if tdtype in _NEAREST:
            return _NEAREST[tdtype]
        raise ValueError("%s has dtype %s, which the IR cannot declare"
                         % (what, tdtype))

    def meta(self, node):
        m = tensor_meta(node)
        if m is None or isinstance(m, list):
            raise Unmapped("no single tensor result")
        return m

    def value(self, arg):
        """The IR value of an FX argument (a tensor node)."""
        if not isinstance(arg, torch.fx.Node):
            raise Unmapped("operand %r is not a tensor" % (arg,))
        if arg not in self.env and arg in self.consts:
            self.env[arg] = self.materialize(arg)
        v = self.env.get(arg)
        if v is None or isinstance(v, MultiOutput):
            raise Unmapped("operand %s has no IR value" % arg.name)
        return v

    def const(self, arg):
        """The value of an FX argument known at import, or None."""
        if isinstance(arg, torch.fx.Node):
            return self.consts.get(arg)
        return None

    def materialize(self, node, tensor=None, hint=None):
        """A known tensor as a graph input of kind "constant" (the IR has no
        constants); its value is kept in self.constants for whoever feeds
        the graph. Boolean tensors are declared in the IR's bool type where
        it has one, else as i32 0/1 (every reader treats them as nonzero)."""
        t = self.consts[node] if tensor is None else tensor
        if t.dtype == torch.bool and "bool" not in _DTYPES.values():
            t = t.to(torch.int32)
        if t.dtype == torch.float64:
            t = t.to(torch.float32)
        if t.dtype not in _DTYPES and t.dtype in _NEAREST:
            t = t.to(torch.int32 if not t.is_floating_point()
                     else torch.float32)
        dt = self.dtype(t.dtype, "constant " + (hint or node.name))
        shape = tuple(t.shape)
        if any(d <= 0 for d in shape):
            raise Unmapped("an empty constant")
        name = self.unique(hint or ("const." + node.name))
        self.graph.inputs.append((name, dt, shape,
                                  "constant %s (folded at import)"
                                  % (hint or node.name)))
        self.types[name] = (dt, shape)
        self.constants[name] = t.contiguous()
        self.input_infos.append({
            "ir_name": name, "kind": "constant", "torch_name": name,
            "transposed": False, "dtype": dt, "shape": list(shape)})
        return name

    def emit(self, op, operands, dtype, shape, attrs=None, hint=None,
             custom=False, configs=None, comment=None):
        name = self.unique(hint or op)
        for o in operands:
            if o not in self.types:
                raise AssertionError("unknown operand %" + o)
        self.graph.nodes.append(ir.Node(name, op, operands, dtype, shape,
                                        attrs, custom, configs, comment))
        self.types[name] = (dtype, tuple(shape))
        return name

    def emit_results(self, op, operands, results, attrs=None, hint=None):
        """A built-in op of several results; results are (name hint, dtype,
        shape) in the op's order. Returns their value names."""
        names = [self.unique(h) for h, _, _ in results]
        for o in operands:
            if o not in self.types:
                raise AssertionError("unknown operand %" + o)
        (_, dt, sh), rest = results[0], results[1:]
        self.graph.nodes.append(ir.Node(
            names[0], op, operands, dt, sh, attrs,
            extra=[(n, d, s) for n, (_, d, s) in zip(names[1:], rest)]))
        for n, (_, d, s) in zip(names, results):
            self.types[n] = (d, tuple(s))
        return names

    def cast(self, value, dtype, hint=None):
        """value as dtype (a cast node unless it already is)."""
        vd, vs = self.types[value]
        if vd == dtype:
            return value
        return self.emit("cast", [value], dtype, vs,
                         hint=(hint or value) + "." + dtype)

    def group(self, torch_name, size):
        """The IR group name for a PyTorch group name; declares it."""
        name = self.group_names.get(torch_name, torch_name)
        if name in ("", "0", "default", "world", "WORLD") and \
                size == self.world_size:
            return "world"
        name = ir.sanitize_symbol("pg" + name if name[:1].isdigit() else name)
        if name == "world":
            name = "world_%d" % size
        if size > self.world_size:
            raise Unmapped("group '%s' has %d ranks but the world size is %d"
                           % (name, size, self.world_size))
        self.module.add_group(name, size)
        return name

    # -- the walk ---------------------------------------------------------------

    def run(self):
        self.types = {}
        gm = self.traced.gm
        infos = {i.fx_name: i for i in self.traced.inputs}
        nodes = list(gm.graph.nodes)
        self.transposed_fx = opmap.find_pretransposed(nodes, infos)
        for node in nodes:
            if node.op == "placeholder":
                self._placeholder(node, infos.get(node.name))
            elif node.op == "get_attr":
                self._get_attr(node)
            elif node.op == "call_function":
                self._call(node)
            elif node.op == "output":
                self._output(node)
            else:
                raise ValueError("cannot import FX node %s (%s); trace to ATen "
                                 "first" % (node.name, node.op))
        from .attention import recognise_attention
        self._dead_code()
        self.attentions = recognise_attention(self)
        if self.attentions:
            self._dead_code()
        return self.graph

    def _placeholder(self, node, info):
        m = tensor_meta(node)
        if m is None or isinstance(m, list):
            # Non-tensor inputs (ints, tokens) are not graph inputs.
            return
        if info is not None and info.kind in ("buffer", "constant") and \
                getattr(info, "value", None) is not None and \
                _foldable_size(info.value) and not node in self.transposed_fx:
            # A buffer whose values are known (a causal-mask buffer,
            # position ids): folded; it becomes an input only if a mapped
            # op reads it (then as the constant it is).
            self.consts[node] = info.value
            return
        tdt, shape = m
        hint = info.ir_name if info else node.name
        name = self.unique(hint)
        kind = info.kind if info else "input"
        torch_name = info.torch_name if info else node.name
        comment = "%s %s" % (kind, torch_name)
        if node in self.transposed_fx:
            shape = tuple(reversed(shape))
            self.transposed.add(name)
            comment += ", transposed (the IR holds its [in, out] transpose)"
        dt = self.dtype(tdt, "input " + node.name)
        if any(d <= 0 for d in shape):
            raise ValueError("input %s has shape %s; the IR needs positive "
                             "sizes" % (node.name, list(shape)))
        self.graph.inputs.append((name, dt, shape, comment))
        self.types[name] = (dt, tuple(shape))
        self.env[node] = name
        self.input_infos.append({
            "ir_name": name, "kind": kind, "torch_name": torch_name,
            "transposed": node in self.transposed_fx, "dtype": dt,
            "shape": list(shape)})

    def _get_attr(self, node):
        t = getattr(self.traced.gm, node.target)
        if not isinstance(t, torch.Tensor):
            return
        if t.device.type != "meta" and _foldable_size(t):
            self.consts[node] = t.detach().cpu()
            return
        # A constant tensor of the trace becomes an input, as weights do.
        print("mtsched_torch: warning: constant tensor '%s' %s becomes graph "
              "input %%%s" % (node.target, list(t.shape), node.name),
              file=sys.stderr)
        name = self.unique(node.name)
        dt = self.dtype(t.dtype, node.target)
        self.graph.inputs.append((name, dt, tuple(t.shape),
                                  "constant " + str(node.target)))
        self.types[name] = (dt, tuple(t.shape))
        self.env[node] = name
        self.input_infos.append({
            "ir_name": name, "kind": "constant", "torch_name": node.target,
            "transposed": False, "dtype": dt, "shape": list(t.shape)})

    def _call(self, node):
        if node.target is operator.getitem:
            self._getitem(node)
            return
        name = op_name(node.target)
        if opmap.is_ignored(name) or (not node.users and
                                      tensor_meta(node) is None):
            # Runtime checks of export graphs (_assert_tensor_metadata,
            # _assert_scalar, ...) and other calls with no result.
            return
        if self._fold(node, name):
            return
        fn = opmap.lookup(name)
        if fn is not None:
            try:
                v = fn(self, node)
                if v is not None:
                    self.env[node] = v
                return
            except Unmapped as e:
                reason = str(e)
        else:
            reason = opmap.REFUSED.get(name, "no mapping")
        self._custom(node, name, reason)

    def _fold(self, node, name):
        """Evaluates node on the CPU when every tensor it reads is known
        and it reads no graph input: factories (arange, full, ones, eye),
        masks built from them (triu, masked_fill, comparisons), position
        buckets. Returns True when folded."""
        if name.split(".")[0] not in ("aten", "prims") or \
                opmap.collective_kind_in(name) or name in _NO_FOLD:
            return False
        tensors = []

        def visit(a):
            if isinstance(a, torch.fx.Node):
                tensors.append(a)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    visit(x)
        visit(node.args)
        visit(list(node.kwargs.values()))
        if any(t not in self.consts for t in tensors):
            return False
        m = tensor_meta(node)
        if m is None:
            return False
        metas = m if isinstance(m, list) else [m]
        if any(x is None or _numel(x[1]) > _FOLD_LIMIT for x in metas):
            return False

        def sub(a):
            if isinstance(a, torch.fx.Node):
                return self.consts[a]
            if isinstance(a, (list, tuple)):
                return type(a)(sub(x) for x in a)
            if isinstance(a, torch.device):
                return torch.device("cpu")
            return a
        kwargs = {k: sub(v) for k, v in node.kwargs.items()}
        if "device" in kwargs:
            kwargs["device"] = torch.device("cpu")
        try:
            with torch.no_grad():
                out = node.target(*sub(node.args), **kwargs)
        except Exception:  # noqa: BLE001 - not foldable: map it instead
            return False
        if isinstance(out, torch.Tensor):
            if out.is_floating_point() or out.dtype == torch.bool or \
                    not out.is_complex():
                self.consts[node] = out
                return True
            return False
        if isinstance(out, (list, tuple)) and all(
                isinstance(x, torch.Tensor) for x in out):
            self.consts[node] = list(out)
            return True
        return False

    def _getitem(self, node):
        src, idx = node.args
        if src in self.consts and isinstance(self.consts[src], list):
            self.consts[node] = self.consts[src][idx]
            return
        v = self.env.get(src)
        if isinstance(v, MultiOutput):
            if idx not in v.emitted:
                v.emitted[idx] = self._emit_custom(v.node, op_name(
                    v.node.target), node, {"output": idx})
            self.env[node] = v.emitted[idx]
        elif isinstance(v, (list, tuple)):
            self.env[node] = v[idx]
        else:
            raise ValueError("getitem of %s, which has no tuple value"
                             % src.name)

    def _custom(self, node, name, reason):
        m = tensor_meta(node)
        if isinstance(m, list) or (m is None and node.users and all(
                u.target is operator.getitem for u in node.users)):
            self.env[node] = MultiOutput(node)
            self.unmapped_reasons.setdefault(name, reason)
            return
        if m is None:
            # No tensor result (e.g. a side-effect op): nothing to emit.
            print("mtsched_torch: warning: %s (%s) has no tensor result and "
                  "is not imported" % (node.name, name), file=sys.stderr)
            return
        self.unmapped_reasons.setdefault(name, reason)
        self.env[node] = self._emit_custom(node, name, node, {})
        st = getattr(node, "stack_trace", None) or node.meta.get(
            "stack_trace")
        if st:
            import re
            m = re.findall(r'File "([^"]+)", line (\d+)', st)
            if m:
                self.sources[self.env[node]] = "%s:%s" % m[-1]

    def _emit_custom(self, node, name, result_node, extra):
        operands, attrs = [], {}
        schema_args = []
        if isinstance(node.target, torch._ops.OpOverload):
            schema_args = [a.name for a in node.target._schema.arguments]
        for i, a in enumerate(node.args):
            key = schema_args[i] if i < len(schema_args) else "arg%d" % i
            self._custom_arg(key, a, operands, attrs)
        for k, a in node.kwargs.items():
            self._custom_arg(k, a, operands, attrs)
        attrs.update(extra)
        tdt, shape = self.meta(result_node)
        dt = self.dtype(tdt, result_node.name)
        return self.emit(name, operands, dt, shape, attrs,
                         hint=result_node.name, custom=True,
                         configs=["aten"])

    def _custom_arg(self, key, a, operands, attrs):
        if not ir.is_identifier(key):
            key = "arg_" + ir.sanitize_value_name(key)
        if isinstance(a, torch.fx.Node):
            if a not in self.env and a in self.consts:
                self.env[a] = self.materialize(a)
            v = self.env.get(a)
            if isinstance(v, str):
                operands.append(v)
            return
        if isinstance(a, (list, tuple)) and any(isinstance(x, torch.fx.Node)
                                                for x in a):
            for x in a:
                if isinstance(x, torch.fx.Node) and isinstance(
                        self.env.get(x), str):
                    operands.append(self.env[x])
            return
        val = _attr_value(a)
        if val is not None:
            attrs[key] = val

    def _output(self, node):
        outs = []

        def walk(a):
            if isinstance(a, torch.fx.Node):
                if a not in self.env and a in self.consts:
                    self.env[a] = self.materialize(a)
                v = self.env.get(a)
                if isinstance(v, str):
                    outs.append(v)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    walk(x)
            elif isinstance(a, dict):
                for x in a.values():
                    walk(x)

        walk(node.args)
        specs = getattr(self.traced, "user_outputs", None)
        self.graph.outputs = outs if specs is None else [outs[i] for i in specs]

    def _dead_code(self):
        live = set(self.graph.outputs)
        keep = []
        for n in reversed(self.graph.nodes):
            # A node of several results lives if any of them is read.
            if n.name in live or any(e[0] in live for e in n.extra):
                keep.append(n)
                live.update(n.operands)
        keep.reverse()
        self.graph.nodes = keep
        # Parameters, buffers and folded constants nothing reads are not
        # graph inputs (the module's own inputs stay: callers pass them).
        kinds = {i["ir_name"]: i["kind"] for i in self.input_infos}
        dead = {n for n, _, _, _ in self.graph.inputs
                if n not in live and kinds.get(n, "input") != "input"}
        if dead:
            self.graph.inputs = [i for i in self.graph.inputs
                                 if i[0] not in dead]
            self.input_infos = [i for i in self.input_infos
                                if i["ir_name"] not in dead]
            for n in dead:
                self.constants.pop(n, None)
        live_customs = collections.Counter(n.op for n in keep if n.custom)
        self.unmapped = live_customs
        self.rmsnorms = sum(1 for n in keep if n.op == "rmsnorm")

    def warn(self):
        """One stderr line per unmapped op (name, count, reason)."""
        if self.quiet or not self.unmapped:
            return
        total = sum(self.unmapped.values())
        print("mtsched_torch: warning: @%s: %d node(s) of %d unmapped op(s) "
              "became custom ops:" % (self.graph.name, total,
                                      len(self.unmapped)), file=sys.stderr)
        for name, count in sorted(self.unmapped.items()):
            print("mtsched_torch: warning:   custom \"%s\" x%d (%s)"
                  % (name, count, self.unmapped_reasons.get(name, "")),
                  file=sys.stderr)


# Folded constants are evaluated on the CPU: bounded so that a huge mask
# (a 128k-token context) is mapped rather than materialised.
_FOLD_LIMIT = 1 << 24
# Ops never folded: random ones, and ones with effects.
_NO_FOLD = {"aten.rand", "aten.randn", "aten.randint", "aten.rand_like",
            "aten.randn_like", "aten.bernoulli", "aten.native_dropout",
            "aten.dropout", "aten.uniform", "aten.normal", "aten.randperm",
            "aten.empty_like"}


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _foldable_size(t):
    return isinstance(t, torch.Tensor) and t.numel() <= _FOLD_LIMIT


def _attr_value(a):
    """A non-tensor argument as an IR attribute value, or None to skip."""
    if a is None:
        return None
    if isinstance(a, bool):
        return a
    if isinstance(a, int):
        return a
    if isinstance(a, float):
        if a != a:
            return "nan"
        return a
    if isinstance(a, str):
        return a
    if isinstance(a, torch.dtype):
        return _DTYPES.get(a, str(a).replace("torch.", ""))
    if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(a, (list, tuple)):
        vals = [_attr_value(x) for x in a]
        if any(v is None for v in vals):
            return None
        return vals
    if hasattr(a, "node"):  # SymInt
        return str(a)
    return str(a)
