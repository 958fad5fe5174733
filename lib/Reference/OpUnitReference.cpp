//===- OpUnitReference.cpp - The interpreter's table of op units ----------===//
#include "mtsched/Reference/OpUnitReference.h"
#include <cassert>

using namespace mtsched;

/// Written once by registerAllOpUnits(), read afterwards (IR/OpUnit.h).
static OpUnitReferenceFn References[NumOpCodes];
static OpUnitRowReferenceFn RowReferences[NumOpCodes];

void mtsched::registerOpUnitReference(OpCode C, OpUnitReferenceFn Fn) {
  assert(isOpUnit(C) && "not an OP_UNIT of Ops.def");
  References[unsigned(C)] = Fn;
}

OpUnitReferenceFn mtsched::lookupOpUnitReference(OpCode C) {
  return References[unsigned(C)];
}

void mtsched::registerOpUnitRowReference(OpCode C, OpUnitRowReferenceFn Fn) {
  assert(isOpUnit(C) && "not an OP_UNIT of Ops.def");
  RowReferences[unsigned(C)] = Fn;
}

OpUnitRowReferenceFn mtsched::lookupOpUnitRowReference(OpCode C) {
  return RowReferences[unsigned(C)];
}
