//===- Interpreter.cpp - fp64 reference semantics of the IR ops -----------===//
#include "mtsched/Reference/Interpreter.h"
#include "InterpreterImpl.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "mtsched/Reference/RandomInputs.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <list>
#include <optional>

using namespace mtsched;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// Index into a tensor of shape Op for the flat index I of shape Out
/// (right-aligned broadcasting).
int64_t mtsched::broadcastIndex(llvm::ArrayRef<int64_t> Op,
                                llvm::ArrayRef<int64_t> Out, int64_t I) {
  int64_t Idx = 0, OpStride = 1;
  for (int D = int(Out.size()) - 1, OD = int(Op.size()) - 1; D >= 0;
       --D, --OD) {
    int64_t Coord = I % Out[D];
    I /= Out[D];
    int64_t OpDim = OD >= 0 ? Op[OD] : 1;
    if (OpDim != 1)
      Idx += Coord * OpStride;
    OpStride *= OpDim;
  }
  return Idx;
}

void mtsched::attentionReferenceRow(const AttentionShape &S, const double *Q,
                                    const double *K, const double *V, int64_t R,
                                    double *Out, const double *M) {
  int64_t KvHead = S.kvHeadOf(R);
  attentionReferenceHeadRow(S, Q + R * S.D, K + KvHead * S.Skv * S.D,
                            V + KvHead * S.Skv * S.D, R, Out,
                            M && S.HasMask ? M + S.maskRowOf(R) : nullptr);
}

void mtsched::attentionReferenceHeadRow(const AttentionShape &S,
                                        const double *Qr, const double *Kh,
                                        const double *Vh, int64_t R,
                                        double *Out, const double *MaskRow) {
  int64_t Last = S.lastKey(R % S.Sq);
  std::vector<double> P(Last + 1);
  double Max = -std::numeric_limits<double>::infinity();
  for (int64_t J = 0; J <= Last; ++J) {
    double Dot = 0;
    for (int64_t X = 0; X < S.D; ++X)
      Dot += Qr[X] * Kh[J * S.D + X];
    P[J] = Dot * S.Scale + (MaskRow ? MaskRow[J] : 0.0);
    Max = std::max(Max, P[J]);
  }
  // A row the mask hides entirely has Max = -inf and NaN weights, as
  // PyTorch's softmax gives it.
  double Sum = 0;
  for (double &X : P)
    Sum += X = std::exp(X - Max);
  std::fill(Out, Out + S.D, 0.0);
  for (int64_t J = 0; J <= Last; ++J)
    for (int64_t X = 0; X < S.D; ++X)
      Out[X] += P[J] / Sum * Vh[J * S.D + X];
}

/// The exact integer semantics of pointwise op C on integer operands X, as
/// PyTorch computes it on integer tensors of the result's type T; nullopt
/// for ops that have none (div, exp, ...), which are evaluated in fp64 and
/// converted as a cast converts.
static std::optional<int64_t>
evaluateIntPointwise(OpCode C, llvm::ArrayRef<int64_t> X, DType T) {
  switch (C) {
  case OpCode::Add:
    return addWrap(X[0], X[1], T);
  case OpCode::Sub:
    return subWrap(X[0], X[1], T);
  case OpCode::Mul:
    return mulWrap(X[0], X[1], T);
  case OpCode::Neg:
    return subWrap(0, X[0], T);
  case OpCode::Abs:
    return X[0] < 0 ? subWrap(0, X[0], T) : X[0];
  case OpCode::Relu:
    return std::max<int64_t>(X[0], 0);
  case OpCode::Maximum:
    return std::max(X[0], X[1]);
  case OpCode::Minimum:
    return std::min(X[0], X[1]);
  case OpCode::Cast:
    return wrapInt(X[0], T);
  case OpCode::FullLike:
    return wrapInt(X[1], T);
  default:
    return std::nullopt;
  }
}

namespace {
/// A node's operand values, as interpretNode and its per-op parts read them.
struct NodeOperands {
  std::vector<const HostValues *> In;
  /// The fp64 ops (GEMMs, attention, norms) read integer operands, which
  /// they do not expect, as doubles: converted once, kept here.
  std::list<std::vector<double>> Converted;
  const std::vector<double> &floats(unsigned K) {
    if (!In[K]->isInt())
      return In[K]->floats();
    Converted.push_back(In[K]->toDoubles());
    return Converted.back();
  }
};
} // namespace

