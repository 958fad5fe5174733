"""The torch.compile backend's accuracy checks (mtsched_torch.backend):
what runs before a decided graph is trusted.

Choice level (``_check_choices``): no node may run a choice that failed
mtsched-opt's check against its reference or was never measured
(``untrusted_decisions``: the decided IR's timings, the reasons from
mtsched-opt's ``--report``). Graph level (``_check_graph``), the first
time: the decided graph runs once on Dynamo's example inputs and each
output is compared with eager's within its dtype's tolerance
(``compare.tolerance``). The verdict is cached beside the decided IR
(``<key>.check.json``), so a warm process runs neither the graph nor
eager. With several ranks the ranks agree on both verdicts, and a graph
that runs collectives is not run by the check. MTSCHED_TORCH_CHECK=0 turns
the graph-level check off (``check_enabled``; a verdict already cached
still holds)."""

import json
import os

import torch

from . import runtime
from .backend_base import (Fallback, _cache_dir, _log, _report_path,
                           _several, decided_nodes)
from .ranks import gather, sha


def _report_nodes(key):
    """{(graph, %node): the report's node} of decision `key`; empty where
    no report is kept (a decided IR cached before reports were)."""
    try:
        with open(_report_path(key)) as f:
            nodes = json.load(f)["nodes"]
        return {(n["graph"], n["name"]): n for n in nodes}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def untrusted_decisions(text, report=None):
    """[(graph, %node, choice, why)] for each node of a decided module whose
    decided choice did not pass its check: it failed (a timing of ``inf``:
    it failed to build or run, timed out, or returned a wrong result against
    the reference; the report's status and message say which), or it was
    never measured (``decided ... fallback`` after a failed pre-sync, a
    node without timings that no dispatch table decided, a timing
    ``skipped``). mtsched-opt still decides
    such a node (with a warning: "every choice of '%n' failed ...; using
    'X'", exit status 0), so the decided IR runs a choice nobody checked.
    `report`: {(graph, %node): node} of its --report, for the reasons."""
    report = report or {}
    out = []
    for n in decided_nodes(text):
        graph, node, choice, flags = n.graph, "%" + n.name, n.choice, n.flags
        unfused = n.timings
        times = n.fused_timings if "fused" in flags else unfused
        rn = report.get((graph, node), {})
        why = None
        if "fallback" in flags:
            why = ("was decided by the fallback rule (the pre-sync "
                   "failed): never measured, so never checked")
        elif (times is None or choice not in times) and \
                rn.get("dispatch_hint"):
            # Decided from a dispatch table (--decisions-from): the
            # table's winner at that hint was measured and passed its
            # check there; this size is checked by the graph-level check.
            pass
        elif times is None or choice not in times:
            why = "was never measured (decided without a benchmark)"
        elif times[choice] == "skipped":
            why = "was never measured (skipped)"
        elif times[choice] == "inf":
            rc = [c for c in rn.get("choices", []) if c.get("name") == choice]
            rc = rc[0] if rc else {}
            if "fused" in flags and rc.get("fused_message"):
                why = "failed its check fused (%s)" % rc["fused_message"]
            elif rc.get("status") not in (None, "ok"):
                why = "failed its check: %s" % rc["status"]
                if rc.get("message"):
                    why += " (%s)" % rc["message"]
            else:
                why = ("failed its check (its timing is inf: it failed to "
                       "build or run, timed out, or returned a wrong result)")
            if all(t in ("inf", "skipped") for t in (unfused or {}).values()):
                why += "; no choice of the node passed"
        if why:
            out.append((graph, node, choice, why))
    return out


def _check_choices(decided, key):
    """Fallback where a node of the decided module runs a choice that did
    not pass its check (untrusted_decisions): the first such node, its
    choice and why, and how many more."""
    bad = untrusted_decisions(decided, _report_nodes(key))
    if bad:
        graph, node, choice, why = bad[0]
        raise Fallback("%s of %s: its decided choice '%s' %s%s" % (
            node, graph, choice, why,
            " (and %d more node%s)" % (len(bad) - 1,
                                       "s" if len(bad) > 2 else "")
            if len(bad) > 1 else ""))


def check_enabled():
    """Whether the graph-level accuracy check runs (MTSCHED_TORCH_CHECK,
    default on; 0, off, false or no turn it off)."""
    return os.environ.get("MTSCHED_TORCH_CHECK", "1").strip().lower() not in (
        "0", "off", "false", "no")


_COLLECTIVE_RE = None


def _runs_collectives(decided):
    """Whether the decided module calls a collective."""
    global _COLLECTIVE_RE
    if _COLLECTIVE_RE is None:
        import re
        _COLLECTIVE_RE = re.compile(
            r"= (?:collective_multi_template_buffer|buffer) "
            r"(?:all_reduce|all_gather|reduce_scatter|all_to_all)\(")
    return _COLLECTIVE_RE.search(decided) is not None


def _check_path(key):
    return os.path.join(_cache_dir(), key + ".check.json")


def _verdict_sig(decided, device):
    """What a verdict holds for: the decided text itself (an edited or
    re-decided IR is checked again), the runtime library that ran it and
    the kind of device."""
    try:
        lib = runtime.find_library()
        st = os.stat(lib)
        lib = "%s %d %d" % (lib, st.st_size, int(st.st_mtime))
    except OSError:
        lib = None
    return {"decided": sha(decided), "runtime": lib,
            "device": device.split(":")[0]}


