//===- RankRunner.cpp - Runs the pipeline on every rank -------------------===//
//
// Two launchers share everything but the launch: thread ranks (every rank a
// thread of this process, talking through a ThreadGroup) and MPI ranks (this
// process is one rank of `mpirun -np N`, talking through an
// MpiCommunicator from the MPI plugin, loaded only then: MpiPlugin.h). Both
// run runRank() per rank and emitOutputs() once for the reporting rank.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Driver/RankRunner.h"
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

namespace {

/// Holds ranks that hang on purpose until every other rank has finished,
/// so the process ends in bounded time and joins every thread.
class RankGate {
public:
  /// A rank finished (successfully or not).
  void settle() {
    std::lock_guard<std::mutex> L(M);
    ++Settled;
    CV.notify_all();
  }
  /// A rank hangs: it counts as settled and blocks until released.
  void hang() {
    std::unique_lock<std::mutex> L(M);
    ++Settled;
    CV.notify_all();
    CV.wait(L, [&] { return Released; });
  }
  /// A rank that is late on purpose sleeps up to D. It counts as settled
  /// meanwhile, so once every other rank has finished (no peer waits for
  /// it any more) the driver releases it early and the run stays bounded.
  void sleepLate(std::chrono::milliseconds D) {
    std::unique_lock<std::mutex> L(M);
    ++Settled;
    CV.notify_all();
    if (!CV.wait_for(L, D, [&] { return Released; }))
      --Settled;
  }
  void waitAllSettled(int N) {
    std::unique_lock<std::mutex> L(M);
    CV.wait(L, [&] { return Settled == N; });
  }
  void release() {
    std::lock_guard<std::mutex> L(M);
    Released = true;
    CV.notify_all();
  }

private:
  std::mutex M;
  std::condition_variable CV;
  int Settled = 0;
  bool Released = false;
};

/// A rank's thread, started with pthread_create so that a failure to
/// create it (the address-space limit, the process's thread limit) is an
/// error code: std::thread reports it by an exception, which mtsched does
/// not use, and llvm::thread by a fatal error.
class RankThread {
public:
  explicit RankThread(std::function<void()> Fn) : Fn(std::move(Fn)) {}
  /// 0, or the errno value pthread_create returned.
  int start() {
    return pthread_create(&Thread, nullptr, &RankThread::run, this);
  }
  void join() { pthread_join(Thread, nullptr); }

private:
  static void *run(void *Self) {
    static_cast<RankThread *>(Self)->Fn();
    return nullptr;
  }
  std::function<void()> Fn;
  pthread_t Thread;
};

/// Holds the rank threads until every one of them exists: if one cannot
/// be created, none has started its rank (whose peers would wait for the
/// missing one), and all of them leave at once.
class StartGate {
public:
  /// Whether to run the rank (false: the run was called off).
  bool waitToStart() {
    std::unique_lock<std::mutex> L(M);
    CV.wait(L, [&] { return Decided; });
    return Go;
  }
  void open(bool Run) {
    std::lock_guard<std::mutex> L(M);
    Decided = true;
    Go = Run;
    CV.notify_all();
  }

private:
  std::mutex M;
  std::condition_variable CV;
  bool Decided = false;
  bool Go = false;
};

/// Hands thread ranks their module: every rank clones the parsed module
/// (none waits for another: a rank held back would arrive late at the
/// pre-sync), and the last one to finish cloning frees it, so the parsed
/// module is not kept beside the N copies for the rest of the run.
class ModuleHandout {
public:
  ModuleHandout(std::unique_ptr<Module> M, int N)
      : Original(std::move(M)), N(N) {}
  std::unique_ptr<Module> take() {
    if (N == 1)
      return std::move(Original);
    std::unique_ptr<Module> Copy = Original->clone();
    std::lock_guard<std::mutex> L(Mu);
    if (++Cloned == N)
      Original.reset();
    return Copy;
  }
  /// Copies of the module made so far (0 when one rank takes the original).
  int copies() {
    std::lock_guard<std::mutex> L(Mu);
    return Cloned;
  }

private:
  std::unique_ptr<Module> Original;
  int N;
  std::mutex Mu;
  int Cloned = 0;
};

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

/// Runs Passes once on M, for every thread rank (which would each have run
/// them alike on a copy): rank 0's view (its analysis output), bound to
/// Session. Appends the passes' times to Times; false after reporting an
/// error.
bool runPassesOnce(const OptMainConfig &Config, Module &M, Diagnostics &Diags,
                   llvm::ArrayRef<std::string> Passes, Autotuner *Session,
                   std::vector<std::pair<std::string, double>> &Times) {
  if (Passes.empty())
    return true;
  PassRegistry Registry;
  registerAllPasses(Registry, Config.Pipe, Session);
  PassContext Ctx;
  Ctx.M = &M;
  Ctx.Diags = &Diags;
  Ctx.AnalysisOS = &llvm::outs();
  // No IR is printed in this mode (canShareModule), so nothing is dumped.
  PassManager PM(Config.PMOptions, Ctx, llvm::nulls());
  for (const std::string &Name : Passes)
    PM.addPass(Registry.lookup(Name)->Factory());
  llvm::Error E = PM.run(M);
  llvm::append_range(Times, PM.getPassTimesMs());
  bool Failed = false;
  llvm::handleAllErrors(
      std::move(E), [&](const ReportedError &) { Failed = true; },
      [&](const llvm::ErrorInfoBase &EI) {
        Failed = true;
        toolError() << EI.message() << '\n';
      });
  return !Failed;
}

/// Passes a thread rank runs exactly as every other rank does, reading
/// nothing of its own (no autotuner, no communicator): lowering and fusion.
bool isRankIndependentPass(llvm::StringRef Name) {
  return Name == "lower" || Name == "fuse-swiglu" ||
         Name == "fuse-horizontal" || Name == "fuse" ||
         Name == "verify-schedule";
}

/// Where Config's pipeline splits for thread ranks that share one module:
/// the index of its `autotune` pass, when every pass before it is
/// rank-independent (run once, on the one module) and every pass after it
/// can run once on the decided module. None when the ranks must each own a
/// copy: one rank, immediate mode (lowering decides), IR printed or passes
/// timed per rank, or any other pass.
std::optional<size_t> sharedModuleSplit(const OptMainConfig &Config, int N) {
  const PassManagerOptions &PM = Config.PMOptions;
  if (N < 2 || Config.Pipe.Lowering.Mode == CollectiveMode::Immediate ||
      PM.PrintBeforeAll || !PM.PrintBefore.empty() || PM.PrintAfterAll ||
      !PM.PrintAfter.empty() || PM.PrintAfterChange || PM.PrintAfterFailure ||
      PM.TimePasses)
    return std::nullopt;
  llvm::ArrayRef<std::string> P = Config.Pipeline;
  const std::string *It = llvm::find(P, "autotune");
  if (It == P.end() || llvm::count(P, "autotune") != 1)
    return std::nullopt;
  size_t Split = It - P.begin();
  if (!llvm::all_of(P.take_front(Split), isRankIndependentPass))
    return std::nullopt;
  for (const std::string &Name : P.drop_front(Split + 1))
    if (Name != "select-swiglu" && Name != "select-horizontal" &&
        Name != "verify-schedule")
      return std::nullopt;
  return Split;
}

/// Whether select-swiglu has anything to select in M: it measures across
/// ranks, so each rank needs its decided copy.
bool hasSwiGluAlternatives(const Module &M) {
  for (const auto &G : M.getGraphs())
    for (const auto &N : G->getNodes())
      if (N->getOp() == OpCode::SwiGlu &&
          N->getAttrs().contains(AlternativeOfAttr))
        return true;
  return false;
}

/// One thread rank on the module every rank shares, read-only: its own
/// communicator, autotuner and measurements; its decisions go to
/// State.Table (the module's nodes are not written), its per-node records
/// only where a report or summary may show them.
void runSharedRank(int Rank, std::unique_ptr<Communicator> Comm,
                   RankHooks Hooks, const OptMainConfig &Config,
                   const FusionHeuristic &Heuristic, const Module &M,
                   DecisionTable &Table, Diagnostics &Diags, RankState &State) {
  State.Comm = std::move(Comm);
  const PipelineOptions &Pipe = Config.Pipe;
  llvm::Expected<std::unique_ptr<Autotuner>> Session = createRankAutotuner(
      rankAutotuneOptions(Pipe, Rank), Pipe.Fusion, Heuristic,
      Pipe.Lowering.Mode, Rank, *State.Comm, Diags, M, std::move(Hooks));
  if (!Session) {
    std::string Msg = toString(Session.takeError());
    if (Rank == 0)
      toolError() << Msg << '\n';
    return;
  }
  State.Session = std::move(*Session);
  bool Details = !Config.ReportFile.empty() || Config.AutotuneSummary;
  State.Session->setDecisionTable(&Table, &State.Digest);
  State.Session->setKeepNodeRecords(Details);
  // What the pass manager does for `autotune`, on each graph in turn.
  auto Start = std::chrono::steady_clock::now();
  llvm::Error E = llvm::Error::success();
  for (const auto &G : M.getGraphs())
    if ((E = State.Session->tuneGraph(*G)))
      break;
  State.PassTimesMs.emplace_back("autotune",
                                 std::chrono::duration<double, std::milli>(
                                     std::chrono::steady_clock::now() - Start)
                                     .count());
  noteRankEnd(std::move(E), State);
  if (State.OK) {
    State.Session->finish(Details);
    State.FinalIRHash = State.Digest.result();
  }
}

/// The shared module decided as the ranks decided (every finished rank's
/// digest matched the reporter's), checked as the autotune pass and the
/// pass manager check a rank's own copy, then the passes after `autotune`.
/// False after reporting an error.
bool decideSharedModule(const OptMainConfig &Config, Module &M,
                        const DecisionTable &Table, Diagnostics &Diags,
                        RankState &Reporter,
                        llvm::ArrayRef<std::string> After) {
  if (llvm::Error E = Table.apply(M)) {
    toolError() << toString(std::move(E)) << '\n';
    return false;
  }
  for (const auto &G : M.getGraphs())
    if (llvm::Error E = verifySchedule(*G)) {
      llvm::consumeError(Diags.error(
          G->getLoc(), "the autotuner decided an illegal schedule for '@" +
                           G->getName() + "': " + toString(std::move(E))));
      return false;
    }
  if (Config.PMOptions.VerifyEach)
    if (llvm::Error E = verifyModule(M, Diags.getSourceMgr())) {
      llvm::consumeError(std::move(E));
      llvm::consumeError(
          Diags.error({}, "IR is invalid after pass 'autotune'"));
      return false;
    }
  return runPassesOnce(Config, M, Diags, After, Reporter.Session.get(),
                       Reporter.PassTimesMs);
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

//===----------------------------------------------------------------------===//
// Thread ranks
//===----------------------------------------------------------------------===//

/// Thread ranks are one process on one host: every placement is known
/// here, without an exchange; none where a --topology file says.
std::optional<DiscoveredTopology>
threadRankTopology(const OptMainConfig &Config, int N) {
  if (!Config.Pipe.Lowering.Choices.TopologyPath.empty())
    return std::nullopt;
  SingleCommunicator Here;
  std::vector<RankPlacement> Placements(static_cast<size_t>(N));
  std::map<int, std::vector<int>> Peers;
  int Count = 0;
  std::string NoGpu;
  for (int R = 0; R < N; ++R) {
    Placements[size_t(R)].Host = Here.hostIdentity();
    probeGpu(Config.Pipe.Autotune, R, Placements[size_t(R)], Peers, Count,
             NoGpu);
  }
  return topologyFromPlacements(Placements);
}

/// After the thread ranks joined: the first rank that finished reports
/// (null if none did); OK when no rank failed and every finished rank
/// decided alike. Says why on stderr otherwise.
RankState *pickReporter(std::vector<RankState> &States, bool &OK) {
  int N = int(States.size());
  RankState *Reporter = nullptr;
  bool AnyError = false;
  for (RankState &S : States) {
    if (S.Stopped)
      llvm::WithColor::warning() << S.StopReason << "\n";
    else if (!S.OK)
      AnyError = true;
    else if (!Reporter)
      Reporter = &S;
  }
  OK = !AnyError && Reporter;
  // Every rank stopped on purpose: nobody reported an error, yet there is
  // nothing to print, so say why the run fails.
  if (!Reporter && !AnyError)
    toolError() << "no rank finished: all " << N
                << (N == 1 ? " rank" : " ranks")
                << " stopped (injected faults); nothing to "
                   "report\n";
  // No rank finished: the first that failed shows its dumps (e.g.
  // --print-ir-after-failure); every rank ran the same passes.
  if (!Reporter)
    for (const RankState &S : States)
      if (!S.Stopped) {
        llvm::errs() << S.Dumps;
        break;
      }
  if (OK)
    for (const RankState &S : States)
      if (S.OK && S.FinalIRHash != Reporter->FinalIRHash) {
        toolError() << "ranks " << (Reporter - States.data()) << " and "
                    << (&S - States.data()) << " decided differently\n";
        OK = false;
      }
  return Reporter;
}

bool runThreadRanks(
    const OptMainConfig &GivenConfig, const FusionHeuristic &Heuristic,
    std::unique_ptr<Module> M, Diagnostics &Diags, llvm::raw_ostream &OS,
    std::vector<std::pair<std::string, double>> FrontendPhasesMs) {
  int N = rankCount(GivenConfig, *M, Diags, 0, "--ranks", /*Loud=*/true);
  if (N == 0)
    return false;
  std::optional<DiscoveredTopology> Found = threadRankTopology(GivenConfig, N);
  const OptMainConfig Config =
      withTopology(GivenConfig, Found ? &*Found : nullptr);
  if (!checkFaultTargets(Config, *M, N, /*Loud=*/true))
    return false;
  bool Trace = !Config.TraceFile.empty();
  if (Trace)
    llvm::timeTraceProfilerInitialize(/*TimeTraceGranularity=*/0,
                                      "mtsched-opt");

  // Thread ranks share one module where the pipeline allows: what every
  // rank would do alike before the autotuner runs once, here; each rank then
  // decides on its own without writing the module (docs/RANKS.md,
  // "Resources of thread ranks"). Otherwise each rank owns a copy.
  llvm::ArrayRef<std::string> RankPasses = Config.Pipeline;
  std::vector<std::pair<std::string, double>> OncePassTimesMs;
  bool Shared = false;
  if (std::optional<size_t> Split = sharedModuleSplit(Config, N)) {
    if (!runPassesOnce(Config, *M, Diags, RankPasses.take_front(*Split),
                       /*Session=*/nullptr, OncePassTimesMs)) {
      // As if every rank had failed alike.
      emitOutputs(Config, N, nullptr, false, /*WriteTrace=*/true, OS,
                  std::move(FrontendPhasesMs), /*ModuleCopies=*/0);
      return false;
    }
    RankPasses = RankPasses.drop_front(*Split);
    Shared = !hasSwiGluAlternatives(*M);
  }
  std::unique_ptr<Module> SharedModule;
  std::optional<DecisionTable> Decisions;
  std::optional<ModuleHandout> Modules;
  if (Shared) {
    SharedModule = std::move(M);
    Decisions.emplace(*SharedModule);
  } else {
    Modules.emplace(std::move(M), N);
  }

  ThreadGroup Group(N);
  RankGate Gate;
  StartGate Start;
  std::vector<RankState> States(N);
  std::vector<std::unique_ptr<RankThread>> Threads;
  for (int R = 0; R < N; ++R) {
    Threads.push_back(std::make_unique<RankThread>([&, R] {
      if (!Start.waitToStart())
        return;
      llvm::set_thread_name("rank " + llvm::Twine(R));
      if (Trace)
        llvm::timeTraceProfilerInitialize(/*TimeTraceGranularity=*/0,
                                          "mtsched-opt");
      // A hung rank is released once every other rank has finished, so the
      // process ends in bounded time and joins every thread.
      bool Hung = false;
      RankHooks Hooks;
      Hooks.Hang = [&Hung, &Gate] {
        Hung = true;
        Gate.hang();
      };
      Hooks.Exit = [&Group, R] { Group.markDead(R); };
      Hooks.Late = [&Gate](std::chrono::milliseconds D) { Gate.sleepLate(D); };
      if (Shared)
        runSharedRank(R, Group.get(R), std::move(Hooks), Config, Heuristic,
                      *SharedModule, *Decisions, Diags, States[R]);
      else
        // Each rank owns a copy it mutates.
        runRank(R, Group.get(R), std::move(Hooks), Config, Heuristic,
                Modules->take(), Diags, States[R], /*HashFinalIR=*/N > 1,
                RankPasses);
      if (Trace)
        llvm::timeTraceProfilerFinishThread();
      if (!Hung)
        Gate.settle();
    }));
    if (int EC = Threads.back()->start()) {
      // Those already created leave without running their rank.
      Threads.pop_back();
      Start.open(/*Run=*/false);
      for (std::unique_ptr<RankThread> &T : Threads)
        T->join();
      toolError()
          << "cannot start the thread of rank " << R << " (of " << N
          << " thread ranks): " << std::strerror(EC)
          << "; run fewer ranks (--ranks), raise the address-space or thread "
             "limit (ulimit -v, ulimit -u), or use MPI ranks\n";
      if (Trace)
        llvm::timeTraceProfilerCleanup();
      return false;
    }
  }
  Start.open(/*Run=*/true);
  Gate.waitAllSettled(N);
  Gate.release();
  for (std::unique_ptr<RankThread> &T : Threads)
    T->join();

  bool OK = false;
  RankState *Reporter = pickReporter(States, OK);
  if (Reporter) {
    // What ran once counts as the reporter's.
    Reporter->PassTimesMs.insert(Reporter->PassTimesMs.begin(),
                                 OncePassTimesMs.begin(),
                                 OncePassTimesMs.end());
    if (Shared) {
      if (OK)
        OK = decideSharedModule(Config, *SharedModule, *Decisions, Diags,
                                *Reporter, RankPasses.drop_front());
      Reporter->M = std::move(SharedModule);
    }
  }
  OK = emitOutputs(Config, N, Reporter, OK, /*WriteTrace=*/true, OS,
                   std::move(FrontendPhasesMs), Shared ? 0 : Modules->copies());
  for (RankState &S : States)
    leaveToTheOS(Config, S);
  return OK;
}

//===----------------------------------------------------------------------===//
// MPI ranks
//===----------------------------------------------------------------------===//

/// The variables an MPI launcher sets for each process it starts: Open MPI,
/// then MPICH/Hydra and Slurm (PMI), then PMIx.
constexpr const char *LauncherSizeVars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                            "PMIX_SIZE"};
constexpr const char *LauncherRankVars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "PMIX_RANK"};

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

} // namespace

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
