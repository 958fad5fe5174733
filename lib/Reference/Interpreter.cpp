//===- Interpreter.cpp - fp64 reference semantics of the IR ops -----------===//
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "mtsched/Reference/RandomInputs.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <list>
#include <optional>
#include <unistd.h>

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

HostValues HostValues::zeros(DType T, size_t N) {
  if (isFloatDType(T))
    return HostValues(std::vector<double>(N));
  return HostValues(std::vector<int64_t>(N));
}

std::vector<double> HostValues::toDoubles() const {
  if (!IsInt)
    return F;
  return std::vector<double>(I.begin(), I.end());
}

int64_t mtsched::wrapInt(int64_t V, DType T) {
  // A bool is held as the integer 0 or 1.
  if (T == DType::Bool)
    return V != 0;
  if (T == DType::I32)
    return int64_t(int32_t(uint32_t(uint64_t(V))));
  return V;
}

int64_t mtsched::doubleToInt(double D, DType T) {
  // Any non-zero value is true, NaN too, as in PyTorch.
  if (T == DType::Bool)
    return D != 0;
  if (!std::isfinite(D))
    return 0;
  // Truncated, every finite double is an integer; fmod reduces its
  // magnitude exactly below 2^64, and the sign is applied modulo 2^64.
  double M = std::fmod(std::fabs(std::trunc(D)), 18446744073709551616.0);
  uint64_t U = uint64_t(M);
  if (D < 0)
    U = 0 - U;
  return wrapInt(int64_t(U), T);
}

