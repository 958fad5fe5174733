"""``torch.compile(model, backend="mtsched")``: Dynamo graphs decided by
mtsched and run by its runtime library (PyTorch 2.x only).

    import mtsched_torch.backend            # registers "mtsched"
    fast = torch.compile(model, backend="mtsched", dynamic=False)

Per graph Dynamo hands over: the graph is imported to the IR
(``import_module``: torch.export, else make_fx; backend_import.py, with its
cache), decided by ``mtsched-opt --pipeline=default --backend=cuda`` in a
subprocess (its autotune cache and ``--kernel-cache-dir`` as the command
line has them, so a second process starts warm; the decided IR itself is
cached too, keyed by the imported IR's hash), loaded with
``mtsched_torch.runtime`` and returned as a callable on the caller's
tensors. Inputs on the CPU run on the fp64 interpreter
(``device="cpu"``: a reference, not fast).

Before a decided graph is trusted it is checked, twice (backend_check.py):
no node may run a choice that failed mtsched-opt's check against its
reference or was never measured (``untrusted_decisions``); and, the first
time, the decided graph runs once on Dynamo's example inputs and each
output is compared with eager's, the verdict cached beside the decided IR
(``<key>.check.json``).

What cannot run goes back to PyTorch, with one warning naming why: an op
outside the IR, a symbolic (dynamic) shape, a graph the runtime cannot
prepare, a decided choice that did not pass its check, an output that
differs from eager's. Configuration (environment): MTSCHED_BUILD_DIR (where
``tools/mtsched-opt/mtsched-opt`` and ``lib/RuntimeApi/libmtsched_runtime.so``
are), MTSCHED_OPT, MTSCHED_RUNTIME_LIB, MTSCHED_TORCH_CACHE (the decided IR
and kernel caches; default ~/.cache/mtsched/torch), MTSCHED_TORCH_OPT_ARGS
(extra mtsched-opt flags), MTSCHED_TORCH_CHECK=0 (the graph-level check is
not run; a verdict already cached still holds), MTSCHED_TORCH_SIZE_HINTS
(rows to tune each matmul at, "1,16,128"; torch.compile's
options={"size_hints_m": ...} too): the first size of a graph is tuned with
them, and the same graph at another number of rows (Dynamo recompiles on a
new shape) is decided from that decision's dispatch tables (mtsched-opt
--decisions-from, no benchmark of what they cover; backend_hints.py).
docs/RUNTIME.md says what is unfinished.
"""

import collections
import hashlib
import json
import os
import shlex
import subprocess
import time
import warnings
import weakref

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

from . import runtime  # noqa: E402
from .backend_base import (MAX_GRAPHS, Fallback, _cache_dir,  # noqa: E402
                           _decided_path, _log, _report_path, _several,
                           decided_nodes, find_mtsched_opt)
# untrusted_decisions and check_enabled: mtsched_torch.backend's names too.
from .backend_check import (  # noqa: E402,F401
    _check_choices, _check_graph, check_enabled, untrusted_decisions)
# size_hints: mtsched_torch.backend's name too.
from .backend_hints import (  # noqa: E402
    _decide_from_family, _remember_family, _shape_free_key, size_hints)
from .backend_import import (_Lifted, _graph_key, _import,  # noqa: E402
                             _load_imported, _store_imported)
from .ranks import DISABLED_CHOICES, Ranks, broadcast, gather  # noqa: E402

ROOT = runtime.ROOT
# Decided graphs kept per process (at most MAX_GRAPHS).
_GRAPHS = collections.OrderedDict()
_COUNTER = [0]
# What this process compiled: graphs run by mtsched, and the reasons of
# those that went back to eager (examples/torch/compile_backend.py prints
# them).
STATS = {"mtsched": 0, "eager": []}
# One record per graph compiled (_compile): where its IR and decisions came
# from, the runtime's counters after prepare, and the seconds each step
# took. A warm process shows "ir": "cache", "decided": "cache",
# kernels_compiled 0 (no NVRTC) and no mtsched-opt run (no benchmark).
GRAPHS = []
# mtsched-opt runs this process made (each one decides and benchmarks).
OPT_RUNS = [0]
# mtsched-opt runs that decided a graph from the dispatch tables of the
# same graph decided at another size (--decisions-from: no benchmark of
# what the tables cover).
DISPATCH_RUNS = [0]
# GRAPHS' names to their runtime graphs, while the process holds them.
_LIVE = weakref.WeakValueDictionary()


