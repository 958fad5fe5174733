"""Checks interpret-layout.mir's outputs against NumPy's layout ops."""
import sys

import numpy as np

i, o = sys.argv[1], sys.argv[2]
x, y, z = (np.load(f"{i}/{n}.npy") for n in ("x", "y", "z"))
want = {
    "r": x.reshape(6, 4),
    "e": np.broadcast_to(z, (2, 3, 5)),
    "t": x.transpose(2, 0, 1),
    "s": x[:, :, 1:4:2],
    "s2": x[:, -2:, :],
    "c": np.concatenate([x, y, y], axis=2),
    "rc": -np.concatenate([x, y, y], axis=2).reshape(48),
}
for name, ref in want.items():
    got = np.load(f"{o}/{name}.npy")
    np.testing.assert_allclose(got, ref, rtol=1e-6, err_msg=name)
print("ok")
