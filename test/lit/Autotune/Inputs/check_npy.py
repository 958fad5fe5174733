"""Checks interpret-npy.mir's outputs against numpy: usage IN OUT."""
import sys

import numpy as np


def bf16(a):
    """Round float32 values to bfloat16 (nearest even), as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32)


src, out = sys.argv[1], sys.argv[2]
x = bf16(np.load(src + "/x.npy")).astype(np.float64)
w = bf16(np.load(src + "/w.npy").astype(np.float32)).astype(np.float64)
b = np.load(src + "/b.npy").astype(np.float64)
y = x @ w
s = y + b
s = np.exp(s - s.max(-1, keepdims=True))
s /= s.sum(-1, keepdims=True)
got_y, got_s = np.load(out + "/y.npy"), np.load(out + "/s.npy")
assert got_y.dtype == np.float32 and got_y.shape == (4, 3), got_y.dtype
assert got_s.dtype == np.float32 and got_s.shape == (4, 3)
# %y is rounded to bf16 when written; %s is fp64 rounded to f32.
np.testing.assert_array_equal(got_y, bf16(y.astype(np.float32)))
np.testing.assert_allclose(got_s, s, rtol=1e-6, atol=1e-7)
print("ok")
