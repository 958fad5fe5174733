"""Front ends: a module and example inputs in, an ATen-level FX graph out.

Three tracers, all on meta tensors (no GPU, no real weights):

* ``export``: ``torch.export.export`` (PyTorch 2.x), then
  ``run_decompositions()`` to core ATen;
* ``make_fx``: ``torch.fx.experimental.proxy_tensor.make_fx`` over the
  module called with its parameters and buffers as arguments (PyTorch 1.13
  and 2.x);
* a ``torch.fx.GraphModule`` given as is: one from ``make_fx`` (ATen ops,
  shapes in ``meta``) is used directly; one from ``symbolic_trace`` (torch
  ops, no shapes) is re-traced with ``make_fx`` on the example inputs.

Every tracer yields a :class:`Traced`: the graph module and, per placeholder,
what it is (a user input, a parameter or a buffer) and its name.
"""

import inspect
import os
import sys
import traceback

import torch
import torch.fx

# Ops kept whole: the IR schedules them better whole than their pieces
# (attention, norms, softmax, the matmul family, collectives). Everything
# else may be decomposed by PyTorch's tables.
KEEP_WHOLE = (
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "native_layer_norm", "layer_norm", "rms_norm", "_softmax", "softmax",
    "mm", "bmm", "addmm", "baddbmm", "linear", "matmul", "convolution",
    "gelu", "silu", "embedding", "_to_copy", "index_select", "cumsum",
    "topk", "sort", "scatter", "scatter_add", "index_copy", "index_add",
)

# PyTorch's own decompositions the make_fx tracer applies (PyTorch 1.13
# and 2.x). Only those whose result is made of ATen ops the op table maps:
# 1.13's reference implementations (torch._refs) of most pointwise ops and
# of norms produce prims (prims.var, prims.broadcast_in_dim), so those
# ops are mapped by the table itself (opmap: layer_norm, var_mean, clamp,
# masked_fill...) rather than decomposed here.
_DECOMPOSE = (
    "repeat", "stack", "unbind", "roll", "glu", "_log_softmax",
    "logsumexp", "native_dropout", "dropout", "addcmul", "mv", "dot",
    "hardsigmoid", "hardswish", "rsub", "narrow", "hstack",
    "vstack",
    "new_zeros", "new_ones", "new_full", "new_empty", "zero",
)


def decompositions():
    """The decomposition table make_fx is given: PyTorch's decompositions
    of the ops in _DECOMPOSE (those this PyTorch has)."""
    from torch._decomp import get_decompositions
    ops = []
    for name in _DECOMPOSE:
        op = getattr(torch.ops.aten, name, None)
        if op is not None:
            ops.append(op)
    try:
        return get_decompositions(ops)
    except Exception:  # noqa: BLE001 - an op this PyTorch cannot decompose
        return {}


def export_decompositions():
    """torch.export's core-ATen table (2.x) without the ops kept whole."""
    from torch.export import default_decompositions
    table = default_decompositions()
    for name in KEEP_WHOLE:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue
        for ov in packet.overloads():
            op = getattr(packet, ov)
            try:
                if op in table:
                    del table[op]
            except Exception:  # noqa: BLE001 - older table types
                pass
    return table


def functionalize(fn):
    """fn with in-place ops and mutations of its arguments removed
    (torch.func.functionalize on 2.x, functorch's on 1.13), or fn."""
    try:
        from torch.func import functionalize as f
    except ImportError:
        try:
            from functorch import functionalize as f
        except ImportError:
            return fn
    return f(fn)



class InputInfo:
    """One placeholder: its FX name, IR name, kind and PyTorch name."""

    def __init__(self, fx_name, ir_name, kind, torch_name):
        self.fx_name = fx_name
        self.ir_name = ir_name
        self.kind = kind  # "input", "parameter", "buffer", "constant"
        self.torch_name = torch_name
        # A buffer's values where they are known (not on the meta device):
        # the converter folds what is computed from them alone (masks,
        # position ids, rotary tables) at import.
        self.value = None

    def __repr__(self):
        return "InputInfo(%r, %r, %r, %r)" % (self.fx_name, self.ir_name,
                                              self.kind, self.torch_name)


class Traced:
    """An ATen-level graph module and its placeholders, in order;
    user_outputs, when not None, picks the graph outputs that are the
    module's (export also returns mutated buffers)."""

    def __init__(self, gm, inputs, tracer):
        self.gm = gm
        self.inputs = inputs
        self.tracer = tracer
        self.user_outputs = None


