//===- Layout.cpp - The element map of layout ops -------------------------===//
#include "mtsched/IR/Layout.h"
#include "mtsched/IR/Graph.h"

using namespace mtsched;

/// Row-major strides of Shape.
static std::vector<int64_t> stridesOf(const std::vector<int64_t> &Shape) {
  std::vector<int64_t> S(Shape.size(), 1);
  for (int D = int(Shape.size()) - 2; D >= 0; --D)
    S[D] = S[D + 1] * Shape[D + 1];
  return S;
}

static int64_t intAttr(const Node &N, const char *Key, int64_t Default) {
  const Attribute *A = N.getAttrs().get(Key);
  return A && A->isInt() ? A->getInt() : Default;
}

/// Attribute 'dim' of N normalised for Rank (negative counts from the end).
static int64_t dimAttr(const Node &N, int64_t Rank, int64_t Default) {
  int64_t D = intAttr(N, "dim", Default);
  return D < 0 ? D + Rank : D;
}

std::pair<unsigned, int64_t> LayoutPlan::sourceOf(int64_t I) const {
  if (Identity)
    return {0, I};
  int64_t Rank = OutShape.size();
  std::vector<int64_t> O(Rank);
  for (int64_t D = Rank - 1; D >= 0; --D) {
    O[D] = I % OutShape[D];
    I /= OutShape[D];
  }
  for (const Source &S : Sources) {
    if (Rank && (O[ConcatDim] < S.Lo || O[ConcatDim] >= S.Hi))
      continue;
    int64_t Idx = S.Base;
    for (int64_t D = 0; D < Rank; ++D)
      Idx += O[D] * S.Coef[D];
    return {S.Operand, Idx};
  }
  return {0, 0};
}

int64_t LayoutPlan::indexPositionOf(int64_t I) const {
  if (IndexPerElement)
    return I;
  for (size_t D = OutShape.size(); D-- > IndexDim + 1;)
    I /= OutShape[D];
  return I % OutShape[IndexDim];
}

