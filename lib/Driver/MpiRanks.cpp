//===- MpiRanks.cpp - The MPI launcher of the rank runner ------*- C++ -*-===//
//
// Under `mpirun -np N` this process is one rank: it loads the MPI plugin,
// learns the topology, agrees on the input with its peers, runs the
// pipeline as one rank (runRank, RankRunner.cpp) and, if it reports, writes
// the outputs; finishRankProcess bounds MPI_Finalize.
//
//===----------------------------------------------------------------------===//
#include "RankRunnerImpl.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/DecisionTable.h"
#include "mtsched/Autotune/LazyBenchmarker.h"
#include "mtsched/Autotune/PreSync.h"
#include "mtsched/Backend/Backends.h"
#include "mtsched/Driver/RankRunner.h"
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

int launcherVar(llvm::ArrayRef<const char *> Names) {
  for (const char *Name : Names)
    if (const char *V = std::getenv(Name)) {
      int N = 0;
      if (!llvm::StringRef(V).getAsInteger(10, N))
        return N;
    }
  return -1;
}

/// "OMPI_COMM_WORLD_SIZE=2": the launcher variable that made this process
/// an MPI rank.
std::string launcherSizeSetting() {
  for (const char *Name : LauncherSizeVars)
    if (const char *V = std::getenv(Name))
      return std::string(Name) + "=" + V;
  return "";
}

/// The MPI plugin and MPI for this rank, or the reason in one line (said by
/// the first rank only, as every rank fails alike) and null.
MpiRuntime *loadMpiForRank() {
  bool Reports = launcherVar(LauncherRankVars) <= 0;
#ifndef MTSCHED_HAVE_MPI
  // No plugin was built: say why rather than where none was found.
  if (const char *E = std::getenv(MpiPluginEnvVar); !E || !*E) {
    if (Reports)
      toolError()
          << "this process is an MPI rank (" << launcherSizeSetting()
          << ") but this mtsched-opt was built without MPI "
             "(MTSCHED_ENABLE_MPI=OFF); run it without mpirun for thread "
             "ranks\n";
    return nullptr;
  }
#endif
  llvm::Expected<MpiRuntime &> RT = loadMpiRuntime();
  if (RT)
    return &*RT;
  std::string Why = toString(RT.takeError());
  if (Reports)
    toolError()
        << "this process is an MPI rank (" << launcherSizeSetting()
        << ") but MPI could not be loaded: " << Why
        << " (MPI ranks need mtsched's MPI plugin and an MPI library, "
           "e.g. apt-get install libopenmpi3; without mpirun, ranks are "
           "threads)\n";
  return nullptr;
}

/// A warning as one write, so that mpirun does not interleave it with
/// another rank's output.
void warnInOneWrite(const llvm::Twine &Msg) {
  llvm::errs() << ("warning: " + Msg + "\n").str();
}

/// How this process exits (see finishRankProcess).
struct ExitPolicy {
  /// Replaces the driver's exit code (a rank that hung on purpose).
  int Code = -1;
  /// How long MPI_Finalize may take before the process leaves without it.
  std::chrono::milliseconds FinalizeBound{60000};
};
ExitPolicy Exit;

/// How long a rank of a broken run waits for a lower rank to say it
/// finished before it reports itself (only when a lower rank went silent).
constexpr std::chrono::milliseconds ReporterGrace{1000};
/// How long MPI_Finalize may wait for a peer that went silent (a timed-out
/// operation): an injected hang ends and finalizes well within it.
constexpr std::chrono::milliseconds SilentPeerBound{10000};
/// How much longer than its peers' bound (pre-sync window + choice timeout)
/// a rank hangs on purpose.
constexpr std::chrono::milliseconds HangSlack{2000};
/// Exit status of a rank that hung on purpose.
constexpr int HungExitCode = 3;

/// Without a --topology file the processes say where they run: the host
/// (MPI's shared-memory split) and their GPU's peers, in one all-gather.
/// False after an error, said with the rank and its host.
bool discoverMpiTopology(const OptMainConfig &Config, MpiRankCommunicator &Comm,
                         std::optional<DiscoveredTopology> &Found) {
  int Rank = Comm.rank();
  RankPlacement Mine;
  Mine.Host = Comm.hostIdentity();
  std::map<int, std::vector<int>> Peers;
  int Count = 0;
  std::string NoGpu;
  probeGpu(Config.Pipe.Autotune, Rank, Mine, Peers, Count, NoGpu);
  const AutotuneOptions &T = Config.Pipe.Autotune;
  llvm::Expected<DiscoveredTopology> D =
      discoverTopology(Comm, Mine, T.PreSyncTimeout + T.AgreementTimeout);
  if (!D) {
    toolError() << "rank " << Rank << " on " << Mine.Host.Name << ": "
                << toString(D.takeError()) << '\n';
    return false;
  }
  Found = std::move(*D);
  return true;
}

