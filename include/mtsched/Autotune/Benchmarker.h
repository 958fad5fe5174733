//===- Benchmarker.h - Measures one choice on one rank ----------*- C++ -*-===//
//
// A benchmarker times a choice locally; the autotuner wraps it in the
// cross-rank protocol (barrier, measure, max-reduce). The simulator and the
// GPU are two implementations, so tests can inject fakes.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_BENCHMARKER_H
#define MTSCHED_AUTOTUNE_BENCHMARKER_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Workload.h"
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtsched {

enum class ChoiceStatus { Ok, Failed, Timeout, WrongResult, Skipped };
llvm::StringRef choiceStatusName(ChoiceStatus S);

struct Measurement {
  ChoiceStatus Status = ChoiceStatus::Ok;
  /// Median of the timed runs, in microseconds; +inf unless Status is Ok.
  double Us = 0;
  std::string Message;
};

class Benchmarker {
public:
  virtual ~Benchmarker() = default;
  /// "sim" or "cuda", as the report names it.
  virtual llvm::StringRef getBackendName() const = 0;
  /// What the timings depend on besides the workload: library and driver
  /// versions (CUDA), the model's version (sim). Part of the cache key, so
  /// an upgrade invalidates cached timings.
  virtual std::string getVersion() const { return getDefaultVersion().str(); }
  static llvm::StringRef getDefaultVersion() { return "unversioned"; }
  /// Why the backend cannot measure anything (it could not be set up), or
  /// empty: LazyBenchmarker creates its backend on first use and reports a
  /// failure to create it here.
  virtual std::string getSetupError() const { return ""; }
  /// What the backend counted of its own work, by name, for the report
  /// (cuda: kernels compiled, read from the cache, failed, compile time).
  virtual std::vector<std::pair<std::string, int64_t>> getCounters() const {
    return {};
  }
  /// Which of N's choices the autotuner will measure (Kept[I] for choice I;
  /// the others were pruned), said once before N's first measurement: a
  /// backend may prepare (compile) only those. measure() must still work
  /// for any choice.
  virtual void expectChoices(const MultiTemplateBufferNode &N,
                             const std::vector<bool> &Kept) {}
  /// N will be measured at workload W, with the choices Kept (as for
  /// expectChoices), after the nodes announced before it: a backend may
  /// start preparing it on other threads now (the cuda backend compiles
  /// its kernels while it measures the nodes before). Advisory: N's first
  /// measurement still comes after expectChoices, and must not depend on
  /// this call.
  virtual void prepareAhead(const MultiTemplateBufferNode &N, const Workload &W,
                            const std::vector<bool> &Kept) {}
  /// Called on every rank at the same point, before anything of a graph is
  /// measured, when the walk will measure a collective over every rank: a
  /// backend may start setting collectives up on other threads (the cuda
  /// backend: NCCL's communicator). An exchange over the communicator made
  /// here must be made by every rank. Advisory, like prepareAhead.
  virtual void prepareCollectives() {}
  /// Returns once nothing the backend started on its own (prepareAhead's
  /// compiles, which write the kernel cache) is still running, so that the
  /// process may end without destroying it (OptMainConfig::DisableFree).
  virtual void waitIdle() {}
  /// Times choice C of node N (fused with its epilogue if Fused).
  virtual Measurement measure(const MultiTemplateBufferNode &N,
                              const Workload &W, const Choice &C,
                              bool Fused) = 0;
  /// Times N's epilogue as its own kernel.
  virtual Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                                      const Workload &W) = 0;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_BENCHMARKER_H
