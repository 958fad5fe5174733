//===- RankRunner.cpp - Runs the pipeline on every rank -------------------===//
//
// Two launchers share everything but the launch: thread ranks (every rank a
// thread of this process, talking through a ThreadGroup) and MPI ranks (this
// process is one rank of `mpirun -np N`, talking through an
// MpiCommunicator from the MPI plugin, loaded only then: MpiPlugin.h). Both
// run runRank() per rank and emitOutputs() once for the reporting rank.
// This file holds what they share; ThreadRanks.cpp the thread launcher and
// MpiRanks.cpp the MPI launcher (RankRunnerImpl.h between them).
//
//===----------------------------------------------------------------------===//
#include "mtsched/Driver/RankRunner.h"
#include "RankRunnerImpl.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/DecisionTable.h"
#include "mtsched/Autotune/LazyBenchmarker.h"
#include "mtsched/Autotune/PreSync.h"
#include "mtsched/Backend/Backends.h"
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Reference/RandomInputs.h"
#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Runtime/MpiPlugin.h"
#include "mtsched/Runtime/Topology.h"
#include "mtsched/Schedule/Schedule.h"
#include "mtsched/Support/Diagnostics.h"
#include "mtsched/Support/ToolError.h"
#include "mtsched/Tools/RankPipeline.h"
#include "mtsched/Tools/Report.h"
#include "mtsched/Tools/Summary.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/TimeProfiler.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_sha1_ostream.h"
#include "llvm/Support/xxhash.h"
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <thread>
#include <unistd.h>

using namespace mtsched;
using namespace mtsched::ranks;

