//===- Parser.h - Parse IR text into a Module -------------------*- C++ -*-===//
#ifndef MTSCHED_IR_PARSER_H
#define MTSCHED_IR_PARSER_H

#include "mtsched/IR/Graph.h"
#include <memory>

namespace llvm {
class SourceMgr;
}

namespace mtsched {

/// Parses the main buffer of SM. Errors are reported through SM's
/// diagnostic handler with their location; returns null after the first.
std::unique_ptr<Module> parseModule(llvm::SourceMgr &SM);

} // namespace mtsched

#endif // MTSCHED_IR_PARSER_H
