//===- MoeCombine.cpp - The `fuse-moe-combine` pass -----------------------===//
//
// gpt-fast's MoE ends with `einsum('tai,ta->ti', expert_outs, weights)`:
// each token's A routed rows, weighted by the router, summed. Imported,
// that is a batched matmul contracting the picks of a grouped_mm's result
// [T, A, N] with the weights [T, A], through reshapes and transposes. The
// pass gives the grouped_mm the weights as its row scale (the kernel
// multiplies each row's fp32 accumulator before rounding it) and leaves
// the sum over the picks as `sum {dim = 1}` of the scaled rows, in a fixed
// order, so the result does not depend on how the experts' tiles are
// scheduled. The matmul, its transposes and its weight views go.
//
// The match sees both operands as strided views of their bases (the
// grouped_mm's [T, A, N] labelled t, a, n; the weights' [T, A] labelled t,
// a) and accepts `out[t, n] = sum_a s[t, a] * y[t, a, n]` in any layout
// the matmul writes it.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Lowering/MoeCombine.h"
#include "LayoutBuilder.h"
#include "StridedView.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Lowering/SwiGlu.h"

using namespace mtsched;
using namespace mtsched::views;

namespace {
/// Labels of the grouped_mm result's base [T, A, N].
enum Label { LT = 0, LA = 1, LN = 2 };

struct CombineMatch {
  Node *MatMul = nullptr, *Grouped = nullptr;
  Chain YChain, SChain;
  /// The labels of the matmul result's dimensions of size > 1, in order.
  llvm::SmallVector<int, 4> OutLabels;
};

class FuseMoeCombinePass : public Pass {
public:
  llvm::StringRef getArgument() const override { return "fuse-moe-combine"; }
  llvm::StringRef getDescription() const override {
    return "Move an MoE combine's router weights into the grouped_mm of the "
           "routed rows (a row scale); the picks' sum stays a reduction";
  }
  llvm::Error run(Graph &G) override;
};
} // namespace

/// Each label of a base dimension of size > 1 exactly once in C.
static bool coversOnce(llvm::ArrayRef<Cover> C, llvm::ArrayRef<int64_t> Base) {
  llvm::SmallVector<int, 4> Count(Base.size(), 0);
  for (const Cover &D : C)
    for (int L : D)
      ++Count[L];
  for (size_t L = 0; L < Base.size(); ++L)
    if (Count[L] != (Base[L] > 1 ? 1 : 0))
      return false;
  return true;
}

/// The views of MM's operands from their bases, labelled; the combine's
/// shape rules on them.
static bool matchLabels(CombineMatch &M, bool YFirst, int64_t T, int64_t A,
                        int64_t N) {
  Node &MM = *M.MatMul;
  const Chain &YC = M.YChain, &SC = M.SChain;
  llvm::SmallVector<int64_t, 3> YBase = {T, A, N}, SBase = {T, A};
  std::optional<View> YV = applyChain(contiguous(YBase), YC.Nodes);
  std::optional<View> SV = applyChain(contiguous(SBase), SC.Nodes);
  size_t R = MM.getType().rank();
  if (!YV || !SV || YV->size() != R || SV->size() != R || R < 2)
    return false;
  auto YCov = covers(*YV, YBase, {LT, LA, LN});
  auto SCov = covers(*SV, SBase, {LT, LA});
  if (!YCov || !SCov || !coversOnce(*YCov, YBase) || !coversOnce(*SCov, SBase))
    return false;
  // The matmul: [.., M, K] x [.., K, Nm]. The contracted dimension is the
  // picks in both; the weights' other one has size 1.
  size_t YK = YFirst ? R - 1 : R - 2, SK = YFirst ? R - 2 : R - 1;
  size_t SFree = YK;
  Cover Picks;
  if (A > 1)
    Picks.push_back(LA);
  if ((*YCov)[YK] != Picks || (*SCov)[SK] != Picks || !(*SCov)[SFree].empty())
    return false;
  // Batch dimensions: the tokens, the same in both.
  for (size_t D = 0; D + 2 < R; ++D)
    if ((*YCov)[D] != (*SCov)[D] ||
        llvm::any_of((*YCov)[D], [](int L) { return L != LT; }))
      return false;
  // The result: the batch labels, then the rows' free dimension (the
  // weights' is 1, at Y's contracted one).
  for (size_t D = 0; D < R; ++D)
    if (D != YK)
      M.OutLabels.append((*YCov)[D].begin(), (*YCov)[D].end());
  return true;
}

static std::optional<CombineMatch> matchCombine(Node &MM,
                                                const UseCounts &Uses) {
  if (!llvm::isa<OpNode>(MM) || MM.getOp() != OpCode::MatMul ||
      MM.getNumOperands() != 2)
    return std::nullopt;
  auto Once = [&](const Value *V) {
    auto It = Uses.find(V);
    return It != Uses.end() && It->second == 1;
  };
  for (bool YFirst : {true, false}) {
    CombineMatch M;
    M.MatMul = &MM;
    M.YChain = layoutChain(MM.getOperand(YFirst ? 0 : 1));
    M.SChain = layoutChain(MM.getOperand(YFirst ? 1 : 0));
    Node *Gm = M.YChain.Base->getDef();
    if (!Gm || !llvm::isa<OpNode>(Gm) || Gm->getOp() != OpCode::GroupedMm ||
        Gm->getNumOperands() != 3)
      continue;
    const TensorType &YT = Gm->getType();
    const TensorType &ST = M.SChain.Base->getType();
    const TensorType &IdsT = Gm->getOperand(2)->getType();
    if (YT.Dtype != MM.getType().Dtype || !isFloatDType(ST.Dtype) ||
        ST.Shape != IdsT.Shape)
      continue;
    // The grouped_mm's rows feed this combine only.
    if (!Once(M.YChain.Base) || llvm::any_of(M.YChain.Nodes, [&](Node *N) {
          return !Once(N->getResult());
        }))
      continue;
    M.Grouped = Gm;
    if (matchLabels(M, YFirst, YT.Shape[0], YT.Shape[1], YT.Shape[2]))
      return M;
  }
  return std::nullopt;
}

