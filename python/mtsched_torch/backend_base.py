"""What the torch.compile backend's modules share (mtsched_torch.backend,
backend_check, backend_hints): the reason a graph runs eagerly
(``Fallback``), the cache directory and the paths of a decision in it,
mtsched-opt's path, the importer's version, and the agreement of several
ranks on one step (``_several``). Needs no Dynamo: backend.py is the module
that refuses PyTorch 1.x."""

import collections
import glob
import hashlib
import os
import re
import sys

import torch

from .ranks import Disagree, agree, sha
from .runtime import ROOT


# Decided graphs kept per process (Dynamo's own cache_size_limit bounds
# recompilation per frame; this bounds what one process holds).
MAX_GRAPHS = 16


def _log(msg):
    """A line on stderr when MTSCHED_TORCH_VERBOSE is set."""
    if os.environ.get("MTSCHED_TORCH_VERBOSE"):
        print("mtsched: " + msg, file=sys.stderr)


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


def _decided_path(key):
    return os.path.join(_cache_dir(), key + ".decided.mir")


def _report_path(key):
    return os.path.join(_cache_dir(), key + ".report.json")


_IMPORTER = []


def _importer_version():
    """A hash of the importer's sources (this package's .py files) and
    torch's version: an imported IR cached under another importer is not
    reused."""
    if not _IMPORTER:
        h = hashlib.sha256(torch.__version__.encode())
        here = os.path.dirname(os.path.abspath(__file__))
        for f in sorted(glob.glob(os.path.join(here, "*.py"))):
            with open(f, "rb") as fh:
                h.update(fh.read())
        _IMPORTER.append(h.hexdigest())
    return _IMPORTER[0]


def _several(ranks, what, fn):
    """fn() on every rank, agreed: its value where every rank succeeded
    (and, with several ranks, the values' hashes agree), else Fallback on
    every rank naming the first failure."""
    if not ranks.several:
        return fn()
    value, why = None, None
    try:
        value = fn()
    except Fallback as e:
        why = str(e)
    except Exception as e:  # noqa: BLE001 - a rank that raised must still
        # take part in the agreement, or the others wait for it.
        why = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300]
                          if str(e) else "")
    try:
        agree(ranks, what, why is None,
              sha(value[0]) if isinstance(value, tuple) and
              isinstance(value[0], str) else None, why)
    except Disagree as e:
        raise Fallback(str(e))
    return value


# A decided node of a decided module (decided_nodes).
DecidedNode = collections.namedtuple(
    "DecidedNode", "graph name choice flags timings fused_timings")

_DECIDED_RE = re.compile(
    r"^\s*%([\w.]+) = (?:collective_)?multi_template_buffer .*? "
    r"decided (\S+)((?: fused| fallback)*)")


def _timings(line, word):
    """{choice: "3.1us" | "inf" | "skipped"} of a decided node's `timings`
    or `fused_timings` clause; None where the line has none."""
    m = re.search(r"(?<![\w])%s \{([^}]*)\}" % word, line)
    if m is None:
        return None
    out = {}
    for item in m.group(1).split(","):
        name, _, value = item.strip().rpartition(" = ")
        if name:
            out[name] = value.strip()
    return out


def decided_nodes(text):
    """[DecidedNode] of a decided module's text, in order: for each
    multi_template_buffer (a collective one too) with its `decided` clause,
    its graph ("@g"), its name (without the %), the decided choice, its
    flags (["fused"], ["fallback"], ...), and its timings and fused_timings
    (_timings; None where the line has none). The one reader of the decided
    lines: decisions_of and untrusted_decisions both take them from here."""
    graph, out = "", []
    for line in text.splitlines():
        g = re.match(r"\s*graph @([\w.]+)", line)
        if g:
            graph = "@" + g.group(1)
            continue
        m = _DECIDED_RE.match(line)
        if m is None:
            continue
        out.append(DecidedNode(graph, m.group(1), m.group(2),
                               m.group(3).split(), _timings(line, "timings"),
                               _timings(line, "fused_timings")))
    return out
