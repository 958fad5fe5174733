//===- PassManager.h - Runs a pipeline of passes ----------------*- C++ -*-===//
#ifndef MTSCHED_PASSES_PASSMANAGER_H
#define MTSCHED_PASSES_PASSMANAGER_H

#include "mtsched/Passes/Pass.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace mtsched {

/// IR printing follows mlir-opt's `--mlir-print-ir-*` flags; every dump goes
/// to the manager's dump stream, which the driver sends to stderr so that
/// stdout stays one parseable module.
struct PassManagerOptions {
  /// Run the verifier after every pass.
  bool VerifyEach = true;
  bool PrintBeforeAll = false;
  /// Pass arguments before which to print the IR.
  llvm::StringSet<> PrintBefore;
  bool PrintAfterAll = false;
  /// Pass arguments after which to print the IR.
  llvm::StringSet<> PrintAfter;
  /// Print after a pass only if it changed the IR. Alone it means "after
  /// every pass that changed it"; with PrintAfter(All) it narrows those.
  bool PrintAfterChange = false;
  /// Print the IR as a failing pass left it.
  bool PrintAfterFailure = false;
  /// Report per-pass wall time (llvm::Timer) when the manager is destroyed.
  bool TimePasses = false;
};

class PassManager {
public:
  PassManager(PassManagerOptions Opts, PassContext Ctx,
              llvm::raw_ostream &IRDumpStream);
  ~PassManager();

  void addPass(std::unique_ptr<Pass> P);
  const std::vector<std::unique_ptr<Pass>> &getPasses() const { return Passes; }
  /// Prints the pipeline as `--pipeline=` would accept it.
  void printPipeline(llvm::raw_ostream &OS) const;

  /// Runs every pass on every graph of M, in order.
  llvm::Error run(Module &M);
  /// Wall time of each pass run so far, in milliseconds.
  const std::vector<std::pair<std::string, double>> &getPassTimesMs() const {
    return PassTimesMs;
  }

private:
  bool shouldPrintBefore(llvm::StringRef Arg) const;
  bool shouldPrintAfter(llvm::StringRef Arg) const;
  void dump(const Module &M, const llvm::Twine &Banner);

  struct Impl;
  PassManagerOptions Opts;
  PassContext Ctx;
  llvm::raw_ostream &DumpOS;
  std::vector<std::unique_ptr<Pass>> Passes;
  std::unique_ptr<Impl> Timers;
  std::vector<std::pair<std::string, double>> PassTimesMs;
};

} // namespace mtsched

#endif // MTSCHED_PASSES_PASSMANAGER_H