def _load_verdict(key, sig):
    """The cached verdict of decision `key` if it holds for `sig`, else
    None."""
    try:
        with open(_check_path(key)) as f:
            v = json.load(f)
        if v.get("sig") == sig and isinstance(v.get("ok"), bool):
            return v
    except (OSError, ValueError, AttributeError):
        pass
    return None


def _store_verdict(key, sig, ok, why, error, rank=0):
    """Writes a verdict to the cache (best effort: a verdict not kept costs
    the next process the check, nothing else)."""
    path = _check_path(key)
    tmp = "%s.tmp%d" % (path, rank)
    try:
        with open(tmp, "w") as f:
            json.dump({"ok": ok, "why": why, "error": error, "sig": sig}, f)
        os.replace(tmp, path)
    except OSError as e:
        _log("the accuracy verdict was not cached: %s" % e)


def _compare(outs, refs):
    """(worst norm-wise relative error, why or None): each output against
    eager's within its dtype's tolerance (mtsched_torch.compare's);
    `why` names the first output beyond it. Elements equal in both
    (infinities, NaNs where both have one) count as no error."""
    from .compare import errors, tolerance
    if len(outs) != len(refs):
        return float("inf"), ("the decided graph returns %d outputs, eager "
                              "%d" % (len(outs), len(refs)))
    worst = 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        tol = tolerance(r.dtype)
        if tuple(o.shape) != tuple(r.shape):
            return float("inf"), (
                "output %d has shape %s, eager's %s" % (
                    i, list(o.shape), list(r.shape)))
        a = o.detach().double().cpu()
        b = r.detach().double().cpu()
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))
        a = torch.where(same, torch.zeros_like(a), a)
        b = torch.where(same, torch.zeros_like(b), b)
        _, nrm = errors(a.numpy(), b.numpy())
        if not nrm <= tol:
            return float("inf") if nrm != nrm else nrm, (
                "output %d differs from eager's on Dynamo's example inputs:"
                " norm-wise relative error %.2e > %.0e (the %s tolerance)"
                % (i, nrm, tol, str(r.dtype).replace("torch.", "")))
        worst = max(worst, nrm)
    return worst, None


def _check_graph(ranks, key, decided, device, graph, binder, imp, gm,
                 example_inputs, rec):
    """The graph-level accuracy check, before the decided graph is trusted
    the first time: it runs once on Dynamo's example inputs and each
    output is compared with eager's (_compare). The verdict is kept
    beside the decided IR (<key>.check.json) for the next process. Sets
    rec["checked"] (True: ran here; "cached": an earlier verdict; False:
    not checked, rec["check_skipped"] says why) and rec["check_error"];
    Fallback on a mismatch. Several ranks: the ranks agree on the verdict
    (a mismatch on one sends every rank to eager)."""
    sig = _verdict_sig(decided, device)

    def mine():
        v = _load_verdict(key, sig)
        if v is not None:
            return {"checked": "cached", "ok": v["ok"], "why": v["why"],
                    "error": v.get("error")}
        if not check_enabled():
            return {"checked": False, "ok": True, "why": None, "error": None,
                    "skipped": "MTSCHED_TORCH_CHECK=%s"
                    % os.environ.get("MTSCHED_TORCH_CHECK")}
        if ranks.several and _runs_collectives(decided):
            # Running it would wait in its collectives for ranks that may
            # be elsewhere; the choice-level check still held.
            return {"checked": False, "ok": True, "why": None, "error": None,
                    "skipped": "several ranks: the graph runs collectives"}
        with torch.no_grad():
            refs = imp.eager
            if refs is None:
                ref = gm(*example_inputs)
                refs = list(ref) if isinstance(ref, (list, tuple)) else [ref]
            try:
                outs = graph.run_torch(binder(example_inputs))
            except (runtime.RuntimeError_, ValueError) as e:
                raise Fallback("accuracy check: the decided graph failed on "
                               "Dynamo's example inputs: %s"
                               % str(e).splitlines()[0][:300])
        error, why = _compare(outs, refs)
        return {"checked": True, "ok": why is None, "why": why,
                "error": error}

    try:
        v = _several(ranks, "accuracy check", mine)
    finally:
        if imp is not None:
            imp.eager = None  # eager's outputs are not held past the check

    rec["checked"] = v["checked"]
    rec["check_error"] = v["error"]
    if "skipped" in v:
        rec["check_skipped"] = v["skipped"]
    # The verdict, agreed among the ranks: the first failing rank's.
    why, cached = (None if v["ok"] else v["why"]), v["checked"] == "cached"
    if ranks.several:
        got = gather(ranks, (v["ok"], v["why"], cached))
        bad = [(r, w, c) for r, (o, w, c) in enumerate(got) if not o]
        why, cached = None, False
        if bad:
            r, why, cached = bad[0]
            if not cached:
                why = "rank %d of %d: %s" % (r, ranks.world, why)
    if v["checked"] is True or (why and v["ok"]):
        # Kept for the next process: what this rank found, or the failure
        # another rank found (every rank writes the same one then).
        _store_verdict(key, sig, why is None, why, v["error"], ranks.rank)
    if why:
        raise Fallback("accuracy check: %s%s" % (
            why, " [the verdict of an earlier process, %s]"
            % os.path.basename(_check_path(key)) if cached else ""))
