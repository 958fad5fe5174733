//===- Fusion.cpp - Vertical fusion and epilogue candidates ---------------===//
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/IR/Printer.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>

using namespace mtsched;

bool mtsched::isFusableOp(OpCode Op) {
  return isPointwise(Op) || isRowReduction(Op);
}

bool mtsched::isFusableLayoutNode(const Node &N) {
  switch (N.getOp()) {
  case OpCode::Reshape:
  case OpCode::Expand:
  case OpCode::Transpose:
  case OpCode::Slice:
  case OpCode::Concat:
    break;
  default:
    return false; // index_select reads its indices at run time
  }
  // A fused kernel computes in float: integer tensors keep their exact
  // gather kernels.
  if (!isFloatDType(N.getType().Dtype))
    return false;
  for (const Operand &O : N.getOperands())
    if (!isFloatDType(O.V->getType().Dtype))
      return false;
  return true;
}

bool mtsched::isFusableReduction(const Node &N) {
  if (N.getOp() != OpCode::Sum && N.getOp() != OpCode::Max)
    return false;
  return isFloatDType(N.getType().Dtype) &&
         isFloatDType(N.getOperand(0)->getType().Dtype);
}

bool mtsched::canShareKernel(const Node &N) {
  return llvm::isa<BufferNode>(N) &&
         (isFusableOp(N.getOp()) || isFusableLayoutNode(N) ||
          isFusableReduction(N));
}

std::string mtsched::whyNotShareKernel(const Node &N) {
  if (canShareKernel(N))
    return "";
  std::string Why = "'%" + N.getName() + "' (" + N.getOpName().str() + ")";
  if (!llvm::isa<BufferNode>(N))
    return Why + " is not a buffer";
  if (isLayout(N.getOp()) && N.getOp() != OpCode::IndexSelect)
    return Why + " moves integers, which keep a gather kernel of their own";
  if (N.getOp() == OpCode::Sum || N.getOp() == OpCode::Max)
    return Why + " reduces integers, which keep an exact kernel of their own";
  return Why + " runs as a kernel of its own; only pointwise ops, row "
               "reductions, float sum/max and float layout ops share one";
}

/// The dimension a sum/max reduces, in [0, rank).
static int64_t reducedDim(const Node &N) {
  int64_t Rank = N.getOperand(0)->getType().rank();
  int64_t Dim = Rank - 1;
  if (const Attribute *D = N.getAttrs().get("dim"))
    if (D->isInt())
      Dim = D->getInt() < 0 ? D->getInt() + Rank : D->getInt();
  return Dim;
}

static bool isLastDimReduction(const Node &N) {
  return reducedDim(N) + 1 == int64_t(N.getOperand(0)->getType().rank());
}

static std::string name(const Node &N) { return "'%" + N.getName() + "'"; }

KernelForm::KernelForm(const Node &First) : First(&First) { join(First); }

