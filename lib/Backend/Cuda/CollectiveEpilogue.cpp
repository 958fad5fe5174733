//===- CollectiveEpilogue.cpp - Fused epilogues of peer collectives -------===//
//
// Which epilogue a peer-memory all_reduce fuses (see CollectiveCodegen.h):
// its name in kernel names, and its reading off a decided node's fused ops.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/IR/Graph.h"

using namespace mtsched;

std::string CollectiveEpilogue::name() const {
  std::string S;
  auto Add = [&](const char *P) {
    S += (S.empty() ? "" : "_") + std::string(P);
  };
  if (Bias)
    Add("bias");
  if (Residual)
    Add("residual");
  if (WriteSum)
    Add("sum");
  if (Activation)
    Add(getOpInfo(*Activation).Name.data());
  if (RmsNorm)
    Add("rmsnorm");
  return S.empty() ? "none" : S;
}

llvm::Expected<CollectiveEpilogue>
mtsched::collectiveEpilogueOf(const MultiTemplateBufferNode &N,
                              const Value *&BiasV, const Value *&ResV,
                              const Value *&GammaV) {
  CollectiveEpilogue E;
  const Value *Cur = N.getResult();
  auto Bad = [&](const llvm::Twine &Why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the epilogue " + Why);
  };
  // A second output holds the value after the adds: the member written
  // must be the last add, followed only by the activation or the rmsnorm.
  const Value *Sum = nullptr;
  if (N.getEpilogueWrites().size() > 1)
    return Bad("writes " + llvm::Twine(N.getEpilogueWrites().size()) +
               " values besides its last; peer kernels write one");
  if (!N.getEpilogueWrites().empty())
    Sum = N.getEpilogueWrites().front().V;
  bool SumSeen = false;
  for (const Operand &O : N.getEpilogue()) {
    const Node *D = O.V->getDef();
    if (!D)
      return Bad("has a value without a definition");
    const Value *Other = nullptr;
    for (unsigned I = 0; I < D->getNumOperands(); ++I)
      if (D->getOperand(I) != Cur)
        Other = D->getOperand(I);
    if (SumSeen && D->getOp() == OpCode::Add)
      return Bad("writes '%" + Sum->getName() +
                 "', which is not the value after the adds");
    switch (D->getOp()) {
    case OpCode::Add:
      if (!Other || E.Activation || E.RmsNorm)
        return Bad("add is not a bias or residual add of the result");
      if (Other->getType().Shape == N.getType().Shape && !E.Residual) {
        E.Residual = true;
        ResV = Other;
      } else if (Other->getType().numElements() == N.getType().Shape.back() &&
                 !E.Bias) {
        E.Bias = true;
        BiasV = Other;
      } else {
        return Bad("add of '%" + Other->getName() + "' is not fused");
      }
      break;
    case OpCode::RmsNorm:
      if (E.RmsNorm || !Other ||
          Other->getType().numElements() != N.getType().Shape.back())
        return Bad("rmsnorm is not over the last dimension with a weight");
      E.RmsNorm = true;
      GammaV = Other;
      if (const Attribute *A = D->getAttrs().get("eps"))
        E.Eps = A->getNumber();
      else
        E.Eps = 1e-6;
      break;
    default: {
      // Any unary pointwise op of the table is an activation; a cast is
      // not one (it changes what is stored, not the value).
      const OpInfo &Info = getOpInfo(D->getOp());
      if (Info.Category != OpCategory::Pointwise || Info.NumOperands != 1 ||
          Info.Types == OpTypeRule::Cast)
        return Bad("op '" + D->getOpName() + "' is not fused by peer kernels");
      if (E.Activation || E.RmsNorm)
        return Bad("has a second activation");
      E.Activation = D->getOp();
      break;
    }
    }
    if (O.V->getType().Dtype != N.getType().Dtype)
      return Bad("changes the dtype");
    if (O.V == Sum) {
      if (D->getOp() != OpCode::Add)
        return Bad("writes '%" + Sum->getName() +
                   "', which is not the value after the adds");
      SumSeen = true;
      E.WriteSum = true;
    }
    Cur = O.V;
  }
  if (Sum && !E.WriteSum)
    return Bad("writes '%" + Sum->getName() + "', which it does not compute");
  return E;
}
