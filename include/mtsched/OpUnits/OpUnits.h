//===- OpUnits.h - Registering every op with its own kernel -----*- C++ -*-===//
//
// Each OP_UNIT line of Ops.def names an op defined in one file,
// lib/OpUnits/<File>.cpp (a family, such as topk and sort, may share one),
// whose register<Code>() hands its type rule and
// cost to the IR (IR/OpUnit.h), its fp64 reference to the interpreter
// (Reference/OpUnitReference.h) and its kernel to the CUDA code generator
// (Backend/Cuda/OpUnitKernels.h). registerAllOpUnits() calls them all,
// from the same lines, so a new op unit edits neither this library's list
// nor its build (lib/OpUnits/CMakeLists.txt reads Ops.def too).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_OPUNITS_OPUNITS_H
#define MTSCHED_OPUNITS_OPUNITS_H

namespace mtsched {

/// Registers every op unit's parts, once per process (later calls, from
/// any thread, return when the first has finished). Every tool, the
/// runtime library and the unit tests' main call it before reading IR; an
/// op unit met without it is an error ("no registered type rule"), not a
/// crash.
void registerAllOpUnits();

namespace opunits {
// The registration of each op unit, defined in lib/OpUnits/<File>.cpp.
#define OP_UNIT(Code, Name, Arity, Results, File) void register##Code();
#include "mtsched/IR/Ops.def"
} // namespace opunits

} // namespace mtsched

#endif // MTSCHED_OPUNITS_OPUNITS_H
