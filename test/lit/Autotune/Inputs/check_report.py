"""Checks a --report file against the contract in docs/REPORT.md.

usage: check_report.py REPORT [key=value ...]
Each key=value is a Python expression over `r` (the report) and `fam` (a
choice name's kind of kernel, as pruning groups them) that must hold,
e.g. "r['sync']['count']==1".
"""
import json
import math
import sys

r = json.load(open(sys.argv[1]))


def need(cond, what):
    if not cond:
        sys.exit("report contract violated: " + what)


def fam(name):
    """The kind of kernel a choice is, as pruning groups them."""
    if name == "nccl" or name.startswith("extern."):
        return "extern"
    if name.startswith("gemm_"):
        kind = "wgmma" if name.startswith("gemm_wg_") else "mma"
        return kind + ("-split-k" if "_k" in name else "")
    if name.startswith("swiglu_"):
        if not name.startswith("swiglu_wg_"):
            return "swiglu-mma"
        return "swiglu-wgmma" + ("-persistent" if "_p" in name else "")
    return "other"


def num_or_null(v):
    return v is None or (isinstance(v, (int, float)) and math.isfinite(v))


need(r["version"] == 1, "version")
need(r["backend"] in ("sim", "cuda"), "backend")
need(isinstance(r["world_size"], int) and r["world_size"] >= 1, "world_size")
need(r["mode"] in ("deferred", "immediate"), "mode")
s = r["sync"]
need(isinstance(s["count"], int) and isinstance(s["ok"], bool) and
     isinstance(s["ms"], (int, float)) and isinstance(s["reason"], str), "sync")
need(num_or_null(s["last_wait_ms"]) and num_or_null(s["exchange_ms"]), "sync cost parts")
if s["cost_ms"] is not None and s["last_wait_ms"] is not None:
    need(abs(s["last_wait_ms"] + s["exchange_ms"] - s["cost_ms"]) < 1e-6,
         "cost_ms = last_wait_ms + exchange_ms")
c = s["rank_cost_ms"]
need(c is None or (isinstance(c["ranks"], int) and 1 <= c["ranks"] <= r["world_size"] and
                   c["min"] <= c["median"] <= c["max"]), "rank_cost_ms")
if c is not None and s["cost_ms"] is not None:
    need(c["min"] <= s["cost_ms"] <= c["max"], "cost_ms within rank_cost_ms")
for n in r["nodes"]:
    need(n["name"].startswith("%"), "node name")
    need(n["kind"] in ("multi_template_buffer", "collective_multi_template_buffer"), "kind")
    need(isinstance(n["op"], str), "op")
    need(n["group"] is None or isinstance(n["group"], str), "group")
    need(isinstance(n["chosen"], str) and
         n["chosen"] in [c["name"] for c in n["choices"]], "chosen")
    need(all(e.startswith("%") for e in n["epilogue"]), "epilogue")
    need(isinstance(n["epilogue_fused"], bool) and isinstance(n["fallback"], bool), "flags")
    for c in n["choices"]:
        need(isinstance(c["name"], str), "choice name")
        need(num_or_null(c["ms"]) and num_or_null(c["fused_ms"]), "choice ms")
        need(len(c["rank_ms"]) == r["world_size"] and
             all(num_or_null(x) for x in c["rank_ms"]), "rank_ms")
        need(c["status"] in ("ok", "failed", "timeout", "wrong_result", "skipped"), "status")
        need((c["ms"] is None) == (c["status"] != "ok"), "ms null iff not ok")
for k in r["ranks"]:
    need(isinstance(k["rank"], int) and isinstance(k["decisions"], dict), "ranks")
need(isinstance(r["phases_ms"], dict), "phases_ms")
for expr in sys.argv[2:]:
    need(eval(expr, {"r": r, "fam": fam}), expr)
print("report ok")