def live_stats(name):
    """The runtime's counters of graph `name` (GRAPHS) now: runs,
    captures, staged copies, ... Empty once the graph is gone."""
    g = _LIVE.get(name)
    return g.stats() if g is not None else {}


def opt_env():
    """The environment mtsched-opt runs in: this process's, without the
    MPI launcher's variables. Under mpirun they would make mtsched-opt an
    MPI rank of the program's world (docs/RANKS.md) where it must run its
    own thread ranks."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_", "PMI_", "PMIX_"))}


def _decide_key(text, device, world=1, hints=None, source=None):
    """(mtsched-opt, its flags, the decided IR's cache key) for imported
    IR `text`. Several ranks: thread ranks, one GPU each, and only the
    collective choices the runtime runs across processes (NCCL). Size
    hints (a tuple of rows): tuned at each, for the dispatch tables.
    source: the decided IR whose dispatch tables decide this one
    (--decisions-from)."""
    opt = find_mtsched_opt()
    backend = "cuda" if device.startswith("cuda") else "sim"
    extra = shlex.split(os.environ.get("MTSCHED_TORCH_OPT_ARGS", ""))
    flags = ["--backend=" + backend] + extra
    if world > 1:
        flags += ["--ranks=%d" % world, "--disable-choices=" + DISABLED_CHOICES]
    if hints and not source:
        flags.append("--size-hints-m=" + ",".join(str(h) for h in hints))
    if source:
        flags.append("--decisions-from=" + source)
    st = os.stat(opt)
    # One rank keeps today's key (its caches stay warm); several add the
    # world's size and flags.
    parts = [text, backend, " ".join(extra), str(st.st_size),
             str(int(st.st_mtime))]
    if world > 1:
        parts.append(" ".join(flags))
    if hints and not source:
        parts.append("size hints m %s" % ",".join(str(h) for h in hints))
    if source:
        # What was decided from: the tables' text, not the file's name.
        with open(source, "rb") as f:
            parts.append("decisions from " +
                         hashlib.sha256(f.read()).hexdigest())
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    return opt, flags, key


def _decide(text, device, world=1, hints=None, source=None):
    """The decided IR for imported IR `text`: from the cache, else by
    mtsched-opt (written to the cache)."""
    opt, flags, key = _decide_key(text, device, world, hints, source)
    d = _cache_dir()
    decided = _decided_path(key)
    if os.path.exists(decided):
        with open(decided) as f:
            return f.read(), key, True
    src = os.path.join(d, key + ".mir")
    with open(src, "w") as f:
        f.write(text)
    # The report says why a choice failed its check (the choice-level
    # check's warning names it) and, with several ranks, how many
    # pre-syncs the decision took (one).
    cmd = [opt, "--pipeline=default", "--quiet",
           "--kernel-cache-dir=" + os.path.join(d, "kernels")] + flags + \
        ["--report=" + _report_path(key), "-o", decided + ".tmp", src]
    # The report also says which nodes the dispatch tables decided.
    if source:
        DISPATCH_RUNS[0] += 1
    else:
        OPT_RUNS[0] += 1
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=opt_env())
    if p.returncode != 0:
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        raise Fallback("mtsched-opt failed (rc %d): %s"
                       % (p.returncode, last[:300]))
    os.replace(decided + ".tmp", decided)
    with open(decided) as f:
        return f.read(), key, False


class _Binder:
    """The IR's inputs from a call's arguments: Dynamo's graph inputs by
    position, the graph module's own parameters and buffers by name;
    transposed where the IR holds the transpose (a transposed tensor is
    made contiguous once and reused while it is unchanged)."""

    def __init__(self, gm, res, n_args, lifted=(), device="cpu"):
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
            elif info.get("kind") == "constant" and \
                    info["ir_name"] in res.constants:
                # Folded at import (a mask, an index vector): on the
                # graph's device once.
                self.sources.append(("state",
                                     res.constants[info["ir_name"]].to(device),
                                     False))
            elif tn in state:
                self.sources.append(("state", state[tn], info["transposed"]))
            else:
                raise Fallback("IR input %%%s (%s) is neither an input nor "
                               "a parameter" % (info["ir_name"], tn))
        self.cache = {}

    def __call__(self, args):
        # On every call's path: no detach (a new tensor object each) unless
        # a copy is made; run_torch reads only the pointers.
        out = []
        cache = self.cache
        for k, (kind, src, transposed) in enumerate(self.sources):
            t = args[src] if kind == "arg" else src
            if transposed:
                key = (t.data_ptr(), t._version, t.shape)
                hit = cache.get(k)
                if hit is None or hit[0] != key:
                    hit = (key, t.detach().t().contiguous())
                    cache[k] = hit
                t = hit[1]
            elif not t.is_contiguous():
                t = t.detach().contiguous()
            elif t.data_ptr() % 16:
                # The kernels move 16-byte words (docs/CUDA.md): a view
                # starting inside one (rows sliced off) is copied.
                t = t.detach().clone()
            out.append(t)
        return out


def _check_inputs(gm, example_inputs):
    """The graph's device ("cpu", "cuda" or "cuda:N"), or Fallback."""
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise Fallback("input %d is a %s, not a tensor (a dynamic shape?"
                           " compile with dynamic=False)" % (i, type(x).__name__))
        if any(not isinstance(s, int) for s in x.shape):
            raise Fallback("input %d has a symbolic shape %s (compile with "
                           "dynamic=False)" % (i, list(x.shape)))
    devs = {x.device for x in example_inputs}
    for _, p in gm.named_parameters():
        devs.add(p.device)
    types = {d.type for d in devs}
    if len(types) > 1 or not types <= {"cuda", "cpu"}:
        raise Fallback("inputs on devices %s (one of cuda, cpu)"
                       % sorted(types))
    if not devs:
        return "cpu"
    if types == {"cuda"}:
        idx = {d.index for d in devs if d.index is not None}
        if len(idx) > 1:
            raise Fallback("inputs on several GPUs %s" % sorted(idx))
        # One rank keeps "cuda" (device 0, as before); several name theirs.
        return "cuda:%d" % (idx.pop() if idx else torch.cuda.current_device())
    return "cpu"


def _decide_ranks(text, device, ranks, rec, hints=None):
    """The decided IR of imported IR `text` on every rank, the same:
    (text, key, from the cache). With several ranks, decided once, by rank
    0 (mtsched-opt --ranks=<world>, one pre-sync) and broadcast."""
    if not ranks.several:
        return _decide(text, device, 1, hints)
    key = _several(ranks, "decide", lambda: (
        _decide_key(text, device, ranks.world, hints)[2],))[0]
    path = _decided_path(key)
    hit = os.path.exists(path)
    mine = None
    if hit:
        with open(path) as f:
            mine = f.read()
    hits = gather(ranks, hit)
    if all(hits):
        # Every rank's cache has it: the same text everywhere, checked.
        _several(ranks, "the cached decisions", lambda: (mine,))
        return mine, key, True
    # Rank 0 decides (or reads its cache) while the others wait on the CPU.
    got = None
    if ranks.rank == 0:
        try:
            t, _, h = _decide(text, device, ranks.world, hints)
            got = (True, t, h)
        except Fallback as e:
            got = (False, str(e), False)
        except Exception as e:  # noqa: BLE001 - the others wait for it
            got = (False, "%s: %s" % (type(e).__name__, e), False)
    got = broadcast(ranks, got)
    if not got[0]:
        raise Fallback("rank 0 of %d: %s" % (ranks.world, got[1]))
    if ranks.rank != 0 and not hit:
        # Ranks may share the directory: a temporary name of each rank's.
        tmp = "%s.tmp%d" % (path, ranks.rank)
        try:
            with open(tmp, "w") as f:
                f.write(got[1])
            os.replace(tmp, path)
        except OSError as e:
            _log("the decided IR was not cached on rank %d: %s"
                 % (ranks.rank, e))
    return got[1], key, got[2] and ranks.rank == 0


def decisions_of(text):
    """{node: decided choice} of a decided module's text, in order
    (decided_nodes)."""
    return {n.name: n.choice for n in decided_nodes(text)}


def _presyncs(key):
    """The pre-syncs rank 0's mtsched-opt reported for decision `key`
    (sync.count), None where no report is kept."""
    try:
        with open(_report_path(key)) as f:
            return json.load(f)["sync"]["count"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _prepare(decided, device, ranks):
    """The runtime's module and graph for the decided text; several ranks
    open their communicator (rank 0's id, broadcast) at once."""
    cid = None
    if ranks.several:
        got = None
        if ranks.rank == 0:
            try:
                got = (True, runtime.comm_id("cuda") if
                       device.startswith("cuda") else
                       bytes(runtime.COMM_ID_BYTES))
            except Exception as e:  # noqa: BLE001 - the others wait for it
                got = (False, str(e).splitlines()[0][:300] if str(e) else
                       type(e).__name__)
        got = broadcast(ranks, got)
        if not got[0]:
            raise Fallback("rank 0 of %d cannot make the communicator's id:"
                           " %s" % (ranks.world, got[1]))
        cid = got[1]

    def prepare():
        try:
            mod = runtime.Module(decided)
            if ranks.several:
                mod.set_ranks(ranks.rank, ranks.world, cid)
            graph = mod.graph(device=device,
                              kernel_cache_dir=os.path.join(_cache_dir(),
                                                            "kernels"))
        except (runtime.RuntimeError_, OSError) as e:
            raise Fallback("the runtime cannot run it: %s"
                           % str(e).splitlines()[0][:300])
        return mod, graph
    return _several(ranks, "prepare", prepare)


def _check_outputs(imp, graph):
    if imp.n_outputs != len(graph.outputs):
        raise Fallback("the graph returns %d values, the IR %d tensors"
                       % (imp.n_outputs, len(graph.outputs)))


def _compile(gm, example_inputs, options=None):
    ranks = Ranks.current()
    hints = size_hints(options)
    t0 = time.time()
    _COUNTER[0] += 1
    name = "dynamo_%d" % _COUNTER[0]
    rec = {"name": name, "rank": ranks.rank, "world_size": ranks.world}

    def imported():
        device = _check_inputs(gm, example_inputs)
        if ranks.several and not device.startswith("cuda") and \
                device != "cpu":
            raise Fallback("device %s" % device)
        lifted = [i for i, x in enumerate(example_inputs)
                  if isinstance(x, torch.nn.Parameter)]
        traced = _Lifted(gm, example_inputs, lifted) if lifted else gm
        # The imported IR by Dynamo's graph: a second process neither
        # re-exports the graph (torch.export costs seconds) nor runs it
        # eagerly.
        gkey = _graph_key(gm, example_inputs, lifted, ranks.world)
        imp = _load_imported(gkey)
        rec["ir"] = "cache" if imp else "imported"
        if imp is None:
            try:
                imp = _import(traced, example_inputs, lifted, name, gm,
                              ranks.world)
            except Fallback as e:
                # Remembered too: a second process falls back at once.
                _store_imported(gkey, None, str(e))
                raise
            _store_imported(gkey, imp)
        if isinstance(imp, str):
            raise Fallback(imp)
        skey = _shape_free_key(gm, example_inputs, lifted, device, hints) \
            if hints else None
        return imp.text, imp, device, lifted, traced, skey

    # Several ranks: every rank imported the same IR, or none runs it.
    _, imp, device, lifted, traced, skey = _several(ranks, "import",
                                                    imported)
    if not ranks.several and device.startswith("cuda"):
        device = "cuda"  # one rank: device 0, as before
    t1 = time.time()
    rec["import_s"] = t1 - t0
    entry = _GRAPHS.get(imp.text)
    if entry is None:
        # Size hints, one rank: the graph at another size than the one
        # its family was tuned at is decided from that one's dispatch
        # tables (no benchmark where they cover its rows); a size tuned
        # itself before keeps its own decisions.
        decided, key, hit = None, None, False
        if skey and not ranks.several:
            decided, key, hit = _decide_from_family(
                skey, rec, name,
                lambda: _decided_path(_decide_key(imp.text, device, 1,
                                                  hints)[2]),
                lambda source: _decide(imp.text, device, 1, hints, source))
        if decided is None:
            decided, key, hit = _decide_ranks(imp.text, device, ranks, rec,
                                              hints)
            rec["decided"] = "cache" if hit else (
                "mtsched-opt" if ranks.rank == 0 else "rank 0")
            # Only a decision with a matmul's table can decide another
            # size (mtsched-opt --decisions-from refuses one without).
            if skey and not ranks.several and "dispatch m {" in decided:
                _remember_family(skey, _decided_path(key))
        rec["decided_path"] = _decided_path(key)
        if ranks.several:
            # Said where it is recorded, not only in the docs: the
            # peer-memory choices were not offered.
            rec["disabled_choices"] = DISABLED_CHOICES
            rec["presyncs"] = _presyncs(key) if ranks.rank == 0 else None
            rec["presyncs"] = broadcast(ranks, rec["presyncs"])
        # A node running a choice that failed its check (or was never
        # measured) is not run; the same text on every rank, so the same
        # verdict (rank 0's report names the reason).
        _several(ranks, "choices", lambda: _check_choices(decided, key))
        t2 = time.time()
        rec["decide_s"] = t2 - t1
        mod, graph = _prepare(decided, device, ranks)
        rec["prepare_s"] = time.time() - t2
        _check_outputs(imp, graph)
        binder = _Binder(traced, imp, len(example_inputs), lifted, device)
        t3 = time.time()
        _check_graph(ranks, key, decided, device, graph, binder, imp, gm,
                     example_inputs, rec)
        rec["check_s"] = time.time() - t3
        entry = (mod, graph, rec["decided"], rec["decided_path"],
                 decisions_of(decided), rec.get("presyncs"),
                 (rec["checked"], rec["check_error"],
                  rec.get("check_skipped")))
        _GRAPHS[imp.text] = entry
        while len(_GRAPHS) > MAX_GRAPHS:
            _GRAPHS.popitem(last=False)
    else:
        rec["decided"], rec["decided_path"] = "process", entry[3]
        rec["decide_s"] = rec["prepare_s"] = rec["check_s"] = 0.0
        if ranks.several:
            rec["presyncs"] = entry[5]
        checked, rec["check_error"], skipped = entry[6]
        # Checked (here or before) when the graph was first compiled.
        rec["checked"] = "cached" if checked else False
        if skipped:
            rec["check_skipped"] = skipped
        _check_outputs(imp, entry[1])
        binder = _Binder(traced, imp, len(example_inputs), lifted, device)
    rec["decisions"] = entry[4]
    graph = entry[1]
    single = imp.single
    rec["compile_s"] = time.time() - t0
    rec.update(graph.stats())
    rec["opt_runs"] = OPT_RUNS[0]
    rec["dispatch_runs"] = DISPATCH_RUNS[0]
    _LIVE[name] = graph
    GRAPHS.append(rec)
    if rec.get("disabled_choices"):
        _log("%s: decided for %d ranks with --disable-choices=%s (the "
             "runtime runs collectives across processes through NCCL only; "
             "docs/RUNTIME.md)" % (name, ranks.world,
                                   rec["disabled_choices"]))
    _log("%s%s: IR %s, decided %s; kernels %s loaded, %s from the cache, %s "
         "compiled by NVRTC; mtsched-opt runs (each autotunes, i.e. "
         "benchmarks) in this process %d; accuracy check %s; compile %.3f s "
         "(import %.3f, decide %.3f, prepare %.3f, check %.3f)" % (
             name, " (rank %d of %d)" % (ranks.rank, ranks.world)
             if ranks.several else "",
             "from the cache" if rec["ir"] == "cache" else "imported",
             "from the cache" if rec["decided"] == "cache" else
             "from the dispatch tables of %s (hint %s)" % (
                 rec.get("decided_from"), rec.get("hint"))
             if rec["decided"] == "dispatch" else
             "by " + rec["decided"], rec.get("kernels", "?"),
             rec.get("kernels_cached", "?"),
             rec.get("kernels_compiled", "?"), OPT_RUNS[0],
             "passed, error %.1e" % rec["check_error"]
             if rec["checked"] is True else
             "passed before (cached)" if rec["checked"] == "cached" else
             "not run (%s)" % rec.get("check_skipped"),
             rec["compile_s"], rec["import_s"], rec["decide_s"],
             rec["prepare_s"], rec["check_s"]))
    # Dynamo's guards hold each input's shape, dtype, stride and device as
    # at compile, and the binder makes them contiguous: the lean runner.
    run_torch = graph.run_torch if device == "cpu" else graph.torch_runner(
        int(device.partition(":")[2] or 0))

    def run(*args):
        outs = run_torch(binder(args))
        return outs[0] if single else tuple(outs)
    return run


@register_backend(name="mtsched")
def mtsched_backend(gm, example_inputs, mode=None, options=None):
    """The Dynamo backend: the decided graph's callable, or gm itself (eager)
    with one warning naming why. torch.compile passes its mode and options
    on to a custom backend where it wraps it (_TorchCompileWrapper): the
    mode is not used (mtsched-opt always autotunes); options may hold
    size_hints_m (size_hints)."""
    try:
        fn = _compile(gm, example_inputs, options)
        STATS["mtsched"] += 1
        return fn
    except Fallback as e:
        STATS["eager"].append(str(e))
        warnings.warn("mtsched: this graph runs eagerly: %s" % e,
                      RuntimeWarning, stacklevel=2)
        return gm.forward
