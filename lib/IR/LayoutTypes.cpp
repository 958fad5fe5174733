//===- LayoutTypes.cpp - Type rules of the layout ops ---------------------===//
//
// reshape and expand take their shape from the declared result type; the
// others infer it from the operands and attributes (IR/Layout.h).
//
//===----------------------------------------------------------------------===//
#include "VerifierImpl.h"
#include "llvm/Support/MathExtras.h"

using namespace mtsched;
using detail::Verifier;

bool Verifier::inferLayout(const Node &N, TensorType &Result) {
  switch (N.getOp()) {
  case OpCode::Reshape:
  case OpCode::Expand:
    return inferReshapeOrExpand(N, Result);
  case OpCode::Transpose:
    return inferTranspose(N, Result);
  case OpCode::Slice:
    return inferSlice(N, Result);
  case OpCode::IndexSelect:
  case OpCode::Gather:
    return inferIndexSelectOrGather(N, Result);
  case OpCode::Concat:
    return inferConcat(N, Result);
  default:
    break;
  }
  error(N.getLoc(), "'" + N.getOpName() + "' is not a layout op");
  return false;
}

std::optional<int64_t> Verifier::layoutIntAttr(const Node &N, const char *Key,
                                               int64_t Default, bool Required) {
  const Attribute *A = N.getAttrs().get(Key);
  if (!A) {
    if (Required) {
      error(N.getLoc(),
            "'" + N.getOpName() + "' needs attribute '" + Key + "'");
      return std::nullopt;
    }
    return Default;
  }
  if (!A->isInt()) {
    error(N.getLoc(), "attribute '" + Twine(Key) + "' of '" + N.getOpName() +
                          "' must be an integer");
    return std::nullopt;
  }
  return A->getInt();
}

std::optional<int64_t> Verifier::layoutDimAttr(const Node &N, int64_t Rank) {
  std::optional<int64_t> D = layoutIntAttr(N, "dim", 0, /*Required=*/true);
  if (!D)
    return std::nullopt;
  if (*D < -Rank || *D >= Rank) {
    error(N.getLoc(), "dimension " + Twine(*D) + " of '" + N.getOpName() +
                          "' is out of range for a tensor of rank " +
                          Twine(Rank));
    return std::nullopt;
  }
  return *D < 0 ? *D + Rank : *D;
}

bool Verifier::inferReshapeOrExpand(const Node &N, TensorType &Result) {
  const TensorType &In = N.getOperand(0)->getType();
  const TensorType &Declared = N.getType();
  if (Declared.Dtype != In.Dtype) {
    error(N.getLoc(), "'" + N.getOpName() + "' keeps the element type " +
                          dtypeName(In.Dtype) + ", got " +
                          dtypeName(Declared.Dtype));
    return false;
  }
  if (N.getOp() == OpCode::Reshape) {
    if (Declared.numElements() != In.numElements()) {
      error(N.getLoc(), "'reshape' of " + name(N.getOperand(0)) + " " +
                            In.str() + " (" + Twine(In.numElements()) +
                            " elements) to " + Declared.str() + " (" +
                            Twine(Declared.numElements()) +
                            " elements) changes the element count");
      return false;
    }
    Result = Declared;
    return true;
  }
  bool Ok = In.rank() <= Declared.rank();
  for (unsigned I = 0; Ok && I < In.rank(); ++I) {
    int64_t D = In.Shape[In.rank() - 1 - I];
    Ok = D == 1 || D == Declared.Shape[Declared.rank() - 1 - I];
  }
  if (!Ok) {
    error(N.getLoc(), "'expand' cannot broadcast " + name(N.getOperand(0)) +
                          " " + In.str() + " to " + Declared.str() +
                          " (only dimensions of size 1 and leading "
                          "dimensions are broadcast)");
    return false;
  }
  Result = Declared;
  return true;
}

bool Verifier::inferTranspose(const Node &N, TensorType &Result) {
  const TensorType &In = N.getOperand(0)->getType();
  const Attribute *P = N.getAttrs().get("perm");
  if (!P || !P->isList()) {
    error(N.getLoc(), "'transpose' needs attribute 'perm', a list of the "
                      "operand's dimensions");
    return false;
  }
  const auto &L = P->getList();
  if (L.size() != In.rank()) {
    error(N.getLoc(), "'perm' of 'transpose' has " + Twine(L.size()) +
                          " entries, expected " + Twine(In.rank()) +
                          " (the rank of " + name(N.getOperand(0)) + ")");
    return false;
  }
  std::vector<bool> Seen(In.rank());
  Result = In;
  for (unsigned D = 0; D < L.size(); ++D) {
    if (!L[D].isInt() || L[D].getInt() < 0 ||
        L[D].getInt() >= int64_t(In.rank()) || Seen[L[D].getInt()]) {
      error(N.getLoc(), "'perm' of 'transpose' must hold each of 0.." +
                            Twine(int64_t(In.rank()) - 1) + " once");
      return false;
    }
    Seen[L[D].getInt()] = true;
    Result.Shape[D] = In.Shape[L[D].getInt()];
  }
  return true;
}

