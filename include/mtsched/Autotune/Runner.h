//===- Runner.h - Times one built choice on one rank ------------*- C++ -*-===//
//
// The second half of a backend, after TVM MetaSchedule's Runner: it times
// a choice its Builder (Builder.h) built, or a node's epilogue alone, on
// this rank and returns a Measurement. The autotuner wraps it in the
// cross-rank protocol (barrier, measure, max-reduce); a collective's choice
// is timed by every rank of it at once. The simulator and the GPU are two
// implementations, so tests can inject fakes.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_RUNNER_H
#define MTSCHED_AUTOTUNE_RUNNER_H

#include "mtsched/Autotune/Builder.h"
#include "mtsched/Autotune/Measurement.h"
#include "mtsched/Autotune/Workload.h"
#include "llvm/ADT/ArrayRef.h"
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mtsched {

/// One kernel of a form that Runner::measureForms times: choice C of node N
/// at W (fused with N's epilogue if Fused), or N's epilogue as its own
/// kernel (C null). The choice was measured before (its kernel is built).
struct FormKernel {
  const MultiTemplateBufferNode *N = nullptr;
  Workload W;
  const Choice *C = nullptr;
  bool Fused = false;
};

/// How Runner::measureForms times: Rounds rounds, each one sample of every
/// form in turn (the order rotating), each sample at least SampleUs of the
/// form run back to back right after WarmUs of it, so that every form is
/// timed at the clock the GPU settles to under that form's load.
struct SustainedProtocol {
  unsigned Rounds = 5;
  unsigned WarmUs = 5000;
  unsigned SampleUs = 20000;
};

class Runner {
public:
  virtual ~Runner();
  /// Why the backend cannot time anything (it could not be set up), or
  /// empty: a lazily created backend (LazyBenchmarker.h) reports a failure
  /// to create it here.
  virtual std::string getSetupError() const { return ""; }
  /// What the runner counted of its own work, by name, for the report.
  virtual std::vector<std::pair<std::string, int64_t>> getCounters() const {
    return {};
  }
  /// Times choice C of node N at W (fused with its epilogue if Fused), as
  /// Built (its builder's result for C; empty if nothing was built for it:
  /// the runner then prepares it itself) says. The autotuner does not run
  /// a choice whose build failed.
  virtual Measurement measure(const MultiTemplateBufferNode &N,
                              const Workload &W, const Choice &C, bool Fused,
                              const BuildResult &Built) = 0;
  /// Times N's epilogue as its own kernel.
  virtual Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                                      const Workload &W) = 0;
  /// Times each form (its kernels in order, one after another) as P says,
  /// interleaved: a form's time is the median of its samples, in us a run
  /// of the form. One answer per form; a backend that cannot (the default)
  /// fails every form, and its callers keep the times they had.
  virtual std::vector<Measurement>
  measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
               const SustainedProtocol &P);
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_RUNNER_H
