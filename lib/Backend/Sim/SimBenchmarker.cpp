//===- SimBenchmarker.cpp - Timings from the cost model -------------------===//
#include "mtsched/Autotune/FaultInjectingBenchmarker.h"
#include "mtsched/Autotune/TimePredictor.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Backend/Sim/SimBackend.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

using namespace mtsched;

// Bump when a formula or constant of the cost model changes.
// 2: a fused `hier` all_reduce runs its epilogue as a kernel of its own
// on the shard; fused all_gather and reduce_scatter `hier` do not exist.
llvm::StringRef mtsched::getSimModelVersion() { return "sim-model-2"; }

namespace {

/// Builds nothing (createTrivialBuilder): a time is the model's prediction
/// with seeded noise.
class SimRunner : public Runner {
public:
  SimRunner(const AutotuneOptions &Opts, int Rank)
      : Opts(Opts), Model(createRooflinePredictor(Opts.Device)),
        Noise(Opts.Seed, Rank, Opts.SimNoisePct) {}

  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused,
                      const BuildResult &) override {
    std::string Why = "the simulator has no model for '" + C.Name +
                      (Fused ? "' fused with its epilogue" : "'");
    // A fused `hier` that cannot run says why, as the CUDA backend does.
    if (Fused && collectiveAlgoOf(C) == CollectiveAlgo::Hier)
      if (std::optional<int64_t> PerHost = C.Params.getInt("per_host")) {
        std::string Refused = hierFusedRefusal(W, *PerHost);
        if (!Refused.empty())
          Why = Refused;
      }
    return sample(Model->choiceUs(W, C, Fused), std::move(Why));
  }

  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W) override {
    return sample(Model->epilogueUs(W), "");
  }

  /// The simulator has no clock that slows under load: a form's time is
  /// the sum of its kernels' predicted times, without noise (deterministic,
  /// and the noise stream of later measurements is left as it was).
  std::vector<Measurement>
  measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
               const SustainedProtocol &) override {
    std::vector<Measurement> Out;
    for (const std::vector<FormKernel> &F : Forms) {
      Measurement M;
      for (const FormKernel &K : F)
        M.Us +=
            K.C ? Model->choiceUs(K.W, *K.C, K.Fused) : Model->epilogueUs(K.W);
      if (!std::isfinite(M.Us)) {
        M.Status = ChoiceStatus::Failed;
        M.Us = std::numeric_limits<double>::infinity();
        M.Message = "the simulator has no model for a kernel of the form";
      }
      Out.push_back(std::move(M));
    }
    return Out;
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

  const AutotuneOptions &Opts;
  std::unique_ptr<TimePredictor> Model;
  NoiseSource Noise;
};

} // namespace

std::unique_ptr<Benchmarker>
mtsched::createSimBenchmarker(const AutotuneOptions &Opts, int Rank) {
  // Choice faults are a layer of their own above the model.
  return createFaultInjectingBenchmarker(
      std::make_unique<Benchmarker>("sim", getSimModelVersion().str(),
                                    createTrivialBuilder(),
                                    std::make_unique<SimRunner>(Opts, Rank)),
      Opts, Rank);
}

BackendInfo mtsched::getSimBackend() {
  BackendInfo B;
  B.Name = "sim";
  B.Description = "the roofline cost model with seeded noise (no device)";
  B.Version = getSimModelVersion().str();
  B.Create =
      [](const AutotuneOptions &Opts, int Rank,
         Communicator &) -> llvm::Expected<std::unique_ptr<Benchmarker>> {
    return createSimBenchmarker(Opts, Rank);
  };
  return B;
}
