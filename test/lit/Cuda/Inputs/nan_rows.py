"""Checks a grouped_mm's --run-outputs against its ids: every row
(t, a) whose id is outside [0, E) is NaN throughout, every other row
finite. With `combine` (the rows summed over each token's picks) a token's
row is NaN if any of its ids is bad. Usage: nan_rows.py DIR Y IDS E
[combine]; prints `Y: B bad rows NaN, G good rows finite` or exits
non-zero naming the first row that is not."""
import os
import sys

import numpy as np

d, yname, idsname, e = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
y = np.load(os.path.join(d, yname + ".npy")).astype(np.float64)
ids = np.load(os.path.join(d, idsname + ".npy")).astype(np.int64)
combine = len(sys.argv) > 5 and sys.argv[5] == "combine"
if combine:
    # One row per token; it is bad if any of its picks is.
    ids = np.where(((ids < 0) | (ids >= e)).any(axis=1), -1, 0)
rows = y.reshape(ids.shape[0] if combine else ids.size, -1)
bad = good = 0
for r, i in enumerate(ids.reshape(-1)):
    if i < 0 or i >= e:
        if not np.isnan(rows[r]).all():
            sys.exit("%s: row %d (id %d) is not all NaN" % (yname, r, i))
        bad += 1
    else:
        if not np.isfinite(rows[r]).all():
            sys.exit("%s: row %d (id %d) is not finite" % (yname, r, i))
        good += 1
if not bad or not good:
    sys.exit("%s: %d bad and %d good rows; the test wants both" % (
        yname, bad, good))
print("%s: %d bad rows NaN, %d good rows finite" % (yname, bad, good))
