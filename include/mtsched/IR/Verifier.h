//===- Verifier.h - Structural and type checks ------------------*- C++ -*-===//
#ifndef MTSCHED_IR_VERIFIER_H
#define MTSCHED_IR_VERIFIER_H

#include "llvm/Support/Error.h"

namespace llvm {
class SourceMgr;
}

namespace mtsched {
class Module;

/// Checks M. Each problem is reported through SM with the location of the
/// offending construct; returns an error summarising how many were found.
llvm::Error verifyModule(const Module &M, llvm::SourceMgr &SM);

} // namespace mtsched

#endif // MTSCHED_IR_VERIFIER_H
