//===- FaultInjection.cpp -------------------------------------------------===//
#include "mtsched/Autotune/FaultInjection.h"
#include "mtsched/IR/Attention.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mtsched;

static llvm::Error specError(llvm::StringRef Spec, const llvm::Twine &Msg) {
  // Both parts may quote what the user typed; keep control bytes out of the
  // terminal.
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      escapeControlBytes(("--inject='" + Spec + "': " + Msg).str()));
}

llvm::Error FaultPlan::add(llvm::StringRef Spec) {
  llvm::SmallVector<llvm::StringRef, 4> Parts;
  Spec.split(Parts, ':');
  using K = Fault::Kind;
  std::optional<K> Kind = llvm::StringSwitch<std::optional<K>>(Parts[0])
                              .Case("late", K::Late)
                              .Case("hang", K::Hang)
                              .Case("exit", K::Exit)
                              .Case("mismatch", K::Mismatch)
                              .Case("build-fail", K::BuildFail)
                              .Case("run-fail", K::RunFail)
                              .Case("wrong-result", K::WrongResult)
                              .Case("timeout", K::Timeout)
                              .Default(std::nullopt);
  if (!Kind)
    return specError(Spec,
                     "unknown fault '" + Parts[0] +
                         "' (known: late, hang, exit, mismatch, build-fail, "
                         "run-fail, wrong-result, timeout)");
  Fault F;
  F.K = *Kind;
  F.Spec = Spec.str();
  bool HasMs = false;
  for (llvm::StringRef P : llvm::ArrayRef(Parts).drop_front()) {
    auto [Key, Val] = P.split('=');
    if (Key == "rank") {
      if (Val.getAsInteger(10, F.Rank) || F.Rank < 0)
        return specError(Spec, "rank must be a non-negative integer");
    } else if (Key == "ms" && F.K == K::Late) {
      if (Val.getAsInteger(10, F.DelayMs))
        return specError(Spec, "ms must be a non-negative integer");
      HasMs = true;
    } else if (Key == "choice" && !F.isRankFault()) {
      F.Choice = Val.str();
    } else if (Key == "node" && !F.isRankFault()) {
      Val.consume_front("%");
      F.Node = Val.str();
    } else {
      return specError(Spec, "unexpected '" + P + "'");
    }
  }
  if (F.isRankFault() && F.Rank < 0)
    return specError(Spec, "needs rank=R");
  if (F.K == K::Late && !HasMs)
    return specError(Spec, "needs ms=D");
  if (!F.isRankFault() && F.Choice.empty())
    return specError(Spec, "needs choice=NAME");
  Faults.push_back(std::move(F));
  return llvm::Error::success();
}

const Fault *FaultPlan::rankFault(Fault::Kind K, int Rank) const {
  for (const Fault &F : Faults)
    if (F.K == K && F.Rank == Rank)
      return &F;
  return nullptr;
}

const Fault *FaultPlan::choiceFault(int Rank, llvm::StringRef Node,
                                    llvm::StringRef Choice) const {
  for (const Fault &F : Faults)
    if (!F.isRankFault() && F.Choice == Choice &&
        (F.Rank < 0 || F.Rank == Rank) && (F.Node.empty() || F.Node == Node))
      return &F;
  return nullptr;
}