std::string KernelForm::whyNotJoin(const Node &C) const {
  for (const Node *N : {First, &C})
    if (std::string Why = whyNotShareKernel(*N); !Why.empty())
      return Why;
  if (&C == First)
    return "";
  OpCode Op = C.getOp();
  bool Layout = isLayout(Op), Reduce = isFusableReduction(C),
       RowNorm = isRowReduction(Op);
  const llvm::SmallVector<int64_t, 4> &Shape = C.getType().Shape;
  if (Rows) {
    if (Layout) {
      for (const Operand &O : C.getOperands())
        if (Values.count(O.V) && !LayoutValues.count(O.V))
          return name(C) + " reads '%" + O.V->getName() +
                 "', which the kernel computes: a kernel with a row "
                 "reduction reads through layout ops only before it";
      return "";
    }
    if (std::string Why = whyNotWholeRows(C, RowShape); !Why.empty())
      return Why;
    if (Reduce && !isLastDimReduction(C))
      return name(C) + " reduces dimension " + std::to_string(reducedDim(C)) +
             "; a kernel that reduces rows of " + shapeStr(RowShape) +
             " takes sum/max over the last dimension only";
    if (Reduce || RowNorm) {
      const llvm::SmallVector<int64_t, 4> &Row =
          Reduce ? C.getOperand(0)->getType().Shape : Shape;
      if (Row != RowShape)
        return name(C) + " reduces rows of " + shapeStr(Row) + ", not " +
               shapeStr(RowShape);
      return "";
    }
    // A pointwise member: a whole row, or one value per row.
    llvm::SmallVector<int64_t, 4> PerRow(RowShape.begin(), RowShape.end() - 1);
    llvm::SmallVector<int64_t, 4> Kept = PerRow;
    Kept.push_back(1);
    bool Full = Shape == RowShape;
    if (!Full && Shape != PerRow && Shape != Kept)
      return name(C) + " iterates over " + shapeStr(Shape) +
             ", neither a row of " + shapeStr(RowShape) +
             " nor one value per row";
    for (const Operand &O : C.getOperands()) {
      const TensorType &T = O.V->getType();
      bool Inside = Values.count(O.V);
      if (Full && Inside && T.Shape != RowShape && T.Shape != Kept)
        return name(C) + " broadcasts '%" + O.V->getName() + "' of " +
               shapeStr(T.Shape) + " along " + shapeStr(RowShape) +
               ", not one value per row";
      if (!Full && !Inside && T.numElements() != 1 && T.Shape != Shape)
        return name(C) + " reads '%" + O.V->getName() + "' of " +
               shapeStr(T.Shape) + ", which is not one value per row of " +
               shapeStr(RowShape);
    }
    return "";
  }
  if (readsThrough() || Layout || (Reduce && !isLastDimReduction(C))) {
    // A read-through kernel: members may differ in shape, but a value
    // computed from a reduction is read at its own shape only.
    if (RowNorm) {
      // Layout ops before a row reduction: a rows kernel that reads them
      // through, when they lead to whole rows of it.
      if (HasReduce || Layout)
        return "a kernel with a row reduction takes no sum/max over a "
               "dimension other than the last";
      if (!RowsReady || (HasPlain && PlainShape != Shape))
        return "a kernel with a row reduction reads through layout ops "
               "only to the whole rows it reduces";
      return whyNotWholeRows(C, Shape);
    }
    for (const Operand &O : C.getOperands())
      if (Reduced.count(O.V) && !Reduce &&
          (Layout || O.V->getType().Shape != Shape))
        return name(C) + " would compute the reduction '%" + O.V->getName() +
               "' again for every element it reads (" +
               (Layout ? std::string("a layout op")
                       : "a broadcast to " + shapeStr(Shape)) +
               ")";
    return "";
  }
  // A same-shape kernel, and C keeps it so or makes it a rows kernel.
  const llvm::SmallVector<int64_t, 4> &Own =
      Reduce ? C.getOperand(0)->getType().Shape : Shape;
  if (Own != First->getType().Shape)
    return name(C) + " iterates over " + shapeStr(Own) + ", not " +
           shapeStr(First->getType().Shape);
  return "";
}

std::string KernelForm::whyNotWholeRows(const Node &C,
                                        llvm::ArrayRef<int64_t> Row) const {
  for (const Operand &O : C.getOperands())
    if (LayoutValues.count(O.V) &&
        llvm::ArrayRef<int64_t>(O.V->getType().Shape) != Row)
      return name(C) + " reads '%" + O.V->getName() + "' of " +
             shapeStr(O.V->getType().Shape) +
             " through a layout op; a kernel with a row reduction reads "
             "through layout ops only to whole rows of " +
             shapeStr(Row);
  return "";
}

void KernelForm::join(const Node &C) {
  OpCode Op = C.getOp();
  bool Reduce = isFusableReduction(C);
  bool ReadThrough = !Rows && (HasLayout || HasReduce);
  // What a later row reduction needs of a read-through kernel.
  if (!Rows && !isLayout(Op)) {
    const auto &Own = C.getType().Shape;
    if (HasPlain && PlainShape != Own)
      RowsReady = false;
    if (!HasPlain) {
      PlainShape = Own;
      HasPlain = true;
    }
    for (const Operand &O : C.getOperands())
      if (LayoutValues.count(O.V) && O.V->getType().Shape != Own)
        RowsReady = false;
  } else if (!Rows) {
    for (const Operand &O : C.getOperands())
      if (Values.count(O.V) && !LayoutValues.count(O.V))
        RowsReady = false;
  }
  if (isLayout(Op)) {
    HasLayout = true;
    LayoutValues.insert(C.getResult());
  } else if (isRowReduction(Op) && ReadThrough) {
    Rows = true;
    RowShape = C.getType().Shape;
  } else if (Reduce && (ReadThrough || !isLastDimReduction(C))) {
    HasReduce = true;
    Reduced.insert(C.getResult());
  } else if (Reduce || isRowReduction(Op)) {
    if (!Rows) {
      Rows = true;
      RowShape = Reduce ? C.getOperand(0)->getType().Shape : C.getType().Shape;
    }
  } else if (ReadThrough) {
    for (const Operand &O : C.getOperands())
      if (Reduced.count(O.V))
        Reduced.insert(C.getResult());
  }
  for (unsigned R = 0; R < C.getNumResults(); ++R)
    Values.insert(C.getResult(R));
}

