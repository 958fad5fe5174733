//===- GroupedMm.cpp - The `fuse-grouped-mm` pass -------------------------===//
//
// gpt-fast's MoE form gathers each token's expert weights, `w[ids]` [T, A,
// N, K], and contracts them with einsum; imported, that is an index_select
// of w by the flattened ids, reshapes and transposes, and a batched matmul
// (docs/IMPORT.md). The pass replaces such a matmul and the gather feeding
// it by one `grouped_mm(x, w, ids)` ([T, A, N]) plus the views that put its
// result in the matmul's shape, so the T * A gathered copies of an expert
// are never written.
//
// The match follows the layout ops as strided views (PyTorch's view
// rule): the gathered weights seen as [T, A, N, K], each operand of the
// matmul is a view of its base, and every dimension of the view must
// cover whole dimensions of the base. From that the pass names which of
// t, a, n, k each dimension of the matmul's operands and result is, and
// rejects anything that is not `out[t, a, n] = sum_k x[t, (a,) k] *
// w[ids[t, a], n, k]`.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Lowering/GroupedMm.h"
#include "LayoutBuilder.h"
#include "StridedView.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Lowering/SwiGlu.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include <numeric>

using namespace mtsched;
using namespace mtsched::views;

namespace {
/// Labels of the gathered weights' base [T, A, N, K] (and of the result).
enum Label { LT = 0, LA = 1, LN = 2, LK = 3 };

struct GroupedMatch {
  Node *MatMul = nullptr;
  Chain XChain, WChain;
  Node *Select = nullptr;
  Value *W = nullptr, *Ids = nullptr;
  int64_t T = 0, A = 0;
  /// x's base dimensions labelled (-1: size 1).
  llvm::SmallVector<int, 6> XLabels;
  /// The labels of the matmul result's dimensions, in order.
  llvm::SmallVector<int, 6> OutLabels;
};
} // namespace

