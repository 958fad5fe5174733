"""The torch.compile backend's accuracy checks (mtsched_torch.backend):
what runs before a decided graph is trusted.

Choice level (``_check_choices``): no node may run a choice that failed
mtsched-opt's check against its reference or was never measured
(``untrusted_decisions``: the decided IR's timings, the reasons from
mtsched-opt's ``--report``). Graph level (``_check_graph``), the first
time: the decided graph runs once on Dynamo's example inputs and each
output is compared with eager's within its dtype's tolerance
(``compare.tolerance``); an output beyond it passes if it is as close
to a float64 run of the graph as eager's is (``compare_fp64``, Dynamo's
rule). The verdict is cached beside the decided IR
(``<key>.check.json``), so a warm process runs neither the graph nor
eager. With several ranks the ranks agree on both verdicts, and a graph
that runs collectives is not run by the check. MTSCHED_TORCH_CHECK=0 turns
the graph-level check off (``check_enabled``; a verdict already cached
still holds)."""

import json
import os
import warnings

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


def _store_verdict(key, sig, ok, why, error, rank=0, fp64=None):
    """Writes a verdict to the cache (best effort: a verdict not kept costs
    the next process the check, nothing else)."""
    path = _check_path(key)
    tmp = "%s.tmp%d" % (path, rank)
    try:
        with open(tmp, "w") as f:
            json.dump({"ok": ok, "why": why, "error": error, "fp64": fp64,
                       "sig": sig}, f)
        os.replace(tmp, path)
    except OSError as e:
        _log("the accuracy verdict was not cached: %s" % e)


def _norm_error(out, ref):
    """Norm-wise relative error of `out` against `ref` in float64 on the
    host; elements equal in both (infinities, NaNs where both have one)
    count as no error."""
    from .compare import errors
    a = out.detach().double().cpu()
    b = ref.detach().double().cpu()
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    a = torch.where(same, torch.zeros_like(a), a)
    b = torch.where(same, torch.zeros_like(b), b)
    return errors(a.numpy(), b.numpy())[1]


def _compare(outs, refs):
    """(worst norm-wise relative error, why or None): each output against
    eager's within its dtype's tolerance (mtsched_torch.compare's);
    `why` names the first output beyond it. Elements equal in both
    (infinities, NaNs where both have one) count as no error."""
    from .compare import tolerance
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
        nrm = _norm_error(o, r)
        if not nrm <= tol:
            return float("inf") if nrm != nrm else nrm, (
                "output %d differs from eager's on Dynamo's example inputs:"
                " norm-wise relative error %.2e > %.0e (the %s tolerance)"
                % (i, nrm, tol, str(r.dtype).replace("torch.", "")))
        worst = max(worst, nrm)
    return worst, None


# Dynamo's own accuracy rule against an fp64 reference
# (torch._dynamo.utils.same with fp64_ref): the compiled result may be as
# far from float64's as eager's is, twice over, plus a tenth of the
# tolerance.
FP64_MULTIPLIER = 2.0


def _fp64_outputs(gm, example_inputs):
    """gm's outputs with its floating-point inputs, parameters and buffers
    in float64, or (None, why) where it could not run (an op without a
    float64 kernel, no memory). Casts written in the graph itself still
    round (a bf16 `.to` stays bf16), as in Dynamo's fp64 reference."""
    def up(t):
        return t.double() if isinstance(t, torch.Tensor) and \
            t.is_floating_point() else t
    try:
        try:
            from torch.func import functional_call
        except ImportError:  # PyTorch 1.13
            from torch.nn.utils.stateless import functional_call
        state = {n: up(t) for n, t in list(gm.named_parameters()) +
                 list(gm.named_buffers())}
        with torch.no_grad():
            out = functional_call(gm, state, tuple(up(x)
                                                   for x in example_inputs))
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
        return None, str(e).splitlines()[0][:200] if str(e) else repr(e)
    return (list(out) if isinstance(out, (list, tuple)) else [out]), None


def compare_fp64(outs, refs, gm, example_inputs):
    """After _compare found an output beyond eager's tolerance: (ok, note).
    A fused kernel rounds less often than eager (a chain kept in
    registers), and top-k routing picks another expert where two scores
    tie within rounding; both differ from eager yet are no less accurate.
    So each output is held against a float64 run of the same graph: it
    passes if its norm-wise relative error to float64 is at most
    FP64_MULTIPLIER times eager's, plus a tenth of the tolerance. `note`
    says the errors (or why no float64 run was possible)."""
    from .compare import tolerance
    ref64, why = _fp64_outputs(gm, example_inputs)
    if ref64 is None:
        return False, "no float64 reference: %s" % why
    if len(ref64) != len(outs):
        return False, "the float64 run returns %d outputs" % len(ref64)

    notes = []
    for i, (o, r, f) in enumerate(zip(outs, refs, ref64)):
        if tuple(f.shape) != tuple(r.shape):
            return False, "the float64 run's output %d has shape %s" % (
                i, list(f.shape))
        ours, eager = _norm_error(o, f), _norm_error(r, f)
        bound = FP64_MULTIPLIER * eager + tolerance(r.dtype) / 10
        notes.append("output %d: %.2e, eager %.2e" % (i, ours, eager))
        if not ours <= bound:
            return False, ("against a float64 run it is no closer: %s "
                           "(bound %.2e)" % (notes[-1], bound))
    return True, ("as close to a float64 run of the graph as eager is "
                  "(norm-wise relative error %s; bound %g x eager's + "
                  "tolerance/10)" % ("; ".join(notes), FP64_MULTIPLIER))


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
                    "error": v.get("error"), "fp64": v.get("fp64")}
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
        fp64 = None
        if why is not None and error != float("inf"):
            ok, note = compare_fp64(outs, refs, gm, example_inputs)
            if ok:
                fp64, why = "%s, but %s" % (why, note), None
            else:
                why = "%s; %s" % (why, note)
        return {"checked": True, "ok": why is None, "why": why,
                "error": error, "fp64": fp64}

    try:
        v = _several(ranks, "accuracy check", mine)
    finally:
        if imp is not None:
            imp.eager = None  # eager's outputs are not held past the check

    rec["checked"] = v["checked"]
    rec["check_error"] = v["error"]
    if v.get("fp64"):
        # Passed against float64, not eager: said once, by the process
        # that ran the check (the verdict file keeps the note).
        rec["check_fp64"] = v["fp64"]
        if v["checked"] is True:
            warnings.warn("mtsched: accuracy check: %s; trusted" % v["fp64"],
                          RuntimeWarning)
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
        _store_verdict(key, sig, why is None, why, v["error"], ranks.rank,
                       v.get("fp64"))
    if why:
        raise Fallback("accuracy check: %s%s" % (
            why, " [the verdict of an earlier process, %s]"
            % os.path.basename(_check_path(key)) if cached else ""))
