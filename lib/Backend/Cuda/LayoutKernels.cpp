//===- LayoutKernels.cpp - Gather kernels of the layout ops ---------------===//
//
// expand, transpose, slice, concat and index_select run as one gather
// kernel each: a thread per output element splits its flat index into the
// multi-index and reads the operand element the op's LayoutPlan names
// (IR/Layout.h), the same map the fp64 interpreter follows; index_select
// adds the index it reads at run time. An index outside the dimension reads
// nothing: the element becomes NaN (0 for integer tensors), which --run's
// check reports, where PyTorch would stop at a device-side assert. Elements are
// copied in their storage type, so index tensors (i32, i64) move exactly.
// reshape is a view and has no kernel.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/IR/Layout.h"
#include "llvm/Support/Error.h"

using namespace mtsched;
using namespace mtsched::codegen;

/// The parameters of a one-node kernel: N's operands, then its result.
static ParamList paramsOf(const Node &N) {
  ParamList Params;
  for (const Operand &O : N.getOperands())
    Params.Inputs.insert(O.V);
  Params.Outputs.push_back(N.getResult());
  return Params;
}

/// What an element becomes when its input is out of range: NaN, or 0 for
/// integer tensors (which have no NaN).
static std::string poisonValue(DType T) {
  return isFloatDType(T) ? storeExpr(T, "__int_as_float(0x7fc00000)") : "0";
}

static llvm::Expected<KernelSource>
generateLayoutKernelText(llvm::StringRef Name, const Node &N) {
  auto Err = [&](const llvm::Twine &Msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() + "': " + Msg);
  };
  std::optional<LayoutPlan> P = layoutPlanOf(N);
  if (!P)
    return Err("not a well-formed layout op");
  if (P->Identity)
    return Err("'reshape' is a view and has no kernel");
  const unsigned Block = 256;
  std::string Fn = sanitizeIdentifier(Name);
  ParamList Params = paramsOf(N);
  int64_t Total = N.getType().numElements();
  int64_t Rank = P->OutShape.size();

  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << Prelude << "\n// " << N.getOpName() << " %" << N.getName()
     << ": one thread per output element, a gather\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << Block << ") " << Fn
     << "(" << Params.signature() << ") {\n"
     << "  for (long long i = (long long)blockIdx.x * " << Block
     << " + threadIdx.x; i < " << Total << "LL;\n"
     << "       i += (long long)gridDim.x * " << Block << ") {\n"
     << "    long long rest = i;\n";
  for (int64_t D = Rank - 1; D >= 0; --D)
    OS << "    const long long o" << D << " = rest % " << P->OutShape[D]
       << "LL;\n    rest /= " << P->OutShape[D] << "LL;\n";
  OS << "    (void)rest;\n";
  std::string Out = Params.name(N.getResult()) + "_out[i]";
  if (P->IndexOperand >= 0) {
    const Value *IdxV = N.getOperand(P->IndexOperand);
    DType T = N.getType().Dtype;
    OS << "    const long long ix = (long long)" << Params.name(IdxV)
       << (P->IndexPerElement ? std::string("[i]")
                              : "[o" + std::to_string(P->IndexDim) + "]")
       << ";\n"
       << "    if (ix < 0 || ix >= " << P->IndexBound << "LL) {\n"
       << "      " << Out << " = " << poisonValue(T)
       << ";\n      continue;\n    }\n";
  }
  for (size_t I = 0; I < P->Sources.size(); ++I) {
    const LayoutPlan::Source &Src = P->Sources[I];
    std::string Idx = std::to_string(Src.Base) + "LL";
    if (P->IndexOperand >= 0)
      Idx += " + ix * " + std::to_string(P->IndexCoef) + "LL";
    for (int64_t D = 0; D < Rank; ++D)
      if (Src.Coef[D])
        Idx += " + o" + std::to_string(D) + " * " +
               std::to_string(Src.Coef[D]) + "LL";
    std::string Load = Params.name(N.getOperand(Src.Operand)) + "[" + Idx + "]";
    bool Last = I + 1 == P->Sources.size();
    if (P->Sources.size() == 1)
      OS << "    " << Params.name(N.getResult()) << "_out[i] = " << Load
         << ";\n";
    else
      OS << "    " << (I ? "else " : "")
         << (Last ? std::string("")
                  : "if (o" + std::to_string(P->ConcatDim) + " < " +
                        std::to_string(Src.Hi) + "LL) ")
         << Params.name(N.getResult()) << "_out[i] = " << Load << ";\n";
  }
  OS << "  }\n}\n";

  return gridStrideKernel(Fn, OS.str(), Params, Block, Total);
}

llvm::Expected<KernelSource>
mtsched::generateRaggedCopyKernel(llvm::StringRef Name, const Node &N) {
  auto Err = [&](const llvm::Twine &Msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() + "': " + Msg);
  };
  if (N.getOp() != OpCode::AllToAll || N.getNumOperands() != 3 ||
      N.getOperand(1)->getType().numElements() != 1)
    return Err("not an uneven all_to_all of one rank");
  const TensorType &XT = N.getOperand(0)->getType();
  int64_t Rows = XT.Shape[0], Cap = N.getType().Shape[0];
  int64_t RowElems = Rows ? XT.numElements() / Rows : 0;
  const unsigned Block = 256;
  std::string Fn = sanitizeIdentifier(Name);
  ParamList Params = paramsOf(N);
  int64_t Total = N.getType().numElements();
  DType T = N.getType().Dtype;
  std::string Out = Params.name(N.getResult()) + "_out[i]";
  std::string S;
  llvm::raw_string_ostream OS(S);
  // The counts the interpreter rejects (a send count outside the rows, a
  // receive count that is not the send count, more rows than the capacity)
  // make every element NaN (0 for integer tensors), which --run reports.
  OS << Prelude << "\n// all_to_all %" << N.getName()
     << " on one rank: its own counted rows, then zeros\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << Block << ") " << Fn
     << "(" << Params.signature() << ") {\n"
     << "  const long long sent = " << Params.name(N.getOperand(1)) << "[0];\n"
     << "  const long long got = " << Params.name(N.getOperand(2)) << "[0];\n"
     << "  const bool bad = sent < 0 || sent > " << Rows
     << "LL || got != sent || got > " << Cap << "LL;\n"
     << "  for (long long i = (long long)blockIdx.x * " << Block
     << " + threadIdx.x; i < " << Total << "LL;\n"
     << "       i += (long long)gridDim.x * " << Block << ") {\n"
     << "    if (bad)\n      " << Out << " = " << poisonValue(T)
     << ";\n    else if (i < got * " << RowElems << "LL)\n      " << Out
     << " = " << Params.name(N.getOperand(0)) << "[i];\n    else\n      " << Out
     << " = " << (isFloatDType(T) ? storeExpr(T, "0.f") : "0") << ";\n  }\n}\n";
  return gridStrideKernel(Fn, OS.str(), Params, Block, Total);
}

llvm::Expected<KernelSource> mtsched::generateLayoutKernel(llvm::StringRef Name,
                                                           const Node &N) {
  return withProgrammaticWait(generateLayoutKernelText(Name, N));
}
