//===- IRTestUtils.h - Parse IR text in unit tests --------------*- C++ -*-===//
//
// Shared by every unit-test directory (test/unit/CMakeLists.txt puts
// test/unit on the include path of everything that links
// MtschedUnitTestMain): the parse-then-verify set-up that tests of the IR,
// the code generators and the GPU runs start from.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TEST_UNIT_IRTESTUTILS_H
#define MTSCHED_TEST_UNIT_IRTESTUTILS_H

#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Verifier.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <memory>
#include <string>

namespace mtsched {
namespace test {

/// A source manager that collects its diagnostics as text, so tests can
/// check what a user would have seen. Locations point into its buffer, so
/// it must outlive the module parsed from it.
struct CapturedSource {
  llvm::SourceMgr SM;
  std::string Diags;

  explicit CapturedSource(llvm::StringRef Text) {
    SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "t.mir"),
                          llvm::SMLoc());
    SM.setDiagHandler(
        [](const llvm::SMDiagnostic &D, void *Ctx) {
          llvm::raw_string_ostream OS(*static_cast<std::string *>(Ctx));
          D.print(nullptr, OS, /*ShowColors=*/false);
        },
        &Diags);
  }
};

/// Parses Text; the module is null after a parse error.
inline std::unique_ptr<Module> parse(CapturedSource &Src) {
  return parseModule(Src.SM);
}

/// Parses and verifies SM's main buffer; the module is null after any
/// error, each one reported through SM's diagnostic handler (to stderr
/// unless the caller set one).
inline std::unique_ptr<Module> parseAndVerify(llvm::SourceMgr &SM) {
  std::unique_ptr<Module> M = parseModule(SM);
  if (!M)
    return nullptr;
  if (llvm::Error E = verifyModule(*M, SM)) {
    llvm::consumeError(std::move(E));
    return nullptr;
  }
  return M;
}

/// Parses and verifies Text; the module is null after any error.
inline std::unique_ptr<Module> parseAndVerify(CapturedSource &Src) {
  return parseAndVerify(Src.SM);
}

/// Adds Text to SM as its main buffer, named Name, then parses and verifies
/// it as above. SM must outlive the module: its locations point into SM.
inline std::unique_ptr<Module> parseAndVerify(llvm::SourceMgr &SM,
                                              llvm::StringRef Text,
                                              llvm::StringRef Name = "t.mir") {
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, Name),
                        llvm::SMLoc());
  return parseAndVerify(SM);
}

} // namespace test
} // namespace mtsched

#endif // MTSCHED_TEST_UNIT_IRTESTUTILS_H
