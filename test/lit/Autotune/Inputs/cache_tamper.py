"""Damages every entry of an autotune cache directory, one way per MODE.

usage: cache_tamper.py DIR MODE
MODE: truncate (cut the body short), flip (change one byte of the body,
keeping its length), format (another on-disk format number), version (an
entry written by another mtsched version, checksum recomputed so only the
version is wrong), garbage (not an entry at all), count (print the number of
entries and check no temporary file was left behind).
With a valid checksum but impossible content: negative (a negative time),
unknown-choice (a record for a choice the node does not have).
Not a regular file, or too large: fifo (a named pipe), device (a symbolic
link to /dev/zero), huge (a sparse 100 MB file).
"""
import glob
import os
import re
import sys

M = (1 << 64) - 1
P1, P2, P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
P4, P5 = 9650029242287828579, 2870177450012600261


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def rnd(acc, lane):
    return (rotl((acc + lane * P2) & M, 31) * P1) & M


def merge(acc, val):
    return ((acc ^ rnd(0, val)) * P1 + P4) & M


def xxh64(data, seed=0):
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while i + 32 <= n:
            for k in range(4):
                v[k] = rnd(v[k], int.from_bytes(data[i:i + 8], "little"))
                i += 8
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for k in range(4):
            h = merge(h, v[k])
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 8 <= n:
        h = ((rotl(h ^ rnd(0, int.from_bytes(data[i:i + 8], "little")), 27) * P1) + P4) & M
        i += 8
    if i + 4 <= n:
        h = ((rotl(h ^ (int.from_bytes(data[i:i + 4], "little") * P1 & M), 23) * P2) + P3) & M
        i += 4
    while i < n:
        h = (rotl(h ^ (data[i] * P5 & M), 11) * P1) & M
        i += 1
    h ^= h >> 33
    h = (h * P2) & M
    h ^= h >> 29
    h = (h * P3) & M
    h ^= h >> 32
    return h


def main():
    d, mode = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(d, "autotune", "*.entry")))
    if mode == "count":
        left = glob.glob(os.path.join(d, "autotune", "*.tmp"))
        if left:
            sys.exit("temporary files left: %s" % left)
        print("entries: %d" % len(files))
        return
    if not files:
        sys.exit("no cache entries in " + d)
    for f in files:
        raw = open(f, "rb").read()
        l1, l2, body = raw.split(b"\n", 2)
        _, hexsum, length = l2.split(b" ")
        # The tool writes the checksum this script computes: check it, so a
        # broken checksum test cannot pass by accident.
        if int(hexsum, 16) != xxh64(body) or int(length) != len(body):
            sys.exit("%s: stored checksum does not match xxh64 of body" % f)
        if mode == "truncate":
            out = l1 + b"\n" + l2 + b"\n" + body[: len(body) // 2]
        elif mode == "flip":
            i = body.index(b'"us":') + 6
            b = bytearray(body)
            b[i] = ord("7") if b[i] != ord("7") else ord("3")
            out = l1 + b"\n" + l2 + b"\n" + bytes(b)
        elif mode == "format":
            out = b"mtsched-autotune-cache 99\n" + l2 + b"\n" + body
        elif mode == "version":
            body = re.sub(rb'"mtsched":"[^"]*"', b'"mtsched":"0.0.0-old"', body)
            out = l1 + b"\nxxh64 %016x %d\n" % (xxh64(body), len(body)) + body
        elif mode == "garbage":
            out = b"\x00\xffnot a cache entry"
        elif mode in ("negative", "unknown-choice"):
            if mode == "negative":
                body = re.sub(rb'"us":[0-9.e+-]+', b'"us":-1.5', body, count=1)
            else:
                body = re.sub(rb'\|[A-Za-z_][A-Za-z0-9_.]*"', b'|no_such_choice"',
                              body, count=1)
            out = l1 + b"\nxxh64 %016x %d\n" % (xxh64(body), len(body)) + body
        elif mode in ("fifo", "device", "huge"):
            os.remove(f)
            if mode == "fifo":
                os.mkfifo(f)
            elif mode == "device":
                os.symlink("/dev/zero", f)
            else:
                with open(f, "wb") as h:
                    h.truncate(100 << 20)
            continue
        else:
            sys.exit("unknown mode " + mode)
        open(f, "wb").write(out)
    print("tampered: %d" % len(files))


main()
