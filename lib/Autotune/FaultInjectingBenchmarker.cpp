//===- FaultInjectingBenchmarker.cpp - Choice faults as a layer -----------===//
#include "mtsched/Autotune/FaultInjectingBenchmarker.h"
#include <limits>
#include <thread>

using namespace mtsched;

namespace {

class FaultInjectingBenchmarker : public Benchmarker {
public:
  FaultInjectingBenchmarker(std::unique_ptr<Benchmarker> Inner,
                            const AutotuneOptions &Opts, int Rank)
      : Inner(std::move(Inner)), Opts(Opts), Rank(Rank) {}

  llvm::StringRef getBackendName() const override {
    return Inner->getBackendName();
  }
  std::string getVersion() const override { return Inner->getVersion(); }
  std::string getSetupError() const override { return Inner->getSetupError(); }

  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused) override {
    if (const Fault *F = Opts.Faults.choiceFault(Rank, N.getName(), C.Name))
      return injected(*F);
    return Inner->measure(N, W, C, Fused);
  }

  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W) override {
    return Inner->measureEpilogue(N, W);
  }
  void expectChoices(const MultiTemplateBufferNode &N,
                     const std::vector<bool> &Kept) override {
    Inner->expectChoices(N, Kept);
  }
  void prepareAhead(const MultiTemplateBufferNode &N, const Workload &W,
                    const std::vector<bool> &Kept) override {
    Inner->prepareAhead(N, W, Kept);
  }
  void prepareCollectives() override { Inner->prepareCollectives(); }
  void waitIdle() override { Inner->waitIdle(); }

private:
  Measurement injected(const Fault &F) const {
    Measurement M;
    M.Us = std::numeric_limits<double>::infinity();
    switch (F.K) {
    case Fault::Kind::BuildFail:
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

  std::unique_ptr<Benchmarker> Inner;
  const AutotuneOptions &Opts;
  int Rank;
};

} // namespace

std::unique_ptr<Benchmarker> mtsched::createFaultInjectingBenchmarker(
    std::unique_ptr<Benchmarker> Inner, const AutotuneOptions &Opts, int Rank) {
  return std::make_unique<FaultInjectingBenchmarker>(std::move(Inner), Opts,
                                                     Rank);
}
