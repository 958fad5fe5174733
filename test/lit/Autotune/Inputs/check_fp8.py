"""fp8 reference for interpret-fp8.mir, independent of mtsched's code.

Rounds by search over every code of the format (nearest value, ties to the
even code, saturation beyond the largest finite value, NaN kept) rather than
by mtsched's bit arithmetic.

  check_fp8.py make DIR    writes the inputs
  check_fp8.py check IN OUT checks the outputs
"""
import sys

import numpy as np


def decode(code, man_bits, bias, e4m3):
    sign = -1.0 if code & 0x80 else 1.0
    em = code & 0x7F
    exp, man = em >> man_bits, em & ((1 << man_bits) - 1)
    if (e4m3 and em == 0x7F) or (not e4m3 and exp == 31):
        return None  # NaN or infinity: never a rounding target
    if exp == 0:
        return sign * man * 2.0 ** (1 - bias - man_bits)
    return sign * (1 + man / 2.0**man_bits) * 2.0 ** (exp - bias)


FORMATS = {"e4m3": (3, 7, True), "e5m2": (2, 15, False)}


def table(fmt):
    man_bits, bias, e4m3 = FORMATS[fmt]
    out = []
    for code in range(256):
        v = decode(code, man_bits, bias, e4m3)
        if v is not None:
            out.append((v, code))
    return out


def round_fp8(x, fmt):
    tab = table(fmt)
    biggest = max(v for v, _ in tab)
    out = np.empty(x.shape, dtype=np.float64)
    for i, v in np.ndenumerate(x.astype(np.float64)):
        if np.isnan(v):
            out[i] = np.nan
            continue
        if abs(v) >= biggest:
            out[i] = np.copysign(biggest, v)
            continue
        best = min(tab, key=lambda t: (abs(t[0] - v), t[1] & 1))
        out[i] = best[0] if best[0] != 0 else np.copysign(0.0, v)
    return out


def make(d):
    r = np.random.default_rng(8)
    a = r.standard_normal((6, 40)) * 30
    # Boundaries: the largest values, beyond them, infinities, and ties of
    # the subnormal and normal ranges (2^-10 lies halfway between 0 and the
    # smallest e4m3 subnormal 2^-9; 3 * 2^-10 between 1 and 2 quanta).
    a[0, :10] = [448, 464, 500, 1e9, -np.inf, 2.0**-10, 3 * 2.0**-10,
                 -(2.0**-11), 17.0, 18.5]
    np.save(d + "/a.npy", a)
    np.save(d + "/w.npy", r.uniform(-2, 2, (40, 24)))
    np.save(d + "/v.npy", r.uniform(-2, 2, (40, 24)))
    np.save(d + "/sa.npy", np.array(0.25))
    np.save(d + "/sw.npy", np.array([1.5]))
    np.save(d + "/x.npy", r.standard_normal((5, 7)) * 1e4)
    np.save(d + "/ra.npy", r.uniform(0.1, 2, (6, 1)))
    np.save(d + "/cw.npy", r.uniform(0.1, 2, (1, 24)))


def check(i, o):
    a = np.load(i + "/a.npy")
    # Graph inputs of an fp8 type are rounded on reading.
    w = round_fp8(np.load(i + "/w.npy"), "e4m3")
    v = round_fp8(np.load(i + "/v.npy"), "e5m2")
    sa, sw = float(np.load(i + "/sa.npy")), float(np.load(i + "/sw.npy")[0])
    aq = round_fp8(a, "e4m3")
    np.testing.assert_array_equal(np.load(o + "/aq.npy"), aq.astype(np.float32))
    y = (aq @ w) * sa * sw
    np.testing.assert_allclose(np.load(o + "/y.npy"), y.astype(np.float32),
                               rtol=1e-6, atol=1e-6)
    m = (aq @ v) * sa * sw
    np.testing.assert_allclose(np.load(o + "/m.npy"), m.astype(np.float32),
                               rtol=1e-6, atol=1e-6)
    # Rowwise: a scale per row of A and per column of B.
    ra, cw = np.load(i + "/ra.npy"), np.load(i + "/cw.npy")
    rw = (aq @ w) * ra.astype(np.float32) * cw.astype(np.float32)
    np.testing.assert_allclose(np.load(o + "/rw.npy"), rw.astype(np.float32),
                               rtol=1e-6, atol=1e-6)
    x = np.load(i + "/x.npy")
    np.testing.assert_array_equal(np.load(o + "/x5.npy"),
                                  round_fp8(x, "e5m2").astype(np.float32))
    print("ok")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
