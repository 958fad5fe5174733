//===- OpUnitReference.h - The fp64 reference of op units -------*- C++ -*-===//
//
// The interpreter's part of an op unit (IR/OpUnit.h): its semantics, which
// the op's file in lib/OpUnits registers and interpretNode calls.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_REFERENCE_OPUNITREFERENCE_H
#define MTSCHED_REFERENCE_OPUNITREFERENCE_H

#include "mtsched/Reference/Interpreter.h"

namespace mtsched {

/// Computes verified node N's result from its operands' values (in operand
/// order) into Result, which arrives empty: fp64 for floating-point
/// results (the interpreter rounds fp8 ones afterwards), exact integers
/// for integer ones (wrapInt at the result's width). An error says why N
/// has no value (an index out of range, ...).
using OpUnitReferenceFn =
    llvm::Error (*)(const Node &N, llvm::ArrayRef<const HostValues *> Operands,
                    HostValues &Result);

/// Registers op unit C's reference (C an OP_UNIT of Ops.def).
void registerOpUnitReference(OpCode C, OpUnitReferenceFn Fn);
/// Op unit C's reference; null if none is registered.
OpUnitReferenceFn lookupOpUnitReference(OpCode C);

} // namespace mtsched

#endif // MTSCHED_REFERENCE_OPUNITREFERENCE_H