std::optional<LayoutPlan> mtsched::layoutPlanOf(const Node &N) {
  if (!isLayout(N.getOp()) || N.getNumOperands() == 0)
    return std::nullopt;
  LayoutPlan P;
  const TensorType &Out = N.getType();
  P.OutShape.assign(Out.Shape.begin(), Out.Shape.end());
  int64_t Rank = Out.rank();
  const TensorType &In = N.getOperand(0)->getType();
  std::vector<int64_t> InShape(In.Shape.begin(), In.Shape.end());
  std::vector<int64_t> InStride = stridesOf(InShape);
  LayoutPlan::Source S;
  S.Hi = Rank ? Out.Shape[0] : 1;
  S.Coef.assign(Rank, 0);
  switch (N.getOp()) {
  case OpCode::Reshape:
    if (In.numElements() != Out.numElements())
      return std::nullopt;
    P.Identity = true;
    return P;
  case OpCode::Expand: {
    if (InShape.size() > size_t(Rank))
      return std::nullopt;
    int64_t Lead = Rank - int64_t(InShape.size());
    for (int64_t D = Lead; D < Rank; ++D) {
      int64_t ID = InShape[D - Lead];
      if (ID != 1 && ID != Out.Shape[D])
        return std::nullopt;
      S.Coef[D] = ID == 1 ? 0 : InStride[D - Lead];
    }
    break;
  }
  case OpCode::Transpose: {
    const Attribute *A = N.getAttrs().get("perm");
    if (!A || !A->isList() || int64_t(A->getList().size()) != Rank ||
        int64_t(InShape.size()) != Rank)
      return std::nullopt;
    for (int64_t D = 0; D < Rank; ++D) {
      int64_t From = A->getList()[D].getInt();
      if (From < 0 || From >= Rank || InShape[From] != Out.Shape[D])
        return std::nullopt;
      S.Coef[D] = InStride[From];
    }
    break;
  }
  case OpCode::Slice: {
    if (int64_t(InShape.size()) != Rank || Rank == 0)
      return std::nullopt;
    int64_t Dim = dimAttr(N, Rank, 0);
    if (Dim < 0 || Dim >= Rank)
      return std::nullopt;
    int64_t Start = intAttr(N, "start", 0), Step = intAttr(N, "step", 1);
    if (Start < 0)
      Start += InShape[Dim];
    // A step past the dimension leaves one element (and would overflow
    // the coefficient).
    for (int64_t D = 0; D < Rank; ++D)
      S.Coef[D] = D != Dim           ? InStride[D]
                  : Out.Shape[D] > 1 ? InStride[D] * Step
                                     : 0;
    S.Base = Start * InStride[Dim];
    break;
  }
  case OpCode::IndexSelect: {
    const TensorType &Idx = N.getOperand(1)->getType();
    if (int64_t(InShape.size()) != Rank || Rank == 0 || Idx.rank() != 1)
      return std::nullopt;
    int64_t Dim = dimAttr(N, Rank, 0);
    if (Dim < 0 || Dim >= Rank || Out.Shape[Dim] != Idx.Shape[0])
      return std::nullopt;
    for (int64_t D = 0; D < Rank; ++D) {
      if (D != Dim && InShape[D] != Out.Shape[D])
        return std::nullopt;
      S.Coef[D] = D == Dim ? 0 : InStride[D];
    }
    P.IndexOperand = 1;
    P.IndexDim = unsigned(Dim);
    P.IndexCoef = InStride[Dim];
    P.IndexBound = InShape[Dim];
    break;
  }
  case OpCode::Gather: {
    const TensorType &Idx = N.getOperand(1)->getType();
    if (int64_t(InShape.size()) != Rank || Rank == 0 || Idx.Shape != Out.Shape)
      return std::nullopt;
    int64_t Dim = dimAttr(N, Rank, 0);
    if (Dim < 0 || Dim >= Rank)
      return std::nullopt;
    for (int64_t D = 0; D < Rank; ++D) {
      if (D != Dim && Out.Shape[D] > InShape[D])
        return std::nullopt;
      S.Coef[D] = D == Dim ? 0 : InStride[D];
    }
    P.IndexOperand = 1;
    P.IndexDim = unsigned(Dim);
    P.IndexPerElement = true;
    P.IndexCoef = InStride[Dim];
    P.IndexBound = InShape[Dim];
    break;
  }
  case OpCode::Concat: {
    if (Rank == 0)
      return std::nullopt;
    int64_t Dim = dimAttr(N, Rank, 0);
    if (Dim < 0 || Dim >= Rank)
      return std::nullopt;
    P.ConcatDim = unsigned(Dim);
    int64_t Offset = 0;
    for (unsigned K = 0; K < N.getNumOperands(); ++K) {
      const TensorType &T = N.getOperand(K)->getType();
      if (T.rank() != Out.rank())
        return std::nullopt;
      std::vector<int64_t> Sh(T.Shape.begin(), T.Shape.end());
      std::vector<int64_t> St = stridesOf(Sh);
      LayoutPlan::Source C;
      C.Operand = K;
      C.Lo = Offset;
      C.Hi = Offset + Sh[Dim];
      C.Coef = St;
      C.Base = -Offset * St[Dim];
      Offset = C.Hi;
      P.Sources.push_back(std::move(C));
    }
    return Offset == Out.Shape[Dim] ? std::optional<LayoutPlan>(P)
                                    : std::nullopt;
  }
  default:
    return std::nullopt;
  }
  P.Sources.push_back(std::move(S));
  return P;
}

int64_t ElementMap::apply(int64_t I) const {
  if (Identity)
    return I;
  int64_t Out = 0;
  for (size_t D = 0; D < Div.size(); ++D)
    Out += (I / Div[D]) % Mod[D] * Stride[D];
  return Out;
}

std::optional<ElementMap> mtsched::elementMapOf(const Node &N) {
  if (N.getOp() != OpCode::Reshape && N.getOp() != OpCode::Transpose)
    return std::nullopt;
  std::optional<LayoutPlan> P = layoutPlanOf(N);
  if (!P)
    return std::nullopt;
  ElementMap M;
  if (P->Identity) {
    M.Identity = true;
    return M;
  }
  // A transpose: every operand dimension read by exactly one result
  // dimension, so that no element is dropped or repeated.
  const Attribute *A = N.getAttrs().get("perm");
  std::vector<bool> Seen(P->OutShape.size(), false);
  for (const Attribute &X : A->getList()) {
    int64_t From = X.getInt();
    if (Seen[From])
      return std::nullopt;
    Seen[From] = true;
  }
  // Result dimension d is the operand's dimension of stride Coef[d]: the
  // operand's element I has index (I / Coef[d]) % size along it.
  M.Div = P->Sources.front().Coef;
  M.Mod = P->OutShape;
  M.Stride = stridesOf(P->OutShape);
  return M;
}