namespace mtsched::ranks {

/// How a rank's passes ended, into State: stopped by an injected fault
/// (with why), failed (an error not yet reported is printed), or OK.
void noteRankEnd(llvm::Error E, RankState &State) {
  bool Failed = false;
  llvm::handleAllErrors(
      std::move(E),
      [&](const RankStoppedError &S) {
        State.Stopped = true;
        State.StopReason = S.message();
      },
      [&](const ReportedError &) { Failed = true; },
      [&](const llvm::ErrorInfoBase &EI) {
        Failed = true;
        toolError() << EI.message() << '\n';
      });
  State.OK = !Failed && !State.Stopped;
}

bool hasCollectives(const Graph &G) {
  for (const auto &N : G.getNodes()) {
    if (llvm::isa<CollectiveMultiTemplateBufferNode>(N.get()) ||
        collectiveKindOf(N->getOp()) != CollectiveKind::None)
      return true;
    if (const auto *O = llvm::dyn_cast<OpNode>(N.get()))
      if (O->getOp() == OpCode::Custom &&
          classifyCustomOp(O->getCustomName(), O->getConfigs()).IsCollective)
        return true;
  }
  return false;
}

/// The number of ranks: Fixed (the MPI size) if positive, else --ranks,
/// else the largest world size. A graph with collectives must run on exactly
/// its world size; others run on any. Source names where the count came from
/// in the error, which only Loud ranks print.
int rankCount(const OptMainConfig &Config, const Module &M, Diagnostics &Diags,
              int Fixed, llvm::StringRef Source, bool Loud) {
  int64_t N = Fixed > 0 ? Fixed : Config.NumRanks;
  if (N == 0)
    for (const auto &G : M.getGraphs()) {
      // Checked before it becomes a count of threads and module copies.
      if (G->getWorldSize() > OptMainConfig::MaxRanks) {
        if (Loud)
          Diags.print(G->getLoc(), llvm::SourceMgr::DK_Error,
                      "graph '@" + G->getName() + "' has world_size " +
                          llvm::Twine(G->getWorldSize()) + ", more than the " +
                          llvm::Twine(OptMainConfig::MaxRanks) +
                          " ranks mtsched-opt can run");
        return 0;
      }
      N = std::max(N, G->getWorldSize());
    }
  N = std::max<int64_t>(N, 1);
  for (const auto &G : M.getGraphs())
    if (G->getWorldSize() != N && hasCollectives(*G)) {
      if (Loud)
        Diags.print(G->getLoc(), llvm::SourceMgr::DK_Error,
                    "graph '@" + G->getName() + "' has world_size " +
                        llvm::Twine(G->getWorldSize()) + ", but " +
                        llvm::Twine(N) + " rank" + (N == 1 ? " is" : "s are") +
                        " running (" + Source + ")");
      return 0;
    }
  return N;
}

/// Whether every --inject fault names a rank, node and choice of this run;
/// Loud ranks say which does not.
bool checkFaultTargets(const OptMainConfig &Config, const Module &M, int N,
                       bool Loud) {
  llvm::Error E = Config.Pipe.Autotune.Faults.checkTargets(
      M, Config.Pipe.Lowering.Choices, N);
  if (!E)
    return true;
  std::string Msg = toString(std::move(E));
  if (Loud)
    toolError() << Msg << '\n';
  return false;
}

/// Rank's GPU and the GPUs it reaches, into P, as the backend's
/// CountDevices and PeerOrdinals tell; a backend without them runs no
/// collective on a GPU, and then the GPUs (if any) do not matter and are
/// not probed, so a simulated run is the same on every machine. Count
/// and the peers are asked of the driver once per process (Cache).
void probeGpu(const AutotuneOptions &Tune, int Rank, RankPlacement &P,
              std::map<int, std::vector<int>> &Cache, int &Count,
              std::string &NoGpu) {
  const BackendInfo *B = getBuiltinBackends().lookup(Tune.Backend);
  if (!B || !B->CountDevices || !B->PeerOrdinals) {
    P.NoGpuReason = "the " + Tune.Backend + " backend uses no GPU";
    return;
  }
  if (Count == 0 && NoGpu.empty()) {
    llvm::Expected<int> C = B->CountDevices();
    if (C)
      Count = *C;
    else
      NoGpu = "no GPU: " + toString(C.takeError());
  }
  if (Count == 0) {
    P.NoGpuReason = NoGpu;
    return;
  }
  // The GPU the rank's collectives run on (the backend opens the same).
  int Ordinal = Rank % Count;
  auto It = Cache.find(Ordinal);
  if (It == Cache.end()) {
    llvm::Expected<std::vector<int>> Peers = B->PeerOrdinals(Ordinal);
    if (!Peers) {
      P.NoGpuReason = toString(Peers.takeError());
      return;
    }
    It = Cache.emplace(Ordinal, std::move(*Peers)).first;
  }
  P.Ordinal = Ordinal;
  P.PeerOrdinals = It->second;
}

/// Config with the topology the ranks run on: a --topology file as read,
/// else Found (discovered). Says where it came from either way.
OptMainConfig withTopology(const OptMainConfig &Config,
                           const DiscoveredTopology *Found) {
  OptMainConfig C = Config;
  ChoiceConfig &Choices = C.Pipe.Lowering.Choices;
  // The hierarchical pre-sync groups ranks by host.
  auto SetHosts = [&] {
    C.Pipe.Autotune.RankHosts.clear();
    int64_t World = 0;
    for (const Topology::Host &H : Choices.Topo.Hosts)
      World += int64_t(H.Ranks.size());
    C.Pipe.Autotune.RankHosts.assign(size_t(World), 0);
    for (size_t HI = 0; HI < Choices.Topo.Hosts.size(); ++HI)
      for (int64_t R : Choices.Topo.Hosts[HI].Ranks)
        if (R < World)
          C.Pipe.Autotune.RankHosts[size_t(R)] = int(HI);
  };
  if (!Choices.TopologyPath.empty() || !Found) {
    C.TopologySource = Choices.TopologyPath.empty()
                           ? "default"
                           : "--topology=" + Choices.TopologyPath;
    SetHosts();
    return C;
  }
  Choices.Topo = Found->Topo;
  SetHosts();
  C.TopologySource = Found->Source;
  // Ranks that see the hosts differently must not tune together; one host
  // of one domain is the default, whose fingerprint adds nothing.
  C.Pipe.Autotune.TopologyFingerprint =
      Choices.Topo.isDefault() ? "" : Choices.Topo.fingerprint();
  return C;
}

/// Rank's autotuner options: the pipeline's, with the host the topology
/// puts the rank on (the CUDA backend's `hier` groups ranks by it). Every
/// launcher, shared module or not, makes its rank's options here.
AutotuneOptions rankAutotuneOptions(const PipelineOptions &Pipe, int Rank) {
  AutotuneOptions Tune = Pipe.Autotune;
  for (const Topology::Host &H : Pipe.Lowering.Choices.Topo.Hosts)
    if (llvm::is_contained(H.Ranks, int64_t(Rank)))
      Tune.HostName = H.Name;
  return Tune;
}

/// Runs the pipeline as one rank: every launcher's shared part. Comm is the
/// rank's communicator and Hooks how it stops on purpose (fault injection).
/// HashFinalIR: record the decided IR's hash for comparison with the other
/// ranks of this process.
void runRank(int Rank, std::unique_ptr<Communicator> Comm, RankHooks Hooks,
             const OptMainConfig &Config, const FusionHeuristic &Heuristic,
             std::unique_ptr<Module> Mod, Diagnostics &Diags, RankState &State,
             bool HashFinalIR, llvm::ArrayRef<std::string> Passes) {
  State.M = std::move(Mod);
  State.Comm = std::move(Comm);
  const PipelineOptions &Pipe = Config.Pipe;
  llvm::Expected<std::unique_ptr<Autotuner>> Session = createRankAutotuner(
      rankAutotuneOptions(Pipe, Rank), Pipe.Fusion, Heuristic,
      Pipe.Lowering.Mode, Rank, *State.Comm, Diags, *State.M, std::move(Hooks));
  if (!Session) {
    // Every rank fails the same way; rank 0 says so.
    std::string Msg = toString(Session.takeError());
    if (Rank == 0)
      toolError() << Msg << '\n';
    return;
  }
  State.Session = std::move(*Session);
  // This rank's passes, bound to its options and its autotuner.
  PassRegistry RankPasses;
  registerAllPasses(RankPasses, Pipe, State.Session.get());

  PassContext Ctx;
  Ctx.M = State.M.get();
  Ctx.Diags = &Diags;
  Ctx.AnalysisOS = Rank == 0 ? &llvm::outs() : &llvm::nulls();
  PassManagerOptions PMOpts = Config.PMOptions;
  PMOpts.TimePasses &= Rank == 0;
  llvm::raw_string_ostream DumpOS(State.Dumps);
  {
    PassManager PM(PMOpts, Ctx, DumpOS);
    for (const std::string &Name : Passes)
      PM.addPass(RankPasses.lookup(Name)->Factory());
    llvm::Error E = PM.run(*State.M);
    llvm::append_range(State.PassTimesMs, PM.getPassTimesMs());
    noteRankEnd(std::move(E), State);
  }
  if (State.OK) {
    // Every rank's timings and decisions only for those that show them.
    State.Session->finish(!Config.ReportFile.empty() || Config.AutotuneSummary);
    if (HashFinalIR) {
      llvm::raw_sha1_ostream Hash;
      printModule(*State.M, Hash);
      State.FinalIRHash = llvm::toHex(Hash.sha1());
    }
  }
}

/// With Config.DisableFree, S's session (its GPU's memory and kernels, its
/// NCCL communicator, cuBLAS) is left to the OS, which reclaims it as the
/// process ends: destroying it took 0.1-0.2 s of a 2-rank run on 2 H100s
/// (docs/BENCHMARKS.md). Its builder's compiles, which write the kernel
/// cache, finished with the graph they were built for (Autotuner.h).
void leaveToTheOS(const OptMainConfig &Config, RankState &S) {
  if (!Config.DisableFree || !S.Session)
    return;
  llvm::BuryPointer(std::move(S.Session));
}

bool writeFile(llvm::StringRef Path, llvm::StringRef What,
               llvm::function_ref<void(llvm::raw_fd_ostream &)> Write) {
  std::error_code EC;
  llvm::raw_fd_ostream OS(Path, EC, llvm::sys::fs::OF_Text);
  if (EC) {
    toolError() << "cannot write " << What << " '" << Path
                << "': " << EC.message() << '\n';
    return false;
  }
  Write(OS);
  return true;
}

/// The outputs of a run, from the reporting rank (null if none finished):
/// its IR dumps, and when OK its final IR and the report. WriteTrace: this
/// process writes the trace it collected. Returns OK unless a file could
/// not be written.
bool emitOutputs(const OptMainConfig &Config, int N, RankState *Reporter,
                 bool OK, bool WriteTrace, llvm::raw_ostream &OS,
                 std::vector<std::pair<std::string, double>> FrontendPhasesMs,
                 int ModuleCopies) {
  if (Reporter && Reporter->Session) {
    // One line per failed sync, from one rank only: every rank composed
    // the same.
    std::string Lines;
    for (const std::string &W : Reporter->Session->getResult().Warnings)
      Lines += "warning: " + W + "\n";
    llvm::errs() << Lines;
  }
  if (Reporter) {
    // IR dumps go to stderr, as mlir-opt's do, so stdout stays one module
    // that the next tool can parse.
    llvm::errs() << Reporter->Dumps;
    if (OK)
      OK =
          runOutputSteps(Config.Output, getBuiltinBackends(), *Reporter->M, OS);
    // Only a run that tuned something has anything to summarise.
    if (OK && Config.AutotuneSummary &&
        !Reporter->Session->getResult().Nodes.empty()) {
      if (N > 1)
        llvm::errs() << "AUTOTUNE topology: " << Config.TopologySource << '\n';
      printAutotuneSummary(Reporter->Session->getResult(), *Reporter->M, N,
                           llvm::errs(), &Config.Pipe.Lowering.Choices);
    }
  }
  if (OK && !Config.ReportFile.empty()) {
    ReportInput In;
    In.Backend = Reporter->Session->getBackendName();
    In.WorldSize = N;
    In.TopologySource = Config.TopologySource;
    In.Topo = &Config.Pipe.Lowering.Choices.Topo;
    In.Mode = Reporter->Session->getMode();
    In.Result = &Reporter->Session->getResult();
    In.ModuleCopies = ModuleCopies;
    In.ExtraPhasesMs = std::move(FrontendPhasesMs);
    llvm::append_range(In.ExtraPhasesMs, Reporter->PassTimesMs);
    OK &= writeFile(Config.ReportFile, "report",
                    [&](llvm::raw_fd_ostream &F) { writeReport(F, In); });
  }
  if (!Config.TraceFile.empty()) {
    if (WriteTrace)
      OK &= writeFile(Config.TraceFile, "trace", [&](llvm::raw_fd_ostream &F) {
        llvm::timeTraceProfilerWrite(F);
      });
    llvm::timeTraceProfilerCleanup();
  }
  return OK;
}

} // namespace mtsched::ranks

bool mtsched::runOnRanks(
    const OptMainConfig &Config, const FusionHeuristic &Heuristic,
    std::unique_ptr<Module> M, Diagnostics &Diags, llvm::raw_ostream &OS,
    std::vector<std::pair<std::string, double>> FrontendPhasesMs) {
  int LaunchedRanks = launcherVar(LauncherSizeVars);
  // Without passes there is nothing for ranks to do: print the module,
  // whatever world sizes its graphs have (once, under mpirun).
  if (Config.Pipeline.empty())
    return launcherVar(LauncherRankVars) > 0 ||
           runOutputSteps(Config.Output, getBuiltinBackends(), *M, OS);
  if (LaunchedRanks < 1)
    return runThreadRanks(Config, Heuristic, std::move(M), Diags, OS,
                          std::move(FrontendPhasesMs));
  return runMpiRanks(Config, Heuristic, std::move(M), Diags, OS,
                     std::move(FrontendPhasesMs));
}