std::string mtsched::whyNotKernel(llvm::ArrayRef<const Node *> Kernel) {
  if (Kernel.empty())
    return "";
  KernelForm Form(*Kernel.front());
  for (const Node *N : Kernel) {
    if (std::string Why = Form.whyNotJoin(*N); !Why.empty())
      return Why;
    if (N != Kernel.front())
      Form.join(*N);
  }
  return "";
}

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

namespace {

class FusionAnalysis {
public:
  FusionAnalysis(const Graph &G, const FusionOptions &Opts) : G(G), Opts(Opts) {
    for (const auto &N : G.getNodes())
      for (const Operand &O : N->getOperands()) {
        auto &Us = Users[O.V];
        if (Us.empty() || Us.back() != N.get())
          Us.push_back(N.get());
      }
    for (const Operand &O : G.getOutputs())
      Outputs.insert(O.V);
  }

  FusionPlan run();

private:
  using KernelSet = llvm::DenseSet<const Node *>;

  /// A buffer groupBuffers may put in a kernel with others
  /// (canShareKernel), unless it is a layout op or a sum/max taken out of
  /// kernels (or a sum/max with --reduction-fusion=false).
  bool isGroupable(const Node *N) const {
    return N && canShareKernel(*N) && !Excluded.count(N) &&
           (Opts.Reductions || !isFusableReduction(*N));
  }
  /// The members of kernel K in program order.
  std::vector<const Node *> membersOf(unsigned K) const {
    std::vector<const Node *> Ms(KernelSets[K].begin(), KernelSets[K].end());
    llvm::sort(Ms, [](const Node *A, const Node *B) {
      return A->getIndex() < B->getIndex();
    });
    return Ms;
  }
  /// Kernel K's form, replayed from its members.
  void rebuildForm(unsigned K) {
    std::vector<const Node *> Ms = membersOf(K);
    Forms[K].emplace(*Ms.front());
    for (const Node *N : llvm::drop_begin(Ms))
      Forms[K]->join(*N);
  }
  /// The operand through which a fusion of Consumer into the kernel would
  /// form a cycle, or null. Only nodes after the kernel's first node can
  /// depend on it, which keeps the search short.
  const Node *cycleThrough(const Node *Consumer, const KernelSet &Kernel,
                           unsigned FirstIndex);
  /// Why U cannot join M's epilogue after Cur; empty if it can.
  std::string whyNotJoin(const MultiTemplateBufferNode &M, const Node *U,
                         const Node *Cur, const KernelSet &Members);
  /// Members of Chain, but the last, whose values are read outside it.
  std::vector<const Node *>
  readOutside(llvm::ArrayRef<const Node *> Chain) const;
  void findEpilogue(const MultiTemplateBufferNode &M, FusionPlan &Plan);
  void groupBuffers(FusionPlan &Plan);
  /// Members of read-through kernels that cannot stay
  /// (membersThatCannotStay). Empty when every kernel is well formed.
  std::vector<const Node *> invalidMembers() const;
  /// Moves a layout op alone in its kernel into the kernel of its readers
  /// when they are all in one (a slice or transpose of a graph input read
  /// by a pointwise group): the group then reads through it.
  void absorbLayoutProducers();

  const Graph &G;
  const FusionOptions &Opts;
  llvm::DenseMap<const Value *, llvm::SmallVector<const Node *, 2>> Users;
  llvm::DenseSet<const Value *> Outputs;
  /// Kernel index of each grouped buffer.
  llvm::DenseMap<const Node *, unsigned> KernelOf;
  std::vector<KernelSet> KernelSets;
  std::vector<unsigned> KernelFirst;
  /// Kernels that are epilogue chains and take no other members.
  llvm::DenseSet<unsigned> Closed;
  /// The form of each kernel of buffers (none for an epilogue chain).
  std::vector<std::optional<KernelForm>> Forms;
  /// Layout ops and sum/max that stay out of kernels (invalidMembers).
  llvm::DenseSet<const Node *> Excluded;
  /// The template whose epilogue each chain member is in.
  llvm::DenseMap<const Node *, const MultiTemplateBufferNode *> EpilogueOwner;
};

} // namespace

