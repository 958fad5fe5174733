//===- SwiGluSelect.cpp - The `select-swiglu` pass ------------------------===//
#include "mtsched/Autotune/SwiGluSelect.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include <cmath>
#include <limits>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

/// The time N's decision was made with, or +inf if it has none.
static double decidedUs(const MultiTemplateBufferNode &N, bool Fused) {
  for (const ChoiceTiming &T : Fused ? N.getFusedTimings() : N.getTimings())
    if (T.Choice == N.getDecision())
      return T.Us;
  return Inf;
}

/// Times kept to the nanosecond, as the autotuner keeps them.
static double roundUs(double Us) {
  return std::isfinite(Us) ? std::round(Us * 1000.0) / 1000.0 : Us;
}

/// N as its own pointwise kernel reading its operands but Prev.
static EpilogueDesc standalone(const Node &N, const Value *Prev) {
  EpilogueDesc E;
  E.Dtype = N.getType().Dtype;
  E.Elements = N.getType().numElements();
  E.NumOps = 1;
  E.FlopsPerElement = N.getOp() == OpCode::Silu ? 4 : 1;
  E.RowReduction = isRowReduction(N.getOp());
  for (const Operand &O : N.getOperands())
    if (O.V != Prev)
      E.ExtraInputBytes += O.V->getType().numBytes();
  return E;
}

namespace {

class SelectSwiGluPass : public Pass {
public:
  explicit SelectSwiGluPass(Autotuner *Session) : Session(Session) {}
  llvm::StringRef getArgument() const override { return "select-swiglu"; }
  llvm::StringRef getDescription() const override {
    return "Keep the faster of each merged gate+up GEMM (swiglu) and the "
           "split GEMMs it is an alternative of";
  }
  llvm::Error run(Graph &G) override;

private:
  /// The split form: its kernels (both GEMMs as decided, their unfused
  /// epilogues as kernels of their own) and its time, theirs as the
  /// autotuner measured them plus Predicted, what no epilogue covers run
  /// on its own.
  struct SplitForm {
    std::vector<Autotuner::FormPart> Parts;
    double Us = 0;
    double PredictedUs = 0;
  };
  SplitForm splitForm(const Graph &G, const SwiGluMatch &S);
  /// Both forms re-timed interleaved at sustained load where either one's
  /// autotuning time is long (--swiglu-sustained-us): Merged and Split are
  /// replaced by those times, and Attrs say which protocol gave them.
  void retimeSustained(const Graph &G, MultiTemplateBufferNode &Alt,
                       const SplitForm &SF, double MergedExtraUs,
                       double &Merged, double &Split, AttrDict &Attrs);
  /// What the merged form adds to its own GEMM: consumers of %gu that are
  /// in the split GEMMs' epilogues run as a kernel of their own once the
  /// merged GEMM (which has no epilogue) replaces them. Predicted.
  double mergedExtraUs(const SwiGluMatch &S);
  Autotuner *Session;
};

} // namespace

SelectSwiGluPass::SplitForm SelectSwiGluPass::splitForm(const Graph &G,
                                                        const SwiGluMatch &S) {
  SplitForm SF;
  llvm::DenseSet<const Node *> Covered;
  for (const MultiTemplateBufferNode *X : {S.Gate, S.Up}) {
    bool Fused = X->isEpilogueFused();
    SF.Us += decidedUs(*X, Fused);
    SF.Parts.push_back({X, Fused, /*Epilogue=*/false});
    if (!Fused && !X->getEpilogue().empty()) {
      SF.Us += Session->measureEpilogueUs(G, *X);
      SF.Parts.push_back({X, false, /*Epilogue=*/true});
    }
    for (const Operand &E : X->getEpilogue())
      Covered.insert(E.V->getDef());
  }
  // A pointwise node in no epilogue is a kernel of its own: predicted, as
  // nothing times buffer kernels.
  for (const Node *N : {S.Silu, S.Mul})
    if (!Covered.count(N))
      SF.PredictedUs +=
          Session->getTimePredictor().chainUs(standalone(*N, N->getOperand(0)));
  SF.Us += SF.PredictedUs;
  return SF;
}

void SelectSwiGluPass::retimeSustained(const Graph &G,
                                       MultiTemplateBufferNode &Alt,
                                       const SplitForm &SF,
                                       double MergedExtraUs, double &Merged,
                                       double &Split, AttrDict &Attrs) {
  unsigned From = Session->getSwiGluSustainedUs();
  // Short forms (decode, small prefill) decide from the autotuner's times
  // as they always did; a form that failed leaves nothing to compare.
  if (!From || Session->getSwiGluForm() != SwiGluForm::Measured ||
      !std::isfinite(Merged) || !std::isfinite(Split) ||
      std::max(Merged, Split) < double(From))
    return;
  std::vector<std::vector<Autotuner::FormPart>> Forms = {
      {{&Alt, Alt.isEpilogueFused(), false}}, SF.Parts};
  std::vector<Measurement> T = Session->measureFormsUs(G, Forms);
  std::string Why;
  if (T.size() != 2)
    Why = "not measured (the ranks cannot measure, or --cache-only)";
  else if (T[0].Status != ChoiceStatus::Ok || T[1].Status != ChoiceStatus::Ok)
    Why = (T[0].Status != ChoiceStatus::Ok ? "merged: " + T[0].Message
                                           : "split: " + T[1].Message);
  if (!Why.empty()) {
    // Failures as data: the autotuner's times decide, and the IR says why.
    Attrs.set("swiglu_timing", Attribute::getString("burst"));
    Attrs.set("swiglu_sustained_failed", Attribute::getString(Why));
    return;
  }
  Attrs.set("swiglu_timing", Attribute::getString("sustained"));
  Attrs.set("swiglu_burst_merged_us", Attribute::getFloat(Merged));
  Attrs.set("swiglu_burst_split_us", Attribute::getFloat(Split));
  Merged = roundUs(T[0].Us + MergedExtraUs);
  Split = roundUs(T[1].Us + SF.PredictedUs);
}

