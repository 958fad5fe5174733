//===- Benchmarker.h - A backend's builder and runner, named ----*- C++ -*-===//
//
// What one rank's backend is to the autotuner: a Builder (Builder.h) that
// builds the batch of choices the walk will time, once, and a Runner
// (Runner.h) that times each built choice, under the backend's name and
// version (both part of every cache key). A holder only: the autotuner
// calls build then run explicitly, and nothing else.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_BENCHMARKER_H
#define MTSCHED_AUTOTUNE_BENCHMARKER_H

#include "mtsched/Autotune/Builder.h"
#include "mtsched/Autotune/Runner.h"
#include "llvm/ADT/StringRef.h"
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtsched {

class Benchmarker {
public:
  /// Name is what `--backend` and the report call it ("sim", "cuda");
  /// Version what its timings depend on besides the workload (library and
  /// driver versions, the model's version), so that an upgrade invalidates
  /// cached timings.
  Benchmarker(std::string Name, std::string Version,
              std::unique_ptr<Builder> Build, std::unique_ptr<Runner> Run)
      : Name(std::move(Name)), Version(std::move(Version)),
        Build(std::move(Build)), Run(std::move(Run)) {}

  llvm::StringRef getBackendName() const { return Name; }
  const std::string &getVersion() const { return Version; }
  static llvm::StringRef getDefaultVersion() { return "unversioned"; }

  Builder &getBuilder() { return *Build; }
  Runner &getRunner() { return *Run; }
  /// Why the backend cannot time anything, or empty (Runner::getSetupError).
  std::string getSetupError() const { return Run->getSetupError(); }
  /// The builder's counters, then the runner's.
  std::vector<std::pair<std::string, int64_t>> getCounters() const {
    std::vector<std::pair<std::string, int64_t>> C = Build->getCounters();
    for (auto &KV : Run->getCounters())
      C.push_back(std::move(KV));
    return C;
  }

private:
  std::string Name;
  std::string Version;
  std::unique_ptr<Builder> Build;
  std::unique_ptr<Runner> Run;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_BENCHMARKER_H
