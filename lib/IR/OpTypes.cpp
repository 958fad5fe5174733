//===- OpTypes.cpp - The type rule of each op -----------------------------===//
//
// The verifier's inferType: checks an op's operands and attributes by the
// type rule its op-table entry names (OpTypeRule) and computes the result
// type.
//
//===----------------------------------------------------------------------===//
#include "VerifierImpl.h"
#include "mtsched/IR/OpUnit.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace mtsched;
using detail::Verifier;

bool Verifier::inferAttention(const Node &N, TensorType &Result) {
  unsigned Count = N.getNumOperands();
  if (Count != 3 && Count != 4) {
    error(N.getLoc(), "'attention' expects 3 operands (q, k, v) or 4 (q, k, "
                      "v and an additive mask), got " +
                          Twine(Count));
    return false;
  }
  const TensorType &Q = N.getOperand(0)->getType();
  const TensorType &K = N.getOperand(1)->getType();
  const TensorType &V = N.getOperand(2)->getType();
  for (unsigned I = 1; I < 3; ++I)
    if (N.getOperand(I)->getType().Dtype != Q.Dtype) {
      error(N.getOperands()[I].Loc,
            "operand " + name(N.getOperand(I)) + " has element type " +
                dtypeName(N.getOperand(I)->getType().Dtype) + ", expected " +
                dtypeName(Q.Dtype));
      return false;
    }
  if (Q.Dtype != DType::BF16 && Q.Dtype != DType::F16 &&
      Q.Dtype != DType::F32) {
    error(N.getLoc(), "'attention' needs bf16, f16 or f32 operands, got " +
                          dtypeName(Q.Dtype));
    return false;
  }
  static const char *const Layout[] = {"[B, Hq, Sq, D]", "[B, Hkv, Skv, D]",
                                       "[B, Hkv, Skv, D]"};
  for (unsigned I = 0; I < 3; ++I)
    if (N.getOperand(I)->getType().rank() != 4) {
      error(N.getOperands()[I].Loc,
            "operand " + name(N.getOperand(I)) + " of 'attention' must be " +
                Layout[I] + ", got " + N.getOperand(I)->getType().str());
      return false;
    }
  if (V.Shape != K.Shape) {
    error(N.getOperands()[2].Loc,
          "values " + name(N.getOperand(2)) + " of 'attention' have shape " +
              shapeStr(V.Shape) + ", expected the shape of the keys " +
              shapeStr(K.Shape));
    return false;
  }
  if (K.Shape[0] != Q.Shape[0]) {
    error(N.getOperands()[1].Loc,
          "'attention' batch sizes differ: " + name(N.getOperand(0)) + " has " +
              Twine(Q.Shape[0]) + " and " + name(N.getOperand(1)) + " has " +
              Twine(K.Shape[0]));
    return false;
  }
  if (K.Shape[3] != Q.Shape[3]) {
    error(N.getOperands()[1].Loc,
          "'attention' head dimensions differ: " + name(N.getOperand(0)) +
              " has " + Twine(Q.Shape[3]) + " and " + name(N.getOperand(1)) +
              " has " + Twine(K.Shape[3]));
    return false;
  }
  if (K.Shape[1] <= 0 || Q.Shape[1] % K.Shape[1]) {
    error(N.getOperands()[1].Loc,
          "'attention' needs the query heads (" + Twine(Q.Shape[1]) +
              ") to be a multiple of the kv heads (" + Twine(K.Shape[1]) + ")");
    return false;
  }
  bool Causal = false;
  if (const Attribute *C = N.getAttrs().get("causal")) {
    if (!C->isBool()) {
      error(N.getLoc(), "attribute 'causal' of 'attention' must be true or "
                        "false");
      return false;
    }
    Causal = C->getBool();
  }
  if (const Attribute *S = N.getAttrs().get("scale"))
    if ((!S->isInt() && !S->isFloat()) || !std::isfinite(S->getNumber()) ||
        S->getNumber() <= 0) {
      error(N.getLoc(), "attribute 'scale' of 'attention' must be a positive "
                        "finite number");
      return false;
    }
  // The causal mask aligns queries to the end of the keys; a query before
  // the first key would see none.
  if (Causal && Q.Shape[2] > K.Shape[2]) {
    error(N.getLoc(), "causal 'attention' needs at most as many queries as "
                      "keys, got " +
                          Twine(Q.Shape[2]) + " queries and " +
                          Twine(K.Shape[2]) + " keys");
    return false;
  }
  if (Count == 4) {
    // The additive mask broadcasts over batches, query heads and queries
    // (a padding mask is [B, 1, 1, Skv]); the keys are never broadcast, so
    // a kernel reads a mask row as it reads a key tile. f32 keeps the masks
    // of models that run softmax in fp32 exact beside 16-bit q, k and v.
    const TensorType &M = N.getOperand(3)->getType();
    if (M.Dtype != Q.Dtype && M.Dtype != DType::F32) {
      error(N.getOperands()[3].Loc,
            "mask " + name(N.getOperand(3)) + " of 'attention' must be " +
                dtypeName(Q.Dtype) + " (the type of q) or f32, got " +
                dtypeName(M.Dtype));
      return false;
    }
    int64_t Full[] = {Q.Shape[0], Q.Shape[1], Q.Shape[2]};
    bool Fits = M.rank() == 4 && M.Shape[3] == K.Shape[2];
    for (unsigned I = 0; Fits && I < 3; ++I)
      Fits = M.Shape[I] == 1 || M.Shape[I] == Full[I];
    if (!Fits) {
      error(N.getOperands()[3].Loc,
            "mask " + name(N.getOperand(3)) +
                " of 'attention' must be [B or 1, Hq or 1, Sq or 1, Skv] = [" +
                Twine(Full[0]) + " or 1, " + Twine(Full[1]) + " or 1, " +
                Twine(Full[2]) + " or 1, " + Twine(K.Shape[2]) + "], got " +
                M.str());
      return false;
    }
  }
  Result = Q;
  return true;
}