/// Two's-complement arithmetic on int64_t without signed overflow (which
/// C++ leaves undefined): through uint64_t, then wrapped to T's width.
int64_t mtsched::addWrap(int64_t A, int64_t B, DType T) {
  return wrapInt(int64_t(uint64_t(A) + uint64_t(B)), T);
}
static int64_t subWrap(int64_t A, int64_t B, DType T) {
  return wrapInt(int64_t(uint64_t(A) - uint64_t(B)), T);
}
static int64_t mulWrap(int64_t A, int64_t B, DType T) {
  return wrapInt(int64_t(uint64_t(A) * uint64_t(B)), T);
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

HostValues mtsched::fromDoubles(std::vector<double> F, DType T) {
  if (isFloatDType(T))
    return HostValues(std::move(F));
  std::vector<int64_t> I(F.size());
  for (size_t K = 0; K < F.size(); ++K)
    I[K] = doubleToInt(F[K], T);
  return HostValues(std::move(I));
}

void mtsched::copyElement(HostValues &To, size_t I, const HostValues &From,
                          size_t J, DType T) {
  if (To.isInt())
    To.ints()[I] = From.isInt() ? wrapInt(From.ints()[J], T)
                                : doubleToInt(From.floats()[J], T);
  else
    To.floats()[I] = From.getDouble(J);
}

int64_t mtsched::intAt(const HostValues &V, size_t I) {
  return V.isInt() ? V.ints()[I] : doubleToInt(V.floats()[I], DType::I64);
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
  parallelChunks(
      Rows,
      [&](int64_t Begin, int64_t End) {
        std::vector<double> G(Nn), U(Nn);
        for (int64_t I = Begin; I < End; ++I) {
          std::fill(G.begin(), G.end(), 0.0);
          std::fill(U.begin(), U.end(), 0.0);
          const double *Ar = &A[I * K];
          for (int64_t Kk = 0; Kk < K; ++Kk) {
            const double *Gr = &Wg[Kk * Nn], *Ur = &Wu[Kk * Nn];
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

RowOperands::~RowOperands() = default;

int64_t StoredRowOperands::size(const Value *V) const {
  auto It = Data.find(V);
  return It == Data.end() ? -1 : int64_t(It->second.size());
}

double StoredRowOperands::at(const Value *V, int64_t I) const {
  return Data.find(V)->second.getDouble(size_t(I));
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
  // Past a reshape or transpose (a GEMM's epilogue through layout ops):
  // Row keeps the start's order, and element C of it is at index
  // Moved(R * L + C) of the shape Iter that later values have.
  std::vector<ElementMap> Maps;
  llvm::ArrayRef<int64_t> Iter;
  auto Moved = [&](int64_t I) {
    for (const ElementMap &M : Maps)
      I = M.apply(I);
    return I;
  };
  auto At = [&](const Value *V, int64_t C) -> double {
    int64_t Num = Data.size(V);
    if (Num == 1)
      return Data.at(V, 0);
    if (!Maps.empty())
      return Data.at(
          V, broadcastIndex(V->getType().Shape, Iter, Moved(R * L + C)));
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
    if (isLayout(Op)) {
      std::optional<ElementMap> M = elementMapOf(*N);
      if (!M || N->getOperand(0) != Prev)
        return err("'%" + N->getName() +
                   "' is a layout op that moves no element chain through");
      Maps.push_back(std::move(*M));
      Iter = N->getType().Shape;
      Prev = N->getResult();
      continue;
    }
    if (isRowReduction(Op) && !Maps.empty())
      return err("row reduction '%" + N->getName() +
                 "' follows a layout op in a row chain");
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

static_assert(sizeof(double) == 8 && sizeof(int64_t) == 8,
              "interpretBytes counts 8 bytes an element");

/// The bytes HostValues of V hold.
static uint64_t hostBytes(const Value &V) {
  // numElements fits: the parser bounds a type's bytes by 2^63-1.
  return llvm::SaturatingMultiply<uint64_t>(uint64_t(V.getType().numElements()),
                                            8);
}

/// interpretBytes up to node Upto (null: all of G), also saying which node
/// (null: the inputs) first needs more than MaxBytes, if one does.
static uint64_t bytesNeeded(const Graph &G, const Node *Upto, uint64_t MaxBytes,
                            const Node *&Crossing, bool &Crossed) {
  uint64_t Kept = 0, Largest = 0;
  Crossing = nullptr;
  auto Add = [&](const Value &V) {
    Kept = llvm::SaturatingAdd(Kept, hostBytes(V));
    Largest = std::max(Largest, hostBytes(V));
  };
  auto Total = [&] { return llvm::SaturatingAdd(Kept, Largest); };
  for (const auto &In : G.getInputs())
    Add(*In);
  Crossed = Total() > MaxBytes;
  for (const auto &N : G.getNodes()) {
    if (Crossed)
      break;
    for (unsigned R = 0; R < N->getNumResults(); ++R)
      Add(*N->getResult(R));
    if (Total() > MaxBytes) {
      Crossing = N.get();
      Crossed = true;
    }
    if (N.get() == Upto)
      break;
  }
  return Total();
}

uint64_t mtsched::interpretBytes(const Graph &G, const Node *Upto) {
  const Node *Crossing;
  bool Crossed;
  return bytesNeeded(G, Upto, UINT64_MAX, Crossing, Crossed);
}

uint64_t mtsched::defaultInterpretMaxBytes() {
  long Pages = sysconf(_SC_PHYS_PAGES), PageSize = sysconf(_SC_PAGESIZE);
  if (Pages <= 0 || PageSize <= 0)
    return uint64_t(4) << 30;
  return llvm::SaturatingMultiply(uint64_t(Pages), uint64_t(PageSize)) / 4;
}

std::optional<InterpretRefusal> mtsched::checkInterpretable(const Graph &G,
                                                            uint64_t MaxBytes) {
  for (const auto &N : G.getNodes()) {
    // interpretNode runs a collective as one rank's identity; with more
    // ranks that would be a wrong answer, not a reference.
    if (G.getWorldSize() > 1 &&
        collectiveKindOf(N->getOp()) != CollectiveKind::None)
      return InterpretRefusal{
          N->getLoc(), "'%" + N->getName() +
                           "': the interpreter runs one rank, and this " +
                           N->getOpName().str() + " needs the values of " +
                           std::to_string(G.getWorldSize()) +
                           " ranks (world_size); interpret a one-rank graph"};
    if (N->getOp() == OpCode::Custom)
      return InterpretRefusal{N->getLoc(),
                              "'%" + N->getName() +
                                  "': the interpreter has no semantics for '" +
                                  N->getOpName().str() + "'"};
  }
  const Node *Crossing;
  bool Crossed;
  uint64_t Need = bytesNeeded(G, nullptr, MaxBytes, Crossing, Crossed);
  if (!Crossed)
    return std::nullopt;
  return InterpretRefusal{
      Crossing ? Crossing->getLoc() : G.getLoc(),
      "interpreting '@" + G.getName() + "' needs " + std::to_string(Need) +
          " bytes " +
          (Crossing ? "up to '%" + Crossing->getName() + "'"
                    : std::string("for its inputs")) +
          " (8 an element of every value, plus the largest value once "
          "more), more than --interpret-max-bytes=" +
          std::to_string(MaxBytes)};
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
