"""Checks that two --run-outputs directories hold the same outputs (the
fp64 interpreter on one graph before and after a rewrite), within 1e-12
relative to each output's largest value: prints `same NAME` per output."""
import os
import sys

import numpy as np

a, b = sys.argv[1], sys.argv[2]
names = sorted(f for f in os.listdir(a) if f.endswith(".npy"))
if not names or names != sorted(f for f in os.listdir(b) if f.endswith(".npy")):
    sys.exit("different outputs: %s / %s" % (os.listdir(a), os.listdir(b)))
for n in names:
    x, y = np.load(os.path.join(a, n)), np.load(os.path.join(b, n))
    scale = max(float(np.abs(x).max()), 1e-300)
    err = float(np.abs(x.astype(np.float64) - y).max()) / scale
    if x.shape != y.shape or err > 1e-12:
        sys.exit("%s differs: shapes %s %s, relative error %g" % (
            n, x.shape, y.shape, err))
    print("same", n[:-4])
