//===- PassRegistry.cpp ---------------------------------------------------===//
#include "mtsched/Passes/PassRegistry.h"

using namespace mtsched;

void PassRegistry::registerPass(PassInfo Info) {
  Passes.push_back(std::move(Info));
}

const PassInfo *PassRegistry::lookup(llvm::StringRef Argument) const {
  for (const PassInfo &P : Passes)
    if (P.Argument == Argument)
      return &P;
  return nullptr;
}