/// The candidates N has or, for a high-level op, will have after lowering;
/// false if N never becomes a multi-template buffer.
static bool candidatesOf(const Module &M, const Graph &G, const Node &N,
                         const ChoiceConfig &Choices,
                         std::vector<Choice> &Out) {
  if (const auto *MTB = llvm::dyn_cast<MultiTemplateBufferNode>(&N)) {
    Out = MTB->getChoices();
    return true;
  }
  const auto *Op = llvm::dyn_cast<OpNode>(&N);
  if (!Op)
    return false;
  switch (getOpInfo(N.getOp()).Category) {
  case OpCategory::MatMul: {
    // The same problem lowering computes (lib/Lowering/Lowering.cpp).
    const TensorType &Out0 = N.getType();
    int64_t M = Out0.numElements() / Out0.innerDim();
    int64_t K = N.getOperand(0)->getType().innerDim();
    DType Dt = N.getOperand(0)->getType().Dtype;
    if (N.getOp() == OpCode::Attention) {
      std::optional<AttentionShape> S = attentionShapeOf(N);
      Out = S ? Choices.attentionChoices(*S) : std::vector<Choice>();
      return true;
    }
    bool Batched =
        N.getOp() == OpCode::SwiGlu && N.getOperand(1)->getType().rank() > 2;
    Out = N.getOp() == OpCode::SwiGlu
              ? Choices.swigluChoices(Batched ? Out0.Shape[Out0.rank() - 2] : M,
                                      Out0.innerDim(), K, Dt, Batched)
              : Choices.gemmChoices(M, Out0.innerDim(), K, Dt);
    return true;
  }
  case OpCategory::Collective:
    // The group's topology decides its list (`hier` across hosts).
    Out = Choices.collectiveChoices(
        collectiveKindOf(N.getOp()),
        M.groupRanks(processGroupOf(N.getAttrs()), G.getWorldSize()));
    return true;
  case OpCategory::Custom:
    Out.clear();
    for (const Choice &C : Op->getConfigs())
      if (!Choices.Disabled.count(C.Name))
        Out.push_back(C);
    return true;
  case OpCategory::Unit:
    // An op unit with kernel choices lists them itself (IR/OpUnit.h).
    if (const OpUnitInfo *Info = lookupOpUnitInfo(N.getOp());
        Info && Info->Choices) {
      Out.clear();
      for (std::string &Name : Info->Choices(N))
        if (!Choices.Disabled.count(Name))
          Out.push_back(Choice{std::move(Name), {}, {}});
      return true;
    }
    return false;
  default:
    return false;
  }
}

llvm::Error FaultPlan::checkTargets(const Module &M,
                                    const ChoiceConfig &Choices,
                                    int NumRanks) const {
  for (const Fault &F : Faults) {
    if (F.Rank >= NumRanks)
      return specError(F.Spec, "there is no rank " + llvm::Twine(F.Rank) +
                                   " (" + llvm::Twine(NumRanks) + " rank" +
                                   (NumRanks == 1 ? " is" : "s are") +
                                   " running)");
    if (F.isRankFault())
      continue;
    bool NodeFound = false, NodeTunable = false, ChoiceFound = false;
    std::vector<Choice> Candidates;
    for (const auto &G : M.getGraphs())
      for (const auto &N : G->getNodes()) {
        if (!F.Node.empty() && N->getName() != F.Node)
          continue;
        NodeFound = true;
        if (!candidatesOf(M, *G, *N, Choices, Candidates))
          continue;
        NodeTunable = true;
        ChoiceFound |= llvm::any_of(
            Candidates, [&](const Choice &C) { return C.Name == F.Choice; });
      }
    // The fuse-swiglu pass adds merged gate+up alternatives after lowering,
    // to matmul pairs only it recognises: their tiles are accepted by name
    // when the module has a matmul at all.
    if (!ChoiceFound && F.Node.empty() &&
        swigluTileOf(Choice{F.Choice, {}, {}}))
      ChoiceFound = llvm::any_of(M.getGraphs(), [](const auto &G) {
        return llvm::any_of(G->getNodes(), [](const auto &N) {
          return N->getOp() == OpCode::MatMul;
        });
      });
    if (!F.Node.empty() && !NodeFound)
      return specError(F.Spec, "no graph has a node '%" + F.Node + "'");
    if (!F.Node.empty() && !NodeTunable)
      return specError(F.Spec, "node '%" + F.Node +
                                   "' has no choices (it is not a matmul, a "
                                   "collective or a custom op)");
    if (!ChoiceFound)
      return specError(F.Spec,
                       "'" + F.Choice + "' is not a choice of " +
                           (F.Node.empty() ? "any node" : "'%" + F.Node + "'"));
  }
  return llvm::Error::success();
}
