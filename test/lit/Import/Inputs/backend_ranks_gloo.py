"""The torch.compile backend's several-ranks logic on PyTorch 1.13 (no
Dynamo, no GPU): two processes, a gloo world of 2 on 127.0.0.1, Dynamo's
register_backend stubbed as in backend_stub_dynamo.py. What is tested: the
ranks agree on the imported IR (a rank with another graph sends it to eager
on both), rank 0 alone decides it (mtsched-opt --ranks=2 with the NCCL-only
choices, on the simulator) and every rank gets the same decided text, one
pre-sync, the decided-IR cache (a second process runs no mtsched-opt), and
a graph the runtime cannot run on a rank (here: two ranks on the cpu
interpreter) going to eager on every rank with one warning each, and the
accuracy check's agreement (a mismatch on one rank fails every rank; a
graph with collectives is not run by it). The CUDA
path (NCCL communicator, the run) is covered on GPUs only
(bench/device/tp-backend.sh).

    backend_ranks_gloo.py BUILD_DIR CACHE_DIR MTSCHED_OPT     # the parent
"""

import datetime
import os
import socket
import subprocess
import sys
import warnings

import torch

# Both ranks run this file; the parent starts them and prints their output
# in rank order.
if os.environ.get("RANKS_TEST_RANK") is None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(2):
        env = dict(os.environ, RANKS_TEST_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable] + sys.argv, env=env,
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT,
                                      universal_newlines=True))
    rc = 0
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            print("rank %d: timed out" % r)
            sys.exit(1)
        for line in out.splitlines():
            print("rank %d: %s" % (r, line))
        rc |= p.returncode
    sys.exit(rc)

RANK = int(os.environ["RANKS_TEST_RANK"])
from dynamo_stub import REGISTERED, install  # noqa: E402

install()

os.environ["MTSCHED_BUILD_DIR"] = sys.argv[1]
os.environ["MTSCHED_TORCH_CACHE"] = sys.argv[2]
os.environ["MTSCHED_OPT"] = sys.argv[3]
for var in ["MTSCHED_RUNTIME_LIB", "MTSCHED_TORCH_OPT_ARGS"]:
    os.environ.pop(var, None)

import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", rank=RANK, world_size=2,
                        timeout=datetime.timedelta(seconds=120))

from mtsched_torch import backend, collectives  # noqa: E402,F401
from mtsched_torch.ranks import Ranks, sha  # noqa: E402


class TpLinear(torch.nn.Module):
    """x @ w (this rank's shard) summed over the two ranks."""

    def __init__(self, k, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(k, n) * 0.1)

    def forward(self, x):
        return torch.ops.mtsched.all_reduce(x @ self.w, "tp", 2)


def traced(m, x):
    """symbolic_trace, with the example values Dynamo's graph carries on
    its nodes."""
    gm = torch.fx.symbolic_trace(m)

    class Record(torch.fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            n.meta["example_value"] = v
            return v
    with torch.no_grad():
        Record(gm).run(x)
    return gm


def compile_once(gm, x):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        REGISTERED["mtsched"](gm, [x])
    for msg in w:
        print("warning: %s" % msg.message)


torch.manual_seed(RANK)
m = TpLinear(32, 16).eval()
x = torch.randn(4, 32)
gm = traced(m, x)

# The decision, as the backend makes it on every rank.
ranks = Ranks.current()
print("ranks: %d of %d" % (ranks.rank, ranks.world))
res = backend._import(gm, [x], [], "tp_linear", gm, ranks.world)
decided, key, hit = backend._decide_ranks(res.text, "cpu", ranks, {})
print("decided %s, from the cache %s" % (sha(decided), hit))
print("decisions: %s" % sorted(backend.decisions_of(decided).items()))
print("world_size 2 in IR: %s" % ("world_size = 2" in decided))
if RANK == 0:
    print("presyncs: %s" % backend._presyncs(key))

# The whole backend: the runtime refuses two ranks on cpu, on every rank.
compile_once(gm, x)
# Rank 1 with another graph: both ranks fall back.
y = torch.randn(4 + RANK, 32)
compile_once(traced(m, y), y)
print("stats: %s" % backend.STATS)
print("mtsched-opt runs here: %d" % backend.OPT_RUNS[0])


# The accuracy check's agreement (_check_graph), on a graph of one rank
# each rank runs on the interpreter (the cpu path refuses a graph of two
# ranks): rank 0 decides it, every rank runs it against its own eager
# outputs; rank 1 loads the decided text with its relu turned into a
# sigmoid, as a rank whose decided graph computes something else. Both
# ranks fall back with rank 1's mismatch, each keeps the verdict (a key of
# its own here, as their texts differ), and a second process takes it from
# the cache on both.
class Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 16)

    def forward(self, x):
        return torch.relu(self.fc(x))


torch.manual_seed(7)
lin = Lin().eval()
xs = torch.randn(4, 32)
lgm = torch.fx.symbolic_trace(lin)
imp = backend._import(lgm, [xs], [], "lin", lgm, 1)
got = backend._decide(imp.text, "cpu")[0] if RANK == 0 else None
decided = backend.broadcast(ranks, got)
if RANK == 1:
    decided = decided.replace("= buffer relu(", "= buffer sigmoid(")
graph = backend.runtime.Module(decided).graph(device="cpu")
binder = backend._Binder(lgm, imp, 1)
rec = {}
try:
    backend._check_graph(ranks, "check-rank%d" % RANK, decided, "cpu", graph,
                         binder, imp, lgm, [xs], rec)
    print("check: passed")
except backend.Fallback as e:
    print("check: %s" % e)
print("check record: checked %s" % rec["checked"])
# A decided graph with collectives is not run across ranks by the check.
rec = {}
two = open(backend._decided_path(key)).read()
backend._check_graph(ranks, key, two, "cpu", None, None, None, None, [], rec)
print("check record: checked %s, skipped %s" % (rec["checked"],
                                               rec["check_skipped"]))
dist.destroy_process_group()
