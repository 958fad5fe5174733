//===- OpTypesMatMul.cpp - GEMM and attention type rules ------------------===//
//
// The type rules of the MatMul category (OpTypeRule MatMul, SwiGlu,
// Attention): operand counts, dtypes and scales, the GEMM result shape.
// inferType (OpTypes.cpp) dispatches here.
//
//===----------------------------------------------------------------------===//
#include "VerifierImpl.h"
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
    // [K, N], or one [K, N] per batch of h ([..., K, N] with h's batch
    // dimensions, as a bmm's right operand: MoE experts).
    bool Batched =
        W.rank() > 2 && W.rank() == A.rank() &&
        std::equal(W.Shape.begin(), W.Shape.end() - 2, A.Shape.begin());
    if ((W.rank() != 2 && !Batched) || W.Shape[W.rank() - 2] != A.innerDim()) {
      std::string Batch;
      for (unsigned D = 0; D + 2 < A.rank() && W.rank() > 2; ++D)
        Batch += std::to_string(A.Shape[D]) + ", ";
      error(N.getOperands()[I].Loc,
            "weight " + name(N.getOperand(I)) + " of 'swiglu' has shape " +
                shapeStr(W.Shape) + ", expected [" + Batch +
                Twine(A.innerDim()) + ", N] (K = the last dimension of " +
                name(N.getOperand(0)) + ")");
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
  Result.Shape.back() = Wg.Shape.back();
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