/// The hierarchical pre-sync's communicators (each host's, the leaders'),
/// made now: MPI makes a communicator by waiting for every member, which
/// is bounded here, where every process has just passed the same checks,
/// and unbounded later, before the pre-sync knows who is running. The
/// splits are collective, so the ranks first check, in one bounded
/// all-gather, that they would make the same ones (ranks started with
/// other --pre-sync flags would not): else none, and the pre-sync is flat.
void prepareMpiPreSyncSubgroups(MpiRankCommunicator &Comm,
                                const AutotuneOptions &Tune) {
  std::vector<std::vector<int>> Subgroups =
      preSyncSubgroups(preSyncHosts(Tune, Comm.size()));
  std::string Shape;
  for (const std::vector<int> &L : Subgroups)
    Shape +=
        llvm::join(llvm::map_range(L, [](int R) { return std::to_string(R); }),
                   ",") +
        ";";
  std::vector<std::string> Shapes;
  if (Comm.allGather(llvm::utohexstr(llvm::xxh3_64bits(Shape)), Shapes,
                     Tune.PreSyncTimeout + Tune.AgreementTimeout) ==
          CommStatus::Ok &&
      llvm::all_equal(Shapes) && !Subgroups.empty())
    if (llvm::Error E = Comm.prepareSubgroups(Subgroups))
      warnInOneWrite("rank " + llvm::Twine(Comm.rank()) + ": " +
                     toString(std::move(E)) + "; the pre-sync runs flat");
}

