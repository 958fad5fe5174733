//===- OutputSteps.h - What happens to the decided module -------*- C++ -*-===//
//
// After the pipeline, the reporting rank's decided module is printed (as IR
// or as a Graphviz graph) and, on request, its kernels are written out, it
// is evaluated by the fp64 interpreter or run on the GPU. These steps work
// on the module in memory, graph by graph.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_OUTPUTSTEPS_H
#define MTSCHED_DRIVER_OUTPUTSTEPS_H

#include "mtsched/Runtime/DeviceDesc.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdint>
#include <string>

namespace mtsched {

class BackendRegistry;
class Module;

struct OutputSteps {
  enum class EmitKind { IR, Dot, Timeline };
  EmitKind Emit = EmitKind::IR;
  /// --emit=timeline: the device whose model times plain buffer kernels.
  DeviceDesc Device;
  /// --dump-kernels: every generated kernel's CUDA C++ goes to this folder.
  std::string DumpKernelsDir;
  /// --run: how kernels are compiled (--compile-threads, --kernel-cache-dir).
  unsigned CompileThreads = 0;
  std::string KernelCacheDir;
  /// --interpret: the fp64 interpreter evaluates each graph, within
  /// --interpret-max-bytes (default defaultInterpretMaxBytes()).
  bool Interpret = false;
  uint64_t InterpretMaxBytes = UINT64_MAX;
  /// --run: each graph runs on the GPU, checked and timed.
  bool Run = false;
  /// --run-inputs / --run-outputs folders; empty for random inputs and no
  /// output files.
  std::string InputDir;
  std::string OutputDir;
  uint64_t Seed = 0;
  unsigned TimeSamples = 10;
  bool Check = true;
  /// Outputs go to OutputDir/<graph>/ even when the module has one graph
  /// (the cases of a split input file).
  bool GraphFolders = false;

  /// Whether anything besides printing the IR was asked for.
  bool any() const {
    return Emit != EmitKind::IR || !DumpKernelsDir.empty() || Interpret || Run;
  }
};

/// Runs Steps on M and prints M to OS as Steps.Emit says; messages and
/// errors go to stderr. `--run` and `--dump-kernels` ask Backends for the
/// backend that runs graphs or generates kernels, so the driver names
/// none. Returns false if a step failed (M is printed all the same, unless
/// the kernels could not be written).
bool runOutputSteps(const OutputSteps &Steps, const BackendRegistry &Backends,
                    const Module &M, llvm::raw_ostream &OS);

} // namespace mtsched

#endif // MTSCHED_DRIVER_OUTPUTSTEPS_H
