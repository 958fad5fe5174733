//===- PassRegistry.h - Passes by name --------------------------*- C++ -*-===//
//
// Passes register a factory under their argument name so that the driver
// can build `--pipeline=a,b,c`. Factories take an opaque options object the
// driver fills (see mtsched/Driver/PipelineOptions.h).
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

struct PipelineOptions;

struct PassInfo {
  std::string Argument;
  std::string Description;
  std::function<std::unique_ptr<Pass>(const PipelineOptions &)> Factory;
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