bool runMpiRanks(const OptMainConfig &GivenConfig,
                 const FusionHeuristic &Heuristic, std::unique_ptr<Module> M,
                 Diagnostics &Diags, llvm::raw_ostream &OS,
                 std::vector<std::pair<std::string, double>> FrontendPhasesMs) {
  MpiRuntime *Mpi = loadMpiForRank();
  if (!Mpi)
    return false;
  llvm::Expected<std::unique_ptr<MpiRankCommunicator>> Created = Mpi->create();
  if (!Created) {
    toolError() << toString(Created.takeError()) << '\n';
    return false;
  }
  MpiRankCommunicator &Comm = **Created;
  int Rank = Comm.rank(), Size = Comm.size();
  std::optional<DiscoveredTopology> Found;
  if (GivenConfig.Pipe.Lowering.Choices.TopologyPath.empty() &&
      !discoverMpiTopology(GivenConfig, Comm, Found))
    return false;
  const OptMainConfig Config =
      withTopology(GivenConfig, Found ? &*Found : nullptr);
  const AutotuneOptions &Tune = Config.Pipe.Autotune;
  Exit.FinalizeBound = Tune.PreSyncTimeout + Tune.AgreementTimeout +
                       Tune.ChoiceTimeout + std::chrono::milliseconds(10000);
  // Every rank finds the same errors here; rank 0 reports them.
  if (Config.NumRanks != 0 && Config.NumRanks != Size) {
    if (Rank == 0)
      toolError() << "--ranks=" << Config.NumRanks << " does not match the "
                  << Size << " MPI process" << (Size == 1 ? "" : "es")
                  << " (mpirun -np); omit --ranks under mpirun\n";
    return false;
  }
  if (!rankCount(Config, *M, Diags, Size, "mpirun -np", Rank == 0) ||
      !checkFaultTargets(Config, *M, Size, Rank == 0))
    return false;
  prepareMpiPreSyncSubgroups(Comm, Tune);
  // Said once, by rank 0: on 2 H100s tp_mlp's tuning took 3.0 s a rank
  // bound to one core and 1.8 s unbound (docs/BENCHMARKS.md).
  if (Rank == 0 && Tune.Backend == "cuda")
    if (std::string W = coreBindingWarning(
            llvm::hardware_concurrency().compute_thread_count(),
            std::thread::hardware_concurrency());
        !W.empty())
      warnInOneWrite(W);
  bool Trace = !Config.TraceFile.empty();
  if (Trace)
    llvm::timeTraceProfilerInitialize(/*TimeTraceGranularity=*/0,
                                      "mtsched-opt");

  RankHooks Hooks;
  // Leaving: the peers hear of it at once and fail their pending operation,
  // as thread ranks do when a peer is marked dead.
  bool Departed = false;
  Hooks.Exit = [&Comm, &Departed] {
    Comm.depart();
    Departed = true;
  };
  // Hanging: take no part for longer than any peer waits (the arrival
  // deadline, then the agreement), so the peers time out and fall back;
  // then join them in MPI_Finalize and exit non-zero.
  std::chrono::milliseconds HangFor =
      Tune.PreSyncTimeout + Tune.AgreementTimeout + HangSlack;
  Hooks.Hang = [Rank, HangFor] {
    warnInOneWrite("rank " + llvm::Twine(Rank) +
                   " hangs (injected fault): it takes no part for " +
                   llvm::Twine(HangFor.count()) +
                   " ms, then exits with status " + llvm::Twine(HungExitCode));
    std::this_thread::sleep_for(HangFor);
  };
  RankState State;
  // Each process prints only its own IR: there is nothing to compare.
  runRank(Rank, std::move(*Created), std::move(Hooks), Config, Heuristic,
          std::move(M), Diags, State, /*HashFinalIR=*/false, Config.Pipeline);

  if (State.Stopped) {
    warnInOneWrite(State.StopReason);
    if (Trace)
      llvm::timeTraceProfilerCleanup();
    // Departed: MPI_Finalize at exit returns once the peers finalize.
    // Hung: the peers gave up long ago and wait in MPI_Finalize; joining
    // them ends the job cleanly, with this rank's status non-zero.
    if (!Departed)
      Exit.Code = HungExitCode;
    return true;
  }

  // The lowest rank that finished reports. Healthy run: every rank took part
  // in the autotuner's final all-gather, so that is rank 0. Broken run:
  // nothing collective is left, so the ranks that finished agree by
  // messages, with a grace for a silent lower rank.
  // A pre-sync that failed stops all cross-rank traffic, on every rank
  // alike (the verdict is agreed), and a hierarchical one may fail without
  // breaking the MPI world on every rank (its subgroups fail on their own):
  // the ranks then agree by messages too, so that a lost rank 0 is
  // replaced. They finish up to the longest wait of its levels apart (a
  // host that failed early releases its ranks at once, another waits for
  // its leader), so a lower rank is waited for as long.
  bool SyncFailed =
      State.OK && State.Session && !State.Session->getResult().Sync.Ok;
  std::chrono::milliseconds Grace =
      SyncFailed
          ? std::max<std::chrono::milliseconds>(
                ReporterGrace, Tune.PreSyncTimeout + Tune.AgreementTimeout * 3)
          : ReporterGrace;
  bool IsReporter = State.OK && (Mpi->isBroken() || SyncFailed
                                     ? Comm.isLowestFinishedRank(Grace)
                                     : Rank == 0);
  bool OK = State.OK;
  if (IsReporter) {
    const RunResult &R = State.Session->getResult();
    for (int Peer = 0; Peer < Size; ++Peer)
      if (Peer != Rank && !R.RankDecisions[Peer].empty() &&
          R.RankDecisions[Peer] != R.RankDecisions[Rank]) {
        toolError() << "ranks " << Rank << " and " << Peer
                    << " decided differently\n";
        OK = false;
      }
  }
  if (!State.OK && Rank == 0)
    llvm::errs() << State.Dumps;
  if (IsReporter)
    OK = emitOutputs(Config, Size, &State, OK, /*WriteTrace=*/true, OS,
                     std::move(FrontendPhasesMs), /*ModuleCopies=*/0);
  else if (Trace)
    llvm::timeTraceProfilerCleanup();
  leaveToTheOS(Config, State);
  return OK;
}

