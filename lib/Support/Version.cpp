//===- Version.cpp - What --version prints --------------------------------===//
#include "mtsched/Support/Version.h"
#include "mtsched/Config/Version.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

llvm::StringRef mtsched::getVersionString() { return MTSCHED_VERSION_STRING; }

void mtsched::printToolVersion(llvm::StringRef ToolName,
                               llvm::raw_ostream &OS) {
  OS << ToolName << " (mtsched) " << getVersionString() << '\n'
     << "  LLVM version " << LLVM_VERSION_STRING << '\n';
}

void mtsched::setToolVersionPrinter(llvm::StringRef ToolName) {
  // LLVM's own printer names only LLVM (and the distributor's build of it).
  llvm::cl::SetVersionPrinter([Name = ToolName.str()](llvm::raw_ostream &OS) {
    printToolVersion(Name, OS);
  });
}
