//===- Prod.cpp - prod, the product along one dimension -------------------===//
//
// `prod(%x) {dim, keepdim}` is torch.prod(x, dim, keepdim): the product of
// each fibre along 'dim' (default -1, negative counts from the end), the
// dimension dropped, or kept as 1 with keepdim = true; the result has the
// operand's element type (the importer casts integers to i64 first, as
// PyTorch's result is). An empty fibre's product is 1.
//
// Seen as [Outer, Len, Inner] (IR/Scan.h), each of the Outer * Inner
// fibres is multiplied in order: in fp64 in the interpreter and in fp32 in
// the kernel (bf16 and f16 widen exactly; PyTorch also multiplies those in
// fp32), integers exactly, wrapping at the result's width at every step as
// PyTorch's integer arithmetic does. The kernel runs one thread per fibre,
// which writes one element; exp(sum(log)) would be neither exact for
// integers nor defined for non-positive values, so this is a kernel of its
// own and not a rewrite.
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
  std::optional<int64_t> D = verifyDimAttr(N, X.rank(), -1, Error);
  if (!D)
    return false;
  const Attribute *Keep = N.getAttrs().get("keepdim");
  if (Keep && !Keep->isBool()) {
    Error(N.getLoc(), "attribute 'keepdim' must be true or false");
    return false;
  }
  Result = X;
  if (Keep && Keep->getBool())
    Result.Shape[*D] = 1;
  else
    Result.Shape.erase(Result.Shape.begin() + *D);
  return true;
}

/// One multiplication per operand element.
static double flops(const Node &N) {
  return double(N.getOperand(0)->getType().numElements());
}

/// The operand as [Outer, Len, Inner] around 'dim'; an error if N is not
/// a verified prod.
static llvm::Expected<ScanShape> shapeOf(const Node &N) {
  std::optional<ScanShape> S = splitAtDim(N.getOperand(0)->getType(), N);
  if (!S || S->fibres() != N.getType().numElements())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() +
                                       "' is not a well-formed 'prod'");
  return *S;
}

static llvm::Error interpret(const Node &N,
                             llvm::ArrayRef<const HostValues *> In,
                             llvm::MutableArrayRef<HostValues> Results) {
  HostValues &Result = Results.front();
  llvm::Expected<ScanShape> S = shapeOf(N);
  if (!S)
    return S.takeError();
  DType T = N.getType().Dtype;
  const HostValues &X = *In[0];
  Result = HostValues::zeros(T, S->fibres());
  for (int64_t O = 0; O < S->Outer; ++O)
    for (int64_t I = 0; I < S->Inner; ++I) {
      int64_t IAcc = 1;
      double FAcc = 1;
      for (int64_t L = 0; L < S->Len; ++L) {
        int64_t Pos = (O * S->Len + L) * S->Inner + I;
        if (Result.isInt()) {
          int64_t V = X.isInt() ? X.ints()[Pos]
                                : doubleToInt(X.floats()[Pos], DType::I64);
          // Through uint64_t: two's complement without signed overflow.
          IAcc = wrapInt(int64_t(uint64_t(IAcc) * uint64_t(V)), T);
        } else {
          FAcc *= X.getDouble(Pos);
        }
      }
      if (Result.isInt())
        Result.ints()[O * S->Inner + I] = IAcc;
      else
        Result.floats()[O * S->Inner + I] = FAcc;
    }
  return llvm::Error::success();
}

static llvm::Expected<KernelSource> kernel(llvm::StringRef Name,
                                           const Node &N) {
  llvm::Expected<ScanShape> S = shapeOf(N);
  if (!S)
    return S.takeError();
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
  // Integers multiply as unsigned 64-bit numbers (wrapping, which signed
  // overflow would not be defined to do); the store keeps the low bits.
  std::string Load = Float ? loadExpr(T, X, "p")
                           : "(unsigned long long)(long long)" + X + "[p]";
  std::string Store = Float ? storeExpr(T, "acc") : "(long long)acc";

  std::string Src;
  llvm::raw_string_ostream OS(Src);
  emitFibreKernelHead(OS,
                      "prod %" + N.getName() +
                          ": one thread per fibre across the dimension, "
                          "multiplied in order",
                      Fn, Params, Block, S->fibres(), S->Inner);
  OS << "    " << (Float ? "float" : "unsigned long long") << " acc = 1;\n"
     << "    for (long long l = 0; l < " << Len << "; ++l) {\n"
     << "      const long long p = (o * " << Len << " + l) * " << In
     << " + c;\n"
     << "      acc *= " << Load << ";\n"
     << "    }\n"
     << "    " << Out << "[o * " << In << " + c] = " << Store << ";\n"
     << "  }\n}\n";

  return gridStrideKernel(Fn, OS.str(), Params, Block, S->fibres());
}

void mtsched::opunits::registerProd() {
  registerOpUnitInfo(OpCode::Prod, {inferType, flops});
  registerOpUnitReference(OpCode::Prod, interpret);
  registerOpUnitKernel(OpCode::Prod, kernel);
}