bool Verifier::inferMatMul(const Node &N) {
  auto Operand = [&](unsigned I) -> const TensorType & {
    return N.getOperand(I)->getType();
  };
  unsigned Count = N.getNumOperands();
  if (Count != 2 && Count != 4) {
    error(N.getLoc(), "'matmul' expects 2 operands, or 4 for fp8 operands "
                      "with their per-tensor scales, got " +
                          Twine(Count));
    return false;
  }
  DType A = Operand(0).Dtype, B = Operand(1).Dtype;
  if (!isFloatDType(A)) {
    error(N.getLoc(),
          "'matmul' needs floating-point operands, got " + dtypeName(A));
    return false;
  }
  if (isFp8DType(A) || isFp8DType(B)) {
    for (unsigned I = 0; I < 2; ++I)
      if (!isFp8DType(Operand(I).Dtype)) {
        error(N.getOperands()[I].Loc,
              "operand " + name(N.getOperand(I)) + " has element type " +
                  dtypeName(Operand(I).Dtype) +
                  "; an fp8 'matmul' needs both operands in f8e4m3 or "
                  "f8e5m2");
        return false;
      }
    if (Count != 4) {
      error(N.getLoc(), "an fp8 'matmul' needs the scales of both operands: "
                        "matmul(%a, %b, %scale_a, %scale_b), each f32[] or "
                        "f32[1], or f32[M,1] and f32[1,N] (rowwise)");
      return false;
    }
    // One scale per tensor, or (torch._scaled_mm's rowwise scaling, 2-D
    // operands) one per row of A, f32[M,1], and one per column of B,
    // f32[1,N].
    for (unsigned I = 2; I < 4; ++I) {
      const TensorType &S = Operand(I), &X = Operand(I - 2);
      bool PerTensor = S.numElements() == 1 && S.rank() <= 1;
      bool Rowwise = S.rank() == 2 && X.rank() == 2 &&
                     Operand(1 - (I - 2)).rank() == 2 &&
                     (I == 2 ? S.Shape[0] == X.Shape[0] && S.Shape[1] == 1
                             : S.Shape[0] == 1 && S.Shape[1] == X.Shape[1]);
      if (S.Dtype != DType::F32 || (!PerTensor && !Rowwise)) {
        error(
            N.getOperands()[I].Loc,
            "scale " + name(N.getOperand(I)) +
                " of 'matmul' must be f32[] or f32[1] (one scale per "
                "tensor) or, with 2-D operands, " +
                (I == 2
                     ? "f32[" + Twine(X.Shape.empty() ? 0 : X.Shape[0]) +
                           ",1] (one per row of " + name(N.getOperand(0)) + ")"
                     : "f32[1," + Twine(X.Shape.empty() ? 0 : X.Shape.back()) +
                           "] (one per column of " + name(N.getOperand(1)) +
                           ")") +
                ", got " + S.str());
        return false;
      }
    }
    DType Out = N.getType().Dtype;
    if (Out != DType::BF16 && Out != DType::F16 && Out != DType::F32) {
      error(N.getLoc(),
            "an fp8 'matmul' produces bf16, f16 or f32, got " + dtypeName(Out));
      return false;
    }
    return true;
  }
  if (Count != 2) {
    error(N.getOperands()[2].Loc,
          "only an fp8 'matmul' takes scales; operands " +
              name(N.getOperand(0)) + " and " + name(N.getOperand(1)) +
              " are " + dtypeName(A) + " and " + dtypeName(B));
    return false;
  }
  if (B != A) {
    error(N.getOperands()[1].Loc, "operand " + name(N.getOperand(1)) +
                                      " has element type " + dtypeName(B) +
                                      ", expected " + dtypeName(A));
    return false;
  }
  return true;
}

