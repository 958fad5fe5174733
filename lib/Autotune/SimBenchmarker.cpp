//===- SimBenchmarker.cpp - Timings from the cost model -------------------===//
#include "mtsched/Autotune/Benchmarker.h"
#include "mtsched/Autotune/CudaBenchmarker.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

using namespace mtsched;

llvm::StringRef mtsched::choiceStatusName(ChoiceStatus S) {
  switch (S) {
  case ChoiceStatus::Ok:
    return "ok";
  case ChoiceStatus::Failed:
    return "failed";
  case ChoiceStatus::Timeout:
    return "timeout";
  case ChoiceStatus::WrongResult:
    return "wrong_result";
  case ChoiceStatus::Skipped:
    return "skipped";
  }
  return "failed";
}

namespace {

class SimBenchmarker : public Benchmarker {
public:
  SimBenchmarker(const AutotuneOptions &Opts, int Rank)
      : Opts(Opts), Rank(Rank), Noise(Opts.Seed, Rank, Opts.SimNoisePct) {}

  llvm::StringRef getBackendName() const override { return "sim"; }
  /// Bump when a formula or constant of the cost model changes.
  std::string getVersion() const override { return "sim-model-1"; }

  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused) override {
    if (const Fault *F = Opts.Faults.choiceFault(Rank, N.getName(), C.Name))
      return injected(*F);
    return sample(predictChoiceUs(Opts.Device, W, C, Fused),
                  "the simulator has no model for '" + C.Name +
                      (Fused ? "' fused with its epilogue" : "'"));
  }

  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W) override {
    return sample(predictEpilogueUs(Opts.Device, W), "");
  }

private:
  /// Median of BenchRuns noisy samples of a predicted time.
  Measurement sample(double PredictedUs, std::string WhyInfinite) {
    Measurement M;
    if (!std::isfinite(PredictedUs)) {
      M.Status = ChoiceStatus::Failed;
      M.Us = std::numeric_limits<double>::infinity();
      M.Message = std::move(WhyInfinite);
      return M;
    }
    for (unsigned I = 0; I < Opts.WarmupRuns; ++I)
      Noise.apply(PredictedUs);
    std::vector<double> Runs;
    for (unsigned I = 0; I < std::max(1u, Opts.BenchRuns); ++I)
      Runs.push_back(Noise.apply(PredictedUs));
    std::nth_element(Runs.begin(), Runs.begin() + Runs.size() / 2, Runs.end());
    M.Us = Runs[Runs.size() / 2];
    return M;
  }

  Measurement injected(const Fault &F) {
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

  const AutotuneOptions &Opts;
  int Rank;
  NoiseSource Noise;
};

} // namespace

std::unique_ptr<Benchmarker>
mtsched::createSimBenchmarker(const AutotuneOptions &Opts, int Rank) {
  return std::make_unique<SimBenchmarker>(Opts, Rank);
}

llvm::Expected<std::unique_ptr<Benchmarker>>
mtsched::createBenchmarker(const AutotuneOptions &Opts, int Rank) {
  if (Opts.Backend == "sim")
    return createSimBenchmarker(Opts, Rank);
  if (Opts.Backend == "cuda")
    return createCudaBenchmarker(Opts, Rank);
  if (Opts.Backend == "auto") {
    // Say once per process which backend auto picked, and why.
    static std::once_flag Said;
    // Auto needs to know a GPU is there, not only the driver: open it.
    llvm::Expected<std::unique_ptr<Benchmarker>> Cuda =
        createCudaBenchmarker(Opts, Rank);
    if (Cuda)
      if (llvm::Error E = openCudaDevice(Opts))
        Cuda = std::move(E);
    if (Cuda) {
      std::call_once(Said, [] {
        llvm::errs() << "mtsched-opt: --backend=auto: using cuda\n";
      });
      return Cuda;
    }
    std::string Why = llvm::toString(Cuda.takeError());
    std::call_once(Said, [&] {
      llvm::errs() << "mtsched-opt: --backend=auto: using sim (" << Why
                   << ")\n";
    });
    return createSimBenchmarker(Opts, Rank);
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown backend '" + Opts.Backend +
                                     "' (this build has: sim, cuda, auto)");
}
