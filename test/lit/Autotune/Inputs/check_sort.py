"""Checks interpret-sort.mir's outputs: each row ordered largest (or
smallest) first, NaN beyond every number, ties in index order."""
import math
import sys

import numpy as np

i, o = sys.argv[1], sys.argv[2]
x, ids = np.load(f"{i}/x.npy"), np.load(f"{i}/ids.npy")


def order(row, largest):
    def key(j):
        v = float(row[j])
        nan = math.isnan(v)
        # NaN first when largest first, last when smallest first.
        return ((0 if nan else 1) if largest else (1 if nan else 0),
                0.0 if nan else (-v if largest else v), j)
    return sorted(range(len(row)), key=key)


def take(a, k, largest):
    idx = np.array([order(r, largest)[:k] for r in a.reshape(-1, a.shape[-1])])
    idx = idx.reshape(a.shape[:-1] + (k,))
    return np.take_along_axis(a, idx, axis=-1), idx


want = {}
want["w"], want["e"] = take(x, 3, True)
want["lo"], want["lp"] = take(x, 2, False)
want["d"], want["di"] = take(x, x.shape[-1], True)
want["s"], want["order"] = take(ids, ids.shape[-1], False)
for name, ref in want.items():
    got = np.load(f"{o}/{name}.npy")
    np.testing.assert_array_equal(got, ref, err_msg=name)
print("ok")
