"""Checks an --emit=timeline trace: valid trace-event JSON, one process per
rank with a compute and a comm track, events in order and never
overlapping on a track, each rank's events the same.

usage: check_timeline.py TRACE RANKS [ORDER...]
ORDER: node names (%h) whose events must start in this order.
"""
import json
import sys

trace = json.load(open(sys.argv[1]))
ranks = int(sys.argv[2])
order = sys.argv[3:]
events = trace["traceEvents"]
procs = {e["pid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(procs.values()) == ["rank %d" % r for r in range(ranks)], procs
for pid in procs:
    threads = sorted(e["args"]["name"] for e in events if e["ph"] == "M"
                     and e["name"] == "thread_name" and e["pid"] == pid)
    assert threads == ["comm", "compute"], threads
spans = [e for e in events if e["ph"] == "X"]
assert spans, "no events"
per_rank = {}
for e in spans:
    assert e["dur"] >= 0 and e["ts"] >= 0, e
    per_rank.setdefault(e["pid"], []).append(e)
# Each track in order, back to back at most: no two events at once.
for pid, evs in per_rank.items():
    for tid in (0, 1):
        track = [e for e in evs if e["tid"] == tid]
        for a, b in zip(track, track[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6, (a["name"], b["name"])
    # Collectives on comm, everything else on compute.
    for e in evs:
        assert (e["tid"] == 1) == (e["cat"] == "collective"), e
strip = lambda evs: [(e["name"], e["tid"], e["ts"], e["dur"]) for e in evs]
first = strip(per_rank[min(per_rank)])
assert all(strip(v) == first for v in per_rank.values()), "ranks differ"
start = {}
for e in per_rank[min(per_rank)]:
    for n in e["args"]["nodes"]:
        start[n] = e["ts"]
times = [start[n] for n in order]
assert times == sorted(times) and len(set(times)) == len(times), (order, times)
print("timeline ok: %d ranks, %d events per rank, makespan %s" % (
    len(per_rank), len(first), trace["otherData"]["makespan_us"]))
