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
#include "llvm/Support/Error.h"
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
  /// The registered name nearest to a misspelt Argument (edit distance, as
  /// llvm::cl suggests options), or "" when none is close enough.
  std::string nearest(llvm::StringRef Argument) const;
  llvm::ArrayRef<PassInfo> getPasses() const { return Passes; }

private:
  std::vector<PassInfo> Passes;
};

/// One pass of a pipeline text, with the options in its braces in order.
struct PipelineElement {
  std::string Name;
  std::vector<std::pair<std::string, std::string>> Options;
};

/// Parses a pipeline as --pipeline takes it: `a,b` or mlir-opt's
/// `builtin.module(a,b{opt=v opt2=v2})` (nested builtin.module too). Pass
/// options are space-separated key=value pairs; a value may hold commas.
llvm::Expected<std::vector<PipelineElement>>
parsePipelineText(llvm::StringRef Text);

/// The candidate nearest to Name by edit distance, or "" when none is
/// within a third of Name's length (at least 2 edits).
std::string nearestName(llvm::StringRef Name,
                        llvm::ArrayRef<llvm::StringRef> Candidates);

/// Prints every pass with its description, test passes last, for
/// `--list-passes`.
void printPassList(const PassRegistry &Registry, llvm::raw_ostream &OS);

} // namespace mtsched

#endif // MTSCHED_PASSES_PASSREGISTRY_H