/// The first graph whose world size differs between rank 0's list A and
/// rank R's list B (" @g=2 @h=4" after the read flag).
std::string worldSizeDifference(llvm::StringRef A, llvm::StringRef B, int R) {
  llvm::SmallVector<llvm::StringRef, 4> WA, WB;
  A.drop_front().split(WA, ' ', -1, /*KeepEmpty=*/false);
  B.drop_front().split(WB, ' ', -1, /*KeepEmpty=*/false);
  auto Say = [](int Rank, llvm::StringRef W) {
    if (W.empty())
      return "rank " + std::to_string(Rank) + " has no such graph";
    auto [Name, Size] = W.split('=');
    return "rank " + std::to_string(Rank) + " has '" + Name.str() +
           "' with world_size " + Size.str();
  };
  for (size_t I = 0; I < std::max(WA.size(), WB.size()); ++I) {
    llvm::StringRef X = I < WA.size() ? WA[I] : "";
    llvm::StringRef Y = I < WB.size() ? WB[I] : "";
    if (X != Y)
      return Say(0, X) + ", " + Say(R, Y);
  }
  return "";
}

} // namespace mtsched::ranks

bool mtsched::agreeOnInput(const OptMainConfig &Config, const Module *M) {
  bool InputOK = M != nullptr;
  if (Config.Pipeline.empty() || launcherVar(LauncherSizeVars) < 1)
    return true;
  MpiRuntime *Mpi = loadMpiForRank();
  if (!Mpi)
    return false;
  llvm::Expected<std::unique_ptr<MpiRankCommunicator>> Created = Mpi->create();
  if (!Created) {
    toolError() << toString(Created.takeError()) << '\n';
    return false;
  }
  MpiRankCommunicator &Comm = **Created;
  const AutotuneOptions &Tune = Config.Pipe.Autotune;
  // Ranks start apart as they do at the pre-sync: the same deadline.
  std::chrono::milliseconds Bound = Tune.PreSyncTimeout + Tune.AgreementTimeout;
  // With "did you read it?" travel the world sizes, the first thing ranks
  // must agree on: ranks that differ there would otherwise fail apart (one
  // at its rank count, the others waiting for it at the pre-sync).
  std::string Mine = InputOK ? "1" : "0";
  if (M)
    for (const auto &G : M->getGraphs())
      Mine += " @" + G->getName() + "=" + std::to_string(G->getWorldSize());
  std::vector<std::string> All;
  if (Comm.allGather(Mine, All, Bound) != CommStatus::Ok) {
    std::vector<int> Missing = Comm.missingPeers();
    std::string Who;
    for (int R : Missing)
      Who += (Who.empty() ? "" : ", ") + std::to_string(R);
    reportToolError("rank " + llvm::Twine(Comm.rank()) +
                    ": not every MPI rank read its input within " +
                    llvm::Twine(Bound.count()) + " ms" +
                    (Who.empty() ? "" : " (missing: rank " + Who + ")"));
    return false;
  }
  std::string Bad;
  for (size_t R = 0; R < All.size(); ++R)
    if (!llvm::StringRef(All[R]).starts_with("1"))
      Bad += (Bad.empty() ? "" : ", ") + std::to_string(R);
  if (Bad.empty()) {
    for (size_t R = 1; R < All.size(); ++R) {
      if (All[R] == All[0])
        continue;
      reportToolError("rank " + llvm::Twine(Comm.rank()) + ": ranks 0 and " +
                      llvm::Twine(R) + " have different world sizes: " +
                      worldSizeDifference(All[0], All[R], int(R)) +
                      "; every rank stops");
      return false;
    }
    return true;
  }
  reportToolError("rank " + llvm::Twine(Comm.rank()) + ": rank" +
                  (Bad.find(',') == std::string::npos ? " " : "s ") + Bad +
                  " could not read its input; every rank stops");
  return false;
}

int mtsched::finishRankProcess(int ExitCode) {
  MpiRuntime *Mpi = loadedMpiRuntime();
  if (!Mpi || !Mpi->isInitialized())
    return ExitCode;
  if (Exit.Code >= 0)
    ExitCode = Exit.Code;
  llvm::outs().flush();
  llvm::errs().flush();
  std::fflush(nullptr);
  // MPI_Finalize returns once every process calls it; a watchdog bounds the
  // wait. When an operation timed out, the silent peer may never come, so
  // the bound is short: past it this process leaves without MPI_Finalize
  // and mpirun ends the job (after an injected hang the peer does come).
  std::chrono::milliseconds Bound =
      Mpi->canFinalize() ? Exit.FinalizeBound : SilentPeerBound;
  std::thread([Bound, ExitCode] {
    std::this_thread::sleep_for(Bound);
    llvm::errs() << "mtsched-opt: MPI_Finalize did not return within "
                 << Bound.count() << " ms; exiting without it\n";
    llvm::errs().flush();
    _exit(ExitCode);
  }).detach();
  Mpi->finalize();
  return ExitCode;
}
