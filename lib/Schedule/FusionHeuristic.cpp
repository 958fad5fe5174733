//===- FusionHeuristic.cpp ------------------------------------------------===//
#include "mtsched/Schedule/FusionHeuristic.h"
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

using namespace mtsched;

namespace {

/// The fastest unfused variant, and the fastest fused one: of those within
/// Q.TieTolerance of the fastest, the first.
struct Best {
  int Unfused = -1, Fused = -1;
};

Best findBest(const FusionQuery &Q) {
  std::vector<double> Unfused, Fused;
  for (const FusionQuery::Variant &V : Q.Variants) {
    Unfused.push_back(V.UnfusedUs);
    Fused.push_back(V.FusedUs);
  }
  Best B;
  B.Unfused = firstWithinTolerance(Unfused, Q.TieTolerance);
  B.Fused = firstWithinTolerance(Fused, Q.TieTolerance);
  return B;
}

FusionDecision unfused(const FusionQuery &Q, const Best &B) {
  if (B.Unfused < 0)
    return {Q.Variants.empty() ? "" : Q.Variants.front().Choice, false};
  return {Q.Variants[B.Unfused].Choice, false};
}

/// Fuse when the best fused kernel beats best unfused + separate epilogue by
/// the threshold. Used by `benchmark` (measured) and `cost-model`
/// (predicted); they differ only in where the times come from.
class CompareTimes : public FusionHeuristic {
public:
  CompareTimes(bool Measured) : Measured(Measured) {}
  llvm::StringRef getName() const override {
    return Measured ? "benchmark" : "cost-model";
  }
  llvm::StringRef getDescription() const override {
    return Measured ? "fuse an epilogue only if measured faster (default)"
                    : "fuse an epilogue if the cost model predicts it "
                      "faster; fused variants are not benchmarked";
  }
  bool needsMeasuredFusedTimes() const override { return Measured; }
  FusionDecision decide(const FusionQuery &Q) const override {
    Best B = findBest(Q);
    if (B.Fused < 0)
      return unfused(Q, B);
    double Fused = Q.Variants[B.Fused].FusedUs;
    double Unfused = bestComparable(Q, B) + Q.EpilogueUs;
    if (Unfused >= Fused * Q.SpeedupThreshold)
      return {Q.Variants[B.Fused].Choice, true};
    // Not fused: the fastest choice as measured, whatever was compared.
    return unfused(Q, B);
  }

private:
  /// The best unfused time to weigh against the fused ones: measured by
  /// `benchmark`; by `cost-model`, predicted where the query has
  /// predictions, so that both sides of the comparison are predictions.
  double bestComparable(const FusionQuery &Q, const Best &B) const {
    constexpr double Inf = std::numeric_limits<double>::infinity();
    if (Measured)
      return B.Unfused < 0 ? Inf : Q.Variants[B.Unfused].UnfusedUs;
    double Out = Inf;
    for (const FusionQuery::Variant &V : Q.Variants) {
      double Us =
          std::isnan(V.PredictedUnfusedUs) ? V.UnfusedUs : V.PredictedUnfusedUs;
      if (std::isfinite(Us) && Us < Out)
        Out = Us;
    }
    return Out;
  }

  bool Measured;
};

class Always : public FusionHeuristic {
public:
  llvm::StringRef getName() const override { return "always"; }
  llvm::StringRef getDescription() const override {
    return "fuse the epilogue whenever some choice can fuse";
  }
  bool needsMeasuredFusedTimes() const override { return true; }
  FusionDecision decide(const FusionQuery &Q) const override {
    Best B = findBest(Q);
    if (B.Fused >= 0)
      return {Q.Variants[B.Fused].Choice, true};
    return unfused(Q, B);
  }
  /// Merges every group whose merged GEMM can run, whatever it costs.
  bool mergeHorizontal(const HorizontalQuery &Q) const override {
    return Q.Members >= 2 && std::isfinite(Q.MergedUs);
  }
  /// Fuses every norm whose readers can all run it, whatever it costs.
  bool fusePrologue(const PrologueQuery &Q) const override {
    return Q.Readers >= 1 && std::isfinite(Q.FusedUs);
  }
};

class Never : public FusionHeuristic {
public:
  llvm::StringRef getName() const override { return "never"; }
  llvm::StringRef getDescription() const override {
    return "never fuse epilogues; fused variants are not benchmarked";
  }
  bool considersFusion() const override { return false; }
  bool needsMeasuredFusedTimes() const override { return false; }
  FusionDecision decide(const FusionQuery &Q) const override {
    return unfused(Q, findBest(Q));
  }
};

struct Entry {
  const char *Name;
  std::function<std::unique_ptr<FusionHeuristic>()> Make;
};

const Entry Heuristics[] = {
    {"benchmark", [] { return std::make_unique<CompareTimes>(true); }},
    {"cost-model", [] { return std::make_unique<CompareTimes>(false); }},
    {"always", [] { return std::make_unique<Always>(); }},
    {"never", [] { return std::make_unique<Never>(); }},
};

} // namespace

bool FusionHeuristic::mergeHorizontal(const HorizontalQuery &Q) const {
  if (!considersFusion() || Q.Members < 2)
    return false;
  return firstWithinTolerance({Q.MergedUs, Q.SplitUs}, Q.TieTolerance) == 0;
}

bool FusionHeuristic::fusePrologue(const PrologueQuery &Q) const {
  if (!considersFusion() || Q.Readers < 1)
    return false;
  return firstWithinTolerance({Q.FusedUs, Q.SplitUs}, Q.TieTolerance) == 0;
}

bool FusionHeuristic::reopenFusion(const FusionSearchQuery &Q) const {
  if (!considersFusion() || Q.Opened == 0 || !std::isfinite(Q.SearchedUs) ||
      !(Q.SearchedUs > 0))
    return false;
  // Listed first, the pass order's combination keeps ties: a reopened
  // epilogue must win by more than the noise.
  return firstWithinTolerance({Q.GreedyUs, Q.SearchedUs}, Q.TieTolerance) ==
             1 &&
         Q.GreedyUs / Q.SearchedUs >= Q.SpeedupThreshold;
}

int mtsched::firstWithinTolerance(llvm::ArrayRef<double> Us, double Tolerance) {
  double Min = std::numeric_limits<double>::infinity();
  for (double U : Us)
    if (std::isfinite(U))
      Min = std::min(Min, U);
  if (!std::isfinite(Min))
    return -1;
  for (size_t I = 0; I < Us.size(); ++I)
    if (Us[I] <= Min * (1 + Tolerance))
      return int(I);
  return -1;
}

llvm::Expected<std::unique_ptr<FusionHeuristic>>
mtsched::createFusionHeuristic(llvm::StringRef Name) {
  std::string Known;
  for (const Entry &E : Heuristics) {
    if (Name == E.Name)
      return E.Make();
    Known += Known.empty() ? "" : ", ";
    Known += E.Name;
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown fusion heuristic '" + Name +
                                     "' (known: " + Known + ")");
}

std::vector<std::pair<std::string, std::string>>
mtsched::listFusionHeuristics() {
  std::vector<std::pair<std::string, std::string>> Out;
  for (const Entry &E : Heuristics)
    Out.emplace_back(E.Name, E.Make()->getDescription().str());
  return Out;
}
