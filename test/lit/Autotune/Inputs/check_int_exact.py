"""Checks interpret-int-exact.mir's outputs against PyTorch on the same
inputs, element for element (integers must be exact): python
check_int_exact.py IN OUT."""
import sys

import numpy as np
import torch

i, o = sys.argv[1], sys.argv[2]
t = {n: torch.from_numpy(np.load(i + "/" + n + ".npy"))
     for n in ("a", "b", "d", "si", "s", "ids", "c8")}
a, b, d, si, s, ids, c8 = (t[n] for n in ("a", "b", "d", "si", "s", "ids",
                                          "c8"))
i32 = torch.int32


def wrap32(v):
    """What a cast to int32 does to an int64 value (two's complement); a
    full_like scalar beyond int32 is refused by PyTorch, and the IR's answer
    is this cast's."""
    return torch.tensor(v, dtype=torch.int64).to(i32)


expect = {
    "cs": torch.cumsum(a, 0, dtype=i32),
    "cb": torch.cumsum(b, 0),
    "fw": torch.full_like(a, 0) + wrap32(4294967301),
    "fb": torch.full_like(b, 9007199254740993),
    "sa": d.scatter_add(0, si, s),
    "ad": a + a,
    "mu": a * a,
    "ng": -a,
    "ab": torch.abs(a),
    "mx": torch.maximum(a, -a),
    "bb": b + b,
    "bs": b - 1,
    "ca": b.to(i32),
    "wh": torch.where(c8 != 0, b, b + 1),
    "ix": torch.index_select(b, 0, ids),
    "rs": b.reshape(2, 2),
    "cc": torch.cat([b, b]),
    "sm": b.sum().reshape(1),
    "tv": torch.topk(b, 2).values,
    "ti": torch.topk(b, 2).indices,
    "so": torch.sort(b).values,
    "sx": torch.sort(b, stable=True).indices,
}
for name, want in expect.items():
    got = np.load(o + "/" + name + ".npy")
    want = want.numpy()
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=name)
print("ok")
