//===- Sort.cpp - topk and sort, a row in order ---------------------------===//
//
// `topk(%x) {k, largest}` and `sort(%x) {descending}` order each row along
// the last dimension of one operand (a float or integer tensor of rank 1 or
// more) and define two results: the values, of the operand's element type,
// and their positions in the row, i64. topk keeps the first k of each row.
// Largest first for topk (unless largest = false) and for sort with
// descending = true, else smallest first; NaN counts as larger than every
// number; ties keep index order. Both ops share this file: one order, one
// type rule and one kernel, told apart by their attributes.
//
// The kernel is a grid of rows (x) by chunks of 256 elements of the row
// (y). Each thread takes elements of its row and counts the elements that
// come before each in the op's total order: that count is the element's
// place, so the row is ordered without a sort network, and topk keeps the
// places below k. A row of n elements costs n comparisons per element,
// spread over n / 256 blocks: routing rows (experts) take microseconds, and
// one row of the 32,768 expert ids a prefill's top-8 routing orders takes
// about a millisecond. The interpreter orders the same way, so values and
// indices match it exactly.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "llvm/Support/Error.h"
#include <algorithm>
#include <cmath>

using namespace mtsched;
using namespace mtsched::codegen;

static bool inferType(const Node &N, llvm::MutableArrayRef<TensorType> Results,
                      OpErrorFn Error) {
  TensorType &Values = Results[0], &Indices = Results[1];
  const std::string Op = "'" + N.getOpName().str() + "'";
  const TensorType &In = N.getOperand(0)->getType();
  if (In.rank() == 0) {
    Error(N.getLoc(), Op + " needs an operand of rank 1 or more");
    return false;
  }
  // Only the last dimension: what routers and token grouping use.
  if (const Attribute *D = N.getAttrs().get("dim"))
    if (!D->isInt() || (D->getInt() != -1 && D->getInt() != In.rank() - 1)) {
      Error(N.getLoc(), Op +
                            " orders along the last dimension only; "
                            "attribute 'dim' must be -1 or " +
                            llvm::Twine(int64_t(In.rank()) - 1));
      return false;
    }
  auto Bool = [&](const char *Key) {
    const Attribute *A = N.getAttrs().get(Key);
    if (A && !A->isBool()) {
      Error(N.getLoc(), "attribute '" + llvm::Twine(Key) + "' of " + Op +
                            " must be a bool");
      return false;
    }
    return true;
  };
  Values = In;
  int64_t Len = In.Shape.back();
  if (N.getOp() == OpCode::TopK) {
    if (!Bool("largest"))
      return false;
    const Attribute *K = N.getAttrs().get("k");
    if (!K || !K->isInt()) {
      Error(N.getLoc(), "'topk' needs attribute 'k', an integer");
      return false;
    }
    if (K->getInt() < 1 || K->getInt() > Len) {
      Error(N.getLoc(), "'k' of 'topk' must be in [1, " + llvm::Twine(Len) +
                            "] (the last dimension of '%" +
                            N.getOperand(0)->getName() + "'), got " +
                            llvm::Twine(K->getInt()));
      return false;
    }
    Values.Shape.back() = K->getInt();
  } else if (!Bool("descending")) {
    return false;
  }
  Indices = Values;
  Indices.Dtype = DType::I64;
  return true;
}

/// One operation per value kept (the roofline's count for a plain buffer).
static double flops(const Node &N) { return double(N.getType().numElements()); }

/// Whether verified node N puts the largest first.
static bool largestFirst(const Node &N) {
  if (N.getOp() == OpCode::TopK) {
    const Attribute *A = N.getAttrs().get("largest");
    return !A || A->getBool();
  }
  const Attribute *A = N.getAttrs().get("descending");
  return A && A->getBool();
}

static bool isNaN(double X) { return std::isnan(X); }
static bool isNaN(int64_t) { return false; }

/// Rows of Len elements of In, each in order (see the top of this file),
/// the first K of each into Out and their positions into Indices.
template <typename E>
static void sortRows(const std::vector<E> &In, std::vector<E> &Out,
                     std::vector<int64_t> &Indices, int64_t Rows, int64_t Len,
                     int64_t K, bool Largest) {
  std::vector<int64_t> Order(Len);
  for (int64_t R = 0; R < Rows; ++R) {
    const E *Row = In.data() + R * Len;
    for (int64_t I = 0; I < Len; ++I)
      Order[I] = I;
    // A total order (ties by index), so std::sort needs no stability.
    auto Before = [&](int64_t A, int64_t B) {
      E X = Row[A], Y = Row[B];
      bool NX = isNaN(X), NY = isNaN(Y);
      if (NX != NY)
        return Largest ? NX : NY;
      if (!NX && X != Y)
        return Largest ? X > Y : X < Y;
      return A < B;
    };
    std::sort(Order.begin(), Order.end(), Before);
    for (int64_t J = 0; J < K; ++J) {
      Out[R * K + J] = Row[Order[J]];
      Indices[R * K + J] = Order[J];
    }
  }
}

