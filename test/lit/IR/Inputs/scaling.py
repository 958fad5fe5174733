"""Checks that mtsched-opt's time grows linearly with the width of an input.

usage: scaling.py MTSCHED_OPT GEN_WIDE KIND N

Times (CPU seconds of the child, so a loaded machine does not matter)
`mtsched-opt FILE` on gen_wide.py KIND inputs of N and 4N entries and fails
if the larger one costs more than 8 times the smaller: linear work costs 4
times, quadratic work 16.
"""
import os
import resource
import subprocess
import sys
import tempfile


def cpu_seconds(opt, path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([opt, path, "-o", os.devnull], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    opt, gen, kind, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (n, 4 * n):
            path = os.path.join(tmp, "%s-%d.mir" % (kind, size))
            with open(path, "w") as f:
                subprocess.run([sys.executable, gen, kind, str(size)], stdout=f,
                               check=True)
            # The best of three, against a noisy neighbour.
            times.append(min(cpu_seconds(opt, path) for _ in range(3)))
    # Below a few milliseconds the ratio is noise; the floor keeps it sane.
    small, large = max(times[0], 0.005), times[1]
    print("%s: %d entries %.3f s, %d entries %.3f s, ratio %.1f" %
          (kind, n, times[0], 4 * n, large, large / small))
    if large > 8 * small:
        sys.exit("%s: 4x the entries cost %.1fx the time: not linear" %
                 (kind, large / small))


main()
