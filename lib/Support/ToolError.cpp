//===- ToolError.cpp ------------------------------------------------------===//
#include "mtsched/Support/ToolError.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

using namespace mtsched;

static std::string &toolName() {
  static std::string Name = "mtsched-opt";
  return Name;
}

void mtsched::setErrorToolName(llvm::StringRef ToolName) {
  toolName() = ToolName.str();
}

llvm::raw_ostream &mtsched::toolError() {
  return llvm::WithColor::error(llvm::errs(), toolName());
}

void mtsched::reportToolError(const llvm::Twine &Msg) {
  std::string Line;
  llvm::raw_string_ostream OS(Line);
  llvm::WithColor::error(OS, toolName(), /*DisableColors=*/true) << Msg << '\n';
  llvm::errs() << OS.str();
}