static llvm::Error interpretMatMul(const Node &N, NodeOperands &Ops,
                                   HostValues &Result) {
  int64_t NumOut = N.getType().numElements();
  const TensorType &T = N.getType();
  std::vector<double> Out(NumOut);
  const TensorType &A = N.getOperand(0)->getType(),
                   &B = N.getOperand(1)->getType();
  int64_t K = A.innerDim(), Nn = B.innerDim();
  int64_t M = A.Shape[A.rank() - 2];
  int64_t Batch = A.numElements() / (M * K);
  bool BatchedB = B.rank() > 2;
  const std::vector<double> &A0 = Ops.floats(0), &B1 = Ops.floats(1);
  // Rows in parallel: --run checks a 4096^3 GEMM in fp64 here.
  parallelChunks(
      Batch * M,
      [&](int64_t Begin, int64_t End) {
        for (int64_t Row = Begin; Row < End; ++Row) {
          int64_t Bt = Row / M;
          double *C = &Out[Row * Nn];
          const double *Ar = &A0[Row * K];
          const double *Bm = &B1[BatchedB ? Bt * K * Nn : 0];
          for (int64_t Kk = 0; Kk < K; ++Kk) {
            double Av = Ar[Kk];
            const double *Br = Bm + Kk * Nn;
            for (int64_t J = 0; J < Nn; ++J)
              C[J] += Av * Br[J];
          }
        }
      },
      /*MinChunk=*/
      std::max<int64_t>(1, (int64_t(1) << 22) / std::max<int64_t>(1, K * Nn)));
  // fp8 operands: their scales, per tensor or per row of A / column
  // of B (then both operands are 2-D).
  if (N.getNumOperands() == 4) {
    const std::vector<double> &SA = Ops.floats(2), &SB = Ops.floats(3);
    bool RowA = SA.size() != 1, ColB = SB.size() != 1;
    for (int64_t R = 0; R < Batch * M; ++R)
      for (int64_t J = 0; J < Nn; ++J)
        Out[R * Nn + J] *= SA[RowA ? R : 0] * SB[ColB ? J : 0];
  }
  Result = fromDoubles(std::move(Out), T.Dtype);
  return llvm::Error::success();
}

static llvm::Error interpretAttention(const Node &N, NodeOperands &Ops,
                                      HostValues &Result) {
  int64_t NumOut = N.getType().numElements();
  const TensorType &T = N.getType();
  std::optional<AttentionShape> S = attentionShapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "' is not a well-formed attention");
  std::vector<double> Out(NumOut);
  const std::vector<double> &Q = Ops.floats(0), &K = Ops.floats(1),
                            &V = Ops.floats(2);
  const double *M = S->HasMask ? Ops.floats(3).data() : nullptr;
  // Query rows in parallel: --run checks prefill attention in fp64 here.
  parallelChunks(
      S->B * S->Hq * S->Sq,
      [&](int64_t Begin, int64_t End) {
        for (int64_t R = Begin; R < End; ++R)
          attentionReferenceRow(*S, Q.data(), K.data(), V.data(), R,
                                &Out[R * S->D], M);
      },
      /*MinChunk=*/
      std::max<int64_t>(1, (int64_t(1) << 20) /
                               std::max<int64_t>(1, S->Skv * S->D)));
  Result = fromDoubles(std::move(Out), T.Dtype);
  return llvm::Error::success();
}

