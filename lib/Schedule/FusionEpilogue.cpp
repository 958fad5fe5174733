//===- FusionEpilogue.cpp - The epilogue of a template --------------------===//
//
// The epilogue rules (whyNoEpilogue, whyNotEpilogueMember) and
// FusionAnalysis's search for the chain of consumers each multi-template
// buffer absorbs (findEpilogue). Fusion.cpp runs it before grouping.
//
//===----------------------------------------------------------------------===//
#include "FusionImpl.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/IR/Printer.h"

using namespace mtsched;
using namespace mtsched::detail;

std::string mtsched::whyNoEpilogue(const MultiTemplateBufferNode &M) {
  // A custom op's kernel is opaque: it absorbs an epilogue only when it
  // declares `epilogue = "pointwise"`, and then pointwise ops only.
  if (M.getOp() == OpCode::Custom)
    return M.getAttrs().getString("epilogue") == "pointwise"
               ? ""
               : "custom op '%" + M.getName() +
                     "' does not declare epilogue = \"pointwise\"";
  // The attention kernels write their output from the online-softmax
  // normaliser at the very end; no epilogue template is written for them.
  if (getOpInfo(M.getOp()).Epilogue != OpEpilogueRole::Absorbs)
    return M.getOpName().str() + " '%" + M.getName() +
           "' does not absorb an epilogue";
  return "";
}

/// Why layout node U cannot continue M's epilogue; empty if it can.
static std::string whyNotEpilogueLayout(const MultiTemplateBufferNode &M,
                                        const Node &U) {
  std::string What =
      "layout op '%" + U.getName() + "' (" + U.getOpName().str() + ")";
  if (!elementMapOf(U))
    return What + " does not move each element to exactly one place; an "
                  "epilogue continues through reshape and transpose only";
  if (M.getOp() != OpCode::MatMul)
    return What + " follows " + M.getOpName().str() + " '%" + M.getName() +
           "', whose kernel does not map its epilogue through layout ops";
  if (!isFloatDType(U.getType().Dtype))
    return What + " moves integers, which an epilogue does not";
  return "";
}

std::string mtsched::whyNotEpilogueMember(const MultiTemplateBufferNode &M,
                                          const Node &U) {
  if (llvm::isa<BufferNode>(U) && isLayout(U.getOp()))
    return whyNotEpilogueLayout(M, U);
  if (!llvm::isa<BufferNode>(U) || !isFusableOp(U.getOp()))
    return "consumer '%" + U.getName() +
           "' is not a pointwise op or a row reduction";
  if (M.getOp() == OpCode::Custom && !isPointwise(U.getOp()))
    return "custom op '%" + M.getName() +
           "' absorbs pointwise ops only, not '%" + U.getName() + "'";
  return "";
}

std::string FusionAnalysis::whyNotJoin(const MultiTemplateBufferNode &M,
                                       const Node *U, const Node *Cur,
                                       const KernelSet &Members) {
  // The op's category first; a custom template's pointwise-only rule
  // speaks after the shape rules below (the same function decides both).
  bool Layout = llvm::isa<BufferNode>(U) && isLayout(U->getOp());
  if (Layout && !Opts.EpilogueThroughLayout)
    return "layout op '%" + U->getName() +
           "' ends the epilogue (--epilogue-through-layout=false)";
  if (Layout) {
    if (std::string Why = whyNotEpilogueLayout(M, *U); !Why.empty())
      return Why;
  } else if (!isFusableOp(U->getOp()) || !llvm::isa<BufferNode>(U)) {
    return whyNotEpilogueMember(M, *U);
  }
  auto Owner = EpilogueOwner.find(U);
  if (Owner != EpilogueOwner.end())
    return "consumer '%" + U->getName() + "' is in the epilogue of '%" +
           Owner->second->getName() + "'";
  // Members iterate over the shape of the value before them: the
  // template's, or the last layout op's.
  const auto &Iter = Cur->getType().Shape;
  if (!Layout && U->getType().Shape != Iter)
    return "consumer '%" + U->getName() + "' iterates over " +
           shapeStr(U->getType().Shape) + ", not " + shapeStr(Iter);
  bool AfterLayout =
      llvm::any_of(Members, [](const Node *N) { return isLayout(N->getOp()); });
  if (AfterLayout && isRowReduction(U->getOp()))
    return "row reduction '%" + U->getName() +
           "' follows a layout op in the epilogue; the GEMM's tile holds "
           "whole rows of its own output only";
  if (Layout) {
    // A layout op read outside the chain would be written as a copy of
    // what is a view or a gather today; the chain ends before it.
    auto UIt = Users.find(U->getResult());
    size_t NumUsers = UIt == Users.end() ? 0 : UIt->second.size();
    if (Outputs.count(U->getResult()) || NumUsers != 1)
      return "layout op '%" + U->getName() + "' is " +
             (Outputs.count(U->getResult())
                  ? std::string("a graph output")
                  : "read by " + std::to_string(NumUsers) + " consumers") +
             "; an epilogue continues through a layout op read by its next "
             "member only";
  }
  if (Layout)
    // The kernel writes what is read outside it at the index of its own
    // store; a value before a layout op would need a store of its own.
    for (const Node *N : Members) {
      if (N == &M)
        continue;
      auto It = Users.find(N->getResult());
      bool Escapes = Outputs.count(N->getResult());
      if (It != Users.end())
        for (const Node *R : It->second)
          Escapes |= R != U && !Members.count(R);
      if (Escapes)
        return "layout op '%" + U->getName() + "' follows '%" + N->getName() +
               "', which is read outside the epilogue; an epilogue writes "
               "values only after its last layout op";
    }
  if (AfterLayout || Layout)
    // Index substitution maps only the chain's latest value: a value
    // computed before a layout op is at another index.
    for (const Operand &O : U->getOperands())
      if (O.V != Cur->getResult() && O.V->getDef() &&
          Members.count(O.V->getDef()))
        return "'%" + U->getName() + "' reads '%" + O.V->getName() +
               "', which the epilogue computes at another index across a "
               "layout op";
  if (isRowReduction(U->getOp()) && U->getOperand(0) != Cur->getResult())
    return "'%" + Cur->getName() + "' is not the normalised input of '%" +
           U->getName() + "'";
  if (std::string Why = whyNotEpilogueMember(M, *U); !Why.empty())
    return Why;
  // The fused kernel runs where M runs, so everything else it reads must be
  // computed by then; a value in an earlier template's epilogue is computed
  // where that template runs.
  for (const Operand &O : U->getOperands()) {
    const Node *Def = O.V->getDef();
    if (!Def || Members.count(Def))
      continue;
    auto It = EpilogueOwner.find(Def);
    unsigned ReadyAt =
        It == EpilogueOwner.end() ? Def->getIndex() : It->second->getIndex();
    if (ReadyAt >= M.getIndex())
      return "consumer '%" + U->getName() + "' reads '%" + O.V->getName() +
             "', which is computed after '%" + M.getName() + "'";
  }
  if (const Node *Through = cycleThrough(U, Members, M.getIndex()))
    return "fusing '%" + U->getName() + "' would create a cycle through '%" +
           Through->getName() + "'";
  return "";
}

