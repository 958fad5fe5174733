//===- RankRunnerImpl.h - What the rank launchers share ---------*- C++ -*-===//
//
// Private to lib/Driver: what both launchers share lives in RankRunner.cpp,
// the thread launcher in ThreadRanks.cpp, the MPI launcher in MpiRanks.cpp.
// Declared here is what each calls in another; each is documented at its
// definition.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_DRIVER_RANKRUNNERIMPL_H
#define MTSCHED_LIB_DRIVER_RANKRUNNERIMPL_H

#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/DecisionTable.h"
#include "mtsched/Autotune/RankAgreement.h"
#include "mtsched/Driver/OptMain.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Runtime/Topology.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtsched {
class Diagnostics;
class FusionHeuristic;

namespace ranks {

/// One rank's module, communicator, autotuner and how its passes ended.
struct RankState {
  std::unique_ptr<Module> M;
  std::unique_ptr<Communicator> Comm;
  std::unique_ptr<Autotuner> Session;
  std::string Dumps;
  /// SHA1 of the decided IR as printed, to compare thread ranks without
  /// holding a copy of each rank's text.
  std::string FinalIRHash;
  bool OK = false;
  /// Stopped by an injected fault (exit or hang).
  bool Stopped = false;
  std::string StopReason;
  std::vector<std::pair<std::string, double>> PassTimesMs;
  /// Thread ranks sharing one module: the hash of this rank's decisions,
  /// which the module does not hold (DecisionTable.h).
  DecisionDigest Digest;
};

/// The variables an MPI launcher sets for each process it starts: Open MPI,
/// then MPICH/Hydra and Slurm (PMI), then PMIx.
inline constexpr const char *LauncherSizeVars[] = {"OMPI_COMM_WORLD_SIZE",
                                                   "PMI_SIZE", "PMIX_SIZE"};
inline constexpr const char *LauncherRankVars[] = {"OMPI_COMM_WORLD_RANK",
                                                   "PMI_RANK", "PMIX_RANK"};

// RankRunner.cpp.
void noteRankEnd(llvm::Error E, RankState &State);
AutotuneOptions rankAutotuneOptions(const PipelineOptions &Pipe, int Rank);
int rankCount(const OptMainConfig &Config, const Module &M, Diagnostics &Diags,
              int Fixed, llvm::StringRef Source, bool Loud);
bool checkFaultTargets(const OptMainConfig &Config, const Module &M, int N,
                       bool Loud);
void probeGpu(const AutotuneOptions &Tune, int Rank, RankPlacement &P,
              std::map<int, std::vector<int>> &Cache, int &Count,
              std::string &NoGpu);
OptMainConfig withTopology(const OptMainConfig &Config,
                           const DiscoveredTopology *Found);
void runRank(int Rank, std::unique_ptr<Communicator> Comm, RankHooks Hooks,
             const OptMainConfig &Config, const FusionHeuristic &Heuristic,
             std::unique_ptr<Module> Mod, Diagnostics &Diags, RankState &State,
             bool HashFinalIR, llvm::ArrayRef<std::string> Passes);
void leaveToTheOS(const OptMainConfig &Config, RankState &S);
bool emitOutputs(const OptMainConfig &Config, int N, RankState *Reporter,
                 bool OK, bool WriteTrace, llvm::raw_ostream &OS,
                 std::vector<std::pair<std::string, double>> FrontendPhasesMs,
                 int ModuleCopies);

// ThreadRanks.cpp.
bool runThreadRanks(
    const OptMainConfig &GivenConfig, const FusionHeuristic &Heuristic,
    std::unique_ptr<Module> M, Diagnostics &Diags, llvm::raw_ostream &OS,
    std::vector<std::pair<std::string, double>> FrontendPhasesMs);

// MpiRanks.cpp.
int launcherVar(llvm::ArrayRef<const char *> Names);
bool runMpiRanks(const OptMainConfig &GivenConfig,
                 const FusionHeuristic &Heuristic, std::unique_ptr<Module> M,
                 Diagnostics &Diags, llvm::raw_ostream &OS,
                 std::vector<std::pair<std::string, double>> FrontendPhasesMs);

} // namespace ranks
} // namespace mtsched

#endif // MTSCHED_LIB_DRIVER_RANKRUNNERIMPL_H
