//===- PassRegistry.h - Passes by name --------------------------*- C++ -*-===//
//
// Passes register a factory under their argument name so that the driver
// can build `--pipeline=a,b,c`. A factory is bound to its settings and
// collaborators when it is registered (mtsched/Driver/RegisterPasses.h), so
// this library knows nothing of the layers above it.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_PASSES_PASSREGISTRY_H
#define MTSCHED_PASSES_PASSREGISTRY_H

#include "mtsched/Passes/Pass.h"
#include "llvm/ADT/ArrayRef.h"
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

struct PassInfo {
  std::string Argument;
  std::string Description;
  std::function<std::unique_ptr<Pass>()> Factory;
  /// Test-only passes are listed separately in --help.
  bool IsTestPass = false;
};

class PassRegistry {
public:
  void registerPass(PassInfo Info);
  const PassInfo *lookup(llvm::StringRef Argument) const;
  llvm::ArrayRef<PassInfo> getPasses() const { return Passes; }

private:
  std::vector<PassInfo> Passes;
};

/// Prints every pass with its description, test passes last, for
/// `--list-passes`.
void printPassList(const PassRegistry &Registry, llvm::raw_ostream &OS);

} // namespace mtsched

#endif // MTSCHED_PASSES_PASSREGISTRY_H
