"""Checks the interpreter's grouped_mm outputs (--run-outputs) against
NumPy on the same inputs (--run-inputs): y = grouped_mm(x, w, ids) and
ys = grouped_mm(x, w, ids, s), each row scaled by s[t, a], and
yc = grouped_mm(x, w, ids, s) {combine = true}, ys summed over the picks.
Prints `ok Y` per output."""
import os
import sys

import numpy as np

i, o = sys.argv[1], sys.argv[2]
x, w, ids, s = (np.load(os.path.join(i, n + ".npy"))
                for n in ("x", "w", "ids", "s"))
# The graph's inputs are f32: the interpreter reads them rounded so.
x, w, s = (v.astype(np.float32).astype(np.float64) for v in (x, w, s))
ref = np.einsum("tk,tank->tan", x, w[ids])
for name, want in (("y", ref), ("ys", ref * s[:, :, None]),
                   ("yc", (ref * s[:, :, None]).sum(axis=1))):
    got = np.load(os.path.join(o, name + ".npy"))
    err = float(np.abs(got - want).max()) / float(np.abs(want).max())
    # The interpreter rounds an f32 result to f32.
    if got.shape != want.shape or err > 1e-6:
        sys.exit("%s differs: %s %s, relative error %g" % (
            name, got.shape, want.shape, err))
    print("ok", name)
