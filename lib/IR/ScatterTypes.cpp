//===- ScatterTypes.cpp - The type rule of scatter ------------------------===//
//
// scatter(%dst, %index, %src) {dim}: the result is %dst with each element of
// %src written where %index says along 'dim'. The index has the source's
// shape and matches the destination in every other dimension, so each
// position across 'dim' (a fibre) is written only from its own fibre of the
// source; that keeps the op deterministic (the last of equal indices wins,
// as in the interpreter) and its kernel one thread per fibre.
//
//===----------------------------------------------------------------------===//
#include "VerifierImpl.h"
#include "mtsched/IR/Scan.h"
#include "mtsched/IR/Scatter.h"

using namespace mtsched;
using detail::Verifier;

bool Verifier::inferScatter(const Node &N, TensorType &Result) {
  const TensorType &Dst = N.getOperand(0)->getType();
  const TensorType &Idx = N.getOperand(1)->getType();
  const TensorType &Src = N.getOperand(2)->getType();
  if (Dst.rank() == 0) {
    error(N.getOperands()[0].Loc,
          "'scatter' needs a destination of rank 1 or more");
    return false;
  }
  int64_t Rank = Dst.rank(), D = Rank - 1;
  if (const Attribute *A = N.getAttrs().get("dim")) {
    if (!A->isInt()) {
      error(N.getLoc(), "attribute 'dim' must be an integer");
      return false;
    }
    D = A->getInt();
    if (D < -Rank || D >= Rank) {
      error(N.getLoc(), "dimension " + Twine(D) +
                            " is out of range for a tensor of rank " +
                            Twine(Rank));
      return false;
    }
    if (D < 0)
      D += Rank;
  }
  if (Idx.Dtype != DType::I32 && Idx.Dtype != DType::I64) {
    error(N.getOperands()[1].Loc, "index " + name(N.getOperand(1)) +
                                      " of 'scatter' must be i32 or i64, got " +
                                      dtypeName(Idx.Dtype));
    return false;
  }
  if (Src.Dtype != Dst.Dtype) {
    error(N.getOperands()[2].Loc,
          "source " + name(N.getOperand(2)) + " has element type " +
              dtypeName(Src.Dtype) + ", expected " + dtypeName(Dst.Dtype) +
              " (the destination's)");
    return false;
  }
  if (Src.Shape != Idx.Shape) {
    error(N.getOperands()[2].Loc, "source " + name(N.getOperand(2)) +
                                      " has shape " + shapeStr(Src.Shape) +
                                      ", expected the shape of the index " +
                                      shapeStr(Idx.Shape));
    return false;
  }
  bool Fits = Idx.rank() == Dst.rank();
  for (int64_t I = 0; Fits && I < Rank; ++I)
    Fits = I == D || Idx.Shape[I] == Dst.Shape[I];
  if (!Fits) {
    error(N.getOperands()[1].Loc,
          "index " + name(N.getOperand(1)) + " of 'scatter' has shape " +
              shapeStr(Idx.Shape) + ", expected the shape of " +
              name(N.getOperand(0)) + " " + shapeStr(Dst.Shape) +
              " but along dimension " + Twine(D));
    return false;
  }
  if (const Attribute *R = N.getAttrs().get("reduce"))
    if (!R->isString() || R->getString() != "add") {
      error(N.getLoc(), "attribute 'reduce' of 'scatter' must be \"add\" "
                        "(absent: the source replaces)");
      return false;
    }
  Result = Dst;
  return true;
}

std::optional<ScatterShape> mtsched::scatterShapeOf(const Node &N) {
  if (N.getOp() != OpCode::Scatter || N.getNumOperands() != 3)
    return std::nullopt;
  const TensorType &Dst = N.getOperand(0)->getType();
  const TensorType &Idx = N.getOperand(1)->getType();
  std::optional<ScanShape> Split = splitAtDim(Dst, N);
  if (!Split || Idx.rank() != Dst.rank())
    return std::nullopt;
  for (int64_t I = 0; I < int64_t(Dst.rank()); ++I)
    if (I != Split->Dim && Idx.Shape[I] != Dst.Shape[I])
      return std::nullopt;
  ScatterShape S;
  S.Outer = Split->Outer;
  S.Inner = Split->Inner;
  S.DstLen = Split->Len;
  S.IdxLen = Idx.Shape[Split->Dim];
  const Attribute *R = N.getAttrs().get("reduce");
  S.Add = R && R->isString() && R->getString() == "add";
  return S;
}
