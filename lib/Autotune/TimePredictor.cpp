//===- TimePredictor.cpp - The roofline model behind the interface --------===//
#include "mtsched/Autotune/TimePredictor.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include <limits>

using namespace mtsched;

namespace {

class RooflinePredictor : public TimePredictor {
public:
  explicit RooflinePredictor(const DeviceDesc &D) : D(D) {}
  double choiceUs(const Workload &W, const Choice &C,
                  bool Fused) const override {
    return predictChoiceUs(D, W, C, Fused);
  }
  double epilogueUs(const Workload &W) const override {
    return predictEpilogueUs(D, W);
  }
  double chainUs(const EpilogueDesc &E) const override {
    return epilogueTimeUs(D, E);
  }
  double prologueUs(const Workload &W, const Choice &C) const override;

private:
  DeviceDesc D;
};

} // namespace

double TimePredictor::prologueUs(const Workload &, const Choice &) const {
  return std::numeric_limits<double>::infinity();
}

/// The L2's read bandwidth over HBM's: the CTAs' passes over their rows of
/// x hit L2 after the first (x is M x K, at decode a few hundred KB). H100
/// and H200 read L2 at about 3x their HBM rate (docs/SIMULATOR.md).
static constexpr double L2OverHbm = 3.0;

double RooflinePredictor::prologueUs(const Workload &W, const Choice &C) const {
  // SwiGLU's merged gate+up GEMM: a CTA per BM x BN tile of its output
  // (W.Gemm.N counts output columns), both weights' tiles in one loop.
  bool SwiGlu = W.K == Workload::Kind::SwiGlu;
  std::optional<GemmTileConfig> T = SwiGlu ? swigluTileOf(C) : gemmTileOf(C);
  const GemmProblem &P = W.Gemm;
  if ((W.K != Workload::Kind::Gemm && !SwiGlu) || !T ||
      T->Template != GemmTemplate::MmaSync || T->Persistent || T->BM <= 0 ||
      T->BN <= 0 || P.M <= 0 || P.N <= 0 || P.K <= 0 || D.HbmGBps <= 0)
    return std::numeric_limits<double>::infinity();
  // Every CTA reads its BM rows of x over all of K before its main loop
  // (its rows' sums of squares); scaling the A tiles in shared memory and
  // the accumulator rows is arithmetic the memory-bound decode GEMM hides.
  double Ctas = double(P.Batch) * double((P.M + T->BM - 1) / T->BM) *
                double((P.N + T->BN - 1) / T->BN) * std::max(1, T->SplitK);
  double Bytes =
      Ctas * std::min<int64_t>(T->BM, P.M) * P.K * dtypeBytes(P.Dtype);
  return Bytes / (L2OverHbm * D.HbmGBps * 1e3);
}

std::unique_ptr<TimePredictor>
mtsched::createRooflinePredictor(const DeviceDesc &D) {
  return std::make_unique<RooflinePredictor>(D);
}
