import os
import lit.formats

config.name = "mtsched"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mtsched_obj_root, "test", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.mtsched_tools_dir,
     os.path.join(config.mtsched_obj_root, "tools", "mtsched-calibrate"),
     os.path.join(config.mtsched_obj_root, "tools", "mtsched-lab"),
     config.llvm_tools_dir,
     config.environment.get("PATH", os.environ["PATH"])])
# Sanitizer settings from the caller (CI's ASan/TSan runs) reach the tools.
# MTSCHED_MPI_PLUGIN: where MPI ranks find the MPI plugin (docs/RANKS.md).
for var in ["ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "HOME", "TMPDIR",
            "MTSCHED_MPI_PLUGIN"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]
# NCCL settings (the GPU machines keep NCCL_NVLS_ENABLE=0) and the MPI
# launcher's own settings reach the GPU and MPI tests.
for var in os.environ:
    if var.startswith(("NCCL_", "OMPI_", "PMIX_", "OPAL_", "CUDA_")):
        config.environment[var] = os.environ[var]

# The autotune cache is off in tests (counts of benchmarks run must not
# depend on earlier runs); a test that wants it passes --cache-dir=%t.cache.
# Its default directory points into the build tree so nothing here can touch
# the user's cache.
config.environment["MTSCHED_CACHE"] = "off"
config.environment["MTSCHED_CACHE_DIR"] = os.path.join(
    config.mtsched_obj_root, "test", "lit", "default-cache")

config.substitutions.append(("%mtsched-opt", os.path.join(config.mtsched_tools_dir, "mtsched-opt")))
config.substitutions.append(("%mtsched-src", config.mtsched_src_root))
config.substitutions.append(("%examples", os.path.join(config.mtsched_src_root, "examples")))
config.substitutions.append(("%python", config.python))
# The runtime library's C API (lib/RuntimeApi), for tests that load it, and
# the build directory (the torch.compile backend finds both tools there).
config.substitutions.append(("%mtsched-obj-root", config.mtsched_obj_root))
config.substitutions.append(("%mtsched-runtime-lib",
                             os.path.join(config.mtsched_obj_root, "lib",
                                          "RuntimeApi",
                                          "libmtsched_runtime.so")))
# project(mtsched VERSION ...); absent from site configs written by hand
# (scripts/gpu-test.sh), which run no test that uses it.
if getattr(config, "mtsched_version", None):
    config.substitutions.append(("%mtsched-version", config.mtsched_version))

# cuda-gpu: a GPU is visible to CUDA, so tests under Cuda/ that need one run
# (scripts/gpu-test.sh); CI has none and reports them unsupported. cuda-2gpu:
# at least two, for collectives on thread ranks (one GPU each). Counted by
# cuda_gpus.py in a process of its own: the GPUs CUDA shows (the driver's
# count, so CUDA_VISIBLE_DEVICES applies), not every GPU nvidia-smi lists.
import subprocess
import sys
_cuda_gpus = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "cuda_gpus.py")
config.substitutions.append(("%cuda-gpus", sys.executable + " " + _cuda_gpus))
try:
    _out = subprocess.run([sys.executable, _cuda_gpus], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, timeout=60)
    _visible_gpus = int(_out.stdout.decode().strip() or 0) \
        if _out.returncode == 0 else 0
except (OSError, subprocess.SubprocessError, ValueError):
    _visible_gpus = 0
if _visible_gpus >= 1:
    config.available_features.add("cuda-gpu")
if _visible_gpus >= 2:
    config.available_features.add("cuda-2gpu")
# no-sanitizer: a build without ASan/TSan, whose address space a test may
# limit (`ulimit -v`): sanitizers reserve terabytes of shadow memory.
import re as _re
try:
    with open(os.path.join(config.mtsched_obj_root, "CMakeCache.txt")) as _f:
        _m = _re.search(r"^MTSCHED_SANITIZER:STRING=(.*)$", _f.read(), _re.M)
    if not (_m and _m.group(1).strip()):
        config.available_features.add("no-sanitizer")
except OSError:
    pass
# mpirun: an MPI launcher, for tests of MPI ranks (as root, Open MPI must be
# told that is fine; the ranks inherit the environment on one machine).
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpirun")
    # mpi-plugin: the build made the MPI plugin (MTSCHED_ENABLE_MPI), so
    # mpirun can run mtsched-opt's MPI ranks.
    if os.environ.get("MTSCHED_MPI_PLUGIN") or os.path.exists(os.path.join(
            config.mtsched_obj_root, "lib", "mtsched", "libmtsched_mpi.so")):
        config.available_features.add("mpi-plugin")
    config.substitutions.append(
        ("%mpirun-np2", "mpirun --allow-run-as-root --oversubscribe -np 2"))
# graphviz: `dot`, to check that --emit=dot renders (scripts/setup.sh
# installs it, so CI renders; a machine without it reports the test
# unsupported).
if shutil.which("dot"):
    config.available_features.add("graphviz")
# torch / numpy: an interpreter that imports them, for the importer tests
# (test/lit/Import) and .npy checks. Debian's python3-torch imports only
# from /usr/bin/python3, so try that after lit's own interpreter.
# %torch-python runs it with python/ on the path; %mtsched-import is the
# importer's command line. torch-1.13: the PyTorch the committed gallery
# files were generated with (CI's).
config.environment["PYTHONPATH"] = os.path.join(config.mtsched_src_root,
                                                "python")
config.substitutions.append(("%gallery",
                             os.path.join(config.mtsched_src_root, "examples",
                                          "gallery")))
config.substitutions.append(("%torch-examples",
                             os.path.join(config.mtsched_src_root, "examples",
                                          "torch")))
# The probe finds the modules and reads torch's installed version without
# importing torch, which alone took 16 s on a loaded two-core machine, and
# ctest runs lit (so this file) once per test directory. Only a torch with
# no package metadata is imported.
_TORCH_PROBE = """
import importlib.util, sys
if importlib.util.find_spec("numpy") is None or importlib.util.find_spec("torch") is None:
    sys.exit(1)
try:
    from importlib.metadata import version
    print(version("torch"))
except Exception:
    import torch
    print(torch.__version__)
"""
_torch_python = None
for _cand in [config.python, "/usr/bin/python3", shutil.which("python3")]:
    if not _cand or not os.path.exists(_cand):
        continue
    try:
        _out = subprocess.run(
            [_cand, "-c", _TORCH_PROBE],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
    except (OSError, subprocess.SubprocessError):
        continue
    if _out.returncode == 0:
        _torch_python = _cand
        config.available_features.add("torch")
        config.available_features.add("numpy")
        if _out.stdout.decode().strip().startswith("1.13"):
            config.available_features.add("torch-1.13")
        break
if _torch_python:
    config.substitutions.append(("%torch-python", _torch_python))
    config.substitutions.append(("%mtsched-import",
                                 _torch_python + " -m mtsched_torch"))
    # make_fx and the meta kernels print nothing on success; keep the
    # importer's own warnings readable.
    config.environment["PYTHONDONTWRITEBYTECODE"] = "1"

# mtsched-bench: the benchmark programs are built (MTSCHED_ENABLE_BENCH), for
# tests of their options.
if os.path.exists(os.path.join(config.mtsched_obj_root, "bench", "mtsched-bench-presync")):
    config.available_features.add("mtsched-bench")
