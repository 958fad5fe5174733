//===- LazyBenchmarker.h - A backend created on first use -------*- C++ -*-===//
//
// Creating the cuda backend starts a GPU context (and later compiles
// kernels); a run whose every decision replays from the autotune cache needs
// neither. A LazyBenchmarker announces its backend's name and version (both
// part of the cache key) up front and creates the backend only when a
// choice actually has to be measured: a warm start touches no device.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_LAZYBENCHMARKER_H
#define MTSCHED_AUTOTUNE_LAZYBENCHMARKER_H

#include "mtsched/Autotune/Benchmarker.h"
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

class BackendRegistry;
class Communicator;

class LazyBenchmarker : public Benchmarker {
public:
  using Factory = std::function<llvm::Expected<std::unique_ptr<Benchmarker>>()>;
  LazyBenchmarker(std::string Name, std::string Version, Factory Make);
  ~LazyBenchmarker() override;

  llvm::StringRef getBackendName() const override { return Name; }
  std::string getVersion() const override { return Version; }
  /// Create the backend on first use; if it cannot be created, every
  /// measurement fails saying why, and getSetupError() says it too.
  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused) override;
  /// Forwarded once the backend exists; kept until then, so that a hint
  /// never creates it (a fully cached run opens no GPU).
  void expectChoices(const MultiTemplateBufferNode &N,
                     const std::vector<bool> &Kept) override;
  /// Creates the backend (a measurement of N follows) and forwards.
  void prepareAhead(const MultiTemplateBufferNode &N, const Workload &W,
                    const std::vector<bool> &Kept) override;
  /// Creates the backend (a collective's measurement follows) and
  /// forwards.
  void prepareCollectives() override;
  /// Forwarded if the backend exists.
  void waitIdle() override;
  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W) override;
  std::string getSetupError() const override { return Error; }
  /// The created backend's counters; none if it was never created.
  std::vector<std::pair<std::string, int64_t>> getCounters() const override {
    return Real ? Real->getCounters()
                : std::vector<std::pair<std::string, int64_t>>();
  }

  bool isCreated() const { return Real != nullptr; }
  /// Backends created through LazyBenchmarker in this process, for tests.
  static unsigned getCreatedCount();

private:
  Benchmarker *get();

  std::string Name;
  std::string Version;
  Factory Make;
  std::unique_ptr<Benchmarker> Real;
  bool Tried = false;
  std::string Error;
  std::map<const MultiTemplateBufferNode *, std::vector<bool>> PendingKept;
};

/// The benchmarker of Backends that Opts.Backend names, for Rank, created
/// on first use with Comm; `auto` must try its backends to know which it is,
/// so it is created now.
llvm::Expected<std::unique_ptr<Benchmarker>>
createLazyBenchmarker(const BackendRegistry &Backends,
                      const AutotuneOptions &Opts, int Rank,
                      Communicator &Comm);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_LAZYBENCHMARKER_H