bool Verifier::inferSwiGlu(const Graph &G, const Node &N, TensorType &Result) {
  const TensorType &A = N.getOperand(0)->getType();
  const TensorType &Wg = N.getOperand(1)->getType();
  const TensorType &Wu = N.getOperand(2)->getType();
  if (!isFloatDType(A.Dtype) || isFp8DType(A.Dtype)) {
    error(N.getLoc(), "'swiglu' needs bf16, f16 or f32 operands, got " +
                          dtypeName(A.Dtype));
    return false;
  }
  if (A.rank() < 2) {
    error(N.getOperands()[0].Loc, "operand " + name(N.getOperand(0)) +
                                      " of 'swiglu' must have rank 2 or more, "
                                      "got " +
                                      A.str());
    return false;
  }
  for (unsigned I = 1; I < 3; ++I) {
    const TensorType &W = N.getOperand(I)->getType();
    if (W.rank() != 2 || W.Shape[0] != A.innerDim()) {
      error(N.getOperands()[I].Loc,
            "weight " + name(N.getOperand(I)) + " of 'swiglu' has shape " +
                shapeStr(W.Shape) + ", expected [" + Twine(A.innerDim()) +
                ", N] (K = the last dimension of " + name(N.getOperand(0)) +
                ")");
      return false;
    }
  }
  if (Wg.Shape != Wu.Shape) {
    error(N.getOperands()[2].Loc,
          "the gate and up weights of 'swiglu' differ in shape: " +
              shapeStr(Wg.Shape) + " and " + shapeStr(Wu.Shape));
    return false;
  }
  Result = A;
  Result.Shape.back() = Wg.Shape[1];
  return true;
}

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

/// all_to_all(%x, %send_counts, %recv_counts): rows of %x in destination
/// order, send_counts[j] of them to rank j of the group; the result holds
/// recv_counts[j] rows from each rank j in rank order, then zeros up to its
/// declared row count (the capacity), as torch's all_to_all_single with
/// split sizes does into a buffer of that size. The counts are values, so a
/// router can compute them; the receive counts are usually an even
/// all_to_all of the send counts.
bool Verifier::inferRaggedAllToAll(const Node &N, int64_t GroupSize,
                                   TensorType &Result) {
  const TensorType &In = N.getOperand(0)->getType();
  const TensorType &Out = N.getType();
  if (const Attribute *D = N.getAttrs().get("dim"))
    if (!D->isInt() || D->getInt() != 0) {
      error(N.getLoc(), "an uneven 'all_to_all' splits dimension 0; attribute "
                        "'dim' must be 0 or absent");
      return false;
    }
  if (N.getAttrs().get("reduce")) {
    error(N.getLoc(), "'all_to_all' takes no attribute 'reduce'");
    return false;
  }
  if (In.rank() == 0) {
    error(N.getOperands()[0].Loc, "operand " + name(N.getOperand(0)) +
                                      " of an uneven 'all_to_all' needs "
                                      "rank 1 or more (rows to send)");
    return false;
  }
  for (unsigned I = 1; I < 3; ++I) {
    const TensorType &C = N.getOperand(I)->getType();
    if (C.Dtype != DType::I64 || C.rank() != 1 || C.Shape[0] != GroupSize) {
      error(N.getOperands()[I].Loc,
            "operand " + name(N.getOperand(I)) + " (the " +
                (I == 1 ? "send" : "receive") + " counts) must be i64[" +
                Twine(GroupSize) + "], a count per rank of the group, got " +
                C.str());
      return false;
    }
  }
  if (Out.Dtype != In.Dtype || Out.rank() != In.rank() ||
      !std::equal(In.Shape.begin() + 1, In.Shape.end(),
                  Out.Shape.begin() + 1)) {
    error(N.getLoc(),
          "the result of an uneven 'all_to_all' must be " +
              Twine(dtypeName(In.Dtype)) + " with the trailing dimensions of " +
              name(N.getOperand(0)) + " (" + In.str() +
              ") and any row count (its capacity), got " + Out.str());
    return false;
  }
  if (Out.Shape[0] < 1) {
    error(N.getLoc(), "an uneven 'all_to_all' needs a capacity of at least "
                      "one row");
    return false;
  }
  Result = Out;
  return true;
}

