//===- OpUnitKernels.cpp - The code generator's table of op units ---------===//
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include <cassert>

using namespace mtsched;

/// Written once by registerAllOpUnits(), read afterwards (IR/OpUnit.h).
static OpUnitKernelFn Kernels[NumOpCodes];

void mtsched::registerOpUnitKernel(OpCode C, OpUnitKernelFn Fn) {
  assert(isOpUnit(C) && "not an OP_UNIT of Ops.def");
  Kernels[unsigned(C)] = Fn;
}

OpUnitKernelFn mtsched::lookupOpUnitKernel(OpCode C) {
  return Kernels[unsigned(C)];
}

llvm::Expected<KernelSource> mtsched::generateOpUnitKernel(llvm::StringRef Name,
                                                           const Node &N) {
  if (OpUnitKernelFn Fn = lookupOpUnitKernel(N.getOp()))
    return Fn(Name, N);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'%" + N.getName() + "': no kernel for '" +
                                     N.getOpName() +
                                     "' (its op unit is not registered)");
}
