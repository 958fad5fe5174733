//===- GemmSustained.cpp - A long GEMM's best choices re-timed ------------===//
//
// Autotuner::Impl::retimeGemmSustained (--gemm-sustained-us): the
// autotuner's samples are short bursts after an idle GPU, and at 7 ms a
// GEMM the same choice measured 3-5% apart from run to run (Megatron's
// prefill GEMMs on an H200, 2026-11-29), more than its best choices
// differ. Where the decided form of a matmul takes at least that long, its
// GemmSustainedTop best forms (a choice unfused, with the epilogue as its
// own kernel, or fused) are timed again interleaved at sustained load
// (Runner::measureForms, as select-swiglu's forms are) and the fastest is
// kept; the IR says which times decided (gemm_timing, gemm_sustained_us).
//
//===----------------------------------------------------------------------===//
#include "AutotunerImpl.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "llvm/Support/Format.h"
#include <cmath>
#include <tuple>

using namespace mtsched;

namespace {
/// One form of the node: a choice, fused or not, and its burst time.
struct Candidate {
  const Choice *C;
  bool Fused;
  double BurstUs;
  size_t Order; // ties keep the choices' order
};
} // namespace

/// The node's forms by their burst times, fastest first, at most Top.
static std::vector<Candidate> bestForms(const MultiTemplateBufferNode &N,
                                        const NodeTimes &T, size_t Top) {
  std::vector<Candidate> Out;
  double EpiUs = T.HasEpilogue ? T.Epilogue.Us : 0;
  for (size_t I = 0; I < N.getChoices().size(); ++I) {
    const Choice &C = N.getChoices()[I];
    if (T.Unfused[I].Status == ChoiceStatus::Ok &&
        std::isfinite(T.Unfused[I].Us + EpiUs))
      Out.push_back({&C, false, T.Unfused[I].Us + EpiUs, Out.size()});
    // Predicted fused times were never run: only measured ones compete.
    if (T.HasEpilogue && !T.Predicted && I < T.Fused.size() &&
        T.Fused[I].Status == ChoiceStatus::Ok && std::isfinite(T.Fused[I].Us))
      Out.push_back({&C, true, T.Fused[I].Us, Out.size()});
  }
  llvm::sort(Out, [](const Candidate &A, const Candidate &B) {
    return std::tie(A.BurstUs, A.Order) < std::tie(B.BurstUs, B.Order);
  });
  if (Out.size() > Top)
    Out.resize(Top);
  return Out;
}

void Autotuner::Impl::retimeGemmSustained(const Graph &G,
                                          MultiTemplateBufferNode &N,
                                          const Workload &W, const NodeTimes &T,
                                          FusionDecision &D) {
  unsigned From = Fusion.GemmSustainedUs;
  if (!From || W.K != Workload::Kind::Gemm)
    return;
  std::vector<Candidate> Best = bestForms(N, T, GemmSustainedTop);
  if (Best.size() < 2 || Best.front().BurstUs < double(From))
    return;
  const MultiTemplateBufferNode &MN = measured(N);
  std::vector<std::vector<FormKernel>> Forms;
  for (const Candidate &K : Best) {
    std::vector<FormKernel> &F = Forms.emplace_back();
    F.push_back({&MN, W, K.C, K.Fused});
    if (!K.Fused && T.HasEpilogue)
      F.push_back({&MN, W, nullptr, false});
  }
  // Outside the node's replay: these forms are measured or memoized.
  std::vector<AgreedMeasurement> A = Measurer.measureForms(Forms, {});
  auto Name = [](const Candidate &K) {
    return K.C->Name + (K.Fused ? " fused" : "");
  };
  std::string Why;
  if (A.size() != Best.size())
    Why = "not measured (the ranks cannot measure, or --cache-only)";
  for (size_t I = 0; Why.empty() && I < A.size(); ++I)
    if (A[I].Status != ChoiceStatus::Ok)
      Why = Name(Best[I]) + ": " + A[I].Message;
  if (!Why.empty()) {
    // Failures as data: the burst times decide, and the IR says why.
    N.getAttrs().set("gemm_timing", Attribute::getString("burst"));
    N.getAttrs().set("gemm_sustained_failed", Attribute::getString(Why));
    return;
  }
  std::vector<double> Us;
  std::string Times;
  llvm::raw_string_ostream OS(Times);
  for (size_t I = 0; I < A.size(); ++I) {
    Us.push_back(A[I].Us);
    OS << (I ? ", " : "") << Name(Best[I]) << " = "
       << llvm::format("%.3f", A[I].Us) << "us";
  }
  // Ties go to the burst times' order, as every "fastest" is picked.
  int K = firstWithinTolerance(Us, Fusion.TieTolerance);
  if (K >= 0) {
    D.Choice = Best[K].C->Name;
    D.Fused = Best[K].Fused;
  }
  N.getAttrs().set("gemm_timing", Attribute::getString("sustained"));
  N.getAttrs().set("gemm_sustained_us", Attribute::getString(OS.str()));
}
