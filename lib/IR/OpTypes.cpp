//===- OpTypes.cpp - The type rule of each op -----------------------------===//
//
// The verifier's inferType: checks an op's operands and attributes by the
// type rule its op-table entry names (OpTypeRule) and computes the result
// type. The pointwise and reduction rules are here; the layout rules are in
// LayoutTypes.cpp, the GEMM and attention rules in OpTypesMatMul.cpp, the
// collective rules in OpTypesCollective.cpp, and an op unit's rule in its
// own lib/OpUnits/<Code>.cpp.
//
//===----------------------------------------------------------------------===//
#include "VerifierImpl.h"
#include "mtsched/IR/OpUnit.h"
#include <cmath>

using namespace mtsched;
using detail::Verifier;

/// Numpy-style broadcasting of two shapes; false if incompatible.
static bool broadcastShapes(llvm::ArrayRef<int64_t> A,
                            llvm::ArrayRef<int64_t> B,
                            llvm::SmallVectorImpl<int64_t> &Out) {
  size_t R = std::max(A.size(), B.size());
  Out.assign(R, 1);
  for (size_t I = 0; I < R; ++I) {
    int64_t DA = I < R - A.size() ? 1 : A[I - (R - A.size())];
    int64_t DB = I < R - B.size() ? 1 : B[I - (R - B.size())];
    if (DA != DB && DA != 1 && DB != 1)
      return false;
    Out[I] = std::max(DA, DB);
  }
  return true;
}

bool Verifier::inferLayerNorm(const Node &N) {
  unsigned Count = N.getNumOperands();
  if (Count < 1 || Count > 3) {
    error(N.getLoc(), "'layernorm' expects 1 to 3 operands (the input, then "
                      "an optional weight and bias), got " +
                          Twine(Count));
    return false;
  }
  const TensorType &In = N.getOperand(0)->getType();
  for (unsigned I = 1; I < Count; ++I) {
    const TensorType &W = N.getOperand(I)->getType();
    if (W.Dtype != In.Dtype) {
      error(N.getOperands()[I].Loc,
            "operand " + name(N.getOperand(I)) + " has element type " +
                dtypeName(W.Dtype) + ", expected " + dtypeName(In.Dtype));
      return false;
    }
    if (W.rank() != 1 || W.Shape[0] != In.innerDim()) {
      error(N.getOperands()[I].Loc,
            Twine("layernorm ") + (I == 1 ? "weight " : "bias ") +
                name(N.getOperand(I)) + " has shape " + shapeStr(W.Shape) +
                ", expected [" + Twine(In.innerDim()) +
                "] (the last dimension of " + name(N.getOperand(0)) + ")");
      return false;
    }
  }
  if (const Attribute *Eps = N.getAttrs().get("eps"))
    if (!(Eps->isFloat() || Eps->isInt()) || Eps->getNumber() <= 0) {
      error(N.getLoc(), "attribute 'eps' must be a positive number");
      return false;
    }
  return true;
}

/// The operand count N's op expects, with attribute 'scalar' standing
/// for the last operand of a pointwise op (a number, finite unless the
/// result is a float or bool).
bool Verifier::checkOperandCount(const Node &N, const OpInfo &Info) {
  // A pointwise op may take its last operand as attribute 'scalar'.
  const Attribute *Scalar = N.getAttrs().get("scalar");
  if (Scalar) {
    if (Info.Category != OpCategory::Pointwise || Info.NumOperands < 2) {
      error(N.getLoc(), "only pointwise ops of two or more operands take "
                        "attribute 'scalar', not '" +
                            Info.Name + "'");
      return false;
    }
    if (!(Scalar->isFloat() || Scalar->isInt())) {
      error(N.getLoc(), "attribute 'scalar' must be a number");
      return false;
    }
    // inf, -inf and nan are values of float tensors (masked_fill(-inf)
    // builds attention masks); an integer result cannot hold them.
    DType T = N.getType().Dtype;
    if (!std::isfinite(Scalar->getNumber()) && !isFloatDType(T) &&
        T != DType::Bool) {
      error(N.getLoc(), "attribute 'scalar' is not finite, which a result of "
                        "element type " +
                            dtypeName(T) + " cannot hold");
      return false;
    }
    if (int(N.getNumOperands()) != Info.NumOperands - 1) {
      error(N.getLoc(), "'" + Info.Name + "' with attribute 'scalar' expects " +
                            Twine(Info.NumOperands - 1) + " operand" +
                            (Info.NumOperands == 2 ? "" : "s") +
                            " (the scalar is the last), got " +
                            Twine(N.getNumOperands()));
      return false;
    }
  } else if (Info.Types == OpTypeRule::Fill) {
    error(N.getLoc(), "'" + Info.Name +
                          "' needs attribute 'scalar', the value of every "
                          "element");
    return false;
  } else if (Info.NumOperands >= 0 &&
             int(N.getNumOperands()) != Info.NumOperands) {
    error(N.getLoc(), "'" + Info.Name + "' expects " + Twine(Info.NumOperands) +
                          " operand" + (Info.NumOperands == 1 ? "" : "s") +
                          ", got " + Twine(N.getNumOperands()));
    return false;
  }
  return true;
}

