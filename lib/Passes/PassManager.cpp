//===- PassManager.cpp ----------------------------------------------------===//
#include "mtsched/Passes/PassManager.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Passes/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/raw_ostream.h"
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

llvm::Error PassManager::run(Module &M) {
  for (size_t I = 0; I < Passes.size(); ++I) {
    Pass &P = *Passes[I];
    auto Start = std::chrono::steady_clock::now();
    {
      std::optional<llvm::TimeRegion> Region;
      if (Timers)
        Region.emplace(*Timers->Timers[I]);
      for (const auto &G : M.getGraphs())
        if (llvm::Error E = P.run(*G))
          return E;
    }
    PassTimesMs.emplace_back(P.getArgument().str(),
                             std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - Start)
                                 .count());
    if (Opts.VerifyEach)
      if (llvm::Error E = verifyModule(M, Ctx.Diags->getSourceMgr())) {
        llvm::consumeError(std::move(E));
        return Ctx.Diags->error({}, "IR is invalid after pass '" +
                                        P.getArgument() + "'");
      }
    if (Opts.PrintAfterAll || Opts.PrintAfter.count(P.getArgument())) {
      DumpOS << "// -----// IR Dump After " << P.getArgument()
             << " //----- //\n";
      printModule(M, DumpOS);
      DumpOS << '\n';
    }
  }
  return llvm::Error::success();
}