static llvm::Error interpret(const Node &N,
                             llvm::ArrayRef<const HostValues *> In,
                             llvm::MutableArrayRef<HostValues> Results) {
  HostValues &Result = Results[0];
  int64_t NumOut = N.getType().numElements();
  const TensorType &T = N.getType();
  const TensorType &InT = N.getOperand(0)->getType();
  int64_t Len = InT.Shape.back(), Rows = Len ? InT.numElements() / Len : 0;
  int64_t K = T.Shape.back();
  bool Largest = largestFirst(N);
  std::vector<int64_t> Indices(NumOut);
  Result = HostValues::zeros(T.Dtype, NumOut);
  // Read from the operand's own storage: a copy of a tensor near
  // --interpret-max-bytes would exceed it.
  const HostValues &X = *In[0];
  if (!Result.isInt()) {
    std::vector<double> Converted; // Only for an operand held as integers.
    if (X.isInt())
      Converted = X.toDoubles();
    sortRows(X.isInt() ? Converted : X.floats(), Result.floats(), Indices, Rows,
             Len, K, Largest);
  } else if (X.isInt()) {
    sortRows(X.ints(), Result.ints(), Indices, Rows, Len, K, Largest);
  } else {
    sortRows(fromDoubles(X.floats(), T.Dtype).ints(), Result.ints(), Indices,
             Rows, Len, K, Largest);
  }
  Results[1] = HostValues(std::move(Indices));
  return llvm::Error::success();
}

static llvm::Expected<KernelSource> kernel(llvm::StringRef Name,
                                           const Node &N) {
  auto Err = [&](const llvm::Twine &Msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() + "': " + Msg);
  };
  if ((N.getOp() != OpCode::TopK && N.getOp() != OpCode::Sort) ||
      N.getNumResults() != 2 || N.getNumOperands() != 1 ||
      N.getOperand(0)->getType().rank() == 0)
    return Err("not a well-formed topk or sort");
  const TensorType &In = N.getOperand(0)->getType();
  int64_t Len = In.Shape.back(), Rows = In.numElements() / Len;
  int64_t K = N.getType().Shape.back();
  bool Largest = largestFirst(N);
  const unsigned Block = 256;
  std::string Fn = sanitizeIdentifier(Name);
  ParamList Params;
  Params.Inputs.insert(N.getOperand(0));
  Params.Outputs.push_back(N.getResult(0));
  Params.Outputs.push_back(N.getResult(1));
  // Keys compare in float for floating-point rows (bf16 and f16 widen
  // exactly) and in their own type for integer rows.
  bool Float = isFloatDType(In.Dtype);
  std::string Key = Float ? "float" : "long long";
  std::string X = Params.name(N.getOperand(0));
  std::string Load = Float ? loadExpr(In.Dtype, "row", "{0}")
                           : std::string("(long long)row[{0}]");
  auto LoadAt = [&](const std::string &Idx) {
    std::string S = Load;
    S.replace(S.find("{0}"), 3, Idx);
    return S;
  };

  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << kernelPrelude() << "\n// " << N.getOpName() << " %" << N.getName()
     << ", %" << N.getResult(1)->getName() << ": "
     << (Largest ? "largest" : "smallest")
     << " first; rows x chunks of the row, each element placed by\n"
     << "// counting those before it\n"
     << "__device__ __forceinline__ bool mt_before(" << Key
     << " x, long long a, " << Key << " y, long long b) {\n"
     << "  const bool nx = x != x, ny = y != y; // NaN\n"
     << "  if (nx != ny)\n    return " << (Largest ? "nx" : "ny") << ";\n"
     << "  if (!nx && x != y)\n    return x " << (Largest ? ">" : "<")
     << " y;\n"
     << "  return a < b;\n}\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << Block << ") " << Fn
     << "(" << Params.signature() << ") {\n"
     << "  const long long r = blockIdx.x;\n"
     << "  const " << storageType(In.Dtype) << " *row = " << X << " + r * "
     << Len << "LL;\n"
     << "  for (long long i = (long long)blockIdx.y * " << Block
     << " + threadIdx.x; i < " << Len << "LL;\n"
     << "       i += (long long)gridDim.y * " << Block << ") {\n"
     << "    const " << Key << " v = " << LoadAt("i") << ";\n"
     << "    long long place = 0;\n"
     << "    for (long long j = 0; j < " << Len << "LL; ++j)\n"
     << "      place += mt_before(" << LoadAt("j") << ", j, v, i);\n"
     << "    if (place < " << K << "LL) {\n"
     << "      " << Params.name(N.getResult(0)) << "_out[r * " << K
     << "LL + place] = row[i];\n"
     << "      " << Params.name(N.getResult(1)) << "_out[r * " << K
     << "LL + place] = i;\n"
     << "    }\n  }\n}\n";

  KernelSource KS;
  KS.Name = Fn;
  KS.Source = OS.str();
  KS.Inputs.assign(Params.Inputs.begin(), Params.Inputs.end());
  KS.Outputs = Params.Outputs;
  KS.BlockX = Block;
  KS.GridX = unsigned(Rows);
  KS.GridY = unsigned(std::min<int64_t>((Len + Block - 1) / Block, 65535));
  return KS;
}

void mtsched::opunits::registerTopK() {
  registerOpUnitInfo(OpCode::TopK, {inferType, flops});
  registerOpUnitReference(OpCode::TopK, interpret);
  registerOpUnitKernel(OpCode::TopK, kernel);
}

void mtsched::opunits::registerSort() {
  registerOpUnitInfo(OpCode::Sort, {inferType, flops});
  registerOpUnitReference(OpCode::Sort, interpret);
  registerOpUnitKernel(OpCode::Sort, kernel);
}
