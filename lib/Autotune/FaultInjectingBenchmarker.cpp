//===- FaultInjectingBenchmarker.cpp - Choice faults as a layer -----------===//
#include "mtsched/Autotune/FaultInjectingBenchmarker.h"
#include <limits>
#include <thread>

using namespace mtsched;

namespace {

/// Builds what Inner builds, but a choice with a build-fail fault fails to
/// build, saying so.
class FaultInjectingBuilder : public Builder {
public:
  FaultInjectingBuilder(std::shared_ptr<Benchmarker> Inner,
                        const AutotuneOptions &Opts, int Rank)
      : Inner(std::move(Inner)), Opts(Opts), Rank(Rank) {}

  std::vector<BuiltChoices> build(llvm::ArrayRef<BuildInput> Batch) override {
    std::vector<BuiltChoices> Out = Inner->getBuilder().build(Batch);
    for (size_t K = 0; K < Batch.size(); ++K) {
      const MultiTemplateBufferNode &N = *Batch[K].N;
      for (size_t I = 0; I < N.getChoices().size() && I < Out[K].size(); ++I) {
        const Fault *F =
            Opts.Faults.choiceFault(Rank, N.getName(), N.getChoices()[I].Name);
        if (F && F->K == Fault::Kind::BuildFail)
          Out[K][I] =
              BuildResult{nullptr, "failed to compile (injected fault)"};
      }
    }
    return Out;
  }
  std::vector<std::pair<std::string, int64_t>> getCounters() const override {
    return Inner->getBuilder().getCounters();
  }

private:
  std::shared_ptr<Benchmarker> Inner;
  const AutotuneOptions &Opts;
  int Rank;
};

/// Times what Inner times, but a choice with a run-time fault gets the
/// outcome the fault asks for.
class FaultInjectingRunner : public Runner {
public:
  FaultInjectingRunner(std::shared_ptr<Benchmarker> Inner,
                       const AutotuneOptions &Opts, int Rank)
      : Inner(std::move(Inner)), Opts(Opts), Rank(Rank) {}

  std::string getSetupError() const override {
    return Inner->getRunner().getSetupError();
  }
  std::vector<std::pair<std::string, int64_t>> getCounters() const override {
    return Inner->getRunner().getCounters();
  }
  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused,
                      const BuildResult &Built) override {
    if (const Fault *F = Opts.Faults.choiceFault(Rank, N.getName(), C.Name))
      return injected(*F);
    return Inner->getRunner().measure(N, W, C, Fused, Built);
  }
  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W) override {
    return Inner->getRunner().measureEpilogue(N, W);
  }
  /// The forms' kernels are decided choices: a choice with a fault was
  /// never decided.
  std::vector<Measurement>
  measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
               const SustainedProtocol &P) override {
    return Inner->getRunner().measureForms(Forms, P);
  }

private:
  Measurement injected(const Fault &F) const {
    Measurement M;
    M.Us = std::numeric_limits<double>::infinity();
    switch (F.K) {
    case Fault::Kind::BuildFail:
      // The builder failed it already; a choice run without its build
      // result fails the same way.
      M.Status = ChoiceStatus::Failed;
      M.Message = "failed to compile (injected fault)";
      break;
    case Fault::Kind::RunFail:
      M.Status = ChoiceStatus::Failed;
      M.Message = "failed at run time (injected fault)";
      break;
    case Fault::Kind::WrongResult:
      M.Status = ChoiceStatus::WrongResult;
      M.Message = "output differs from the reference (injected fault)";
      break;
    default:
      // A run that never finishes: the watchdog gives up at the deadline.
      std::this_thread::sleep_for(Opts.ChoiceTimeout);
      M.Status = ChoiceStatus::Timeout;
      M.Message = "ran past the " + std::to_string(Opts.ChoiceTimeout.count()) +
                  " ms choice timeout (injected fault)";
      break;
    }
    return M;
  }

  std::shared_ptr<Benchmarker> Inner;
  const AutotuneOptions &Opts;
  int Rank;
};

} // namespace

std::unique_ptr<Benchmarker> mtsched::createFaultInjectingBenchmarker(
    std::unique_ptr<Benchmarker> Inner, const AutotuneOptions &Opts, int Rank) {
  std::shared_ptr<Benchmarker> Shared(std::move(Inner));
  std::string Name = Shared->getBackendName().str();
  std::string Version = Shared->getVersion();
  return std::make_unique<Benchmarker>(
      std::move(Name), std::move(Version),
      std::make_unique<FaultInjectingBuilder>(Shared, Opts, Rank),
      std::make_unique<FaultInjectingRunner>(Shared, Opts, Rank));
}
