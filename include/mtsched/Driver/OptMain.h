//===- OptMain.h - The mtsched-opt driver's main loop -----------*- C++ -*-===//
//
// The tool parses its command line into an OptMainConfig and calls
// optMain(); everything else the driver does lives here, so it can be
// tested and reused by other tools.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_OPTMAIN_H
#define MTSCHED_DRIVER_OPTMAIN_H

#include "mtsched/Driver/OutputSteps.h"
#include "mtsched/Driver/PipelineOptions.h"
#include "mtsched/Passes/PassManager.h"
#include <string>
#include <vector>

namespace mtsched {

class PassRegistry;

struct OptMainConfig {
  std::string InputFile = "-";
  std::string OutputFile = "-";
  bool SplitInputFile = false;
  bool VerifyDiagnostics = false;
  /// Pass arguments to run, in order.
  std::vector<std::string> Pipeline;
  bool DumpPassPipeline = false;
  PassManagerOptions PMOptions;
  PipelineOptions Pipe;
  /// Ranks run as threads; 0 means the graphs' world size.
  int NumRanks = 0;
  /// The most ranks one run may have, by --ranks, world_size or mpirun:
  /// every rank is a thread (or process) with its own copy of the module,
  /// so a world size of 2^31 must be an error, not an allocation.
  static constexpr int MaxRanks = 1024;
  /// JSON report and Chrome trace files; empty for none.
  std::string ReportFile;
  std::string TraceFile;
  /// Print the autotune summary (docs/PASSES.md) on stderr after tuning.
  bool AutotuneSummary = false;
  /// What is printed, and what else happens to the decided module.
  OutputSteps Output;
  /// The process ends when optMain returns: the ranks' autotuning sessions
  /// are left to the OS instead of destroyed (as clang's -disable-free
  /// leaves its AST). mtsched-opt sets it; a library caller keeps false.
  bool DisableFree = false;
  /// Where the topology came from, for the summary and the report:
  /// "--topology=FILE", or what discovery found (set by the rank launchers,
  /// RankRunner.cpp).
  std::string TopologySource;
  /// --decisions-from=FILE: optMain reads it (DecisionsSource::load) into
  /// Pipe.Autotune.DecisionsFrom; empty for none.
  std::string DecisionsFromFile;
};

/// Runs the driver; returns the process exit code (0 or 1).
int optMain(const OptMainConfig &Config);

/// Expands pipeline aliases (`default`) and checks every name; reports
/// unknown names to errs() and returns false.
bool expandPipeline(const PassRegistry &Registry,
                    const std::vector<std::string> &In,
                    std::vector<std::string> &Out);

} // namespace mtsched

#endif // MTSCHED_DRIVER_OPTMAIN_H