std::vector<const Node *>
FusionAnalysis::readOutside(llvm::ArrayRef<const Node *> Chain) const {
  llvm::DenseSet<const Node *> In(Chain.begin(), Chain.end());
  std::vector<const Node *> Out;
  for (size_t I = 0; I + 1 < Chain.size(); ++I) {
    const Value *V = Chain[I]->getResult();
    bool Escapes = Outputs.count(V);
    auto It = Users.find(V);
    if (It != Users.end())
      for (const Node *U : It->second)
        Escapes |= !In.count(U);
    if (Escapes)
      Out.push_back(Chain[I]);
  }
  return Out;
}

void FusionAnalysis::findEpilogue(const MultiTemplateBufferNode &M,
                                  FusionPlan &Plan) {
  if (std::string Why = whyNoEpilogue(M); !Why.empty()) {
    Plan.NoEpilogue[&M] = std::move(Why);
    return;
  }
  std::vector<const Node *> Chain;
  KernelSet Members{&M};
  const Node *Cur = &M;
  std::string Why;
  {
    // The template's own result is not written by a fused kernel, so the
    // epilogue must be its only reader.
    const Value *V = M.getResult();
    auto It = Users.find(V);
    size_t NumUsers = It == Users.end() ? 0 : It->second.size();
    if (Outputs.count(V))
      Why = "'%" + M.getName() + "' is a graph output";
    else if (NumUsers != 1)
      Why = "'%" + M.getName() + "' has " + std::to_string(NumUsers) +
            " consumers";
  }
  while (Why.empty() && Chain.size() < Opts.MaxEpilogueLength) {
    auto It = Users.find(Cur->getResult());
    if (It == Users.end()) {
      Why = "'%" + Cur->getName() + "' has no consumers";
      break;
    }
    // The first consumer in program order that can join continues the
    // chain; any other reader makes Cur a value the kernel also writes.
    const Node *Next = nullptr;
    for (const Node *U : It->second) {
      std::string W = whyNotJoin(M, U, Cur, Members);
      if (W.empty()) {
        Next = U;
        break;
      }
      if (Why.empty())
        Why = std::move(W);
    }
    if (!Next)
      break;
    Why.clear();
    Chain.push_back(Next);
    Members.insert(Next);
    Cur = Next;
    if (isRowReduction(Next->getOp())) {
      Why = "a row reduction ends the epilogue";
      break;
    }
  }
  // A layout op at the end moves nothing into the kernel (a reshape is a
  // view, a transpose its own gather kernel either way): the chain ends at
  // the member before it.
  auto TrimLayout = [&] {
    while (!Chain.empty() && isLayout(Chain.back()->getOp())) {
      // What ended the chain after it says most; else the layout op.
      if (Why.empty())
        Why = "layout op '%" + Chain.back()->getName() +
              "' would end the epilogue; an epilogue continues through "
              "layout ops only to a pointwise member";
      Chain.pop_back();
    }
  };
  TrimLayout();
  // Cut the chain where it would write too many values: the member at the
  // cut is then the last one, which is always written.
  std::vector<const Node *> Writes = readOutside(Chain);
  while (Writes.size() > Opts.MaxExtraWrites) {
    const Node *Last = Writes[Opts.MaxExtraWrites];
    Chain.resize(llvm::find(Chain, Last) - Chain.begin() + 1);
    TrimLayout();
    Writes = readOutside(Chain);
  }
  if (Chain.empty()) {
    Plan.NoEpilogue[&M] = Why;
    return;
  }
  // The chain is one kernel of its own.
  unsigned K = KernelSets.size();
  KernelSets.emplace_back();
  KernelFirst.push_back(Chain.front()->getIndex());
  Forms.emplace_back();
  for (const Node *N : Chain) {
    KernelSets[K].insert(N);
    KernelOf[N] = K;
    EpilogueOwner[N] = &M;
  }
  Closed.insert(K);
  if (!Writes.empty())
    Plan.Writes[&M] = std::move(Writes);
  Plan.Epilogues[&M] = std::move(Chain);
}
