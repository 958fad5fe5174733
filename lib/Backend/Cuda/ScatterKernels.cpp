//===- ScatterKernels.cpp - The kernel of scatter -------------------------===//
//
// One thread per fibre across 'dim' (IR/Scatter.h): it copies the
// destination's fibre, then writes the source's elements at their indices in
// order, so equal indices end with the last one, as in the interpreter
// (with reduce = "add", each is added in order). A
// fibre with an index outside the dimension becomes NaN (0 for integer
// tensors), which --run's check reports. Routing-sized scatters (tokens x
// experts) are a few thousand fibres of tens of elements: one launch of a
// few microseconds, not worth a cooperative scheme.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/IR/Scatter.h"
#include "llvm/Support/Error.h"

using namespace mtsched;
using namespace mtsched::codegen;

llvm::Expected<KernelSource>
mtsched::generateScatterKernel(llvm::StringRef Name, const Node &N) {
  std::optional<ScatterShape> S = scatterShapeOf(N);
  if (!S)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() +
                                       "': not a well-formed scatter");
  const unsigned Block = 128;
  std::string Fn = sanitizeIdentifier(Name);
  ParamList Params;
  for (const Operand &O : N.getOperands())
    Params.Inputs.insert(O.V);
  Params.Outputs.push_back(N.getResult());
  DType T = N.getType().Dtype;
  std::string Dst = Params.name(N.getOperand(0));
  std::string Idx = Params.name(N.getOperand(1));
  std::string Src = Params.name(N.getOperand(2));
  std::string Out = Params.name(N.getResult()) + "_out";
  std::string In = std::to_string(S->Inner) + "LL";
  auto At = [&](const std::string &Len, const std::string &Pos) {
    return "((o * " + Len + "LL + " + Pos + ") * " + In + " + c)";
  };
  std::string DL = std::to_string(S->DstLen), IL = std::to_string(S->IdxLen);
  // What the source element does to its place: replace it, or (reduce =
  // "add") add to it, in fp32 for floats and rounded where stored, as
  // PyTorch's scatter_add rounds each add.
  std::string Write = Src + "[" + At(IL, "k") + "]";
  if (S->Add)
    Write = isFloatDType(T)
                ? storeExpr(T, loadExpr(T, Out, At(DL, "ix")) + " + " +
                                   loadExpr(T, Src, At(IL, "k")))
                : Out + "[" + At(DL, "ix") + "] + " + Write;

  std::string Src_;
  llvm::raw_string_ostream OS(Src_);
  emitFibreKernelHead(OS,
                      "scatter %" + N.getName() +
                          ": one thread per fibre across the dimension, "
                          "written in order",
                      Fn, Params, Block, S->fibres(), S->Inner);
  OS << "    for (long long d = 0; d < " << DL << "LL; ++d)\n"
     << "      " << Out << "[" << At(DL, "d") << "] = " << Dst << "["
     << At(DL, "d") << "];\n"
     << "    bool bad = false;\n"
     << "    for (long long k = 0; k < " << IL << "LL; ++k) {\n"
     << "      const long long ix = (long long)" << Idx << "[" << At(IL, "k")
     << "];\n"
     << "      if (ix < 0 || ix >= " << DL << "LL) {\n"
     << "        bad = true;\n        continue;\n      }\n"
     << "      " << Out << "[" << At(DL, "ix") << "] = " << Write << ";\n"
     << "    }\n"
     << "    if (bad)\n"
     << "      for (long long d = 0; d < " << DL << "LL; ++d)\n"
     << "        " << Out << "[" << At(DL, "d") << "] = "
     << (isFloatDType(T) ? storeExpr(T, "__int_as_float(0x7fc00000)")
                         : std::string("0"))
     << ";\n"
     << "  }\n}\n";

  return gridStrideKernel(Fn, OS.str(), Params, Block, S->fibres());
}