def has_export():
    """True when this PyTorch has torch.export (2.x)."""
    try:
        import torch.export  # noqa: F401
        return hasattr(torch.export, "export")
    except ImportError:
        return False


def build_module(factory, kwargs, device="meta"):
    """Calls factory(**kwargs) so that its parameters land on ``device``.

    A factory that takes a ``device`` argument gets it; otherwise, on
    PyTorch 2.x, it runs under ``with torch.device(device)``; otherwise (1.13)
    the module is built on the CPU and moved, which allocates its weights
    once (a warning says so).
    """
    kwargs = dict(kwargs)
    params = inspect.signature(factory).parameters
    if "device" in params or any(p.kind == p.VAR_KEYWORD
                                 for p in params.values()):
        kwargs.setdefault("device", device)
        return factory(**kwargs)
    if torch.device(device).type == "cpu":
        m = factory(**kwargs)
        m._mtsched_buffer_values = {n: b.detach().clone()
                                    for n, b in m.named_buffers()}
        return m
    if hasattr(torch.device(device), "__enter__"):
        with torch.device(device):
            return factory(**kwargs)
    print("mtsched_torch: warning: %s takes no 'device' argument; building it "
          "on the CPU (real weights) and moving it to %s"
          % (getattr(factory, "__name__", factory), device), file=sys.stderr)
    m = factory(**kwargs)
    # Buffers (masks, position ids) keep their values for the importer's
    # constant folding; they are small next to the weights.
    values = {n: b.detach().clone() for n, b in m.named_buffers()}
    m = m.to(device)
    m._mtsched_buffer_values = values
    return m


_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


class _record_sources:
    """While make_fx traces, each node it creates records the user's
    source line that made it in meta["stack_trace"] (PyTorch 1.13's make_fx
    records none; torch.export does), so that errors can name it."""

    def __enter__(self):
        from torch.fx.proxy import TracerBase
        self.cls = TracerBase
        self.orig = TracerBase.create_node
        orig = self.orig

        def create_node(tracer, *a, **k):
            node = orig(tracer, *a, **k)
            if "stack_trace" not in node.meta:
                for fr in reversed(traceback.extract_stack()[:-1]):
                    f = os.path.abspath(fr.filename)
                    if f.startswith(_HERE) or f.startswith(_TORCH) or \
                            "functorch" in f or fr.filename.startswith("<") \
                            or os.sep + "lib" + os.sep + "python" in f:
                        continue
                    node.meta["stack_trace"] = '  File "%s", line %d, in ' \
                        '%s\n' % (fr.filename, fr.lineno, fr.name)
                    break
            return node
        TracerBase.create_node = create_node
        return self

    def __exit__(self, *exc):
        self.cls.create_node = self.orig
        return False


def _known_value(t, fallback=None):
    """A buffer's values on the CPU, or None on the meta device."""
    for v in (t, fallback):
        if isinstance(v, torch.Tensor) and v.device.type != "meta":
            return v.detach().cpu()
    return None


def _user_names(n, names):
    names = list(names or [])
    for i in range(len(names), n):
        names.append("x" if i == 0 and n == 1 else "x%d" % i)
    return names


def trace_make_fx(module, args, input_names=None):
    """Traces module(*args) with make_fx; parameters and buffers become
    placeholders named by their qualified names."""
    from torch.fx.experimental.proxy_tensor import make_fx
    try:
        from torch.func import functional_call
    except ImportError:
        from torch.nn.utils.stateless import functional_call
    pnames = [n for n, _ in module.named_parameters()]
    bnames = [n for n, _ in module.named_buffers()]
    ptensors = [p.detach() for _, p in module.named_parameters()]
    btensors = [b.detach() for _, b in module.named_buffers()]
    np_, nb = len(pnames), len(bnames)

    def fn(*flat):
        state = dict(zip(pnames, flat[:np_]))
        state.update(zip(bnames, flat[np_:np_ + nb]))
        return functional_call(module, state, tuple(flat[np_ + nb:]))

    with torch.no_grad(), _record_sources():
        gm = make_fx(functionalize(fn),
                     decomposition_table=decompositions())(
                         *ptensors, *btensors, *args)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    users = _user_names(len(args), input_names)
    infos = []
    known = getattr(module, "_mtsched_buffer_values", {}) or {}
    for i, ph in enumerate(phs):
        if i < np_:
            infos.append(InputInfo(ph.name, pnames[i], "parameter", pnames[i]))
        elif i < np_ + nb:
            info = InputInfo(ph.name, bnames[i - np_], "buffer",
                             bnames[i - np_])
            info.value = _known_value(btensors[i - np_],
                                      known.get(bnames[i - np_]))
            infos.append(info)
        else:
            u = users[i - np_ - nb]
            infos.append(InputInfo(ph.name, u, "input", u))
    return Traced(gm, infos, "make_fx")