/// The scaled grouped_mm, the sum over the picks, its result in the
/// matmul's layout; the matmul, the old grouped_mm and the views erased.
static void rewrite(Graph &G, const CombineMatch &M, llvm::StringSet<> &Names) {
  Node &MM = *M.MatMul;
  LayoutBuilder B(G, MM, Names);
  Node &Gm = *M.Grouped;
  const TensorType &YT = Gm.getType();
  int64_t T = YT.Shape[0], N = YT.Shape[2];
  Value *Y =
      B.insert(B.make(OpCode::GroupedMm, {Gm.getOperand(0), Gm.getOperand(1),
                                          Gm.getOperand(2), M.SChain.Base}),
               "scaled", YT);
  auto Sum = B.make(OpCode::Sum, {Y});
  Sum->getAttrs().set("dim", Attribute::getInt(1));
  Sum->getAttrs().set("keepdim", Attribute::getBool(false));
  TensorType ST = YT;
  ST.Shape = {T, N};
  Value *Z = B.insert(std::move(Sum), "combined", ST);
  // Tokens after the columns: the one transpose of [T, N].
  llvm::SmallVector<int, 4> Kept;
  for (int L : M.OutLabels)
    if (L == LT || L == LN)
      Kept.push_back(L);
  if (Kept.size() == 2 && Kept[0] == LN && T > 1 && N > 1)
    Z = B.transpose(Z, {1, 0}, "combined.t");
  G.replaceNode(&MM, B.make(OpCode::Reshape, {Z}));
  for (Node *N : llvm::reverse(M.YChain.Nodes))
    G.eraseNode(N);
  G.eraseNode(&Gm);
  for (Node *N : llvm::reverse(M.SChain.Nodes)) {
    if (!G.getUsers(N->getResult()).empty() || G.isOutput(N->getResult()))
      break;
    G.eraseNode(N);
  }
}

llvm::Error FuseMoeCombinePass::run(Graph &G) {
  llvm::StringSet<> Names;
  for (const auto &In : G.getInputs())
    Names.insert(In->getName());
  for (const auto &N : G.getNodes())
    Names.insert(N->getName());
  rewriteUntilNoMatch(G, [&](Node &N, const UseCounts &Uses) {
    std::optional<CombineMatch> M = matchCombine(N, Uses);
    if (!M)
      return false;
    rewrite(G, *M, Names);
    return true;
  });
  return llvm::Error::success();
}

namespace {
class FuseMoeCombineSumPass : public Pass {
public:
  llvm::StringRef getArgument() const override {
    return "fuse-moe-combine-sum";
  }
  llvm::StringRef getDescription() const override {
    return "Fold the picks' sum after a row-scaled grouped_mm into its "
           "kernel (combine = true: a deterministic last-arrival sum)";
  }
  llvm::Error run(Graph &G) override;
};
} // namespace

/// `sum(grouped_mm(x, w, ids, s)) {dim = 1}` of rows nothing else reads.
static Node *matchCombineSum(Node &Sum, const UseCounts &Uses, const Graph &G) {
  if (!llvm::isa<OpNode>(Sum) || Sum.getOp() != OpCode::Sum ||
      Sum.getNumOperands() != 1)
    return nullptr;
  Node *Gm = Sum.getOperand(0)->getDef();
  if (!Gm || !llvm::isa<OpNode>(Gm) || Gm->getOp() != OpCode::GroupedMm ||
      Gm->getNumOperands() != 4 || Gm->getAttrs().get("combine"))
    return nullptr;
  auto It = Uses.find(Gm->getResult());
  if (It == Uses.end() || It->second != 1 || G.isOutput(Gm->getResult()))
    return nullptr;
  std::optional<int64_t> Dim = Sum.getAttrs().getInt("dim");
  const Attribute *Keep = Sum.getAttrs().get("keepdim");
  if (!Dim || (*Dim != 1 && *Dim != -2) || (Keep && Keep->getBool()))
    return nullptr;
  return Gm;
}

llvm::Error FuseMoeCombineSumPass::run(Graph &G) {
  rewriteUntilNoMatch(G, [&](Node &Sum, const UseCounts &Uses) {
    Node *Gm = matchCombineSum(Sum, Uses, G);
    if (!Gm)
      return false;
    auto N = std::make_unique<OpNode>(OpCode::GroupedMm, Gm->getLoc());
    for (const Operand &O : Gm->getOperands())
      N->getOperands().push_back(O);
    N->getAttrs().set("combine", Attribute::getBool(true));
    G.replaceNode(&Sum, std::move(N));
    G.eraseNode(Gm);
    return true;
  });
  return llvm::Error::success();
}

std::unique_ptr<Pass> mtsched::createFuseMoeCombineSumPass() {
  return std::make_unique<FuseMoeCombineSumPass>();
}

std::unique_ptr<Pass> mtsched::createFuseMoeCombinePass() {
  return std::make_unique<FuseMoeCombinePass>();
}
