//===- InterpreterImpl.h - Shared by the interpreter's files ----*- C++ -*-===//
//
// Internal to lib/Reference: what Interpreter.cpp (node evaluation),
// ElementTypes.cpp (rounding, integer wrapping) and RowChain.cpp share
// beyond include/mtsched/Reference/Interpreter.h.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_REFERENCE_INTERPRETERIMPL_H
#define MTSCHED_LIB_REFERENCE_INTERPRETERIMPL_H

#include "mtsched/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include <cstdint>

namespace mtsched {

/// Index into a tensor of shape Op for the flat index I of shape Out
/// (right-aligned broadcasting).
int64_t broadcastIndex(llvm::ArrayRef<int64_t> Op, llvm::ArrayRef<int64_t> Out,
                       int64_t I);

/// A - B and A * B wrapped to T's width, as addWrap (OpUnitReference.h).
int64_t subWrap(int64_t A, int64_t B, DType T);
int64_t mulWrap(int64_t A, int64_t B, DType T);

} // namespace mtsched

#endif // MTSCHED_LIB_REFERENCE_INTERPRETERIMPL_H
