"""The torch.compile backend's own logic on PyTorch 1.13, which has no
Dynamo: torch._dynamo.register_backend is stubbed, and the graph Dynamo
would hand over is a symbolic_trace of the module. What is tested: import,
decide (mtsched-opt on the simulator: CPU tensors), the decided-IR cache,
the runtime on "cpu", the callable's results against eager, and the
fallback with one warning naming why, and what a second process finds
in the caches (the imported IR, the decisions: no mtsched-opt run, nothing
compiled). Dynamo itself is not exercised.

    backend_stub_dynamo.py BUILD_DIR CACHE_DIR [MTSCHED_OPT]
"""

import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny  # noqa: E402

from dynamo_stub import REGISTERED, install  # noqa: E402

install()

os.environ["MTSCHED_BUILD_DIR"] = sys.argv[1]
os.environ["MTSCHED_TORCH_CACHE"] = sys.argv[2]
for var in ["MTSCHED_OPT", "MTSCHED_RUNTIME_LIB", "MTSCHED_TORCH_OPT_ARGS"]:
    os.environ.pop(var, None)
if len(sys.argv) > 3:
    os.environ["MTSCHED_OPT"] = sys.argv[3]

from mtsched_torch import backend  # noqa: E402
from mtsched_torch.compare import errors, init_weights  # noqa: E402

print("registered: %s" % sorted(REGISTERED))
ok = True
for fac, width in [(tiny.tiny_mlp, 64), (tiny.softmaxy, 32)]:
    m = fac().eval()
    init_weights(m, 0)
    gm = torch.fx.symbolic_trace(m)
    x = torch.randn(8, width, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn = REGISTERED["mtsched"](gm, [x])
    for msg in w:
        print("warning: %s" % msg.message)
    with torch.no_grad():
        refs = gm(x)
        outs = fn(x)
        again = fn(x)
    refs = refs if isinstance(refs, tuple) else (refs,)
    outs = outs if isinstance(outs, tuple) else (outs,)
    again = again if isinstance(again, tuple) else (again,)
    for o, a, r in zip(outs, again, refs):
        _, nrm = errors(o.float().numpy(), r.float().numpy())
        ok &= nrm <= 1e-3 and torch.equal(o, a)
        print("%s: norm_rel %.1e" % (fac.__name__, nrm))


# Dynamo lifts a module's parameters to graph inputs: the graph takes the
# weight as an argument, and the example input is the nn.Parameter itself.
# The backend holds such inputs as parameters again, so the IR keeps the
# weight transposed once rather than transposing it on every call.
class LiftedLinear(torch.nn.Module):
    def forward(self, x, w, b):
        return torch.relu(torch.nn.functional.linear(x, w, b))


g = torch.Generator().manual_seed(1)
w = torch.nn.Parameter(torch.randn(48, 64, generator=g) / 8)
b = torch.nn.Parameter(torch.randn(48, generator=g))
x = torch.randn(8, 64, generator=g)
gm = torch.fx.symbolic_trace(LiftedLinear())
fn = REGISTERED["mtsched"](gm, [x, w, b])
with torch.no_grad():
    ref = gm(x, w, b)
    out = fn(x, w, b)
    w.mul_(2)  # an updated parameter is seen on the next call
    ref2 = gm(x, w, b)
    out2 = fn(x, w, b)
for tag, o, r in [("lifted", out, ref), ("lifted updated", out2, ref2)]:
    _, nrm = errors(o.float().numpy(), r.float().numpy())
    ok &= nrm <= 1e-3
    print("%s: norm_rel %.1e" % (tag, nrm))


# A tensor the graph holds as a plain attribute is folded into the IR as a
# constant at import; the backend binds it (on the graph's device). Two
# graphs alike but for the constant's values are two imports, not one
# cached import reused with stale values.
class Scaled(torch.nn.Module):
    def __init__(self, seed):
        super().__init__()
        self.table = torch.randn(8, 32,
                                 generator=torch.Generator().manual_seed(seed))

    def forward(self, x):
        return torch.tanh(x * self.table)


x = torch.randn(8, 32, generator=g)
for seed in [5, 6]:
    gm = torch.fx.symbolic_trace(Scaled(seed))
    fn = REGISTERED["mtsched"](gm, [x])
    with torch.no_grad():
        _, nrm = errors(fn(x).float().numpy(), gm(x).float().numpy())
    ok &= nrm <= 1e-3
    print("constant %d: norm_rel %.1e" % (seed, nrm))
print("stats: %s" % backend.STATS)
# Where each graph's IR and decisions came from, its accuracy check, and
# what the runtime compiled (the cpu path compiles nothing; its counters
# say 0). The runs count the check's own run of a first process.
for g in backend.GRAPHS:
    print("graph %s: ir %s, decided %s, checked %s, kernels %d, compiled %d, "
          "runs %d" % (g["name"], g["ir"], g["decided"], g.get("checked"),
                       g["kernels"], g["kernels_compiled"],
                       backend.live_stats(g["name"])["runs"]))
print("mtsched-opt runs: %d" % backend.OPT_RUNS[0])
print("cached: %d decided" % len([f for f in os.listdir(sys.argv[2])
                                  if f.endswith(".decided.mir")]))
sys.exit(0 if ok else 1)
