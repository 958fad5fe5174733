//===- mtsched-opt.cpp - The mtsched driver -------------------------------===//
//
// Everything is in lib/Driver (OptCommandLine.cpp parses the flags into an
// OptMainConfig, OptMain.cpp runs it), so other tools and tests can reuse it.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Driver/OptCommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Process.h"
#include <cstring>
#include <unistd.h>

namespace {

/// Writes Msg to stderr without allocating: these handlers run when memory
/// or threads could not be had.
void writeError(const char *Msg) {
  const char *Head = "mtsched-opt: error: ";
  (void)!::write(2, Head, std::strlen(Head));
  (void)!::write(2, Msg, std::strlen(Msg));
  (void)!::write(2, "\n", 1);
}

/// A resource failure (a thread that could not be created, a fatal error
/// in LLVM Support) is an error and exit 1, not an abort asking for a bug
/// report: the input or the machine's limits, not mtsched, are at fault.
void fatalError(void *, const char *Reason, bool) {
  writeError(Reason);
  llvm::sys::Process::Exit(1, /*NoCleanup=*/true);
}

void outOfMemory(void *, const char *, bool) {
  writeError("out of memory: an allocation failed (the machine's memory or "
             "the address-space limit, ulimit -v, is too small for this run)");
  llvm::sys::Process::Exit(1, /*NoCleanup=*/true);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM X(argc, argv);
  llvm::install_fatal_error_handler(fatalError);
  llvm::install_bad_alloc_error_handler(outOfMemory);
  return mtsched::optMainFromCommandLine(argc, argv);
}
