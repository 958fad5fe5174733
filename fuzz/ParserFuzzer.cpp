//===- ParserFuzzer.cpp - libFuzzer target for parse/verify/print ---------===//
//
// Feeds arbitrary bytes to the IR parser. Whatever parses is verified and
// printed; the printed text must parse again and print identically, since
// the printer is canonical and the parser reads exactly what it prints. A
// module that verifies also has its schedule built and checked: kernel ids
// from the input key the schedule's maps. A crash, a sanitizer report or a
// round-trip mismatch is a bug in lib/IR or lib/Schedule.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

using namespace mtsched;

namespace {

/// A parsed module with the source manager its locations point into.
struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
};

/// Diagnostics are expected for most inputs; printing them would only slow
/// the fuzzer down.
void discardDiagnostic(const llvm::SMDiagnostic &, void *) {}

std::unique_ptr<Parsed> parse(llvm::StringRef Text, llvm::StringRef Name) {
  auto P = std::make_unique<Parsed>();
  P->SM.setDiagHandler(discardDiagnostic);
  P->SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, Name),
                           llvm::SMLoc());
  P->M = parseModule(P->SM);
  return P;
}

bool verifies(Parsed &P) {
  if (llvm::Error E = verifyModule(*P.M, P.SM)) {
    llvm::consumeError(std::move(E));
    return false;
  }
  return true;
}

[[noreturn]] void roundTripFailure(llvm::StringRef What, llvm::StringRef First,
                                   llvm::StringRef Second) {
  llvm::errs() << "round-trip bug: " << What << "\n--- first print ---\n"
               << First << "\n--- second print ---\n"
               << Second << "\n";
  llvm::errs().flush();
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  mtsched::registerAllOpUnits();
  llvm::StringRef Input(reinterpret_cast<const char *>(Data), Size);
  std::unique_ptr<Parsed> First = parse(Input, "fuzz-input");
  if (!First->M)
    return 0;
  bool FirstVerifies = verifies(*First);
  std::string Printed = moduleToString(*First->M);

  std::unique_ptr<Parsed> Second = parse(Printed, "printed");
  if (!Second->M)
    roundTripFailure("the printed module does not parse", Printed, "");
  std::string Reprinted = moduleToString(*Second->M);
  if (Printed != Reprinted)
    roundTripFailure("printing the re-parsed module gives different text",
                     Printed, Reprinted);
  // Printing must not turn a valid module into an invalid one.
  if (FirstVerifies && !verifies(*Second))
    roundTripFailure("the printed module no longer verifies", Printed,
                     Reprinted);
  // Any kernel id and rank the verifier accepts must schedule without a
  // crash; whether the schedule is legal is the input's business.
  if (FirstVerifies)
    for (const auto &G : First->M->getGraphs())
      llvm::consumeError(verifySchedule(*G));
  return 0;
}
