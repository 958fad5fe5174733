"""Compares the GPU's outputs of the Mixtral MoE (--run --run-outputs)
with the fp64 interpreter's (--interpret --run-outputs), token by token,
beside the experts each picked: the router runs in bf16 on the GPU and in
fp64 in the interpreter, so a token whose two best logits differ by less
than bf16's resolution can be routed to another expert, and its row then
differs for that reason alone. Prints how many tokens were routed alike,
the relative error over those tokens and over all, and the worst token of
each kind.

    python3 compare_routed.py GPU_DIR REF_DIR
"""
import os
import sys

import numpy as np


def load(d, n):
    return np.load(os.path.join(d, n + ".npy"))


gpu, ref = sys.argv[1], sys.argv[2]
y, r = (load(d, "view_8").astype(np.float64) for d in (gpu, ref))
gi, ri = (np.sort(load(d, "topk.indices"), axis=1) for d in (gpu, ref))
same = (gi == ri).all(axis=1)


def rel(rows):
    num = float(((y[rows] - r[rows]) ** 2).sum())
    den = float((r[rows] ** 2).sum())
    return (num / den) ** 0.5 if den > 0 else float("nan")


tok = np.sqrt(((y - r) ** 2).sum(axis=1) / np.maximum((r ** 2).sum(axis=1),
                                                       1e-300))
print("tokens %d, routed alike %d, routed differently %d" % (
    len(same), int(same.sum()), int((~same).sum())))
print("relative error: all %.3e, routed alike %.3e, routed differently %s" % (
    rel(np.ones_like(same)), rel(same),
    "%.3e" % rel(~same) if (~same).any() else "-"))
print("worst token routed alike: %.3e (token %d)" % (
    float(tok[same].max()), int(np.flatnonzero(same)[tok[same].argmax()])))
if (~same).any():
    print("worst token routed differently: %.3e; gpu ids %s, fp64 ids %s" % (
        float(tok[~same].max()), gi[~same][tok[~same].argmax()].tolist(),
        ri[~same][tok[~same].argmax()].tolist()))
