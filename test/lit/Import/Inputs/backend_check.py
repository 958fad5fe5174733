"""The torch.compile backend's accuracy checks on PyTorch 1.13 (Dynamo's
register_backend stubbed, as in backend_stub_dynamo.py; the graph Dynamo
would hand over is a symbolic_trace of the module; decided on the
simulator, run by the runtime's cpu path). One graph per process:

* ``linear``: relu(linear(x)), a matmul with an epilogue;
* ``mlp``: tiny.tiny_mlp, a Llama MLP block with a collective (one rank);
* ``cancel``: (x + 1e5) - 1e5 in float32: eager rounds x + 1e5 to float32
  and loses x's low bits (2e-3 norm-wise, over float32's 1e-3); the
  decided kernel keeps the chain in float64 (the cpu interpreter), so it
  differs from eager but equals a float64 run.

It prints what the backend recorded for the graph (GRAPHS: "checked", the
error, the runtime's runs during the compile, i.e. the check's own run;
how often the backend ran the graph eagerly), each warning, and whether
the callable's result is eager's. What makes a graph wrong is done from
outside, by the lit test: a decided IR edited in the cache, or
mtsched-opt's own fault injection (a choice returning a wrong result).

    backend_check.py BUILD_DIR CACHE_DIR MTSCHED_OPT GRAPH [OPT_ARG ...]
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
os.environ["MTSCHED_OPT"] = sys.argv[3]
os.environ.pop("MTSCHED_RUNTIME_LIB", None)
os.environ["MTSCHED_TORCH_OPT_ARGS"] = " ".join(sys.argv[5:])

from mtsched_torch import backend  # noqa: E402
from mtsched_torch.compare import errors, init_weights  # noqa: E402


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 48)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Cancel(torch.nn.Module):
    def forward(self, x):
        return (x + 1e5) - 1e5


which = sys.argv[4]
m = {"linear": Linear, "cancel": Cancel,
     "mlp": tiny.tiny_mlp}[which]().eval()
init_weights(m, 0)
gm = torch.fx.symbolic_trace(m)
# The backend's eager runs on real tensors (the importer's tracing calls
# the module too, on tensors of its own).
eager_calls = [0]
gm.register_forward_hook(lambda _, args, __: eager_calls.__setitem__(
    0, eager_calls[0] + (type(args[0]) is torch.Tensor)))
x = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))

with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    fn = REGISTERED["mtsched"](gm, [x])
for msg in w:
    print("warning: %s: %s" % (msg.category.__name__, msg.message))
by_mtsched = backend.STATS["mtsched"] == 1
if by_mtsched:
    rec = backend.GRAPHS[-1]
    err = rec.get("check_error")
    print("record: checked %s, error %s, skipped %s" % (
        rec.get("checked"), "none" if err is None else
        "small" if err <= 1e-5 else "%.1e" % err,
        rec.get("check_skipped")))
    print("runs while compiling: %d" % backend.live_stats(rec["name"])["runs"])
print("eager runs while compiling: %d" % eager_calls[0])
print("mtsched-opt runs: %d" % backend.OPT_RUNS[0])
with torch.no_grad():
    out = fn(x)
    # The cancellation's exact result is x (float64's).
    ref = x if which == "cancel" and by_mtsched else m(x)
    same = torch.equal(out, m(x))
_, nrm = errors(out.float().numpy(), ref.float().numpy())
print("ran by %s: norm_rel %s, equal to eager %s" % (
    "mtsched" if by_mtsched else "eager", "small" if nrm <= 1e-5 else
    "%.1e" % nrm, same))
sys.exit(0 if nrm <= 1e-5 else 1)
