//===- RankRunner.h - Runs the pipeline on every rank -----------*- C++ -*-===//
//
// Each rank runs the pipeline, talking to its peers through a Communicator:
// as a thread of this process (default), or, when an MPI launcher started
// this process (`mpirun -np N`), as this process, one rank of N. Thread
// ranks share one module where the pipeline allows (lowered and fused once,
// decided without writing it, docs/RANKS.md); otherwise, and for MPI ranks,
// each rank has its own copy. The lowest rank that finishes reports: its IR is
// printed and its session writes the report. docs/RANKS.md has the details.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_RANKRUNNER_H
#define MTSCHED_DRIVER_RANKRUNNER_H

#include "mtsched/Driver/OptMain.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <utility>
#include <vector>

namespace mtsched {

class Diagnostics;
class FusionHeuristic;
class Module;

/// Runs Config's pipeline on M with Config.NumRanks ranks (or the module's
/// world size). Prints the reporting rank's IR dumps and final IR to OS and
/// writes the report and trace Config asks for; FrontendPhasesMs (parse,
/// verify) go into the report. Every rank's autotuner asks Heuristic
/// (built once from Config.Pipe.Fusion.Heuristic). Returns false after
/// reporting an error.
bool runOnRanks(const OptMainConfig &Config, const FusionHeuristic &Heuristic,
                std::unique_ptr<Module> M, Diagnostics &Diags,
                llvm::raw_ostream &OS,
                std::vector<std::pair<std::string, double>> FrontendPhasesMs);

/// Under an MPI launcher, with a pipeline to run: tells every rank whether
/// this one read its input (M, null if it did not) and the world size of
/// each of its graphs, and returns whether every rank read its input and
/// all world sizes match rank 0's. A rank whose input failed, or whose
/// world size differs, thus stops every rank at once, each saying which
/// rank differs, instead of leaving its peers to time out. True at once
/// for thread ranks.
bool agreeOnInput(const OptMainConfig &Config, const Module *M);

/// Ends this process's part in the run; call it last, with the exit code
/// main() is about to return, and return what it returns. With thread ranks
/// that is ExitCode. With MPI ranks it flushes the outputs and calls
/// MPI_Finalize, bounded by a watchdog that exits without it (short when a
/// peer went silent, see docs/RANKS.md); a rank that hung on purpose
/// returns 3.
int finishRankProcess(int ExitCode);

} // namespace mtsched

#endif // MTSCHED_DRIVER_RANKRUNNER_H
