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
import sys

import torch
import torch.fx



class InputInfo:
    """One placeholder: its FX name, IR name, kind and PyTorch name."""

    def __init__(self, fx_name, ir_name, kind, torch_name):
        self.fx_name = fx_name
        self.ir_name = ir_name
        self.kind = kind  # "input", "parameter", "buffer", "constant"
        self.torch_name = torch_name

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
    if hasattr(torch.device(device), "__enter__"):
        with torch.device(device):
            return factory(**kwargs)
    print("mtsched_torch: warning: %s takes no 'device' argument; building it "
          "on the CPU (real weights) and moving it to %s"
          % (getattr(factory, "__name__", factory), device), file=sys.stderr)
    return factory(**kwargs).to(device)


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

    with torch.no_grad():
        gm = make_fx(fn)(*ptensors, *btensors, *args)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    users = _user_names(len(args), input_names)
    infos = []
    for i, ph in enumerate(phs):
        if i < np_:
            infos.append(InputInfo(ph.name, pnames[i], "parameter", pnames[i]))
        elif i < np_ + nb:
            infos.append(InputInfo(ph.name, bnames[i - np_], "buffer",
                                   bnames[i - np_]))
        else:
            u = users[i - np_ - nb]
            infos.append(InputInfo(ph.name, u, "input", u))
    return Traced(gm, infos, "make_fx")


def trace_export(module, args, input_names=None, decompose=False):
    """Exports module(*args) with torch.export.

    The exported ATen graph is imported as it is: ``aten.linear``,
    ``aten.silu``, ``aten.softmax`` stay whole, which is what the op table
    maps. ``decompose=True`` runs ``run_decompositions()`` to core ATen first
    (silu then arrives as x * sigmoid(x), which is mapped back)."""
    if not has_export():
        raise RuntimeError("torch.export needs PyTorch 2.x (this is %s)"
                           % torch.__version__)
    ep = torch.export.export(module, tuple(args))
    if decompose:
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
    for ph in gm.graph.nodes:
        if ph.op != "placeholder":
            continue
        kind, target = kinds.get(ph.name, ("input", None))
        if kind == "input":
            u = next(users, ph.name)
            infos.append(InputInfo(ph.name, u, kind, u))
        else:
            infos.append(InputInfo(ph.name, target or ph.name, kind,
                                   target or ph.name))
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