static llvm::Error interpretSwiGlu(const Node &N, NodeOperands &Ops,
                                   HostValues &Result) {
  int64_t NumOut = N.getType().numElements();
  const TensorType &T = N.getType();
  // silu(A Wg) * (A Wu), row by row.
  std::vector<double> Out(NumOut);
  int64_t K = N.getOperand(0)->getType().innerDim(), Nn = T.innerDim();
  int64_t Rows = NumOut / Nn;
  const std::vector<double> &A = Ops.floats(0), &Wg = Ops.floats(1),
                            &Wu = Ops.floats(2);
  // Batched weights ([..., K, N]): row I reads its batch's [K, N].
  const TensorType &AT = N.getOperand(0)->getType();
  bool Batched = N.getOperand(1)->getType().rank() > 2;
  int64_t M1 = Batched ? AT.Shape[AT.rank() - 2] : Rows;
  parallelChunks(
      Rows,
      [&](int64_t Begin, int64_t End) {
        std::vector<double> G(Nn), U(Nn);
        for (int64_t I = Begin; I < End; ++I) {
          std::fill(G.begin(), G.end(), 0.0);
          std::fill(U.begin(), U.end(), 0.0);
          const double *Ar = &A[I * K];
          int64_t W0 = Batched ? I / M1 * K * Nn : 0;
          for (int64_t Kk = 0; Kk < K; ++Kk) {
            const double *Gr = &Wg[W0 + Kk * Nn], *Ur = &Wu[W0 + Kk * Nn];
            for (int64_t J = 0; J < Nn; ++J) {
              G[J] += Ar[Kk] * Gr[J];
              U[J] += Ar[Kk] * Ur[J];
            }
          }
          for (int64_t J = 0; J < Nn; ++J)
            Out[I * Nn + J] = G[J] / (1 + std::exp(-G[J])) * U[J];
        }
      },
      /*MinChunk=*/
      std::max<int64_t>(1,
                        (int64_t(1) << 22) / std::max<int64_t>(1, 2 * K * Nn)));
  Result = fromDoubles(std::move(Out), T.Dtype);
  return llvm::Error::success();
}

static llvm::Error interpretRaggedAllToAll(const Node &N, NodeOperands &Ops,
                                           HostValues &Result) {
  int64_t NumOut = N.getType().numElements();
  const TensorType &T = N.getType();
  // One rank's uneven all_to_all: its own rows back, then zeros. The
  // counts are checked as every rank would check them.
  if (Ops.In[1]->size() != 1)
    return err("'%" + N.getName() +
               "': only one-rank collectives (the identity) are interpreted");
  const TensorType &XT = N.getOperand(0)->getType();
  int64_t Rows = XT.Shape[0], Cap = T.Shape[0];
  int64_t RowElems = Rows ? XT.numElements() / Rows : 0;
  int64_t Send = intAt(*Ops.In[1], 0), Recv = intAt(*Ops.In[2], 0);
  if (!(Send >= 0 && Send <= Rows))
    return err("'%" + N.getName() + "': the send counts ask for " +
               llvm::Twine(Send) + " rows of '%" + N.getOperand(0)->getName() +
               "', which has " + llvm::Twine(Rows));
  if (Recv != Send)
    return err("'%" + N.getName() + "': rank 0 expects " + llvm::Twine(Recv) +
               " rows from rank 0, which sends " + llvm::Twine(Send));
  if (Recv > Cap)
    return err("'%" + N.getName() + "': rank 0 receives " + llvm::Twine(Recv) +
               " rows, more than its capacity of " + llvm::Twine(Cap));
  Result = HostValues::zeros(T.Dtype, NumOut);
  for (int64_t I = 0; I < Recv * RowElems; ++I)
    copyElement(Result, I, *Ops.In[0], I, T.Dtype);
  return llvm::Error::success();
}

static llvm::Error interpretPointwise(const Node &N, NodeOperands &Ops,
                                      HostValues &Result) {
  int64_t NumOut = N.getType().numElements();
  const TensorType &T = N.getType();
  OpCode Op = N.getOp();
  std::optional<double> Scalar = pointwiseScalar(N);
  const Attribute *ScalarAttr = Scalar ? N.getAttrs().get("scalar") : nullptr;
  Result = HostValues::zeros(T.Dtype, NumOut);
  // Integer results of ops with integer semantics are computed exactly
  // when every operand they read is an integer (where's condition and
  // full_like's shape operand are not read as numbers).
  unsigned FirstRead = Op == OpCode::Where || Op == OpCode::FullLike ? 1 : 0;
  bool Exact = Result.isInt() && (!Scalar || ScalarAttr->isInt()) &&
               (Op == OpCode::Where ||
                evaluateIntPointwise(Op, {0, 0, 0}, T.Dtype).has_value());
  for (unsigned J = FirstRead; J < Ops.In.size(); ++J)
    Exact &= Ops.In[J]->isInt();
  unsigned NumX = Ops.In.size() + (Scalar ? 1 : 0);
  llvm::SmallVector<double, 3> X(NumX);
  llvm::SmallVector<int64_t, 3> XI(NumX);
  if (Scalar) {
    X.back() = *Scalar;
    XI.back() = ScalarAttr->isInt() ? ScalarAttr->getInt() : 0;
  }
  for (int64_t I = 0; I < NumOut; ++I) {
    for (unsigned J = 0; J < Ops.In.size(); ++J) {
      int64_t At = broadcastIndex(N.getOperand(J)->getType().Shape, T.Shape, I);
      if (Exact && J >= FirstRead)
        XI[J] = Ops.In[J]->ints()[At];
      else
        X[J] = Ops.In[J]->getDouble(At);
    }
    if (Op == OpCode::Where && Exact) {
      Result.ints()[I] = X[0] != 0 ? XI[1] : XI[2];
    } else if (Exact) {
      Result.ints()[I] = *evaluateIntPointwise(Op, XI, T.Dtype);
    } else {
      double V = evaluatePointwise(Op, X);
      if (Result.isInt())
        Result.ints()[I] = doubleToInt(V, T.Dtype);
      else
        Result.floats()[I] = V;
    }
  }
  return llvm::Error::success();
}

