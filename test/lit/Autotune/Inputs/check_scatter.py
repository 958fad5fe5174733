"""Checks interpret-scatter.mir's outputs against NumPy: each element of the
source written at its index along the dimension, in order (the last of
equal indices wins), or added to what is there."""
import sys

import numpy as np

i, o = sys.argv[1], sys.argv[2]
a = {n: np.load(f"{i}/{n}.npy") for n in ("d", "i", "s", "t", "j", "u")}


def scatter(dst, idx, src, dim, add=False):
    out = np.array(dst, dtype=np.float64)
    for pos in np.ndindex(*idx.shape):
        at = list(pos)
        at[dim] = int(idx[pos])
        out[tuple(at)] = (out[tuple(at)] if add else 0) + src[pos]
    return out


want = {
    "y": scatter(a["d"], a["i"], a["s"], 1),
    "m": scatter(np.zeros((4, 6)), a["i"], np.full((4, 3), 1.5), 1),
    "v": scatter(a["t"], a["j"], a["u"], 1),
    "a": scatter(a["d"], a["i"], a["s"], 1, add=True),
}
for name, ref in want.items():
    got = np.load(f"{o}/{name}.npy")
    np.testing.assert_allclose(got, ref.astype(np.float32), rtol=1e-6,
                               atol=0, err_msg=name)
print("ok")
