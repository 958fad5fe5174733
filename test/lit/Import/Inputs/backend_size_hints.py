"""Size hints through the torch.compile backend on PyTorch 1.13, with
Dynamo's register_backend stubbed (dynamo_stub.py): the graph Dynamo
would hand over at each size is a symbolic_trace of the module, called
with inputs of that many rows, as Dynamo's recompilation on a new shape
would. The first size is decided with --size-hints-m (the hints from
MTSCHED_TORCH_SIZE_HINTS, or torch.compile's options); another size of
the same graph is decided from its dispatch tables (mtsched-opt
--decisions-from: no benchmark) where they cover its rows, and tuned where
they do not. Every result is checked against eager (the runtime's cpu
path).

    backend_size_hints.py BUILD_DIR CACHE_DIR MTSCHED_OPT ROWS,...
        [options]
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
for var in ["MTSCHED_RUNTIME_LIB", "MTSCHED_TORCH_OPT_ARGS"]:
    os.environ.pop(var, None)
rows = [int(r) for r in sys.argv[4].split(",")]
use_options = len(sys.argv) > 5 and sys.argv[5] == "options"

from mtsched_torch import backend  # noqa: E402
from mtsched_torch.compare import errors, init_weights  # noqa: E402

ok = True
m = tiny.tiny_mlp().eval()
init_weights(m, 0)
for r in rows:
    # Dynamo traces the frame again for the new shape: a new graph module.
    gm = torch.fx.symbolic_trace(m)
    x = torch.randn(r, 64, generator=torch.Generator().manual_seed(r))
    kwargs = {}
    if use_options:
        kwargs["options"] = {"size_hints_m": os.environ.pop(
            "MTSCHED_TORCH_SIZE_HINTS", "")}
        os.environ["MTSCHED_TORCH_SIZE_HINTS"] = "bad"  # options win
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn = REGISTERED["mtsched"](gm, [x], **kwargs)
    if use_options:
        os.environ["MTSCHED_TORCH_SIZE_HINTS"] = kwargs["options"][
            "size_hints_m"]
    for msg in w:
        print("warning: %s" % msg.message)
    with torch.no_grad():
        ref, out = gm(x), fn(x)
    _, nrm = errors(out.float().numpy(), ref.float().numpy())
    ok &= nrm <= 1e-3
    g = backend.GRAPHS[-1]
    print("rows %d: decided %s, hint %s, from the table %s, tuned %s, "
          "norm_rel %.1e" % (
              r, g["decided"], g.get("hint"),
              sorted(g.get("hints", {}).items()),
              sorted(g.get("tuned", {}).items()), nrm))
print("mtsched-opt runs: tuning %d, from dispatch tables %d"
      % (backend.OPT_RUNS[0], backend.DISPATCH_RUNS[0]))


# A graph without a matmul has no table to decide another size from: each
# size is tuned, none falls back to eager.
class NoMatmul(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2


if not use_options:
    for r in [8, 16]:
        gm = torch.fx.symbolic_trace(NoMatmul())
        x = torch.randn(r, 32)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fn = REGISTERED["mtsched"](gm, [x])
        for msg in w:
            print("warning: %s" % msg.message)
        with torch.no_grad():
            _, nrm = errors(fn(x).float().numpy(), gm(x).float().numpy())
        ok &= nrm <= 1e-3
        print("no matmul, rows %d: decided %s, norm_rel %.1e"
              % (r, backend.GRAPHS[-1]["decided"], nrm))

# The shape-free key: Dynamo writes the rows into the code of a static
# graph (a reshape of [rows, 2 * cols] to [rows, 2, cols]); those literals
# and the inputs' leading dimensions are abstracted, the columns, the
# parameters and the hints are not.
class Resh(torch.nn.Module):
    def __init__(self, rows, cols):
        super().__init__()
        self.rows, self.cols = rows, cols
        self.fc = torch.nn.Linear(cols, 32)

    def forward(self, x):
        return self.fc(x.reshape(self.rows, 2, self.cols)).sum(1)


def skey(rows, cols, hints=(16,)):
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(Resh(rows, cols))
    return backend._shape_free_key(gm, [torch.randn(rows, 2 * cols)], [],
                                   "cpu", hints)


print("shape-free key: same at other rows %s, other columns %s, other "
      "hints %s" % (skey(8, 64) == skey(32, 64), skey(8, 64) == skey(8, 48),
                    skey(8, 64) == skey(8, 64, (16, 64))))

# A bad setting runs the graph eagerly, with one warning naming it.
os.environ["MTSCHED_TORCH_SIZE_HINTS"] = "16,zero"
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    REGISTERED["mtsched"](torch.fx.symbolic_trace(m), [torch.randn(8, 64)])
    REGISTERED["mtsched"](torch.fx.symbolic_trace(m), [torch.randn(8, 64)],
                          options={"size_hint": [16]})
for msg in w:
    print("warning: %s" % msg.message)
sys.exit(0 if ok else 1)
