"""Checks interpret-aten-ops.mir's outputs against PyTorch."""
import sys

import numpy as np
import torch

i, o = sys.argv[1], sys.argv[2]
x, y, m, w, b, idx = (torch.from_numpy(np.load(f"{i}/{n}.npy")).double()
                      if n != "m" and n != "idx"
                      else torch.from_numpy(np.load(f"{i}/{n}.npy"))
                      for n in ("x", "y", "m", "w", "b", "idx"))
ax = x.abs()
un = (ax.log() + ax.log1p() + torch.nn.functional.gelu(x, approximate="tanh")
      + torch.special.expm1(torch.erf(x)) + x.floor() + x.ceil()
      + torch.round(x * 2) + x.sign() + torch.fmod(x, y)
      + torch.remainder(x, y))
cmp = torch.logical_and(
    torch.logical_not(torch.logical_or(torch.logical_and(x < y, m),
                                       x.floor() == x.ceil())), x != y)
want = {
    "un": un,
    "cmp": cmp,
    "sm": torch.softmax(x.masked_fill(~m, float("-inf")), -1),
    "sm2": torch.softmax(x.masked_fill(m, float("-inf")), -1),
    "ln": torch.nn.functional.layer_norm(x, (16,), w, b),
    "ln1": torch.nn.functional.layer_norm(x, (16,), eps=1e-3),
    "ga": torch.gather(x, 1, idx),
    "tb": x != 0,
}
for name, ref in want.items():
    got = np.load(f"{o}/{name}.npy")
    if ref.dtype == torch.bool:
        assert got.dtype == np.bool_, (name, got.dtype)
        np.testing.assert_array_equal(got, ref.numpy(), err_msg=name)
    else:
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=name)
print("ok")