def trace_export(module, args, input_names=None, decompose=True):
    """Exports module(*args) with torch.export.

    ``decompose=True`` (the default) runs ``run_decompositions`` with the
    core-ATen table minus the ops kept whole (KEEP_WHOLE: SDPA, norms,
    softmax, the matmul family...), which also functionalizes: in-place ops
    disappear. ``decompose=False`` imports the graph as exported."""
    if not has_export():
        raise RuntimeError("torch.export needs PyTorch 2.x (this is %s)"
                           % torch.__version__)
    ep = torch.export.export(module, tuple(args))
    if decompose:
        try:
            ep = ep.run_decompositions(export_decompositions())
        except (ImportError, TypeError):
            ep = ep.run_decompositions()
    sig = ep.graph_signature
    kinds = {}
    for spec in sig.input_specs:
        k = str(spec.kind).split(".")[-1].lower()
        name = getattr(spec.arg, "name", None)
        kinds[name] = ("parameter" if k == "parameter" else
                       "buffer" if k == "buffer" else
                       "constant" if k.startswith("constant") else
                       "input" if k == "user_input" else k,
                       spec.target)
    gm = ep.graph_module
    outs = [i for i, spec in enumerate(sig.output_specs)
            if str(spec.kind).split(".")[-1].lower() == "user_output"]
    users = iter(_user_names(len(args), input_names))
    infos = []
    bufs = dict(module.named_buffers())
    bufs.update(getattr(module, "_mtsched_buffer_values", {}) or {})
    for ph in gm.graph.nodes:
        if ph.op != "placeholder":
            continue
        kind, target = kinds.get(ph.name, ("input", None))
        if kind == "input":
            u = next(users, ph.name)
            infos.append(InputInfo(ph.name, u, kind, u))
        else:
            info = InputInfo(ph.name, target or ph.name, kind,
                             target or ph.name)
            if kind in ("buffer", "constant"):
                info.value = _known_value(
                    bufs.get(target), getattr(ep, "constants", {}).get(
                        target) if target else None)
            infos.append(info)
    t = Traced(gm, infos, "export")
    if len(outs) != len(sig.output_specs):
        t.user_outputs = outs  # drop buffer mutations and the like
    return t


def _is_aten_graph(gm):
    for n in gm.graph.nodes:
        if n.op == "call_module" or n.op == "call_method":
            return False
        if n.op == "call_function" and not isinstance(
                n.target, torch._ops.OpOverload) and n.target.__module__ not in (
                    "_operator", "operator"):
            return False
    return True


def trace_graph_module(gm, args=None, input_names=None):
    """A GraphModule from make_fx is used as is; any other (symbolic_trace)
    is re-traced with make_fx on args."""
    has_meta = all("val" in n.meta or "tensor_meta" in n.meta
                   for n in gm.graph.nodes if n.op == "placeholder")
    if _is_aten_graph(gm) and has_meta:
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        users = _user_names(len(phs), input_names)
        return Traced(gm, [InputInfo(p.name, users[i], "input", p.name)
                           for i, p in enumerate(phs)], "graph_module")
    if args is None:
        raise ValueError("a symbolic_trace GraphModule needs example inputs")
    t = trace_make_fx(gm, args, input_names)
    t.tracer = "symbolic_trace+make_fx"
    return t


def trace(module, args, tracer="auto", input_names=None):
    """Dispatches to a tracer. ``auto``: export where available (2.x), else
    make_fx; a GraphModule from symbolic_trace/make_fx goes through
    trace_graph_module unless ``export`` is asked for."""
    if tracer == "auto":
        tracer = "export" if has_export() else "make_fx"
    if isinstance(module, torch.fx.GraphModule) and tracer != "export":
        return trace_graph_module(module, args, input_names)
    if tracer == "export":
        return trace_export(module, args, input_names)
    if tracer == "make_fx":
        return trace_make_fx(module, args, input_names)
    if tracer == "symbolic_trace":
        return trace_graph_module(torch.fx.symbolic_trace(module), args,
                                  input_names)
    raise ValueError("unknown tracer %r (auto, export, make_fx, "
                     "symbolic_trace)" % tracer)
