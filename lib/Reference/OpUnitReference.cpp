//===- OpUnitReference.cpp - The interpreter's table of op units ----------===//
#include "mtsched/Reference/OpUnitReference.h"
#include <cassert>

using namespace mtsched;

/// Written once by registerAllOpUnits(), read afterwards (IR/OpUnit.h).
static OpUnitReferenceFn References[NumOpCodes];

void mtsched::registerOpUnitReference(OpCode C, OpUnitReferenceFn Fn) {
  assert(isOpUnit(C) && "not an OP_UNIT of Ops.def");
  References[unsigned(C)] = Fn;
}

OpUnitReferenceFn mtsched::lookupOpUnitReference(OpCode C) {
  return References[unsigned(C)];
}
