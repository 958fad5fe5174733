//===- Diagnostics.h - Thread-safe located diagnostics ----------*- C++ -*-===//
//
// Passes, the autotuner and the tools report through this, not the
// SourceMgr directly, because several ranks (threads) may run at once.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_SUPPORT_DIAGNOSTICS_H
#define MTSCHED_SUPPORT_DIAGNOSTICS_H

#include "llvm/Support/Error.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include <mutex>
#include <set>
#include <string>
#include <tuple>

namespace mtsched {

/// An error whose message was already printed with its location; the
/// driver only needs to exit 1.
class ReportedError : public llvm::ErrorInfo<ReportedError> {
public:
  static char ID;
  void log(llvm::raw_ostream &OS) const override {
    OS << "error already reported";
  }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
};

/// Text with every control byte (and DEL) written as `\xNN`, and every byte
/// that is not part of valid UTF-8 too, so that text taken from the input
/// cannot move the cursor, recolour or clear the terminal that shows a
/// diagnostic. Printable ASCII, tabs and valid UTF-8 are kept.
std::string escapeControlBytes(llvm::StringRef Text);

/// Whether escapeControlBytes would change Text.
bool hasControlBytes(llvm::StringRef Text);

/// Prints D to OS as SourceMgr does, but with control bytes in the message
/// and in the quoted source line escaped (the caret still points at the
/// right character). Install it with installEscapingDiagHandler.
void printEscapedDiagnostic(const llvm::SMDiagnostic &D, llvm::raw_ostream &OS);

/// Makes SM print every diagnostic through printEscapedDiagnostic to errs().
void installEscapingDiagHandler(llvm::SourceMgr &SM);

/// Every rank runs the same passes, so an error in the input is found once
/// per rank; each distinct message is printed once.
class Diagnostics {
public:
  explicit Diagnostics(llvm::SourceMgr &SM) : SM(SM) {}

  void print(llvm::SMLoc Loc, llvm::SourceMgr::DiagKind Kind,
             const llvm::Twine &Msg);
  void warning(llvm::SMLoc Loc, const llvm::Twine &Msg) {
    print(Loc, llvm::SourceMgr::DK_Warning, Msg);
  }
  void note(llvm::SMLoc Loc, const llvm::Twine &Msg) {
    print(Loc, llvm::SourceMgr::DK_Note, Msg);
  }
  /// Prints an error and returns it as a ReportedError.
  llvm::Error error(llvm::SMLoc Loc, const llvm::Twine &Msg);

  llvm::SourceMgr &getSourceMgr() { return SM; }

private:
  llvm::SourceMgr &SM;
  std::mutex Mutex;
  std::set<std::tuple<const char *, int, std::string>> Printed;
};

} // namespace mtsched

#endif // MTSCHED_SUPPORT_DIAGNOSTICS_H
