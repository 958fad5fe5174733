//===- Interpreter.cpp - fp64 reference semantics of the IR ops -----------===//
#include "mtsched/Autotune/Interpreter.h"
#include "mtsched/Autotune/RandomInputs.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/IR/Scan.h"
#include "mtsched/IR/Scatter.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mtsched;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

uint16_t mtsched::floatToBF16(float F) {
  uint32_t U;
  std::memcpy(&U, &F, 4);
  if ((U & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0;
  U += 0x7fffu + ((U >> 16) & 1u);
  return uint16_t(U >> 16);
}

float mtsched::bf16ToFloat(uint16_t H) {
  uint32_t U = uint32_t(H) << 16;
  float F;
  std::memcpy(&F, &U, 4);
  return F;
}

uint16_t mtsched::floatToF16(float F) {
  uint32_t U;
  std::memcpy(&U, &F, 4);
  uint32_t Sign = (U >> 16) & 0x8000u;
  int32_t Exp = int32_t((U >> 23) & 0xff) - 127 + 15;
  uint32_t Man = U & 0x7fffffu;
  if (((U >> 23) & 0xff) == 0xff)
    return uint16_t(Sign | 0x7c00u | (Man ? 0x200u : 0));
  if (Exp >= 31)
    return uint16_t(Sign | 0x7c00u);
  if (Exp <= 0) {
    if (Exp < -10)
      return uint16_t(Sign);
    Man |= 0x800000u;
    uint32_t Shift = uint32_t(14 - Exp);
    uint32_t H = Man >> Shift;
    uint32_t Rem = Man & ((1u << Shift) - 1), Half = 1u << (Shift - 1);
    if (Rem > Half || (Rem == Half && (H & 1)))
      ++H;
    return uint16_t(Sign | H);
  }
  uint32_t H = Sign | (uint32_t(Exp) << 10) | (Man >> 13);
  uint32_t Rem = Man & 0x1fffu;
  if (Rem > 0x1000u || (Rem == 0x1000u && (H & 1)))
    ++H;
  return uint16_t(H);
}

float mtsched::f16ToFloat(uint16_t H) {
  uint32_t Sign = uint32_t(H & 0x8000u) << 16;
  uint32_t Exp = (H >> 10) & 0x1f, Man = H & 0x3ffu;
  float F;
  if (Exp == 0) {
    F = std::ldexp(float(Man), -24);
    return Sign ? -F : F;
  }
  uint32_t U = Exp == 31 ? (Sign | 0x7f800000u | (Man << 13))
                         : (Sign | ((Exp - 15 + 127) << 23) | (Man << 13));
  std::memcpy(&F, &U, 4);
  return F;
}

namespace {
/// The layout of an fp8 format: mantissa bits, exponent bias, the code of
/// the largest finite value and a NaN code (sign bit clear).
struct F8Format {
  int ManBits, Bias;
  uint8_t MaxCode, NanCode;
  double MaxValue;
};
} // namespace

static F8Format f8Format(DType T) {
  if (T == DType::F8E5M2)
    return {2, 15, 0x7b, 0x7e, 57344.0};
  return {3, 7, 0x7e, 0x7f, 448.0};
}

// The generated kernels' mt_f32_to_f8 (CudaCodegen.cpp's prelude) is this
// same computation in float, so both sides round alike.
uint8_t mtsched::floatToF8(float F, DType T) {
  F8Format Fmt = f8Format(T);
  uint8_t Sign = std::signbit(F) ? 0x80 : 0;
  double A = std::fabs(double(F));
  if (std::isnan(A))
    return Sign | Fmt.NanCode;
  if (A >= Fmt.MaxValue)
    return Sign | Fmt.MaxCode;
  unsigned Code;
  if (A < std::ldexp(1.0, 1 - Fmt.Bias)) {
    // Subnormal quanta; rounding up to 2^ManBits is the smallest normal.
    Code = unsigned(std::nearbyint(std::ldexp(A, Fmt.Bias - 1 + Fmt.ManBits)));
  } else {
    int E;
    std::frexp(A, &E);
    E -= 1; // A in [2^E, 2^(E+1))
    unsigned M = unsigned(std::nearbyint(std::ldexp(A, Fmt.ManBits - E)));
    // M == 2^(ManBits+1) carries into the exponent by itself.
    Code = (unsigned(E + Fmt.Bias) << Fmt.ManBits) + M - (1u << Fmt.ManBits);
  }
  return Sign | uint8_t(std::min<unsigned>(Code, Fmt.MaxCode));
}

float mtsched::f8ToFloat(uint8_t B, DType T) {
  F8Format Fmt = f8Format(T);
  unsigned Em = B & 0x7fu, E = Em >> Fmt.ManBits,
           M = Em & ((1u << Fmt.ManBits) - 1);
  double V;
  if (T == DType::F8E4M3 ? Em == 0x7fu : E == 31u)
    V = T == DType::F8E5M2 && M == 0 ? HUGE_VAL : NAN;
  else if (E == 0)
    V = std::ldexp(double(M), 1 - Fmt.Bias - Fmt.ManBits);
  else
    V = std::ldexp(double(M | (1u << Fmt.ManBits)),
                   int(E) - Fmt.Bias - Fmt.ManBits);
  return float((B & 0x80) ? -V : V);
}

double mtsched::roundTo(double D, DType T) {
  switch (T) {
  case DType::F32:
    return double(float(D));
  case DType::BF16:
    return bf16ToFloat(floatToBF16(float(D)));
  case DType::F16:
    return f16ToFloat(floatToF16(float(D)));
  case DType::F8E4M3:
  case DType::F8E5M2:
    return f8ToFloat(floatToF8(float(D), T), T);
  case DType::Bool:
    return D != 0; // NaN is true, as in PyTorch
  default:
    return std::nearbyint(D);
  }
}

/// Index into a tensor of shape Op for the flat index I of shape Out
/// (right-aligned broadcasting).
static int64_t broadcastIndex(llvm::ArrayRef<int64_t> Op,
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

static double epsOf(const Node &N) {
  if (const Attribute *A = N.getAttrs().get("eps"))
    return A->getNumber();
  // PyTorch's defaults: LayerNorm's 1e-5; rmsnorm's is the IR's 1e-6.
  return N.getOp() == OpCode::LayerNorm ? 1e-5 : 1e-6;
}

void mtsched::attentionReferenceRow(const AttentionShape &S, const double *Q,
                                    const double *K, const double *V, int64_t R,
                                    double *Out) {
  int64_t KvHead = S.kvHeadOf(R);
  attentionReferenceHeadRow(S, Q + R * S.D, K + KvHead * S.Skv * S.D,
                            V + KvHead * S.Skv * S.D, R, Out);
}

void mtsched::attentionReferenceHeadRow(const AttentionShape &S,
                                        const double *Qr, const double *Kh,
                                        const double *Vh, int64_t R,
                                        double *Out) {
  int64_t Last = S.lastKey(R % S.Sq);
  std::vector<double> P(Last + 1);
  double Max = -std::numeric_limits<double>::infinity();
  for (int64_t J = 0; J <= Last; ++J) {
    double Dot = 0;
    for (int64_t X = 0; X < S.D; ++X)
      Dot += Qr[X] * Kh[J * S.D + X];
    P[J] = Dot * S.Scale;
    Max = std::max(Max, P[J]);
  }
  double Sum = 0;
  for (double &X : P)
    Sum += X = std::exp(X - Max);
  std::fill(Out, Out + S.D, 0.0);
  for (int64_t J = 0; J <= Last; ++J)
    for (int64_t X = 0; X < S.D; ++X)
      Out[X] += P[J] / Sum * Vh[J * S.D + X];
}

llvm::Error mtsched::interpretNode(const Node &N, ValueData &Data) {
  std::vector<const std::vector<double> *> In;
  for (const Operand &O : N.getOperands()) {
    auto It = Data.find(O.V);
    if (It == Data.end())
      return err("no value for '%" + O.V->getName() + "'");
    In.push_back(&It->second);
  }
  const TensorType &T = N.getType();
  std::vector<double> Out(T.numElements());
  OpCode Op = N.getOp();
  if (Op == OpCode::MatMul) {
    const TensorType &A = N.getOperand(0)->getType(),
                     &B = N.getOperand(1)->getType();
    int64_t K = A.innerDim(), Nn = B.innerDim();
    int64_t M = A.Shape[A.rank() - 2];
    int64_t Batch = A.numElements() / (M * K);
    bool BatchedB = B.rank() > 2;
    // Rows in parallel: --run checks a 4096^3 GEMM in fp64 here.
    parallelChunks(
        Batch * M,
        [&](int64_t Begin, int64_t End) {
          for (int64_t Row = Begin; Row < End; ++Row) {
            int64_t Bt = Row / M;
            double *C = &Out[Row * Nn];
            const double *Ar = &(*In[0])[Row * K];
            const double *Bm = &(*In[1])[BatchedB ? Bt * K * Nn : 0];
            for (int64_t Kk = 0; Kk < K; ++Kk) {
              double Av = Ar[Kk];
              const double *Br = Bm + Kk * Nn;
              for (int64_t J = 0; J < Nn; ++J)
                C[J] += Av * Br[J];
            }
          }
        },
        /*MinChunk=*/
        std::max<int64_t>(1,
                          (int64_t(1) << 22) / std::max<int64_t>(1, K * Nn)));
    // fp8 operands: their scales, per tensor or per row of A / column
    // of B (then both operands are 2-D).
    if (N.getNumOperands() == 4) {
      bool RowA = In[2]->size() != 1, ColB = In[3]->size() != 1;
      for (int64_t R = 0; R < Batch * M; ++R)
        for (int64_t J = 0; J < Nn; ++J)
          Out[R * Nn + J] *= (*In[2])[RowA ? R : 0] * (*In[3])[ColB ? J : 0];
    }
  } else if (Op == OpCode::Attention) {
    std::optional<AttentionShape> S = attentionShapeOf(N);
    if (!S)
      return err("'%" + N.getName() + "' is not a well-formed attention");
    // Query rows in parallel: --run checks prefill attention in fp64 here.
    parallelChunks(
        S->B * S->Hq * S->Sq,
        [&](int64_t Begin, int64_t End) {
          for (int64_t R = Begin; R < End; ++R)
            attentionReferenceRow(*S, In[0]->data(), In[1]->data(),
                                  In[2]->data(), R, &Out[R * S->D]);
        },
        /*MinChunk=*/
        std::max<int64_t>(1, (int64_t(1) << 20) /
                                 std::max<int64_t>(1, S->Skv * S->D)));
  } else if (Op == OpCode::SwiGlu) {
    // silu(A Wg) * (A Wu), row by row.
    int64_t K = N.getOperand(0)->getType().innerDim(), Nn = T.innerDim();
    int64_t Rows = T.numElements() / Nn;
    parallelChunks(
        Rows,
        [&](int64_t Begin, int64_t End) {
          std::vector<double> G(Nn), U(Nn);
          for (int64_t I = Begin; I < End; ++I) {
            std::fill(G.begin(), G.end(), 0.0);
            std::fill(U.begin(), U.end(), 0.0);
            const double *Ar = &(*In[0])[I * K];
            for (int64_t Kk = 0; Kk < K; ++Kk) {
              const double *Gr = &(*In[1])[Kk * Nn], *Ur = &(*In[2])[Kk * Nn];
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
        std::max<int64_t>(1, (int64_t(1) << 22) /
                                 std::max<int64_t>(1, 2 * K * Nn)));
  } else if (Op == OpCode::AllToAll && In.size() == 3) {
    // One rank's uneven all_to_all: its own rows back, then zeros. The
    // counts are checked as every rank would check them.
    if (In[1]->size() != 1)
      return err("'%" + N.getName() +
                 "': only one-rank collectives (the identity) are interpreted");
    const TensorType &XT = N.getOperand(0)->getType();
    int64_t Rows = XT.Shape[0], Cap = T.Shape[0];
    int64_t RowElems = Rows ? XT.numElements() / Rows : 0;
    double Send = (*In[1])[0], Recv = (*In[2])[0];
    if (!(Send >= 0 && Send <= double(Rows)))
      return err("'%" + N.getName() + "': the send counts ask for " +
                 llvm::Twine(int64_t(Send)) + " rows of '%" +
                 N.getOperand(0)->getName() + "', which has " +
                 llvm::Twine(Rows));
    if (Recv != Send)
      return err("'%" + N.getName() + "': rank 0 expects " +
                 llvm::Twine(int64_t(Recv)) +
                 " rows from rank 0, which sends " +
                 llvm::Twine(int64_t(Send)));
    if (Recv > double(Cap))
      return err("'%" + N.getName() + "': rank 0 receives " +
                 llvm::Twine(int64_t(Recv)) +
                 " rows, more than its capacity of " + llvm::Twine(Cap));
    std::copy(In[0]->begin(), In[0]->begin() + int64_t(Recv) * RowElems,
              Out.begin());
  } else if (collectiveKindOf(Op) != CollectiveKind::None) {
    if (In.empty() || In[0]->size() != Out.size())
      return err("'%" + N.getName() +
                 "': only one-rank collectives (the identity) are interpreted");
    Out = *In[0];
  } else if (isSort(Op)) {
    // Each row of the last dimension in order: largest first for topk
    // (unless largest = false) and for sort with descending = true, else
    // smallest first; NaN counts as larger than every number; ties keep
    // index order.
    const TensorType &InT = N.getOperand(0)->getType();
    int64_t Len = InT.Shape.back(), Rows = InT.numElements() / Len;
    int64_t K = T.Shape.back();
    bool Largest;
    if (Op == OpCode::TopK) {
      const Attribute *A = N.getAttrs().get("largest");
      Largest = !A || A->getBool();
    } else {
      const Attribute *A = N.getAttrs().get("descending");
      Largest = A && A->getBool();
    }
    std::vector<double> Indices(Out.size());
    std::vector<int64_t> Order(Len);
    for (int64_t R = 0; R < Rows; ++R) {
      const double *Row = In[0]->data() + R * Len;
      for (int64_t I = 0; I < Len; ++I)
        Order[I] = I;
      // A total order (ties by index), so std::sort needs no stability.
      auto Before = [&](int64_t A, int64_t B) {
        double X = Row[A], Y = Row[B];
        bool NX = std::isnan(X), NY = std::isnan(Y);
        if (NX != NY)
          return Largest ? NX : NY;
        if (!NX && X != Y)
          return Largest ? X > Y : X < Y;
        return A < B;
      };
      std::sort(Order.begin(), Order.end(), Before);
      for (int64_t J = 0; J < K; ++J) {
        Out[R * K + J] = Row[Order[J]];
        Indices[R * K + J] = double(Order[J]);
      }
    }
    Data[N.getResult(1)] = std::move(Indices);
  } else if (Op == OpCode::Scatter) {
    std::optional<ScatterShape> S = scatterShapeOf(N);
    if (!S)
      return err("'%" + N.getName() + "' is not a well-formed 'scatter'");
    Out = *In[0];
    const std::vector<double> &Idx = *In[1], &Src = *In[2];
    for (int64_t O = 0; O < S->Outer; ++O)
      for (int64_t I = 0; I < S->Inner; ++I)
        for (int64_t K = 0; K < S->IdxLen; ++K) {
          int64_t Pos = (O * S->IdxLen + K) * S->Inner + I;
          double X = Idx[Pos];
          if (!(X >= 0 && X < double(S->DstLen)))
            return err("'%" + N.getName() + "': index " +
                       std::to_string(int64_t(X)) + " at position " +
                       std::to_string(Pos) + " of %" +
                       N.getOperand(1)->getName() + " is outside [0, " +
                       std::to_string(S->DstLen) + ")");
          double &At = Out[(O * S->DstLen + int64_t(X)) * S->Inner + I];
          At = S->Add ? At + Src[Pos] : Src[Pos];
        }
  } else if (isScan(Op)) {
    std::optional<ScanShape> S = scanShapeOf(N);
    if (!S)
      return err("'%" + N.getName() + "' is not a well-formed '" +
                 N.getOpName() + "'");
    const std::vector<double> &X = *In[0];
    for (int64_t O = 0; O < S->Outer; ++O)
      for (int64_t I = 0; I < S->Inner; ++I) {
        double Acc = 0;
        for (int64_t L = 0; L < S->Len; ++L) {
          int64_t Pos = (O * S->Len + L) * S->Inner + I;
          Acc += X[Pos];
          Out[Pos] = Acc;
        }
      }
  } else if (isLayout(Op)) {
    std::optional<LayoutPlan> P = layoutPlanOf(N);
    if (!P)
      return err("'%" + N.getName() + "' is not a well-formed '" +
                 N.getOpName() + "'");
    for (int64_t I = 0; I < int64_t(Out.size()); ++I) {
      auto [K, Idx] = P->sourceOf(I);
      if (P->IndexOperand >= 0) {
        int64_t Pos = P->indexPositionOf(I);
        double X = (*In[P->IndexOperand])[Pos];
        if (!(X >= 0 && X < double(P->IndexBound)))
          return err("'%" + N.getName() + "': index " +
                     // Integer tensors hold integers (rounded on input).
                     std::to_string(int64_t(X)) + " at position " +
                     llvm::Twine(Pos).str() + " of " + "%" +
                     N.getOperand(P->IndexOperand)->getName() +
                     " is outside [0, " + llvm::Twine(P->IndexBound).str() +
                     ")");
        Idx += int64_t(X) * P->IndexCoef;
      }
      Out[I] = (*In[K])[Idx];
    }
  } else if (isPointwise(Op)) {
    std::optional<double> Scalar = pointwiseScalar(N);
    llvm::SmallVector<double, 3> X(In.size() + (Scalar ? 1 : 0));
    if (Scalar)
      X.back() = *Scalar;
    for (int64_t I = 0; I < int64_t(Out.size()); ++I) {
      for (unsigned J = 0; J < In.size(); ++J)
        X[J] = (*In[J])[broadcastIndex(N.getOperand(J)->getType().Shape,
                                       T.Shape, I)];
      Out[I] = evaluatePointwise(Op, X);
    }
  } else if (Op == OpCode::Sum || Op == OpCode::Max) {
    const TensorType &IT = N.getOperand(0)->getType();
    int64_t Dim = IT.rank() - 1;
    if (const Attribute *D = N.getAttrs().get("dim"))
      Dim = D->getInt() < 0 ? D->getInt() + IT.rank() : D->getInt();
    int64_t After = 1;
    for (unsigned D = Dim + 1; D < IT.rank(); ++D)
      After *= IT.Shape[D];
    int64_t Len = IT.Shape[Dim];
    for (int64_t I = 0; I < int64_t(Out.size()); ++I) {
      double Acc =
          Op == OpCode::Sum ? 0 : -std::numeric_limits<double>::infinity();
      for (int64_t D = 0; D < Len; ++D) {
        double V = (*In[0])[(I / After) * Len * After + D * After + I % After];
        Acc = Op == OpCode::Sum ? Acc + V : std::max(Acc, V);
      }
      Out[I] = Acc;
    }
  } else if (isRowReduction(Op)) {
    int64_t L = T.innerDim(), Rows = T.numElements() / L;
    for (int64_t R = 0; R < Rows; ++R) {
      std::vector<double> Row(In[0]->begin() + R * L,
                              In[0]->begin() + (R + 1) * L);
      const Node *Chain[] = {&N};
      ValueData Tmp;
      Tmp[N.getOperand(0)] = {};
      for (unsigned I = 1; I < N.getNumOperands(); ++I)
        Tmp[N.getOperand(I)] = *In[I];
      if (llvm::Error E =
              interpretRowChain(Chain, N.getOperand(0), R, Rows, Row, Tmp))
        return E;
      std::copy(Row.begin(), Row.end(), Out.begin() + R * L);
    }
  } else {
    return err("the interpreter has no semantics for '" + N.getOpName() + "'");
  }
  // Other values keep fp64 (the reference the GPU's rounding is measured
  // against), but an fp8 value is its rounding: quantising to fp8 is the
  // computation, and its error is too large for any tolerance to absorb.
  // A bool is 0 or 1 (a cast to bool of 2.5 is 1).
  if (isFp8DType(T.Dtype) || T.Dtype == DType::Bool)
    for (double &X : Out)
      X = roundTo(X, T.Dtype);
  Data[N.getResult()] = std::move(Out);
  return llvm::Error::success();
}

RowOperands::~RowOperands() = default;

int64_t StoredRowOperands::size(const Value *V) const {
  auto It = Data.find(V);
  return It == Data.end() ? -1 : int64_t(It->second.size());
}

double StoredRowOperands::at(const Value *V, int64_t I) const {
  return Data.find(V)->second[size_t(I)];
}

llvm::Error mtsched::interpretRowChain(llvm::ArrayRef<const Node *> Chain,
                                       const Value *Start, int64_t R,
                                       int64_t Rows, std::vector<double> &Row,
                                       const ValueData &Data) {
  return interpretRowChain(Chain, Start, R, Rows, Row, StoredRowOperands(Data));
}

llvm::Error mtsched::interpretRowChain(llvm::ArrayRef<const Node *> Chain,
                                       const Value *Start, int64_t R,
                                       int64_t Rows, std::vector<double> &Row,
                                       const RowOperands &Data) {
  int64_t L = Row.size();
  const Value *Prev = Start;
  auto At = [&](const Value *V, int64_t C) -> double {
    int64_t Num = Data.size(V);
    if (Num == 1)
      return Data.at(V, 0);
    if (Num == L && V->getType().innerDim() == L)
      return Data.at(V, C);
    if (Num == Rows * L)
      return Data.at(V, R * L + C);
    if (Num == Rows)
      return Data.at(V, R);
    return Data.at(V, broadcastIndex(V->getType().Shape, Start->getType().Shape,
                                     R * L + C));
  };
  for (const Node *N : Chain) {
    for (const Operand &O : N->getOperands())
      if (O.V != Prev && Data.size(O.V) < 0)
        return err("no value for '%" + O.V->getName() + "'");
    OpCode Op = N->getOp();
    if (Op == OpCode::RmsNorm) {
      double SS = 0;
      for (double V : Row)
        SS += V * V;
      double Scale = 1 / std::sqrt(SS / L + epsOf(*N));
      for (int64_t C = 0; C < L; ++C)
        Row[C] = Row[C] * Scale * At(N->getOperand(1), C);
    } else if (Op == OpCode::LayerNorm) {
      // Two passes, as torch's reference: the mean, then the biased
      // variance of the deviations.
      double Mean = 0, Var = 0;
      for (double V : Row)
        Mean += V;
      Mean /= L;
      for (double V : Row)
        Var += (V - Mean) * (V - Mean);
      double Scale = 1 / std::sqrt(Var / L + epsOf(*N));
      for (int64_t C = 0; C < L; ++C) {
        Row[C] = (Row[C] - Mean) * Scale;
        if (N->getNumOperands() > 1)
          Row[C] *= At(N->getOperand(1), C);
        if (N->getNumOperands() > 2)
          Row[C] += At(N->getOperand(2), C);
      }
    } else if (Op == OpCode::Softmax) {
      double Mx = -std::numeric_limits<double>::infinity(), Sum = 0;
      for (double V : Row)
        Mx = std::max(Mx, V);
      for (double &V : Row)
        Sum += (V = std::exp(V - Mx));
      for (double &V : Row)
        V /= Sum;
    } else if (isPointwise(Op)) {
      std::optional<double> Scalar = pointwiseScalar(*N);
      llvm::SmallVector<double, 3> X(N->getNumOperands() + (Scalar ? 1 : 0));
      if (Scalar)
        X.back() = *Scalar;
      for (int64_t C = 0; C < L; ++C) {
        for (unsigned I = 0; I < N->getNumOperands(); ++I)
          X[I] = N->getOperand(I) == Prev ? Row[C] : At(N->getOperand(I), C);
        Row[C] = evaluatePointwise(Op, X);
      }
      if (isFp8DType(N->getType().Dtype) || N->getType().Dtype == DType::Bool)
        for (double &V : Row)
          V = roundTo(V, N->getType().Dtype);
    } else {
      return err("'%" + N->getName() + "' cannot be in an epilogue");
    }
    Prev = N->getResult();
  }
  return llvm::Error::success();
}

llvm::Error mtsched::interpretGraph(const Graph &G, ValueData &Data) {
  // interpretNode runs a collective as one rank's identity; with more ranks
  // that would be a wrong answer, not a reference.
  if (G.getWorldSize() > 1)
    for (const auto &N : G.getNodes())
      if (collectiveKindOf(N->getOp()) != CollectiveKind::None)
        return err("'%" + N->getName() +
                   "': the interpreter runs one rank, and this " +
                   N->getOpName() + " needs the values of " +
                   llvm::Twine(G.getWorldSize()) +
                   " ranks (world_size); interpret a one-rank graph");
  for (const auto &N : G.getNodes())
    if (llvm::Error E = interpretNode(*N, Data))
      return E;
  return llvm::Error::success();
}
