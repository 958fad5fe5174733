//===- Cumsum.cpp - cumsum, an op with its own kernel ---------------------===//
//
// `cumsum(%x) {dim}` keeps %x's shape: element i along 'dim' is the sum of
// elements 0..i of its fibre. Seen as [Outer, Len, Inner] (IR/Scan.h), each
// of the Outer * Inner fibres is summed in order: floating-point sums
// accumulate in fp64 in the interpreter and in fp32 in the kernel (as
// PyTorch does for bf16 and f16), integers exactly, wrapping at the
// result's width at every step (torch.cumsum(x, dim, dtype=torch.int32)).
//
// The kernel runs one thread per fibre, summing in order: fp32 for
// floating-point tensors (bf16 and f16 widen exactly) and 64-bit for
// integers, each running sum rounded to the element type where it is
// stored. The loads of a fibre do not depend on the sum, so they pipeline;
// routing scans (a token mask down [T, E] or a row of expert counts) are
// thousands of elements per fibre at most.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/IR/Scan.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Reference/OpUnitReference.h"

using namespace mtsched;
using namespace mtsched::codegen;

static bool inferType(const Node &N, llvm::MutableArrayRef<TensorType> Results,
                      OpErrorFn Error) {
  TensorType &Result = Results.front();
  const TensorType &X = N.getOperand(0)->getType();
  if (X.rank() == 0) {
    Error(N.getOperands()[0].Loc,
          "'" + N.getOpName() + "' needs an operand of rank 1 or more");
    return false;
  }
  if (!verifyDimAttr(N, X.rank(), -1, Error))
    return false;
  Result = X;
  return true;
}

/// One addition per element.
static double flops(const Node &N) { return double(N.getType().numElements()); }

static llvm::Error notWellFormed(const Node &N) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'%" + N.getName() +
                                     "' is not a well-formed 'cumsum'");
}

static llvm::Error interpret(const Node &N,
                             llvm::ArrayRef<const HostValues *> In,
                             llvm::MutableArrayRef<HostValues> Results) {
  HostValues &Result = Results.front();
  std::optional<ScanShape> S = splitAtDim(N.getOperand(0)->getType(), N);
  if (!S)
    return notWellFormed(N);
  DType T = N.getType().Dtype;
  const HostValues &X = *In[0];
  Result = HostValues::zeros(T, N.getType().numElements());
  for (int64_t O = 0; O < S->Outer; ++O)
    for (int64_t I = 0; I < S->Inner; ++I) {
      int64_t IAcc = 0;
      double FAcc = 0;
      for (int64_t L = 0; L < S->Len; ++L) {
        int64_t Pos = (O * S->Len + L) * S->Inner + I;
        if (Result.isInt()) {
          int64_t V = X.isInt() ? X.ints()[Pos]
                                : doubleToInt(X.floats()[Pos], DType::I64);
          // Through uint64_t: two's complement without signed overflow.
          Result.ints()[Pos] = IAcc =
              wrapInt(int64_t(uint64_t(IAcc) + uint64_t(V)), T);
        } else {
          Result.floats()[Pos] = FAcc += X.getDouble(Pos);
        }
      }
    }
  return llvm::Error::success();
}

static llvm::Expected<KernelSource> kernel(llvm::StringRef Name,
                                           const Node &N) {
  std::optional<ScanShape> S = splitAtDim(N.getOperand(0)->getType(), N);
  if (!S)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() +
                                       "': not a well-formed cumsum");
  const unsigned Block = 128;
  std::string Fn = sanitizeIdentifier(Name);
  ParamList Params;
  Params.Inputs.insert(N.getOperand(0));
  Params.Outputs.push_back(N.getResult());
  DType T = N.getType().Dtype;
  bool Float = isFloatDType(T);
  std::string X = Params.name(N.getOperand(0));
  std::string Out = Params.name(N.getResult()) + "_out";
  std::string In = std::to_string(S->Inner) + "LL";
  std::string Len = std::to_string(S->Len) + "LL";
  std::string Load = Float ? loadExpr(T, X, "p") : "(long long)" + X + "[p]";
  std::string Store = Float ? storeExpr(T, "acc") : "acc";

  std::string Src;
  llvm::raw_string_ostream OS(Src);
  emitFibreKernelHead(OS,
                      "cumsum %" + N.getName() +
                          ": one thread per fibre across the dimension, "
                          "summed in order",
                      Fn, Params, Block, S->fibres(), S->Inner);
  OS << "    " << (Float ? "float" : "long long") << " acc = 0;\n"
     << "    for (long long l = 0; l < " << Len << "; ++l) {\n"
     << "      const long long p = (o * " << Len << " + l) * " << In
     << " + c;\n"
     << "      acc += " << Load << ";\n"
     << "      " << Out << "[p] = " << Store << ";\n"
     << "    }\n  }\n}\n";

  return gridStrideKernel(Fn, OS.str(), Params, Block, S->fibres());
}

void mtsched::opunits::registerCumsum() {
  registerOpUnitInfo(OpCode::Cumsum, {inferType, flops});
  registerOpUnitReference(OpCode::Cumsum, interpret);
  registerOpUnitKernel(OpCode::Cumsum, kernel);
}
