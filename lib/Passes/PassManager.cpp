//===- PassManager.cpp ----------------------------------------------------===//
#include "mtsched/Passes/PassManager.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/raw_sha1_ostream.h"
#include <chrono>

using namespace mtsched;

struct PassManager::Impl {
  llvm::TimerGroup Group{"passes", "mtsched pass execution timing"};
  std::vector<std::unique_ptr<llvm::Timer>> Timers;
};

PassManager::PassManager(PassManagerOptions Opts, PassContext Ctx,
                         llvm::raw_ostream &IRDumpStream)
    : Opts(std::move(Opts)), Ctx(Ctx), DumpOS(IRDumpStream) {
  if (this->Opts.TimePasses)
    Timers = std::make_unique<Impl>();
}

// Destroying the TimerGroup prints the timing report.
PassManager::~PassManager() = default;

void PassManager::addPass(std::unique_ptr<Pass> P) {
  P->setContext(Ctx);
  if (Timers)
    Timers->Timers.push_back(std::make_unique<llvm::Timer>(
        P->getArgument(), P->getArgument(), Timers->Group));
  Passes.push_back(std::move(P));
}

void PassManager::printPipeline(llvm::raw_ostream &OS) const {
  llvm::interleave(
      Passes, OS, [&](const auto &P) { OS << P->getArgument(); }, ",");
  OS << '\n';
}

bool PassManager::shouldPrintBefore(llvm::StringRef Arg) const {
  return Opts.PrintBeforeAll || Opts.PrintBefore.count(Arg);
}

bool PassManager::shouldPrintAfter(llvm::StringRef Arg) const {
  // --print-ir-after-change alone selects every pass; with a selection it
  // only filters it (below, by comparing the IR).
  bool Selective = Opts.PrintAfterAll || !Opts.PrintAfter.empty();
  if (!Selective)
    return Opts.PrintAfterChange;
  return Opts.PrintAfterAll || Opts.PrintAfter.count(Arg);
}

void PassManager::dump(const Module &M, const llvm::Twine &Banner) {
  DumpOS << "// -----// IR Dump " << Banner << " //----- //\n";
  printModule(M, DumpOS);
  DumpOS << '\n';
}

/// A digest of M's printed form: passes do not report whether they changed
/// anything, so --print-ir-after-change compares the text they leave.
static std::string digestOf(const Module &M) {
  llvm::raw_sha1_ostream Hash;
  printModule(M, Hash);
  auto Digest = Hash.sha1();
  return std::string(Digest.begin(), Digest.end());
}

llvm::Error PassManager::run(Module &M) {
  for (size_t I = 0; I < Passes.size(); ++I) {
    Pass &P = *Passes[I];
    llvm::StringRef Arg = P.getArgument();
    if (shouldPrintBefore(Arg))
      dump(M, "Before " + Arg);
    bool PrintAfter = shouldPrintAfter(Arg);
    std::string Before;
    if (PrintAfter && Opts.PrintAfterChange)
      Before = digestOf(M);
    auto Start = std::chrono::steady_clock::now();
    {
      std::optional<llvm::TimeRegion> Region;
      if (Timers)
        Region.emplace(*Timers->Timers[I]);
      for (const auto &G : M.getGraphs())
        if (llvm::Error E = P.run(*G)) {
          if (Opts.PrintAfterFailure)
            dump(M, "After " + Arg + " Failed");
          return E;
        }
    }
    PassTimesMs.emplace_back(Arg.str(),
                             std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - Start)
                                 .count());
    if (Opts.VerifyEach)
      if (llvm::Error E = verifyModule(M, Ctx.Diags->getSourceMgr())) {
        llvm::consumeError(std::move(E));
        if (Opts.PrintAfterFailure)
          dump(M, "After " + Arg + " Failed");
        return Ctx.Diags->error({}, "IR is invalid after pass '" + Arg + "'");
      }
    if (PrintAfter && (!Opts.PrintAfterChange || digestOf(M) != Before))
      dump(M, "After " + Arg);
  }
  return llvm::Error::success();
}
