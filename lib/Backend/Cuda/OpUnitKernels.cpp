//===- OpUnitKernels.cpp - The code generator's table of op units ---------===//
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include <cassert>

using namespace mtsched;

/// Written once by registerAllOpUnits(), read afterwards (IR/OpUnit.h).
static OpUnitKernelFn Kernels[NumOpCodes];
static OpUnitChoiceKernelFn ChoiceKernels[NumOpCodes];
static OpUnitExternFn Externs[NumOpCodes];

void mtsched::registerOpUnitChoiceKernel(OpCode C, OpUnitChoiceKernelFn Fn) {
  assert(isOpUnit(C) && "not an OP_UNIT of Ops.def");
  ChoiceKernels[unsigned(C)] = Fn;
}

llvm::Expected<KernelSource>
mtsched::generateOpUnitChoiceKernel(llvm::StringRef Name, const Node &N,
                                    llvm::StringRef Choice) {
  if (OpUnitChoiceKernelFn Fn = ChoiceKernels[unsigned(N.getOp())])
    return Fn(Name, N, Choice);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'%" + N.getName() + "': '" + N.getOpName() +
                                     "' has no kernel for choice '" + Choice +
                                     "'");
}

void mtsched::registerOpUnitExtern(OpCode C, OpUnitExternFn Fn) {
  assert(isOpUnit(C) && "not an OP_UNIT of Ops.def");
  Externs[unsigned(C)] = Fn;
}

llvm::Expected<OpUnitExternCall>
mtsched::prepareOpUnitExtern(const Node &N, llvm::StringRef Choice) {
  if (OpUnitExternFn Fn = Externs[unsigned(N.getOp())])
    return Fn(N, Choice);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'%" + N.getName() + "': '" + N.getOpName() +
                                     "' has no library choice '" + Choice +
                                     "'");
}

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
