"""Inputs and the NumPy reference of interpret-attention-mask.mir.

    attention_mask.py inputs DIR        writes q, k, v and the masks
    attention_mask.py check IN OUT      compares the interpreter's outputs
"""
import sys

import numpy as np


def inputs(d):
    r = np.random.default_rng(1)

    def f(*s):
        return r.standard_normal(s).astype(np.float32)

    np.save(d + "/q.npy", f(2, 4, 3, 8))
    np.save(d + "/k.npy", f(2, 2, 5, 8))
    np.save(d + "/v.npy", f(2, 2, 5, 8))
    full = f(2, 4, 3, 5)
    full[0, 1, 2, 1:4] = -np.inf
    np.save(d + "/full.npy", full)
    pad = np.zeros((2, 1, 1, 5), np.float32)
    pad[1, 0, 0, 3:] = -np.inf
    np.save(d + "/pad.npy", pad)
    np.save(d + "/shared.npy", f(1, 1, 3, 5))


def check(i, o):
    def load(n):
        return np.load(i + "/" + n + ".npy").astype(np.float64)

    q = load("q")
    # Query head h reads kv head h // 2.
    k, v = np.repeat(load("k"), 2, axis=1), np.repeat(load("v"), 2, axis=1)
    # End-aligned causal mask: query i sees keys j <= Skv - Sq + i.
    causal = np.where(np.arange(5)[None, :] <= 2 + np.arange(3)[:, None],
                      0.0, -np.inf)

    def att(m, s):
        x = q @ k.transpose(0, 1, 3, 2) * s + m
        e = np.exp(x - x.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v

    for n, want in (("a", att(load("full"), 8 ** -0.5)),
                    ("b", att(load("pad") + causal, 0.5)),
                    ("c", att(load("shared"), 8 ** -0.5))):
        np.testing.assert_allclose(np.load(o + "/" + n + ".npy"), want,
                                   rtol=1e-6, atol=1e-7)
    print("ok")


if __name__ == "__main__":
    if sys.argv[1] == "inputs":
        inputs(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
