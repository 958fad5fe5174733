//===- PassRegistry.cpp ---------------------------------------------------===//
#include "mtsched/Passes/PassRegistry.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

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

void mtsched::printPassList(const PassRegistry &Registry,
                            llvm::raw_ostream &OS) {
  size_t Width = 0;
  for (const PassInfo &P : Registry.getPasses())
    Width = std::max(Width, P.Argument.size());
  for (bool Test : {false, true}) {
    OS << (Test ? "Test passes:\n" : "Passes:\n");
    for (const PassInfo &P : Registry.getPasses())
      if (P.IsTestPass == Test)
        OS << "  --" << llvm::left_justify(P.Argument, Width) << "  "
           << P.Description << '\n';
  }
}