static llvm::Error interpretSumOrMax(const Node &N, NodeOperands &Ops,
                                     HostValues &Result) {
  int64_t NumOut = N.getType().numElements();
  const TensorType &T = N.getType();
  OpCode Op = N.getOp();
  const TensorType &IT = N.getOperand(0)->getType();
  int64_t Dim = IT.rank() - 1;
  if (const Attribute *D = N.getAttrs().get("dim"))
    Dim = D->getInt() < 0 ? D->getInt() + IT.rank() : D->getInt();
  int64_t After = 1;
  for (unsigned D = Dim + 1; D < IT.rank(); ++D)
    After *= IT.Shape[D];
  int64_t Len = IT.Shape[Dim];
  Result = HostValues::zeros(T.Dtype, NumOut);
  bool Exact = Result.isInt() && Ops.In[0]->isInt();
  for (int64_t I = 0; I < NumOut; ++I) {
    double Acc =
        Op == OpCode::Sum ? 0 : -std::numeric_limits<double>::infinity();
    int64_t IAcc = Op == OpCode::Sum ? 0 : std::numeric_limits<int64_t>::min();
    for (int64_t D = 0; D < Len; ++D) {
      int64_t At = (I / After) * Len * After + D * After + I % After;
      if (Exact) {
        int64_t V = Ops.In[0]->ints()[At];
        IAcc =
            Op == OpCode::Sum ? addWrap(IAcc, V, T.Dtype) : std::max(IAcc, V);
      } else {
        double V = Ops.In[0]->getDouble(At);
        Acc = Op == OpCode::Sum ? Acc + V : std::max(Acc, V);
      }
    }
    if (Exact)
      Result.ints()[I] = IAcc;
    else if (Result.isInt())
      Result.ints()[I] = doubleToInt(Acc, T.Dtype);
    else
      Result.floats()[I] = Acc;
  }
  return llvm::Error::success();
}

