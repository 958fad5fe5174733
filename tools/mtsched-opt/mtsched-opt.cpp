//===- mtsched-opt.cpp - The mtsched driver -------------------------------===//
//
// Everything is in lib/Driver (OptCommandLine.cpp parses the flags into an
// OptMainConfig, OptMain.cpp runs it), so other tools and tests can reuse it.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Driver/OptCommandLine.h"
#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  llvm::InitLLVM X(argc, argv);
  return mtsched::optMainFromCommandLine(argc, argv);
}
