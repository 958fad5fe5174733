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

/// Computes verified node N's results from its operands' values (in
/// operand order) into Results, one per result of N (N.getResult(I)), each
/// arriving empty: fp64 for floating-point results (the interpreter rounds
/// fp8 ones afterwards), exact integers for integer ones (wrapInt at the
/// result's width). An error says why N has no value (an index out of
/// range, ...).
using OpUnitReferenceFn =
    llvm::Error (*)(const Node &N, llvm::ArrayRef<const HostValues *> Operands,
                    llvm::MutableArrayRef<HostValues> Results);

/// The interpreter's conversions, which op units write their references
/// with (lib/Reference/Interpreter.cpp).
/// A + B, wrapped (two's complement) to integer type T's width.
int64_t addWrap(int64_t A, int64_t B, DType T);
/// Doubles stored as element type T: as they are for a float type,
/// converted as a cast converts for an integer one.
HostValues fromDoubles(std::vector<double> F, DType T);
/// Element From[J] stored at To[I] (a value's element moved, converted
/// only if the two kinds differ).
void copyElement(HostValues &To, size_t I, const HostValues &From, size_t J,
                 DType T);
/// Element I of an integer operand (indices, counts), exact.
int64_t intAt(const HostValues &V, size_t I);

/// Registers op unit C's reference (C an OP_UNIT of Ops.def).
void registerOpUnitReference(OpCode C, OpUnitReferenceFn Fn);
/// Op unit C's reference; null if none is registered.
OpUnitReferenceFn lookupOpUnitReference(OpCode C);

/// One row of the reference, for op units with kernel choices: the CUDA
/// benchmarker checks each choice on sampled rows of the result (a row: the
/// elements along the last dimension at one index of the others), and the
/// whole reference of a large convolution would cost seconds per node.
/// Computes row Row of verified node N's first result into Out (its last
/// dimension's size) from its operands stored whole as doubles, in operand
/// order.
using OpUnitRowReferenceFn =
    llvm::Error (*)(const Node &N, llvm::ArrayRef<const double *> Operands,
                    int64_t Row, llvm::MutableArrayRef<double> Out);

/// Registers op unit C's row reference (C an OP_UNIT of Ops.def).
void registerOpUnitRowReference(OpCode C, OpUnitRowReferenceFn Fn);
/// Op unit C's row reference; null if none is registered.
OpUnitRowReferenceFn lookupOpUnitRowReference(OpCode C);

} // namespace mtsched

#endif // MTSCHED_REFERENCE_OPUNITREFERENCE_H
