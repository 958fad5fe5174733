"""``torch.compile(model, backend="mtsched")``: Dynamo graphs decided by
mtsched and run by its runtime library (PyTorch 2.x only).

    import mtsched_torch.backend            # registers "mtsched"
    fast = torch.compile(model, backend="mtsched", dynamic=False)

Per graph Dynamo hands over: the graph is imported to the IR
(``import_module``: torch.export, else make_fx), decided by ``mtsched-opt
--pipeline=default --backend=cuda`` in a subprocess (its autotune cache and
``--kernel-cache-dir`` as the command line has them, so a second process
starts warm; the decided IR itself is cached too, keyed by the imported
IR's hash), loaded with ``mtsched_torch.runtime`` and returned as a callable
on the caller's tensors. Inputs on the CPU run on the fp64 interpreter
(``device="cpu"``: a reference, not fast).

What cannot run goes back to PyTorch, with one warning naming why: an op
outside the IR, a symbolic (dynamic) shape, a graph the runtime cannot
prepare. Configuration (environment): MTSCHED_BUILD_DIR (where
``tools/mtsched-opt/mtsched-opt`` and ``lib/RuntimeApi/libmtsched_runtime.so``
are), MTSCHED_OPT, MTSCHED_RUNTIME_LIB, MTSCHED_TORCH_CACHE (the decided IR
and kernel caches; default ~/.cache/mtsched/torch), MTSCHED_TORCH_OPT_ARGS
(extra mtsched-opt flags). docs/RUNTIME.md says what is unfinished.
"""

import collections
import hashlib
import os
import shlex
import subprocess
import sys
import warnings

import torch


def _unavailable_reason():
    major = int(torch.__version__.split(".")[0])
    if major < 2:
        return ("mtsched_torch.backend needs PyTorch 2.x (torch.compile and "
                "Dynamo backends); this is torch %s" % torch.__version__)
    try:
        from torch._dynamo import register_backend  # noqa: F401
    except ImportError as e:
        return "torch._dynamo.register_backend is unavailable: %s" % e
    return None


UNAVAILABLE = _unavailable_reason()
if UNAVAILABLE:
    raise ImportError(UNAVAILABLE)

from torch._dynamo import register_backend  # noqa: E402

from . import import_module, runtime  # noqa: E402

ROOT = runtime.ROOT
# Decided graphs kept per process (Dynamo's own cache_size_limit bounds
# recompilation per frame; this bounds what one process holds).
MAX_GRAPHS = 16
_GRAPHS = collections.OrderedDict()
_COUNTER = [0]
# What this process compiled: graphs run by mtsched, and the reasons of
# those that went back to eager (examples/torch/compile_backend.py prints
# them).
STATS = {"mtsched": 0, "eager": []}


class Fallback(Exception):
    """Why a graph runs eagerly."""


