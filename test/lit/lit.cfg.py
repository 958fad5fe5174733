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
for var in ["ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "HOME", "TMPDIR"]:
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
config.substitutions.append(("%examples", os.path.join(config.mtsched_src_root, "examples")))
config.substitutions.append(("%python", config.python))

# cuda-gpu: a GPU is present, so tests under Cuda/ that need one run
# (scripts/gpu-test.sh); CI has none and reports them unsupported.
import subprocess
try:
    if subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL, timeout=30).returncode == 0:
        config.available_features.add("cuda-gpu")
except (OSError, subprocess.SubprocessError):
    pass
# cuda-2gpu: at least two GPUs, for collectives on thread ranks (one GPU each).
try:
    _gpus = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
    if _gpus.returncode == 0 and _gpus.stdout.decode().count("GPU ") >= 2:
        config.available_features.add("cuda-2gpu")
except (OSError, subprocess.SubprocessError):
    pass
# mpirun: an MPI launcher, for tests of MPI ranks (as root, Open MPI must be
# told that is fine; the ranks inherit the environment on one machine).
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpirun")
    config.substitutions.append(
        ("%mpirun-np2", "mpirun --allow-run-as-root --oversubscribe -np 2"))
# graphviz: `dot`, to check that --emit=dot renders (scripts/setup.sh
# installs it, so CI renders; a machine without it reports the test
# unsupported).
if shutil.which("dot"):
    config.available_features.add("graphviz")
