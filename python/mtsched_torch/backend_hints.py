"""The torch.compile backend's size hints (mtsched_torch.backend): the
rows each matmul is tuned at (MTSCHED_TORCH_SIZE_HINTS, or torch.compile's
options={"size_hints_m": ...}; ``size_hints``), and the family of a
Dynamo graph across its sizes. The first size of a graph is tuned with the
hints (mtsched-opt --size-hints-m); the same graph at another number of
rows (Dynamo recompiles on a new shape; the same ``_shape_free_key``) is
decided from that decision's dispatch tables (mtsched-opt
--decisions-from, no benchmark of what they cover;
``_decide_from_family``). The cache directory remembers each family's first
decision (family-<key>.txt) for the next process."""

import collections
import hashlib
import json
import os

from .backend_base import (MAX_GRAPHS, Fallback, _cache_dir,
                           _importer_version, _log, find_mtsched_opt)


# Size hints: a shape-free key of a Dynamo graph (_shape_free_key) -> the
# decided IR of its first size, decided with --size-hints-m (its dispatch
# tables decide the graph's other sizes). Bounded like _GRAPHS.
_FAMILIES = collections.OrderedDict()


def size_hints(options=None):
    """The rows (M) to tune each matmul at, sorted: torch.compile's
    options={"size_hints_m": [...]} (a list of ints or "1,16,128"), else
    MTSCHED_TORCH_SIZE_HINTS; None for none. Fallback for a bad value."""
    options = dict(options or {})
    raw = options.pop("size_hints_m", None)
    if options:
        raise Fallback("unknown option%s %s (the mtsched backend takes "
                       "size_hints_m)" % ("s" if len(options) > 1 else "",
                                          ", ".join(sorted(map(str,
                                                                options)))))
    where = "options['size_hints_m']"
    if raw is None:
        raw = os.environ.get("MTSCHED_TORCH_SIZE_HINTS", "")
        where = "MTSCHED_TORCH_SIZE_HINTS"
    if isinstance(raw, str):
        raw = [t for t in raw.replace(" ", "").split(",") if t]
    try:
        hints = sorted({int(h) for h in raw})
    except (TypeError, ValueError):
        raise Fallback("%s must be positive integers (rows), not %r"
                       % (where, raw))
    if any(h <= 0 for h in hints):
        raise Fallback("%s must be positive integers (rows), not %r"
                       % (where, raw))
    return tuple(hints) or None


def _shape_free_key(gm, example_inputs, lifted, device, hints):
    """A key of Dynamo's graph with its rows abstracted: the same for the
    graph at another number of rows (tokens). What counts as rows: every
    dimension but the last of each input that is not a parameter, and in
    the graph's code any integer literal equal to one of them or to the
    product of one input's (a view to [rows, hidden]). Parameters, buffers,
    dtypes, the code otherwise, the device, the hints, the mtsched-opt
    binary and MTSCHED_TORCH_OPT_ARGS are kept exactly.
    A key shared by graphs that are not one is harmless:
    mtsched-opt --decisions-from takes a node's decision only from a node
    of the same name, op and shape but for its rows, with a choice the
    node offers, and tunes the rest."""
    import re
    rows = set()
    shapes = []
    for i, x in enumerate(example_inputs):
        if i in lifted or x.dim() == 0:
            shapes.append((i, tuple(x.shape), str(x.dtype), i in lifted))
            continue
        lead = tuple(x.shape[:-1])
        rows.update(int(d) for d in lead)
        p = 1
        for d in lead:
            p *= int(d)
        rows.add(p)
        shapes.append((i, ("M",) * len(lead) + (int(x.shape[-1]),),
                       str(x.dtype), False))
    rows.discard(1)  # a literal 1 is everywhere; a row count of 1 is kept
    code = re.sub(r"(?<![\w.])(\d+)(?![\w.])",
                  lambda m: "<M>" if int(m.group(1)) in rows else m.group(1),
                  gm.code)
    h = hashlib.sha256(_importer_version().encode())
    h.update(code.encode())
    # Like the decided IR's key: another mtsched-opt or other flags decide
    # afresh rather than from an older binary's tables.
    st = os.stat(find_mtsched_opt())
    h.update(repr((shapes, device, hints, st.st_size, int(st.st_mtime),
                   os.environ.get("MTSCHED_TORCH_OPT_ARGS", ""))).encode())
    for n, t in list(gm.named_parameters()) + list(gm.named_buffers()):
        h.update(repr((n, tuple(t.shape), str(t.dtype))).encode())
    return h.hexdigest()[:24]


def _family_path(skey):
    return os.path.join(_cache_dir(), "family-%s.txt" % skey)


def _family_source(skey):
    """The decided IR (a path) the graphs of shape-free key skey are
    decided from: its first size's, decided with the size hints, in this
    process or (the cache directory remembers it) an earlier one."""
    path = _FAMILIES.get(skey)
    if path is None:
        try:
            with open(_family_path(skey)) as f:
                path = f.read().strip()
        except OSError:
            return None
    return path if path and os.path.exists(path) else None


def _remember_family(skey, path):
    if _family_source(skey):
        return  # the first size stays the one decided from
    _FAMILIES[skey] = path
    while len(_FAMILIES) > MAX_GRAPHS:
        _FAMILIES.popitem(last=False)
    try:
        with open(_family_path(skey) + ".tmp", "w") as f:
            f.write(path)
        os.replace(_family_path(skey) + ".tmp", _family_path(skey))
    except OSError as e:
        _log("the size-hint family was not cached: %s" % e)


def _dispatch_record(key, rec):
    """What mtsched-opt --decisions-from reported for decision `key`:
    the hint each node was decided at (rec["hints"]), why the others were
    tuned (rec["tuned"]), the benchmarks run; rec["hint"] is the one hint
    when every node took the same."""
    try:
        with open(os.path.join(_cache_dir(), key + ".report.json")) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return
    hints, tuned = {}, {}
    for n in r.get("nodes", []):
        if n.get("dispatch_hint"):
            hints[n["name"]] = n["dispatch_hint"]
        elif n.get("dispatch_miss"):
            tuned[n["name"]] = n["dispatch_miss"]
    rec["hints"], rec["tuned"] = hints, tuned
    rec["benchmarks_run"] = r.get("benchmarks_run")
    one = set(hints.values())
    rec["hint"] = one.pop() if len(one) == 1 else None


def _decide_from_family(skey, rec, name, own, decide):
    """(decided text, key, from the cache) of the graph of shape-free key
    skey decided from the dispatch tables of its family's first size
    (decide(source): _decide with --decisions-from=source), or (None, None,
    False) where it is not: no family yet, this size was tuned itself
    before (own(): the path its own decision would have; it keeps it), or
    the tables could not be used. Sets rec["decided_from"], rec["decided"]
    and what _dispatch_record reports."""
    source = _family_source(skey)
    if source and os.path.exists(own()):
        source = None
    if not source:
        return None, None, False
    try:
        decided, key, hit = decide(source)
    except Fallback as e:
        # The graph is still tuned as usual: a table that cannot be used
        # costs the benchmark it would have saved.
        _log("%s: not decided from %s: %s" % (name, source, e))
        return None, None, False
    rec["decided_from"] = source
    _dispatch_record(key, rec)
    # "dispatch" where a table decided a node (rec["tuned"] names the nodes
    # mtsched-opt tuned as usual, and why).
    rec["decided"] = "cache" if hit else (
        "dispatch" if rec.get("hints") else "mtsched-opt")
    return decided, key, hit
