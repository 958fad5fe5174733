//===- LayoutBuilder.h - Nodes a MoE rewrite inserts ------------*- C++ -*-===//
//
// The reshapes, transposes and ops the MoE rewrites (fuse-grouped-mm,
// fuse-moe-combine) insert before the matmul they replace, each under a
// fresh name. Private to lib/Lowering.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_LOWERING_LAYOUTBUILDER_H
#define MTSCHED_LIB_LOWERING_LAYOUTBUILDER_H

#include "mtsched/IR/Graph.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include <memory>
#include <numeric>
#include <string>

namespace mtsched {

/// Inserts nodes before node At (the matmul a rewrite replaces), each
/// defining a fresh value.
class LayoutBuilder {
public:
  LayoutBuilder(Graph &G, Node &At, llvm::StringSet<> &Names)
      : G(G), At(At), Names(Names) {}

  /// A fresh value name Base.Suffix.
  std::string fresh(const std::string &Suffix) {
    std::string Name = At.getName() + "." + Suffix;
    for (unsigned I = 1; Names.count(Name); ++I)
      Name = At.getName() + "." + Suffix + std::to_string(I);
    Names.insert(Name);
    return Name;
  }
  /// An unplaced node of Op over Operands (insert places it; a rewrite
  /// puts the last in the matmul's place).
  std::unique_ptr<Node> make(OpCode Op, llvm::ArrayRef<Value *> Operands) {
    auto N = std::make_unique<OpNode>(Op, At.getLoc());
    for (Value *V : Operands)
      N->getOperands().push_back({V, At.getLoc()});
    return N;
  }
  /// N, of type Ty, inserted before At.
  Value *insert(std::unique_ptr<Node> N, const std::string &Suffix,
                TensorType Ty) {
    Value *V = G.createValue(fresh(Suffix), std::move(Ty), At.getLoc());
    G.insertNode(At.getIndex(), std::move(N), V);
    return V;
  }
  Value *reshape(Value *X, llvm::ArrayRef<int64_t> Shape,
                 const std::string &Suffix) {
    if (llvm::ArrayRef<int64_t>(X->getType().Shape) == Shape)
      return X;
    TensorType Ty = X->getType();
    Ty.Shape.assign(Shape.begin(), Shape.end());
    return insert(make(OpCode::Reshape, {X}), Suffix, Ty);
  }
  Value *transpose(Value *X, llvm::ArrayRef<int64_t> Perm,
                   const std::string &Suffix) {
    bool Identity = true;
    for (size_t I = 0; I < Perm.size(); ++I)
      Identity &= Perm[I] == int64_t(I);
    if (Identity)
      return X;
    TensorType Ty = X->getType();
    std::vector<Attribute> P;
    for (size_t I = 0; I < Perm.size(); ++I) {
      Ty.Shape[I] = X->getType().Shape[Perm[I]];
      P.push_back(Attribute::getInt(Perm[I]));
    }
    auto N = make(OpCode::Transpose, {X});
    N->getAttrs().set("perm", Attribute::getList(std::move(P)));
    return insert(std::move(N), Suffix, Ty);
  }

private:
  Graph &G;
  Node &At;
  llvm::StringSet<> &Names;
};

/// The permutation that orders Labels ascending.
inline llvm::SmallVector<int64_t, 6> sortingPerm(llvm::ArrayRef<int> Labels) {
  llvm::SmallVector<int64_t, 6> P(Labels.size());
  std::iota(P.begin(), P.end(), 0);
  // Labels are distinct, so an unstable sort is deterministic.
  llvm::sort(P, [&](int64_t L, int64_t R) { return Labels[L] < Labels[R]; });
  return P;
}

} // namespace mtsched

#endif // MTSCHED_LIB_LOWERING_LAYOUTBUILDER_H