double SelectSwiGluPass::mergedExtraUs(const SwiGluMatch &S) {
  EpilogueDesc Chain;
  for (const MultiTemplateBufferNode *X : {S.Gate, S.Up})
    for (const Operand &E : X->getEpilogue()) {
      const Node *N = E.V->getDef();
      if (N == S.Silu || N == S.Mul)
        continue;
      EpilogueDesc One = standalone(*N, N->getOperand(0));
      Chain.Dtype = One.Dtype;
      Chain.Elements = One.Elements;
      Chain.NumOps += 1;
      Chain.FlopsPerElement += One.FlopsPerElement;
      Chain.ExtraInputBytes += One.ExtraInputBytes;
      Chain.RowReduction |= One.RowReduction;
    }
  return Session->getTimePredictor().chainUs(Chain);
}

llvm::Error SelectSwiGluPass::run(Graph &G) {
  std::vector<MultiTemplateBufferNode *> Alternatives;
  for (const auto &N : G.getNodes())
    if (auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (M->getOp() == OpCode::SwiGlu &&
          M->getAttrs().contains(AlternativeOfAttr))
        Alternatives.push_back(M);
  if (Alternatives.empty())
    return llvm::Error::success();
  if (!Session)
    return Ctx.Diags->error(G.getLoc(),
                            "the select-swiglu pass needs an autotuner "
                            "session");
  llvm::StringMap<Node *> ByName;
  for (const auto &N : G.getNodes())
    ByName[N->getName()] = N.get();
  UseCounts Uses = countUses(G);
  for (MultiTemplateBufferNode *Alt : Alternatives) {
    llvm::StringRef Of = *Alt->getAttrs().getString(AlternativeOfAttr);
    Node *Mul = ByName.lookup(Of);
    if (!Alt->isDecided())
      return Ctx.Diags->error(Alt->getLoc(),
                              "'%" + Alt->getName() +
                                  "' is not decided; run autotune first");
    std::optional<SwiGluMatch> S =
        Mul ? matchSwiGlu(*Mul, Uses, /*Decided=*/true) : std::nullopt;
    if (!S || S->H != Alt->getOperand(0) || S->Wg != Alt->getOperand(1) ||
        S->Wu != Alt->getOperand(2))
      return Ctx.Diags->error(Alt->getLoc(),
                              "'%" + Alt->getName() +
                                  "' is an alternative of '%" + Of +
                                  "', which is no longer a decided "
                                  "mul(silu(matmul), matmul) over its "
                                  "operands");
    double Extra = mergedExtraUs(*S);
    double Merged = roundUs(decidedUs(*Alt, Alt->isEpilogueFused()) + Extra);
    SplitForm SF = splitForm(G, *S);
    double Split = roundUs(SF.Us);
    // Attributes but the link, then both times (and, re-timed, how).
    AttrDict Attrs;
    for (const auto &KV : Alt->getAttrs())
      if (KV.first != AlternativeOfAttr)
        Attrs.set(KV.first, KV.second);
    AttrDict How, Times;
    retimeSustained(G, *Alt, SF, Extra, Merged, Split, How);
    Times.set("swiglu_merged_us", Attribute::getFloat(Merged));
    Times.set("swiglu_split_us", Attribute::getFloat(Split));
    for (const auto &KV : How)
      Times.set(KV.first, KV.second);
    for (const auto &KV : Times)
      Attrs.set(KV.first, KV.second);
    if (keepMergedSwiGlu(Merged, Split, Session->getTieTolerance(),
                         Session->getSwiGluForm())) {
      std::unique_ptr<Node> New = Alt->clone();
      New->getAttrs() = std::move(Attrs);
      G.eraseNode(Alt);
      // The merged GEMM defines %gu where the mul did; its inputs are
      // defined before the GEMMs that read them.
      G.replaceNode(S->Mul, std::move(New));
      G.eraseNode(S->Silu);
      G.eraseNode(S->Gate);
      G.eraseNode(S->Up);
    } else {
      for (const auto &KV : Times)
        S->Mul->getAttrs().set(KV.first, KV.second);
      G.eraseNode(Alt);
    }
  }
  return llvm::Error::success();
}

bool mtsched::keepMergedSwiGlu(double MergedUs, double SplitUs,
                               double TieTolerance, SwiGluForm Form) {
  switch (Form) {
  case SwiGluForm::Merged:
    // Only a merged choice that ran can replace the split form.
    return std::isfinite(MergedUs);
  case SwiGluForm::Split:
    return false;
  case SwiGluForm::Measured:
    break;
  }
  return firstWithinTolerance({MergedUs, SplitUs}, TieTolerance) == 0;
}

std::unique_ptr<Pass> mtsched::createSelectSwiGluPass(Autotuner *Session) {
  return std::make_unique<SelectSwiGluPass>(Session);
}