/// A row reduction (softmax, layernorm, rmsnorm, ...): over the last
/// dimension of a float operand, the result of its shape.
bool Verifier::inferRowReduction(const Node &N, const OpInfo &Info,
                                 TensorType &Result) {
  auto Operand = [&](unsigned I) -> const TensorType & {
    return N.getOperand(I)->getType();
  };
  const TensorType &In = Operand(0);
  if (!isFloatDType(In.Dtype)) {
    error(N.getLoc(), "'" + Info.Name +
                          "' needs a floating-point operand, got " +
                          dtypeName(In.Dtype));
    return false;
  }
  if (N.getAttrs().contains("dim")) {
    error(N.getLoc(), "'" + Info.Name +
                          "' always normalises over the last dimension; "
                          "remove attribute 'dim'");
    return false;
  }
  if (N.getOp() == OpCode::LayerNorm && !inferLayerNorm(N))
    return false;
  if (N.getOp() == OpCode::RmsNorm) {
    if (Operand(1).Dtype != In.Dtype) {
      error(N.getOperands()[1].Loc, "operand " + name(N.getOperand(1)) +
                                        " has element type " +
                                        dtypeName(Operand(1).Dtype) +
                                        ", expected " + dtypeName(In.Dtype));
      return false;
    }
    const TensorType &W = Operand(1);
    if (W.rank() != 1 || W.Shape[0] != In.innerDim()) {
      error(N.getOperands()[1].Loc,
            "rmsnorm weight " + name(N.getOperand(1)) + " has shape " +
                shapeStr(W.Shape) + ", expected [" + Twine(In.innerDim()) +
                "] (the last dimension of " + name(N.getOperand(0)) + ")");
      return false;
    }
    if (const Attribute *Eps = N.getAttrs().get("eps"))
      if (!(Eps->isFloat() || Eps->isInt()) || Eps->getNumber() <= 0) {
        error(N.getLoc(), "attribute 'eps' must be a positive number");
        return false;
      }
  }
  Result = In;
  return true;
}

