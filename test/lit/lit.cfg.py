import os
import lit.formats

config.name = "mtsched"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mtsched_obj_root, "test", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.mtsched_tools_dir, config.llvm_tools_dir,
     config.environment.get("PATH", os.environ["PATH"])])
# Sanitizer settings from the caller (CI's ASan/TSan runs) reach the tools.
for var in ["ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "HOME", "TMPDIR"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]

config.substitutions.append(("%mtsched-opt", os.path.join(config.mtsched_tools_dir, "mtsched-opt")))
config.substitutions.append(("%examples", os.path.join(config.mtsched_src_root, "examples")))
config.substitutions.append(("%python", config.python))
