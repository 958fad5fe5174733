//===- Version.h - What --version prints ------------------------*- C++ -*-===//
//
// Every tool prints the same --version: its own name, mtsched's version and
// the LLVM it was built with, e.g.
//
//   mtsched-opt (mtsched) 0.4.0
//     LLVM version 19.1.7
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_SUPPORT_VERSION_H
#define MTSCHED_SUPPORT_VERSION_H

#include "llvm/ADT/StringRef.h"

namespace llvm {
class raw_ostream;
}

namespace mtsched {

/// mtsched's version ("0.4.0"), from project(mtsched VERSION ...).
llvm::StringRef getVersionString();

/// Prints the --version text of the tool \p ToolName to \p OS.
void printToolVersion(llvm::StringRef ToolName, llvm::raw_ostream &OS);

/// Makes --version print printToolVersion(ToolName); call it before
/// llvm::cl::ParseCommandLineOptions.
void setToolVersionPrinter(llvm::StringRef ToolName);

} // namespace mtsched

#endif // MTSCHED_SUPPORT_VERSION_H
