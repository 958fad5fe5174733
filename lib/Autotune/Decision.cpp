//===- Decision.cpp - The autotuner's decision step -----------------------===//
#include "mtsched/Autotune/Decision.h"
#include "mtsched/Autotune/BlasEpilogue.h"
#include <cmath>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

std::string mtsched::fallbackChoice(const MultiTemplateBufferNode &N,
                                    const AutotuneOptions &Opts) {
  if (llvm::isa<CollectiveMultiTemplateBufferNode>(N) &&
      !Opts.CollectiveFallback.empty() && N.findChoice(Opts.CollectiveFallback))
    return Opts.CollectiveFallback;
  return N.getChoices().front().Name;
}

std::string
mtsched::whyEveryChoiceFailed(const MultiTemplateBufferNode &N,
                              const std::vector<AgreedMeasurement> &Times) {
  const AgreedMeasurement *First = nullptr;
  size_t FirstIndex = 0, Same = 0;
  for (size_t I = 0; I < Times.size() && I < N.getChoices().size(); ++I) {
    const AgreedMeasurement &A = Times[I];
    if (A.Status == ChoiceStatus::Skipped || A.Message.empty())
      continue;
    if (!First) {
      First = &A;
      FirstIndex = I;
    } else if (A.Message == First->Message) {
      ++Same;
    }
  }
  if (!First)
    return "no choice was measured";
  std::string Why =
      "'" + N.getChoices()[FirstIndex].Name + "': " + First->Message;
  if (Same)
    Why +=
        ", as did " + std::to_string(Same) + (Same == 1 ? " other" : " others");
  return Why;
}

FusionDecision
mtsched::decideNode(const FusionHeuristic &H, const MultiTemplateBufferNode &N,
                    const NodeTimes &T, const FusionOptions &Fusion,
                    const AutotuneOptions &Opts, bool &Fallback) {
  FusionQuery Q;
  Q.SpeedupThreshold = Fusion.SpeedupThreshold;
  Q.TieTolerance = Fusion.TieTolerance;
  Q.EpilogueUs = T.Epilogue.Us;
  Q.Variants.reserve(N.getChoices().size());
  for (size_t I = 0; I < N.getChoices().size(); ++I) {
    FusionQuery::Variant V{N.getChoices()[I].Name, T.Unfused[I].Us,
                           T.HasEpilogue ? T.Fused[I].Us : Inf};
    if (T.Predicted)
      V.PredictedUnfusedUs = T.PredictedUnfusedUs[I];
    Q.Variants.push_back(std::move(V));
  }
  FusionDecision D = H.decide(Q);
  bool AnyUsable = D.Fused;
  for (const AgreedMeasurement &A : T.Unfused)
    AnyUsable |= std::isfinite(A.Us);
  Fallback = !AnyUsable;
  if (Fallback)
    D.Choice = fallbackChoice(N, Opts);
  return D;
}

void mtsched::applyDecision(MultiTemplateBufferNode &N, const NodeTimes &T,
                            const FusionDecision &D, NodeResult &R) {
  N.setDecision(D.Choice);
  N.setEpilogueFused(D.Fused);
  size_t Count = N.getChoices().size();
  N.getTimings().clear();
  N.getTimings().reserve(Count);
  N.getFusedTimings().clear();
  if (T.HasEpilogue)
    N.getFusedTimings().reserve(Count);
  R.Choices.reserve(Count);
  for (size_t I = 0; I < Count; ++I) {
    const Choice &C = N.getChoices()[I];
    // Pruned (never measured) prints `skipped`; failed stays `inf`.
    ChoiceTiming Unfused{C.Name, T.Unfused[I].Us};
    Unfused.Skipped = T.Unfused[I].Pruned;
    N.getTimings().push_back(Unfused);
    ChoiceResult CR;
    CR.Name = C.Name;
    CR.Status = T.Unfused[I].Status;
    CR.Us = T.Unfused[I].Us;
    CR.LocalUs = T.Unfused[I].LocalUs;
    CR.FusedUs = Inf;
    CR.Message = T.Unfused[I].Message;
    CR.Pruned = T.Unfused[I].Pruned;
    if (T.HasEpilogue && canFuseEpilogue(C, T.BlasEpilogue)) {
      ChoiceTiming Fused{C.Name, T.Fused[I].Us};
      Fused.Skipped = T.Fused[I].Pruned;
      N.getFusedTimings().push_back(Fused);
      CR.FusedUs = T.Fused[I].Us;
      CR.FusedPredicted = T.Predicted;
      ChoiceStatus FS = T.Fused[I].Status;
      if (!T.Predicted && FS != ChoiceStatus::Ok &&
          FS != ChoiceStatus::Skipped) {
        CR.FusedStatus = FS;
        CR.FusedMessage = T.Fused[I].Message;
      }
    }
    R.Choices.push_back(CR);
  }
}

std::string mtsched::fastestChoice(const MultiTemplateBufferNode &N,
                                   const std::vector<AgreedMeasurement> &Times,
                                   double TieTolerance, std::string Default) {
  std::vector<double> Us;
  for (const AgreedMeasurement &A : Times)
    Us.push_back(A.Us);
  int Best = firstWithinTolerance(Us, TieTolerance);
  return Best < 0 ? Default : N.getChoices()[size_t(Best)].Name;
}

NodeResult mtsched::startRecord(const Module &M, const Graph &G,
                                const MultiTemplateBufferNode &N) {
  NodeResult R;
  R.Graph = G.getName();
  R.Name = "%" + N.getName();
  R.Kind = N.getKindKeyword().str();
  R.Op = N.getOpName().str();
  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N))
    R.Group = C->getGroup();
  for (const Operand &E : N.getEpilogue())
    R.Epilogue.push_back("%" + E.V->getName());
  R.W = describeNode(M, G, N);
  R.ChoiceDefs = N.getChoiceList();
  return R;
}

double mtsched::measuredUs(const MultiTemplateBufferNode &N,
                           llvm::StringRef Name) {
  for (const ChoiceTiming &T : N.getTimings())
    if (T.Choice == Name && !T.Skipped)
      return T.Us;
  return std::numeric_limits<double>::infinity();
}
