//===- DiagnosticVerifier.h - expected-error comments -----------*- C++ -*-===//
//
// Implements --verify-diagnostics: diagnostics are matched against comments
// such as `// expected-error @+1 {{unknown op}}` instead of being printed.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_DIAGNOSTICVERIFIER_H
#define MTSCHED_DRIVER_DIAGNOSTICVERIFIER_H

#include "llvm/Support/SourceMgr.h"
#include <string>
#include <vector>

namespace mtsched {

class DiagnosticVerifier {
public:
  /// Scans SM's main buffer for expectations and installs itself as SM's
  /// diagnostic handler. Malformed expectations are reported to Errs.
  DiagnosticVerifier(llvm::SourceMgr &SM, llvm::raw_ostream &Errs);
  ~DiagnosticVerifier();

  /// Reports every unexpected diagnostic and unmet expectation; returns true
  /// if all matched.
  bool finish();

private:
  struct Expected {
    llvm::SourceMgr::DiagKind Kind;
    unsigned Line;
    std::string Substring;
    llvm::SMLoc Loc;
    bool Matched = false;
  };
  static void handle(const llvm::SMDiagnostic &D, void *Self);
  void handle(const llvm::SMDiagnostic &D);

  llvm::SourceMgr &SM;
  llvm::raw_ostream &Errs;
  std::vector<Expected> Expectations;
  std::vector<llvm::SMDiagnostic> Unexpected;
  bool Malformed = false;
};

} // namespace mtsched

#endif // MTSCHED_DRIVER_DIAGNOSTICVERIFIER_H