bool Verifier::inferSlice(const Node &N, TensorType &Result) {
  const TensorType &In = N.getOperand(0)->getType();
  if (In.rank() == 0) {
    error(N.getLoc(), "'slice' needs an operand of rank 1 or more");
    return false;
  }
  std::optional<int64_t> Dim = layoutDimAttr(N, In.rank());
  if (!Dim)
    return false;
  int64_t Size = In.Shape[*Dim];
  std::optional<int64_t> Start = layoutIntAttr(N, "start", 0, false);
  std::optional<int64_t> End = layoutIntAttr(N, "end", Size, false);
  std::optional<int64_t> Step = layoutIntAttr(N, "step", 1, false);
  if (!Start || !End || !Step)
    return false;
  int64_t S = *Start < 0 ? *Start + Size : *Start;
  int64_t E = *End < 0 ? *End + Size : *End;
  if (*Step <= 0) {
    error(N.getLoc(),
          "'step' of 'slice' must be positive, got " + Twine(*Step));
    return false;
  }
  if (S < 0 || S >= Size || E <= S || E > Size) {
    error(N.getLoc(), "'slice' range [" + Twine(*Start) + ", " + Twine(*End) +
                          ") is empty or outside dimension " + Twine(*Dim) +
                          " of size " + Twine(Size));
    return false;
  }
  Result = In;
  // (E - S - 1) / Step + 1: E - S + Step - 1 could overflow.
  Result.Shape[*Dim] = (E - S - 1) / *Step + 1;
  return true;
}

bool Verifier::inferIndexSelectOrGather(const Node &N, TensorType &Result) {
  const TensorType &In = N.getOperand(0)->getType();
  if (N.getOp() == OpCode::IndexSelect) {
    if (In.rank() == 0) {
      error(N.getLoc(), "'index_select' needs an operand of rank 1 or more");
      return false;
    }
    std::optional<int64_t> Dim = layoutDimAttr(N, In.rank());
    if (!Dim)
      return false;
    const TensorType &Idx = N.getOperand(1)->getType();
    if (Idx.rank() != 1 ||
        (Idx.Dtype != DType::I32 && Idx.Dtype != DType::I64)) {
      error(N.getOperands()[1].Loc,
            "the indices " + name(N.getOperand(1)) +
                " of 'index_select' "
                "must be a rank-1 i32 or i64 tensor, got " +
                Idx.str());
      return false;
    }
    Result = In;
    Result.Shape[*Dim] = Idx.Shape[0];
    return true;
  }
  if (In.rank() == 0) {
    error(N.getLoc(), "'gather' needs an operand of rank 1 or more");
    return false;
  }
  std::optional<int64_t> Dim = layoutDimAttr(N, In.rank());
  if (!Dim)
    return false;
  const TensorType &Idx = N.getOperand(1)->getType();
  if (Idx.rank() != In.rank() ||
      (Idx.Dtype != DType::I32 && Idx.Dtype != DType::I64)) {
    error(N.getOperands()[1].Loc,
          "the indices " + name(N.getOperand(1)) +
              " of 'gather' must be an i32 or i64 tensor of rank " +
              Twine(In.rank()) + ", got " + Idx.str());
    return false;
  }
  // As torch.gather: the indices may be smaller than the operand, except
  // along 'dim', where they pick positions.
  for (unsigned D = 0; D < In.rank(); ++D)
    if (int64_t(D) != *Dim && Idx.Shape[D] > In.Shape[D]) {
      error(N.getOperands()[1].Loc,
            "the indices " + name(N.getOperand(1)) + " " + Idx.str() +
                " of 'gather' are larger than " + name(N.getOperand(0)) + " " +
                In.str() + " in dimension " + Twine(D));
      return false;
    }
  Result = TensorType(In.Dtype, Idx.Shape);
  return true;
}

bool Verifier::inferConcat(const Node &N, TensorType &Result) {
  const TensorType &In = N.getOperand(0)->getType();
  if (In.rank() == 0) {
    error(N.getLoc(), "'concat' needs operands of rank 1 or more");
    return false;
  }
  std::optional<int64_t> Dim = layoutDimAttr(N, In.rank());
  if (!Dim)
    return false;
  Result = In;
  for (unsigned I = 1; I < N.getNumOperands(); ++I) {
    const TensorType &T = N.getOperand(I)->getType();
    bool Fits = T.Dtype == In.Dtype && T.rank() == In.rank();
    for (unsigned D = 0; Fits && D < T.rank(); ++D)
      Fits = D == *Dim || T.Shape[D] == In.Shape[D];
    if (!Fits) {
      error(N.getOperands()[I].Loc,
            "operand " + name(N.getOperand(I)) + " " + T.str() +
                " of 'concat' does not fit " + name(N.getOperand(0)) + " " +
                In.str() + ": element type and every dimension but " +
                Twine(*Dim) + " must match");
      return false;
    }
    // Each operand's size fits in a byte count the parser accepted; their
    // sum must too.
    int64_t Sum, Bytes = dtypeBytes(Result.Dtype);
    bool Overflow = llvm::AddOverflow(Result.Shape[*Dim], T.Shape[*Dim], Sum);
    for (unsigned D = 0; D < Result.rank() && !Overflow; ++D)
      Overflow =
          llvm::MulOverflow(Bytes, D == *Dim ? Sum : Result.Shape[D], Bytes);
    if (Overflow) {
      error(N.getLoc(), "'concat' result is too large (more than 2^63-1 "
                        "bytes)");
      return false;
    }
    Result.Shape[*Dim] = Sum;
  }
  return true;
}