static std::optional<GroupedMatch> matchGroupedMm(Node &MM,
                                                  const UseCounts &Uses) {
  if (!llvm::isa<OpNode>(MM) || MM.getOp() != OpCode::MatMul ||
      MM.getNumOperands() != 2)
    return std::nullopt;
  GroupedMatch G;
  G.MatMul = &MM;
  G.WChain = layoutChain(MM.getOperand(1));
  Node *Sel = G.WChain.Base->getDef();
  if (!Sel || !llvm::isa<OpNode>(Sel) || Sel->getOp() != OpCode::IndexSelect ||
      Sel->getAttrs().getInt("dim").value_or(-1) != 0)
    return std::nullopt;
  G.Select = Sel;
  G.W = Sel->getOperand(0);
  const TensorType &WT = G.W->getType();
  if (WT.rank() != 3 || !isFloatDType(WT.Dtype))
    return std::nullopt;
  // The ids as [T, A]: the flattened ids' source when it is rank 2.
  Value *Flat = Sel->getOperand(1);
  Node *FlatDef = Flat->getDef();
  if (FlatDef && FlatDef->getOp() == OpCode::Reshape &&
      FlatDef->getOperand(0)->getType().rank() == 2) {
    G.Ids = FlatDef->getOperand(0);
    G.T = G.Ids->getType().Shape[0];
    G.A = G.Ids->getType().Shape[1];
  } else {
    G.Ids = Flat;
    G.T = Flat->getType().Shape[0];
    G.A = 1;
  }
  // Nothing else may read the gathered weights or their views.
  auto Once = [&](const Value *V) {
    auto It = Uses.find(V);
    return It != Uses.end() && It->second == 1;
  };
  if (!Once(Sel->getResult()))
    return std::nullopt;
  for (Node *N : G.WChain.Nodes)
    if (!Once(N->getResult()))
      return std::nullopt;

  // Operand views. The matmul: A [.., M, K], B [.., K, N], one batch.
  llvm::SmallVector<int64_t, 4> WBase = {G.T, G.A, WT.Shape[1], WT.Shape[2]};
  std::optional<View> BV = reshapeView(contiguous(WBase), Sel->getType().Shape);
  if (BV)
    BV = applyChain(*BV, G.WChain.Nodes);
  G.XChain = layoutChain(MM.getOperand(0));
  const TensorType &XBase = G.XChain.Base->getType();
  std::optional<View> AV = applyChain(contiguous(XBase.Shape), G.XChain.Nodes);
  size_t R = MM.getType().rank();
  if (!BV || !AV || BV->size() != R || AV->size() != R || R < 3 ||
      (*AV)[R - 2].Size != 1)
    return std::nullopt;
  std::optional<llvm::SmallVector<Cover, 6>> BC =
      covers(*BV, WBase, {LT, LA, LN, LK});
  if (!BC)
    return std::nullopt;
  // k is w's last dimension alone ([E, N, K] weights).
  if ((*BC)[R - 2] != Cover{LK})
    return std::nullopt;
  llvm::SmallVector<int, 6> Count(4, 0);
  for (const Cover &C : *BC)
    for (int L : C)
      ++Count[L];
  for (int L = 0; L < 4; ++L)
    if (Count[L] != (WBase[L] > 1 ? 1 : 0))
      return std::nullopt;
  // Batch dimensions cover t and a only; x's dimensions take their labels.
  llvm::SmallVector<int, 6> XIdx(XBase.rank());
  std::iota(XIdx.begin(), XIdx.end(), 0);
  std::optional<llvm::SmallVector<Cover, 6>> AC =
      covers(*AV, XBase.Shape, XIdx);
  if (!AC)
    return std::nullopt;
  G.XLabels.assign(XBase.rank(), -1);
  auto Assign = [&](const Cover &XDims, const Cover &Labels) {
    if (XDims.size() != Labels.size())
      return false;
    for (size_t I = 0; I < XDims.size(); ++I) {
      if (XBase.Shape[XDims[I]] != WBase[Labels[I]] ||
          G.XLabels[XDims[I]] != -1)
        return false;
      G.XLabels[XDims[I]] = Labels[I];
    }
    return true;
  };
  for (size_t D = 0; D + 2 < R; ++D)
    if (llvm::any_of((*BC)[D], [](int L) { return L > LA; }) ||
        !Assign((*AC)[D], (*BC)[D]))
      return std::nullopt;
  if (!Assign((*AC)[R - 1], {LK}))
    return std::nullopt;
  for (size_t B = 0; B < XBase.rank(); ++B)
    if (XBase.Shape[B] > 1 && G.XLabels[B] == -1)
      return std::nullopt;
  // The result: batch labels, nothing for M (1), then the columns' labels.
  for (size_t D = 0; D < R; ++D)
    if (D != R - 2)
      G.OutLabels.append(D == R - 1 ? (*BC)[R - 1].begin() : (*BC)[D].begin(),
                         D == R - 1 ? (*BC)[R - 1].end() : (*BC)[D].end());
  if (XBase.Dtype != WT.Dtype)
    return std::nullopt;
  return G;
}

namespace {

class FuseGroupedMmPass : public Pass {
public:
  llvm::StringRef getArgument() const override { return "fuse-grouped-mm"; }
  llvm::StringRef getDescription() const override {
    return "Replace each matmul over gathered expert weights (w[ids], MoE) "
           "by one grouped_mm that never materialises them";
  }
  llvm::Error run(Graph &G) override;
};

} // namespace