bool Verifier::inferCollective(const Graph &G, const Node &N,
                               TensorType &Result) {
  bool Ragged = N.getOp() == OpCode::AllToAll && N.getNumOperands() != 1;
  if (N.getOp() == OpCode::AllToAll && N.getNumOperands() != 1 &&
      N.getNumOperands() != 3) {
    error(N.getLoc(), "'all_to_all' expects 1 operand (even splits) or 3 "
                      "(values, send counts, receive counts), got " +
                          Twine(N.getNumOperands()));
    return false;
  }
  const TensorType &In = N.getOperand(0)->getType();
  if (isFp8DType(In.Dtype)) {
    // Neither the peer-memory kernels nor the NCCL path move fp8 yet.
    error(N.getOperands()[0].Loc,
          "'" + N.getOpName() + "' of fp8 values is not supported; cast " +
              name(N.getOperand(0)) + " to bf16 first");
    return false;
  }
  std::optional<std::string> Group = groupAttr(N);
  if (!Group)
    return false;
  int64_t Size = groupSize(G, *Group, N.getLoc());
  if (Size == 0)
    return false;
  if (const Attribute *R = N.getAttrs().get("reduce")) {
    llvm::StringRef Op = R->isString() ? R->getString() : "";
    if (Op != "sum" && Op != "max" && Op != "min" && Op != "avg") {
      error(N.getLoc(), "attribute 'reduce' must be \"sum\", \"max\", "
                        "\"min\" or \"avg\"");
      return false;
    }
  }
  Result = In;
  if (N.getOp() == OpCode::AllReduce)
    return true;
  if (Ragged)
    return inferRaggedAllToAll(N, Size, Result);
  int64_t Dim = 0;
  if (const Attribute *D = N.getAttrs().get("dim")) {
    if (!D->isInt()) {
      error(N.getLoc(), "attribute 'dim' must be an integer");
      return false;
    }
    Dim = D->getInt();
  }
  if (In.rank() == 0 || Dim < 0 || Dim >= int64_t(In.rank())) {
    error(N.getLoc(), "dimension " + Twine(Dim) + " is out of range for " +
                          name(N.getOperand(0)) + " of type " + In.str());
    return false;
  }
  if (N.getOp() == OpCode::AllGather) {
    if (llvm::MulOverflow(Result.Shape[Dim], Size, Result.Shape[Dim])) {
      error(N.getLoc(), "'all_gather' result is too large: dimension " +
                            Twine(Dim) + " of size " + Twine(In.Shape[Dim]) +
                            " times " + Twine(Size) + " ranks overflows");
      return false;
    }
    return true;
  }
  if (In.Shape[Dim] % Size != 0) {
    error(N.getLoc(), "'" + N.getOpName() + "' splits dimension " + Twine(Dim) +
                          " of size " + Twine(In.Shape[Dim]) + " into " +
                          Twine(Size) + " ranks, which does not divide it");
    return false;
  }
  if (N.getOp() == OpCode::ReduceScatter)
    Result.Shape[Dim] /= Size;
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

/// matmul's result: A [..., M, K] x B [K, N] or [..., K, N] (the same
/// batch dimensions), declared in its accumulator type for fp8.
bool Verifier::inferMatMulShape(const Node &N, TensorType &Result) {
  auto Operand = [&](unsigned I) -> const TensorType & {
    return N.getOperand(I)->getType();
  };
  const TensorType &A = Operand(0), &B = Operand(1);
  for (unsigned I = 0; I < 2; ++I)
    if (Operand(I).rank() < 2) {
      error(N.getOperands()[I].Loc,
            "operand " + name(N.getOperand(I)) +
                " of 'matmul' must have rank 2 or more, got " +
                Operand(I).str());
      return false;
    }
  if (B.rank() != 2 && B.rank() != A.rank()) {
    error(N.getOperands()[1].Loc, "operand " + name(N.getOperand(1)) +
                                      " must have rank 2 or the rank of " +
                                      name(N.getOperand(0)));
    return false;
  }
  int64_t K = A.Shape.back(), KB = B.Shape[B.rank() - 2];
  if (K != KB) {
    error(N.getOperands()[1].Loc,
          "'matmul' inner dimensions differ: " + name(N.getOperand(0)) +
              " has " + Twine(K) + " columns but " + name(N.getOperand(1)) +
              " has " + Twine(KB) + " rows");
    return false;
  }
  if (B.rank() > 2)
    for (unsigned I = 0; I + 2 < A.rank(); ++I)
      if (A.Shape[I] != B.Shape[I]) {
        error(N.getOperands()[1].Loc,
              "'matmul' batch dimensions differ: " + shapeStr(A.Shape) +
                  " and " + shapeStr(B.Shape));
        return false;
      }
  Result = A;
  Result.Shape.back() = B.Shape.back();
  // An fp8 product is declared in the type it is accumulated into.
  if (isFp8DType(A.Dtype))
    Result.Dtype = N.getType().Dtype;
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