llvm::Error mtsched::interpretNode(const Node &N, ValueData &Data) {
  NodeOperands Ops;
  for (const Operand &O : N.getOperands()) {
    auto It = Data.find(O.V);
    if (It == Data.end())
      return err("no value for '%" + O.V->getName() + "'");
    Ops.In.push_back(&It->second);
  }
  std::vector<const HostValues *> &In = Ops.In;
  auto Floats = [&](unsigned K) -> const std::vector<double> & {
    return Ops.floats(K);
  };
  const TensorType &T = N.getType();
  int64_t NumOut = T.numElements();
  OpCode Op = N.getOp();
  HostValues Result;
  if (Op == OpCode::MatMul) {
    if (llvm::Error E = interpretMatMul(N, Ops, Result))
      return E;
  } else if (Op == OpCode::Attention) {
    if (llvm::Error E = interpretAttention(N, Ops, Result))
      return E;
  } else if (Op == OpCode::SwiGlu) {
    if (llvm::Error E = interpretSwiGlu(N, Ops, Result))
      return E;
  } else if (Op == OpCode::AllToAll && In.size() == 3) {
    if (llvm::Error E = interpretRaggedAllToAll(N, Ops, Result))
      return E;
  } else if (collectiveKindOf(Op) != CollectiveKind::None) {
    if (In.empty() || int64_t(In[0]->size()) != NumOut)
      return err("'%" + N.getName() +
                 "': only one-rank collectives (the identity) are interpreted");
    Result = *In[0];
  } else if (isOpUnit(Op)) {
    // The op's own file in lib/OpUnits defines it (IR/OpUnit.h).
    OpUnitReferenceFn Ref = lookupOpUnitReference(Op);
    if (!Ref)
      return err("the interpreter has no semantics for '" + N.getOpName() +
                 "' (its op unit is not registered)");
    llvm::SmallVector<HostValues, 2> Results(N.getNumResults());
    if (llvm::Error E = Ref(N, In, Results))
      return E;
    // The further results (topk's and sort's indices) are stored here,
    // the first below.
    for (unsigned R = 1; R < Results.size(); ++R) {
      if (isFp8DType(N.getResult(R)->getType().Dtype))
        for (double &X : Results[R].floats())
          X = roundTo(X, N.getResult(R)->getType().Dtype);
      Data[N.getResult(R)] = std::move(Results[R]);
    }
    Result = std::move(Results.front());
  } else if (isLayout(Op)) {
    std::optional<LayoutPlan> P = layoutPlanOf(N);
    if (!P)
      return err("'%" + N.getName() + "' is not a well-formed '" +
                 N.getOpName() + "'");
    Result = HostValues::zeros(T.Dtype, NumOut);
    for (int64_t I = 0; I < NumOut; ++I) {
      auto [K, Idx] = P->sourceOf(I);
      if (P->IndexOperand >= 0) {
        int64_t Pos = P->indexPositionOf(I);
        int64_t X = intAt(*In[P->IndexOperand], Pos);
        if (X < 0 || X >= P->IndexBound)
          return err("'%" + N.getName() + "': index " + llvm::Twine(X) +
                     " at position " + llvm::Twine(Pos) + " of %" +
                     N.getOperand(P->IndexOperand)->getName() +
                     " is outside [0, " + llvm::Twine(P->IndexBound) + ")");
        Idx += X * P->IndexCoef;
      }
      copyElement(Result, I, *In[K], Idx, T.Dtype);
    }
  } else if (isPointwise(Op)) {
    if (llvm::Error E = interpretPointwise(N, Ops, Result))
      return E;
  } else if (Op == OpCode::Sum || Op == OpCode::Max) {
    if (llvm::Error E = interpretSumOrMax(N, Ops, Result))
      return E;
  } else if (isRowReduction(Op)) {
    std::vector<double> Out(NumOut);
    const std::vector<double> &X = Floats(0);
    int64_t L = T.innerDim(), Rows = NumOut / L;
    // The row chain reads operand 0 from Row; the others (weight, bias)
    // from Tmp.
    ValueData Tmp;
    Tmp[N.getOperand(0)] = HostValues();
    for (unsigned I = 1; I < N.getNumOperands(); ++I)
      Tmp[N.getOperand(I)] = *In[I];
    for (int64_t R = 0; R < Rows; ++R) {
      std::vector<double> Row(X.begin() + R * L, X.begin() + (R + 1) * L);
      const Node *Chain[] = {&N};
      if (llvm::Error E =
              interpretRowChain(Chain, N.getOperand(0), R, Rows, Row, Tmp))
        return E;
      std::copy(Row.begin(), Row.end(), Out.begin() + R * L);
    }
    Result = fromDoubles(std::move(Out), T.Dtype);
  } else {
    return err("the interpreter has no semantics for '" + N.getOpName() + "'");
  }
  // Other values keep fp64 (the reference the GPU's rounding is measured
  // against), but an fp8 value is its rounding: quantising to fp8 is the
  // computation, and its error is too large for any tolerance to absorb.
  if (isFp8DType(T.Dtype))
    for (double &X : Result.floats())
      X = roundTo(X, T.Dtype);
  Data[N.getResult()] = std::move(Result);
  return llvm::Error::success();
}

llvm::Error mtsched::interpretGraph(const Graph &G, ValueData &Data) {
  // The caller holds the inputs already: the rank and op checks apply, the
  // byte budget is interpretGraphToFiles' (or the caller's).
  if (std::optional<InterpretRefusal> R = checkInterpretable(G, UINT64_MAX))
    return err(R->Message);
  for (const auto &N : G.getNodes())
    if (llvm::Error E = interpretNode(*N, Data))
      return E;
  return llvm::Error::success();
}
