//===- OutputSteps.cpp - What happens to the decided module ---------------===//
#include "mtsched/Driver/OutputSteps.h"
#include "mtsched/Autotune/Npy.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/IR/DotPrinter.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Printer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mtsched;

bool mtsched::runOutputSteps(const OutputSteps &Steps, const Module &M,
                             llvm::raw_ostream &OS) {
  bool OK = true;
  auto Error = [&](const llvm::Twine &Msg) {
    llvm::errs() << "mtsched-opt: error: " << Msg << "\n";
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
      std::vector<std::string> Errors;
      std::vector<KernelSource> Ks = generateGraphKernels(*G, Errors);
      // The peer-memory collectives the decided graph runs are kernels
      // too; NCCL choices are library calls and have none.
      for (KernelSource &K : generateGraphCollectiveKernels(M, *G, Errors))
        Ks.push_back(std::move(K));
      if (llvm::Error E = dumpKernels(Ks, Steps.DumpKernelsDir)) {
        Error(toString(std::move(E)));
        return false;
      }
      llvm::errs() << "mtsched-opt: wrote " << Ks.size() << " kernels of @"
                   << G->getName() << " to " << Steps.DumpKernelsDir << "\n";
      for (const std::string &E : Errors)
        llvm::errs() << "mtsched-opt: warning: no kernel for " << E << "\n";
    }
    if (Steps.Interpret)
      if (llvm::Error E = interpretGraphToFiles(*G, IO, llvm::errs()))
        Error("@" + G->getName() + ": " + toString(std::move(E)));
    if (Steps.Run)
      if (llvm::Error E = runGraphOnGpu(*G, IO, llvm::errs()))
        Error(toString(std::move(E)));
  }
  if (Steps.Emit == OutputSteps::EmitKind::IR)
    printModule(M, OS);
  else
    printModuleAsDot(M, OS);
  return OK;
}
