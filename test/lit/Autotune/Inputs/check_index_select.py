"""Checks interpret-index-select.mir's outputs against NumPy's take."""
import sys

import numpy as np

i, o = sys.argv[1], sys.argv[2]
t, ids, x, cols = (np.load(f"{i}/{n}.npy") for n in ("t", "ids", "x", "cols"))
want = {
    "e": np.take(t, ids, axis=0),
    "c": np.take(x, cols, axis=1),
    "s": -np.take(t, ids, axis=0).sum(axis=1),
}
for name, ref in want.items():
    got = np.load(f"{o}/{name}.npy")
    np.testing.assert_allclose(got, ref, rtol=1e-6, err_msg=name)
print("ok")
