//===- StridedView.cpp - Layout chains seen as strided views --------------===//
//
// PyTorch's view rule (computeStride) over the reshape and transpose chains
// the MoE rewrites (fuse-grouped-mm, fuse-moe-combine) match.
//
//===----------------------------------------------------------------------===//
#include "StridedView.h"
#include "mtsched/IR/Graph.h"
#include <algorithm>

using namespace mtsched;
using namespace mtsched::views;

View views::contiguous(llvm::ArrayRef<int64_t> Shape) {
  View V(Shape.size());
  int64_t S = 1;
  for (size_t I = Shape.size(); I-- > 0;) {
    V[I] = {Shape[I], S};
    S *= Shape[I];
  }
  return V;
}

/// V reshaped to Shape without a copy (PyTorch's computeStride), or
/// nullopt where the reshape would have to copy.
std::optional<View> views::reshapeView(const View &V,
                                       llvm::ArrayRef<int64_t> Shape) {
  View Out(Shape.size());
  if (V.empty() || Shape.empty())
    return V.empty() && Shape.empty() ? std::optional<View>(Out) : std::nullopt;
  int64_t ViewD = int64_t(Shape.size()) - 1;
  int64_t ChunkStride = V.back().Stride, TensorNumel = 1, ViewNumel = 1;
  for (int64_t D = int64_t(V.size()) - 1; D >= 0; --D) {
    TensorNumel *= V[D].Size;
    if (D == 0 ||
        (V[D - 1].Size != 1 && V[D - 1].Stride != TensorNumel * ChunkStride)) {
      while (ViewD >= 0 && (ViewNumel < TensorNumel || Shape[ViewD] == 1)) {
        Out[ViewD] = {Shape[ViewD], ViewNumel * ChunkStride};
        ViewNumel *= Shape[ViewD];
        --ViewD;
      }
      if (ViewNumel != TensorNumel)
        return std::nullopt;
      if (D > 0) {
        ChunkStride = V[D - 1].Stride;
        TensorNumel = ViewNumel = 1;
      }
    }
  }
  if (ViewD != -1)
    return std::nullopt;
  return Out;
}

/// The layout ops (reshape, transpose) from the nearest other value to V.
Chain views::layoutChain(Value *V) {
  Chain C;
  while (Node *D = V->getDef()) {
    if (!llvm::isa<OpNode>(D) ||
        (D->getOp() != OpCode::Reshape && D->getOp() != OpCode::Transpose))
      break;
    C.Nodes.push_back(D);
    V = D->getOperand(0);
  }
  std::reverse(C.Nodes.begin(), C.Nodes.end());
  C.Base = V;
  return C;
}

/// V seen through the layout nodes Nodes, in order.
std::optional<View> views::applyChain(View V, llvm::ArrayRef<Node *> Nodes) {
  for (Node *N : Nodes) {
    if (N->getOp() == OpCode::Reshape) {
      std::optional<View> R = reshapeView(V, N->getType().Shape);
      if (!R)
        return std::nullopt;
      V = *R;
      continue;
    }
    const Attribute *P = N->getAttrs().get("perm");
    if (!P || !P->isList() || P->getList().size() != V.size())
      return std::nullopt;
    View T;
    for (const Attribute &I : P->getList())
      T.push_back(V[I.getInt()]);
    V = T;
  }
  return V;
}

/// The base dimensions (of size > 1) that view dimension D covers, as
/// labels Labels[b], or nullopt if it covers part of one.
std::optional<Cover> views::coverOf(Dim D, llvm::ArrayRef<int64_t> Base,
                                    llvm::ArrayRef<int> Labels) {
  Cover C;
  if (D.Size == 1)
    return C;
  View BV = contiguous(Base);
  int J = -1;
  for (int B = int(Base.size()) - 1; B >= 0; --B)
    if (Base[B] > 1 && BV[B].Stride == D.Stride) {
      J = B;
      break;
    }
  if (J < 0)
    return std::nullopt;
  int64_t Prod = 1;
  for (int B = J; B >= 0 && Prod < D.Size; --B)
    if (Base[B] > 1) {
      Prod *= Base[B];
      C.insert(C.begin(), Labels[B]);
    }
  if (Prod != D.Size)
    return std::nullopt;
  return C;
}

/// The labels of the base dimensions the dimensions of V cover, in order;
/// each base dimension of size > 1 exactly once, or nullopt.
std::optional<llvm::SmallVector<Cover, 6>>
views::covers(const View &V, llvm::ArrayRef<int64_t> Base,
              llvm::ArrayRef<int> Labels) {
  llvm::SmallVector<Cover, 6> Out;
  for (Dim D : V) {
    std::optional<Cover> C = coverOf(D, Base, Labels);
    if (!C)
      return std::nullopt;
    Out.push_back(*C);
  }
  return Out;
}