bool Verifier::inferType(const Graph &G, const Node &N,
                         llvm::MutableArrayRef<TensorType> Results) {
  TensorType &Result = Results.front();
  const OpInfo &Info = getOpInfo(N.getOp());
  if (!checkOperandCount(N, Info))
    return false;
  auto Operand = [&](unsigned I) -> const TensorType & {
    return N.getOperand(I)->getType();
  };
  auto SameDType = [&]() {
    for (unsigned I = 1; I < N.getNumOperands(); ++I)
      if (Operand(I).Dtype != Operand(0).Dtype) {
        error(N.getOperands()[I].Loc,
              "operand " + name(N.getOperand(I)) + " has element type " +
                  dtypeName(Operand(I).Dtype) + ", expected " +
                  dtypeName(Operand(0).Dtype));
        return false;
      }
    return true;
  };
  auto Dim = [&](int64_t Rank, int64_t Default) -> std::optional<int64_t> {
    int64_t D = Default;
    if (const Attribute *A = N.getAttrs().get("dim")) {
      if (!A->isInt()) {
        error(N.getLoc(), "attribute 'dim' must be an integer");
        return std::nullopt;
      }
      D = A->getInt();
    }
    if (D < -Rank || D >= Rank) {
      error(N.getLoc(), "dimension " + Twine(D) +
                            " is out of range for a tensor of rank " +
                            Twine(Rank));
      return std::nullopt;
    }
    return D < 0 ? D + Rank : D;
  };

  if (Info.Category != OpCategory::Custom && N.getNumOperands() == 0) {
    error(N.getLoc(), "'" + Info.Name + "' needs at least one operand");
    return false;
  }
  switch (Info.Category) {
  case OpCategory::Layout:
    return inferLayout(N, Result);
  case OpCategory::Unit: {
    // The rule is the op unit's own (lib/OpUnits/<Code>.cpp).
    const OpUnitInfo *Unit = lookupOpUnitInfo(N.getOp());
    if (!Unit || !Unit->InferType) {
      error(N.getLoc(), "'" + Info.Name +
                            "' has no registered type rule (the tool must "
                            "call registerAllOpUnits() first)");
      return false;
    }
    return Unit->InferType(
        N, Results, [&](SMLoc Loc, const Twine &Msg) { error(Loc, Msg); });
  }
  case OpCategory::Custom:
    // Custom ops declare their result type; nothing to infer.
    Result = N.getType();
    return true;
  case OpCategory::Collective:
    return inferCollective(G, N, Result);
  case OpCategory::MatMul: {
    // Attention checks its own operand types: its mask may be f32.
    if (Info.Types == OpTypeRule::Attention)
      return inferAttention(N, Result);
    if (Info.Types != OpTypeRule::MatMul && !SameDType())
      return false;
    if (Info.Types == OpTypeRule::SwiGlu)
      return inferSwiGlu(G, N, Result);
    return inferMatMul(N) && inferMatMulShape(N, Result);
  }
  case OpCategory::Pointwise: {
    if (Info.Types == OpTypeRule::Cast || Info.Types == OpTypeRule::Fill) {
      Result = TensorType(N.getType().Dtype, Operand(0).Shape);
      return true;
    }
    // The operands that give the result's element type: all of them but a
    // select's condition, which may be of any type.
    unsigned First = Info.Types == OpTypeRule::Select ? 1 : 0;
    // Logical ops read any element type as truth values.
    bool AnyTypes = Info.Types == OpTypeRule::Logical;
    for (unsigned I = First + 1; I < N.getNumOperands(); ++I)
      if (!AnyTypes && Operand(I).Dtype != Operand(First).Dtype) {
        error(N.getOperands()[I].Loc,
              "operand " + name(N.getOperand(I)) + " has element type " +
                  dtypeName(Operand(I).Dtype) + ", expected " +
                  dtypeName(Operand(First).Dtype));
        return false;
      }
    Result = TensorType(Operand(First).Dtype, Operand(0).Shape);
    // Each further operand broadcasts with the shape so far, so an error
    // names the operand that does not fit.
    for (unsigned I = 1; I < N.getNumOperands(); ++I) {
      llvm::SmallVector<int64_t, 4> Shape;
      if (!broadcastShapes(Result.Shape, Operand(I).Shape, Shape)) {
        error(N.getOperands()[I].Loc,
              "operands of '" + Info.Name +
                  "' cannot be broadcast together: " + shapeStr(Result.Shape) +
                  " and " + shapeStr(Operand(I).Shape));
        return false;
      }
      Result.Shape.assign(Shape.begin(), Shape.end());
    }
    if (Info.Types == OpTypeRule::Compare || Info.Types == OpTypeRule::Logical)
      Result.Dtype = DType::Bool;
    return true;
  }
  case OpCategory::Reduction: {
    const TensorType &In = Operand(0);
    if (In.rank() == 0) {
      error(N.getOperands()[0].Loc,
            "'" + Info.Name + "' needs an operand of rank 1 or more");
      return false;
    }
    if (Info.Types == OpTypeRule::Reduce) {
      std::optional<int64_t> D = Dim(In.rank(), -1);
      if (!D)
        return false;
      Result = In;
      const Attribute *Keep = N.getAttrs().get("keepdim");
      if (Keep && !Keep->isBool()) {
        error(N.getLoc(), "attribute 'keepdim' must be true or false");
        return false;
      }
      if (Keep && Keep->getBool())
        Result.Shape[*D] = 1;
      else
        Result.Shape.erase(Result.Shape.begin() + *D);
      return true;
    }
    return inferRowReduction(N, Info, Result);
  }
  }
  return false;
}