/// Rewrites match M: x into [T, (A,) K], the grouped_mm, its result into
/// the matmul's shape, and the gather chain erased.
static void rewrite(Graph &G, const GroupedMatch &M, llvm::StringSet<> &Names) {
  Node &MM = *M.MatMul;
  LayoutBuilder B(G, MM, Names);
  const TensorType &WT = M.W->getType();
  int64_t K = WT.Shape[2], NN = WT.Shape[1];
  int64_t Sizes[4] = {M.T, M.A, NN, K};
  // x: its labelled dimensions only, in the order t, a, k.
  Value *X = M.XChain.Base;
  llvm::SmallVector<int64_t, 6> Kept;
  llvm::SmallVector<int, 6> KeptLabels;
  for (size_t D = 0; D < M.XLabels.size(); ++D)
    if (M.XLabels[D] >= 0) {
      Kept.push_back(X->getType().Shape[D]);
      KeptLabels.push_back(M.XLabels[D]);
    }
  bool PerPick = llvm::is_contained(KeptLabels, int(LA));
  X = B.reshape(X, Kept, "x");
  X = B.transpose(X, sortingPerm(KeptLabels), "xt");
  llvm::SmallVector<int64_t, 3> XShape = {M.T};
  if (PerPick)
    XShape.push_back(M.A);
  XShape.push_back(K);
  X = B.reshape(X, XShape, "xg");
  Value *Ids = M.Ids;
  if (Ids->getType().rank() == 1)
    Ids = B.reshape(Ids, {M.T, 1}, "ids");
  TensorType YT = MM.getType();
  YT.Shape = {M.T, M.A, NN};
  Value *Y = B.insert(B.make(OpCode::GroupedMm, {X, M.W, Ids}), "grouped", YT);
  // The result's labels, in the matmul's order.
  llvm::SmallVector<int64_t, 4> Sorted;
  llvm::SmallVector<int, 4> SortedLabels(M.OutLabels.begin(),
                                         M.OutLabels.end());
  llvm::sort(SortedLabels);
  for (int L : SortedLabels)
    Sorted.push_back(Sizes[L]);
  llvm::SmallVector<int64_t, 6> Perm;
  for (int L : M.OutLabels)
    Perm.push_back(llvm::find(SortedLabels, L) - SortedLabels.begin());
  // In label order already: one reshape into the matmul's shape.
  if (!llvm::is_sorted(Perm)) {
    Y = B.reshape(Y, Sorted, "rows");
    Y = B.transpose(Y, Perm, "perm");
  }
  // The last step defines the matmul's own value.
  Value *Src = Y;
  std::unique_ptr<Node> Last = B.make(OpCode::Reshape, {Src});
  G.replaceNode(&MM, std::move(Last));
  for (Node *N : llvm::reverse(M.WChain.Nodes))
    G.eraseNode(N);
  Value *Flat = M.Select->getOperand(1);
  G.eraseNode(M.Select);
  if (Flat != M.Ids && G.getUsers(Flat).empty() && !G.isOutput(Flat))
    G.eraseNode(Flat->getDef());
  // x's views that only the matmul read: a transpose among them would
  // still run as a kernel.
  for (Node *N : llvm::reverse(M.XChain.Nodes)) {
    if (!G.getUsers(N->getResult()).empty() || G.isOutput(N->getResult()))
      break;
    G.eraseNode(N);
  }
}

llvm::Error FuseGroupedMmPass::run(Graph &G) {
  llvm::StringSet<> Names;
  for (const auto &In : G.getInputs())
    Names.insert(In->getName());
  for (const auto &N : G.getNodes())
    Names.insert(N->getName());
  rewriteUntilNoMatch(G, [&](Node &N, const UseCounts &Uses) {
    std::optional<GroupedMatch> M = matchGroupedMm(N, Uses);
    // Without t in x (T > 1) x is not one row per token: not this op.
    if (!M || (M->T > 1 && !llvm::is_contained(M->XLabels, int(LT))))
      return false;
    rewrite(G, *M, Names);
    return true;
  });
  return llvm::Error::success();
}

std::unique_ptr<Pass> mtsched::createFuseGroupedMmPass() {
  return std::make_unique<FuseGroupedMmPass>();
}
