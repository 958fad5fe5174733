//===- KernelForm.cpp - Which buffers share a kernel ----------------------===//
//
// The kernel-form rules of Schedule/Fusion.h: which ops may share a kernel
// (canShareKernel), the forms a kernel of them takes (KernelForm:
// same-shape, rows or read-through) and which members a read-through kernel
// cannot keep (membersThatCannotStay). FusionAnalysis groups by them, and
// verify-schedule checks a decided graph against the same rules.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Printer.h"
#include "mtsched/Schedule/Fusion.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

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
