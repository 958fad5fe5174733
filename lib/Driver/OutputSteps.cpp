//===- OutputSteps.cpp - What happens to the decided module ---------------===//
#include "mtsched/Driver/OutputSteps.h"
#include "mtsched/Autotune/BackendRegistry.h"
#include "mtsched/IR/DotPrinter.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/Reference/Npy.h"
#include "mtsched/Support/ToolError.h"
#include "mtsched/Tools/Timeline.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mtsched;

bool mtsched::runOutputSteps(const OutputSteps &Steps,
                             const BackendRegistry &Backends, const Module &M,
                             llvm::raw_ostream &OS) {
  bool OK = true;
  auto Error = [&](const llvm::Twine &Msg) {
    reportToolError(Msg);
    OK = false;
  };
  for (const auto &G : M.getGraphs()) {
    RunIO IO;
    IO.Seed = Steps.Seed;
    IO.InterpretMaxBytes = Steps.InterpretMaxBytes;
    IO.InputDir = Steps.InputDir;
    IO.TimeRuns = Steps.TimeSamples;
    IO.Check = Steps.Check;
    IO.CompileThreads = Steps.CompileThreads;
    IO.KernelCacheDir = Steps.KernelCacheDir;
    if (!Steps.OutputDir.empty()) {
      llvm::SmallString<256> Dir(Steps.OutputDir);
      if (M.getGraphs().size() > 1 || Steps.GraphFolders)
        llvm::sys::path::append(Dir, G->getName());
      if (std::error_code EC = llvm::sys::fs::create_directories(Dir)) {
        Error("cannot create '" + Dir + "': " + EC.message());
        return false;
      }
      IO.OutputDir = std::string(Dir);
    }
    if (!Steps.DumpKernelsDir.empty()) {
      const BackendInfo *B = Backends.kernelDumper();
      if (!B) {
        Error("--dump-kernels: no backend of this build generates kernels");
        return false;
      }
      std::vector<std::string> Missing;
      llvm::Expected<unsigned> N =
          B->DumpKernels(M, *G, Steps.DumpKernelsDir, Missing);
      if (!N) {
        Error(toString(N.takeError()));
        return false;
      }
      llvm::errs() << "mtsched-opt: wrote " << *N << " kernels of @"
                   << G->getName() << " to " << Steps.DumpKernelsDir << "\n";
      for (const std::string &E : Missing)
        llvm::errs() << "mtsched-opt: warning: no kernel for " << E << "\n";
    }
    if (Steps.Interpret)
      if (llvm::Error E = interpretGraphToFiles(*G, IO, llvm::errs()))
        Error("@" + G->getName() + ": " + toString(std::move(E)));
    if (Steps.Run) {
      const BackendInfo *B = Backends.executor();
      if (!B)
        Error("--run: no backend of this build runs graphs");
      else if (llvm::Error E = B->RunGraph(*G, IO, llvm::errs()))
        Error(toString(std::move(E)));
    }
  }
  switch (Steps.Emit) {
  case OutputSteps::EmitKind::IR:
    printModule(M, OS);
    break;
  case OutputSteps::EmitKind::Dot:
    printModuleAsDot(M, OS);
    break;
  case OutputSteps::EmitKind::Timeline:
    if (llvm::Error E = writeTimeline(M, Steps.Device, OS))
      Error(toString(std::move(E)));
    break;
  }
  return OK;
}
