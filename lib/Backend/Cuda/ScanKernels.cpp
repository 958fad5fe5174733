//===- ScanKernels.cpp - The kernel of cumsum -----------------------------===//
//
// One thread per fibre across 'dim' (IR/Scan.h), summing in order: fp32
// for floating-point tensors (bf16 and f16 widen exactly; PyTorch also sums
// those in fp32) and 64-bit for integers, each running sum rounded to the
// element type where it is stored. The loads of a fibre do not depend on
// the sum, so they pipeline; routing scans (a token mask down [T, E] or a
// row of expert counts) are thousands of elements per fibre at most.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/IR/Scan.h"
#include "llvm/Support/Error.h"

using namespace mtsched;
using namespace mtsched::codegen;

llvm::Expected<KernelSource> mtsched::generateScanKernel(llvm::StringRef Name,
                                                         const Node &N) {
  std::optional<ScanShape> S = scanShapeOf(N);
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
