//===- Pass.h - The pass interface ------------------------------*- C++ -*-===//
#ifndef MTSCHED_PASSES_PASS_H
#define MTSCHED_PASSES_PASS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace llvm {
class raw_ostream;
}

namespace mtsched {
class Graph;
class Module;
class Diagnostics;

/// What a pass may look at besides the graph it transforms.
struct PassContext {
  const Module *M = nullptr;
  Diagnostics *Diags = nullptr;
  /// Where analysis and test passes print: stdout on the reporting rank,
  /// nowhere on the others.
  llvm::raw_ostream *AnalysisOS = nullptr;
};

/// A transformation or analysis over one graph. getArgument() is the name
/// used in `--pipeline=` and `--print-ir-after=`.
class Pass {
public:
  virtual ~Pass() = default;
  virtual llvm::StringRef getArgument() const = 0;
  virtual llvm::StringRef getDescription() const = 0;
  /// Runs on G; failures are reported through the context's diagnostics
  /// and returned as errors.
  virtual llvm::Error run(Graph &G) = 0;

  void setContext(const PassContext &C) { Ctx = C; }
  const PassContext &getContext() const { return Ctx; }

protected:
  PassContext Ctx;
};

} // namespace mtsched

#endif // MTSCHED_PASSES_PASS_H