def _cache_dir():
    d = os.environ.get("MTSCHED_TORCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "mtsched", "torch")
    os.makedirs(d, exist_ok=True)
    return d


def find_mtsched_opt():
    env = os.environ.get("MTSCHED_OPT")
    cands = [env] if env else []
    for b in [os.environ.get("MTSCHED_BUILD_DIR"), os.path.join(ROOT, "build")]:
        if b:
            cands += [os.path.join(b, "tools", "mtsched-opt", "mtsched-opt"),
                      os.path.join(b, "bin", "mtsched-opt"),
                      os.path.join(b, "mtsched-opt")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise Fallback("mtsched-opt not found (set MTSCHED_BUILD_DIR or "
                   "MTSCHED_OPT); looked in: " + ", ".join(cands))


def _decide(text, device):
    """The decided IR for imported IR `text`: from the cache, else by
    mtsched-opt (written to the cache)."""
    opt = find_mtsched_opt()
    backend = "cuda" if device == "cuda" else "sim"
    extra = shlex.split(os.environ.get("MTSCHED_TORCH_OPT_ARGS", ""))
    st = os.stat(opt)
    key = hashlib.sha256("\0".join(
        [text, backend, " ".join(extra), str(st.st_size),
         str(int(st.st_mtime))]).encode()).hexdigest()[:24]
    d = _cache_dir()
    decided = os.path.join(d, key + ".decided.mir")
    if os.path.exists(decided):
        with open(decided) as f:
            return f.read(), key
    src = os.path.join(d, key + ".mir")
    with open(src, "w") as f:
        f.write(text)
    cmd = [opt, "--pipeline=default", "--backend=" + backend, "--quiet",
           "--kernel-cache-dir=" + os.path.join(d, "kernels")] + extra + \
        ["-o", decided + ".tmp", src]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        raise Fallback("mtsched-opt failed (rc %d): %s"
                       % (p.returncode, last[:300]))
    os.replace(decided + ".tmp", decided)
    with open(decided) as f:
        return f.read(), key


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


class _Binder:
    """The IR's inputs from a call's arguments: Dynamo's graph inputs by
    position, the graph module's own parameters and buffers by name;
    transposed where the IR holds the transpose (a transposed tensor is
    made contiguous once and reused while it is unchanged)."""

    def __init__(self, gm, res, n_args, lifted=()):
        state = dict(gm.named_parameters())
        state.update(dict(gm.named_buffers()))
        self.sources = []
        # The call's positions of the traced module's inputs: all of them,
        # or those left after Dynamo's lifted parameters (_Lifted).
        positions = [i for i in range(n_args) if i not in set(lifted)]
        user = ["x" if len(positions) == 1 else "x%d" % i
                for i in range(len(positions))]
        for info in res.inputs:
            tn = info["torch_name"]
            if tn in user:
                self.sources.append(("arg", positions[user.index(tn)],
                                     info["transposed"]))
            elif tn.startswith(_Lifted.PREFIX) and \
                    int(tn[len(_Lifted.PREFIX):]) in lifted:
                # A lifted parameter: the call's tensor, so an update of the
                # parameter is seen (a transposed copy is remade then).
                self.sources.append(("arg", int(tn[len(_Lifted.PREFIX):]),
                                     info["transposed"]))
            elif tn in state:
                self.sources.append(("state", state[tn], info["transposed"]))
            else:
                raise Fallback("IR input %%%s (%s) is neither an input nor "
                               "a parameter" % (info["ir_name"], tn))
        self.cache = {}

    def __call__(self, args):
        out = []
        for k, (kind, src, transposed) in enumerate(self.sources):
            t = args[src] if kind == "arg" else src
            t = t.detach()
            if transposed:
                key = (t.data_ptr(), t._version, tuple(t.shape))
                hit = self.cache.get(k)
                if hit is None or hit[0] != key:
                    hit = (key, t.t().contiguous())
                    self.cache[k] = hit
                t = hit[1]
            elif not t.is_contiguous():
                t = t.contiguous()
            out.append(t)
        return out


def _compile(gm, example_inputs):
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise Fallback("input %d is a %s, not a tensor (a dynamic shape?"
                           " compile with dynamic=False)" % (i, type(x).__name__))
        if any(not isinstance(s, int) for s in x.shape):
            raise Fallback("input %d has a symbolic shape %s (compile with "
                           "dynamic=False)" % (i, list(x.shape)))
    devs = {x.device.type for x in example_inputs}
    for _, p in gm.named_parameters():
        devs.add(p.device.type)
    if len(devs) > 1 or not devs <= {"cuda", "cpu"}:
        raise Fallback("inputs on devices %s (one of cuda, cpu)"
                       % sorted(devs))
    device = devs.pop() if devs else "cpu"
    _COUNTER[0] += 1
    name = "dynamo_%d" % _COUNTER[0]
    res, why = None, []
    lifted = [i for i, x in enumerate(example_inputs)
              if isinstance(x, torch.nn.Parameter)]
    traced = _Lifted(gm, example_inputs, lifted) if lifted else gm
    user = [x for i, x in enumerate(example_inputs) if i not in lifted]
    # torch.export first (2.x), then make_fx, as mtsched_torch.compare does.
    for tracer in ["auto", "make_fx"]:
        try:
            res = import_module(traced, user, name, 1, tracer, quiet=True)
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
    with torch.no_grad():
        ref = gm(*example_inputs)
    single = not isinstance(ref, (list, tuple))
    refs = [ref] if single else list(ref)
    if len(refs) != len(res.outputs) or not all(
            isinstance(r, torch.Tensor) for r in refs):
        raise Fallback("the graph returns %d values, the IR %d tensors"
                       % (len(refs), len(res.outputs)))
    text = res.text()
    entry = _GRAPHS.get(text)
    if entry is None:
        decided, key = _decide(text, device)
        try:
            mod = runtime.Module(decided)
            graph = mod.graph(device=device,
                              kernel_cache_dir=os.path.join(_cache_dir(),
                                                            "kernels"))
        except (runtime.RuntimeError_, OSError) as e:
            raise Fallback("the runtime cannot run it: %s"
                           % str(e).splitlines()[0][:300])
        entry = (mod, graph)
        _GRAPHS[text] = entry
        while len(_GRAPHS) > MAX_GRAPHS:
            _GRAPHS.popitem(last=False)
    graph = entry[1]
    binder = _Binder(traced, res, len(example_inputs), lifted)

    def run(*args):
        outs = graph.run_torch(binder(args))
        return outs[0] if single else tuple(outs)
    return run


@register_backend(name="mtsched")
def mtsched_backend(gm, example_inputs):
    """The Dynamo backend: the decided graph's callable, or gm itself (eager)
    with one warning naming why."""
    try:
        fn = _compile(gm, example_inputs)
        STATS["mtsched"] += 1
        return fn
    except Fallback as e:
        STATS["eager"].append(str(e))
        warnings.warn("mtsched: this graph runs eagerly: %s" % e,
                      RuntimeWarning, stacklevel=2)
        return gm.forward
