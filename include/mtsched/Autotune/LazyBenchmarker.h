//===- LazyBenchmarker.h - A backend created on first use -------*- C++ -*-===//
//
// Creating the cuda backend starts a GPU context (and later compiles
// kernels); a run whose every decision replays from the autotune cache needs
// neither. A lazy backend announces its name and version (both part of the
// cache key) up front and creates the real backend only when something must
// be built or timed: a warm start touches no device. Its builder and runner
// both create it on first use and then pass everything to its own.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_LAZYBENCHMARKER_H
#define MTSCHED_AUTOTUNE_LAZYBENCHMARKER_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Benchmarker.h"
#include <functional>
#include <memory>
#include <string>

namespace mtsched {

class BackendRegistry;
class Communicator;

/// The backend a lazy benchmarker's builder and runner share.
class LazyBackend {
public:
  using Factory = std::function<llvm::Expected<std::unique_ptr<Benchmarker>>()>;
  LazyBackend(std::string Name, std::string Version, Factory Make);
  ~LazyBackend();

  /// The backend, created by the first call; null if it cannot be (then
  /// getError() says why).
  Benchmarker *get();
  /// The backend if created, without creating it.
  Benchmarker *created() const { return Real.get(); }
  bool isCreated() const { return Real != nullptr; }
  const std::string &getError() const { return Error; }
  const std::string &getName() const { return Name; }
  const std::string &getVersion() const { return Version; }
  /// Backends created through LazyBackend in this process, for tests.
  static unsigned getCreatedCount();

private:
  std::string Name;
  std::string Version;
  Factory Make;
  std::unique_ptr<Benchmarker> Real;
  bool Tried = false;
  std::string Error;
};

/// A benchmarker named as Backend is, whose builder and runner create it on
/// first use. If it cannot be created, nothing is built, every measurement
/// fails saying why, and getSetupError() says it too.
std::unique_ptr<Benchmarker>
createLazyBenchmarker(std::shared_ptr<LazyBackend> Backend);

/// The benchmarker of Backends that Opts.Backend names, for Rank, created
/// on first use with Comm; `auto` must try its backends to know which it is,
/// so it is created now.
llvm::Expected<std::unique_ptr<Benchmarker>>
createLazyBenchmarker(const BackendRegistry &Backends,
                      const AutotuneOptions &Opts, int Rank,
                      Communicator &Comm);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_LAZYBENCHMARKER_H