const Node *FusionAnalysis::cycleThrough(const Node *Consumer,
                                         const KernelSet &Kernel,
                                         unsigned FirstIndex) {
  for (const Operand &O : Consumer->getOperands()) {
    const Node *Def = O.V->getDef();
    if (!Def || Kernel.count(Def) || Def->getIndex() < FirstIndex)
      continue;
    llvm::SmallVector<const Node *, 16> Work{Def};
    llvm::DenseSet<const Node *> Seen{Def};
    while (!Work.empty()) {
      const Node *N = Work.pop_back_val();
      for (const Operand &In : N->getOperands()) {
        const Node *D = In.V->getDef();
        if (!D || D->getIndex() < FirstIndex)
          continue;
        if (Kernel.count(D))
          return Def;
        if (Seen.insert(D).second)
          Work.push_back(D);
      }
    }
  }
  return nullptr;
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

void FusionAnalysis::groupBuffers(FusionPlan &Plan) {
  for (const auto &Owned : G.getNodes()) {
    const Node *C = Owned.get();
    if (!llvm::isa<BufferNode>(C) || KernelOf.count(C))
      continue;
    bool Joined = false;
    if (isGroupable(C)) {
      for (const Operand &O : C->getOperands()) {
        const Node *P = O.V->getDef();
        if (!isGroupable(P) || !KernelOf.count(P))
          continue;
        unsigned K = KernelOf[P];
        std::string Why;
        if (Closed.count(K))
          Why = "'%" + P->getName() + "' belongs to an epilogue";
        else
          Why = Forms[K]->whyNotJoin(*C);
        if (Why.empty())
          if (const Node *Through =
                  cycleThrough(C, KernelSets[K], KernelFirst[K]))
            Why = "would create a cycle through '%" + Through->getName() + "'";
        if (!Why.empty()) {
          Plan.Rejections.push_back({P, C, std::move(Why)});
          continue;
        }
        KernelSets[K].insert(C);
        KernelOf[C] = K;
        Forms[K]->join(*C);
        Joined = true;
        break;
      }
    }
    if (!Joined) {
      KernelOf[C] = KernelSets.size();
      KernelSets.push_back(KernelSet{C});
      KernelFirst.push_back(C->getIndex());
      Forms.emplace_back(std::in_place, *C);
    }
  }
}

void FusionAnalysis::absorbLayoutProducers() {
  for (unsigned L = 0; L < KernelSets.size(); ++L) {
    if (KernelSets[L].size() != 1)
      continue;
    const Node *N = *KernelSets[L].begin();
    if (!isLayout(N->getOp()) || !isGroupable(N))
      continue;
    auto It = Users.find(N->getResult());
    if (It == Users.end() || Outputs.count(N->getResult()))
      continue;
    auto KIt = KernelOf.find(It->second.front());
    if (KIt == KernelOf.end())
      continue;
    unsigned K = KIt->second;
    // Into a kernel of groupable members only (not a reshape kept as a
    // view, nor a gather kernel of its own).
    if (K == L || Closed.count(K) ||
        !llvm::all_of(KernelSets[K],
                      [&](const Node *X) { return isGroupable(X); }) ||
        !llvm::all_of(It->second, [&](const Node *U) {
          auto UK = KernelOf.find(U);
          return UK != KernelOf.end() && UK->second == K;
        }))
      continue;
    if (cycleThrough(N, KernelSets[K], std::min(KernelFirst[K], N->getIndex())))
      continue;
    // The kernel, read through N, must still fit its form (a reduction's
    // value is not read through a layout op).
    std::vector<const Node *> With = membersOf(K);
    With.insert(llvm::upper_bound(With, N,
                                  [](const Node *A, const Node *B) {
                                    return A->getIndex() < B->getIndex();
                                  }),
                N);
    if (!whyNotKernel(With).empty())
      continue;
    KernelSets[K].insert(N);
    KernelSets[L].clear();
    KernelOf[N] = K;
    KernelFirst[K] = std::min(KernelFirst[K], N->getIndex());
    rebuildForm(K);
  }
  // Drop the emptied kernels.
  for (unsigned K = KernelSets.size(); K-- > 0;)
    if (KernelSets[K].empty()) {
      KernelSets.erase(KernelSets.begin() + K);
      KernelFirst.erase(KernelFirst.begin() + K);
      Forms.erase(Forms.begin() + K);
    }
  KernelOf.clear();
  for (unsigned K = 0; K < KernelSets.size(); ++K)
    for (const Node *N : KernelSets[K])
      KernelOf[N] = K;
}

std::vector<const Node *>
mtsched::membersThatCannotStay(llvm::ArrayRef<const Node *> Kernel,
                               llvm::function_ref<bool(const Node *)> Escapes) {
  if (Kernel.empty())
    return {};
  KernelForm Form(*Kernel.front());
  for (const Node *N : llvm::drop_begin(Kernel))
    Form.join(*N);
  std::vector<const Node *> Escaping, Out;
  if (Form.reducesRows()) {
    // A rows kernel computes its layout values where they are read, whole
    // rows in registers: it writes none of them.
    for (const Node *N : Kernel)
      if (isLayout(N->getOp()) && Escapes(N))
        Out.push_back(N);
    return Out;
  }
  if (!Form.readsThrough())
    return {};
  for (const Node *N : Kernel)
    if (Escapes(N))
      Escaping.push_back(N);
  bool SameShape = llvm::all_of(Escaping, [&](const Node *N) {
    return N->getType().Shape == Escaping.front()->getType().Shape;
  });
  // The group kernel computes in float; an integer member (a full_like or
  // cast to i64 of a sliced float) leaves the layout ops to their own
  // gather kernels.
  bool AllFloat = llvm::all_of(
      Kernel, [](const Node *N) { return isFloatDType(N->getType().Dtype); });
  for (const Node *N : Kernel)
    if ((isLayout(N->getOp()) || isFusableReduction(*N)) &&
        (!SameShape || !AllFloat ||
         (N->getOp() == OpCode::Reshape && llvm::is_contained(Escaping, N))))
      Out.push_back(N);
  llvm::sort(Out, [](const Node *A, const Node *B) {
    return A->getIndex() < B->getIndex();
  });
  return Out;
}

std::vector<const Node *> FusionAnalysis::invalidMembers() const {
  std::vector<const Node *> Out;
  for (unsigned K = 0; K < KernelSets.size(); ++K) {
    const KernelSet &Set = KernelSets[K];
    if (!Forms[K] || !(Forms[K]->readsThrough() || Forms[K]->hasLayout()) ||
        Set.size() == 1)
      continue; // a layout op alone is its own gather kernel, as before
    std::vector<const Node *> Members = membersOf(K);
    auto Escapes = [&](const Node *N) {
      if (Outputs.count(N->getResult()))
        return true;
      auto It = Users.find(N->getResult());
      return It != Users.end() && llvm::any_of(It->second, [&](const Node *U) {
               return !Set.count(U);
             });
    };
    for (const Node *N : membersThatCannotStay(Members, Escapes))
      Out.push_back(N);
  }
  llvm::sort(Out, [](const Node *A, const Node *B) {
    return A->getIndex() < B->getIndex();
  });
  return Out;
}

FusionPlan FusionAnalysis::run() {
  FusionPlan Plan;
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      findEpilogue(*M, Plan);
  // Group, then regroup without the layout ops and sum/max that cannot
  // stay in their kernels; each round takes at least one out, so this ends.
  size_t EpilogueKernels = KernelSets.size();
  std::vector<FusionRejection> Rejections = Plan.Rejections;
  for (;;) {
    groupBuffers(Plan);
    absorbLayoutProducers();
    std::vector<const Node *> Out = invalidMembers();
    // Each round takes out members not taken out before (none is ever
    // grouped again), so the loop ends.
    llvm::erase_if(Out, [&](const Node *N) { return Excluded.count(N); });
    if (Out.empty())
      break;
    Excluded.insert(Out.begin(), Out.end());
    for (unsigned K = EpilogueKernels; K < KernelSets.size(); ++K)
      for (const Node *N : KernelSets[K])
        KernelOf.erase(N);
    KernelSets.resize(EpilogueKernels);
    KernelFirst.resize(EpilogueKernels);
    Forms.resize(EpilogueKernels);
    Plan.Rejections = Rejections;
  }

  // Number kernels in program order of their first node.
  std::vector<unsigned> Order(KernelSets.size());
  for (unsigned I = 0; I < Order.size(); ++I)
    Order[I] = I;
  llvm::sort(Order, [&](unsigned A, unsigned B) {
    return KernelFirst[A] < KernelFirst[B];
  });
  Plan.Kernels.resize(KernelSets.size());
  std::vector<unsigned> NewId(KernelSets.size());
  for (unsigned I = 0; I < Order.size(); ++I)
    NewId[Order[I]] = I;
  for (const auto &N : G.getNodes()) {
    auto It = KernelOf.find(N.get());
    if (It != KernelOf.end())
      Plan.Kernels[NewId[It->second]].push_back(N.get());
  }
  return Plan;
}

FusionPlan mtsched::analyzeFusion(const Graph &G, const FusionOptions &Opts) {
  return FusionAnalysis(G, Opts).run();
}

namespace {

class FusePass : public Pass {
public:
  explicit FusePass(const FusionOptions &Opts) : Opts(Opts) {}
  llvm::StringRef getArgument() const override { return "fuse"; }
  llvm::StringRef getDescription() const override {
    return "Group buffers into fused kernels and find the epilogue of every "
           "multi-template buffer";
  }
  llvm::Error run(Graph &G) override {
    FusionPlan Plan = analyzeFusion(G, Opts);
    for (unsigned K = 0; K < Plan.Kernels.size(); ++K)
      for (const Node *N : Plan.Kernels[K])
        llvm::cast<BufferNode>(const_cast<Node *>(N))->setKernel(K);
    for (const auto &N : G.getNodes())
      if (auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get())) {
        // A decided node keeps the epilogue its decision was made for.
        if (M->isDecided())
          continue;
        M->getEpilogue().clear();
        M->getEpilogueWrites().clear();
        auto It = Plan.Epilogues.find(M);
        if (It == Plan.Epilogues.end())
          continue;
        for (const Node *E : It->second)
          M->getEpilogue().push_back({E->getResult(), E->getLoc()});
        auto W = Plan.Writes.find(M);
        if (W != Plan.Writes.end())
          for (const Node *E : W->second)
            M->getEpilogueWrites().push_back({E->getResult(), E->getLoc()});
      }
    return llvm::Error::success();
  }

private:
  FusionOptions Opts;
};

class TestPrintFusionCandidatesPass : public Pass {
public:
  explicit TestPrintFusionCandidatesPass(const FusionOptions &Opts)
      : Opts(Opts) {}
  llvm::StringRef getArgument() const override {
    return "test-print-fusion-candidates";
  }
  llvm::StringRef getDescription() const override {
    return "Print fused kernels, epilogue candidates and rejected fusions";
  }
  llvm::Error run(Graph &G) override {
    FusionPlan Plan = analyzeFusion(G, Opts);
    llvm::raw_ostream &OS = *Ctx.AnalysisOS;
    OS << "fusion candidates @" << G.getName() << '\n';
    for (unsigned K = 0; K < Plan.Kernels.size(); ++K) {
      OS << "  kernel " << K << ": ";
      llvm::interleaveComma(Plan.Kernels[K], OS,
                            [&](const Node *N) { OS << '%' << N->getName(); });
      OS << '\n';
    }
    for (const auto &E : Plan.Epilogues) {
      OS << "  epilogue of %" << E.first->getName() << ": ";
      llvm::interleaveComma(E.second, OS,
                            [&](const Node *N) { OS << '%' << N->getName(); });
      auto W = Plan.Writes.find(E.first);
      if (W != Plan.Writes.end()) {
        OS << " (also writes ";
        llvm::interleaveComma(
            W->second, OS, [&](const Node *N) { OS << '%' << N->getName(); });
        OS << ')';
      }
      OS << '\n';
    }
    for (const auto &E : Plan.NoEpilogue)
      OS << "  no epilogue for %" << E.first->getName() << ": " << E.second
         << '\n';
    for (const FusionRejection &R : Plan.Rejections)
      OS << "  cannot fuse %" << R.Consumer->getName() << " with %"
         << R.Producer->getName() << ": " << R.Reason << '\n';
    OS.flush();
    return llvm::Error::success();
  }

private:
  FusionOptions Opts;
};

} // namespace

std::unique_ptr<Pass> mtsched::createFusePass(const FusionOptions &Opts) {
  return std::make_unique<FusePass>(Opts);
}

std::unique_ptr<Pass>
mtsched::createTestPrintFusionCandidatesPass(const FusionOptions &Opts) {
  return std::make_unique<TestPrintFusionCandidatesPass>(Opts);
}
