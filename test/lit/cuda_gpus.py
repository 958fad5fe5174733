#!/usr/bin/env python3
"""Counts the GPUs a CUDA program started from here would see.

lit.cfg.py runs this to decide the `cuda-gpu` (at least one) and `cuda-2gpu`
(at least two) features. Counting `nvidia-smi -L`'s lines is not enough:
nvidia-smi lists every GPU of the machine, while CUDA shows a process only
those CUDA_VISIBLE_DEVICES names, so with CUDA_VISIBLE_DEVICES=1 on a
four-GPU machine the two-GPU tests ran and failed.

Two ways, the first that answers wins:
  1. the driver: cuInit and cuDeviceGetCount from libcuda.so.1, which apply
     CUDA_VISIBLE_DEVICES (and MIG, CUDA_DEVICE_ORDER...) exactly as the
     tools will; run in this separate process so the caller's process never
     initialises CUDA;
  2. `nvidia-smi -L` (no driver library loadable, e.g. a container without
     it), with CUDA_VISIBLE_DEVICES applied as CUDA documents it: a comma-
     separated list of indices or (prefixes of) UUIDs; set but empty means
     none; the first entry that names no GPU (such as -1), or names one
     already listed, ends the list.

    python3 cuda_gpus.py              # prints the count, e.g. 2
    python3 cuda_gpus.py --no-driver  # only way 2 (the lit test of it)

Prints 0 when neither way finds a GPU. Exits 0 unless the arguments are bad.
"""

import ctypes
import os
import re
import subprocess
import sys

# `nvidia-smi -L`: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5c1e...)"; MIG
# devices are indented lines below their GPU, which CUDA_VISIBLE_DEVICES can
# also name by their "MIG-..." UUID.
_GPU_LINE = re.compile(r"^GPU (\d+):.*\(UUID: (GPU-[0-9A-Za-z-]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG .*\(UUID: (MIG-[0-9A-Za-z/-]+)\)")


def driver_count():
    """The driver's count, or None when no driver library can answer."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    try:
        if cuda.cuInit(0) != 0:
            # CUDA_ERROR_NO_DEVICE (100) among others: with
            # CUDA_VISIBLE_DEVICES naming nothing, cuInit itself fails.
            return 0
        n = ctypes.c_int(0)
        if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0:
            return 0
        return max(n.value, 0)
    except AttributeError:
        return None


def smi_devices(nvidia_smi="nvidia-smi"):
    """(index, uuid, mig_uuids) for each GPU `nvidia-smi -L` lists, or None."""
    try:
        out = subprocess.run([nvidia_smi, "-L"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    gpus = []
    for line in out.stdout.decode(errors="replace").splitlines():
        m = _GPU_LINE.match(line)
        if m:
            gpus.append((int(m.group(1)), m.group(2), []))
            continue
        m = _MIG_LINE.match(line)
        if m and gpus:
            gpus[-1][2].append(m.group(1))
    return gpus


def visible_count(gpus, visible):
    """How many of `gpus` CUDA shows with CUDA_VISIBLE_DEVICES=`visible`
    (None: unset)."""
    if visible is None:
        return len(gpus)
    seen = set()
    for entry in visible.split(","):
        entry = entry.strip()
        match = None
        if re.fullmatch(r"\d+", entry):
            # An index is the position in CUDA's own enumeration; whatever
            # the order, index i exists iff i < the number of GPUs.
            if int(entry) < len(gpus):
                match = ("index", int(entry))
        elif entry.startswith(("GPU-", "MIG-")) and len(entry) > 4:
            # A UUID, or a prefix of one that names exactly one device.
            hits = [u for _, uuid, migs in gpus for u in [uuid] + migs
                    if u.startswith(entry)]
            if len(hits) == 1:
                match = ("uuid", hits[0])
        if match is None or match in seen:
            break
        seen.add(match)
    return len(seen)


def count(use_driver=True, nvidia_smi="nvidia-smi", env=None):
    env = os.environ if env is None else env
    if use_driver:
        n = driver_count()
        if n is not None:
            return n
    gpus = smi_devices(nvidia_smi)
    if gpus is None:
        return 0
    return visible_count(gpus, env.get("CUDA_VISIBLE_DEVICES"))


def main(argv):
    use_driver = True
    for arg in argv[1:]:
        if arg == "--no-driver":
            use_driver = False
        else:
            print("cuda_gpus.py: error: unknown argument '%s'" % arg,
                  file=sys.stderr)
            return 2
    print(count(use_driver=use_driver))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
